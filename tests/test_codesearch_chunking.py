"""codesearch chunking: what becomes a piece, exact line numbers, no text embedded twice, linear time."""

import gc
import textwrap
import time

import pytest

from codesearch.chunking import (
    MAX_PIECE_LINES,
    WINDOW_LINES,
    WINDOW_OVERLAP,
    ChunkingError,
    split_file,
    tree_sitter_available,
)

SOURCE = textwrap.dedent('''\
    """Module docstring."""
    import os

    LIMIT = 10


    @decorator
    def top(a, b):
        """Add."""
        def inner():
            return a
        return a + b


    class Shape:
        """A shape."""

        sides = 4

        def area(self):
            return self.sides * 2

        class Inner:
            flag = True

            def check(self):
                return self.flag

        async def fetch(self):
            return await get()

        colour = "red"


    if __name__ == "__main__":
        top(1, 2)
    ''')


def pieces_by_title(source=SOURCE, path="m.py"):
    return {piece.title: piece for piece in split_file(path, source)}


def test_module_level_code_is_indexed():
    pieces = split_file("m.py", SOURCE)
    texts = "\n".join(piece.text for piece in pieces)
    for statement in ('"""Module docstring."""', "import os", "LIMIT = 10", 'if __name__ == "__main__":', "top(1, 2)"):
        assert statement in texts


def test_functions_methods_and_classes_are_pieces_with_exact_lines():
    lines = SOURCE.splitlines()
    by_title = pieces_by_title()
    assert {"def top", "class Shape", "def Shape.area", "class Shape.Inner", "def Shape.Inner.check",
            "async def Shape.fetch"} <= set(by_title)
    top = by_title["def top"]
    assert (top.line, top.end_line) == (7, 12)  # the decorator line starts it; nested `inner` stays inside
    assert top.text == "\n".join(lines[6:12])
    area = by_title["def Shape.area"]
    assert area.text == "\n".join(lines[area.line - 1:area.end_line])
    assert lines[area.line - 1].strip() == "def area(self):"
    for piece in by_title.values():  # every piece starts and ends on its first and last own line
        assert piece.text.splitlines()[0] == lines[piece.line - 1]
        assert piece.text.splitlines()[-1] == lines[piece.end_line - 1]


def test_no_text_is_embedded_twice():
    pieces = split_file("m.py", SOURCE)
    seen = {}
    for piece in pieces:
        for line in piece.text.splitlines():
            if line.strip():
                assert line not in seen, f"{line!r} is in {seen.get(line)} and {piece.title}"
                seen[line] = piece.title
    shape = pieces_by_title()["class Shape"]
    assert "sides = 4" in shape.text and 'colour = "red"' in shape.text  # class-level statements kept
    assert "def area" not in shape.text and "flag = True" not in shape.text  # methods/inner classes are their own


def test_comments_right_above_a_definition_belong_to_it():
    source = textwrap.dedent("""\
        import os
        # Why the limit is 10.
        LIMIT = 10

        # Retries because the server drops the first request.
        # See the incident notes.
        def fetch():
            return 1


        class Box:
            size = 1

            # Doubles in place.
            def grow(self):
                self.size *= 2
        """)
    by_title = {piece.title: piece for piece in split_file("c.py", source)}
    fetch = by_title["def fetch"]
    assert fetch.line == 5 and fetch.text.startswith("# Retries because")
    grow = by_title["def Box.grow"]
    assert grow.text.startswith("    # Doubles in place.") and grow.line == 14
    assert "Doubles" not in by_title["class Box"].text
    assert "# Why the limit is 10." in split_file("c.py", source)[0].text


def test_long_function_is_split_into_overlapping_windows():
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_PIECE_LINES + 40))
    source = f"def long():\n{body}"
    pieces = split_file("long.py", source)
    assert len(pieces) == 3
    assert all(piece.title == "def long" for piece in pieces)
    assert pieces[0].line == 1 and pieces[0].end_line == WINDOW_LINES
    assert pieces[1].line == WINDOW_LINES - WINDOW_OVERLAP + 1  # overlap with the previous window
    assert pieces[1].text.startswith("def long  # continued\n")  # later windows say what they belong to
    assert pieces[-1].end_line == len(source.splitlines())


def test_syntax_error_falls_back_to_line_windows():
    pieces = split_file("broken.py", "def broken(:\n    pass\n")
    assert [(p.line, p.end_line) for p in pieces] == [(1, 2)]


def test_pathological_python_raises_chunking_error():
    with pytest.raises(ChunkingError):
        split_file("deep.py", "x = 1" + " + 1" * 200_000)


def generated_module(functions: int) -> str:
    return "".join(f"def f{i}(a):\n    b = a + {i}\n    return b\n\n\n" for i in range(functions))


def test_chunking_time_is_linear():
    def best_time(source):
        times = []
        gc.disable()  # a collection landing in one run is noise, not the chunker's cost
        try:
            for _ in range(5):  # CPU time of this process: other processes on a busy machine do not count
                start = time.process_time()
                pieces = split_file("gen.py", source)
                times.append(time.process_time() - start)
        finally:
            gc.enable()
        return min(times), pieces

    small_time, _ = best_time(generated_module(800))  # 4k lines
    large_time, pieces = best_time(generated_module(4000))  # 20k lines
    assert len(pieces) == 4000
    assert pieces[-1].line == 5 * 3999 + 1  # f3999: five lines per function
    # 5x the lines: linear ~5x, quadratic ~25x; the bound leaves room for a busy machine
    assert large_time < 12 * small_time, (small_time, large_time)
    assert large_time < 10


@pytest.mark.skipif(not tree_sitter_available(), reason="tree-sitter-language-pack is not installed")
def test_javascript_is_split_at_declarations():
    source = textwrap.dedent("""\
        import fs from "fs";
        const limit = 3;

        function readConfig(path) {
          return JSON.parse(fs.readFileSync(path));
        }

        class Cache {
          get(key) { return this.map[key]; }
        }
        """)
    pieces = split_file("a.js", source)
    spans = [(p.line, p.end_line) for p in pieces]
    assert spans == [(1, 2), (4, 6), (8, 10)]
    assert pieces[1].title == "function readConfig(path) {"


def test_without_tree_sitter_other_languages_get_line_windows(monkeypatch):
    import sys

    from codesearch import chunking

    monkeypatch.setitem(sys.modules, "tree_sitter_language_pack", None)  # import fails, as when not installed
    monkeypatch.setattr(chunking, "_parsers", {})
    assert not tree_sitter_available()
    source = "".join(f"function f{i}() {{ return {i}; }}\n" for i in range(MAX_PIECE_LINES + 20))
    pieces = split_file("many.js", source)
    assert [(p.line, p.end_line) for p in pieces] == [(1, WINDOW_LINES), (WINDOW_LINES - WINDOW_OVERLAP + 1, 100)]
