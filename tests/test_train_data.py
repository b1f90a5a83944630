"""Training data: row mappers on tiny in-memory rows, schema checks, bad-row accounting, grouping, held-out split."""

import json
import re
from pathlib import Path

import pytest
from datasets import Dataset

from train import data, docstrings
from train.args import ConfigError, DatasetSpec

PYTHON_SOURCE = '''
def add(a, b):
    """Add two numbers and return the sum.

    More details nobody searches for.
    """
    return a + b


class Greeter:
    def greet(self, name):
        """Return a friendly greeting for name."""
        return f"hello {name}"

    def undocumented(self):
        return 1


def short():
    """Too short."""
    return 0
'''


def test_docstring_pairs_take_first_paragraph_and_strip_the_docstring():
    pairs = dict(data.docstring_pairs(PYTHON_SOURCE))
    assert set(pairs) == {"Add two numbers and return the sum.", "Return a friendly greeting for name."}
    assert pairs["Add two numbers and return the sum."] == "def add(a, b):\n    return a + b"
    # methods are dedented and keep their body, not the docstring
    assert pairs["Return a friendly greeting for name."] == 'def greet(self, name):\n    return f"hello {name}"'


def test_the_miner_sees_every_function_with_exact_lines():
    functions = {function.node.name: function for function in docstrings.python_functions(PYTHON_SOURCE)}
    assert set(functions) == {"add", "greet", "undocumented", "short"}
    assert functions["undocumented"].summary is None and functions["undocumented"].code_without_docstring is None
    assert functions["greet"].code.splitlines()[0] == "def greet(self, name):"  # dedented, docstring kept
    assert functions["greet"].summary == "Return a friendly greeting for name."
    assert functions["add"].node.lineno == PYTHON_SOURCE.splitlines().index("def add(a, b):") + 1
    # a function that is only a docstring, or a one-liner, has no code left to retrieve
    only_doc = list(docstrings.python_functions('def f():\n    """Only words here."""\n\ndef g(): "one line doc"\n'))
    assert [function.code_without_docstring for function in only_doc] == [None, None]


def count_miner_calls(monkeypatch) -> list:
    """The sources the speed benchmarks hand to the training data's miner, from now on."""
    from benchmarks import common

    calls = []
    real = docstrings.python_functions

    def counting(source):
        calls.append(source)
        return real(source)

    monkeypatch.setattr(common, "python_functions", counting)
    return calls


def test_benchmarks_mine_with_the_products_miner(monkeypatch):
    """One docstring -> code miner: the speed benchmarks' corpus comes from the training data's miner (a few standard
    library files stand in for the scan of every installed package, which the slow test below runs)."""
    import sysconfig

    from benchmarks import common

    calls = count_miner_calls(monkeypatch)
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    monkeypatch.setattr(common, "_candidate_files", lambda seed: [stdlib / "textwrap.py", stdlib / "shlex.py"])
    samples = common.function_samples(3)
    assert len(samples) == 3 and len(calls) >= 1


@pytest.mark.slow  # lists and stats every Python file of the standard library and site-packages (~3 CPU-seconds)
def test_benchmarks_mine_the_installed_sources(monkeypatch):
    from benchmarks import common

    calls = count_miner_calls(monkeypatch)
    samples = common.function_samples(3)
    assert len(samples) == 3 and len(calls) >= 1


