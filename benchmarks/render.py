"""Write the results tables of the docs from the records in benchmarks/results/, or check that they match.

    python -m benchmarks.render           # rewrite every table between render markers
    python -m benchmarks.render --check   # exit 1, naming each file, when committed Markdown differs

A table lives between two comment lines in any Markdown page of the repository:

    <!-- render: offline_quality -->
    (written by this command: the table, then a line naming its record and the record's command)
    <!-- /render -->

The name after `render:` is one of `TABLES`; each reads one or more records (`benchmarks/results/NAME.json`,
written by `benchmarks.common.write_record`). Everything between the markers is replaced, so edit the record's
run, never the table. Standard library only: the check runs in the fast test tier.
"""

import argparse
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from statistics import mean, median

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # run as `python benchmarks/render.py` from anywhere
    sys.path.insert(0, str(REPO_ROOT))

from c2llm_data.markdown import markdown_table  # noqa: E402

RESULTS_DIR = REPO_ROOT / "benchmarks" / "results"
# Where tables may live: the pages of the repository (not virtual environments or the data folders).
PAGE_GLOBS = ("*.md", "docs/*.md", "benchmarks/*.md", "benchmarks/results/*.md", "evaluation/*.md",
              "codesearch/*.md", "train/*.md", "experiments/**/*.md", "default_model/*.md")
# Markers are whole lines, so a page can mention them in running text.
BLOCK = re.compile(r"^(?P<open><!-- render: (?P<name>[\w-]+) -->\n)(?P<body>.*?)^(?P<close><!-- /render -->)$",
                   re.S | re.M)
OPENING = re.compile(r"^<!-- render: ?(?P<name>[^>]*?) ?-->$", re.M)
DECIMALS = 3
COMMIT_CHARS = 7

# The nine sets of the offline default model's table, as the README names them.
NINE_SETS = {"cosqa_test": "cosqa", "mbpp": "mbpp", "humaneval": "humaneval", "spider_dev_text2sql": "spider",
             "conala_en": "conala", "csn_python_from_cosqa_codebase": "csn-style", "humanevalx_py2cpp": "py2cpp",
             "humanevalx_py2rust": "py2rust", "codexglue_refine_small_test": "refine"}

# encode_speed.py's contenders, as the speed page names them; the one in bold is the dtype C2LLM loads on that CPU.
CONTENDERS = {"ours_st": "ours_st (SentenceTransformer, packed)", "ours_automodel": "ours_automodel (`model.encode`)",
              "ours_st_padded": "ours_st_padded (`pack_sequences=False`)",
              "published_approach": "published approach (causal LM + LM head, all hidden states, eager)",
              "last_token_st": "last-token pooling, same backbone",
              "ours_st_bf16": "**ours_st_bf16 (the default dtype on this CPU)**",
              "published_approach_bf16": "published approach", "ours_st_compiled": "ours_st, `torch.compile`",
              "ours_st_bf16_compiled": "ours_st_bf16, `torch.compile`"}
DTYPES = {"float32": "fp32", "bfloat16": "bf16"}
# the fusion sweep's rankings in a record: "hybrid, dense weight 0.4" (benchmarks.common.dense_weight_labels)
FUSION_SWEEP = "dense weight"
# semble's query categories as its annotations name them, in the order the tables show them
SEMBLE_CATEGORIES = ("symbol", "architecture", "semantic")
# codesearch's default ranking as codesearch_quality.py names a configuration (ranking / tests / non-code)
DEFAULT_RANKING = "hybrid / demote / demote"
# codesearch's latency goals for the MCP server's calls (wall seconds, medians; codesearch/README.md)
MCP_GOALS = {"new query": 0.15, "query after a one-file edit": 0.5}
# codesearch_mcp.py's calls, as the codesearch page describes them
MCP_CALLS = {"cold": "cold: first `index_status` (index build, ONNX export, model load)",
             "first query": "first `search` (loads the BM25 retriever)",
             "new query": "new query (model loaded, index open)",
             "query after a one-file edit":
                 "query after a one-file edit (a function appended to a different file each time)"}
