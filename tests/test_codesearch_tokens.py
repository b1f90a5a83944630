"""One BM25 tokenizer: codesearch's index and the evaluation's BM25 baseline split text into the same words."""

from codesearch.tokens import code_tokens

SAMPLE = '''def load_json_file(path: str) -> dict:
    """Parse HTTPResponse bodies; x = getUserName(user_id) + 2"""
    return __import__("json").loads(open(path).read())  # i/o
'''


def test_the_evaluation_baseline_tokenizes_as_codesearch_does():
    from evaluation import baselines

    assert baselines.code_tokens is code_tokens  # one function, not a copy that can drift
    assert baselines.code_tokens(SAMPLE) == code_tokens(SAMPLE)


def test_identifiers_in_parts_and_compounds_whole():
    assert code_tokens("load_json_file(x)") == ["load", "json", "file", "x", "load_json_file"]
    assert code_tokens("parseHTTPResponse2") == ["parsehttpresponse2", "parse", "http", "response", "2"]
    assert code_tokens("__init__ i = 42") == ["init", "i", "42"]
