"""Ranking quality of codesearch on code this project did not write: dense vs BM25 vs hybrid, tests kept or demoted.

    python benchmarks/codesearch_quality.py [--queries benchmarks/data/codesearch_queries.jsonl] [--model default]
                                            [--index-root DIR] [--packages rich click ...] [--max-seq-length 128]
                                            [--backend auto] [--hits first-place|files|places|pieces]
                                            [--non-code keep demote]
                                            [--source-root DIR] [--priors on|off] [--dense-weight W ...]
    python benchmarks/codesearch_quality.py --queries benchmarks/data/codesearch_heldout.json
    python benchmarks/codesearch_quality.py --half dev --used-to-choose "the file-name boost"  # tune on dev only

Each line of the query file names an installed package, a query written by reading that package's code, and the
one function/class that answers it (`path` relative to the package folder, and `name` as codesearch titles it:
`func`, `Class`, `Class.method`; or, for any language, `line`: the definition's first line). Each package folder
is indexed once with codesearch's own index (kept under --index-root, so a second run embeds nothing), then every
query is ranked by every configuration. A hit is a piece in the expected file whose title names the expected
definition (windows of a long definition all count), or whose lines cover the expected `line`.
`--hits first-place` (the default, the headline) counts one hit per file as codesearch prints them, the answer found
at its file's rank only when the file's FIRST place is the answer (what an agent reads first); `--hits files` when it
is any of the places the file hit lists (codesearch.ranking.group_by_file); `--hits places` one hit per place
(overlapping windows of one file and byte-identical files merged, codesearch.ranking.rank_places), as codesearch
printed before; `--hits pieces` ranks the pieces themselves.
`--source-root DIR` searches each package's whole source tree instead of its installed folder: DIR holds unpacked
sdists (`pip download --no-binary :all: --no-deps click==8.5.1`, then `tar xzf`), tests, docs and examples
included, and the answers are looked up under `src/<package>/` or `<package>/` there. `--non-code` compares
ranking documentation, examples and generated files as source (`keep`) or below it (`demote`). `--priors off` ranks
without the code priors of BM25 and hybrid (codesearch.priors), to measure what they are worth. `--dense-weight W`
(repeatable) adds hybrid with dense's share of the fused score W (tests and non-code demoted): the fusion sweep.
A `.json` query file is a held-out set (`benchmarks/codesearch_heldout.py`: source trees pinned to registry
packages, queries answered by a line span, `line`-`end_line`, that a hit must overlap); its trees are searched under
--source-root (default: where `python -m benchmarks.codesearch_heldout --build` puts them), paths from each tree's
root. `file MRR@10` ranks the first hit in the answer's file, whatever its lines (the file level, beside the
headline). NDCG@10 is binary-gain over the one answer: 1/log2(rank + 1). The record keeps each query's
ranks, and the rank of its answer's best piece among all pieces by dense and by BM25 scores alone.
The `repeated` column counts the queries whose top 10 holds two hits of one place (overlapping lines of one
definition in one file's content).

Each set has a fixed dev/test split by package (QUERY_SET_HALVES; the held-out trees are test only, never tuned
on): `--half dev|test|both` (default both) runs those packages; a choice (a ranking constant, a data mix) is made on
dev and reported on test, and `--used-to-choose TEXT` writes in the record what a run chose.

Prints MRR@10, NDCG@10, hit@1, hit@10 and file MRR@10 per configuration: the test half, then the dev half, then all
queries, then the packages that ship tests beside their code (where demoting tests can matter), then per package.
"""

import argparse
import importlib.util
import json
import sys
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # run as `python benchmarks/codesearch_quality.py` from anywhere
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.codesearch_heldout import DEFAULT_TREES, HeldoutSet, load_set, tree_root  # noqa: E402
from benchmarks.common import (add_dense_weight_argument, add_record_argument, add_selection_arguments,  # noqa: E402
                               commit_line, dense_weight_labels, load_line, selection_fields, write_record)
