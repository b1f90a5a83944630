"""Results are records: every rendered table equals its record's rendering, records are written whole, and no
machine path or run log is committed beside them."""

import ast
import json
import os
import re
import stat
import subprocess

import pytest

from benchmarks import (codesearch_precision, codesearch_quality, codesearch_semble, codesearch_speed, encode_speed,
                        evaluation_record)
from benchmarks import render, tables
from benchmarks.render import REPO_ROOT, RenderError, render_page

# Folders that hold results or quote them; a developer machine's paths there mean a copied log, not a record.
RESULT_PLACES = ["benchmarks/results", "docs", "experiments", "README.md", "evaluation/README.md",
                 "codesearch/README.md", "codesearch/reports", "benchmarks/README.md"]
MACHINE_PATH = re.compile(r"(?<![\w.])/(?:work|tmp|root|home)/")
# A module's tables for benchmarks.render: `TABLES = {` then `"name": (("record", ...), function)` lines.
TABLE_DECLARATION = re.compile(r'(?m)^TABLES = \{\n    "[\w-]+": \(\(')


def tracked(*pathspecs: str) -> list[str]:
    return subprocess.run(["git", "ls-files", *pathspecs], cwd=REPO_ROOT, capture_output=True, text=True,
                          check=True).stdout.split()


def test_committed_tables_equal_the_rendering_of_their_records():
    stale = [page.relative_to(REPO_ROOT).as_posix() for page in render.pages()
             if render_page(page.read_text(encoding="utf-8"), page) != page.read_text(encoding="utf-8")]
    assert not stale, f"{stale}: run `python -m benchmarks.render` and commit (edit a record's run, not a table)"


def test_every_table_is_rendered_somewhere_and_every_record_is_read():
    text = "".join(page.read_text(encoding="utf-8") for page in render.pages())
    unused = [name for name in render.tables() if f"<!-- render: {name} -->" not in text]
    assert not unused, f"tables no page shows: {unused}"


def test_every_module_that_declares_tables_is_one_render_reads():
    declaring = {name.removesuffix(".py").replace("/", ".") for name in tracked("*.py")
                 if TABLE_DECLARATION.search((REPO_ROOT / name).read_text(encoding="utf-8"))}
    assert declaring == set(render.TABLE_MODULES), (
        f"declare tables in a module benchmarks.render.TABLE_MODULES lists: {declaring ^ set(render.TABLE_MODULES)}")


def test_no_table_block_rebinds_a_name_its_module_already_uses():
    """A table function named like one of its module's own functions would replace it for the whole module."""
    rebound = {}
    for module in render.TABLE_MODULES:
        tree = ast.parse((REPO_ROOT / f"{module.replace('.', '/')}.py").read_text(encoding="utf-8"))
        names = [node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))]
        names += [target.id for node in tree.body if isinstance(node, ast.Assign) for target in node.targets
                  if isinstance(target, ast.Name)]
        twice = {name for name in names if names.count(name) > 1}
        if twice:
            rebound[module] = sorted(twice)
    assert not rebound, f"names bound twice at module level (rename the table function): {rebound}"


def test_a_table_name_declared_twice_is_refused_naming_both_modules(monkeypatch):
    monkeypatch.setattr(render, "TABLE_MODULES", ("benchmarks.codesearch_store", "benchmarks.codesearch_store"))
    render.tables.cache_clear()
    try:
        with pytest.raises(RenderError, match="'codesearch_store' is declared by both benchmarks.codesearch_store and"):
            render.tables()
    finally:
        render.tables.cache_clear()


def test_a_hand_edited_table_is_put_back(tmp_path):
    (tmp_path / "serving_corpus.json").write_text(json.dumps({
        "command": "python benchmarks/serving_corpus.py --rows 10", "commit": "0123456789abcdef", "load": [],
        "machine": "test", "metrics": {"rows": 10, "actors": 2, "in_process_rows_per_s": [5.0, 5.0],
                                       "job_wall_s": 4.0, "job_pipeline_s": 2.0}}))
    page = REPO_ROOT / "docs" / "page.md"
    edited = "intro\n<!-- render: serving_corpus -->\n| run | rows/s |\n| typed | 99 |\n<!-- /render -->\nend\n"
    rendered = render_page(edited, page, tmp_path)
    # the typed row, looked for whole: the rendered note names the record's path, where any digits can occur
    assert "| typed | 99 |" not in rendered
    assert rendered.startswith("intro\n") and rendered.endswith("<!-- /render -->\nend\n")
    assert "| Ray Data job, 2 actors, pipeline (actor start included) | 5.0 | 1.00 | 2.0 |" in rendered
    assert "(commit 0123456): `python benchmarks/serving_corpus.py --rows 10`" in rendered
    assert render_page(rendered, page, tmp_path) == rendered


