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
# the other shared folders' short names in tables
SET_NAMES = NINE_SETS | {"codexglue_java2cs_test": "java2cs", "humanevalx_py2go": "py2go",
                         "humanevalx_py2js": "py2js", "cosqa_dev": "cosqa_dev"}
# the set whose validation pairs the default model trained on, so its score is in-distribution
IN_DISTRIBUTION = "codexglue_refine_small_test"
# the offline_quality record's models (the suite's labels), as the README's headline table names them; the shipped
# one is in bold
OFFLINE_MODELS = {"bm25": "BM25", "minilm": "all-MiniLM-L6-v2 (stock)", "default": "default_model"}
SHIPPED_MODEL = "default"

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
# codesearch's --max-seq-length default (codesearch.__main__.DEFAULT_MAX_SEQ_LENGTH; a test checks they agree)
DEFAULT_TOKENS_PER_PIECE = 128
# codesearch's latency goals for the command line's steps (wall seconds, medians; codesearch/README.md)
SPEED_GOALS = {"new": 2.0, "edit": 5.0}
# the backends a user gets by default: `auto` is onnx, onnxruntime being a dependency
SPEED_DEFAULT_BACKENDS = ("auto", "onnx")
SPEED_BACKENDS = {"auto": "auto (default: onnx)", "onnx": "onnx (default)"}
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


def offline_quality(record: dict) -> str:
    """nDCG@10 of BM25, the stock all-MiniLM-L6-v2 and the default model on the nine sets (all queries, full
    corpora) from one suite run, their average, and the average of the sets the default model did not train on."""
    models = record["metrics"]["models"]
    unseen = [data for data in NINE_SETS if data != IN_DISTRIBUTION]
    rows = []
    for label, title in OFFLINE_MODELS.items():
        scores = {data: models[label][data]["ndcg@10"] for data in NINE_SETS}
        average = number(mean(scores.values()))
        if label == SHIPPED_MODEL:
            title, average = f"**{title}**", f"**{average}**"
        rows.append([title, *map(number, scores.values()), average, number(mean(scores[data] for data in unseen))])
    return markdown_table(["", *NINE_SETS.values(), "average", f"without {NINE_SETS[IN_DISTRIBUTION]}"], rows,
                          "l" + "r" * (len(NINE_SETS) + 2))


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


def encode_speed(record: dict) -> str:
    """Each contender's tokens/s, working memory and MFU, with ratios to ours_st, the share of its cores it got and
    how close its embeddings are to ours_st's."""
    rows = []
    for name, figures in record["metrics"]["contenders"].items():
        speed, ratio = number(figures["tokens_per_s"], 1), f"{figures['throughput_vs_ours_st']:.2f}x"
        if CONTENDERS[name].startswith("**"):
            speed, ratio = f"**{speed}**", f"**{ratio}**"
        cosine = figures["min_cosine_vs_ours_st"]
        rows.append([CONTENDERS[name], DTYPES[figures["dtype"]], speed, ratio, f"{figures['peak_mem_mb']:.0f}",
                     f"{figures['memory_vs_ours_st']:.2f}x", f"{figures['mfu']:.0%}", f"{figures['cpu_share']:.0%}",
                     "other pooling" if cosine is None else f"{cosine:.5f}"])
    return markdown_table(["contender", "dtype", "tokens/s", "vs ours_st", "working MB", "vs ours_st",
                           "MFU (real tokens)", "CPU share", "min cosine to ours_st"], rows, "llrrrrrrr")


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


def package_pairs(record: dict) -> str:
    """The package-source miner's report: per language, packages mined of those listed (refused and failed ones
    counted apart), documented functions found, pairs kept, and the drops by reason (largest first)."""
    rows = []
    for language, figures in record["metrics"]["languages"].items():
        dropped = "; ".join(f"{reason}: {count:,}" for reason, count in figures["dropped"].items()) or "none"
        rows.append([language, f"{figures['packages_mined']} of {figures['packages']}", str(len(figures["refused"])),
                     str(len(figures["failed"])), f"{figures['functions']:,}", f"**{figures['pairs']:,}**", dropped])
    totals = record["metrics"]["totals"]
    rows.append(["all", str(totals["packages"]), "", "", f"{totals['functions']:,}", f"**{totals['pairs']:,}**", ""])
    table = markdown_table(["language", "packages mined", "refused (upstream)", "failed (fetch)",
                            "documented functions", "pairs", "dropped, by reason"], rows, "lrrrrrl")
    if "cpu_seconds" not in record["metrics"]:
        return table
    seconds, cpu = record["metrics"]["seconds"], record["metrics"]["cpu_seconds"]
    return (f"{table}\n\nThe run: {seconds:,.0f} s wall, {cpu:,.0f} CPU-seconds (downloads, unpacking, parsing, "
            f"filters and the benchmark index together; {cpu / max(totals['packages'], 1):.1f} CPU-s per package).")