from codesearch.__main__ import DEFAULT_MAX_SEQ_LENGTH  # noqa: E402
from codesearch.encoders import BACKENDS, open_embedder  # noqa: E402
from codesearch.first_stage import FirstStage  # noqa: E402
from codesearch.files import select_files  # noqa: E402
from codesearch.index import SearchIndex  # noqa: E402
from c2llm_plumbing.models import resolve_model  # noqa: E402
from codesearch.models import index_settings  # noqa: E402
from codesearch.priors import PRIOR_RULES  # noqa: E402
from codesearch.ranking import (DEFAULT_RANKING_CONFIG, RANKINGS, QuerySignals, RankingConfig,  # noqa: E402
                                is_test_path, merge_places, rank, rank_places, rank_rows)
from codesearch.request import SearchRequest  # noqa: E402
from c2llm_data.tokens import code_tokens  # noqa: E402

K = 10
HIT_KINDS = ("first-place", "files", "places", "pieces")
FILE_HITS = ("first-place", "files")  # one hit per file, listing its places
DATA = REPO_ROOT / "benchmarks" / "data"
# The fixed dev/test split of each query set, by package, with codesearch_semble.DEV_REPOS's rule: per language, the
# packages sorted by name, the first floor(n/2) dev and the rest test; a language's only package is test only.
# Written out so that a package added to a set never moves an old one (a new one is in neither half until written
# here). The JavaScript/Go set has one package per language: test only. The held-out trees (codesearch_heldout.json)
# are test only by design, never tuned on (benchmarks/codesearch_heldout.py): set_halves gives them all to test.
QUERY_SET_HALVES = {
    DATA / "codesearch_queries.jsonl": {"test": frozenset({"jinja2", "requests", "rich"}),
                                        "dev": frozenset({"click", "dill"})},
    DATA / "codesearch_queries_js_go.jsonl": {"test": frozenset({"express", "mux"}), "dev": frozenset()},
}


def package_folder(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"package {name!r} is not installed; install it or drop its queries")
    return Path(list(spec.submodule_search_locations)[0])


def source_tree(source_root: Path, package: str) -> tuple[Path, str]:
    """The unpacked sdist of `package` under source_root, and the folder of the package inside it ("src/click/")."""
    trees = sorted(source_root.glob(f"{package}-*/"))
    if len(trees) != 1:
        raise SystemExit(f"expected one unpacked sdist {source_root}/{package}-VERSION, found {len(trees)}; unpack "
                         f"`pip download --no-binary :all: --no-deps {package}` there")
    for prefix in (f"src/{package}/", f"{package}/"):
        if (trees[0] / prefix).is_dir():
            return trees[0], prefix
    return trees[0], ""  # the tree is the package (an npm tarball, a Go module)


def is_answer(paths: list[str], title: str, lines: tuple[int, int], expected: dict, prefix: str = "") -> bool:
    """`paths`: the hit's path and the paths of files identical to it; `lines`: its first and last line; `prefix`:
    where the package sits. The expected definition is named (`name`, as codesearch titles Python) or, for any
    language, given by its first line (`line`: the hit must cover it) or its span (`line`-`end_line`: the hit must
    overlap it)."""
    if prefix + expected["path"] not in paths:
        return False
    if "end_line" in expected:
        return lines[0] <= expected["end_line"] and expected["line"] <= lines[1]
    if "line" in expected:
        return lines[0] <= expected["line"] <= lines[1]
    return title.split()[-1] == expected["name"]


def set_halves(path: Path, heldout: HeldoutSet | None) -> dict[str, frozenset[str]]:
    """{"test": packages, "dev": packages} of the query set at `path` (the test half first: it is the headline); a
    held-out set's trees are all test; an unknown file has no split (empty halves)."""
    if heldout:
        return {"test": frozenset(heldout.trees), "dev": frozenset()}
    return QUERY_SET_HALVES.get(path.resolve(), {"test": frozenset(), "dev": frozenset()})


