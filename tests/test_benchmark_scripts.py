"""Every benchmark script names only what it defines or imports: a script runs for minutes before it writes its
record, so a name missing there would lose the whole run at its last line."""

import builtins
import symtable
from pathlib import Path

import pytest

# what Python binds in every module it runs from a file
MODULE_NAMES = {"__file__", "__cached__"}
SCRIPTS = sorted((Path(__file__).resolve().parents[1] / "benchmarks").glob("*.py"))


def undefined_globals(path: Path) -> set[str]:
    """Names that a function of the script reads as globals but that the module never binds."""
    module = symtable.symtable(path.read_text(encoding="utf-8"), str(path), "exec")
    bound = {symbol.get_name() for symbol in module.get_symbols() if symbol.is_assigned() or symbol.is_imported()}
    missing, tables = set(), list(module.get_children())
    while tables:
        table = tables.pop()
        tables.extend(table.get_children())
        missing |= {symbol.get_name() for symbol in table.get_symbols()
                    if symbol.is_global() and symbol.is_referenced() and symbol.get_name() not in bound}
    return missing - set(dir(builtins)) - MODULE_NAMES


def test_the_check_finds_a_name_nothing_binds(tmp_path):
    script = tmp_path / "script.py"
    script.write_text("from json import dumps\n\ndef main():\n    return dumps(write_record())\n", encoding="utf-8")
    assert undefined_globals(script) == {"write_record"}


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda path: path.name)
def test_every_global_a_benchmark_reads_is_bound(path):
    assert not undefined_globals(path), f"{path.name} reads names it neither defines nor imports"