def test_local_beir_folders_are_read_by_the_evaluations_reader(tmp_path):
    """Training and evaluation see the same document text (title joined the same way) and the same errors."""
    from c2llm_data.beir import load_beir

    folder = tmp_path / "bench"
    folder.mkdir()
    (folder / "corpus.jsonl").write_text(json.dumps({"_id": "c0", "title": "utils.py", "text": "def f(): pass"}) + "\n")
    (folder / "queries.jsonl").write_text(json.dumps({"_id": "q0", "text": "a function"}) + "\n")
    (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq0\tc0\t1\n")
    assert data.read_beir_pairs(folder) == [{"query": "a function", "positive": load_beir(folder).corpus["c0"]}]
    assert data._beir_document({"title": "utils.py", "text": "def f(): pass"}) == load_beir(folder).corpus["c0"]
    (folder / "queries.jsonl").write_text("{not json\n")
    with pytest.raises(ConfigError, match="queries.jsonl:1"):
        data.read_beir_pairs(folder)


def test_codesearchnet_mapper_removes_the_docstring_from_the_code():
    row = {
        "func_documentation_string": "Return the square of x.",
        "func_code_string": 'def square(x):\n    """Return the square of x."""\n    return x * x',
        "language": "python",
    }
    assert data.map_codesearchnet(row) == {
        "query": "Return the square of x.",
        "positive": "def square(x):\n    return x * x",
        "language": "python",
    }
    java = {"func_documentation_string": "Adds.", "func_code_string": "/** Adds. */ int add() {}", "language": "java"}
    assert data.map_codesearchnet(java)["positive"] == "/**  */ int add() {}"


def test_row_mappers_of_plain_hub_sources():
    assert data.map_codeeditsearch({"instruction": "Fix typo", "diff": "-teh\n+the", "commit": "c1"}) == {
        "query": "Fix typo",
        "positive": "-teh\n+the",
    }
    assert data.map_text2sql({"sql_prompt": "How many users?", "sql": "SELECT COUNT(*) FROM users;"}) == {
        "query": "How many users?",
        "positive": "SELECT COUNT(*) FROM users;",
    }
    # missing fields become empty strings, which cleaning counts instead of silently dropping
    assert data.map_text2sql({"sql_prompt": None})["query"] == ""


def test_pairs_from_beir_keeps_relevant_judgements_and_marks_dangling_ids():
    queries = [{"_id": "q1", "text": "sort a list"}, {"_id": "q2", "text": "read a file"}]
    corpus = [{"_id": "d1", "title": "", "text": "sorted(xs)"}, {"_id": "d2", "title": "io", "text": "open(p).read()"}]
    qrels = [
        {"query-id": "q1", "corpus-id": "d1", "score": 1},
        {"query-id": "q2", "corpus-id": "d2", "score": "1"},
        {"query-id": "q2", "corpus-id": "d1", "score": 0},
        {"query-id": "q3", "corpus-id": "d1", "score": 1},
    ]
    assert data.pairs_from_beir(queries, corpus, qrels) == [
        {"query": "sort a list", "positive": "sorted(xs)"},
        {"query": "read a file", "positive": "io open(p).read()"},  # title joined as the evaluation joins it
        {"query": "", "positive": "sorted(xs)"},
    ]


def fake_hub(tables):
    """A stand-in for datasets.load_dataset serving in-memory tables by (path, config/data_dir)."""
    calls = []

    def load_dataset(path, name=None, split=None, revision=None, data_dir=None):
        calls.append((path, name, data_dir, split))
        table = tables[(path, name or data_dir)]
        return table if split is None else table[split]

    return load_dataset, calls


def test_hub_sources_load_through_datasets_in_the_schema(tmp_path):
    beir = {
        ("CoIR-Retrieval/apps", "corpus"): {
            "corpus": Dataset.from_list([{"_id": "d1", "title": "", "text": "print(1)"}])
        },
        ("CoIR-Retrieval/apps", "queries"): {"queries": Dataset.from_list([{"_id": "q1", "text": "print one"}])},
        ("CoIR-Retrieval/apps", "default"): {
            "train": Dataset.from_list([{"query-id": "q1", "corpus-id": "d1", "score": 1}]),
            "test": Dataset.from_list([{"query-id": "q9", "corpus-id": "d9", "score": 1}]),
        },
        ("cassanof/CodeEditSearch", "go"): {
            "train": Dataset.from_list([{"instruction": "Fix", "diff": "+x", "commit": "c"}])
        },
    }
    load_dataset, calls = fake_hub(beir)
    loaded = data.load_training_data(
        [DatasetSpec(name="apps"), DatasetSpec(name="codeeditsearch", languages=["go"], loss_weight=0.5)],
        tmp_path,
        max_bad_row_fraction=0.0,
        load_dataset=load_dataset,
    )
    assert loaded.dataset.to_list() == [
        {"query": "print one", "positive": "print(1)", "negatives": [], "source": "apps", "language": "python"},
        {"query": "Fix", "positive": "+x", "negatives": [], "source": "codeeditsearch", "language": "go"},
    ]
    assert loaded.tasks == {"apps": "AppsRetrieval", "codeeditsearch": "CodeEditSearchRetrieval"}
    assert loaded.loss_weights == {"apps": 1.0, "codeeditsearch": 0.5}
    assert ("cassanof/CodeEditSearch", None, "go", "train") in calls  # only the requested language subset


def test_every_registered_source_has_a_table1_task():
    from c2llm_data.prompts import TASK_INSTRUCTIONS

    assert {source.task for source in data.SOURCES.values()} <= set(TASK_INSTRUCTIONS)
    # all 12 MTEB-Code training tasks of the paper are covered
    assert {source.task for source in data.SOURCES.values()} == set(TASK_INSTRUCTIONS)


def test_unknown_dataset_name_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="Unknown dataset name 'codesearchnett'.*codesearchnet"):
        data.load_training_data([DatasetSpec(name="codesearchnett")], tmp_path, 0.1)


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_local_jsonl_bad_rows_are_counted_not_silently_dropped(tmp_path):
    rows = [
        {"query": "q1", "positive": "p1", "source": "cosqa", "language": "python"},
        {"query": "q1", "positive": "p1", "source": "cosqa", "language": "python"},  # duplicate
        {"query": "  ", "positive": "p2", "source": "cosqa", "language": "python"},  # empty text
        {"query": None, "positive": "p3", "source": "cosqa", "language": "python"},  # missing field
        {"query": "q4", "positive": "p4", "source": "cosqa", "language": "python", "negatives": ["n1", "n2"]},
    ]
    path = write_jsonl(tmp_path / "pairs.jsonl", rows)
    loaded = data.load_training_data([DatasetSpec(path=str(path))], tmp_path, max_bad_row_fraction=0.9)
    assert len(loaded.dataset) == 2
    assert loaded.bad_rows == {"cosqa": {"duplicate": 1, "empty_text": 1, "missing_field": 1}}
    assert loaded.rows_loaded == {"cosqa": 5}
    assert loaded.dataset[1]["negatives"] == ["n1", "n2"]
    with pytest.raises(data.SchemaError, match="3 of 5 rows are bad"):
        data.load_training_data([DatasetSpec(path=str(path))], tmp_path, max_bad_row_fraction=0.5)


