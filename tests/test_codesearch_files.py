"""codesearch file selection: .gitignore (with and without git), virtualenvs, binaries, size, permissions, globs."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from codesearch.files import matches_glob, select_files


def write(root: Path, relative: str, content: str | bytes = "x = 1\n") -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


def make_tree(root: Path) -> None:
    write(root, "src/app.py")
    write(root, "src/util.js", "function f() {}\n")
    write(root, "notes.txt", "not code")
    write(root, ".gitignore", "generated/\n*.gen.py\n")
    write(root, "generated/out.py")
    write(root, "src/table.gen.py")
    write(root, "sub/.gitignore", "local.py\n")
    write(root, "sub/local.py")
    write(root, "sub/kept.py")
    write(root, "myenv/pyvenv.cfg", "home = /usr/bin\n")  # a virtualenv not named venv/.venv
    write(root, "myenv/lib/site.py")


def test_gitignore_without_git(tmp_path):
    make_tree(tmp_path)
    selection = select_files(tmp_path)
    assert selection.how == ".gitignore rules"
    assert selection.files == ["src/app.py", "src/util.js", "sub/kept.py"]
    assert selection.skipped["virtualenvs"] == 1


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_gitignore_in_a_git_repository(tmp_path):
    make_tree(tmp_path)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "add", "src/app.py"], check=True)  # tracked; the rest untracked
    write(tmp_path, ".git/info/exclude", "sub/kept.py\n")  # git's own ignore rules apply too
    selection = select_files(tmp_path)
    assert selection.how == "git ls-files"
    assert selection.files == ["src/app.py", "src/util.js"]
    assert selection.skipped["virtualenvs"] == 1


def test_binary_and_oversize_files_are_skipped_and_counted(tmp_path):
    write(tmp_path, "ok.py")
    write(tmp_path, "blob.py", b"x = 1\n\x00\x01\x02")
    write(tmp_path, "huge.py", "x = 1\n" * 1000)
    selection = select_files(tmp_path, max_file_bytes=1000)
    assert selection.files == ["ok.py"]
    assert selection.skipped["binary"] == 1
    assert selection.skipped["over 1,000 bytes"] == 1


@pytest.fixture
def deny(monkeypatch):
    """deny(path): make a file or folder unreadable. Not root: chmod 000, the real thing. Root reads everything
    whatever its mode, so there every access below the path fails as it does for other users: stat, scandir
    (os.walk) and open raise PermissionError."""
    denied: list[Path] = []

    def is_denied(path) -> bool:
        path = Path(os.fsdecode(path))
        return any(path == d or d in path.parents for d in denied)

    def refuse(path):
        raise PermissionError(13, "Permission denied", os.fsdecode(path))

    if os.geteuid() == 0:
        real_stat, real_scandir, real_open = Path.stat, os.scandir, open
        monkeypatch.setattr(Path, "stat", lambda self, **kw: refuse(self) if is_denied(self) and self not in denied
                            else real_stat(self, **kw))
        monkeypatch.setattr(os, "scandir", lambda path=".": refuse(path) if is_denied(path) else real_scandir(path))
        monkeypatch.setattr("codesearch.files.open", lambda path, *a, **kw: refuse(path) if is_denied(path)
                            else real_open(path, *a, **kw), raising=False)

    def deny_path(path: Path) -> None:
        denied.append(path)
        if os.geteuid() != 0:
            path.chmod(0)

    yield deny_path
    for path in denied:
        path.chmod(0o755 if path.is_dir() else 0o644)


@pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX")
def test_unreadable_file_is_skipped_and_counted(tmp_path, deny):
    write(tmp_path, "ok.py")
    deny(write(tmp_path, "locked.py"))
    selection = select_files(tmp_path)
    assert selection.files == ["ok.py"]
    assert selection.skipped["unreadable"] == 1


@pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX")
def test_an_unreadable_folder_is_skipped_and_counted_not_fatal(tmp_path, deny):
    """The virtualenv probe used to raise PermissionError on a folder that cannot be entered."""
    for relative in ("ok.py", "sub/hidden.py", "deeper/more/code.py"):
        write(tmp_path, relative)
    deny(tmp_path / "sub")
    selection = select_files(tmp_path)
    assert sorted(selection.files) == ["deeper/more/code.py", "ok.py"]
    assert selection.skipped["unreadable folders"] == 1


def test_include_and_exclude_globs_match_the_relative_path_or_the_file_name():
    paths = ["src/a.py", "src/b.js", "tests/test_a.py", "docs/conf.py"]
    assert [path for path in paths if matches_glob(path, ["*.py"])] == ["src/a.py", "tests/test_a.py", "docs/conf.py"]
    assert [path for path in paths if not matches_glob(path, ["tests/*", "docs/"])] == ["src/a.py", "src/b.js"]
    assert [path for path in paths if matches_glob(path, ["**/conf.py"])] == ["docs/conf.py"]


def test_permission_error_is_skipped_and_counted_whoever_runs(tmp_path, monkeypatch):
    """The same as the chmod test, by making open() refuse one file (root ignores file modes)."""
    write(tmp_path, "ok.py")
    write(tmp_path, "locked.py")
    real_open = open

    def refusing_open(path, *args, **kwargs):
        if str(path).endswith("locked.py"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("codesearch.files.open", refusing_open, raising=False)
    selection = select_files(tmp_path)
    assert selection.files == ["ok.py"]
    assert selection.skipped["unreadable"] == 1


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_git_ignored_folder_is_still_searchable(tmp_path):
    """Searching inside an ignored folder (say a virtualenv's site-packages) walks it instead of finding nothing."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    write(tmp_path, ".gitignore", "vendored/\n")
    write(tmp_path, "vendored/lib/a.py")
    selection = select_files(tmp_path / "vendored")
    assert selection.files == ["lib/a.py"]


@pytest.mark.parametrize("listed_by", ["walk", "git"])
def test_links_leading_outside_the_folder_are_skipped_and_counted(tmp_path, listed_by):
    """Files and folders alike; a link to a file inside the folder is indexed under the link's name."""
    if listed_by == "git" and shutil.which("git") is None:
        pytest.skip("git is not installed")
    outside, root = tmp_path / "outside", tmp_path / "root"
    write(outside, "secret.py", "TOKEN = 'sk-FAKE'\n")
    write(root, "src/app.py")
    (root / "link.py").symlink_to(outside / "secret.py")
    (root / "linked").symlink_to(outside, target_is_directory=True)
    (root / "src" / "alias.py").symlink_to(root / "src" / "app.py")
    (root / "src_again").symlink_to(root / "src", target_is_directory=True)  # inside: its files are listed once
    (root / "loop_a.py").symlink_to(root / "loop_b.py")  # a loop: unreadable, never a crash
    (root / "loop_b.py").symlink_to(root / "loop_a.py")
    if listed_by == "git":
        subprocess.run(["git", "init", "-q", str(root)], check=True)
    selection = select_files(root)
    assert selection.how == ("git ls-files" if listed_by == "git" else ".gitignore rules")
    assert selection.files == ["src/alias.py", "src/app.py"]
    assert selection.skipped["links leading outside the folder"] == 2 and selection.skipped["unreadable"] == 2