# codesearch_store.py's contenders, as the codesearch page names them
STORES = {"sqlite-blob": "sqlite-blob (one BLOB per row, read into one matrix)",
          "npy": "npy (one matrix file, `np.load`)",
          "usearch-exact": "usearch exact (same matrix file, `usearch.index.search(exact=True)`)",
          "usearch-hnsw": "usearch HNSW", "faiss-flat": "faiss IndexFlatIP (`faiss.write_index`/`read_index`)"}


class RenderError(ValueError):
    """A page or record that cannot be rendered: the message names the file and the fix."""


def number(value: float, decimals: int = DECIMALS) -> str:
    return f"{value:.{decimals}f}"


def offline_quality(bm25: dict, compact: dict) -> str:
    """nDCG@10 of BM25 and the default model on the nine sets (all queries, full corpora), and their average: BM25
    from its run on every folder, the default model from the compact-embeddings run (its full width)."""
    scores = [bm25["metrics"]["models"]["bm25"][data]["ndcg@10"] for data in NINE_SETS]
    rows = [["BM25", *map(number, scores), number(mean(scores))]]
    default = compact["metrics"]["per_set"]["default"]
    rows.append(["**default_model**", *(number(default[data]) for data in NINE_SETS),
                 f"**{number(default['average'])}**"])
    return markdown_table(["", *NINE_SETS.values(), "average"], rows, "l" + "r" * (len(NINE_SETS) + 1))


def compact_embeddings(record: dict) -> str:
    """Average nDCG@10 of the nine sets per width: a PMA head of width d, Matryoshka cut to d, the default cut."""
    averages = record["metrics"]["averages"]
    rows = []
    for width, routes in averages.items():
        cells = [number(routes[route]) if routes.get(route) is not None else "not run"
                 for route in ("pma_head", "matryoshka", "default_truncated")]
        rows.append([width, f"{int(width) * record['metrics']['bytes_per_dimension']:,}", *cells])
    return markdown_table(["d", "bytes per vector (float32)", "(a) PMA head of width d",
                           "(b) Matryoshka, truncated to d", "(c) default model, truncated to d"], rows, "rrrrr")


def compact_embeddings_summary(record: dict) -> str:
    """The widths where all three routes ran, in the README's short form."""
    rows = [[f"{width} ({int(width) * record['metrics']['bytes_per_dimension']:,})",
             *(number(routes[route]) for route in ("pma_head", "matryoshka", "default_truncated"))]
            for width, routes in record["metrics"]["averages"].items() if None not in routes.values()]
    return markdown_table(["d (float32 bytes)", "PMA head of width d", "Matryoshka, cut to d", "default_model, cut"],
                          rows, "lrrr")


def compact_embeddings_per_set(record: dict) -> str:
    """nDCG@10 per set of every evaluated model and width."""
    per_set = record["metrics"]["per_set"]
    sets = record["metrics"]["sets"]
    rows = [[model, *(number(scores[data]) for data in sets), number(scores["average"])]
            for model, scores in per_set.items()]
    return markdown_table(["model", *(NINE_SETS.get(data, data) for data in sets), "average"], rows,
                          "l" + "r" * (len(sets) + 1))


def suite_sizes(record: dict, data: str) -> str:
    sizes = record["metrics"]["sets"][data]
    return f"{sizes['queries']:,} / {sizes['corpus']:,}"


def evaluation_bm25(record: dict) -> str:
    """BM25 on all thirteen folders: nDCG@10, MRR@10, Recall@100 per folder and their averages."""
    scores = record["metrics"]["models"]["bm25"]
    names = ("ndcg@10", "mrr@10", "recall@100")
    rows = [[data, suite_sizes(record, data), *(number(scores[data][name]) for name in names)] for data in scores]
    rows.append(["**average**", "", *(number(mean(values[name] for values in scores.values())) for name in names)])
    return markdown_table(["benchmark", "queries / corpus", "nDCG@10", "MRR@10", "Recall@100"], rows, "lrrrr")


