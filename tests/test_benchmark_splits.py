"""The fixed dev/test splits of codesearch_quality.py's query sets follow the rule of semble's split, and the held-out
trees are refused for tuning before anything is loaded."""

import json

import pytest

from benchmarks.codesearch_heldout import HELDOUT_SET, load_set
from benchmarks.codesearch_quality import DATA, QUERY_SET_HALVES, main, set_halves
from benchmarks.codesearch_semble import split_by_language

# the language of each package of the committed JSONL sets
LANGUAGES = {"codesearch_queries.jsonl": "python", "express": "javascript", "mux": "go"}


def packages_of(path):
    return {json.loads(line)["package"] for line in path.read_text().splitlines() if line.strip()}


@pytest.mark.parametrize("name", ["codesearch_queries.jsonl", "codesearch_queries_js_go.jsonl"])
def test_each_query_set_is_split_by_the_rule_of_semble_split(name):
    packages = packages_of(DATA / name)
    languages = {package: LANGUAGES.get(package, LANGUAGES.get(name)) for package in packages}
    assert split_by_language(languages) == QUERY_SET_HALVES[DATA / name]
    assert set().union(*QUERY_SET_HALVES[DATA / name].values()) == packages  # every package in one half


def test_the_python_set_tunes_on_two_packages_and_reports_on_three():
    assert QUERY_SET_HALVES[DATA / "codesearch_queries.jsonl"] == {"dev": {"click", "dill"},
                                                                    "test": {"jinja2", "requests", "rich"}}


def test_the_held_out_trees_are_test_only():
    heldout = load_set(HELDOUT_SET)
    assert set_halves(HELDOUT_SET, heldout) == {"test": set(heldout.trees), "dev": set()}


@pytest.mark.parametrize("extra", [["--half", "dev"], ["--used-to-choose", "the dense weight"]])
def test_tuning_on_the_held_out_trees_is_refused_before_any_work(extra, tmp_path):
    with pytest.raises(SystemExit, match="is a held-out set: test only, never tuned on"):
        main(["--queries", str(HELDOUT_SET), "--index-root", str(tmp_path / "index"), *extra])
    assert not (tmp_path / "index").exists()


def test_a_half_a_set_does_not_have_is_refused_naming_the_fix(tmp_path):
    with pytest.raises(SystemExit, match="has no dev half .* pass --half both, or another set"):
        main(["--queries", str(DATA / "codesearch_queries_js_go.jsonl"), "--half", "dev"])
    unknown = tmp_path / "mine.jsonl"
    unknown.write_text(json.dumps({"package": "click", "query": "q", "path": "core.py", "name": "f"}) + "\n")
    with pytest.raises(SystemExit, match="mine.jsonl has no test half"):
        main(["--queries", str(unknown), "--half", "test"])
