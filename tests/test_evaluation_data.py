"""Evaluation building blocks without a model: BEIR loading and its errors, BM25 through mteb, metrics, prompts."""

import json
import math
from pathlib import Path

import pytest

from c2llm_data.beir import BeirFormatError, expand_benchmark_folders, load_beir
from c2llm_data.tasks import (
    MTEB_CODE_TASKS,
    UnknownNameError,
    closest_mteb_task,
    parse_prompt_task_overrides,
    prompt_name_for,
)
from c2llm_data.tokens import code_tokens
from evaluation.models import DEFAULT_MODEL_FOLDER, ModelNotFoundError, resolve_model

BENCHMARKS = Path(__file__).resolve().parents[2] / "shared" / "data" / "benchmarks"


def write_beir(folder: Path, queries: dict, corpus: dict, qrels: list[tuple[str, str, int]]) -> Path:
    """Write a BEIR folder (queries.jsonl, corpus.jsonl, qrels.tsv with header) and return it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": k, "text": v}) + "\n" for k, v in queries.items()))
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": k, "text": v}) + "\n" for k, v in corpus.items()))
    rows = "".join(f"{q}\t{c}\t{s}\n" for q, c, s in qrels)
    (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + rows)
    return folder


TOY_CORPUS = {
    "d1": "def read_json_file(path):\n    return json.load(open(path))",
    "d2": "def sortByLength(items):\n    return sorted(items, key=len)",
    "d3": "SELECT name FROM singer ORDER BY age",
}
TOY_QUERIES = {"q1": "read a json file", "q2": "sort items by length", "q3": "names of singers by age"}
TOY_QRELS = [("q1", "d1", 1), ("q2", "d2", 1), ("q3", "d3", 1)]


@pytest.fixture
def toy_folder(tmp_path):
    return write_beir(tmp_path / "toy", TOY_QUERIES, TOY_CORPUS, TOY_QRELS)


def test_load_beir_reads_all_three_files(toy_folder):
    dataset = load_beir(toy_folder)
    assert dataset.name == "toy"
    assert dataset.queries == TOY_QUERIES and dataset.corpus == TOY_CORPUS
    assert dataset.relevant_docs() == {"q1": {"d1"}, "q2": {"d2"}, "q3": {"d3"}}


def test_missing_file_is_named(toy_folder):
    (toy_folder / "qrels.tsv").unlink()
    with pytest.raises(BeirFormatError, match=r"not a BEIR folder: missing qrels\.tsv"):
        load_beir(toy_folder)


def test_qrels_with_unknown_ids_are_reported(tmp_path):
    folder = write_beir(tmp_path / "bad", TOY_QUERIES, TOY_CORPUS, [*TOY_QRELS, ("q9", "d1", 1), ("q1", "d404", 1)])
    with pytest.raises(BeirFormatError, match=r"1 query ids not in queries\.jsonl \('q9'\) and 1 corpus ids .*'d404'"):
        load_beir(folder)


def test_empty_corpus_is_reported(tmp_path):
    folder = write_beir(tmp_path / "empty", TOY_QUERIES, {}, [])
    with pytest.raises(BeirFormatError, match=r"corpus\.jsonl has no documents"):
        load_beir(folder)


def test_malformed_line_names_file_and_line(toy_folder):
    with (toy_folder / "corpus.jsonl").open("a") as corpus:
        corpus.write('{"id": "d4"}\n')
    with pytest.raises(BeirFormatError, match=r"corpus\.jsonl:4: .*\"_id\" and \"text\""):
        load_beir(toy_folder)


def test_non_utf8_file_names_file_and_line(toy_folder):
    with (toy_folder / "queries.jsonl").open("ab") as queries:
        queries.write('{"_id": "q4", "text": "caf\u00e9"}\n'.encode("latin-1"))
    with pytest.raises(BeirFormatError, match=r"queries\.jsonl:4: not UTF-8 .*re-encode the file as UTF-8"):
        load_beir(toy_folder)


@pytest.mark.parametrize("text", [None, 123, ["a"]])
def test_a_text_that_is_not_a_string_is_an_error_not_a_scored_string(toy_folder, text):
    with (toy_folder / "corpus.jsonl").open("a") as corpus:
        corpus.write(json.dumps({"_id": "d4", "text": text}) + "\n")
    with pytest.raises(BeirFormatError, match=r"corpus\.jsonl:4: 'text' must be a string"):
        load_beir(toy_folder)


def test_bm25_on_a_corpus_without_letters_or_digits_ranks_nothing(tmp_path):
    """bm25s fails on a corpus with no token at all; the suite reports that BM25 finds nothing instead."""
    from evaluation import suite

    folder = write_beir(tmp_path / "symbols", {"q1": "find x"}, {"a": "!!!", "b": "???"}, [("q1", "a", 1)])
    args = suite.build_parser().parse_args(["--model", "bm25", "--data", str(folder), "--no-progress"])
    [run] = suite.run_model(suite.resolve_model("bm25"), [load_beir(folder)], args, {})
    assert run.metrics == {"symbols": {"ndcg@10": 0.0, "mrr@10": 0.0, "recall@100": 0.0}}


def test_suite_refuses_a_folder_as_output_before_any_work(toy_folder, tmp_path, capsys):
    from evaluation.suite import main

    with pytest.raises(SystemExit) as exited:
        main(["--model", "bm25", "--data", str(toy_folder), "--output", str(tmp_path)])
    assert exited.value.code == 2
    assert "is a folder: give a file name" in capsys.readouterr().err


def test_mteb_runner_refuses_a_folder_as_output_before_any_work(tmp_path, capsys):
    from evaluation.mteb_code import main

    with pytest.raises(SystemExit) as exited:
        main(["--model", "minilm", "--mock", "--output", str(tmp_path)])
    assert exited.value.code == 2
    assert "--output " + str(tmp_path) + " is a folder: give a file name" in capsys.readouterr().err


def test_suite_keeps_each_finished_benchmark_when_a_later_one_fails(toy_folder, tmp_path, monkeypatch):
    import shutil

    import mteb

    from evaluation import suite

    second = shutil.copytree(toy_folder, tmp_path / "zz_second")
    real_evaluate = mteb.evaluate

    def fails_on_the_second(model, task, **kwargs):
        if task.metadata.name.endswith(second.name):
            raise RuntimeError("machine lost")
        return real_evaluate(model, task, **kwargs)

    monkeypatch.setattr(mteb, "evaluate", fails_on_the_second)
    output = tmp_path / "results.json"
    with pytest.raises(RuntimeError, match="machine lost"):
        suite.main(
            ["--model", "bm25", "--data", str(toy_folder), str(second), "--output", str(output), "--no-progress"]
        )
    assert list(json.loads(output.read_text())) == [toy_folder.name]  # the finished benchmark, complete
    assert not list(tmp_path.glob(".results.json*"))  # no temporary name left (c2llm_plumbing.atomic)


def test_subset_keeps_relevant_documents_first(toy_folder):
    dataset = load_beir(toy_folder, max_queries=1, max_corpus=2)
    assert list(dataset.queries) == ["q1"]
    assert "d1" in dataset.corpus and len(dataset.corpus) == 2


def test_folder_of_benchmarks_expands(toy_folder, tmp_path):
    not_beir = tmp_path / "not_beir"
    not_beir.mkdir()
    assert expand_benchmark_folders([tmp_path]) == [toy_folder]
    with pytest.raises(BeirFormatError, match="missing queries.jsonl, corpus.jsonl, qrels.tsv"):
        load_beir(not_beir)


class FixedRankings:
    """An mteb search model returning given rankings (query id -> [(corpus id, score), ...])."""

    def __init__(self, rankings: dict[str, list[tuple[str, float]]]) -> None:
        import mteb

        from evaluation.suite import MTEB_BM25

        self.rankings, self.mteb_model_meta = rankings, mteb.get_model_meta(MTEB_BM25)

    def index(self, corpus, **kwargs) -> None:
        pass

    def search(self, queries, **kwargs) -> dict[str, dict[str, float]]:
        return {qid: dict(self.rankings.get(qid, [])) for qid in queries["id"]}


def test_metrics_match_a_hand_computed_example(tmp_path):
    """mteb's evaluator on fixed rankings, read as the suite reads it, against nDCG/MRR/Recall worked out by hand."""
    import mteb

    from evaluation.local_tasks import local_beir_task
    from evaluation.suite import headline_metrics

    # q2 has two relevant documents, d2 and d3
    dataset = load_beir(write_beir(tmp_path / "toy", TOY_QUERIES, TOY_CORPUS, [*TOY_QRELS, ("q2", "d3", 1)]))
    rankings = {
        "q1": [("d2", 0.9), ("d1", 0.8), ("d3", 0.1)],  # relevant d1 at rank 2
        "q2": [("d3", 0.7), ("d1", 0.5)],  # d3 at rank 1, d2 not retrieved
        "q3": [],  # nothing retrieved
    }
    result = mteb.evaluate(FixedRankings(rankings), local_beir_task(dataset), cache=None, co2_tracker=False,
                           show_progress_bar=False)
    metrics = headline_metrics(result.task_results[0])
    ideal_two = 1 + 1 / math.log2(3)  # DCG of two relevant documents at ranks 1 and 2
    ndcg = [1 / math.log2(3), 1 / ideal_two, 0.0]
    mteb_rounding = 1e-5  # mteb keeps 5 decimals
    assert metrics["ndcg@10"] == pytest.approx(sum(ndcg) / 3, abs=mteb_rounding)
    assert metrics["mrr@10"] == pytest.approx((1 / 2 + 1 + 0) / 3, abs=mteb_rounding)
    assert metrics["recall@100"] == pytest.approx((1 + 1 / 2 + 0) / 3, abs=mteb_rounding)