def read_queries(path: Path) -> tuple[list[dict], HeldoutSet | None]:
    """The queries of a JSONL file (one per line), or of a held-out set (`.json`, checked by its schema, returned
    too: it says where each package's tree is)."""
    if path.suffix == ".json":
        heldout = load_set(path)
        return [query.model_dump(exclude={"kind"}) for query in heldout.queries], heldout
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()], None


def ranked_hits(request: SearchRequest, loaded, signals: QuerySignals, hits: str,
                config: RankingConfig = DEFAULT_RANKING_CONFIG):
    """[[(row, paths, (line, end_line)), ...]] best first, one list per hit, the request's top_k of them: files and
    first-place (codesearch's output, codesearch.ranking.rank: each file's places, best first), places (one hit per
    place), or the raw pieces (no priors or places, codesearch.ranking.rank_rows)."""
    if hits in FILE_HITS + ("places",):
        groups = rank(request, loaded, signals, config) if hits in FILE_HITS else [
            [place] for place in rank_places(request, loaded, signals, request.top_k, config)]
        return [[(place.row, [place.path, *place.also], (place.line, place.end_line)) for place in group]
                for group in groups]
    rows = rank_rows(request, loaded, signals, request.top_k, config)
    return [[(row, [loaded.paths[row]], (loaded.lines[row], loaded.end_lines[row]))] for row, _ in rows]


def counted_places(hit: list, hits: str) -> list:
    """The places of one hit that may be the answer: only its first under `first-place`."""
    return hit[:1] if hits == "first-place" else hit


def ndcg_at_k(ranks: list[int | None]) -> float:
    """Mean binary-gain NDCG@K of one answer per query: 1/log2(rank + 1) within the top K, else 0."""
    return sum(1 / np.log2(rank + 1) for rank in ranks if rank) / len(ranks)


def mean_reciprocal_rank(ranks: list[int | None]) -> float:
    """MRR@K of ranks within the top K (None: not there)."""
    return sum(1 / rank for rank in ranks if rank) / len(ranks)


def raw_rank(scores: np.ndarray, answer_rows: list[int]) -> int:
    """The rank among all pieces, by `scores` alone, of the best-scored answer piece (1 = first)."""
    return int((scores > scores[answer_rows].max()).sum()) + 1