def test_schema_mismatch_names_the_missing_columns(tmp_path):
    path = write_jsonl(tmp_path / "pairs.jsonl", [{"question": "q", "positive": "p", "language": "go"}])
    with pytest.raises(data.SchemaError, match=r"Missing columns: \['query', 'source'\]"):
        data.load_training_data([DatasetSpec(path=str(path), task="CosQA")], tmp_path, 0.1)
    typed = write_jsonl(tmp_path / "typed.jsonl", [{"query": "q", "positive": 3, "source": "s", "language": "go"}])
    with pytest.raises(data.SchemaError, match="wrong types: .*positive"):
        data.load_training_data([DatasetSpec(path=str(typed), task="CosQA")], tmp_path, 0.1)
    nulls = write_jsonl(tmp_path / "nulls.jsonl", [{"query": None, "positive": "p", "source": "s", "language": "go"}])
    with pytest.raises(data.SchemaError, match=re.escape("wrong types: ['query (every value is null)']")):
        data.load_training_data([DatasetSpec(path=str(nulls), task="CosQA")], tmp_path, 0.1)


def test_a_group_column_splits_an_entry_into_one_batch_group_per_value(tmp_path):
    rows = [{"query": f"q{i}", "positive": f"p{i}", "source": "mined", "language": "go", "package": f"pkg{i % 2}"}
            for i in range(6)]
    path = write_jsonl(tmp_path / "pairs.jsonl", rows)
    loaded = data.load_training_data([DatasetSpec(path=str(path), task="CosQA", group_column="package")], tmp_path, 0.1)
    groups = data.group_by_source_language(loaded.dataset)
    assert {key: len(group) for key, group in groups.items()} == {"mined_pkg0__go": 3, "mined_pkg1__go": 3}
    with pytest.raises(data.SchemaError, match="group_column 'upstream' is not a column of strings"):
        data.load_training_data([DatasetSpec(path=str(path), task="CosQA", group_column="upstream")], tmp_path, 0.1)


