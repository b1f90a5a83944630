"""Documented functions of one source file, read with tree-sitter: (doc comment, function without its comment).

- ``LANGUAGES``: the languages mined, each with its file suffixes, the grammar that reads them, the syntax nodes
  that are functions and the comments that count as documentation (the language's own convention: Go's and Ruby's
  plain comments right above, Rust's and Swift's ``///``, Javadoc-style ``/** */``, C#'s ``///`` XML, Elixir's
  ``@doc``).
- ``documented_functions``: every function of a file that has such a doc right above it (attributes and
  annotations between the two stay with the code), the doc reduced to its first paragraph as plain text, with the
  code's line span and the doc's byte span (benchmarks.codesearch_package_places deletes the doc from its tree copy).

Grammars come from tree-sitter-language-pack's public ``get_parser``, the same package and call codesearch's
chunker uses, so the project holds one grammar set.
"""

from __future__ import annotations

import functools
import re
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass

# A doc comment's kind: which comment texts document the code below them.
ANY_COMMENT = "any"  # Go, C, C++, Ruby: the comment right above a function is its doc by convention
SLASH_DOC = "slash"  # Rust, Swift: `///` lines or a `/** */` block
JAVADOC = "javadoc"  # Java, Kotlin, JavaScript, TypeScript, PHP: a `/** */` block
XML_DOC = "xml"  # C#: `///` lines of XML (<summary>)
ELIXIR_DOC = "elixir"  # Elixir: the `@doc` attribute's string


@dataclass(frozen=True)
class Language:
    """How one language is mined: the files, the grammar per suffix, the function nodes, the doc convention."""

    name: str
    grammars: dict[str, str]  # file suffix -> tree-sitter-language-pack grammar name
    function_types: frozenset[str]
    doc_kind: str


def _language(name: str, grammars: dict[str, str], function_types: set[str], doc_kind: str) -> Language:
    return Language(name, grammars, frozenset(function_types), doc_kind)


JS_FUNCTIONS = {"function_declaration", "generator_function_declaration", "method_definition"}
LANGUAGES = {language.name: language for language in (
    _language("go", {".go": "go"}, {"function_declaration", "method_declaration"}, ANY_COMMENT),
    _language("rust", {".rs": "rust"}, {"function_item"}, SLASH_DOC),
    # JavaScript libraries document with `//` as often as with JSDoc (underscore, moment): any comment counts
    _language("javascript", {".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript"},
              JS_FUNCTIONS, ANY_COMMENT),
    _language("typescript", {".ts": "typescript", ".mts": "typescript", ".cts": "typescript", ".tsx": "tsx"},
              JS_FUNCTIONS, JAVADOC),
    _language("java", {".java": "java"}, {"method_declaration", "constructor_declaration"}, JAVADOC),
    _language("kotlin", {".kt": "kotlin"}, {"function_declaration"}, JAVADOC),
    _language("c", {".c": "c", ".h": "c"}, {"function_definition"}, ANY_COMMENT),
    _language("cpp", {".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".hpp": "cpp", ".hh": "cpp", ".hxx": "cpp",
                      ".h": "cpp"}, {"function_definition"}, ANY_COMMENT),
    _language("csharp", {".cs": "csharp"}, {"method_declaration", "constructor_declaration"}, XML_DOC),
    _language("ruby", {".rb": "ruby"}, {"method", "singleton_method"}, ANY_COMMENT),
    _language("php", {".php": "php"}, {"method_declaration", "function_definition"}, JAVADOC),
    _language("swift", {".swift": "swift"}, {"function_declaration"}, SLASH_DOC),
    _language("elixir", {".ex": "elixir"}, {"call"}, ELIXIR_DOC),
)}

