"""Split one source file into searchable pieces, in time linear in its length.

- Python (ast): every function and method is a piece (nested functions stay inside their parent; the comment
  lines right above a definition belong to it); a class piece
  is its decorators, header, docstring and class-level statements, without its methods (they are their own
  pieces), so no text is embedded twice; contiguous top-level statements (imports, constants, `if __name__`)
  are grouped into module pieces.
- Other languages: the same grouping over tree-sitter's syntax tree (`tree-sitter-language-pack`, whose 0.x
  wheels carry the grammars): each declaration is a piece with the comments and attributes right above it;
  containers (namespaces, Rust `mod`) are opened; a class-like declaration (a Ruby `module` too) too long for one
  piece is split at its children's boundaries (its methods are pieces titled `Class: first line`, its header
  piece keeps its fields with the methods as holes, as a Python class piece does), a long function stays whole
  and becomes windows that all carry its first line; other nodes are grouped. A `.h` header is parsed as C or
  C++, whichever finds fewer errors. Fixed line windows for a language the package lacks.
- A file's header (a top-level group of comments and import, package or include lines only) is titled by its
  first import line, so ranking tells it from code (codesearch.ranking._HEADER_TITLE).
- A declaration is titled by the line that names it (C's `static void` / `foo(int x)` -> `static void foo(int x)`,
  past annotations, attributes and comments inside its node), so a reader and the definition prior see its name.
- A piece longer than MAX_PIECE_LINES is cut into windows of WINDOW_LINES with WINDOW_OVERLAP lines of overlap;
  windows after the first start with the piece's title line so the model knows what they belong to. The model
  then reads the first max_seq_length tokens of each piece (about 10-20 lines of code at the default 128 tokens).

Source lines are split once per file; every piece is sliced out of that list by the nodes' line numbers
(`lineno`/`end_lineno`), never re-scanned from the start of the file.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

CHUNKING_VERSION = 14  # stored in the index: a change splits every file again (only new piece texts are embedded)
MAX_PIECE_LINES = 80  # longer pieces are split into windows (the model reads only their first lines anyway)
WINDOW_LINES = 60
WINDOW_OVERLAP = 10
MODULE_GROUP_LINES = 40  # contiguous top-level statements are grouped up to this many lines

PYTHON_SUFFIXES = (".py", ".pyi")
# suffix -> tree-sitter-language-pack language name (every grammar here is in the package's wheel: a test parses
# each with the network blocked)
TREE_SITTER_LANGUAGES = {
    ".js": "javascript", ".jsx": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".ts": "typescript",
    ".mts": "typescript", ".cts": "typescript", ".tsx": "tsx", ".java": "java", ".go": "go", ".rs": "rust",
    ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".hpp": "cpp", ".hh": "cpp", ".hxx": "cpp",
    ".cs": "csharp", ".rb": "ruby", ".php": "php", ".kt": "kotlin", ".kts": "kotlin", ".swift": "swift",
    ".scala": "scala", ".sc": "scala", ".sh": "bash", ".bash": "bash", ".zsh": "bash", ".lua": "lua",
    ".ex": "elixir", ".exs": "elixir", ".erl": "erlang", ".hrl": "erlang", ".hs": "haskell", ".zig": "zig",
    ".dart": "dart", ".ml": "ocaml", ".mli": "ocaml", ".jl": "julia", ".r": "r", ".R": "r", ".pl": "perl",
    ".pm": "perl", ".groovy": "groovy", ".gradle": "groovy", ".clj": "clojure", ".cljs": "clojure",
    ".fs": "fsharp", ".fsx": "fsharp", ".sol": "solidity", ".nim": "nim", ".vue": "vue", ".svelte": "svelte",
}
# A `.h` header is C or C++ (fmt's and abseil's are C++, which the C grammar reads as errors): when its C parse has
# errors it is parsed as C++ too, and the parse with fewer error nodes is kept (not fewer bytes in them: one macro
# the grammar does not know can leave a whole C++ file inside one ERROR node whose children still parse).
OTHER_GRAMMAR = {".h": "cpp"}
WINDOW_ONLY_SUFFIXES = (".sql",)
CODE_SUFFIXES = PYTHON_SUFFIXES + tuple(TREE_SITTER_LANGUAGES) + WINDOW_ONLY_SUFFIXES


@dataclass(frozen=True)
class CodePiece:
    path: str  # relative to the searched folder, "/"-separated
    line: int  # first line, 1-based
    end_line: int  # last line, inclusive
    title: str  # shown in results: "def name(...)", "class Name", "Class.method", or the first line
    text: str  # what gets embedded and BM25-indexed


class ChunkingError(Exception):
    """The file could not be parsed at all (the caller counts it as skipped)."""


def split_file(path: str, source: str) -> list[CodePiece]:
    """Pieces of one file; `path` is only recorded. Raises ChunkingError when the parser gives up
    (RecursionError/MemoryError on pathological input); a Python syntax error falls back to line windows."""
    lines = source.splitlines()
    suffix = "." + path.rsplit(".", 1)[-1] if "." in path.rsplit("/", 1)[-1] else ""
    try:
        if suffix in PYTHON_SUFFIXES:
            spans = python_spans(source, lines)
        elif suffix in TREE_SITTER_LANGUAGES:
            spans = tree_sitter_spans(TREE_SITTER_LANGUAGES[suffix], source, OTHER_GRAMMAR.get(suffix))
        else:
            spans = None
    except (RecursionError, MemoryError) as error:
        raise ChunkingError(f"parser gave up: {type(error).__name__}") from error
    if spans is None:
        spans = [Span(1, len(lines))]
    pieces = []
    for span in spans:
        pieces.extend(span_pieces(path, lines, span))
    return pieces


@dataclass
class Span:
    """Lines [start, end] (1-based, inclusive) of one piece, minus `holes` (ranges embedded elsewhere)."""

    start: int
    end: int
    title: str = ""
    holes: tuple[tuple[int, int], ...] = ()
    owner: str = ""  # the declaration a titleless span sits in ("Cache"), to title it "Cache: first line"
    members: tuple[Span, ...] = ()  # a class header's: its untitled body groups (fields), merged into it


def span_pieces(path: str, lines: list[str], span: Span) -> list[CodePiece]:
    kept = []  # (line number, text) of the span's own lines
    cursor = span.start
    for hole_start, hole_end in (*span.holes, (span.end + 1, span.end + 1)):
        kept.extend((number, lines[number - 1]) for number in range(cursor, min(hole_start, span.end + 1)))
        cursor = max(cursor, hole_end + 1)
    while kept and not kept[-1][1].strip():
        kept.pop()
    while kept and not kept[0][1].strip():
        kept.pop(0)
    if not kept:
        return []
    title = span.title or _first_meaningful_line(kept, span.owner)
    if len(kept) <= MAX_PIECE_LINES:
        return [CodePiece(path, kept[0][0], kept[-1][0], title[:200], "\n".join(text for _, text in kept))]
    pieces = []
    step = WINDOW_LINES - WINDOW_OVERLAP
    for start in range(0, len(kept), step):
        window = kept[start:start + WINDOW_LINES]
        text = "\n".join(text for _, text in window)
        if start:
            text = f"{title}  # continued\n{text}"
        if text.strip():
            pieces.append(CodePiece(path, window[0][0], window[-1][0], title[:200], text))
        if start + WINDOW_LINES >= len(kept):
            break
    return pieces


def _first_meaningful_line(kept: list[tuple[int, str]], owner: str) -> str:
    """A title for a span that is no declaration: its first line with a letter or digit (not `;` or `},`) that
    is no prefix line (`public:`, `#ifdef X`) if it has one, after the declaration it sits in."""
    lines = [text.strip() for _, text in kept if text.strip()]
    named = [line for line in lines if any(c.isalnum() for c in line)]
    line = _title_line(lines) or (named[0] if named else kept[0][1].strip())
    return f"{owner}: {line}" if owner else line


# Python -------------------------------------------------------------------------------------------------------


def _first_line(node: ast.AST) -> int:
    """Where a definition starts on screen: its first decorator, else its `def`/`class` line."""
    decorators = getattr(node, "decorator_list", None) or []
    return min([node.lineno] + [d.lineno for d in decorators])


def _def_title(node: ast.AST, owner: str) -> str:
    if isinstance(node, ast.ClassDef):
        return f"class {owner}{node.name}"
    prefix = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
    return f"{prefix} {owner}{node.name}"




def python_spans(source: str, lines: list[str]) -> list[Span] | None:
    """Spans of a Python module; None (line windows) when it does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    starts = _statement_starts(tree.body, lines, floor=0)
    spans: list[Span] = []
    _body_spans(tree.body, "", spans, lines, starts)
    return spans


