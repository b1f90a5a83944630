"""The installable codesearch: pyproject.toml's dependencies are the requirement files' packages."""

import re
from pathlib import Path

import tomllib

REPO_ROOT = Path(__file__).resolve().parents[1]
OPTIONAL = {"tree-sitter-language-pack"}  # an extra in pyproject.toml, installed by setup.sh


def requirements(name: str) -> dict[str, str]:
    found = {}
    for line in (REPO_ROOT / name).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            package = re.match(r"[A-Za-z0-9_.\-]+", line).group(0).lower()
            found[package] = line.replace(" ", "")
    return found


def test_pyproject_dependencies_match_the_requirement_files():
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    wanted = {**requirements("requirements.txt"), **requirements("requirements-codesearch.txt")}
    declared = {re.match(r"[A-Za-z0-9_.\-]+", d).group(0).lower(): d.replace(" ", "") for d in project["dependencies"]}
    assert declared == {name: spec for name, spec in wanted.items() if name not in OPTIONAL}
    extras = [d.replace(" ", "") for group in project["optional-dependencies"].values() for d in group]
    assert extras == [wanted[name] for name in OPTIONAL]
    assert project["scripts"]["codesearch"] == "codesearch.__main__:main"


def test_setup_installs_the_codesearch_requirements():
    assert "-r requirements-codesearch.txt" in (REPO_ROOT / "setup.sh").read_text()
    assert "-r requirements-codesearch.txt" in (REPO_ROOT / "requirements-dev.txt").read_text()
