"""Topic queries (a module's or class's docstring -> the code it describes) and the refusal of installed Python
modules whose upstream is excluded, for the python_docstrings and python_topics training sources."""

import logging
import textwrap
from pathlib import Path

import pytest

from train.args import ConfigError, DatasetSpec
from train.augment import HOW_IT_WORKS_FRACTION, hash_fraction, topic_style_query
from train.data import check_sources, load_training_data, python_topic_rows
from train.decontaminate import Exclusions
from train.docstrings import python_topics

REPO_ROOT = Path(__file__).resolve().parents[1]

MODULE = textwrap.dedent('''
    """Connection pooling and the TCP connector.

    Longer notes that are not the summary.
    """

    def short():
        return 1


    class TCPConnector:
        """Opens TCP connections and keeps them in a pool."""

        def __init__(self, limit):
            self.limit = limit

        def connect(self, host):
            return open_connection(host, limit=self.limit)


    class Undocumented:
        def method(self):
            return 2


    class LicensedThing:
        """Copyright 2020 Someone. All rights reserved."""

        def method(self):
            return 3
''')


def test_a_module_docstring_names_its_longest_definition_and_a_class_docstring_its_class():
    topics = list(python_topics(MODULE))
    assert [(topic.kind, topic.summary) for topic in topics] == [
        ("module", "Connection pooling and the TCP connector."),
        ("class", "Opens TCP connections and keeps them in a pool."),
    ]  # the undocumented class and the licence banner give no topic
    module_code, class_code = topics[0].code, topics[1].code
    assert module_code.startswith("class TCPConnector:") and "def connect" in module_code
    assert "Opens TCP connections" not in module_code and "Opens TCP connections" not in class_code  # cut
    assert class_code.startswith("class TCPConnector:") and "def __init__" in class_code


def test_a_module_without_a_docstring_or_a_long_enough_definition_gives_no_module_topic():
    assert list(python_topics("def f():\n    return 1\n")) == []
    assert list(python_topics('"""A module about things."""\nX = 1\n\ndef f(): return 1\n')) == []


@pytest.mark.parametrize("summary, topic", [
    ("This module implements a TCP connector with connection pooling.", "tcp connector with connection pooling"),
    ("A class representing an HTTP cookie jar. More text.", "http cookie jar"),
    ("The module provides the abstract base classes.", "abstract base classes"),
])
def test_topic_queries_cut_the_lead_and_keep_the_first_sentence(summary, topic):
    query = topic_style_query(summary)
    assert query in (topic, f"how {topic} works")
    assert (query == f"how {topic} works") == (hash_fraction(topic, "how") < HOW_IT_WORKS_FRACTION)


def test_topic_queries_are_short_and_too_short_ones_are_none():
    assert topic_style_query("Helper.") is None
    assert len(topic_style_query(" ".join(f"word{i}" for i in range(40))).split()) <= 12  # 10 words + "how ... works"


def test_asked_as_how_it_works_in_about_the_configured_share():
    topics = [f"parser number {i} for config files" for i in range(2000)]
    share = sum(topic_style_query(topic).startswith("how ") for topic in topics) / len(topics)
    assert abs(share - HOW_IT_WORKS_FRACTION) < 0.05


@pytest.fixture
def installed_package(tmp_path, monkeypatch):
    """A package on sys.path with two modules of the same templated class docstring and a test module."""
    package = tmp_path / "topicpkg"
    (package / "tests").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    for name in ("first", "second"):
        (package / f"{name}.py").write_text(MODULE.replace("TCPConnector", f"{name.title()}Connector"))
    (package / "tests" / "test_connector.py").write_text('"""Tests for the connector module."""\n\n'
                                                         "def test_connect():\n    x = 1\n    assert x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return "topicpkg"


def test_topic_rows_skip_test_modules_and_keep_one_row_per_query(installed_package):
    rows = python_topic_rows([installed_package])
    queries = [row["query"] for row in rows]
    assert len(queries) == len(set(queries)) == 2  # the module and the class topic, each once across both files
    assert not any("tests for" in query for query in queries)
    assert all(row["positive"].startswith("class FirstConnector") for row in rows)  # the first file's, kept


def test_python_topics_is_a_training_source(installed_package):
    spec = DatasetSpec(name="python_topics", source="topics_demo", modules=[installed_package])
    loaded = load_training_data([spec], REPO_ROOT, 0.5)
    assert set(loaded.dataset["source"]) == {"topics_demo"}
    assert loaded.tasks == {"topics_demo": "CodeSearchNetRetrieval"}
    assert len(loaded.dataset) == 2


def test_an_installed_module_from_a_listed_upstream_is_refused():
    pydantic = pytest.importorskip("pydantic")  # a dependency of the project: installed wherever the tests run
    assert pydantic
    exclusions = Exclusions(repositories={"pydantic/pydantic"}, project_names={"click"})
    assert "pydantic/pydantic is listed" in exclusions.module_refusal("pydantic")
    assert "benchmark project click" in exclusions.module_refusal("click.core")
    assert exclusions.module_refusal("json") is None  # the standard library: no distribution, no upstream
    spec = DatasetSpec(name="python_docstrings", source="py_other", modules=["json", "pydantic"])
    with pytest.raises(ConfigError, match="module 'pydantic' may not be mined .*remove it from `modules:`"):
        check_sources([spec], REPO_ROOT, exclusions)
    assert check_sources([spec], REPO_ROOT) == [spec]  # no lists named: nothing is refused


def test_the_recipe_lists_are_read_and_a_missing_one_is_skipped_with_a_warning(tmp_path, caplog):
    from train.recipe import recipe_from_dict
    from train.train import recipe_exclusions

    listed = tmp_path / "exclude.txt"
    listed.write_text("# comment\npydantic/pydantic\n")
    recipe = recipe_from_dict({"model": {"base_model": "x"}, "data": {
        "datasets": [{"name": "python_docstrings", "modules": ["json"]}],
        "exclude_repositories": [str(listed), str(tmp_path / "missing.txt")]}})
    with caplog.at_level(logging.WARNING, logger="train"):
        exclusions = recipe_exclusions(recipe)
    assert exclusions.repositories == {"pydantic/pydantic"} and "click" in exclusions.project_names
    assert "missing.txt does not exist on this machine" in caplog.text
    listed.write_text("not-a-repository\n")
    with pytest.raises(ConfigError, match="is not owner/name"):
        recipe_exclusions(recipe)
    recipe.data.exclude_repositories = []
    assert recipe_exclusions(recipe) is None