def _statement_starts(body: list[ast.stmt], lines: list[str], floor: int) -> dict[int, int]:
    """Where each statement of a body starts once the comment lines right above it are counted as its own
    (`# why this exists` above a def belongs to that def); never above the previous statement's end."""
    starts = {}
    for statement in body:
        start = _first_line(statement)
        while start - 1 > floor and lines[start - 2].lstrip().startswith("#"):
            start -= 1
        starts[id(statement)] = start
        floor = statement.end_lineno
    return starts


def _body_spans(body: list[ast.stmt], owner: str, spans: list[Span], lines: list[str], starts: dict) -> None:
    """Top-level definitions become spans; other statements are grouped (module level)."""
    group: list[ast.stmt] = []

    def flush():
        if not group:
            return
        # long runs of statements are split at statement boundaries, MODULE_GROUP_LINES at a time
        chunk_start = starts[id(group[0])]
        previous_end = chunk_start - 1
        for statement in group:
            if statement.end_lineno - chunk_start + 1 > MODULE_GROUP_LINES and previous_end >= chunk_start:
                spans.append(Span(chunk_start, previous_end))
                chunk_start = starts[id(statement)]
            previous_end = statement.end_lineno
        spans.append(Span(chunk_start, group[-1].end_lineno))
        group.clear()

    for statement in body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            flush()
            spans.append(Span(starts[id(statement)], statement.end_lineno, _def_title(statement, owner)))
        elif isinstance(statement, ast.ClassDef):
            flush()
            _class_spans(statement, owner, spans, lines, starts[id(statement)])
        else:
            group.append(statement)
    flush()