@pytest.mark.parametrize(("text", "message"), [
    ("<!-- render: no_such_table -->\n<!-- /render -->\n", "unknown table 'no_such_table'.*the tables are: "),
    ("<!-- render: serving_corpus -->\n| typed |\n", "has no `<!-- /render -->` line"),
    ("<!-- render: serving_corpus -->\n<!-- /render -->\n", "serving_corpus.json does not exist"),
])
def test_a_broken_marker_or_missing_record_is_named_with_the_fix(tmp_path, text, message):
    with pytest.raises(RenderError, match=message):
        render_page(text, REPO_ROOT / "README.md", tmp_path)


def test_no_machine_paths_in_results_or_docs():
    found = [f"{name}:{number}" for name in tracked(*RESULT_PLACES)
             for number, line in enumerate((REPO_ROOT / name).read_text(encoding="utf-8").splitlines(), 1)
             if MACHINE_PATH.search(line)]
    assert not found, f"a developer machine's paths: {found} (write paths relative to the repository)"


def test_a_record_names_no_machine_path_in_its_command():
    from c2llm_plumbing.records import portable_arguments

    arguments = ["--work-dir", "/tmp/index-copy", "--data", str(REPO_ROOT.parent / "shared" / "data"),
                 str(REPO_ROOT / "benchmarks" / "data" / "q.json"), "/opt/elsewhere", "--top-k", "10",
                 "--index-root", str(REPO_ROOT.parent / "a-sibling-checkout")]
    assert portable_arguments(arguments) == ["--work-dir", "WORK_DIR", "--data", "../shared/data",
                                             "benchmarks/data/q.json", "PATH", "--top-k", "10",
                                             "--index-root", "INDEX_ROOT"]


def test_no_run_logs_are_tracked():
    logs = tracked("*.log")
    assert not logs, f"{logs}: a run's figures belong in its record (benchmarks/results/NAME.json), not a log"