def holds_a_repeated_place(rows: list[int], loaded) -> bool:
    """Two of these rows are one place: overlapping lines of one definition (merge_places would join them)."""
    ranked = [(row, 0.0) for row in rows]
    places = merge_places(ranked, loaded.paths, loaded.lines, loaded.end_lines, loaded.titles, loaded.file_keys)
    return len(places) < len(rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=Path, default=REPO_ROOT / "benchmarks/data/codesearch_queries.jsonl",
                        help="JSONL query set (default: benchmarks/data/codesearch_queries.jsonl)")
    parser.add_argument("--model", default="default", help="'default' or a sentence-transformers folder")
    parser.add_argument("--index-root", type=Path, default=Path("/tmp/codesearch-quality-index"),
                        help="where the per-package indexes are kept (default: /tmp/codesearch-quality-index)")
    parser.add_argument("--packages", nargs="*", help="only these packages (default: every package in the file)")
    parser.add_argument("--max-seq-length", type=int, default=DEFAULT_MAX_SEQ_LENGTH,
                        help=f"as codesearch's option (default: {DEFAULT_MAX_SEQ_LENGTH})")
    parser.add_argument("--backend", choices=BACKENDS, default="auto", help="as codesearch's option (default: auto)")
    parser.add_argument("--hits", choices=HIT_KINDS, default="first-place",
                        help="first-place: one hit per file as codesearch prints them, counted only when its first "
                             "place is the answer (default); files: ... when any place it lists is; places: one hit "
                             "per place; pieces: raw pieces")
    parser.add_argument("--non-code", nargs="+", choices=("keep", "demote"), default=["keep", "demote"],
                        help="rank docs, examples and generated files as source (keep), below it (demote), or both")
    parser.add_argument("--priors", choices=("on", "off"), default="on",
                        help="the code priors of BM25 and hybrid rankings (codesearch.priors; on: as codesearch ranks)")
    parser.add_argument("--source-root", type=Path, default=None,
                        help="folder of unpacked sdists: search each package's whole source tree (default: the "
                             "installed package folders)")
    parser.add_argument("--first-stage", action="append", type=int, metavar="N",
                        help="also rank hybrid as `--first-answer fast` answers before the index is built: BM25 "
                             "over every piece, the model over BM25's best N (repeatable)")
    add_dense_weight_argument(parser)
    add_selection_arguments(parser)
    add_record_argument(parser, "codesearch_quality")
    args = parser.parse_args(argv)
    loads, commit = [load_line("start")], commit_line()  # the code that runs, however long the run takes

    queries, heldout = read_queries(args.queries)
    if heldout:
        args.source_root = args.source_root or DEFAULT_TREES
    if heldout and (args.half == "dev" or args.used_to_choose):
        raise SystemExit(f"{args.queries} is a held-out set: test only, never tuned on; run it with --half test or "
                         "both and without --used-to-choose, and tune on the dev half of another set")
    halves = {half: packages for half, packages in set_halves(args.queries, heldout).items()
              if args.half in (half, "both")}
    if args.half != "both" and not halves[args.half]:
        raise SystemExit(f"{args.queries} has no {args.half} half (QUERY_SET_HALVES in "
                         "benchmarks/codesearch_quality.py): pass --half both, or another set")
    unsplit = sorted({q["package"] for q in queries} - set().union(*set_halves(args.queries, heldout).values()))
    if unsplit:
        print(f"{', '.join(unsplit)}: in neither half of {args.queries.name}'s fixed split (QUERY_SET_HALVES), so "
              "only in the all-packages figures" + ("" if args.half == "both" else ", and left out of this run"),
              file=sys.stderr)
    if args.half != "both":
        queries = [q for q in queries if q["package"] in halves[args.half]]
    if args.packages:
        queries = [q for q in queries if q["package"] in args.packages]
    if not queries:
        raise SystemExit(f"no query of {args.queries} is left for --half {args.half} and --packages "
                         f"{' '.join(args.packages or [])}: name packages of that half")
    by_package = defaultdict(list)
    for query in queries:
        by_package[query["package"]].append(query)

    folder = resolve_model(args.model)
    settings = index_settings(folder, args.max_seq_length)
    started = time.monotonic()
    embedder = open_embedder(folder, settings["model_fingerprint"], args.backend, args.max_seq_length, batch_size=32)
    print(f"model {folder} loaded ({embedder.backend}) in {time.monotonic() - started:.1f} s", file=sys.stderr)

    configs = [(ranking, tests, non_code) for ranking in RANKINGS for tests in ("keep", "demote")
               for non_code in args.non_code]
    first = {f"hybrid, first answer (BM25's best {n})": n for n in args.first_stage or []}  # label -> candidates
    configs += [(label, "demote", non_code) for label in first for non_code in args.non_code]
    weighted = dense_weight_labels(args.dense_weight)  # label -> hybrid's dense share
    configs += [(label, "demote", non_code) for label in weighted for non_code in args.non_code]
    base_config = RankingConfig(priors=PRIOR_RULES if args.priors == "on" else frozenset())
    ranks = defaultdict(list)  # (config, package) -> rank of the answer (None: not in the top K)
    file_ranks = defaultdict(list)  # (config, package) -> rank of the first hit in the answer's file
    repeated = defaultdict(int)  # (config, package) -> queries whose top K holds one place twice
    raw_ranks = defaultdict(list)  # package -> {"dense": rank, "bm25": rank} of the answer's best piece among all
    corpus_sizes, with_tests = {}, set()
    for package, package_queries in by_package.items():
        if heldout:  # a held-out tree's paths are from its root
            root, prefix = tree_root(args.source_root, heldout, package), ""
        else:
            root, prefix = source_tree(args.source_root, package) if args.source_root else (package_folder(package), "")
        selection = select_files(root)
        index = SearchIndex(args.index_root / (f"{package}-source" if args.source_root else package), settings)
        report = index.update(root, selection.files, embedder.encode_document)
        loaded = index.load()
        corpus_sizes[package] = len(loaded.ids)
        if any(is_test_path(path) for path in loaded.paths):
            with_tests.add(package)
        print(f"{package}: {len(loaded.ids)} pieces ({report.embedded_pieces} embedded now)", file=sys.stderr)
        answers = [[row for row, (path, title, line, end_line) in enumerate(zip(
                        loaded.paths, loaded.titles, loaded.lines, loaded.end_lines))
                    if is_answer([path], title, (line, end_line), expected, prefix)] for expected in package_queries]
        for expected, answer_rows in zip(package_queries, answers):
            if not answer_rows:
                raise SystemExit(f"{package}: no piece is {prefix}{expected['path']} "
                                 f"{expected.get('name', expected.get('line'))}; fix the query file")
        retriever = index.bm25(loaded.generation)
        # the first stage of a fresh folder, with the vectors the model gives its pieces (nothing embedded again)
        stage = FirstStage.from_rows(index.stored_pieces(), loaded.file_keys, path_vectors=index.path_vectors())
        query_vectors = embedder.encode_query([q["query"] for q in package_queries])
        for expected, query_vector, answer_rows in zip(package_queries, query_vectors, answers):
            tokens = code_tokens(expected["query"])
            bm25_scores = retriever.get_scores(tokens) if tokens else np.zeros(len(loaded.ids))
            raw_ranks[package].append({name: raw_rank(scores, answer_rows) for name, scores in (
                ("dense", loaded.vectors.scores(query_vector, len(loaded.ids))), ("bm25", bm25_scores))})
            for config in configs:
                label, tests, non_code = config
                ranking = "hybrid" if label in first or label in weighted else label
                request = SearchRequest(query=expected["query"], top_k=K, ranking=ranking, tests=tests,
                                        non_code=non_code)
                ranking_config = replace(base_config, dense_weight=weighted.get(label, base_config.dense_weight))
                ranked, signals = loaded, QuerySignals(query_vector, bm25_scores)
                if label in first:  # the first answer: the model over BM25's best rows only (hybrid)
                    rows = stage.candidates(request, bm25_scores, first[label])
                    ranked = stage.view(rows, embedder.encode_document)
                    signals = QuerySignals(query_vector, bm25_scores[rows])
                hits = ranked_hits(request, ranked, signals, args.hits, ranking_config)
                found = next((number for number, hit in enumerate(hits, start=1)
                              if any(is_answer(paths, ranked.titles[row], lines, expected, prefix)
                                     for row, paths, lines in counted_places(hit, args.hits))), None)
                ranks[config, package].append(found)
                file_ranks[config, package].append(next(
                    (number for number, hit in enumerate(hits, start=1)
                     if any(prefix + expected["path"] in paths for _, paths, _ in hit)), None))
                repeated[config, package] += holds_a_repeated_place([row for hit in hits for row, _, _ in hit], ranked)
        index.close()

    figures, half_figures = {}, {}

    def table(title: str, packages: list[str], into: dict | None = None) -> None:
        count = sum(len(by_package[p]) for p in packages)
        print(f"\n{title}: {count} queries, {sum(corpus_sizes[p] for p in packages)} pieces\n")
        print(f"| ranking | tests | non-code | MRR@10 ({args.hits}) | NDCG@10 | hit@1 | hit@10 | file MRR@10 "
              "| repeated |")
        print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for config in configs:
            found = [r for p in packages for r in ranks[config, p]]
            mrr, file_mrr = mean_reciprocal_rank(found), mean_reciprocal_rank(
                [r for p in packages for r in file_ranks[config, p]])
            hit1 = sum(1 for r in found if r == 1) / len(found)
            hit10 = sum(1 for r in found if r) / len(found)
            repeats = sum(repeated[config, p] for p in packages)
            (figures if into is None else into).setdefault(title, {
                "queries": count, "pieces": sum(corpus_sizes[p] for p in packages)})[
                " / ".join(config)] = {"mrr@10": mrr, "ndcg@10": ndcg_at_k(found), "hit@1": hit1, "hit@10": hit10,
                                       "file_mrr@10": file_mrr, "repeated": repeats}
            print(f"| {' | '.join(config)} | {mrr:.3f} | {ndcg_at_k(found):.3f} | {hit1:.3f} | {hit10:.3f} "
                  f"| {file_mrr:.3f} | {repeats} |")

    covered = {half: sorted(set(by_package) & packages) for half, packages in halves.items()}
    covered = {half: packages for half, packages in covered.items() if packages}
    for half, packages in covered.items():  # the test half first: the headline
        table(f"{half.capitalize()} half ({', '.join(packages)})", packages, half_figures.setdefault(half, {}))
    all_title = f"All packages ({', '.join(by_package)})"
    table(all_title, list(by_package))
    if with_tests:
        table(f"Packages that ship tests ({', '.join(sorted(with_tests))})", sorted(with_tests))
    for package in by_package:
        table(package, [package])
    loads.append(load_line("end"))
    # each query's rank and file rank (None: not in the top K) per configuration, for reading the misses
    per_query = {" / ".join(config): {package: [{"rank": rank, "file_rank": file_rank} for rank, file_rank in
                                                zip(ranks[config, package], file_ranks[config, package])]
                                      for package in by_package} for config in configs}
    per_query["raw piece ranks, no priors or demotions"] = raw_ranks
    record = {**selection_fields(args), "halves": covered,
              "half_sets": {half: next(iter(sets.values())) for half, sets in half_figures.items()},
              "hits": args.hits, "max_seq_length": args.max_seq_length, "configs": "ranking / tests / non-code",
              "all": all_title,
              "packages": list(by_package), "sets": figures, "per_query": per_query}
    if heldout:
        record["languages"] = {package: heldout.trees[package].language for package in by_package}
    argv = sys.argv if argv is None else [__file__, *argv]
    print(f"record: {write_record(args.record_name, record, loads, args.record_dir, argv, commit=commit)}",
          file=sys.stderr)