def _class_spans(node: ast.ClassDef, owner: str, spans: list[Span], lines: list[str], start: int) -> None:
    """The class piece holds its own lines minus its methods and nested classes, which get their own pieces."""
    holes = []
    inner: list[Span] = []
    name = f"{owner}{node.name}."
    starts = _statement_starts(node.body, lines, floor=node.lineno)
    for statement in node.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            holes.append((starts[id(statement)], statement.end_lineno))
            inner.append(Span(starts[id(statement)], statement.end_lineno, _def_title(statement, name)))
        elif isinstance(statement, ast.ClassDef):
            holes.append((starts[id(statement)], statement.end_lineno))
            _class_spans(statement, name, inner, lines, starts[id(statement)])
    spans.append(Span(start, node.end_lineno, _def_title(node, owner), tuple(holes)))
    spans.extend(inner)


# Other languages (tree-sitter) --------------------------------------------------------------------------------

_parsers: dict[str, object] = {}


def tree_sitter_available() -> bool:
    try:
        import tree_sitter_language_pack  # noqa: F401
    except ImportError:
        return False
    return True


def _parser(language: str):
    if language not in _parsers:
        try:
            from tree_sitter_language_pack import get_parser

            _parsers[language] = get_parser(language)
        except Exception:  # not installed, or this build lacks the grammar: line windows
            _parsers[language] = None
    return _parsers[language]


def tree_sitter_spans(language: str, source: str, other_language: str | None = None) -> list[Span] | None:
    """Spans of `source` parsed by `language`'s grammar, or by `other_language`'s when that has fewer error nodes
    (tried only when the first parse has errors)."""
    parser = _parser(language)
    if parser is None:
        return None
    data = source.encode("utf-8", errors="replace")
    root = parser.parse(data).root_node
    other = _parser(other_language) if other_language and root.has_error else None
    if other is not None:
        other_root = other.parse(data).root_node
        if _error_nodes(other_root) < _error_nodes(root):
            root = other_root
    spans: list[Span] = []
    _group_children(root, spans, owner="")
    _drop_overlaps(spans)  # once, at the end: the recursion reads its spans by index
    _merge_members(spans)
    return spans


def _error_nodes(root) -> int:
    """ERROR and missing nodes in the tree (iterative: a syntax tree can be deeper than Python's recursion limit)."""
    total, stack = 0, [root]
    while stack:
        node = stack.pop()
        total += node.type == "ERROR" or node.is_missing
        if node.has_error:
            stack.extend(node.children)
    return total


# Node types by role, across the grammars of TREE_SITTER_LANGUAGES (names as tree-sitter-language-pack 0.13 has them).
# A node whose type contains one of these words is a declaration: a piece of its own (other top-level nodes, such
# as imports and variables, are grouped).
DECLARATION_WORDS = ("function", "method", "class", "struct", "interface", "impl", "enum", "trait", "record",
                     "constructor", "type_declaration", "type_alias", "macro_definition")