def semble_row(record: dict, method: str) -> dict:
    """One method's summary in a semble-benchmark record, with its mean of distinct files in a top 10."""
    metrics = record["metrics"]
    per_repo = metrics["per_repo"][method].values()
    return {**metrics["summary"][method], "distinct_files": mean(repo["distinct_files"] for repo in per_repo)}


def codesearch_semble(default: dict, priors_off: dict, listed_places: dict, peer: dict) -> str:
    """NDCG@10 overall and per query category of each ranking, with and without the code priors, beside semble run
    here (`--method semble`) and semble's published hybrid on the same repositories; the last codesearch row credits
    any place a file hit lists."""
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
    for method in peer["metrics"]["summary"]:
        row = semble_row(peer, method)
        rows.append([method, number(row["overall"]), *(number(row["categories"][name]) for name in SEMBLE_CATEGORIES),
                     number(row["distinct_files"], 2)])
    for title, score in default["metrics"]["published"].items():
        rows.append([f"{title}, same repositories", number(score), *[""] * (len(SEMBLE_CATEGORIES) + 1)])
    return markdown_table(["ranking", "NDCG@10", *SEMBLE_CATEGORIES, "distinct files in a top 10"], rows,
                          "l" + "r" * (len(SEMBLE_CATEGORIES) + 2))


def codesearch_semble_places(record: dict) -> str:
    """Per half of the fixed split (test first, the headline): each ranking's place-level NDCG@10 and MRR@10 (the
    first place of each file hit against the project's span annotations), listed-places NDCG@10 and semble's
    file-level NDCG@10, semble's published rows in the file column only; then which queries were annotated."""
    metrics = record["metrics"]
    levels = ("place", "place_rr", "listed_places", "file")
    rows = []
    for half, summaries in metrics["by_half"].items():
        repos = metrics["halves"][half]
        for method, summary in summaries.items():
            rows.append([f"{half} ({len(repos)} repositories)", method.removeprefix("codesearch "),
                         *(number(summary[level]["overall"]) if summary[level]["overall"] is not None else ""
                           for level in levels)])
        published = {label: mean(scores[name] for name in repos)
                     for label, scores in metrics["published_per_repo"].items()}
        rows += [[f"{half} ({len(repos)} repositories)", f"{label}, file level only", "", "", "", number(score)]
                 for label, score in published.items()]
    table = markdown_table(["half", "ranking", "place NDCG@10", "place MRR@10", "listed places NDCG@10",
                            "file NDCG@10 (semble's)"], rows, "llrrrr")
    spans = metrics["spans"]
    missing = ", ".join(f"{name} ({count})" for name, count in spans["not_annotated"].items())
    return (f"{table}\n\nAnnotated with places: {len(spans['annotated_repos'])} repositories "
            f"({', '.join(spans['annotated_repos'])}); queries not annotated, out of the place level: "
            f"{missing or 'none'}. Used to choose: {metrics['used_to_choose'] or 'nothing (a report)'}.")


def codesearch_semble_precision(float32: dict, binary: dict) -> str:
    """Dense and hybrid NDCG@10 at float32 and at binary precision (Hamming search, the best rows rescored), the same
    indexes and crediting, with the language whose score moves most and the repositories' median query p50."""
    rows = []
    for precision, record in (("float32", float32), ("binary, rescored", binary)):
        for method in ("codesearch dense", "codesearch hybrid"):
            summary, reference = record["metrics"]["summary"][method], float32["metrics"]["summary"][method]
            moved = max(summary["languages"], key=lambda name: abs(summary["languages"][name]
                                                                    - reference["languages"][name]))
            change = summary["languages"][moved] - reference["languages"][moved]
            rows.append([precision, method.removeprefix("codesearch "), number(summary["overall"]),
                         f"{moved} {change:+.3f}" if record is not float32 else "",
                         number(median(repo["p50_ms"] for repo in record["metrics"]["per_repo"][method].values()), 1)])
    return markdown_table(["precision", "ranking", "NDCG@10", "language that moves most",
                           "query p50 ms, median over repositories"], rows, "llrlr")


def codesearch_semble_languages(record: dict, *peers: dict) -> str:
    """NDCG@10 per language (the mean of its repositories) of each ranking (not the fusion sweep's weights), then of
    each method of the `peers` records (semble run here) and the published rows they carry."""
    summaries = {method.removeprefix("codesearch "): summary for one in (record, *peers)
                 for method, summary in one["metrics"]["summary"].items() if FUSION_SWEEP not in method}
    summaries |= {label: {"languages": languages} for peer in peers
                  for label, languages in peer["metrics"].get("published_languages", {}).items()
                  if label.startswith("semble")}
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


PLACE_RANKINGS = {"dense": "dense", "bm25": "BM25", "hybrid": "hybrid (default)"}


