"""The codesearch manual's typed figures checked against the code: its example output is what the command prints
on the folder written here, and its option defaults and limits are the parsers', the request's and the modules'."""

import re
import shlex
from pathlib import Path

from codesearch import mcp_server
from codesearch.__main__ import build_parser, main
from codesearch.chunking import MAX_PIECE_LINES, MODULE_GROUP_LINES, WINDOW_LINES, WINDOW_OVERLAP
from codesearch.encoders import GPU_MIN_PIECES
from codesearch.first_stage import DEFAULT_CANDIDATES
from codesearch.ranking import PLACES_PER_FILE
from codesearch.request import DEFAULT_TOP_K, MAX_QUERY_CHARS, MAX_TOP_K
from tests.test_codesearch_index import FakeEmbedder

MANUAL = Path(__file__).resolve().parents[1] / "codesearch" / "README.md"
# The fenced blocks right after this comment: the command and what it prints, then the summary line on stderr.
EXAMPLE_MARKER = "<!-- example: tests/test_codesearch_manual.py -->"
FENCED = re.compile(r"```text\n(.*?)```", re.S)
# The folder the example searches: a model module, a search module that uses it, and a test.
EXAMPLE_FILES = {
    "app/models.py": '''"""Which model a command names, checked before any work starts."""

from pathlib import Path

DEFAULT_FOLDER = Path(__file__).parent / "default_model"


def resolve_model(name: str) -> Path:
    """The model folder `--model` names: 'default' or a folder holding modules.json."""
    folder = DEFAULT_FOLDER if name == "default" else Path(name)
    if not (folder / "modules.json").is_file():
        raise ValueError(f"{folder} is not a model folder: pass 'default' or a sentence-transformers folder")
    return folder


def load_model(folder: Path):
    """Load the model from a folder, once per process."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(folder))
''',
    "app/search.py": '''"""Search a folder with the model."""

from app.models import load_model, resolve_model


class FolderSearch:
    """One folder's index and the model that embeds its queries."""

    def __init__(self, folder, model="default"):
        self.folder = folder
        self.model = load_model(resolve_model(model))

    def search(self, query, top_k=10):
        """The best places for a query, best first."""
        return self.model.encode_query([query])[:top_k]
''',
    "tests/test_models.py": '''from app.models import resolve_model


def test_a_missing_folder_is_refused(tmp_path):
    try:
        resolve_model(str(tmp_path))
    except ValueError as error:
        assert "not a model folder" in str(error)
''',
}
# the manual shows the index folder as the user's cache; the run writes it under tmp_path
INDEX_PATH = re.compile(r"index \S*/c2llm-codesearch/[0-9a-f]+;")


def manual() -> str:
    return MANUAL.read_text(encoding="utf-8")


def test_the_manuals_example_output_is_what_codesearch_prints(tmp_path, monkeypatch, capsys):
    shown_output, shown_summary = FENCED.findall(manual().split(EXAMPLE_MARKER, 1)[1])[:2]
    command, _, expected = shown_output.partition("\n")
    for name, text in EXAMPLE_FILES.items():
        (tmp_path / "project" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "project" / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    argv = shlex.split(command.removeprefix("$ codesearch "))

    assert main([*argv, "--quiet"], embedder=FakeEmbedder()) == 0
    printed = capsys.readouterr()
    assert printed.out == expected, f"update the example in codesearch/README.md to:\n{printed.out}"
    summary = INDEX_PATH.sub("index ~/.cache/c2llm-codesearch/...;", printed.err.strip().splitlines()[-1])
    assert summary == shown_summary.strip(), f"update the summary line in codesearch/README.md to:\n{summary}"


def option_defaults() -> dict[str, str]:
    """`--option` -> the default cell of the manual's Options table (every option a row names)."""
    table = manual().split("## Options", 1)[1].split("\n\n", 2)[1]
    defaults = {}
    for row in table.splitlines()[2:]:
        options, default = (cell.strip() for cell in row.strip("|").split("|")[:2])
        for option in re.findall(r"(--[\w-]+)", options):
            defaults[option] = default
    return defaults


def as_typed(value) -> str:
    """A parser default as the manual's table writes it."""
    if value is None:
        return "none"
    if value is False:
        return "off"
    if isinstance(value, int):
        return f"{value:,}"
    return f"`{value}`"


def test_the_manuals_option_defaults_are_the_commands():
    parser = build_parser()
    typed = {option: cell for option, cell in option_defaults().items() if not cell.startswith("see ")}
    assert len(typed) > 10, "the Options table was not found under '## Options'"
    wrong = {option: (cell, as_typed(parser.get_default(option.removeprefix("--").replace("-", "_"))))
             for option, cell in typed.items()
             if cell != as_typed(parser.get_default(option.removeprefix("--").replace("-", "_")))}
    assert not wrong, f"the manual's Options table (typed, actual): {wrong}"


def test_the_manuals_limits_are_the_codes():
    text = " ".join(manual().split())
    assert f"`cuda` when {GPU_MIN_PIECES:,} pieces or more wait" in text
    assert f"the model over BM25's best {DEFAULT_CANDIDATES}," in text
    assert f"groups of up to {MODULE_GROUP_LINES} lines" in text
    assert (f"A piece over {MAX_PIECE_LINES} lines is cut into {WINDOW_LINES}-line windows overlapping by "
            f"{WINDOW_OVERLAP}") in text
    assert f"up to {PLACES_PER_FILE} places, the first shown as the hit" in text
    assert f"own {mcp_server.CALL_THREADS} worker threads (`CALL_THREADS`)" in text
    wait_seconds = mcp_server.build_parser().get_default("wait_seconds")
    assert f"`--wait-seconds` (default {wait_seconds}:" in text
    assert f"`top_k` (1-{MAX_TOP_K}, default {DEFAULT_TOP_K})" in text
    assert f"`query` (at most {MAX_QUERY_CHARS:,} characters)" in text
