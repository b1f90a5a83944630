"""codesearch file selection: .gitignore (with and without git), virtualenvs, binaries, size, permissions, globs."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from codesearch.files import FolderReader, LeavesFolder, matches_glob, select_files


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
        real_stat, real_scandir, real_os_open = Path.stat, os.scandir, os.open

        def os_open(path, flags, mode=0o777, *, dir_fd=None):  # codesearch opens relative to a folder descriptor
            full = Path(os.readlink(f"/proc/self/fd/{dir_fd}"), os.fsdecode(path)) if dir_fd is not None else path
            return refuse(full) if is_denied(full) else real_os_open(path, flags, mode, dir_fd=dir_fd)

        monkeypatch.setattr(Path, "stat", lambda self, **kw: refuse(self) if is_denied(self) and self not in denied
                            else real_stat(self, **kw))
        monkeypatch.setattr(os, "scandir", lambda path=".": refuse(path) if is_denied(path) else real_scandir(path))
        monkeypatch.setattr(os, "open", os_open)

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
    """The same as the chmod test, by making the open refuse one file (root ignores file modes)."""
    write(tmp_path, "ok.py")
    write(tmp_path, "locked.py")
    real_open = os.open

    def refusing_open(path, *args, **kwargs):
        if os.fsdecode(path).endswith("locked.py"):
            raise PermissionError(13, "Permission denied", os.fsdecode(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", refusing_open)
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


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_tracked_folder_replaced_by_a_link_outside_is_skipped_at_any_depth(tmp_path):
    """git still lists `vendor/deep/a.py` from its index once `vendor` is a link: the link is on the way, not last."""
    outside, root = tmp_path / "outside", tmp_path / "root"
    write(outside, "deep/a.py", "TOKEN = 'sk-FAKE'\n")
    write(outside, "deep/b.py", "TOKEN = 'sk-FAKE'\n")
    write(root, "vendor/deep/a.py")
    write(root, "vendor/deep/b.py")
    write(root, "src/app.py")
    write(root, "src/inner/c.py")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "."], check=True)
    shutil.rmtree(root / "vendor")
    (root / "vendor").symlink_to(outside, target_is_directory=True)
    shutil.rmtree(root / "src" / "inner")
    (root / "src" / "inner").symlink_to(outside / "deep", target_is_directory=True)  # deeper, and tracked below
    assert "vendor/deep/a.py" in subprocess.run(["git", "-C", str(root), "ls-files"], capture_output=True,
                                                text=True, check=True).stdout
    selection = select_files(root)
    assert selection.files == ["src/app.py"]
    assert selection.skipped["links leading outside the folder"] == 2  # vendor and src/inner, each counted once


def swap_for_links(root: Path, outside: Path) -> None:
    """race.py and the folder pkg/ become links to files outside, as a hostile process would make them."""
    (root / "race.py").unlink()
    (root / "race.py").symlink_to(outside / "secret.py")
    shutil.rmtree(root / "pkg")
    (root / "pkg").symlink_to(outside / "pkg", target_is_directory=True)


@pytest.fixture
def race_tree(tmp_path):
    outside, root = tmp_path / "outside", tmp_path / "root"
    write(outside, "secret.py", "TOKEN = 'sk-FAKE'\n")
    write(outside, "pkg/mod.py", "TOKEN = 'sk-FAKE'\n")
    write(root, "race.py", "x = 1\n")
    write(root, "pkg/mod.py", "y = 2\n")
    return root, outside


@pytest.mark.parametrize("path", ["race.py", "pkg/mod.py"])
def test_a_link_swapped_in_between_the_check_and_the_open_is_not_followed(race_tree, monkeypatch, path):
    """What is read is what was checked: the swap lands after the path was resolved inside the folder, before it
    is opened; the open refuses the link instead of reading the outside file."""
    root, outside = race_tree
    resolve = FolderReader.inside_path

    def resolve_then_swap(self, relative):
        inside = resolve(self, relative)
        swap_for_links(root, outside)
        return inside

    monkeypatch.setattr(FolderReader, "inside_path", resolve_then_swap)
    with FolderReader(root) as reader, pytest.raises(OSError):
        reader.read(path)


def test_links_found_when_reading_are_refused_and_name_the_link(race_tree):
    root, outside = race_tree
    swap_for_links(root, outside)
    with FolderReader(root) as reader:
        for path, link in (("race.py", "race.py"), ("pkg/mod.py", "pkg")):
            with pytest.raises(LeavesFolder) as refused:
                reader.read(path)
            assert refused.value.link == link


def test_fifos_and_devices_in_the_folder_are_passed_over_without_blocking(tmp_path):
    write(tmp_path, "ok.py")
    os.mkfifo(tmp_path / "pipe.py")  # opening a FIFO for reading would wait for a writer forever
    selection = select_files(tmp_path)
    assert selection.files == ["ok.py"]


def test_a_link_removed_while_it_is_resolved_counts_as_a_file_gone(race_tree, monkeypatch):
    """os.path.realpath tests a link, then reads it: a link removed in between raises FileNotFoundError, which
    must skip that one file, not end the selection."""
    from codesearch import files

    root, outside = race_tree
    (root / "race.py").unlink()
    (root / "race.py").symlink_to(root / "pkg" / "mod.py")

    def removed_while_followed(path):
        raise FileNotFoundError(2, "No such file or directory", str(path))

    monkeypatch.setattr(files, "real_path", removed_while_followed)
    selection = select_files(root, 10_000)
    assert selection.files == ["pkg/mod.py"]
    assert selection.skipped["unreadable"] == 1
