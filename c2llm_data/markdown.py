"""The project's one Markdown table: the docs' rendered tables, the evaluation report and the benchmarks' printouts."""


def markdown_table(header: list, rows: list[list], align: str | None = None) -> str:
    """A Markdown table of `header` and `rows` (cells shown with `str`).

    `align`: one letter per column, `l` (text) or `r` (numbers); default: the first column left, the others right.
    """
    align = align or "l" + "r" * (len(header) - 1)
    if len(align) != len(header) or set(align) - {"l", "r"}:
        raise ValueError(f"align {align!r} needs one letter, l or r, per column: {len(header)} columns")
    rule = ["---" if side == "l" else "---:" for side in align]
    return "\n".join("| " + " | ".join(map(str, cells)) + " |" for cells in [header, rule, *rows])