def codesearch_package_places(record: dict) -> str:
    """Per language and half: place-level MRR@10 (hit@10) of codesearch's output, the answer counted only as the
    first place of its file, then file-level, for dense, BM25 and hybrid."""
    metrics = record["metrics"]
    rows = []
    for language, halves in metrics["languages"].items():
        for half in ("dev", "test", "both") if language == "all" else ("dev", "test"):
            if half not in halves:
                continue
            figures = halves[half]
            cells = [f"{number(figures[ranking][f'{level}_mrr@10'])} ({number(figures[ranking][f'{level}_hit@10'])})"
                     for level in ("place", "file") for ranking in PLACE_RANKINGS]
            title = f"**{language}**" if language == "all" else language
            rows.append([title, half, str(figures["hybrid"]["queries"]), *cells])
    names = list(PLACE_RANKINGS.values())
    return markdown_table(["language", "half", "queries", *(f"place: {name}" for name in names),
                           *(f"file: {name}" for name in names)], rows, "lllrrrrrr")


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


def codesearch_static_twin_quality(record: dict) -> str:
    """Dense and hybrid NDCG@10 (place level, then semble's file level) on semble's dev half: the teacher, each
    static twin with its recipe, and the twin's hybrid place-level difference to the teacher against the goal."""
    quality = record["metrics"]["quality"]
    rows = []
    for name, models in quality["models"].items():
        recipe = record["metrics"]["twins"].get(name, {})
        made = (f"{recipe['token_vectors']}, d={recipe['dimensions']}, SIF {recipe['sif_coefficient']:g}"
                if recipe else "the full model")
        difference = quality["twin_minus_teacher"].get(name, {}).get("hybrid", {}).get("place")
        if name == "teacher, first answer":
            made = "the full model over BM25's best 100 (`--first-answer fast`)"
        rows.append([name, made, *(number(models[ranking][level]["overall"]) if ranking in models else ""
                                   for ranking in ("dense", "hybrid") for level in ("place", "file")),
                     "" if difference is None else f"{difference:+.3f}"
                     + ("" if quality["goal_holds"][name] else " (goal: -0.030)")])
    return markdown_table(["model", "made as", "dense place", "dense file", "hybrid place", "hybrid file",
                           "hybrid place - full model"], rows, "llrrrrr")


def codesearch_static_twin_speed(record: dict) -> str:
    """CPU seconds to the answer and for the whole command on a fresh folder, the teacher against the twin."""
    speed = record["metrics"]["speed"]
    rows = [[way, number(run["answer_cpu_s"], 2), number(run["total_cpu_s"], 2), number(run["answer_wall_s"], 1)]
            for way, run in speed["ways"].items()]
    return markdown_table([f"{speed['folder']} ({speed['files']} files), fresh", "answer, CPU-s",
                           "whole command, CPU-s", "answer, wall s"], rows, "lrrr")


def codesearch_encoder(record: dict) -> str:
    """CPU seconds per 100 pieces of each ONNX export's attention (median and range over rounds), its cosine to the
    torch model, and the median per-round ratio to the export as the model loads its attention."""
    metrics = record["metrics"]
    rows = []
    for attention, seconds in metrics["cpu_s_per_100_pieces"].items():
        runs = metrics["cpu_s_per_100_pieces_runs"][attention]
        rows.append(["eager (default)" if attention == "eager" else "as the model loads it (SDPA)",
                     number(seconds, 2), f"{min(runs):.2f}-{max(runs):.2f}",
                     number(metrics["parity_cosine_to_torch"][attention], 7),
                     number(metrics["ratio_eager_to_model"]) if attention == "eager" else ""])
    return markdown_table(["attention traced as", "CPU-s per 100 pieces", "range", "cosine to torch",
                           "eager / as loaded"], rows, "lrrrr")


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


def codesearch_quality_configs(record: dict) -> str:
    """MRR@10, hit@1 and hit@10 over all queries of every ranking configuration of a codesearch_quality record."""
    title, everything = quality_set(record, "All packages")
    rows = []
    for config, figures in everything.items():
        if isinstance(figures, dict):
            cells = [*config.split(" / "), *(number(figures[name]) for name in ("mrr@10", "hit@1", "hit@10"))]
            rows.append([f"**{cell}**" for cell in cells] if config == DEFAULT_RANKING else cells)
    return markdown_table([f"ranking ({everything['queries']} queries, {everything['pieces']:,} pieces)", "tests",
                           "non-code", "MRR@10", "hit@1", "hit@10"], rows, "lllrrr")


def tokens_per_piece(record: dict) -> int:
    # records written before codesearch_quality.py recorded it ran at codesearch's default
    return record["metrics"].get("max_seq_length", DEFAULT_TOKENS_PER_PIECE)


def codesearch_tokens_per_piece(*records: dict) -> str:
    """MRR@10 / hit@1 / hit@10 of each ranking (tests and non-code demoted) at each record's tokens per piece."""
    sets = [quality_set(record, "All packages")[1] for record in records]
    titles = [f"{tokens_per_piece(record)} tokens" + (" (default)" if tokens_per_piece(record) ==
                                                      DEFAULT_TOKENS_PER_PIECE else "") for record in records]
    rows = [[ranking, *(quality_triple(figures[f"{ranking} / demote / demote"]) for figures in sets)]
            for ranking in ("dense", "bm25", "hybrid")]
    header = f"ranking ({sets[0]['queries']} queries; tests, non-code demoted): MRR@10 / hit@1 / hit@10"
    return markdown_table([header, *titles], rows, "l" * (len(records) + 1))


