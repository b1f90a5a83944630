"""How a file hit orders and shows its places: which place an agent reads first, and how many it is shown.

    python benchmarks/codesearch_place_order.py --work-dir WORK_DIR --package-trees TREES --package-index-root INDEX
    python benchmarks/codesearch_place_order.py --half test --work-dir WORK_DIR --package-trees TREES \\
        --package-index-root INDEX                                      # the chosen order, reported on the test halves
    python benchmarks/codesearch_place_order.py --length-weight 0 --dense-share 0.5 --repo chi --work-dir WORK_DIR

codesearch ranks files by their best place (codesearch.ranking.group_by_file); each hit then lists its places in a
`PlaceOrder`: headers last, the others by ((1 - dense_share) x score + dense_share x dense) x (1 + title_weight x
title_match) x (1 + length_weight x ln(lines)). `--length-weight W`, `--dense-share S` and `--title-weight T` (each
repeatable) give the values swept, every combination of them one order; 0, 0, 0 is the order by score alone. Two
place-level sets, each scored by its own headline metric:
- semble's benchmark with the project's span annotations (benchmarks/data/semble_spans), scored as
  benchmarks/codesearch_semble.py scores the place level: NDCG@10 (semble's metric) where a file hit counts only when
  its FIRST place overlaps a target's span ("place"; "place_rr" its MRR@10), the mean of its repositories;
- with `--package-trees`, the package place-level set (benchmarks/codesearch_package_places.py, its build and
  indexes): MRR@10 where a file hit counts only when its first place overlaps the documented function ("place"),
  over its queries.
For each set, `listed@N` is the same metric when any of a hit's first N places may count (how many places a hit
should show), `listed_places` any place it lists, and "file" the file-level score beside (the order of files is
the same under every order, so it must not move). A hit lists at most PLACES_PER_FILE places, so listed@N stops
growing there: the record says the run's (`places_per_file_when_run`), and a run that chooses it needs a larger one.
What showing N places costs an agent, per query over the 10 file hits: `output_lines@N`, the lines the text output
prints (a hit's line, its snippet counted as its most, SNIPPET_LINES, one line per further place), and
`code_lines@N`, the lines of the N places' code (what an agent reads if it opens each). `--precision int8|binary`
ranks with the loaded vectors quantized (the index is re-quantized, nothing embedded), to check that the order holds
at every precision; `--ranking dense|bm25` orders the places of those rankings (a file's rank is still its best
place's).

Tune on dev, report on test: `--half dev` (the default) sweeps the orders on the dev halves (semble's DEV_REPOS of
codesearch_semble.py, the package set's dev queries), and its record says what it was used to choose: the length
weight with the best mean over the sets of their first-place headline (CRITERION), and how many places a hit shows
(PLACES_RULE); a new order becomes the default only if it beats the old default by NEW_ORDER_MARGIN. `--half test`
scores one order only, the default (codesearch.ranking.PLACE_ORDER), on the test
halves: a report, used to choose nothing. Indexes are codesearch's own, under WORK_DIR/indexes/embedded/<repo> as
codesearch_semble.py keeps them, and under the package set's --index-root (a second run embeds nothing).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # run as `python benchmarks/codesearch_place_order.py` from anywhere
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.codesearch_package_places import indexed_trees, read_build  # noqa: E402
from benchmarks.codesearch_quality import is_answer  # noqa: E402
from benchmarks.codesearch_semble import (DEFAULT_DATA, DEFAULT_SPANS, DEV_REPOS, HALVES, TOP_K,  # noqa: E402
                                          Target, attach_places, benchmark_dir, load_benchmark, ndcg_at_k,
                                          repos_folder, repositories_without_targets, score_query,
                                          target_ranks)
from benchmarks.common import add_record_argument, commit_line, load_line, write_record  # noqa: E402
from codesearch.quantization import DEFAULT_PRECISION, PRECISIONS  # noqa: E402
from codesearch.ranking import (DEFAULT_RANKING, FILE_COHERENCE, FILE_DEPTH_FACTOR, PLACE_ORDER,  # noqa: E402
                                PLACES_PER_FILE, RANKINGS, Place, PlaceOrder, QuerySignals, RankingConfig,
                                group_by_file, rank_places)
from codesearch.request import SearchRequest  # noqa: E402
from codesearch.searcher import DEFAULT_MAX_SEQ_LENGTH, SNIPPET_LINES, FolderSearch, IndexOptions  # noqa: E402
from c2llm_data.tokens import code_tokens  # noqa: E402

# the dev sweep's values of each PlaceOrder field, every combination one order (5 and more of the length weight
# scored below 1 when it was swept alone: codesearch_place_order.json of an earlier commit)
SWEPT = {"length_weight": (0.0, 0.2, 0.5, 1.0), "dense_share": (0.0, 0.25, 0.5, 0.75, 1.0),
         "title_weight": (0.0, 1.0, 2.0)}
OPTIONS = {"length_weight": "--length-weight", "dense_share": "--dense-share", "title_weight": "--title-weight"}
# a new order must beat the old default's criterion by this much to replace it: the dev halves' queries are a
# sample, and a smaller gain is within what another sample of them could undo
NEW_ORDER_MARGIN = 0.01
# places a file hit may show before the answer counts; 1 is the first place alone ("place"). Past the
# PLACES_PER_FILE of the run, a hit lists no more: the record names it
SHOWN = tuple(range(1, 11))
CRITERION = "the mean over the sets scored of their first-place headline (semble NDCG@10, packages MRR@10)"
# Each further place a hit shows costs the reader a line per hit (and its code, if opened); one that lifts the mean
# of the sets' listed@N by less than this is not worth it
PLACE_GAIN = 0.01
PLACES_RULE = (f"the smallest N where showing place N + 1 lifts the mean over the sets of listed@N by less than "
               f"{PLACE_GAIN}")


def label(order: PlaceOrder) -> str:
    return f"length {order.length_weight:g} / dense {order.dense_share:g} / title {order.title_weight:g}"


def swept_orders(args: argparse.Namespace) -> list[PlaceOrder]:
    """Every combination of the values given (dev default: SWEPT; test: the default order's)."""
    values = {name: sorted(set(getattr(args, name) or (SWEPT[name] if args.half == "dev"
                                                          else (getattr(PLACE_ORDER, name),))))
              for name in SWEPT}
    return [PlaceOrder(**dict(zip(values, combination))) for combination in itertools.product(*values.values())]


def shown_costs(groups: list[list[Place]]) -> dict[str, float]:
    """What showing each file hit's first N places costs, for each N in SHOWN: the text output's lines and the
    places' lines of code (module docstring)."""
    costs = {}
    for n in SHOWN:
        costs[f"output_lines@{n}"] = float(sum(SNIPPET_LINES + min(n, len(group)) for group in groups))
        costs[f"code_lines@{n}"] = float(sum(place.end_line - place.line + 1 for group in groups
                                             for place in group[:n]))
    return costs


def listed_key(n: int) -> str:
    return "place" if n == 1 else f"listed@{n}"


def semble_scorer(query, prefix: str, present: Callable[[Target], bool]) -> Callable[[list[list[Place]]], dict]:
    """One annotated semble query's scores of a list of file hits (codesearch_semble.score_query, plus listed@N)."""

    def scores(groups: list[list[Place]]) -> dict[str, float]:
        found = [(prefix + group[0].path, [(place.line, place.end_line) for place in group]) for group in groups]
        result = score_query(query, found, present, "best-place")
        if query.places is not None:
            findable = sum(map(present, query.places))
            result |= {listed_key(n): ndcg_at_k(target_ranks([(path, spans[:n]) for path, spans in found],
                                                             query.places), findable) for n in SHOWN[1:]}
        return result | shown_costs(groups)

    return scores


def package_scorer(query: dict) -> Callable[[list[list[Place]]], dict]:
    """One package query's reciprocal ranks (within TOP_K) of a list of file hits: its first place, any of the first
    N places, any listed place, and the answer's file whatever its places."""

    def reciprocal_rank(groups: list[list[Place]], counted: Callable[[Place], bool], n: int | None) -> float:
        return next((1.0 / rank for rank, group in enumerate(groups[:TOP_K], start=1)
                     if any(map(counted, group[:n]))), 0.0)

    def answers(place: Place) -> bool:
        return is_answer([place.path, *place.also], "", (place.line, place.end_line), query)

    def in_file(place: Place) -> bool:
        return query["path"] in (place.path, *place.also)

    def scores(groups: list[list[Place]]) -> dict[str, float]:
        return ({listed_key(n): reciprocal_rank(groups, answers, n) for n in SHOWN}
                | {"listed_places": reciprocal_rank(groups, answers, None),
                   "file": reciprocal_rank(groups, in_file, None)} | shown_costs(groups))

    return scores


def semble_queries(args: argparse.Namespace, names: list[str],
                   config: RankingConfig) -> Iterator[tuple[str, list[Place], Callable]]:
    """(repository, its ranked places, the query's scorer) for each query of semble's benchmark in `names`; `config`'s
    place order says what the places carry for ordering (ranking.fill_order_signals)."""
    specs, queries = load_benchmark(args.data)
    queries = attach_places(args.spans, specs, queries)
    repos = repos_folder(args.data, args.work_dir)
    for name in names:
        folder, prefix = benchmark_dir(repos, specs[name])
        search = FolderSearch(folder, IndexOptions(quiet=True, precision=args.precision,
                                                   index_dir=args.work_dir / "indexes" / "embedded" / name))
        search.refresh()
        index = search.index.load()
        retriever = search.index.bm25(index.generation)
        pieces = list(zip((prefix + path for path in index.paths), index.lines, index.end_lines))

        def present(target: Target) -> bool:
            return any(target.matches(*piece) for piece in pieces)

        for query in (q for q in queries if q.repo == name):
            tokens = code_tokens(query.text)
            request = SearchRequest(query=query.text, top_k=TOP_K, ranking=args.ranking)
            signals = QuerySignals(search.query_vector(query.text),
                                   retriever.get_scores(tokens) if tokens else np.zeros(len(pieces)))
            places = rank_places(request, index, signals, TOP_K * FILE_DEPTH_FACTOR, config)
            yield name, places, semble_scorer(query, prefix, present)
        search.close()


def package_queries(args: argparse.Namespace, queries: list[dict],
                    config: RankingConfig) -> Iterator[tuple[str, list[Place], Callable]]:
    """(language, ranked places, the query's scorer) for each package query, as codesearch ranks by default (`config`:
    as semble_queries)."""
    for tree in indexed_trees(queries, args.package_trees, args.package_index_root, args.model,
                              DEFAULT_MAX_SEQ_LENGTH, "auto", args.precision):
        for query, vector in zip(tree.queries, tree.vectors):
            tokens = code_tokens(query["query"])
            bm25_scores = tree.retriever.get_scores(tokens) if tokens else np.zeros(len(tree.loaded.ids))
            request = SearchRequest(query=query["query"], top_k=TOP_K, ranking=args.ranking)
            places = rank_places(request, tree.loaded, QuerySignals(vector, bm25_scores), TOP_K * FILE_DEPTH_FACTOR,
                                 config)
            yield query["language"], places, package_scorer(query)
        print(f"{tree.name}: {len(tree.queries)} queries scored", file=sys.stderr)


def mean_of(results: list[dict], metric: str) -> float | None:
    values = [result[metric] for result in results if metric in result]
    return statistics.fmean(values) if values else None


def summarise(per_unit: dict[str, list[dict]], by_unit: bool) -> dict[str, float]:
    """Each metric's mean: of the units' means (semble: its repositories, as codesearch_semble.py averages), or
    over every query (the package set, as codesearch_package_places.py averages)."""
    metrics = dict.fromkeys(metric for results in per_unit.values() for result in results for metric in result)
    if by_unit:
        return {metric: statistics.fmean(value for results in per_unit.values()
                                         if (value := mean_of(results, metric)) is not None) for metric in metrics}
    every = [result for results in per_unit.values() for result in results]
    return {metric: mean_of(every, metric) for metric in metrics}


def places_shown(summary: dict[str, dict[str, float]]) -> tuple[dict, int]:
    """For one order's per-set summary: per N in SHOWN, each set's listed@N and costs and the mean of listed@N over
    the sets; and the N that PLACES_RULE picks."""
    table = {}
    for n in SHOWN:
        row = {name: {"listed": figures[listed_key(n)], "output_lines": figures[f"output_lines@{n}"],
                      "code_lines": figures[f"code_lines@{n}"]} for name, figures in summary.items()}
        table[n] = row | {"mean_listed": statistics.fmean(row[name]["listed"] for name in summary)}
    chosen = next((n for n, following in zip(SHOWN, SHOWN[1:]) if following == n + 1
                   and table[following]["mean_listed"] - table[n]["mean_listed"] < PLACE_GAIN), SHOWN[-1])
    return table, chosen


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--half", choices=("dev", "test"), default="dev",
                        help="dev: sweep the orders, the record says what it chose; test: report the default order "
                             "only (default: dev)")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="semble's benchmark folder")
    parser.add_argument("--spans", type=Path, default=DEFAULT_SPANS, help="the span annotations' folder")
    parser.add_argument("--work-dir", type=Path, required=True,
                        help="unpacked repositories and indexes, as codesearch_semble.py's --work-dir")
    parser.add_argument("--package-trees", type=Path, metavar="DIR",
                        help="also score the package place-level set: its build (codesearch_package_places.py "
                             "--build DIR; default: semble's set alone)")
    parser.add_argument("--package-index-root", type=Path, metavar="DIR",
                        help="with --package-trees: the set's per-tree indexes (codesearch_package_places.py "
                             "--index-root)")
    parser.add_argument("--model", default="default",
                        help="with --package-trees: 'default' or a sentence-transformers folder (as the set's)")
    for name, option in OPTIONS.items():
        parser.add_argument(option, action="append", type=float, metavar="V", dest=name,
                            help=f"a value of the place order's {name} to score (repeatable; dev default: "
                                 f"{' '.join(f'{value:g}' for value in SWEPT[name])}; test: the default's, "
                                 f"{getattr(PLACE_ORDER, name):g}, only)")
    parser.add_argument("--ranking", choices=RANKINGS, default=DEFAULT_RANKING,
                        help=f"codesearch --ranking (default: {DEFAULT_RANKING})")
    parser.add_argument("--precision", choices=PRECISIONS, default=DEFAULT_PRECISION,
                        help="codesearch --precision of the loaded vectors (a change re-quantizes, embeds nothing)")
    parser.add_argument("--repo", action="append", choices=sorted(DEV_REPOS),
                        help="only these dev repositories of semble's set (default: the whole half)")
    add_record_argument(parser, "codesearch_place_order")
    args = parser.parse_args(argv)
    if args.length_weight and any(not weight >= 0 for weight in args.length_weight):  # also refuses nan
        parser.error("--length-weight must be 0 or more (0: places by score alone)")
    if args.dense_share and any(not 0 <= share <= 1 for share in args.dense_share):
        parser.error("--dense-share must be from 0 (the fused score alone) to 1 (the dense score alone)")
    if args.title_weight and any(not weight >= 0 for weight in args.title_weight):
        parser.error("--title-weight must be 0 or more (0: titles ignored)")
    for name, option in OPTIONS.items():
        if args.half == "test" and set(getattr(args, name) or ()) - {getattr(PLACE_ORDER, name)}:
            parser.error(f"--half test reports the default order only ({label(PLACE_ORDER)}, "
                         f"codesearch.ranking.PlaceOrder): sweep other values of {option} with --half dev")
    if args.half == "test" and args.repo:
        parser.error("--repo picks dev repositories to sweep on; the test half is reported whole: drop --repo")
    if (args.package_trees is None) != (args.package_index_root is None):
        parser.error("give --package-trees and --package-index-root together (the set's build and its indexes)")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_arguments(argv)
    package_list = None
    if args.package_trees is not None:  # a missing or stale build is refused before any work
        package_list = [query for query in read_build(args.package_trees) if query["half"] == args.half]
    orders = swept_orders(args)
    # the places carry what the most demanding order weighs; each order reads what it weighs of it
    config = RankingConfig(place_order=PlaceOrder(dense_share=max(order.dense_share for order in orders),
                                                  title_weight=max(order.title_weight for order in orders)))
    coherence = 0.0 if args.ranking == "dense" else FILE_COHERENCE  # as codesearch groups files (searcher._hits)
    loads, commit = [load_line("start")], commit_line()
    specs, semble_list = load_benchmark(args.data)
    names = sorted(args.repo or HALVES[args.half] & set(specs))
    # as codesearch_semble.py: a repository none of whose targets is in the data's copy scores 0 whatever the order
    left_out = repositories_without_targets(repos_folder(args.data, args.work_dir),
                                            [query for query in semble_list if query.repo in names])
    names = [name for name in names if name not in left_out]
    streams = {"semble": semble_queries(args, names, config)}
    if package_list is not None:
        streams["packages"] = package_queries(args, package_list, config)
    scores = {name: {label(order): defaultdict(list) for order in orders} for name in streams}  # set, order, unit
    for set_name, stream in streams.items():
        for unit, places, scorer in stream:
            for order in orders:
                scores[set_name][label(order)][unit].append(scorer(group_by_file(places, TOP_K, coherence, order)))
    loads.append(load_line("end"))
    summary = {key: {set_name: summarise(scores[set_name][key], by_unit=set_name == "semble") for set_name in streams}
               for key in map(label, orders)}
    criterion = {key: statistics.fmean(figures["place"] for figures in per_set.values())
                 for key, per_set in summary.items()}
    best = max(criterion, key=criterion.get)  # orders run by growing values: a tie keeps the smaller
    default = label(PLACE_ORDER)
    replaces = default in criterion and criterion[best] - criterion[default] >= NEW_ORDER_MARGIN
    shown, places_chosen = places_shown(summary[best])  # how many places the chosen order shows
    print_tables(summary, criterion, shown)
    chooses = args.half == "dev" and len(orders) > 1 and args.precision == DEFAULT_PRECISION \
        and args.ranking == DEFAULT_RANKING
    record = {"half": args.half, "ranking": args.ranking, "precision": args.precision,
              "used_to_choose": ("codesearch.ranking.PlaceOrder's fields (by the criterion, a new order by at "
                                 "least new_order_margin over the default when run) and PLACES_PER_FILE (by the "
                                 "places rule)") if chooses else None,
              "criterion": CRITERION, "new_order_margin": NEW_ORDER_MARGIN,
              "beats_default_by_margin": replaces,
              "places_rule": PLACES_RULE, "places_per_file_when_run": PLACES_PER_FILE,
              "sets": {"semble": {"repos": names, "metric": "NDCG@10, the mean of its repositories",
                                  "left_out": {name: f"none of its {targets} targets is a file of the copy"
                                               for name, targets in left_out.items()}}}
              | ({"packages": {"queries": sum(map(len, scores["packages"][best].values())),
                               "metric": "MRR@10 over its queries"}} if "packages" in streams else {}),
              "default": default, "best_by_criterion": best, "criterion_by_order": criterion,
              "order_fields": {label(order): dataclasses.asdict(order) for order in orders},
              "orders": summary, "places_shown": {"order": best, "by_places": shown},
              "places_by_rule": places_chosen,
              # per repository or language: the best order's and the default's (every order's would make the
              # record megabytes)
              "per_unit": {set_name: {key: {unit: {metric: mean_of(results, metric)
                                                   for metric in dict.fromkeys(m for r in results for m in r)}
                                            for unit, results in scores[set_name][key].items()}
                                      for key in dict.fromkeys((best, default)) if key in scores[set_name]}
                           for set_name in streams}}
    verdict = "beats" if replaces else "does not beat"
    margin = f" ({verdict} the default by {NEW_ORDER_MARGIN})" if len(orders) > 1 else ""
    print(f"best by the criterion: {best}{margin}; places shown by the rule: {places_chosen}", file=sys.stderr)
    argv = sys.argv if argv is None else [__file__, *argv]
    print(f"record: {write_record(args.record_name, record, loads, args.record_dir, argv, commit=commit)}",
          file=sys.stderr)