# Containers of declarations: always opened, so each declaration inside is its own piece whatever the size
# (a C++/C#/PHP namespace block, a Rust `mod`, a TypeScript `namespace` or `declare module`, a Ruby class body).
CONTAINER_TYPES = {"namespace_definition", "namespace_declaration", "file_scoped_namespace_declaration",
                   "declaration_list", "mod_item", "module", "internal_module", "body_statement"}
# A Ruby `module` is a type (a mixin such as Sinatra's `Helpers`) as much as a namespace: a declaration like a
# class or Elixir's `defmodule`, so its name titles its header piece and owns its members when it is split
# (TypeScript's `declare module "x" {`, a `module` node named by a string, stays a container).
RUBY_MODULE_TYPE = "module"
RUBY_CONSTANT_TYPES = {"constant", "scope_resolution"}  # `module Helpers`, `module Rack::Utils`
# Nodes that wrap one declaration: `export function f`, `template <class T> T f()`, `declare function f()`.
WRAPPER_TYPES = {"export_statement", "template_declaration", "ambient_declaration", "decorated_definition"}
# JavaScript/TypeScript statements that declare a function through a value: `const f = () => {}`,
# `module.exports.f = function () {}`; the value's node type decides.
VALUE_STATEMENT_TYPES = {"lexical_declaration", "variable_declaration", "expression_statement"}
FUNCTION_VALUE_TYPES = {"arrow_function", "function_expression", "function", "generator_function", "class"}
# Comments and attributes right above a declaration belong to it (JSDoc, Go doc comments, `///`, `#[derive]`,
# Kotlin's and Swift's `/** */` (multiline_comment), Dart's `///` (documentation_comment)).
LEADING_TYPES = {"comment", "line_comment", "block_comment", "multiline_comment", "documentation_comment",
                 "attribute_item"}
# ... and annotations a grammar reads as an expression starting with `@`: Elixir's `@doc`/`@spec` (a unary
# operator), Kotlin's annotations of a top-level function right after the imports (a prefix expression).
ANNOTATION_EXPRESSION_TYPES = {"unary_operator", "prefix_expression"}
# Declarations whose body is code, not declarations: a long one becomes line windows that each carry its first
# line as title (the doc comment in the first), never its statements one by one.
FUNCTION_WORDS = ("function", "method", "constructor", "macro")
# Elixir declares with macros, which its grammar parses as calls: `def name(args) do ... end`.
ELIXIR_FUNCTION_CALLS = {"def", "defp", "defmacro", "defmacrop", "defguard", "defguardp", "defdelegate", "defn",
                         "defnp"}
ELIXIR_MODULE_CALLS = {"defmodule", "defprotocol", "defimpl"}
# A C/C++ scope opened by a macro (`NLOHMANN_JSON_NAMESPACE_BEGIN namespace detail {`, `FMT_BEGIN_NAMESPACE`)
# parses as a "function" named `namespace` (no parameter list) whose body is the whole namespace, holding
# declarations no function body can: a container, split at its declarations, never windowed.
OUTSIDE_A_FUNCTION_BODY_TYPES = {"function_definition", "template_declaration", "namespace_definition",
                                 "linkage_specification"}
CLASS_SPECIFIER_TYPES = {"class_specifier", "struct_specifier", "union_specifier"}
# What the innermost C/C++ declarator of a function is when it names it (not a parenthesised or abstract one)
DECLARATOR_NAME_TYPES = {"identifier", "field_identifier", "qualified_identifier", "destructor_name", "operator_name",
                         "template_function", "template_method"}
# A file's import, package and include lines, across the grammars (Go, Java, Kotlin, Scala, Rust, C/C++, C#,
# JavaScript/TypeScript, Swift, PHP)
HEADER_TYPES = {"package_clause", "package_declaration", "package_header", "import_declaration", "import_list",
                "import_statement", "use_declaration", "extern_crate_declaration", "preproc_include", "preproc_call",
                "using_declaration", "using_directive", "namespace_use_declaration"}
# A declaration's title is searched for its name this many lines from its first line: C's return type and the
# name are two lines, an annotation and a comment inside the node a few more; further down is its body
MAX_TITLE_LINES = 6
COMMENT_STARTS = ("//", "/*", "*", "#", "--")


def _call_keyword(node) -> str:
    """`def` of Elixir's `def name(args) do`: the identifier a call node starts with, else ""."""
    if node.type != "call" or not node.named_children or node.named_children[0].type != "identifier":
        return ""
    return (node.named_children[0].text or b"").decode("utf-8", errors="replace")