def test_code_tokens_split_identifiers():
    assert code_tokens("getUserName(user_id)") == ["getusername", "get", "user", "name", "user", "id", "user_id"]
    assert code_tokens("parseHTTPResponse") == ["parsehttpresponse", "parse", "http", "response"]


def test_bm25_ranks_the_matching_code_first(toy_folder):
    """mteb's BM25 over code tokens ranks each query's code first (sortByLength is split into its words)."""
    from evaluation import suite

    args = suite.build_parser().parse_args(["--model", "bm25", "--data", str(toy_folder), "--no-progress"])
    [run] = suite.run_model(suite.resolve_model("bm25"), [load_beir(toy_folder)], args, {})
    assert run.metrics["toy"] == {"ndcg@10": 1.0, "mrr@10": 1.0, "recall@100": 1.0}


def test_every_shared_benchmark_maps_to_an_mteb_code_task():
    if not BENCHMARKS.is_dir():
        pytest.skip("needs ../shared/data/benchmarks beside the repository (the project's data, see its README)")
    for folder in BENCHMARKS.iterdir():
        assert closest_mteb_task(folder.name) in MTEB_CODE_TASKS, folder.name
    assert closest_mteb_task("humanevalx_py2rust") == "CodeTransOceanContest"
    assert closest_mteb_task("humaneval") == "AppsRetrieval"
    assert closest_mteb_task("my_own_benchmark") is None