def print_tables(summary: dict, criterion: dict[str, float], shown: dict) -> None:
    sets = list(next(iter(summary.values())))
    columns = [(set_name, metric) for set_name in sets for metric in ("place", "listed@4", "listed_places", "file")]
    print(f"\n| order | criterion | {' | '.join(f'{s} {m}' for s, m in columns)} |\n"
          f"| --- | ---: |{' ---: |' * len(columns)}")
    for key, per_set in summary.items():
        default = " (default)" if key == label(PLACE_ORDER) else ""
        print(f"| {key}{default} | {criterion[key]:.3f} | "
              + " | ".join(f"{per_set[s][m]:.3f}" for s, m in columns) + " |")
    headers = " | ".join(f"{s} listed | {s} output lines | {s} code lines" for s in sets)
    print(f"\n| places shown | mean listed | {headers} |\n| ---: | ---: |{' ---: | ---: | ---: |' * len(sets)}")
    for n, row in shown.items():
        print(f"| {n} | {row['mean_listed']:.3f} | " + " | ".join(
            f"{row[s]['listed']:.3f} | {row[s]['output_lines']:.1f} | {row[s]['code_lines']:.0f}" for s in sets) + " |")


# ---- Tables of the docs: `python -m benchmarks.render` writes those TABLES names from the records ----
from benchmarks.tables import markdown_table, number  # noqa: E402