def codesearch_precision_large(record: dict) -> str:
    """The large package's index per precision: memory, disk, switch time, scan and new-query latency."""
    large = record["metrics"]["large"]
    rows = [[precision, f"{figures['resident_bytes']:,}", f"{figures['index_bytes'] / 1e6:.0f}",
             number(figures["switch_s"], 1), number(figures["dense_scan_ms"], 1),
             f"{figures['new_query_in_process_ms']:.0f}", number(figures["new_query_command_s"], 2),
             f"{figures['command_peak_rss_mib']:.0f}"] for precision, figures in large["precisions"].items()]
    return markdown_table([f"precision ({large['package']} {large['version']}: {large['pieces']:,} pieces)",
                           "resident vector bytes", "index on disk, MB", "switch to it, s", "dense scan ms",
                           "new query in process, ms", "new query, command, s", "command peak RSS MiB"], rows)


def codesearch_speed(record: dict) -> str:
    """Each step of codesearch_speed.py per backend: runs, wall seconds (median and range), CPU seconds, peak RSS,
    pieces/s of the cold build, and the goal of the steps that have one."""
    metrics = record["metrics"]
    rows = []
    for backend, steps in metrics["backends"].items():
        for step, runs in steps.items():
            wall = [run["wall_s"] for run in runs]
            middle = median(wall)
            title = metrics["steps"][step]  # as codesearch_speed.py describes its steps
            goal = SPEED_GOALS.get(step)
            verdict = f"< {goal:g} s: {'met' if middle < goal else 'not met'}" if goal else ""
            if goal and backend in SPEED_DEFAULT_BACKENDS:
                title, verdict = f"**{title}**", f"**{verdict}**"
            rows.append([title, SPEED_BACKENDS.get(backend, backend), str(len(runs)), number(middle, 2),
                         f"{number(min(wall), 2)}-{number(max(wall), 2)}" if len(runs) > 1 else "",
                         number(median(run["cpu_s"] for run in runs), 1),
                         f"{median(run['peak_rss_mib'] for run in runs):.0f}",
                         number(metrics["pieces"] / middle, 1) if step == "build" else "", verdict])
    return markdown_table([f"step ({metrics['package']} {metrics['version']}: {metrics['files']:,} files, "
                           f"{metrics['pieces']:,} pieces, {metrics['distinct']:,} distinct texts)", "backend", "runs",
                           "wall s, median", "min-max", "CPU s, median", "peak RSS MiB", "pieces/s", "goal"],
                          rows, "llrrrrrrl")


def codesearch_gpu_index(*records: dict) -> str:
    """Cold builds of codesearch_speed.py with --device, one row per package and device: size, wall and CPU seconds,
    the model loads (GPU: torch, CUDA and the model; onnx: with the one-time export), the embedding stage's pieces
    per second (from the first embedding call, so the model load inside it included), and whether the hits match."""
    rows = []
    for record in records:
        metrics = record["metrics"]
        for position, (label, steps) in enumerate(metrics["backends"].items()):
            build = steps["build"][0]
            loads = ", ".join(f"{load['how']} {number(load['seconds'], 1)}" for load in metrics["model_loads"][label])
            same = "yes" if metrics["same_hits_as_first"][label] else "no"
            rows.append([f"{metrics['package']} {metrics['version']}", f"{metrics['files']:,}",
                         f"{metrics['pieces']:,}", label.rpartition("--device ")[2], number(build["wall_s"], 1),
                         number(build["cpu_s"], 0), loads, f"{metrics['rates'][label].get('embedding pieces', 0):,}",
                         same if position else "(first)"])
    return markdown_table(["package", "files", "pieces", "--device", "cold build, wall s", "CPU s",
                           "model loads, s", "embedding, pieces/s", "top 5 as the package's first row"], rows,
                          "lrrlrrlrl")


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


# encode_speed.py's goals: ours against the published approach, bf16 against our fp32 (docs/speed.md)
ENCODE_GOALS = {"throughput_vs_published": 1.5, "memory_vs_published": 0.5, "bf16_speedup": 2.5,
                "bf16_mfu_fraction": 0.75, "pma_share": 0.02}
# published_reference's batch orders, as the architecture page names them
BATCH_ORDERS = {"length-sorted batches": "sorted by length (sentence-transformers, so mteb)",
                "batches in input order": "in input order"}


def goal_status(met: bool) -> str:
    return "met" if met else "MISSED"