def evaluation_minilm_subset(record: dict) -> str:
    """MiniLM and BM25 nDCG@10 on the first 500 judged queries of each folder (corpora cut to 2,000)."""
    models = record["metrics"]["models"]
    rows = [[data, suite_sizes(record, data), *(number(models[label][data]["ndcg@10"]) for label in ("minilm", "bm25"))]
            for data in models["minilm"]]
    rows.append(["**average**", "", *(number(mean(v["ndcg@10"] for v in models[label].values()))
                                      for label in ("minilm", "bm25"))])
    return markdown_table(["benchmark", "queries / corpus", "MiniLM nDCG@10", "BM25 nDCG@10"], rows, "lrrr")


def encode_speed(record: dict) -> str:
    """Each contender's tokens/s, working memory and MFU, with ratios to ours_st."""
    rows = []
    for name, figures in record["metrics"].items():
        speed, ratio = number(figures["tokens_per_s"], 1), f"{figures['throughput_vs_ours_st']:.2f}x"
        if CONTENDERS[name].startswith("**"):
            speed, ratio = f"**{speed}**", f"**{ratio}**"
        rows.append([CONTENDERS[name], DTYPES[figures["dtype"]], speed, ratio, f"{figures['peak_mem_mb']:.0f}",
                     f"{figures['memory_vs_ours_st']:.2f}x", f"{figures['mfu']:.0%}"])
    return markdown_table(["contender", "dtype", "tokens/s", "vs ours_st", "working MB", "vs ours_st",
                           "MFU (real tokens)"], rows, "llrrrrr")


def train_speed(record: dict) -> str:
    """A LoRA training step per shape and setup: tokens/s and step memory, against the plain step of that shape."""
    rows = []
    for shape, setups in record["metrics"].items():
        plain = setups["plain"]
        rows += [[shape, setup, number(figures["tokens_per_s"], 1),
                  f"{figures['tokens_per_s'] / plain['tokens_per_s']:.2f}x", f"{figures['peak_mem_mb']:.0f}",
                  f"{figures['peak_mem_mb'] / plain['peak_mem_mb']:.2f}x"] for setup, figures in setups.items()]
    return markdown_table(["shape", "setup", "tokens/s", "vs plain", "step peak MB", "vs plain"], rows, "llrrrr")


def serving_load(record: dict) -> str:
    """The embeddings server's latency, throughput and memory per concurrency level."""
    metrics = record["metrics"]
    rows = []
    for level in metrics["levels"]:
        # the in-process runs around this level; records of runs with one baseline for all levels carry it above
        baseline = mean(level.get("in_process_texts_per_s", metrics["in_process_texts_per_s"]))
        same_calls = level["in_process_same_calls"]
        rows.append([str(level["concurrency"]), str(level["errors"]), f"{level['p50_s'] * 1000:.0f}",
                     f"{level['p99_s'] * 1000:.0f}", number(level["p99_s"] / level["p50_s"], 2),
                     number(level["texts_per_s"], 1), number(level["texts_per_s"] / baseline, 2),
                     number(level["texts_per_s"] / same_calls["texts_per_s"], 2),
                     f"{level['rss_before_mib']:.0f} / {level['rss_after_mib']:.0f}",
                     f"{level['worker_rss_before_mib']:.0f} / {level['worker_rss_after_mib']:.0f}"])
    return markdown_table(["concurrency", "errors", "p50 ms", "p99 ms", "p99/p50", "texts/s", "x in-process",
                           "x in-process, same calls", "server MiB before / after",
                           "model worker MiB before / after"], rows, "rrrrrrrrrr")


