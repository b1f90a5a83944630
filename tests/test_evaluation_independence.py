"""evaluation/ depends on nothing in train/ or codesearch/ (train may import evaluation, never the reverse; what they
share lives in c2llm_data): every evaluation module imports with `train` made unimportable, and no evaluation file
names `train` or `codesearch` in any import, lazy ones inside functions included. c2llm_data and c2llm_plumbing
are leaves; serving/ reaches the plumbing it shares with codesearch there, never through codesearch."""

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
# Packages evaluation/ must not import: the shared code they hold for it lives in c2llm_data.
NOT_FOR_EVALUATION = {FORBIDDEN_PACKAGE, "codesearch"}
# The shared homes: of the task catalogue, prompts, BEIR reading, code tokens and the packaged start model; of model
# folders, argument checks, atomic writes and records. Leaves.
SHARED_PACKAGES = ("c2llm_data", "c2llm_plumbing")
NOT_FOR_THE_SHARED_PACKAGE = {"train", "evaluation", "codesearch", "serving", "tools", "benchmarks", "tests",
                              "experiments", "locks", *SHARED_PACKAGES}
SERVING_MODULES = sorted(f"serving.{path.stem}" for path in (REPO_ROOT / "serving").glob("*.py")
                         if path.stem != "__init__")


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
    assert "evaluation.model_meta" in EVALUATION_MODULES and "evaluation.suite" in EVALUATION_MODULES
    assert len(EVALUATION_MODULES) == len(list((REPO_ROOT / "evaluation").glob("*.py"))) - 1  # less __init__


@pytest.mark.parametrize("path", sorted((REPO_ROOT / "evaluation").glob("*.py")), ids=lambda path: path.name)
def test_no_evaluation_file_imports_train_or_codesearch(path):
    assert not imported_packages(path) & NOT_FOR_EVALUATION


TRAIN_AND_CODESEARCH_FILES = sorted([*(REPO_ROOT / "train").glob("*.py"), *(REPO_ROOT / "codesearch").glob("*.py")])


@pytest.mark.parametrize("path", TRAIN_AND_CODESEARCH_FILES, ids=lambda path: f"{path.parent.name}/{path.name}")
def test_train_and_codesearch_take_what_they_share_from_c2llm_data(path):
    """The task catalogue, prompts, BEIR reading, code tokens and the packaged start model's location are
    c2llm_data's: training and codesearch need no evaluation code for them."""
    assert "evaluation" not in imported_packages(path)


SHARED_FILES = sorted(path for package in SHARED_PACKAGES for path in (REPO_ROOT / package).glob("*.py"))


@pytest.mark.parametrize("path", SHARED_FILES, ids=lambda path: f"{path.parent.name}/{path.name}")
def test_the_shared_packages_are_leaves(path):
    """train, evaluation, serving and codesearch import c2llm_data and c2llm_plumbing; these import none of the
    project's packages (each module its own package only), so nothing below the front doors reaches above it."""
    assert not imported_packages(path) & (NOT_FOR_THE_SHARED_PACKAGE - {path.parent.name})


@pytest.mark.parametrize("path", sorted((REPO_ROOT / "serving").glob("*.py")), ids=lambda path: path.name)
def test_no_serving_file_imports_codesearch(path):
    """A server never imports another app to reach shared plumbing (model folders, argument types, text checks)."""
    assert "codesearch" not in imported_packages(path)


@pytest.mark.slow  # a fresh interpreter, so that nothing imported by another test hides the import
def test_serving_modules_import_without_codesearch():
    """Every serving module imports with nothing of codesearch loaded, its lazy paths aside (the AST test above)."""
    script = (
        "import importlib, sys\n"
        f"for name in ['serving', *{SERVING_MODULES!r}]: importlib.import_module(name)\n"
        "loaded = sorted(name for name in sys.modules if name.split('.')[0] == 'codesearch')\n"
        "assert not loaded, loaded\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    assert result.returncode == 0, result.stderr[-3000:]


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
