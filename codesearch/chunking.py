"""Split a source tree into searchable pieces: Python by function/class (ast), other code by line windows."""

import ast
from dataclasses import dataclass
from pathlib import Path

PYTHON_SUFFIXES = (".py",)
OTHER_CODE_SUFFIXES = (".js", ".ts", ".java", ".go", ".rs", ".c", ".h", ".cc", ".cpp", ".hpp", ".cs", ".rb", ".php",
                       ".kt", ".swift", ".scala", ".sql", ".sh")
SKIPPED_DIRS = {".git", ".hg", ".svn", "__pycache__", "node_modules", ".venv", "venv", ".venv-compat", ".tox",
                "build", "dist", ".mypy_cache", ".pytest_cache"}
MAX_FILE_BYTES = 1_000_000  # larger files are mostly generated or data
WINDOW_LINES = 40  # piece size for languages we do not parse


@dataclass(frozen=True)
class CodePiece:
    path: Path
    line: int  # 1-based line where the piece starts
    title: str  # first line, shown in results
    text: str


def code_files(root: Path) -> list[Path]:
    """Source files under root (or root itself if it is a file), skipping VCS, caches and virtualenvs."""
    if root.is_file():
        return [root] if root.suffix in PYTHON_SUFFIXES + OTHER_CODE_SUFFIXES else []
    found = []
    for path in sorted(root.rglob("*")):
        if any(part in SKIPPED_DIRS for part in path.relative_to(root).parts[:-1]):
            continue
        if path.suffix in PYTHON_SUFFIXES + OTHER_CODE_SUFFIXES and path.is_file() and path.stat().st_size <= MAX_FILE_BYTES:
            found.append(path)
    return found


def python_pieces(path: Path, source: str) -> list[CodePiece]:
    """Every function, method and class of a Python file; line windows if it does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return window_pieces(path, source)
    pieces = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            text = ast.get_source_segment(source, node) or ""
            if text.strip():
                pieces.append(CodePiece(path, node.lineno, text.splitlines()[0].strip(), text))
    return pieces or window_pieces(path, source)


def window_pieces(path: Path, source: str) -> list[CodePiece]:
    lines = source.splitlines()
    pieces = []
    for start in range(0, len(lines), WINDOW_LINES):
        text = "\n".join(lines[start:start + WINDOW_LINES])
        if text.strip():
            title = next(line.strip() for line in lines[start:start + WINDOW_LINES] if line.strip())
            pieces.append(CodePiece(path, start + 1, title, text))
    return pieces


def split_into_pieces(files: list[Path]) -> list[CodePiece]:
    pieces = []
    for path in files:
        source = path.read_text(encoding="utf-8", errors="replace")
        pieces.extend(python_pieces(path, source) if path.suffix in PYTHON_SUFFIXES else window_pieces(path, source))
    return pieces