def serving_corpus(record: dict) -> str:
    """The corpus job's rows/s against in-process encode."""
    metrics = record["metrics"]
    rows_count, baseline = metrics["rows"], mean(metrics["in_process_rows_per_s"])
    actors = metrics["actors"]
    runs = [(f"Ray Data job, {actors} actors, whole command (Ray start, checks, model loads included)",
             metrics["job_wall_s"]),
            (f"Ray Data job, {actors} actors, pipeline (actor start included)", metrics["job_pipeline_s"])]
    rows = [["in-process `encode` (mean of before and after)", number(baseline, 1), "1.00",
             number(rows_count / baseline, 1)]]
    rows += [[title, number(rows_count / seconds, 1), number(rows_count / seconds / baseline, 2), number(seconds, 1)]
             for title, seconds in runs]
    return markdown_table(["run", "rows/s", "x in-process", "seconds"], rows, "lrrr")


def semble_row(record: dict, method: str) -> dict:
    """One method's summary in a semble-benchmark record, with its mean of distinct files in a top 10."""
    metrics = record["metrics"]
    per_repo = metrics["per_repo"][method].values()
    return {**metrics["summary"][method], "distinct_files": mean(repo["distinct_files"] for repo in per_repo)}


def codesearch_semble(default: dict, priors_off: dict, listed_places: dict) -> str:
    """NDCG@10 overall and per query category of each ranking, with and without the code priors, beside semble's
    published hybrid on the same repositories; the last codesearch row credits any place a file hit lists."""
    runs = [("dense", default, "codesearch dense"), ("BM25, no priors", priors_off, "codesearch bm25"),
            ("hybrid, no priors", priors_off, "codesearch hybrid"), ("BM25", default, "codesearch bm25"),
            ("**hybrid (default)**", default, "codesearch hybrid"),
            ("hybrid, a file hit matched by any place it lists", listed_places, "codesearch hybrid")]
    rows = []
    for title, record, method in runs:
        row = semble_row(record, method)
        categories = row["categories"]
        rows.append([title, number(row["overall"]), *(number(categories[name]) for name in SEMBLE_CATEGORIES),
                     number(row["distinct_files"], 2)])
    for title, score in default["metrics"]["published"].items():
        rows.append([f"{title}, same repositories", number(score), *[""] * (len(SEMBLE_CATEGORIES) + 1)])
    return markdown_table(["ranking", "NDCG@10", *SEMBLE_CATEGORIES, "distinct files in a top 10"], rows,
                          "l" + "r" * (len(SEMBLE_CATEGORIES) + 2))


def codesearch_semble_languages(record: dict) -> str:
    """NDCG@10 per language (the mean of its repositories) of each ranking (not the fusion sweep's weights)."""
    summaries = {method.removeprefix("codesearch "): summary
                 for method, summary in record["metrics"]["summary"].items() if FUSION_SWEEP not in method}
    languages = next(iter(summaries.values()))["languages"]
    rows = [[language, *(number(summary["languages"][language]) for summary in summaries.values())]
            for language in languages]
    return markdown_table(["language", *summaries], rows, "l" + "r" * len(summaries))


def codesearch_fusion(semble: dict, python_set: dict) -> str:
    """The fusion sweep (`--dense-weight`): per dense weight, semble's NDCG@10 overall and per category, the language
    furthest below the better of dense and BM25 there, and the Python set's MRR@10 / hit@10 (one hit per file, tests
    and non-code demoted); the default ranking's row in bold."""
    summaries = semble["metrics"]["summary"]
    python_all = quality_set(python_set, "All packages")[1]
    dense, bm25 = summaries["codesearch dense"]["languages"], summaries["codesearch bm25"]["languages"]
    weighted = sorted((name for name in summaries if FUSION_SWEEP in name), key=lambda name: float(name.split()[-1]))
    rows = []
    for method in [*weighted, "codesearch hybrid"]:
        summary = summaries[method]
        trailing = {language: score - max(dense[language], bm25[language])
                    for language, score in summary["languages"].items()}
        worst = min(trailing, key=trailing.get)
        python = python_all[f"{method.removeprefix('codesearch ')} / demote / demote"]
        cells = [method.rsplit(" ", 1)[-1] if method in weighted else "default", number(summary["overall"]),
                 *(number(summary["categories"][name]) for name in SEMBLE_CATEGORIES),
                 f"{worst} {trailing[worst]:+.3f}", number(python["mrr@10"]), number(python["hit@10"])]
        rows.append(cells if method in weighted else [f"**{cell}**" for cell in cells])
    return markdown_table(["dense weight", "semble NDCG@10", *SEMBLE_CATEGORIES,
                           "language furthest below the better of dense and BM25", "Python set MRR@10", "hit@10"],
                          rows, "l" + "r" * (len(SEMBLE_CATEGORIES) + 4))


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