def test_a_record_is_replaced_whole_or_not_at_all(tmp_path, monkeypatch):
    from c2llm_plumbing import atomic, records

    monkeypatch.setattr(records, "hardware_line", lambda: "a test machine")  # its library imports take seconds
    first = records.write_record("trial", {"score": 1.0}, ["load average at start: 0.1"], tmp_path, ["x.py", "-q"])
    record = json.loads(first.read_text())
    assert record["metrics"] == {"score": 1.0} and record["command"] == "python x.py -q"
    assert set(record) >= {"commit", "lock", "machine", "load"} and record["lock"]["file"].startswith("locks/")
    mask = os.umask(0o022)
    os.umask(mask)
    assert stat.S_IMODE(first.stat().st_mode) == 0o666 & ~mask  # readable as any new file, not owner-only

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(atomic.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        records.write_record("trial", {"score": 2.0}, [], tmp_path, ["x.py"])
    assert json.loads(first.read_text())["metrics"] == {"score": 1.0}
    assert [path.name for path in tmp_path.iterdir()] == ["trial.json"]


def test_an_evaluation_record_names_each_suite_output_by_its_model(tmp_path):
    from benchmarks.evaluation_record import suite_figures

    for stem, score in {"run": 0.8, "run@128": 0.7, "run.bm25": 0.6, "run.minilm@64": 0.5}.items():
        (tmp_path / f"{stem}.json").write_text(json.dumps({"mbpp": {"ndcg@10": score}}))
    assert suite_figures(tmp_path, "default") == {
        "default": {"mbpp": {"ndcg@10": 0.8}}, "default@128": {"mbpp": {"ndcg@10": 0.7}},
        "bm25": {"mbpp": {"ndcg@10": 0.6}}, "minilm@64": {"mbpp": {"ndcg@10": 0.5}}}


def test_an_evaluation_record_refuses_output_before_any_work(capsys):
    from benchmarks.evaluation_record import main

    with pytest.raises(SystemExit) as stopped:
        main(["trial", "--model", "bm25", "--data", "x", "--output", "y.json"])
    assert stopped.value.code == 2 and "leave out --output" in capsys.readouterr().err


def test_the_one_markdown_table_aligns_text_left_numbers_right_and_refuses_a_wrong_alignment():
    from c2llm_data.markdown import markdown_table

    assert markdown_table(["set", "n", "MRR@10"], [["a", 3, "0.500"]]) == (
        "| set | n | MRR@10 |\n| --- | ---: | ---: |\n| a | 3 | 0.500 |")
    assert markdown_table(["set", "kind", "n"], [], "llr").splitlines()[1] == "| --- | --- | ---: |"
    with pytest.raises(ValueError, match="one letter, l or r, per column: 3 columns"):
        markdown_table(["set", "kind", "n"], [], "lr")


def encode_contender(speed_ratio: float, memory_ratio: float, mfu: float, dtype: str = "float32") -> dict:
    """An encode_speed contender's figures as its record holds them (ratios against ours_st)."""
    return {"tokens_per_s": 100 * speed_ratio, "peak_mem_mb": 100 * memory_ratio, "dtype": dtype,
            "throughput_vs_ours_st": speed_ratio, "throughput_vs_ours_st_cpu_time": speed_ratio,
            "memory_vs_ours_st": memory_ratio, "mfu": mfu, "mfu_computed_tokens": mfu, "cpu_share": 0.99,
            "pma_share": 0.01, "min_cosine_vs_ours_st": 1.0, "matmul_peak_gflops_per_cpu_s": 100.0}


def test_the_encode_goals_are_judged_from_the_record():
    contenders = {"ours_st": encode_contender(1.0, 1.0, 0.8), "published_approach": encode_contender(0.5, 4.0, 0.4),
                  "ours_st_bf16": {**encode_contender(3.0, 0.5, 0.8, "bfloat16"),
                                   "matmul_peak_gflops_per_cpu_s": 400.0},
                  "published_approach_bf16": encode_contender(1.0, 2.0, 0.3, "bfloat16")}
    table = encode_speed.encode_speed_goals({"metrics": {"contenders": contenders}})
    assert "| ours_st / published_approach, tokens/s (fp32; per CPU second) | 2.00x (2.00x) | >= 1.5x | met |" in table
    assert "| ours_st_bf16 MFU, real tokens only (padding = waste) | 80.0% | >= 75% | met |" in table
    assert "| ceiling: this CPU's bf16 / fp32 matmul peak (best probes) | 4.00x |" in table
    contenders["ours_st_bf16"]["mfu"] = 0.6
    assert "| ours_st_bf16 MFU, real tokens only (padding = waste) | 60.0% | >= 75% | MISSED |" in (
        encode_speed.encode_speed_goals({"metrics": {"contenders": contenders}}))
    fp32_only = {name: contenders[name] for name in ("ours_st", "published_approach")}
    assert "| not measured |" in encode_speed.encode_speed_goals({"metrics": {"contenders": fp32_only}})


def test_the_offline_table_averages_the_sets_the_model_did_not_train_on():
    sets = {data: 0.5 for data in tables.NINE_SETS} | {tables.IN_DISTRIBUTION: 0.9}
    per_model = {data: {"ndcg@10": score} for data, score in sets.items()}
    record = {"metrics": {"models": {"bm25": per_model, "minilm": per_model, "default": per_model,
                                     "default@128": per_model}}}
    rows = evaluation_record.offline_quality(record).splitlines()
    assert rows[0].endswith("| average | without refine |")
    # the header, its rule, one row per model: no truncated width
    assert len(rows) == 2 + len(evaluation_record.OFFLINE_MODELS)
    assert rows[2].startswith("| BM25 |") and rows[2].endswith("| 0.900 | 0.544 | 0.500 |")
    assert rows[4].startswith("| **default_model** |") and rows[4].endswith("| 0.900 | **0.544** | 0.500 |")


def test_a_transcribed_record_says_so_below_its_table(tmp_path):
    """A record turned from a run's printed report is not a fresh run: the line under its table must say which."""
    record = {"commit": "89d8c68fb41b", "command": "python benchmarks/profile_encode.py"}
    page, path = tmp_path / "docs" / "speed.md", tmp_path / "results" / "profile_encode.json"
    assert "transcribed" not in render.source_line(record, path, page)
    assert "transcribed from its printed report" in render.source_line(
        {**record, "converted_from": "benchmarks/results/profile_encode.md"}, path, page)


def test_codesearch_results_are_records_not_logs():
    logs = tracked("benchmarks/results/codesearch*.md")
    assert not logs, f"{logs}: codesearch's figures are rendered from records (benchmarks/results/NAME.json)"


def test_the_tokens_per_piece_of_an_older_record_are_codesearchs_default():
    from codesearch.__main__ import DEFAULT_MAX_SEQ_LENGTH

    assert codesearch_quality.tokens_per_piece({"metrics": {}}) == DEFAULT_MAX_SEQ_LENGTH
    assert codesearch_quality.tokens_per_piece({"metrics": {"max_seq_length": 256}}) == 256


def speed_record(backend: str, new_query_seconds: list[float]) -> dict:
    run = {"wall_s": 10.0, "cpu_s": 19.0, "peak_rss_mib": 2000.0}
    return {"metrics": {
        "package": "pkg", "version": "1.0", "files": 3, "pieces": 1000, "distinct": 900, "repeat": 2,
        "steps": {"build": "cold build", "new": "new query"},
        "backends": {backend: {"build": [run], "new": [{**run, "wall_s": seconds} for seconds in new_query_seconds]}}}}


def test_a_speed_table_gives_medians_ranges_pieces_per_second_and_goals():
    rows = codesearch_speed.codesearch_speed(speed_record("onnx", [1.0, 3.0, 2.5])).splitlines()
    assert rows[0].startswith("| step (pkg 1.0: 3 files, 1,000 pieces, 900 distinct texts) | backend | runs |")
    assert rows[2] == "| cold build | onnx (default) | 1 | 10.00 |  | 19.0 | 2000 | 100.0 |  |"
    assert rows[3] == "| **new query** | onnx (default) | 3 | 2.50 | 1.00-3.00 | 19.0 | 2000 |  | **< 2 s: not met** |"
    torch_rows = codesearch_speed.codesearch_speed(speed_record("torch", [1.0])).splitlines()
    assert torch_rows[3] == "| new query | torch | 1 | 1.00 |  | 19.0 | 2000 |  | < 2 s: met |"


def test_a_large_package_precision_table_gives_memory_disk_and_latency_per_precision():
    figures = {"resident_bytes": 94_522_368, "index_bytes": 329_217_561, "switch_s": 0.93, "dense_scan_ms": 12.71,
               "new_query_in_process_ms": 72.4, "new_query_command_s": 1.494, "command_peak_rss_mib": 357.2}
    record = {"metrics": {"large": {"package": "transformers", "version": "5.23.0", "pieces": 61538,
                                    "precisions": {"float32": figures}}}}
    rows = codesearch_precision.codesearch_precision_large(record).splitlines()
    assert rows[0].startswith("| precision (transformers 5.23.0: 61,538 pieces) | resident vector bytes |")
    assert rows[2] == "| float32 | 94,522,368 | 329 | 0.9 | 12.7 | 72 | 1.49 | 357 |"


def test_an_evaluation_table_lists_each_model_then_its_widths_widest_first():
    scores = {"humaneval": {"ndcg@10": 0.5}}
    record = {"metrics": {"sets": {"humaneval": {}}, "models": {
        label: scores for label in ("bm25", "default", "default@128", "default@256", "minilm", "minilm@64")}}}
    labels = [row.split(" | ")[0].strip("| ") for row in evaluation_record.evaluation_ndcg(record).splitlines()[2:]]
    assert labels == ["bm25", "default", "default@256", "default@128", "minilm", "minilm@64"]


def test_the_manuals_headline_table_is_the_test_half_alone():
    def levels(score: float) -> dict:
        return {level: {"overall": score} for level in ("place", "place_rr", "listed_places", "file")}

    metrics = {"by_half": {"test": {"codesearch hybrid": levels(0.5)}, "dev": {"codesearch hybrid": levels(0.9)}},
               "halves": {"test": ["gin"], "dev": ["chi"]},
               "published_per_repo": {"semble hybrid (published)": {"gin": 0.8, "chi": 0.7}},
               "spans": {"annotated_repos": ["chi", "gin"], "not_annotated": {}}, "used_to_choose": None}
    rows = codesearch_semble.codesearch_semble_test_half({"metrics": metrics}).splitlines()
    assert rows[2:4] == ["| test (1 repositories) | hybrid | 0.500 | 0.500 | 0.500 | 0.500 |",
                         "| test (1 repositories) | semble hybrid (published), file level only |  |  |  | 0.800 |"]
    assert not any(row.startswith("| dev") for row in rows)