# ---- Tables of the docs: `python -m benchmarks.render` writes those TABLES names from the records ----
from benchmarks.tables import FUSION_SWEEP, markdown_table, number, quality_set, quality_triple  # noqa: E402

# codesearch's default ranking as this module names a configuration (ranking / tests / non-code): the defaults of
# the request every front door takes
DEFAULT_CONFIGURATION = " / ".join(SearchRequest.model_fields[name].default
                                  for name in ("ranking", "tests", "non_code"))


# The held-out set's rankings as its table names them, with the configuration codesearch runs them in by default
HELDOUT_RANKINGS = {"dense": "dense / demote / demote", "BM25": "bm25 / demote / demote",
                    "**hybrid (default)**": "hybrid / demote / demote"}


def codesearch_heldout(places: dict, files: dict) -> str:
    """MRR@10, hit@1 and hit@10 of the answer's definition (one hit per place), file-level MRR@10 and the MRR@10 of
    codesearch's output (one hit per file, counted when any place it lists is the answer) of each ranking, over all
    queries and per tree."""
    metrics, file_metrics = places["metrics"], files["metrics"]
    sets = [(f"all {metrics['sets'][metrics['all']]['queries']}", metrics["all"])]
    sets += [(f"{package} ({metrics['languages'][package]})", package) for package in metrics["packages"]]
    rows = []
    for set_title, key in sets:
        for ranking, config in HELDOUT_RANKINGS.items():
            definition, per_file = metrics["sets"][key][config], file_metrics["sets"][key][config]
            rows.append([set_title, ranking, *(number(definition[name]) for name in ("mrr@10", "hit@1", "hit@10")),
                         number(per_file["file_mrr@10"]), number(per_file["mrr@10"])])
    return markdown_table(["set", "ranking", "MRR@10", "hit@1", "hit@10", "file-level MRR@10",
                           "MRR@10, a file hit matched by any place it lists"], rows, "llrrrrr")


