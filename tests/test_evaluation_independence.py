"""evaluation/ depends on nothing in train/ (train may import evaluation, never the reverse): every evaluation
module imports with `train` made unimportable, and no evaluation file names `train` in any import, lazy ones
inside functions included."""

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import evaluation

REPO_ROOT = Path(__file__).resolve().parents[1]
EVALUATION_MODULES = sorted(f"evaluation.{module.name}" for module in pkgutil.iter_modules(evaluation.__path__))
FORBIDDEN_PACKAGE = "train"


def imported_packages(path: Path) -> set[str]:
    """Top-level package of every import statement in the file, wherever it stands (lazy imports too)."""
    packages = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            packages.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            packages.add(node.module.split(".")[0])
    return packages


def test_the_module_list_covers_the_package():
    assert "evaluation.model_meta" in EVALUATION_MODULES and "evaluation.tasks" in EVALUATION_MODULES
    assert len(EVALUATION_MODULES) == len(list((REPO_ROOT / "evaluation").glob("*.py"))) - 1  # less __init__


@pytest.mark.parametrize("path", sorted((REPO_ROOT / "evaluation").glob("*.py")), ids=lambda path: path.name)
def test_no_evaluation_file_imports_train(path):
    assert FORBIDDEN_PACKAGE not in imported_packages(path)


@pytest.mark.slow  # a fresh interpreter, so that nothing imported by another test hides the import
def test_every_evaluation_module_imports_without_train():
    script = (
        f"import sys; sys.modules[{FORBIDDEN_PACKAGE!r}] = None\n"  # any `import train...` now raises ImportError
        "import importlib\n"
        f"for name in {EVALUATION_MODULES!r}: importlib.import_module(name)\n"
        "from evaluation.model_meta import mteb_training_datasets, training_source_tasks\n"
        "assert training_source_tasks()['gretelai/synthetic_text_to_sql'] == 'SyntheticText2SQL'\n"
        "assert mteb_training_datasets(['code-search-net/code_search_net']) == {'CodeSearchNetRetrieval'}\n"
        f"assert {FORBIDDEN_PACKAGE!r} not in {{name.split('.')[0] for name, m in sys.modules.items() if m}}\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    assert result.returncode == 0, result.stderr[-3000:]