SWEEP_ROWS = 10  # the best orders a sweep's table shows (of the SWEPT combinations)


def table_place_order_sweep(record: dict) -> str:
    """Per place order on the dev halves, best first: the criterion (the mean of the two first-place headlines),
    each set's first-place figure and file level; the chosen order in bold. Shown: the SWEEP_ROWS best, and every
    order by score and length alone (dense share and title weight 0, the family the product's order came from)."""
    metrics = record["metrics"]
    criterion = metrics["criterion_by_order"]
    best_first = sorted(criterion, key=criterion.get, reverse=True)
    shown = [key for rank, key in enumerate(best_first) if rank < SWEEP_ROWS or not (
        metrics["order_fields"][key]["dense_share"] or metrics["order_fields"][key]["title_weight"])]
    rows = []
    for key in shown:
        fields, figures = metrics["order_fields"][key], metrics["orders"][key]
        note = " (default when run)" if key == metrics["default"] else ""
        cells = [f"{fields['length_weight']:g}", f"{fields['dense_share']:g}", f"{fields['title_weight']:g}{note}",
                 number(criterion[key]), number(figures["semble"]["place"]), number(figures["semble"]["place_rr"]),
                 number(figures["packages"]["place"]), number(figures["semble"]["file"]),
                 number(figures["packages"]["file"])]
        rows.append([f"**{cell}**" for cell in cells] if key == metrics["best_by_criterion"] else cells)
    return markdown_table(["length weight", "dense share", "title weight", "mean of the first-place headlines",
                           "semble: first place NDCG@10", "semble: first place MRR@10", "packages: first place MRR@10",
                           "semble: file NDCG@10", "packages: file MRR@10"], rows, "lllrrrrrr")