def test_neighbour_negatives_are_the_same_files_next_function_else_the_packages(tmp_path):
    # file order: a.go holds f0, f1, f2; b.go of pkg0 holds f3 alone; lib.rs of two packages is two files
    units = [("pkg0", "a.go"), ("pkg0", "a.go"), ("pkg0", "a.go"), ("pkg0", "b.go"), ("pkg1", "lib.rs"),
             ("pkg2", "lib.rs")]
    rows = [{"query": f"query {i}", "positive": f"func f{i}() {{}}", "source": "mined", "language": "go",
             "package": package, "path": file} for i, (package, file) in enumerate(units)]
    path = write_jsonl(tmp_path / "pairs.jsonl", rows)
    spec = DatasetSpec(path=str(path), task="CosQA", group_column="package", neighbour_negatives_column="path")
    loaded = data.load_training_data([spec], tmp_path, 0.1)
    negatives = dict(zip(loaded.dataset["positive"], loaded.dataset["negatives"]))
    assert negatives == {"func f0() {}": ["func f1() {}"], "func f1() {}": ["func f2() {}"],
                         "func f2() {}": ["func f1() {}"],  # a file's last function: the one before it
                         "func f3() {}": ["func f2() {}"],  # alone in its file: the package's nearest
                         "func f4() {}": [], "func f5() {}": []}  # alone in its package: none
    groups = data.group_by_source_language(loaded.dataset)
    assert {key: data.given_negatives(group) for key, group in groups.items()} == {
        "mined_pkg0__go": 1, "mined_pkg1__go": 0, "mined_pkg2__go": 0}
    assert data.to_training_columns(groups["mined_pkg0__go"], 1).column_names == ["query", "positive", "negative_1"]


def test_neighbour_negatives_refuse_a_missing_column_and_a_file_with_its_own_negatives(tmp_path):
    rows = [{"query": f"q{i}", "positive": f"p{i}", "source": "mined", "language": "go", "path": "a.go"}
            for i in range(2)]
    path = write_jsonl(tmp_path / "pairs.jsonl", rows)
    with pytest.raises(data.SchemaError, match="neighbour_negatives_column 'file' is not a column of strings"):
        data.load_training_data([DatasetSpec(path=str(path), task="CosQA", neighbour_negatives_column="file")],
                                tmp_path, 0.1)
    brought = write_jsonl(tmp_path / "brought.jsonl", [row | {"negatives": ["n"]} for row in rows])
    with pytest.raises(data.SchemaError, match="brings its own `negatives`"):
        data.load_training_data([DatasetSpec(path=str(brought), task="CosQA", neighbour_negatives_column="path")],
                                tmp_path, 0.1)
    with pytest.raises(ValueError, match="neighbour_negatives_column names a column of a local file"):
        DatasetSpec(name="python_topics", modules=["json"], neighbour_negatives_column="path")