def encode_speed_goal_rows(contenders: dict) -> list[list[str]]:
    """The goals table of an encode_speed run's contenders: the measured value, the target, met or missed (the bf16
    goals: not measured when the bf16 contenders were left out)."""
    published, ours = contenders["published_approach"], contenders["ours_st"]
    speed, memory = 1 / published["throughput_vs_ours_st"], 1 / published["memory_vs_ours_st"]
    speed_cpu = 1 / published["throughput_vs_ours_st_cpu_time"]
    rows = [
        ["ours_st / published_approach, tokens/s (fp32; per CPU second)", f"{speed:.2f}x ({speed_cpu:.2f}x)",
         f">= {ENCODE_GOALS['throughput_vs_published']}x",
         goal_status(speed >= ENCODE_GOALS["throughput_vs_published"])],
        ["ours_st / published_approach, working memory (fp32)", f"{memory:.2f}x",
         f"<= {ENCODE_GOALS['memory_vs_published']}x", goal_status(memory <= ENCODE_GOALS["memory_vs_published"])],
    ]
    if "ours_st_bf16" not in contenders:
        rows.append([f"bf16 goals (speed-up >= {ENCODE_GOALS['bf16_speedup']}x, MFU >= "
                     f"{ENCODE_GOALS['bf16_mfu_fraction']:.0%})", "not measured", "",
                     "this CPU has no native bf16 (--bf16 yes to time it emulated)"])
        if "ours_st_compiled" in contenders:
            rows.append(["ours_st_compiled / ours_st, tokens/s (fp32)",
                         f"{contenders['ours_st_compiled']['throughput_vs_ours_st']:.2f}x", "", ""])
        rows += [[f"{name} MFU, fp32, real tokens (no goal: the goal is for bf16)", f"{contenders[name]['mfu']:.1%}",
                  "", ""] for name in ("ours_st", "ours_st_compiled") if name in contenders]
        pma = ours["pma_share"]
        return rows + [["PMA share of encode time (fp32)", f"{pma:.2%}", f"< {ENCODE_GOALS['pma_share']:.0%}",
                        goal_status(pma < ENCODE_GOALS["pma_share"])]]
    bf16, published_bf16 = contenders["ours_st_bf16"], contenders["published_approach_bf16"]
    speed_bf16 = bf16["throughput_vs_ours_st"] / published_bf16["throughput_vs_ours_st"]
    memory_bf16 = bf16["memory_vs_ours_st"] / published_bf16["memory_vs_ours_st"]
    speedup = bf16["throughput_vs_ours_st"]
    rows += [
        ["ours_st_bf16 / published_approach_bf16, tokens/s (bf16)", f"{speed_bf16:.2f}x",
         f">= {ENCODE_GOALS['throughput_vs_published']}x",
         goal_status(speed_bf16 >= ENCODE_GOALS["throughput_vs_published"])],
        ["ours_st_bf16 / published_approach_bf16, working memory (bf16)", f"{memory_bf16:.2f}x",
         f"<= {ENCODE_GOALS['memory_vs_published']}x", goal_status(memory_bf16 <= ENCODE_GOALS["memory_vs_published"])],
        ["ours_st_bf16 / ours_st, tokens/s (per CPU second)",
         f"{speedup:.2f}x ({bf16['throughput_vs_ours_st_cpu_time']:.2f}x)", f">= {ENCODE_GOALS['bf16_speedup']}x",
         goal_status(speedup >= ENCODE_GOALS["bf16_speedup"])],
        ["ceiling: this CPU's bf16 / fp32 matmul peak (best probes)",
         f"{bf16['matmul_peak_gflops_per_cpu_s'] / ours['matmul_peak_gflops_per_cpu_s']:.2f}x", "", ""],
    ]
    target = ENCODE_GOALS["bf16_mfu_fraction"]
    for name in ("ours_st_bf16", "ours_st_bf16_compiled"):
        if name in contenders:
            mfu = contenders[name]
            rows += [[f"{name} MFU, computed positions (the goal's basis)", f"{mfu['mfu_computed_tokens']:.1%}",
                      f">= {target:.0%}", goal_status(mfu["mfu_computed_tokens"] >= target)],
                     [f"{name} MFU, real tokens only (padding = waste)", f"{mfu['mfu']:.1%}", f">= {target:.0%}",
                      goal_status(mfu["mfu"] >= target)]]
    pma = max(ours["pma_share"], bf16["pma_share"])
    return rows + [["PMA share of encode time (worst of fp32, bf16)", f"{pma:.2%}",
                    f"< {ENCODE_GOALS['pma_share']:.0%}", goal_status(pma < ENCODE_GOALS["pma_share"])]]


def encode_speed_goals(record: dict) -> str:
    """The project's speed and memory goals against an encode_speed run."""
    return markdown_table(["goal", "measured", "target", "status"], encode_speed_goal_rows(
        record["metrics"]["contenders"]), "lrrl")


def encode_speed_padding(record: dict) -> str:
    """The share of computed positions that is padding: measured in a run's forward passes, and computed from token
    counts for a larger sample, with length-sorted packed batches (ours), sorted padded and unsorted padded ones."""
    rows = [[row["corpus"], str(row["batch_size"]),
             *(f"{row[layout]:.1%}" for layout in ("sorted_packed", "sorted_padded", "unsorted_padded"))]
            for row in record["metrics"]["padding"]]
    return markdown_table(["padding (share of computed positions)", "batch", "sorted + packed (ours)",
                           "sorted, padded", "unsorted, padded"], rows, "lrrrr")