def _is_leading(node) -> bool:
    return node.type in LEADING_TYPES or (node.type in ANNOTATION_EXPRESSION_TYPES
                                          and (node.text or b"").startswith(b"@"))


def _leads_into(node, row: int) -> bool:
    """`node` is a comment or attribute of whatever starts on `row` (0-based): on the line right above it, or, for
    a documentation comment (`/** ... */`: JSDoc, Javadoc, PHPDoc), one blank line above it as Express writes them."""
    if not _is_leading(node):
        return False
    gap = row - node.end_point[0]
    return gap <= 1 or (gap == 2 and (node.text or b"").startswith(b"/**"))


def _is_macro_scope(node) -> bool:
    """A C/C++ `function_definition` (one with a `declarator`: bash's and Scala's, which may nest functions, have
    none) whose declarator declares no function and whose body holds declarations no function body can: a
    macro-opened namespace. A real function that an `#ifdef` left unclosed swallows the functions after it; it
    has a parameter list, and stays one function (windows)."""
    declarator = node.child_by_field_name("declarator") if node.type == "function_definition" else None
    if declarator is None or _holds_type(declarator, "function_declarator"):
        return False
    return_type = node.child_by_field_name("type")
    if return_type is not None and return_type.type in CLASS_SPECIFIER_TYPES:
        return False  # `class TORCH_API Logger {...}`: a class whose export macro the grammar took for its name
    body = node.child_by_field_name("body")
    return body is not None and any(child.type in OUTSIDE_A_FUNCTION_BODY_TYPES for child in body.named_children)


def _holds_type(node, node_type: str) -> bool:
    """`node` or a node inside it has type `node_type` (iterative, as _error_nodes)."""
    stack = [node]
    while stack:
        current = stack.pop()
        if current.type == node_type:
            return True
        stack.extend(current.children)
    return False


def _is_declaration(node) -> bool:
    if _is_macro_scope(node):
        return False
    if node.type in CONTAINER_TYPES:
        return _is_ruby_module(node)
    if node.type in WRAPPER_TYPES:
        return any(_is_declaration(child) for child in node.named_children)
    if node.type in VALUE_STATEMENT_TYPES:
        return _declares_a_function(node)
    if node.type == "call":
        return _call_keyword(node) in ELIXIR_FUNCTION_CALLS | ELIXIR_MODULE_CALLS
    return any(word in node.type for word in DECLARATION_WORDS)


def _is_ruby_module(node) -> bool:
    name = node.child_by_field_name("name") if node.type == RUBY_MODULE_TYPE else None
    return name is not None and name.type in RUBY_CONSTANT_TYPES


def _opens_with_declaration(node) -> bool:
    """A container whose first node is a declaration: Ruby parses `# Set the status.` between `module Helpers`
    and its body as the module's child, right above the body that starts with the `def` it documents."""
    if node.type not in CONTAINER_TYPES:
        return False
    first = next((child for child in node.named_children if not _is_leading(child)), None)
    return first is not None and first.start_point[0] == node.start_point[0] and _is_declaration(first)


def _is_function_like(node) -> bool:
    """A declaration of code (function, method, closure in a variable), as opposed to a container of declarations
    (class, struct, impl, module)."""
    if node.type in WRAPPER_TYPES:
        inner = next((child for child in node.named_children if _is_declaration(child)), None)
        return inner is not None and _is_function_like(inner)
    if node.type in VALUE_STATEMENT_TYPES:
        return not any((child.child_by_field_name("value") or child.child_by_field_name("right") or child).type
                       == "class" for child in node.named_children)
    if node.type == "call":
        return _call_keyword(node) in ELIXIR_FUNCTION_CALLS
    return any(word in node.type for word in FUNCTION_WORDS)


def _declares_a_function(statement) -> bool:
    """`const f = () => {}` (declarator's value), `a.b = function () {}` (assignment's right side), or a function
    made by a call (`const $ZodType = core.$constructor("$ZodType", (inst, def) => {...})`)."""
    for child in statement.named_children:
        value = child.child_by_field_name("value") or child.child_by_field_name("right")
        if value is not None and (value.type in FUNCTION_VALUE_TYPES or _calls_with_a_function(value)):
            return True
    return False