def codesearch_first_answer_quality(semble: dict, python_set: dict) -> str:
    """The first answer against the full index's rankings: NDCG@10 on semble's benchmark (overall, per category,
    the lowest language's difference to the default) and MRR@10 / hit@10 on the Python set."""
    default = semble["metrics"]["summary"]["codesearch hybrid"]
    python_all = next(figures for title, figures in python_set["metrics"]["sets"].items() if title.startswith("All"))
    runs = [("BM25", "codesearch bm25", "bm25 / demote / demote"),
            ("**hybrid (default)**", "codesearch hybrid", "hybrid / demote / demote")]
    runs += [(f"first answer: hybrid over BM25's best {name.rsplit(' ', 1)[1].rstrip(')')}", name,
              f"{name.removeprefix('codesearch ')} / demote / demote")
             for name in semble["metrics"]["summary"] if "first answer" in name]
    rows = []
    for title, method, config in runs:
        summary = semble["metrics"]["summary"][method]
        worst = min(summary["languages"], key=lambda lang: summary["languages"][lang] - default["languages"][lang])
        below = summary["languages"][worst] - default["languages"][worst]
        python = python_all[config]
        rows.append([title, number(summary["overall"]),
                     *(number(summary["categories"][name]) for name in SEMBLE_CATEGORIES),
                     f"{worst} {below:+.3f}" if summary is not default else "",
                     number(python["mrr@10"]), number(python["hit@10"])])
    return markdown_table(["ranking", "semble NDCG@10", *SEMBLE_CATEGORIES, "language furthest below the default",
                           "Python set MRR@10", "hit@10"], rows, "l" + "r" * (len(SEMBLE_CATEGORIES) + 4))


def codesearch_first_answer(record: dict) -> str:
    """CPU seconds to the first answer and for the whole command on a fresh folder, per `--first-answer` mode."""
    rows = []
    for name, folder in record["metrics"]["folders"].items():
        for mode, run in folder["modes"].items():
            rows.append([f"{name} ({folder['files']} files, {folder['pieces']:,} pieces)",
                         "fast" if mode == "fast" else "wait (default)", number(run["answer_cpu_s"], 1),
                         number(run["answer_wall_s"], 1), number(run["total_cpu_s"], 1),
                         "yes" if folder["final_answer_equal"] else "**no**"])
    return markdown_table(["fresh folder", "--first-answer", "first answer, CPU-s", "first answer, wall s",
                           "whole command (index built), CPU-s", "then answers as the default"], rows, "llrrrl")


def quality_set(record: dict, title_prefix: str) -> tuple[str, dict]:
    """(title, figures) of the set of a codesearch_quality record whose title starts with `title_prefix`."""
    return next((title, figures) for title, figures in record["metrics"]["sets"].items()
                if title.startswith(title_prefix))


