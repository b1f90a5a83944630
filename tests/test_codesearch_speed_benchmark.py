"""benchmarks/codesearch_speed.py refuses arguments that would not give a cold build, before any work."""

import pytest

from benchmarks.codesearch_speed import parse_args


@pytest.mark.parametrize(("arguments", "message"), [
    (["--backend", "onnx", "torch", "--index-dir", "{tmp}/index"], "give one --backend"),
    (["--index-dir", "{tmp}"], "already holds files, so the build would not be cold"),
    (["--package", "no_such_package_here"], "'no_such_package_here' is not installed"),
    (["--repeat", "0"], "--repeat must be at least 1"),
])
def test_arguments_that_would_not_time_a_cold_build_are_refused(tmp_path, capsys, arguments, message):
    (tmp_path / "left-over").write_text("x")
    with pytest.raises(SystemExit) as stopped:
        parse_args([argument.format(tmp=tmp_path) for argument in arguments])
    assert stopped.value.code == 2 and message in capsys.readouterr().err


def test_an_empty_index_dir_and_no_steps_time_the_cold_build_only(tmp_path):
    args = parse_args(["--package", "json", "--steps", "--index-dir", str(tmp_path)])
    assert args.steps == [] and args.index_dir == tmp_path and args.source.name == "json"