def _calls_with_a_function(value) -> bool:
    """A call one of whose arguments is a function: what it returns is built from that function's code, so the
    statement is one declaration (titled by its name) rather than a call whose function body is split apart."""
    arguments = value.child_by_field_name("arguments") if value.type == "call_expression" else None
    return arguments is not None and any(argument.type in FUNCTION_VALUE_TYPES and argument.type != "class"
                                         and argument.end_point[0] > argument.start_point[0]  # not `n => n % 2`
                                         for argument in arguments.named_children)


def _name_of(node) -> str:
    """The declared name (`Cache` of `export default class Cache`), or "" when the grammar gives none."""
    name = node.child_by_field_name("name")
    if name is None and node.type == "impl_item":  # Rust's `impl Display for Cache`: Cache, its `type` field
        name = node.child_by_field_name("type")
    if name is None and node.type in WRAPPER_TYPES:
        inner = next((child for child in node.named_children if _is_declaration(child)), None)
        return _name_of(inner) if inner is not None else ""
    if name is None and _call_keyword(node):  # Elixir: `defmodule Phoenix.Router do`, `def match(conn) do`
        arguments = node.named_children[1] if len(node.named_children) > 1 else None
        name = arguments.named_children[0] if arguments is not None and arguments.named_children else None
        if name is not None and name.type == "call" and name.named_children:
            name = name.named_children[0]
    if name is None and not _is_function_like(node):  # Kotlin's `class Cache` names it in no field
        name = next((child for child in node.named_children if child.type == "type_identifier"), None)
    return name.text.decode("utf-8", errors="replace") if name is not None and name.text else ""


def _node_first_line(node) -> str:
    """The declaration's own first line, past annotations, decorators, attributes and a C++ template header on a
    line of its own (`@Override`, `#[inline]`, `template <typename Char>`); for a declaration whose name is not on
    that line, the line that names it (`@inline final def <*>[A, B]`, after a comment inside the node), joined to the
    return type above it when the name starts its line (C's `static void` / `list_free (struct list *l)`)."""
    lines = [line.strip() for line in (node.text or b"").decode("utf-8", errors="replace").splitlines()]
    title = _title_line(lines) or (lines[0] if lines else "")
    name = _declared_name(node) if _is_declaration(node) else ""
    if not name or name in title or title not in lines:
        return title
    first = lines.index(title)
    # below the title line first (C's name under its return type), else above it (an annotation line that holds
    # the declaration too: `@inline final def <*>[A, B](...) =`)
    named = next((index for index in (*range(first, min(len(lines), first + MAX_TITLE_LINES)), *range(first))
                  if name in lines[index]), None)
    if named is None:  # a long template header: the declaration it wraps has the title
        inner = _wrapped_declaration(node) if node.type in WRAPPER_TYPES else None
        return (_node_first_line(inner) if inner is not None else "") or title
    if not lines[named].startswith(name):
        return lines[named]
    above = named  # the code lines right above the name: its return type and modifiers, not a comment
    while above > first and lines[above - 1] and not lines[above - 1].startswith(COMMENT_STARTS) \
            and not _is_prefix_line(lines[above - 1]):
        above -= 1
    return " ".join(lines[above:named + 1])


def _wrapped_declaration(wrapper):
    return next((child for child in wrapper.named_children if _is_declaration(child)), None)


def _declared_name(node) -> str:
    """The name a declaration declares, as it is written: C and C++ through the declarator chain (`foo` of
    `static struct node *\nfoo(int x)`, `Cache::get` of `int *Cache::get()`), else the node's name (_name_of), up
    to its first space or bracket (Elixir's `def f(x) when ...` names `f`); a wrapper's, its declaration's."""
    if node.type in WRAPPER_TYPES:
        inner = _wrapped_declaration(node)
        return _declared_name(inner) if inner is not None else ""
    declarator = node.child_by_field_name("declarator")
    while declarator is not None and declarator.child_by_field_name("declarator") is not None:
        declarator = declarator.child_by_field_name("declarator")
    if declarator is not None and declarator.type in DECLARATOR_NAME_TYPES:
        name = (declarator.text or b"").decode("utf-8", errors="replace")
    else:
        name = _name_of(node)
    match = re.match(r"[^\s(\[{]+", name)
    return match.group(0) if match else ""