def test_local_rows_of_an_unregistered_source_need_a_task(tmp_path):
    path = write_jsonl(tmp_path / "pairs.jsonl", [{"query": "q", "positive": "p", "source": "mine", "language": "go"}])
    with pytest.raises(ConfigError, match="source 'mine'.*Set `task:`"):
        data.load_training_data([DatasetSpec(path=str(path))], tmp_path, 0.1)
    loaded = data.load_training_data([DatasetSpec(path=str(path), task="CosQA")], tmp_path, 0.1)
    assert loaded.tasks == {"mine": "CosQA"}


def test_local_beir_folder_and_shared_training_file():
    root = Path(__file__).resolve().parents[1]
    specs = [
        DatasetSpec(path="../shared/data/benchmarks/humaneval", source="humaneval", language="python", task="CosQA"),
        DatasetSpec(path="../shared/data/train/codexglue_java2cs_train.jsonl", task="CodeTransOceanDL", max_rows=50),
    ]
    if not (root / specs[0].path).is_dir():
        pytest.skip("needs ../shared/data beside the repository: the project's offline data (see its README)")
    loaded = data.load_training_data(specs, root, 0.05)
    groups = data.group_by_source_language(loaded.dataset)
    assert sorted(groups) == ["codexglue_java2cs__java_csharp", "humaneval__python"]
    assert len(groups["codexglue_java2cs__java_csharp"]) == 50
    # every one of HumanEval's 164 judged pairs is either kept or counted as bad
    assert loaded.rows_loaded["humaneval"] == 164
    assert len(groups["humaneval__python"]) + sum(loaded.bad_rows.get("humaneval", {}).values()) == 164


def test_group_keys_are_valid_module_names():
    assert data.group_key("codexglue_java2cs", "java->csharp") == "codexglue_java2cs__java_csharp"
    assert data.group_key("codetransocean_contest", "python->c++") == "codetransocean_contest__python_cpp"
    assert "." not in data.group_key("a.b", "c#")


def test_heldout_split_keeps_all_rows_of_a_query_together():
    rows = [
        {"query": f"q{i % 10}", "positive": f"p{i}", "negatives": [], "source": "s", "language": "l"} for i in range(40)
    ]
    train, heldout = data.split_heldout(Dataset.from_list(rows), fraction=0.3, max_queries=100, seed=0)
    assert set(train["query"]).isdisjoint(heldout["query"])
    assert len(set(heldout["query"])) == 3 and len(heldout) == 12
    queries, corpus, relevant = data.retrieval_split(heldout)
    assert len(queries) == 3 and len(corpus) == 12 and all(len(docs) == 4 for docs in relevant.values())


def test_training_columns_expand_negatives():
    rows = Dataset.from_list(
        [
            {"query": "q", "positive": "p", "negatives": ["a", "b", "c"], "source": "s", "language": "l"},
            {"query": "r", "positive": "o", "negatives": ["a"], "source": "s", "language": "l"},
        ]
    )
    expanded = data.to_training_columns(rows, 2)
    assert expanded.column_names == ["query", "positive", "negative_1", "negative_2"]
    assert expanded.to_list() == [{"query": "q", "positive": "p", "negative_1": "a", "negative_2": "b"}]
    assert data.to_training_columns(rows, 0).column_names == ["query", "positive"]


def test_the_recipe_gives_each_task_its_own_prompts_or_refuses():
    from c2llm_data.prompts import DOCUMENT_PROMPT, TASK_INSTRUCTIONS, sentence_transformers_prompts
    from train.train import prompts_for_task

    prompts = sentence_transformers_prompts()
    assert prompts_for_task(prompts, "CosQA") == (TASK_INSTRUCTIONS["CosQA"] + "\n", DOCUMENT_PROMPT)
    # a model with only generic prompts would silently train every task on one instruction: refused
    with pytest.raises(ConfigError, match="no prompt 'CosQA-query'"):
        prompts_for_task({"query": "q: ", "document": ""}, "CosQA")
