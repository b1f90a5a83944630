"""`python -m evaluation.suite` end to end on tiny data: BM25 and the packaged MiniLM, output formats, errors."""

import json

import pytest

from evaluation import suite
from tests.test_evaluation_data import BENCHMARKS, TOY_CORPUS, TOY_QRELS, TOY_QUERIES, write_beir


@pytest.fixture
def two_benchmarks(tmp_path):
    first = write_beir(tmp_path / "data" / "toy_a", TOY_QUERIES, TOY_CORPUS, TOY_QRELS)
    second = write_beir(tmp_path / "data" / "toy_b", {"q1": "sort items by length"}, TOY_CORPUS, [("q1", "d2", 1)])
    return first, second


def test_suite_writes_json_per_model_and_one_markdown_table(two_benchmarks, tmp_path, capsys):
    output = tmp_path / "out" / "results.json"
    exit_code = suite.main([
        "--model", "bm25", "--compare", "minilm", "--data", str(tmp_path / "data"),
        "--output", str(output), "--markdown", str(tmp_path / "out" / "table.md"), "--no-progress",
    ])
    assert exit_code == 0
    for path in (output, tmp_path / "out" / "results.minilm.json"):
        results = json.loads(path.read_text())
        assert list(results) == ["toy_a", "toy_b"]  # keys are the folder names, nothing else
        for metrics in results.values():
            assert list(metrics) == ["ndcg@10", "mrr@10", "recall@100"]
            assert all(0 <= value <= 1 for value in metrics.values())
    printed = capsys.readouterr().out
    assert "| benchmark | queries | corpus | bm25 nDCG@10 | minilm nDCG@10 |" in printed
    assert "**average**" in printed and "Command: `python -m evaluation.suite --model bm25" in printed
    assert "Hardware:" in printed and (tmp_path / "out" / "table.md").read_text() in printed


def test_truncated_widths_score_as_sentence_transformers_truncation_does(two_benchmarks, tiny_encoder_dir, tmp_path,
                                                                          capsys, monkeypatch):
    """Every --truncate-dim width is scored from one encoding of each text, with the metrics mteb gives the model
    loaded with sentence-transformers' own truncate_dim; widths at or above the model's are skipped, bm25 gets none."""
    import mteb
    from mteb.models import SentenceTransformerEncoderWrapper
    from sentence_transformers import SentenceTransformer

    from c2llm_data.beir import load_beir
    from evaluation.local_tasks import local_beir_task

    encoded = []  # every text the model encodes
    real_encode = SentenceTransformerEncoderWrapper.encode
    def counting_encode(self, inputs, **kwargs):
        encoded.extend(inputs.dataset)
        return real_encode(self, inputs, **kwargs)

    monkeypatch.setattr(SentenceTransformerEncoderWrapper, "encode", counting_encode)
    output = tmp_path / "out" / "results.json"
    assert suite.main(["--model", str(tiny_encoder_dir), "--compare", "bm25", "--data", str(tmp_path / "data"),
                       "--truncate-dim", "8", "2", "32", "--output", str(output), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "| tiny-bert nDCG@10 | tiny-bert@8 nDCG@10 | tiny-bert@2 nDCG@10 | bm25 nDCG@10 |" in printed
    assert "tiny-bert@32" not in printed and "bm25@" not in printed
    datasets = [load_beir(folder) for folder in two_benchmarks]
    assert len(encoded) == sum(len(dataset.queries) + len(dataset.corpus) for dataset in datasets)  # once each
    monkeypatch.setattr(SentenceTransformerEncoderWrapper, "encode", real_encode)
    for width in (None, 8, 2):
        path = output if width is None else output.with_name(f"results@{width}.json")
        model = SentenceTransformer(str(tiny_encoder_dir), truncate_dim=width, device="cpu")
        result = mteb.evaluate(SentenceTransformerEncoderWrapper(model), local_beir_task(datasets[0]), cache=None,
                               co2_tracker=False, show_progress_bar=False)
        expected = suite.headline_metrics(result.task_results[0])
        assert json.loads(path.read_text())["toy_a"] == pytest.approx(expected, abs=1e-4)
    assert json.loads(output.with_name("results@2.json").read_text()) != json.loads(output.read_text())


def test_compared_models_without_output_files(two_benchmarks, capsys):
    """--compare without --output used to fail before any work, on the compared models' file names."""
    assert suite.main(["--model", "bm25", "--compare", "bm25", "--data", str(two_benchmarks[0]), "--no-progress"]) == 0
    assert "| benchmark | queries | corpus | bm25 nDCG@10 | bm25 nDCG@10 |" in capsys.readouterr().out


@pytest.mark.slow
def test_minilm_on_a_real_benchmark_subset(tmp_path):
    if not (BENCHMARKS / "humaneval").is_dir():
        pytest.skip("needs ../shared/data/benchmarks beside the repository (the project's data, see its README)")
    output = tmp_path / "minilm.json"
    suite.main([
        "--model", "minilm", "--data", str(BENCHMARKS / "humaneval"), "--max-queries", "20", "--max-corpus", "60",
        "--output", str(output), "--no-progress",
    ])
    # Stock MiniLM finds most HumanEval solutions from their docstrings (about 0.95 on this subset).
    assert json.loads(output.read_text())["humaneval"]["ndcg@10"] > 0.8


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--model", "bm25", "--data", "{tmp}/nowhere"], "is not a folder"),
        (["--model", "bm25", "--data", "{data}", "--prompt-task", "toy_a=CoSQA"], "Did you mean: CosQA"),
        (["--model", "bm25", "--data", "{data}", "--max-queries", "0"], "--max-queries must be at least 1"),
        (["--model", "bm25", "--data", "{data}", "--max-seq-length", "0"], "--max-seq-length must be at least 1"),
        (["--model", "bm25", "--data", "{data}", "--truncate-dim", "0"], "--truncate-dim widths must be at least 1"),
    ],
)
def test_usage_errors_say_what_is_wrong(arguments, message, two_benchmarks, tmp_path, capsys):
    arguments = [a.format(tmp=tmp_path, data=tmp_path / "data") for a in arguments]
    with pytest.raises(SystemExit) as exit_info:
        suite.main(arguments)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_every_flag_has_help():
    for action in suite.build_parser()._actions:
        assert action.help, action.option_strings
