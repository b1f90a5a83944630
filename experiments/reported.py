"""The offline benchmarks the experiments report, and the short names their tables use.

Folder names under ../shared/data/benchmarks; cosqa_dev is left out: it is kept for tuning.
"""

REPORTED_OFFLINE_BENCHMARKS = (
    "cosqa_test", "mbpp", "humaneval", "spider_dev_text2sql", "conala_en", "csn_python_from_cosqa_codebase",
    "humanevalx_py2cpp", "humanevalx_py2rust", "codexglue_refine_small_test",
)
SHORT_BENCHMARK_NAMES = {"spider_dev_text2sql": "spider", "csn_python_from_cosqa_codebase": "csn-style",
                         "humanevalx_py2cpp": "py2cpp", "humanevalx_py2rust": "py2rust",
                         "codexglue_refine_small_test": "refine"}
