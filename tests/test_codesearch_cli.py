"""The command line as a shell user meets it: short flags, and a reader that stops early (`| head`)."""

import json
import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest

from codesearch.__main__ import build_parser, main
from tests.test_codesearch_index import FakeEmbedder

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    for number in range(40):
        (root / f"module_{number}.py").write_text(f"def read_config_{number}(path):\n    return open(path).read()\n")
    return root


def test_short_flags_mean_the_long_ones(project, tmp_path, capsys):
    code = main(["read config", "-p", str(project), "-k", "3", "-j", "--index-dir", str(tmp_path / "index")],
                embedder=FakeEmbedder())
    hits = json.loads(capsys.readouterr().out)
    assert code == 0 and len(hits) == 3


def test_help_documents_the_short_flags():
    usage = build_parser().format_help()
    for short, long in (("-p", "--path"), ("-k", "--top-k"), ("-j", "--json")):
        assert f"{short} {long.upper().lstrip('-').replace('-', '_')}" in usage or f"{short}, {long}" in usage


@pytest.mark.slow
@pytest.mark.parametrize("output", [["--json"], []])
def test_a_reader_that_stops_early_gets_no_traceback(project, tmp_path, output):
    """The reader closes the pipe before the hits are written, as `codesearch ... --json | head -c 100` does when
    head has its bytes: the write fails with EPIPE, and the command ends quietly with status 0."""
    script = ("import sys; from codesearch.__main__ import main; from tests.test_codesearch_index import "
              "FakeEmbedder; sys.exit(main(sys.argv[1:], embedder=FakeEmbedder()))")
    command = [sys.executable, "-c", script, "read config", "-p", str(project), "-k", "40", "--index-dir",
               str(tmp_path / "index"), *output]
    process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdout.close()  # nobody reads: every write to stdout fails
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=120) == 0, stderr
    assert "indexed 40 files" in stderr  # it ran to the end
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr


@pytest.mark.slow
def test_pipe_into_head_prints_the_first_bytes_and_nothing_on_stderr_but_the_summary(project, tmp_path):
    script = ("import sys; from codesearch.__main__ import main; from tests.test_codesearch_index import "
              "FakeEmbedder; sys.exit(main(sys.argv[1:], embedder=FakeEmbedder()))")
    pipeline = (f"{sys.executable} -c '{script}' 'read config' -p {project} -k 40 -j --quiet "
                f"--index-dir {tmp_path / 'index'} | head -c 100")
    result = subprocess.run(["bash", "-o", "pipefail", "-c", pipeline], cwd=REPO_ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0 and len(result.stdout) == 100 and result.stdout.startswith("[")
    assert "Traceback" not in result.stderr


def test_a_folder_with_no_code_it_reads_says_so(tmp_path, capsys):
    root = tmp_path / "notes"
    root.mkdir()
    for number in range(3):
        (root / f"page_{number}.adoc").write_text("= Title\n")
    (root / "Makefile").write_text("all:\n")
    code = main(["anything", "-p", str(root), "-j", "--index-dir", str(tmp_path / "index")], embedder=FakeEmbedder())
    captured = capsys.readouterr()
    assert code == 0 and json.loads(captured.out) == []
    assert "none of the 4 files under" in captured.err and "(found: .adoc 3, Makefile 1)" in captured.err
    assert ".ex " in captured.err  # the suffixes it does read are listed


def test_elixir_and_bash_files_are_indexed(tmp_path, capsys):
    root = tmp_path / "app"
    root.mkdir()
    (root / "router.ex").write_text("defmodule App.Router do\n  def match(conn), do: conn\nend\n")
    (root / "deploy.bash").write_text("deploy() {\n  rsync -a build/ host:/srv\n}\n")
    main(["match", "-p", str(root), "-j", "--index-dir", str(tmp_path / "index")], embedder=FakeEmbedder())
    assert "indexed 2 files" in capsys.readouterr().err


def test_include_and_exclude_select_hits_and_never_shrink_the_index(project, tmp_path, capsys):
    """A filtered search keeps every file in the index: the next plain search embeds nothing (an index shrunk to
    the filter would embed every other file again)."""
    index = ["--index-dir", str(tmp_path / "index"), "-j", "-k", "40"]
    assert main(["read config", "-p", str(project), *index], embedder=FakeEmbedder()) == 0
    capsys.readouterr()
    filtered = FakeEmbedder()
    assert main(["read config", "-p", str(project), "--include", "module_1*.py", "--exclude", "module_10.py", *index],
                embedder=filtered) == 0
    captured = capsys.readouterr()
    paths = {hit["path"] for hit in json.loads(captured.out)}
    assert paths == {f"module_{number}.py" for number in range(11, 20)} | {"module_1.py"}
    assert "indexed 40 files" in captured.err and not filtered.documents
    plain = FakeEmbedder()
    assert main(["read config", "-p", str(project), *index], embedder=plain) == 0
    assert len(json.loads(capsys.readouterr().out)) == 40 and not plain.documents


def test_the_command_takes_its_choices_and_bounds_from_the_request(tmp_path, capsys):
    from codesearch.__main__ import REQUEST_OPTIONS
    from codesearch.request import MAX_QUERY_CHARS, MAX_TOP_K, SearchRequest

    actions = {action.dest: action for action in build_parser()._actions}
    for name in ("ranking", "tests", "non_code"):
        field = SearchRequest.model_fields[name]
        assert (tuple(actions[name].choices), actions[name].default) == (get_args(field.annotation), field.default)
    for name in REQUEST_OPTIONS:  # each option's help is its field's description: declared once
        field = SearchRequest.model_fields[name]
        assert actions[name].help.startswith(field.description) and actions[name].default == field.default, name
    assert actions["top_k"].option_strings == ["-k", "--top-k"]
    for argv, message in ((["x" * (MAX_QUERY_CHARS + 1)], f"{MAX_QUERY_CHARS + 1:,} characters"),
                          (["q", "-k", str(MAX_TOP_K + 1)], f"less than or equal to {MAX_TOP_K}"),
                          (["\udced\udca0\udc80 q"], "not valid Unicode")):  # undecodable bytes in argv
        with pytest.raises(SystemExit) as exit_info:
            main(argv + ["-p", str(tmp_path)], embedder=FakeEmbedder())
        assert exit_info.value.code == 2 and message in capsys.readouterr().err, argv