def encode_speed_runs(*records: dict) -> str:
    """encode_speed runs side by side: batch, corpus and machine, then ours_st and ours_st_bf16 tokens/s, the bf16
    speed-up, its MFU and the share of the cores the contenders got."""
    rows = []
    for record in records:
        corpus, contenders = record["metrics"]["corpus"], record["metrics"]["contenders"]
        shares = [figures["cpu_share"] for figures in contenders.values()]
        bf16 = contenders.get("ours_st_bf16")
        bf16_cells = ([number(bf16["tokens_per_s"], 1), f"{bf16['throughput_vs_ours_st']:.2f}x", f"{bf16['mfu']:.0%}"]
                      if bf16 else ["not run", "", ""])
        rows.append([str(corpus["batch_size"]), str(corpus["rounds"]),
                     f"{corpus['texts']} texts, {corpus['real_tokens']:,} tokens ({corpus['tokens_min']}-"
                     f"{corpus['tokens_max']} each, median {corpus['tokens_median']:.0f})",
                     record["machine"].split(";")[0], number(contenders["ours_st"]["tokens_per_s"], 1), *bf16_cells,
                     f"{min(shares):.0%}-{max(shares):.0%}"])
    return markdown_table(["batch", "rounds", "corpus", "machine", "ours_st tokens/s", "ours_st_bf16 tokens/s",
                           "bf16 vs ours_st", "bf16 MFU", "CPU share"], rows, "rrllrrrrr")


def profile_encode(record: dict) -> str:
    """Self CPU time of ours_st's encode per operator group and dtype, then the attention kernel's FLOP rate beside
    the matmul ceiling of its dtype."""
    dtypes = record["metrics"]["dtypes"]
    groups = next(iter(dtypes.values()))["groups"]
    rows = [[group, *(f"{number(figures['groups'][group]['seconds'], 1)} s "
                      f"({figures['groups'][group]['share']:.0%})" for figures in dtypes.values())]
            for group in groups]
    rows.append(["total self CPU time", *(f"{number(figures['total_s'], 1)} s" for figures in dtypes.values())])
    attention = [[name, number(kernel["gflop"], 1), number(kernel["seconds"], 2), f"{kernel['gflops_per_s']:.0f}",
                  f"{kernel['vs_matmul_ceiling']:.0%}"]
                 for name, kernel in ((name, figures["attention"]) for name, figures in dtypes.items())]
    return (markdown_table(["operator group (self CPU time)", *dtypes], rows, "l" + "r" * len(dtypes)) + "\n\n"
            + markdown_table(["attention kernel", "GFLOP", "self CPU s", "GFLOP/s", "vs matmul ceiling"], attention,
                             "lrrrr"))


def attention_variants(record: dict) -> str:
    """One layer's packed-batch attention per variant and dtype: milliseconds, speed against what the model runs,
    and the largest deviation from the float32 reference."""
    rows = [[dtype, name, number(figures["seconds"] * 1000, 1), f"{figures['speed_vs_per_sequence_sdpa']:.2f}x",
             f"{figures['max_abs_error_vs_fp32']:.1e}"]
            for dtype, variants in record["metrics"]["variants"].items() for name, figures in variants.items()]
    return markdown_table(["dtype", "variant", "ms per layer", "speed vs per_sequence_sdpa", "max abs error vs fp32"],
                          rows, "llrrr")


def published_padding(record: dict) -> str:
    """The published PMA's padding effect: min / median cosine of a text's vector in a batch against alone, per
    batch order and size."""
    metrics = record["metrics"]
    batches = metrics["batches"]
    caption = (f"{metrics['texts']} texts of {metrics['tokens_min']:,} to {metrics['tokens_max']:,} tokens (cut at "
               f"{metrics['max_length']:,}), {metrics['padding_side']} padding, hidden {metrics['hidden_size']}, "
               f"d {metrics['pma_dim']}:\n\n")
    rows = [[title, *(f"{number(batches[size][order]['min'], 4)} / {number(batches[size][order]['median'], 4)}"
                      for size in batches)] for order, title in BATCH_ORDERS.items()]
    return caption + markdown_table(["batches", *(f"batch of {size}: min / median" for size in batches)], rows,
                                    "l" + "r" * len(batches))


def evaluation_ndcg(record: dict) -> str:
    """nDCG@10 of every model of an evaluation record on each of its benchmark folders: each model, then its
    truncated widths (`label@width`), widest first."""
    sets = list(record["metrics"]["sets"])

    def order(label: str) -> tuple[str, int]:
        model, _, width = label.partition("@")
        return model, -int(width or sys.maxsize)

    models = record["metrics"]["models"]
    rows = [[label, *(number(models[label][data]["ndcg@10"]) for data in sets)] for label in sorted(models, key=order)]
    return markdown_table(["model", *(SET_NAMES.get(data, data) for data in sets)], rows, "l" + "r" * len(sets))


# table name -> (the records it reads, in the order the function takes them; the function)
def mib(value: float | None) -> str:
    """A peak-memory figure of the GPU benchmark; None where the device reports none (a CPU run)."""
    return "-" if value is None else f"{value:.0f}"