def quality_triple(figures: dict) -> str:
    return " / ".join(number(figures[name]) for name in ("mrr@10", "hit@1", "hit@10"))


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
        rows.append([f"**{cell}**" for cell in cells] if config == DEFAULT_RANKING else cells)
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
             str(sets[title]["pieces"]), *(number(sets[title][DEFAULT_RANKING][name])
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


def codesearch_precision(record: dict) -> str:
    """Quality set at each vector precision: hybrid and dense MRR@10, resident vector bytes, ratio to float32."""
    quality = record["metrics"]["quality"]
    variants = quality["variants"]
    float32_bytes = variants["float32"]["resident_bytes"]
    rows = []
    for name, figures in variants.items():
        cells = [name, number(figures["hybrid"]["mrr@10"]), number(figures["dense"]["mrr@10"]),
                 f"{figures['resident_bytes']:,}", f"1/{float32_bytes / figures['resident_bytes']:.0f}"]
        if figures["rescore_multiplier"] == quality["default_multiplier"]:
            cells = [f"**{name}** (default)", *(f"**{cell}**" for cell in cells[1:3]), *cells[3:]]
        rows.append(cells)
    return markdown_table([f"precision (quality set: {quality['queries']} queries, {quality['pieces']:,} pieces)",
                           "hybrid MRR@10", "dense MRR@10", "resident vector bytes", "ratio to float32"], rows)


def codesearch_store(record: dict) -> str:
    """Each vector store's build, load and query time and its size on disk."""
    rows = []
    for store, figures in record["metrics"]["stores"].items():
        if "not_installed" in figures:
            rows.append([store, f"not installed ({figures['not_installed']})", "", "", ""])
            continue
        rows.append([STORES.get(store, store), number(figures["build_s"], 2), number(figures["load_s"]),
                     number(figures["query_s"] * 1000, 2), f"{figures['disk_bytes'] / 2**20:.0f}"])
    return markdown_table(["store", "build s", "load s", "query ms", "disk MB"], rows)


def codesearch_mcp(record: dict) -> str:
    """Each MCP call's median (and range) of wall seconds at the client, against its goal where it has one."""
    rows = []
    for call, seconds in record["metrics"]["seconds"].items():
        runs = seconds if isinstance(seconds, list) else [seconds]
        middle = median(runs)
        title, value = MCP_CALLS.get(call, call), number(middle)
        if call in MCP_GOALS:  # the calls with a goal are the ones an agent makes all day
            title, value = f"**{title}** ({len(runs)} runs)", f"**{value}**"
        spread = f"{number(min(runs))}-{number(max(runs))}" if len(runs) > 1 else ""
        goal = (f"<= {MCP_GOALS[call]} s: {'met' if middle <= MCP_GOALS[call] else 'not met'}"
                if call in MCP_GOALS else "")
        rows.append([title, value, spread, goal])
    return markdown_table([f"call (this repository's code: {record['metrics']['files']} files)", "median s",
                           "min-max s", "goal"], rows, "lrrl")


# table name -> (the records it reads, in the order the function takes them; the function)
TABLES: dict[str, tuple[tuple[str, ...], Callable[..., str]]] = {
    "offline_quality": (("evaluation_bm25", "compact_embeddings"), offline_quality),
    "compact_embeddings": (("compact_embeddings",), compact_embeddings),
    "compact_embeddings_summary": (("compact_embeddings",), compact_embeddings_summary),
    "compact_embeddings_per_set": (("compact_embeddings",), compact_embeddings_per_set),
    "evaluation_bm25": (("evaluation_bm25",), evaluation_bm25),
    "evaluation_minilm_subset": (("evaluation_minilm_subset",), evaluation_minilm_subset),
    "encode_speed": (("encode_speed",), encode_speed),
    "train_speed": (("train_speed",), train_speed),
    "serving_load": (("serving_load",), serving_load),
    "serving_load_repeat": (("serving_load_repeat",), serving_load),
    "serving_corpus": (("serving_corpus",), serving_corpus),
    "codesearch_semble": (("codesearch_semble", "codesearch_semble_priors_off", "codesearch_semble_listed_places"),
                          codesearch_semble),
    "codesearch_semble_languages": (("codesearch_semble",), codesearch_semble_languages),
    "codesearch_fusion": (("codesearch_semble", "codesearch_quality"), codesearch_fusion),
    "codesearch_heldout": (("codesearch_heldout", "codesearch_heldout_files"), codesearch_heldout),
    "codesearch_first_answer_quality": (("codesearch_semble_first_answer", "codesearch_quality_first_answer"),
                                        codesearch_first_answer_quality),
    "codesearch_first_answer_languages": (("codesearch_semble_first_answer",), codesearch_semble_languages),
    "codesearch_first_answer": (("codesearch_first_answer",), codesearch_first_answer),
    "codesearch_quality": (("codesearch_quality",), codesearch_quality),
    "codesearch_quality_js_go": (("codesearch_quality_js_go",), codesearch_quality_sets),
    "codesearch_hits": (("codesearch_quality", "codesearch_quality_places", "codesearch_quality_js_go",
                         "codesearch_quality_js_go_places"), codesearch_hits),
    "codesearch_precision": (("codesearch_precision",), codesearch_precision),
    "codesearch_store": (("codesearch_store",), codesearch_store),
    "codesearch_mcp": (("codesearch_mcp",), codesearch_mcp),
}


def shown(path: Path) -> str:
    """A path as the messages name it: relative to the repository where it lies inside."""
    return path.relative_to(REPO_ROOT).as_posix() if path.is_relative_to(REPO_ROOT) else str(path)


def read_record(name: str, results_dir: Path) -> dict:
    path = results_dir / f"{name}.json"
    if not path.is_file():
        raise RenderError(f"{shown(path)} does not exist: run the benchmark that writes it "
                          "(benchmarks/README.md lists them) or restore it from git history.")
    return json.loads(path.read_text(encoding="utf-8"))


def source_line(record: dict, record_path: Path, page: Path) -> str:
    """Below each table: the record it comes from (machine and load are in it), its commit and command."""
    link = Path(os.path.relpath(record_path, page.parent)).as_posix()
    commit = record["commit"][:COMMIT_CHARS] + (" + uncommitted changes" if "uncommitted" in record["commit"] else "")
    return f"From [{record_path.name}]({link}) (commit {commit}): `{record['command']}`"


def render_page(text: str, page: Path, results_dir: Path = RESULTS_DIR) -> str:
    """`text` with every render block rewritten from its record."""
    for opening in OPENING.finditer(text):
        if opening.group("name") not in TABLES:
            raise RenderError(f"{shown(page)}: unknown table {opening.group('name')!r} in a render "
                              f"marker; the tables are: {', '.join(sorted(TABLES))}.")
    if len(BLOCK.findall(text)) != len(OPENING.findall(text)):
        raise RenderError(f"{shown(page)}: a `<!-- render: NAME -->` line has no "
                          "`<!-- /render -->` line after it: add one where the table ends.")

    def rendered(block: re.Match) -> str:
        record_names, table = TABLES[block.group("name")]
        records = [read_record(name, results_dir) for name in record_names]
        sources = [source_line(record, results_dir / f"{name}.json", page)
                   for name, record in zip(record_names, records)]
        body = table(*records) + "\n\n" + "<br>\n".join(sources)
        return block.group("open") + body + "\n" + block.group("close")

    return BLOCK.sub(rendered, text)


def pages(root: Path = REPO_ROOT) -> list[Path]:
    return sorted({path for pattern in PAGE_GLOBS for path in root.glob(pattern) if path.is_file()})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.render", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 naming each page whose tables differ from the records")
    args = parser.parse_args(argv)
    stale = []
    try:
        for page in pages():
            text = page.read_text(encoding="utf-8")
            new = render_page(text, page)
            if new == text:
                continue
            stale.append(page.relative_to(REPO_ROOT).as_posix())
            if not args.check:
                temporary = page.with_name(f".{page.name}.render")
                temporary.write_text(new, encoding="utf-8")
                temporary.replace(page)
    except RenderError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.check and stale:
        print(f"error: {', '.join(stale)}: the tables differ from the records in benchmarks/results/. Run "
              "`python -m benchmarks.render` and commit the pages (edit a record's run, never a rendered table).",
              file=sys.stderr)
        return 1
    print(("rewrote " + ", ".join(stale)) if stale else "every rendered table matches its record")
    return 0


if __name__ == "__main__":
    sys.exit(main())