def _title_line(lines: list[str]) -> str | None:
    """The first line with a letter or digit that is no prefix line and not inside a multi-line annotation or
    attribute (`@Deprecated(` to its `)`, `#[cfg(any(` to its `))]`), or None."""
    depth = 0  # brackets a multi-line annotation has open
    for index, line in enumerate(lines):
        if depth > 0:
            depth += _bracket_balance(line)
        elif any(character.isalnum() for character in line):
            if not _is_prefix_line(line):
                return line
            following = lines[index + 1] if index + 1 < len(lines) else ""
            if _MACRO_LINE.match(line) and following.startswith("{"):
                return line  # a macro that defines the function: `TEST_F(ParserTest, Empty)`, `PHP_FUNCTION(strlen)`
            if line.startswith(("@", "#[")):
                depth = max(0, _bracket_balance(line))
    return None


def _bracket_balance(line: str) -> int:
    return sum(line.count(opening) for opening in "([{") - sum(line.count(closing) for closing in ")]}")


# Lines that open a declaration without naming it, skipped in titles: C++ `template <typename Char>` alone on its
# line, after attribute macros (`FMT_EXPORT template <typename Context>`); an upper-case macro alone, with an
# underscore (`JSON_HEDLEY_NON_NULL(2)`, `FMT_CONSTEXPR20`; a Java constructor `LHS(NameSpace ns)` has none);
# an access label (`public:`, `JSON_PRIVATE_UNLESS_TESTED:`); a conditional directive (`#ifndef JSON_NO_IO`).
_MACRO_LINE = re.compile(r"[A-Z][A-Z0-9]*_[A-Z0-9_]*(?:\s*\(.*\))?:?$")
_PREFIX_LINE = re.compile(r"(?:[A-Z][A-Z0-9_]*\s+)*template\s*<.*>$|" + _MACRO_LINE.pattern
                          + r"|(?:public|private|protected)\s*:$|#(?:if|ifdef|ifndef|elif|else|endif)\b")


def _is_prefix_line(line: str) -> bool:
    return line.startswith(("@", "#[")) or _PREFIX_LINE.match(line) is not None


def _lines_of(node) -> tuple[int, int]:
    """First and last line, 1-based; a node that ends with its newline (a `#define`) ends on the line before."""
    start, (end_row, end_column) = node.start_point[0] + 1, node.end_point
    return start, max(start, end_row + (1 if end_column else 0))


def _trailing_comments_start(node, row: int) -> int | None:
    """The first row (0-based) of the comments `node` ends with, at any depth, when they lead into what starts on
    `row`: Kotlin's grammar makes the doc comment of the first declaration after the package line or the imports
    the last child of that line (or of the last import)."""
    if node.type in CONTAINER_TYPES or _is_declaration(node):
        return None  # a comment closing a class or namespace body is its own
    first, current = None, node
    while first is None and current.children:
        children = current.children
        last = len(children) - 1
        while last >= 0 and _leads_into(children[last], row if first is None else first) and not (
                last > 0 and children[last - 1].end_point[0] == children[last].start_point[0]):  # `import b // why`
            first = children[last].start_point[0]
            last -= 1
        if last < 0:
            return None  # all comments: the node is leading itself
        current = children[last]
    return first if first is not None and first > node.start_point[0] else None