COMMENT_TYPES = {"comment", "line_comment", "block_comment", "multiline_comment"}
# Nodes allowed between a doc and its function; they are part of the code (`#[inline]`, Elixir's `@spec`).
BETWEEN_TYPES = {"attribute_item", "decorator", "unary_operator"}
WRAPPER_TYPES = {"export_statement", "template_declaration"}  # `export function f`, `template <class T> T f()`
JS_VALUE_STATEMENTS = {"lexical_declaration", "variable_declaration"}  # `const f = () => {...}`
JS_FUNCTION_VALUES = {"arrow_function", "function_expression", "function", "generator_function"}
ELIXIR_PUBLIC_DEFINITIONS = {"def", "defmacro"}  # private `defp` cannot carry an @doc
# Build and lint directives and magic comments are comments but not documentation.
DIRECTIVE = re.compile(r"^(//go:|//\s*\+build|//nolint|//export |#\s*frozen_string_literal|#\s*rubocop:|#!|"
                       r"(//|/\*)\s*(eslint|@ts-|istanbul|prettier-ignore|jshint|global |c8 ))")
# A boxed section banner ("/*****...", "// ======") heads a part of a file, not the function below it.
BANNER = re.compile(r"[*=#-]{10,}")
# A block comment may stand one blank line above its function (libyaml's, Express's JSDoc); line comments must touch.
BLOCK_COMMENT_GAP = 1
# Where a doc's summary ends: a tag line (Javadoc/JSDoc/PHPDoc/YARD `@param`), a Markdown heading or fence
# (Rust/Swift/Elixir `# Examples`, ```` ``` ````), a parameter section.
SUMMARY_END = re.compile(r"^(@\w|#|```|- (parameter|returns?|throws)\b|(args|arguments|returns|parameters|"
                         r"example|examples|see also|note)\s*:)", re.IGNORECASE)
# gtk-doc (libxml2, GLib) opens with the name and the parameters, the description follows:
# "xmlStrdup:" / "@cur:  the input" / "" / "a strdup for array of xmlChar's."
GTK_DOC_HEADER = re.compile(r"^([A-Za-z_][\w:.]*:|@\w+:.*)$")
INLINE_TAG = re.compile(r"\{@\w+\s+([^}]*)\}")  # {@link Foo#bar} / {@code x} -> their text
XML_REFERENCE = re.compile(r"<(?:see|paramref|typeparamref)\s+\w+=\"([^\"]+)\"\s*/>")  # C# <see cref="X"/> -> X
XML_SUMMARY = re.compile(r"<summary>(.*?)</summary>", re.DOTALL)
HTML_TAG = re.compile(r"</?[a-zA-Z][^>]*>")
PARAGRAPH_TAG = re.compile(r"<p>|<br\s*/?>", re.IGNORECASE)
POINTER_DECLARATORS = {"pointer_declarator", "reference_declarator", "parenthesized_declarator"}
# C/C++ declarators nest a few levels (pointer -> function -> qualified -> identifier); a deeper one is no name
MAX_DECLARATOR_DEPTH = 8


@dataclass(frozen=True)
class DocumentedFunction:
    """One function with its doc: what a code-search pair is made from."""

    name: str  # the declared name ("" when the grammar gives none)
    doc: str  # the doc's first paragraph, markers and markup removed, whitespace folded
    code: str  # the function from its first attribute/annotation to its end, without the doc, dedented
    line: int  # 1-based line of the code's first line
    end_line: int  # 1-based line of the code's last line
    doc_bytes: tuple[int, int]  # the doc comment(s) in the file's UTF-8 bytes: [start, end)


@functools.cache
def parser_for(grammar: str):
    """tree-sitter-language-pack's parser for ``grammar`` (one per grammar per process: building one loads it)."""
    from tree_sitter_language_pack import get_parser

    return get_parser(grammar)