def codesearch_quality(record: dict) -> str:
    """MRR@10, hit@1, hit@10 of every ranking configuration on all queries, and on the packages that ship tests (not
    the fusion sweep's weights: codesearch_fusion)."""
    everything, with_tests = quality_set(record, "All packages")[1], quality_set(record, "Packages that ship tests")
    tested = with_tests[0].partition("(")[2].rstrip(")")
    rows = []
    for config, figures in everything.items():
        if not isinstance(figures, dict) or FUSION_SWEEP in config:
            continue
        cells = [*config.split(" / "), *(number(figures[name]) for name in ("mrr@10", "hit@1", "hit@10")),
                 number(with_tests[1][config]["mrr@10"]), number(with_tests[1][config]["hit@10"])]
        rows.append([f"**{cell}**" for cell in cells] if config == DEFAULT_CONFIGURATION else cells)
    return markdown_table(["ranking", "tests", "non-code", f"MRR@10, all {everything['queries']}", "hit@1",
                           "hit@10", f"MRR@10, {tested} ({with_tests[1]['queries']}, ships tests)",
                           f"hit@10, {tested}"], rows, "lll" + "r" * 5)


def codesearch_quality_sets(record: dict) -> str:
    """Per set of a codesearch_quality record (each package, then all): the default ranking's figures and the MRR@10
    of dense and BM25 alone, tests and non-code demoted."""
    sets = record["metrics"]["sets"]
    names = [title for title in sets if not title.startswith(("All packages", "Packages that ship tests"))]
    names.append(quality_set(record, "All packages")[0])
    rows = [[title.partition(" (")[0].replace("All packages", "all"), str(sets[title]["queries"]),
             str(sets[title]["pieces"]), *(number(sets[title][DEFAULT_CONFIGURATION][name])
                                           for name in ("mrr@10", "hit@1", "hit@10")),
             number(sets[title]["dense / demote / demote"]["mrr@10"]),
             number(sets[title]["bm25 / demote / demote"]["mrr@10"])] for title in names]
    return markdown_table(["set", "queries", "pieces", "hybrid MRR@10", "hit@1", "hit@10", "dense MRR@10",
                           "BM25 MRR@10"], rows)