def test_prompt_description_in_the_table():
    from types import SimpleNamespace

    from evaluation.suite import describe_prompts

    prompts = {"CosQA-query": "web: ", "CosQA-document": "code: ", "query": "q: ", "document": ""}
    model = SimpleNamespace(prompts=prompts)
    assert describe_prompts(model, ("CosQA-query", "CosQA-document")) == "CosQA"
    assert describe_prompts(model, ("query", "document")) == "query / -"
    assert describe_prompts(model, (None, "document")) == "-"


def test_prompt_names_prefer_the_task_then_the_generic_side():
    prompts = {"CosQA-query": "web query: ", "query": "q: ", "document": ""}
    assert prompt_name_for(prompts, "CosQA", "query") == "CosQA-query"
    assert prompt_name_for(prompts, "CosQA", "document") == "document"
    assert prompt_name_for(prompts, None, "query") == "query"
    assert prompt_name_for({}, "CosQA", "query") is None


def test_prompt_task_override_rejects_unknown_tasks_with_suggestions():
    assert parse_prompt_task_overrides(["mine=CosQA"]) == {"mine": "CosQA"}
    with pytest.raises(UnknownNameError, match="Did you mean: CosQA"):
        parse_prompt_task_overrides(["mine=cosqa"])


def test_model_names_resolve_or_explain():
    assert resolve_model("bm25").is_bm25
    assert resolve_model("minilm").is_folder
    assert resolve_model("default").location == str(DEFAULT_MODEL_FOLDER)
    with pytest.raises(ModelNotFoundError, match="not a model folder, not a Hub id"):
        resolve_model("no-such-model")