def gpu_encode(record: dict) -> str:
    """python -m benchmarks.gpu, part encode: ours against the published approach at each shape and sweep point."""
    rows = []
    for shape, figures in record["metrics"]["shapes"].items():
        for point in figures["sweep"]:
            cells = []
            for name in ("ours", "published_approach"):
                run = point.get(name, {})
                cells += ([number(run["tokens_per_s"], 0), mib(run["peak_mib"])] if "tokens_per_s" in run else
                          ["out of memory" if "out_of_memory" in run else point.get("skipped", "-"), "-"])
            ours, published = point.get("ours", {}), point.get("published_approach", {})
            ratio = (f"{ours['tokens_per_s'] / published['tokens_per_s']:.2f}x"
                     if "tokens_per_s" in ours and "tokens_per_s" in published else "-")
            rows.append([shape, str(point["batch"]), str(point["length"]), *cells, ratio])
    return markdown_table(["shape", "batch", "tokens per text", "ours tokens/s", "ours peak MiB",
                           "published tokens/s", "published peak MiB", "ours vs published"], rows, "lrrrrrrr")


def gpu_attention(record: dict) -> str:
    """python -m benchmarks.gpu, part encode: the attention kernel each SDPA backend (and flash-attn 2) ran, and
    the lowest cosine of its embeddings to eager attention's on a padded batch."""
    rows = []
    for shape, figures in record["metrics"]["shapes"].items():
        for backend, result in figures["attention"]["backends"].items():
            rows.append([shape, backend, ", ".join(result["kernels"]) if result["ran"] else "did not run",
                         f"{result['min_cosine_vs_eager']:.5f}" if result["ran"] else result["reason"]])
    return markdown_table(["shape", "backend asked", "kernel that ran", "min cosine to eager / why not"], rows,
                          "llll")


def gpu_train(record: dict) -> str:
    """python -m benchmarks.gpu, part train: optimizer steps per setup, real tokens/s, memory and MFU."""
    metrics = record["metrics"]
    rows = []
    for setup in metrics["setups"]:
        switches = [setup["mode"], "on" if setup["gradient_checkpointing"] else "off",
                    "on" if setup["packing"] else "off"]
        if "tokens_per_s" not in setup:
            rows.append([*switches, "out of memory" if "out_of_memory" in setup else setup.get("skipped", "-"),
                         "-", "-", "-"])
            continue
        rows.append([*switches, number(setup["tokens_per_s"], 0), number(setup["step_seconds"], 3),
                     mib(setup["peak_mib"]), f"{setup['mfu']:.1%}"])
    return markdown_table(["training", "gradient checkpointing", "packing", "tokens/s", "step s", "peak MiB",
                           "MFU"], rows, "lllrrrr")


def gpu_serving(record: dict) -> str:
    """python -m benchmarks.gpu, part serving: the server per concurrency level against in-process encode."""
    rows = [[str(level["concurrency"]), str(level["requests"]), str(level["errors"]), f"{level['p50_s'] * 1000:.0f}",
             f"{level['p99_s'] * 1000:.0f}", number(level["texts_per_s"], 1), number(level["vs_in_process"], 2)]
            for level in record["metrics"]["levels"]]
    return markdown_table(["concurrency", "requests", "errors", "p50 ms", "p99 ms", "texts/s", "x in-process"],
                          rows, "rrrrrrr")


def gpu_recipe(record: dict) -> str:
    """python -m benchmarks.gpu, part recipe: the recipe and each ablation run, nDCG@10 per benchmark."""
    metrics = record["metrics"]
    runs = {"recipe": metrics.get("recipe_scores", {}), **metrics.get("ablation_scores", {})}
    benchmarks = sorted({name for scores in runs.values() for name in scores})
    stops = metrics.get("ablation_stops", {})
    rows = [[run, *(number(scores[name]) if name in scores else "-" for name in benchmarks),
             str(stops.get(run, "-")) if run != "recipe" else "-"] for run, scores in runs.items()]
    return markdown_table(["run", *(f"{SET_NAMES.get(name, name)} nDCG@10" for name in benchmarks),
                           "stopped at step"], rows, "l" + "r" * (len(benchmarks) + 1))


