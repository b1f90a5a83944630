"""One BM25 tokenizer (c2llm_data.tokens): codesearch's index and the evaluation's BM25 baseline split text into the
same words."""

import gc
import time

import pytest

from c2llm_data.tokens import code_tokens, snake_case_identifiers

SAMPLE = '''def load_json_file(path: str) -> dict:
    """Parse HTTPResponse bodies; x = getUserName(user_id) + 2"""
    return __import__("json").loads(open(path).read())  # i/o
'''


def test_the_evaluation_baseline_tokenizes_as_codesearch_does():
    from codesearch import index, searcher
    from evaluation import suite

    # one function, not a copy that can drift: the index, the query side and the suite's BM25 (mteb's BM25Search, whose
    # ranking by these tokens tests/test_evaluation_data.py checks)
    assert index.code_tokens is searcher.code_tokens is suite.code_tokens is code_tokens


def test_identifiers_in_parts_and_compounds_whole():
    assert code_tokens("load_json_file(x)") == ["load", "json", "file", "x", "load_json_file"]
    assert code_tokens("parseHTTPResponse2") == ["parsehttpresponse2", "parse", "http", "response", "2"]
    assert code_tokens("__init__ i = 42") == ["init", "i", "42"]


def cpu_seconds(text: str, repeats: int, runs: int = 3) -> float:
    """The least process CPU time of `runs` runs of `repeats` tokenizations (the least: what other processes and
    the garbage collector add is never less than nothing)."""
    times = []
    gc.disable()
    try:
        for _ in range(runs):
            started = time.process_time()
            for _ in range(repeats):
                code_tokens(text)
            times.append(time.process_time() - started)
    finally:
        gc.enable()
    return min(times)


# Doubling the input at most doubles a linear tokenizer's time, so four times the input costs at most 4x, where a
# quadratic one costs 16x; GROWTH_BOUND lies between, with room for a busy machine (single doublings measured here
# at load 8 on 2 cores ranged 1.2x-2.9x). The smaller input is tokenized until it takes MEASURED_CPU_SECONDS, so the
# ratio is not timer noise.
GROWTH = 4
GROWTH_BOUND = 8.0
MEASURED_CPU_SECONDS = 0.01
RUN_CHARS = 2000


@pytest.mark.parametrize("run", ["x", "X7", "a_b"])
def test_tokenizing_is_linear_in_a_run_of_letters_digits_and_underscores(run):
    """One long run (a hex string, a base64 blob): a pattern that re-reads the run from each start in it is
    quadratic (64,000 letters, 42 s)."""
    text = run * (RUN_CHARS // len(run))
    repeats = 1
    while cpu_seconds(text, repeats, runs=1) < MEASURED_CPU_SECONDS:
        repeats *= 2
    assert cpu_seconds(text * GROWTH, repeats) / cpu_seconds(text, repeats) < GROWTH_BOUND


def test_snake_case_identifiers_are_those_a_regular_expression_finds():
    """The linear splitting finds what `[A-Za-z0-9]+(?:_[A-Za-z0-9]+)+` (quadratic on long runs) found."""
    import random
    import re

    pattern = re.compile(r"[A-Za-z0-9]+(?:_[A-Za-z0-9]+)+")
    generator = random.Random(0)
    for _ in range(2000):
        text = "".join(generator.choice("ab1_ _X.") for _ in range(generator.randrange(30)))
        assert snake_case_identifiers(text) == pattern.findall(text), text