PROMPT_TABLES = [
    {},
    {"query": "q: ", "document": "d: "},
    {"CosQA-query": "web: ", "CosQA-document": "code: ", "query": "q: ", "document": ""},
    {"CosQA": "both sides: ", "Retrieval-query": "rq: ", "document": "d: "},
    {"Retrieval": "any retrieval: ", "CodeSearchNetRetrieval-document": "csn doc: "},
]


@pytest.mark.parametrize("prompts", PROMPT_TABLES)
@pytest.mark.parametrize("task", ["CosQA", "CodeSearchNetRetrieval"])
@pytest.mark.parametrize("side", ["query", "document"])
def test_prompt_lookup_equals_mtebs_own(prompts, task, side):
    """The suite, the training recipe and the MTEB runner pick prompts the way mteb's encoders do."""
    import mteb
    from mteb.models.abs_encoder import get_prompt_name
    from mteb.types import PromptType

    expected = get_prompt_name(prompts, mteb.get_task(task).metadata, PromptType(side))
    assert prompt_name_for(prompts, task, side) == expected


@pytest.mark.parametrize("score", ["inf", "-inf", "nan", "1e400"])
def test_a_score_that_is_not_a_finite_number_names_the_file_and_line(tmp_path, score):
    folder = write_beir(tmp_path / "bench", {"q1": "sort"}, {"d1": "sorted(x)"}, [("q1", "d1", 1)])
    with (folder / "qrels.tsv").open("a") as qrels:
        qrels.write(f"q1\td1\t{score}\n")
    with pytest.raises(BeirFormatError, match=rf"qrels.tsv:3: score '{score}' is not a finite number"):
        load_beir(folder)


@pytest.mark.parametrize("runner", ["evaluation.suite", "evaluation.mteb_code"])
def test_an_output_that_cannot_be_written_is_refused_before_any_work(toy_folder, tmp_path, capsys, runner):
    import importlib

    data = ["--data", str(toy_folder)] if runner == "evaluation.suite" else ["--mock"]
    main = importlib.import_module(runner).main
    with pytest.raises(SystemExit) as exited:
        main(["--model", "bm25" if runner == "evaluation.suite" else "minilm", *data, "--output", "/proc/nope/x.json"])
    assert exited.value.code == 2
    assert "--output /proc/nope/x.json cannot be written (" in capsys.readouterr().err


@pytest.mark.parametrize("runner", ["evaluation.suite", "evaluation.mteb_code"])
def test_an_existing_file_that_is_not_an_earlier_result_is_never_overwritten(toy_folder, capsys, runner):
    import importlib

    qrels = toy_folder / "qrels.tsv"
    before = qrels.read_bytes()
    data = ["--data", str(toy_folder)] if runner == "evaluation.suite" else ["--mock"]
    main = importlib.import_module(runner).main
    with pytest.raises(SystemExit) as exited:
        main(["--model", "bm25" if runner == "evaluation.suite" else "minilm", *data, "--output", str(qrels)])
    assert exited.value.code == 2
    assert f"--output {qrels} exists and is not an earlier result of this command" in capsys.readouterr().err
    assert qrels.read_bytes() == before


def test_an_earlier_result_of_the_suite_is_overwritten(toy_folder, tmp_path):
    from evaluation.suite import main

    output = tmp_path / "results.json"
    output.write_text(json.dumps({"old_bench": {"ndcg@10": 0.5}}))
    assert main(["--model", "bm25", "--data", str(toy_folder), "--output", str(output), "--no-progress"]) == 0
    assert list(json.loads(output.read_text())) == [toy_folder.name]


def test_a_prompt_task_for_a_folder_not_in_data_is_refused(toy_folder, capsys):
    from evaluation.suite import main

    with pytest.raises(SystemExit) as exited:
        main(["--model", "bm25", "--data", str(toy_folder), "--prompt-task", "not_here=CosQA"])
    assert exited.value.code == 2
    assert "--prompt-task names not_here, which --data does not hold" in capsys.readouterr().err