def codesearch_hits(python_files: dict, python_places: dict, js_go_files: dict, js_go_places: dict) -> str:
    """MRR@10 / hit@1 / hit@10 of each ranking (tests and non-code demoted) when a hit is a file (codesearch's
    output) against a place, on the Python and the JavaScript/Go sets."""
    rankings = (("hybrid", "hybrid"), ("dense", "dense"), ("BM25", "bm25"))
    rows = []
    for title, files, places in (("Python", python_files, python_places),
                                 ("JavaScript/Go", js_go_files, js_go_places)):
        by_file, by_place = quality_set(files, "All packages")[1], quality_set(places, "All packages")[1]
        rows.append([f"{title}, {by_file['queries']} queries",
                     *(quality_triple(hits[f"{ranking} / demote / demote"]) for _, ranking in rankings
                       for hits in (by_file, by_place))])
    return markdown_table(["set", *(f"{kind}, {name}" for name, _ in rankings for kind in ("files", "places"))], rows,
                          "l" * 7)


def codesearch_repeated_places(pieces: dict, places: dict, files: dict) -> str:
    """Hybrid and dense (tests and non-code demoted) when a hit is a raw piece, a place or a file: MRR@10 / hit@1 /
    hit@10, and how many queries' top 10 held two hits of one place (overlapping windows of one definition)."""
    rows = []
    for title, record in (("a piece", pieces), ("a place (one per definition)", places),
                          ("a file (codesearch's output)", files)):
        figures = quality_set(record, "All packages")[1]
        rows.append([title, *(cell for ranking in ("hybrid", "dense") for cell in (
            quality_triple(figures[f"{ranking} / demote / demote"]),
            str(figures[f"{ranking} / demote / demote"]["repeated"])))])
    return markdown_table(["a hit is", "hybrid: MRR@10 / hit@1 / hit@10", "top 10s holding one place twice",
                           "dense: MRR@10 / hit@1 / hit@10", "top 10s holding one place twice"], rows, "llrlr")


