"""benchmarks/compact_embeddings.py: which results fill which cell of the (a)/(b)/(c) table."""

import json

import pytest

from benchmarks import compact_embeddings as compact


def write_results(folder, name, ndcg, sets=compact.NINE_SETS):
    (folder / f"{name}.json").write_text(json.dumps({data: {"ndcg@10": ndcg} for data in sets}))


def test_table_rows_are_widths_and_columns_the_three_ways(tmp_path):
    write_results(tmp_path, "default", 0.8)
    write_results(tmp_path, "default@128", 0.7)
    write_results(tmp_path, "mrl", 0.79)
    write_results(tmp_path, "mrl@128", 0.78)
    write_results(tmp_path, "pma128", 0.75)
    write_results(tmp_path, "pma64", 0.6, sets=compact.NINE_SETS[:3])  # stopped halfway: not a result
    rows = compact.table(tmp_path).splitlines()
    assert rows[2] == "| 384 | 1536 | 0.800 | 0.790 | 0.800 |"  # full width: the default head is 384 wide
    assert rows[4] == "| 128 | 512 | 0.750 | 0.780 | 0.700 |"
    assert rows[5] == "| 64 | 256 | - | - | - |"
    assert "pma64" not in compact.per_set_table(tmp_path)


def test_missing_benchmarks_say_where_they_come_from(tmp_path, capsys):
    with pytest.raises(SystemExit) as stopped:
        compact.main(["--runs-dir", str(tmp_path), "--benchmarks", str(tmp_path / "none")])
    assert stopped.value.code == 2 and "../shared/data" in capsys.readouterr().err


def test_record_holds_the_averages_the_table_shows(tmp_path):
    write_results(tmp_path, "default", 0.8)
    write_results(tmp_path, "mrl@128", 0.78)
    metrics = compact.figures(tmp_path)
    assert metrics["averages"]["384"] == {"pma_head": 0.8, "matryoshka": None, "default_truncated": 0.8}
    assert metrics["averages"]["128"]["matryoshka"] == 0.78
    assert set(metrics["per_set"]) == {"default", "mrl@128"} and metrics["per_set"]["default"]["average"] == 0.8


def offline_record(tmp_path, command_options, commit):
    models = {name: {data: {"ndcg@10": 0.5} for data in compact.NINE_SETS}
              for name in ["default", "default@256", "default@128", "default@64"]}
    command = " ".join(["python benchmarks/evaluation_record.py offline_quality --model default --data",
                        *compact.NINE_SETS, command_options])
    path = tmp_path / "offline_quality.json"
    path.write_text(json.dumps({"command": command, "commit": commit, "metrics": {"models": models}}))
    return path


def test_the_default_comes_from_the_offline_record_only_when_it_ran_the_same_evaluation(tmp_path):
    head = compact.subprocess.run(["git", "rev-parse", "HEAD"], cwd=compact.REPO_ROOT, capture_output=True,
                                  text=True).stdout.strip()
    if not head:
        pytest.skip("needs the project's git history (a clone, not an sdist)")
    same = " ".join(compact.SUITE_OPTIONS)
    assert compact.default_from_offline_record(tmp_path, offline_record(tmp_path, same, head))
    assert compact.figures(tmp_path)["averages"]["128"]["default_truncated"] == 0.5
    for option_left_out in compact.SUITE_OPTIONS:  # another evaluation: the default is evaluated here instead
        other = tmp_path / option_left_out.split()[0]
        other.mkdir()
        options = " ".join(option for option in compact.SUITE_OPTIONS if option != option_left_out)
        assert not compact.default_from_offline_record(other, offline_record(other, options, head))
        assert not list(other.glob("default*.json"))
    unknown_commit = tmp_path / "unknown"
    unknown_commit.mkdir()
    assert not compact.default_from_offline_record(unknown_commit, offline_record(unknown_commit, same, "0" * 40))
