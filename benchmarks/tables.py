"""What the benchmarks' table functions share: number formatting, the one Markdown table writer, the evaluation
sets' short names and readers of the codesearch records that several tables use.

Each benchmark module declares the tables of the docs it feeds at its end (`TABLES`: table name -> (the records
the function reads, in order; the function)); `python -m benchmarks.render` finds them there. This module imports
nothing heavy, so every benchmark can import it.
"""

from c2llm_data.markdown import markdown_table  # noqa: F401 (the one table writer, for every table function)

DECIMALS = 3

# The nine sets of the offline default model's table, as the README names them.
NINE_SETS = {"cosqa_test": "cosqa", "mbpp": "mbpp", "humaneval": "humaneval", "spider_dev_text2sql": "spider",
             "conala_en": "conala", "csn_python_from_cosqa_codebase": "csn-style", "humanevalx_py2cpp": "py2cpp",
             "humanevalx_py2rust": "py2rust", "codexglue_refine_small_test": "refine"}
# the other shared folders' short names in tables
SET_NAMES = NINE_SETS | {"codexglue_java2cs_test": "java2cs", "humanevalx_py2go": "py2go",
                         "humanevalx_py2js": "py2js", "cosqa_dev": "cosqa_dev"}
# the set whose validation pairs the default model trained on, so its score is in-distribution
IN_DISTRIBUTION = "codexglue_refine_small_test"
# the fusion sweep's rankings in a record: "hybrid, dense weight 0.4" (benchmarks.common.dense_weight_labels)
FUSION_SWEEP = "dense weight"


def number(value: float, decimals: int = DECIMALS) -> str:
    return f"{value:.{decimals}f}"


def quality_set(record: dict, title_prefix: str) -> tuple[str, dict]:
    """(title, figures) of the set of a codesearch_quality record whose title starts with `title_prefix`."""
    return next((title, figures) for title, figures in record["metrics"]["sets"].items()
                if title.startswith(title_prefix))


def quality_triple(figures: dict) -> str:
    return " / ".join(number(figures[name]) for name in ("mrr@10", "hit@1", "hit@10"))