def documented_functions(language: Language, suffix: str, source: str) -> Iterator[DocumentedFunction]:
    """Every function of ``source`` (a file of ``language`` ending in ``suffix``) with a doc right above it."""
    data = source.encode("utf-8", errors="replace")
    lines = data.decode("utf-8").splitlines()
    root = parser_for(language.grammars[suffix]).parse(data).root_node
    stack = [root]
    while stack:
        node = stack.pop()
        stack.extend(reversed(node.named_children))
        if not _is_function(language, node):
            continue
        anchor = node
        while anchor.parent is not None and anchor.parent.type in WRAPPER_TYPES:
            anchor = anchor.parent
        found = _doc_above(language, anchor)
        if found is None:
            continue
        doc, code_start, doc_bytes = found
        start_row, end_row = code_start.start_point[0], node.end_point[0]
        code = textwrap.dedent("\n".join(lines[start_row:end_row + 1])).strip("\n")
        if doc and code:
            yield DocumentedFunction(_function_name(node), doc, code, start_row + 1, end_row + 1, doc_bytes)


def _is_function(language: Language, node) -> bool:
    if language.name == "elixir":
        return node.type == "call" and _call_keyword(node) in ELIXIR_PUBLIC_DEFINITIONS
    if language.name in ("javascript", "typescript") and node.type in JS_VALUE_STATEMENTS:
        return any((declarator.child_by_field_name("value") or declarator).type in JS_FUNCTION_VALUES
                   for declarator in node.named_children)
    if node.type != "function_definition" or language.name not in ("c", "cpp"):
        return node.type in language.function_types
    declarator = node.child_by_field_name("declarator")  # C/C++: a real function declares a parameter list
    while declarator is not None and declarator.type in POINTER_DECLARATORS:  # `char *name(...)`, `T &name(...)`
        declarator = _inner_declarator(declarator)
    return declarator is not None and declarator.type == "function_declarator"


def _inner_declarator(node):
    """What a pointer or reference declarator declares (C++'s `&name(...)` names it in no field)."""
    inner = node.child_by_field_name("declarator")
    if inner is None and node.type in POINTER_DECLARATORS:
        inner = next((child for child in node.named_children if child.type != "type_qualifier"), None)
    return inner


def _last_row(node) -> int:
    """The node's last line (0-based): a line comment that includes its newline ends at column 0 of the next."""
    row, column = node.end_point
    return row - 1 if column == 0 and row > node.start_point[0] else row


def _previous(node):
    """The named node right before ``node``; for the first node of a body, the one before the body (Ruby puts a
    class's first doc comment beside the body that holds the method)."""
    while node is not None:
        if node.prev_named_sibling is not None:
            return node.prev_named_sibling
        parent = node.parent
        if parent is None or parent.start_point[0] != node.start_point[0]:
            return None
        node = parent
    return None


def _doc_above(language: Language, anchor):
    """(doc text, first node of the code, the doc's [start, end) bytes) for the doc comment(s) right above
    ``anchor``, or None."""
    code_start, row = anchor, anchor.start_point[0]
    comments, doc_start, doc_end = [], 0, 0
    node = _previous(anchor)
    while node is not None and _touches(node, row, first=not comments and code_start is anchor):
        if language.doc_kind == ELIXIR_DOC and node.type == "unary_operator" and _elixir_attribute(node) == "doc":
            return _clean(_elixir_doc_text(node), language.doc_kind), code_start, (node.start_byte, node.end_byte)
        if node.type in COMMENT_TYPES:
            text = (node.text or b"").decode("utf-8", errors="replace")
            if DIRECTIVE.match(text) or BANNER.search(text) or not _is_doc_comment(language.doc_kind, text):
                break
            doc_end = doc_end or node.end_byte
            doc_start = node.start_byte
            comments.insert(0, text)
        elif node.type in BETWEEN_TYPES and not comments:
            code_start = node
        else:
            break
        row = node.start_point[0]
        node = _previous(node)
    if not comments or language.doc_kind == ELIXIR_DOC:
        return None
    return _clean("\n".join(comments), language.doc_kind), code_start, (doc_start, doc_end)


def _touches(node, row: int, first: bool) -> bool:
    """``node`` ends on the line above ``row`` (0-based), or, when it is the block comment right above a
    function, up to BLOCK_COMMENT_GAP blank lines above it."""
    gap = row - 1 - _last_row(node)
    return gap <= 0 or (first and gap <= BLOCK_COMMENT_GAP and (node.text or b"").startswith(b"/*"))