def codesearch_quality_configs(record: dict) -> str:
    """MRR@10, hit@1 and hit@10 over all queries of every ranking configuration of a codesearch_quality record."""
    title, everything = quality_set(record, "All packages")
    rows = []
    for config, figures in everything.items():
        if isinstance(figures, dict):
            cells = [*config.split(" / "), *(number(figures[name]) for name in ("mrr@10", "hit@1", "hit@10"))]
            rows.append([f"**{cell}**" for cell in cells] if config == DEFAULT_CONFIGURATION else cells)
    return markdown_table([f"ranking ({everything['queries']} queries, {everything['pieces']:,} pieces)", "tests",
                           "non-code", "MRR@10", "hit@1", "hit@10"], rows, "lllrrr")


def tokens_per_piece(record: dict) -> int:
    # records written before this module recorded it ran at codesearch's default
    return record["metrics"].get("max_seq_length", DEFAULT_MAX_SEQ_LENGTH)


def codesearch_tokens_per_piece(*records: dict) -> str:
    """MRR@10 / hit@1 / hit@10 of each ranking (tests and non-code demoted) at each record's tokens per piece."""
    sets = [quality_set(record, "All packages")[1] for record in records]
    titles = [f"{tokens_per_piece(record)} tokens" + (" (default)" if tokens_per_piece(record) ==
                                                      DEFAULT_MAX_SEQ_LENGTH else "") for record in records]
    rows = [[ranking, *(quality_triple(figures[f"{ranking} / demote / demote"]) for figures in sets)]
            for ranking in ("dense", "bm25", "hybrid")]
    header = f"ranking ({sets[0]['queries']} queries; tests, non-code demoted): MRR@10 / hit@1 / hit@10"
    return markdown_table([header, *titles], rows, "l" * (len(records) + 1))


# table name -> (the records it reads, in the order the function takes them; the function)
TABLES = {
    "codesearch_heldout": (("codesearch_heldout", "codesearch_heldout_files"), codesearch_heldout),
    "codesearch_quality": (("codesearch_quality",), codesearch_quality),
    "codesearch_quality_js_go": (("codesearch_quality_js_go",), codesearch_quality_sets),
    "codesearch_hits": (("codesearch_quality", "codesearch_quality_places", "codesearch_quality_js_go",
                         "codesearch_quality_js_go_places"), codesearch_hits),
    "codesearch_repeated_places": (("codesearch_quality_pieces", "codesearch_quality_places", "codesearch_quality"),
                                   codesearch_repeated_places),
    "codesearch_quality_source": (("codesearch_quality_source",), codesearch_quality_configs),
    "codesearch_tokens_per_piece": (("codesearch_quality", "codesearch_quality_256"), codesearch_tokens_per_piece),
}


if __name__ == "__main__":
    main()