def _group_children(node, spans: list[Span], owner: str) -> None:
    """Contiguous small children are grouped up to MAX_PIECE_LINES; a declaration is a piece of its own, with the
    comments and attributes right above it; a container (namespace, module) or a child longer than MAX_PIECE_LINES
    is split at its own children (a class body into its methods, titled `Class: first line`), recursively; a long
    leaf becomes line windows later."""
    group_start = group_end = None
    children = node.children
    leading_from: dict[int, int] = {}  # child index of a declaration -> first line of its comments/attributes
    attached: set[int] = set()  # indexes of the comments/attributes that went to a declaration
    cut_before: dict[int, int] = {}  # child index -> the line its trailing comments start on (they went on)
    for index, child in enumerate(children):
        if _is_declaration(child) or _opens_with_declaration(child):
            start, first = child.start_point[0], index
            while first > 0 and _leads_into(children[first - 1], start):
                first -= 1
                start = children[first].start_point[0]
            trailing = _trailing_comments_start(children[first - 1], start) if first > 0 else None
            if trailing is not None:
                cut_before[first - 1] = start = trailing
            attached.update(range(first, index))
            leading_from[index] = start + 1

    group: list = []  # the nodes of the group being gathered

    def flush():
        nonlocal group_start
        if group_start is not None:
            spans.append(Span(group_start, group_end, _header_title(group) if node.parent is None else "",
                              owner=owner[:-1]))
            group_start = None
            group.clear()

    name_node = node.child_by_field_name("name") if node.type in CONTAINER_TYPES and not _is_declaration(node) else None
    for index, child in enumerate(children):
        if index in attached:
            continue
        if (node.parent is not None and not child.is_named) or child == name_node:
            continue  # inside a split node, `}` or `namespace app {` alone is no piece: the declarations are
        start, end = _lines_of(child)
        if index in cut_before:
            end = max(start, cut_before[index])  # its trailing comments' first line (0-based): the line before
        declaration = index in leading_from and _is_declaration(child)
        # not PHP's one-line `namespace App;`, nor a Ruby module (split only when long, as a class)
        opened = (child.type in CONTAINER_TYPES or _is_macro_scope(child) or _is_macro_scope(node)) \
            and not declaration and end > start  # a macro scope's body is opened whatever its length
        long = end - start + 1 > MAX_PIECE_LINES
        whole = _is_leading(child) or (declaration and _is_function_like(child))  # windows, never split
        title = f"{owner[:-1]}: {_node_first_line(child)}" if owner else _node_first_line(child)
        if child.child_count and (opened or long) and not whole:
            flush()
            before = len(spans)
            # the declaration a wrapper holds (`export class Cache`) names the owner, once
            name = _name_of(child) if declaration and child.type not in WRAPPER_TYPES else ""
            inner_owner = f"{owner}{name}." if name else owner
            _group_children(child, spans, inner_owner)
            header = spans[before] if len(spans) > before else None
            if (declaration and child.type in WRAPPER_TYPES and header is not None and not header.title
                    and len(spans) > before + 1 and spans[before + 1].title):
                # `template <class T>` opens the header piece of the class it wraps
                spans[before + 1].start = header.start
                del spans[before]
                header = spans[before]
            if declaration and header is not None and header.start == start:
                # the declaration's own lines before its body (`public final class Cache`), with its doc comment;
                # its fields (the untitled groups of its own body) join it once overlaps are dropped
                header.start, header.title = leading_from[index], title
                if child.type not in WRAPPER_TYPES:  # a wrapper's class chose its members itself
                    header.members = tuple(span for span in spans[before + 1:]
                                           if not span.title and span.owner == inner_owner[:-1])
            elif declaration and leading_from[index] < start:  # the comments above a split declaration
                spans.insert(before, Span(leading_from[index], start - 1, title))
            elif index in leading_from and not declaration and header is not None:
                header.start = leading_from[index]  # comments right above a body: its first declaration's
            if len(spans) == before:
                spans.append(Span(start, end, owner=owner[:-1]))
            continue
        if declaration:
            flush()
            spans.append(Span(leading_from[index], end, title))
            continue
        if group_start is not None and end - group_start + 1 > MAX_PIECE_LINES:
            flush()
        if group_start is None:
            group_start = start
        group_end = max(end, group_end or end)
        group.append(child)
    flush()


def _header_title(group: list) -> str:
    """A file's header (a top-level group of comments and import, package or include lines only, opening with a
    comment: a licence, a package doc) is titled by its first import line, so ranking knows it for a header
    (codesearch.ranking._HEADER_TITLE); "" for any other group (titled by its first line)."""
    if not group or not _is_leading(group[0]):
        return ""
    imports = [child for child in group if not _is_leading(child)]
    if not imports or any(child.type not in HEADER_TYPES for child in imports):
        return ""
    return _node_first_line(imports[0])


def _merge_members(spans: list[Span]) -> None:
    """The header piece of a split class takes its fields and other non-declaration lines (`members`), the lines
    of its methods and nested types left out as holes, as a Python class piece is."""
    present = {id(span) for span in spans}
    merged: set[int] = set()
    for header in spans:
        members = [span for span in header.members if id(span) in present and id(span) not in merged]
        if not members:
            continue
        kept = [header, *members]
        header.holes = tuple((before.end + 1, after.start - 1) for before, after in zip(kept, kept[1:])
                             if after.start > before.end + 1)
        header.end = members[-1].end
        merged.update(id(span) for span in members)
    spans[:] = [span for span in spans if id(span) not in merged]


def _drop_overlaps(spans: list[Span]) -> None:
    """Two nodes can share a line (`} else {`); each line goes to the first span that has it."""
    for i in range(1, len(spans)):
        if spans[i].start <= spans[i - 1].end:
            spans[i].start = spans[i - 1].end + 1
    spans[:] = [span for span in spans if span.start <= span.end]