def _is_doc_comment(doc_kind: str, text: str) -> bool:
    if doc_kind == ANY_COMMENT:
        return True
    if doc_kind == SLASH_DOC:
        return (text.startswith("///") and not text.startswith("////")) or _is_block_doc(text)
    if doc_kind == XML_DOC:
        return text.startswith("///")
    return doc_kind == JAVADOC and _is_block_doc(text)


def _is_block_doc(text: str) -> bool:
    return text.startswith("/**") and not text.startswith("/**/")


def _clean(text: str, doc_kind: str) -> str:
    """The first paragraph of a doc comment as plain text."""
    lines = []
    for line in text.splitlines():
        line = line.strip()
        line = re.sub(r"^(//!|///|//|/\*+!?|\*+/|\*+|#+(?=\s|$)|\"\"\"|\")", "", line).strip()
        line = re.sub(r"(\*+/|\*+|\"\"\")$", "", line).strip()
        lines.append(line)
    text = "\n".join(lines)
    if doc_kind == XML_DOC:
        summary = XML_SUMMARY.search(text)
        text = XML_REFERENCE.sub(r"\1", summary.group(1) if summary else text)
    text = PARAGRAPH_TAG.sub("\n\n", INLINE_TAG.sub(r"\1", text))
    summary_lines = []
    for line in HTML_TAG.sub("", text).splitlines():
        if not line.strip():
            if summary_lines:
                break
            continue
        if not summary_lines and GTK_DOC_HEADER.match(line.strip()):
            continue
        if SUMMARY_END.match(line.strip()):
            break
        summary_lines.append(line)
    return " ".join(" ".join(summary_lines).split())


def _call_keyword(node) -> str:
    """`def` of Elixir's `def name(args) do`: the identifier a call starts with, else ""."""
    target = node.named_children[0] if node.named_children else None
    return (target.text or b"").decode() if target is not None and target.type == "identifier" else ""


def _elixir_attribute(node) -> str:
    """`doc` of `@doc "..."`: the name of a module attribute, else ""."""
    operand = node.named_children[0] if node.named_children else None
    return _call_keyword(operand) if operand is not None and operand.type == "call" else ""


def _elixir_doc_text(node) -> str:
    """The string of an `@doc` heredoc or string (`@doc false` has none: an empty doc, dropped)."""
    arguments = node.named_children[0].named_children[1:] if node.named_children else []
    strings = [child for argument in arguments for child in argument.named_children if child.type in ("string",
                                                                                                      "sigil")]
    return (strings[0].text or b"").decode("utf-8", errors="replace") if strings else ""


def _function_name(node) -> str:
    """The declared name: a `name` field, else through C/C++ declarators, JavaScript variables, Elixir's call."""
    if node.type == "call":  # Elixir: `def name(args) do`
        arguments = node.named_children[1] if len(node.named_children) > 1 else None
        head = arguments.named_children[0] if arguments is not None and arguments.named_children else None
        while head is not None and head.type in ("call", "binary_operator") and head.named_children:
            head = head.named_children[0]  # `name(args)`, `name(args) when guard`
        return (head.text or b"").decode() if head is not None else ""
    if node.type in JS_VALUE_STATEMENTS:
        node = node.named_children[0] if node.named_children else node
    current = node
    for _ in range(MAX_DECLARATOR_DEPTH):
        name = current.child_by_field_name("name") or _inner_declarator(current)
        if name is None:
            break
        current = name
        if current.type in ("identifier", "field_identifier", "property_identifier", "simple_identifier",
                            "name", "constant", "destructor_name", "operator_name"):
            break
    if current is node:  # Kotlin and Swift name a function in no field
        current = next((child for child in node.named_children if child.type == "simple_identifier"), node)
    text = (current.text or b"").decode("utf-8", errors="replace") if current is not node else ""
    return text.rsplit("::", 1)[-1]
