"""c2llm_plumbing, the layer under every front door: one atomic write that keeps its promises (whole or not at all,
readable, flushed when asked), one record writer that experiments use too, the default model found where an install
puts it, and each dependency's non-public names pinned, so an upgrade that moves one fails here naming the compat
module to update."""

import importlib.util
import json
import os
import stat
import sys
from pathlib import Path

import pytest

from c2llm_plumbing import atomic, records
from c2llm_plumbing.atomic import atomic_target, write_atomically

REPO_ROOT = Path(__file__).resolve().parents[1]
SUMMARIZE = REPO_ROOT / "experiments" / "smollm2" / "summarize.py"


def interrupted(*args):
    raise KeyboardInterrupt


def current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_an_atomic_write_replaces_the_file_whole_or_not_at_all(tmp_path, monkeypatch):
    target = tmp_path / "result.json"
    write_atomically(target, "old\n")
    monkeypatch.setattr(atomic.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_atomically(target, "new\n")
    assert target.read_text() == "old\n"
    assert [path.name for path in tmp_path.iterdir()] == ["result.json"]  # the temporary name is gone too


def test_an_atomic_write_gives_the_permissions_a_new_file_gets(tmp_path):
    """Results, records and locks are read by others: not a temporary file's owner-only 0600."""
    target = tmp_path / "record.json"
    write_atomically(target, b"{}")
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~current_umask()


def test_durable_writes_reach_the_disk_before_the_rename(tmp_path, monkeypatch):
    synced = []  # the names of the files flushed

    def fsync(descriptor: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{descriptor}"))

    monkeypatch.setattr(atomic.os, "fsync", fsync)
    write_atomically(tmp_path / "fast.json", "{}")
    assert synced == []
    write_atomically(tmp_path / "marker.json", "{}", durable=True)
    assert len(synced) == 1 and Path(synced[0]).name.startswith(".marker.json-")  # the temporary, before its rename


def test_an_atomic_folder_replaces_the_old_one_or_leaves_it(tmp_path):
    target = tmp_path / "encoder"
    with atomic_target(target) as temporary:
        temporary.mkdir()
        (temporary / "model.onnx").write_text("first")
    with pytest.raises(ValueError), atomic_target(target) as temporary:
        temporary.mkdir()
        (temporary / "model.onnx").write_text("half")
        raise ValueError("the export disagrees")
    assert (target / "model.onnx").read_text() == "first"
    with atomic_target(target) as temporary:
        temporary.mkdir()
        (temporary / "model.onnx").write_text("second")
    assert (target / "model.onnx").read_text() == "second" and [p.name for p in tmp_path.iterdir()] == ["encoder"]


def test_a_temporary_name_is_hidden_beside_its_target_and_found_after_a_kill(tmp_path):
    """train.checkpoints.remove_interrupted_writes finds what a kill left by `.NAME-*`; np.savez needs its suffix."""
    from train.checkpoints import remove_interrupted_writes

    temporary = atomic.temporary_sibling(tmp_path / "metrics.json")
    assert temporary.parent == tmp_path and temporary.name.startswith(".metrics.json-")
    assert atomic.temporary_sibling(tmp_path / "vectors.npz", ".npz").suffix == ".npz"
    temporary.write_text("{half")
    remove_interrupted_writes(tmp_path)
    assert not temporary.exists()


def test_the_default_model_is_found_where_an_install_puts_it(tmp_path):
    """Installed, default_model/ is codesearch's package data beside c2llm_plumbing in site-packages."""
    site = tmp_path / "site-packages"
    (site / "c2llm_plumbing").mkdir(parents=True)
    (site / "c2llm_plumbing" / "models.py").write_text((REPO_ROOT / "c2llm_plumbing" / "models.py").read_text())
    (site / "codesearch" / "default_model").mkdir(parents=True)
    (site / "codesearch" / "default_model" / "modules.json").write_text("[]")
    spec = importlib.util.spec_from_file_location("installed_models", site / "c2llm_plumbing" / "models.py")
    installed = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(installed)
    assert installed.resolve_model("default") == site / "codesearch" / "default_model"


def load_summarize():
    spec = importlib.util.spec_from_file_location("smollm2_summarize", SUMMARIZE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_ablation_summary_is_a_record_with_lock_and_load(tmp_path, monkeypatch):
    """experiments/smollm2/summarize.py writes through the one record writer: command, commit, lock, machine and
    load beside its figures; the table is rendered from the record's metrics."""
    run = tmp_path / "runs" / "pma-s0"
    run.mkdir(parents=True)
    (run / "suite.json").write_text(json.dumps({"humaneval": {"ndcg@10": 0.5}}))
    monkeypatch.setattr(records, "hardware_line", lambda: "a test machine")  # its library imports take seconds
    monkeypatch.setattr(sys, "argv", [str(SUMMARIZE), str(tmp_path / "runs"), "--output-dir", str(tmp_path / "out")])
    summarize = load_summarize()
    summarize.main()
    record = json.loads((tmp_path / "out" / "ablation.json").read_text())
    assert {"command", "commit", "lock", "machine", "load", "metrics"} <= set(record)
    assert record["lock"]["file"].startswith("locks/") and record["load"][0].startswith("load average")
    assert record["metrics"]["summary"]["pma"]["suite"]["humaneval"]["mean"] == 0.5
    assert (tmp_path / "out" / "ablation.md").read_text() == summarize.markdown(record["metrics"])


def test_the_committed_summaries_render_from_their_records():
    summarize = load_summarize()
    results = SUMMARIZE.parent / "results"
    for name in ("ablation", "ablation-to-the-end", "curve"):
        metrics = json.loads((results / f"{name}.json").read_text())["metrics"]
        table = summarize.curve_markdown(metrics) if name == "curve" else summarize.markdown(metrics)
        assert table == (results / f"{name}.md").read_text(), name


def test_litserve_still_has_the_mcp_flag_compat_litserve_sets():
    litserve_server = pytest.importorskip("litserve.server")
    from c2llm_plumbing.compat_litserve import MCP_FLAG

    assert hasattr(litserve_server, MCP_FLAG), (
        f"litserve.server.{MCP_FLAG} is gone: update c2llm_plumbing/compat_litserve.py to this LitServe's way of "
        "leaving out its MCP route")


def test_the_mcp_sdk_still_has_what_compat_mcp_uses():
    pytest.importorskip("mcp")
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase
    from pydantic import BaseModel, ConfigDict

    from c2llm_plumbing.compat_mcp import typed_tool

    fix = "update c2llm_plumbing/compat_mcp.py to the installed MCP SDK"
    lowlevel = getattr(MCPServer("probe"), "_lowlevel_server", None)
    assert callable(getattr(lowlevel, "run", None)), f"MCPServer._lowlevel_server.run is gone: {fix}"
    assert callable(getattr(lowlevel, "create_initialization_options", None)), fix
    assert callable(getattr(ArgModelBase, "model_dump_one_level", None)), f"ArgModelBase changed: {fix}"

    class Probe(BaseModel):
        model_config = ConfigDict(extra="forbid", strict=True)
        count: int

    async def probe(request: Probe) -> int:
        return request.count

    tool = typed_tool(probe, Probe)
    assert tool.fn_metadata.arg_model.__mro__[1] is Probe, f"Tool.fn_metadata.arg_model changed: {fix}"
    assert tool.parameters["additionalProperties"] is False and tool.parameters["required"] == ["count"], fix


def test_mteb_still_has_the_language_converter_compat_mteb_uses():
    iso_mappings = pytest.importorskip("mteb.languages.iso_mappings")
    from c2llm_plumbing.compat_mteb import card_language_to_mteb

    assert hasattr(iso_mappings, "_hf_lang_to_iso_lang_script"), (
        "mteb.languages.iso_mappings._hf_lang_to_iso_lang_script is gone: update c2llm_plumbing/compat_mteb.py to "
        "this mteb's public language converter")
    assert card_language_to_mteb("en") == "eng-Latn" and card_language_to_mteb("code") is None


def test_a_litserve_without_the_flag_stops_the_server_naming_the_compat_module(monkeypatch):
    litserve_server = pytest.importorskip("litserve.server")
    from c2llm_plumbing.compat_litserve import MCP_FLAG, without_litserve_mcp_route

    monkeypatch.delattr(litserve_server, MCP_FLAG)
    with pytest.raises(RuntimeError, match="update c2llm_plumbing/compat_litserve.py"):
        without_litserve_mcp_route()
