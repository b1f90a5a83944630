"""The held-out code-search set: four non-Python source trees this project never saw, and queries written from them.

    python -m benchmarks.codesearch_heldout --build            # the trees, into the default folder (below)
    python -m benchmarks.codesearch_heldout --build DIR        # ... or into DIR
    python benchmarks/codesearch_quality.py --queries benchmarks/data/codesearch_heldout.json --hits places

`benchmarks/data/codesearch_heldout.json` pins each tree (a Go, a Rust, a TypeScript and a Java code base) to
registry packages by name, version and sha256, and holds queries written by reading those trees before any search
ran on them: each names its tree (`package`), the file (`path`, from the tree's root) and the line span of the
declaration that answers it (`line`-`end_line`, 1-based, inclusive). `--build` makes each tree
`DIR/<folder>/` from its packages (Debian: `apt-get download NAME=VERSION`, unpacked with `dpkg-deb -x`; npm:
`npm pack NAME@VERSION`, untarred), checking every sha256 first; nothing of the trees is committed. A tree is
written under a temporary name, then renamed, so a killed build leaves no half tree; a tree already there is kept.

The set is TEST ONLY: no ranking constant or data mix is ever tuned on it (codesearch_quality.py refuses it with
`--half dev` or `--used-to-choose`); choices are made on the dev halves of the other sets and reported here.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

REPO_ROOT = Path(__file__).resolve().parents[1]
HELDOUT_SET = REPO_ROOT / "benchmarks" / "data" / "codesearch_heldout.json"
DEFAULT_TREES = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "c2llm-benchmarks" / "heldout"
# Each registry's own client, which downloads its packages
CLIENTS = {"debian": "apt-get", "npm": "npm"}
# A registry archive inside which `take` names a tarball (a package that ships its sources packed) is unpacked once
PACKED_SUFFIXES = (".tar.gz", ".tgz")


class Source(BaseModel):
    """One registry package and the part of it that goes into a tree."""

    model_config = ConfigDict(extra="forbid", strict=True)
    registry: Literal["debian", "npm"]
    name: str
    version: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="of the downloaded .deb or .tgz")
    take: str = Field(description="a folder inside the unpacked package, or a source tarball there (unpacked)")
    into: str = Field(default="", description="where in the tree it goes ('' = the tree's root)")


class Tree(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    language: str
    folder: str = Field(description="the tree's folder under the trees' root")
    about: str
    sources: list[Source] = Field(min_length=1)


class HeldoutQuery(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    package: str = Field(description="the tree the query is about (a key of `trees`)")
    kind: Literal["where", "behaviour", "symbol"]
    query: str = Field(min_length=1)
    path: str = Field(description="the answer's file, from the tree's root")
    line: int = Field(ge=1, description="the answer's first line (its doc comment or attributes included)")
    end_line: int = Field(ge=1, description="the answer's last line")

    @model_validator(mode="after")
    def span_in_order(self) -> HeldoutQuery:
        if self.end_line < self.line:
            raise ValueError(f"{self.path}: end_line {self.end_line} is before line {self.line}; give the span "
                             "first line to last line")
        return self


class HeldoutSet(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    about: str
    trees: dict[str, Tree] = Field(min_length=1)
    queries: list[HeldoutQuery] = Field(min_length=1)

    @model_validator(mode="after")
    def queries_name_trees(self) -> HeldoutSet:
        unknown = sorted({query.package for query in self.queries} - set(self.trees))
        if unknown:
            raise ValueError(f"queries name trees that are not in `trees`: {', '.join(unknown)}; the trees are "
                             f"{', '.join(self.trees)}")
        return self


def load_set(path: Path = HELDOUT_SET) -> HeldoutSet:
    """The set at `path`, checked (pydantic's error names the field) before anything is indexed."""
    return HeldoutSet.model_validate_json(path.read_text(encoding="utf-8"))


def tree_root(trees_root: Path, heldout: HeldoutSet, package: str) -> Path:
    root = trees_root / heldout.trees[package].folder
    if not root.is_dir():
        raise SystemExit(f"{root} does not exist: make the trees with `python -m benchmarks.codesearch_heldout "
                         f"--build {trees_root}`")
    return root


def sha256_of(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def download(source: Source, folder: Path) -> Path:
    """The package's archive, downloaded into `folder` by its registry's own client, its sha256 checked."""
    if source.registry == "debian":
        command = [CLIENTS["debian"], "download", f"{source.name}={source.version}"]
    else:
        command = [CLIENTS["npm"], "pack", f"{source.name}@{source.version}", "--pack-destination", str(folder),
                   "--loglevel=warn"]
    subprocess.run(command, cwd=folder, check=True, stdout=subprocess.DEVNULL)
    archives = [path for path in folder.iterdir() if path.suffix in (".deb", ".tgz")]
    if len(archives) != 1:
        raise SystemExit(f"`{' '.join(command)}` left {len(archives)} archives in {folder}; expected one")
    digest = sha256_of(archives[0])
    if digest != source.sha256:
        raise SystemExit(f"{archives[0].name}: sha256 {digest} is not the pinned {source.sha256}; "
                         "the registry serves another build of this version: check it and update the pin")
    return archives[0]


def unpack(archive: Path, folder: Path) -> None:
    if archive.suffix == ".deb":
        subprocess.run(["dpkg-deb", "-x", str(archive), str(folder)], check=True)
    else:
        with tarfile.open(archive) as packed:
            packed.extractall(folder, filter="data")


def add_source(source: Source, tree: Path, work: Path) -> None:
    """Download `source`, unpack it under `work`, and copy its `take` into `tree/into`."""
    download_dir, unpacked = work / "download", work / "unpacked"
    for folder in (download_dir, unpacked):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
    unpack(download(source, download_dir), unpacked)
    taken = unpacked / source.take
    if taken.name.endswith(PACKED_SUFFIXES):
        inner = work / "inner"
        shutil.rmtree(inner, ignore_errors=True)
        inner.mkdir()
        unpack(taken, inner)
        taken = inner
    if not taken.is_dir():
        raise SystemExit(f"{source.name} {source.version} has no {source.take}; fix `take` in {HELDOUT_SET.name}")
    shutil.copytree(taken, tree / source.into, dirs_exist_ok=True)


def build(trees_root: Path, heldout: HeldoutSet) -> None:
    needed = {CLIENTS[source.registry] for package, spec in heldout.trees.items()
              if not (trees_root / spec.folder).is_dir() for source in spec.sources}
    missing = sorted(client for client in needed if shutil.which(client) is None)
    if missing:
        raise SystemExit(f"{', '.join(missing)} not found: the trees are downloaded with it (Debian's apt-get with "
                         "its package lists, `apt-get update`; npm from Node.js)")
    trees_root.mkdir(parents=True, exist_ok=True)
    for package, spec in heldout.trees.items():
        final = trees_root / spec.folder
        if final.is_dir():
            print(f"{package}: {final} is there, kept", file=sys.stderr)
            continue
        with tempfile.TemporaryDirectory(dir=trees_root, prefix=f".{spec.folder}.") as scratch:
            tree = Path(scratch) / "tree"
            tree.mkdir()
            for source in spec.sources:
                add_source(source, tree, Path(scratch) / "work")
            tree.rename(final)
        files = sum(1 for path in final.rglob("*") if path.is_file())
        print(f"{package}: {final} ({files} files)", file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", type=Path, nargs="?", const=DEFAULT_TREES, required=True, metavar="DIR",
                        help=f"make the trees under DIR (default: {DEFAULT_TREES}); needs apt-get (Debian's "
                             "package lists) and npm")
    parser.add_argument("--set", type=Path, default=HELDOUT_SET, help="the held-out set (default: %(default)s)")
    args = parser.parse_args(argv)
    build(args.build, load_set(args.set))


if __name__ == "__main__":
    main()