TABLES: dict[str, tuple[tuple[str, ...], Callable[..., str]]] = {
    "offline_quality": (("offline_quality",), offline_quality),
    "package_pairs": (("package_pairs",), package_pairs),
    "compact_embeddings": (("compact_embeddings",), compact_embeddings),
    "compact_embeddings_per_set": (("compact_embeddings",), compact_embeddings_per_set),
    "evaluation_bm25": (("evaluation_bm25",), evaluation_bm25),
    "offline_quality_all": (("offline_quality",), evaluation_ndcg),
    "encode_speed": (("encode_speed",), encode_speed),
    "train_speed": (("train_speed",), train_speed),
    "serving_load": (("serving_load",), serving_load),
    "serving_load_repeat": (("serving_load_repeat",), serving_load),
    "serving_corpus": (("serving_corpus",), serving_corpus),
    "codesearch_semble": (("codesearch_semble", "codesearch_semble_priors_off", "codesearch_semble_listed_places",
                           "codesearch_semble_peer"), codesearch_semble),
    "codesearch_semble_languages": (("codesearch_semble", "codesearch_semble_peer"), codesearch_semble_languages),
    "codesearch_semble_places": (("codesearch_semble_places",), codesearch_semble_places),
    "codesearch_semble_precision": (("codesearch_semble_listed_places", "codesearch_semble_binary"),
                                    codesearch_semble_precision),
    "codesearch_fusion": (("codesearch_semble", "codesearch_quality"), codesearch_fusion),
    "codesearch_heldout": (("codesearch_heldout", "codesearch_heldout_files"), codesearch_heldout),
    "codesearch_package_places": (("codesearch_package_places",), codesearch_package_places),
    "codesearch_first_answer_quality": (("codesearch_semble_first_answer", "codesearch_quality_first_answer"),
                                        codesearch_first_answer_quality),
    "codesearch_first_answer_languages": (("codesearch_semble_first_answer",), codesearch_semble_languages),
    "codesearch_first_answer": (("codesearch_first_answer",), codesearch_first_answer),
    "codesearch_encoder": (("codesearch_encoder",), codesearch_encoder),
    "codesearch_static_twin_quality": (("codesearch_static_twin",), codesearch_static_twin_quality),
    "codesearch_static_twin_speed": (("codesearch_static_twin",), codesearch_static_twin_speed),
    "codesearch_quality": (("codesearch_quality",), codesearch_quality),
    "codesearch_quality_js_go": (("codesearch_quality_js_go",), codesearch_quality_sets),
    "codesearch_hits": (("codesearch_quality", "codesearch_quality_places", "codesearch_quality_js_go",
                         "codesearch_quality_js_go_places"), codesearch_hits),
    "codesearch_repeated_places": (("codesearch_quality_pieces", "codesearch_quality_places", "codesearch_quality"),
                                   codesearch_repeated_places),
    "codesearch_precision": (("codesearch_precision",), codesearch_precision),
    "codesearch_precision_large": (("codesearch_precision",), codesearch_precision_large),
    "codesearch_quality_source": (("codesearch_quality_source",), codesearch_quality_configs),
    "codesearch_tokens_per_piece": (("codesearch_quality", "codesearch_quality_256"), codesearch_tokens_per_piece),
    "codesearch_speed": (("codesearch_speed",), codesearch_speed),
    "codesearch_speed_transformers": (("codesearch_speed_transformers",), codesearch_speed),
    "codesearch_gpu_index": (("codesearch_speed_gpu_pip", "codesearch_speed_gpu_transformers"), codesearch_gpu_index),
    "codesearch_store": (("codesearch_store",), codesearch_store),
    "codesearch_mcp": (("codesearch_mcp",), codesearch_mcp),
    "encode_speed_goals": (("encode_speed",), encode_speed_goals),
    "encode_speed_padding": (("encode_speed",), encode_speed_padding),
    "encode_speed_runs": (("encode_speed", "encode_speed_batch16", "encode_speed_avx512bf16",
                           "encode_speed_batch16_avx512bf16"), encode_speed_runs),
    "profile_encode": (("profile_encode",), profile_encode),
    "attention_variants": (("attention_variants",), attention_variants),
    # the same benchmarks on the earlier machine, whose CPU computes bfloat16 (avx512_bf16): this one cannot re-run
    # their bf16 rows
    "encode_speed_avx512bf16": (("encode_speed_avx512bf16",), encode_speed),
    "encode_speed_goals_avx512bf16": (("encode_speed_avx512bf16",), encode_speed_goals),
    "profile_encode_avx512bf16": (("profile_encode_avx512bf16",), profile_encode),
    "attention_variants_avx512bf16": (("attention_variants_avx512bf16",), attention_variants),
    "published_padding": (("published_padding",), published_padding),
    # python -m benchmarks.gpu; the gpu_tiny records are its --tiny run on the project's CPU (the code path of a
    # lent GPU, at tiny sizes); a GPU run's records (gpu_encode, ...) join them under their own names
    "gpu_tiny_encode": (("gpu_tiny_encode",), gpu_encode),
    "gpu_tiny_attention": (("gpu_tiny_encode",), gpu_attention),
    "gpu_tiny_train": (("gpu_tiny_train",), gpu_train),
    "gpu_tiny_recipe": (("gpu_tiny_recipe",), gpu_recipe),
    "gpu_tiny_serving": (("gpu_tiny_serving",), gpu_serving),
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
    """Below each table: the record it comes from (machine and load are in it), its commit and command; a record
    transcribed from a run's printed report (``converted_from``) says so, so no reader takes it for a fresh run."""
    link = Path(os.path.relpath(record_path, page.parent)).as_posix()
    commit = record["commit"][:COMMIT_CHARS] + (" + uncommitted changes" if "uncommitted" in record["commit"] else "")
    transcribed = ", transcribed from its printed report, not re-run" if "converted_from" in record else ""
    return f"From [{record_path.name}]({link}) (commit {commit}{transcribed}): `{record['command']}`"


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
