"""How a file hit orders its places, swept on the dev half of semble's benchmark: which place an agent reads first.

    python benchmarks/codesearch_place_order.py --work-dir WORK_DIR                       # the default sweep
    python benchmarks/codesearch_place_order.py --length-weight 0 --length-weight 1 --repo chi --work-dir WORK_DIR

codesearch ranks files by their best place (codesearch.ranking.group_by_file); each hit then lists its places in a
`PlaceOrder`: headers last, the others by score x (1 + length_weight x ln(lines)). `--length-weight W` (repeatable)
is one such order; 0 is the order by score alone. Each is scored as benchmarks/codesearch_semble.py
scores the place level (the project's span annotations, benchmarks/data/semble_spans): NDCG@10 and MRR@10 where a
file hit counts only when its FIRST place overlaps a target's span, then `listed@N`, NDCG@10 when any of its first N
places may (how many places the text output should print), and semble's file-level NDCG@10 beside (the order of
files is the same under every order, so it must not move). `--precision int8|binary` ranks with the loaded vectors
quantized (the index is re-quantized, nothing embedded), to check that the order holds at every precision;
`--ranking dense|bm25` orders the places of those rankings (a file's rank is still its best place's).

Only the dev half (DEV_REPOS of codesearch_semble.py): this is where the order is chosen, so its record says
`used_to_choose`; the test half is reported by codesearch_semble.py, never swept here. Indexes are codesearch's own,
under WORK_DIR/indexes/embedded/<repo> as codesearch_semble.py keeps them (a second run embeds nothing).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # run as `python benchmarks/codesearch_place_order.py` from anywhere
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.codesearch_semble import (DEFAULT_DATA, DEFAULT_SPANS, DEV_REPOS, TOP_K, Target,  # noqa: E402
                                          attach_places, benchmark_dir, load_benchmark, ndcg_at_k, repos_folder,
                                          score_query, target_ranks)
from benchmarks.common import add_record_argument, commit_line, load_line, write_record  # noqa: E402
from codesearch.quantization import DEFAULT_PRECISION, PRECISIONS  # noqa: E402
from codesearch.ranking import (DEFAULT_RANKING, PLACE_ORDER, RANKINGS, PlaceOrder, QuerySignals,  # noqa: E402
                                RankingConfig, rank)
from codesearch.request import SearchRequest  # noqa: E402
from codesearch.searcher import FolderSearch, IndexOptions  # noqa: E402
from c2llm_data.tokens import code_tokens  # noqa: E402

DEFAULT_WEIGHTS = (0.0, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0, 5.0, 100.0)
LISTED = (2, 3, 4, 6)  # places a file hit may show before the answer counts


def label(order: PlaceOrder) -> str:
    return f"{order.length_weight:g}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="semble's benchmark folder")
    parser.add_argument("--spans", type=Path, default=DEFAULT_SPANS, help="the span annotations' folder")
    parser.add_argument("--work-dir", type=Path, required=True,
                        help="unpacked repositories and indexes, as codesearch_semble.py's --work-dir")
    parser.add_argument("--length-weight", action="append", type=float, metavar="W",
                        help="a place order's length weight to score (repeatable; default: "
                             f"{' '.join(f'{weight:g}' for weight in DEFAULT_WEIGHTS)})")
    parser.add_argument("--ranking", choices=RANKINGS, default=DEFAULT_RANKING,
                        help=f"codesearch --ranking (default: {DEFAULT_RANKING})")
    parser.add_argument("--precision", choices=PRECISIONS, default=DEFAULT_PRECISION,
                        help="codesearch --precision of the loaded vectors (a change re-quantizes, embeds nothing)")
    parser.add_argument("--repo", action="append", choices=sorted(DEV_REPOS),
                        help="only these dev repositories (default: the whole dev half)")
    add_record_argument(parser, "codesearch_place_order")
    args = parser.parse_args(argv)
    weights = args.length_weight or DEFAULT_WEIGHTS
    if any(not weight >= 0 for weight in weights):  # also refuses nan
        parser.error("--length-weight must be 0 or more (0: places by score alone)")
    # the product's ranking but for the place order, as codesearch ranks (tests and non-code demoted by default)
    configs = {label(order): RankingConfig(place_order=order)
               for order in (PlaceOrder(length_weight=weight) for weight in weights)}
    loads, commit = [load_line("start")], commit_line()
    specs, queries = load_benchmark(args.data)
    queries = attach_places(args.spans, specs, queries)
    repos = repos_folder(args.data, args.work_dir)
    names = sorted(args.repo or DEV_REPOS & set(specs))
    scores = {key: defaultdict(list) for key in configs}  # order -> repo -> per-query scores
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
            for key, config in configs.items():
                found = [(prefix + group[0].path, [(place.line, place.end_line) for place in group])
                         for group in rank(request, index, signals, config)]
                result = score_query(query, found, present, "best-place")
                if query.places is not None:
                    findable = sum(map(present, query.places))
                    result |= {f"listed@{n}": ndcg_at_k(target_ranks([(path, spans[:n]) for path, spans in found],
                                                                     query.places), findable) for n in LISTED}
                scores[key][name].append(result)
        search.close()
        print(f"{name:<14} " + "  ".join(f"{key} {statistics.fmean(s.get('place', 0.0) for s in per[name]):.3f}"
                                         for key, per in scores.items()), file=sys.stderr)
    loads.append(load_line("end"))
    metrics = ("place", "place_rr", *(f"listed@{n}" for n in LISTED), "listed_places", "file")
    summary = {key: {metric: statistics.fmean(statistics.fmean(s[metric] for s in per[name] if metric in s)
                                              for name in per if any(metric in s for s in per[name]))
                     for metric in metrics} for key, per in scores.items()}
    print(f"\n| length weight | {' | '.join(metrics)} |\n| --- |{' ---: |' * len(metrics)}")
    for key, row in summary.items():
        default = " (default)" if key == label(PLACE_ORDER) else ""
        print(f"| {key}{default} | " + " | ".join(f"{row[metric]:.3f}" for metric in metrics) + " |")
    record = {"half": "dev", "ranking": args.ranking, "precision": args.precision,
              "used_to_choose": "codesearch.ranking.PlaceOrder's length weight and how many places the text "
                                "output prints", "repos": names, "default": label(PLACE_ORDER), "orders": summary,
              "per_repo": {key: {name: {metric: statistics.fmean(s[metric] for s in per[name] if metric in s)
                                        for metric in metrics if any(metric in s for s in per[name])}
                                 for name in per} for key, per in scores.items()}}
    argv = sys.argv if argv is None else [__file__, *argv]
    print(f"record: {write_record(args.record_name, record, loads, args.record_dir, argv, commit=commit)}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