def table_places_shown(record: dict) -> str:
    """Per number of places shown under a file hit (dev halves, the chosen order): how often the answer is among
    them, and what an agent reads for it (the text output's lines, the places' lines of code, per query)."""
    metrics = record["metrics"]
    # a run lists at most the product's places per file then: rows past it would repeat its last
    seen = metrics.get("places_per_file_when_run", len(metrics["places_shown"]["by_places"]))
    by_places = {n: row for n, row in metrics["places_shown"]["by_places"].items() if int(n) <= seen}
    rows = [[n, number(row["mean_listed"]), number(row["semble"]["listed"]), number(row["packages"]["listed"]),
             f"{row['semble']['output_lines']:.0f} / {row['packages']['output_lines']:.0f}",
             f"{row['semble']['code_lines']:,.0f} / {row['packages']['code_lines']:,.0f}"]
            for n, row in by_places.items()]
    return markdown_table(["places shown", "mean", "semble: answer among them (NDCG@10)",
                           "packages: answer among them (MRR@10)", "output lines (semble / packages)",
                           "lines of code in them (semble / packages)"], rows, "lrrrrr")


def table_place_order_test(float32: dict, int8: dict, binary: dict) -> str:
    """The test halves with the chosen order, at each vector precision: first place, any place listed, file level."""
    rows = []
    for precision, record in (("float32", float32), ("int8", int8), ("binary", binary)):
        for name, figures in next(iter(record["metrics"]["orders"].values())).items():
            metric = "NDCG@10" if name == "semble" else "MRR@10"
            rows.append([precision, f"{name} ({metric})", number(figures["place"]), number(figures["listed_places"]),
                         number(figures["file"])])
    return markdown_table(["precision", "set", "first place", "any place listed", "file level"], rows, "llrrr")


# table name -> (the records it reads, in the order the function takes them; the function)
TABLES = {
    "codesearch_place_order": (("codesearch_place_order",), table_place_order_sweep),
    "codesearch_places_shown": (("codesearch_place_order",), table_places_shown),
    "codesearch_place_order_test": (("codesearch_place_order_test", "codesearch_place_order_test_int8",
                                     "codesearch_place_order_test_binary"), table_place_order_test),
}


if __name__ == "__main__":
    main()
