"""What a code search knows before reading a single vector: which piece defines a name, which file a query names.

- definitions: a query that names a symbol (`ServeHTTP`, `parse_config`, `Sinatra::Base`, or a CamelCase word
  inside a sentence) lifts the pieces whose title declares that name (`func (e *Engine) ServeHTTP(`,
  `def parse_config`, `class Base`) above every other candidate, those in a file named after it first.
- file names: the words of a sentence query that name a file or its folder (`router` -> `router.go`,
  `lib/router/`) lift that file's pieces a little.

Not a rule: decaying each further place of one file (semble's file saturation) raised semble's benchmark but cost
the project's Python set 0.02-0.09 hit@10, whose answers are one method among a file's many
(codesearch/reports/ranking.md).

Credit: these rules are semble's query boosts (MinishLab/semble, MIT licence, `src/semble/ranking/boosting.py`;
NOTICE): its symbol-query and embedded-symbol patterns, its definition keywords, its boost sizes (3.0 times the best
score for a definition, half that for a name inside a sentence, a further 0.5 in a file named after the symbol, 1.0
times the share of the query's words a file's name holds), its stop words and its prefix matching of words to file
names. The code is this project's own; what it adds: declarations read from a piece's title (C's return-type form,
Rust's `impl ... for`), plural forms, the folder's name, and SYMBOL_FILE_BOOST.

Applied to fused (hybrid) and BM25 scores, which are >= 0 with 0 meaning "no list found it"; dense scores are left
as the model gives them. Each rule was measured on semble's benchmark and the project's own sets
(codesearch/reports/ranking.md).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

import numpy as np

# A query that is one identifier naming a symbol: qualified, leading underscore, snake_case, or with a capital
# letter (semble's symbol-query pattern), after an optional `$` (JavaScript and PHP names: zod's `$ZodType`).
# A plain lower-case word ("session") is a topic, not a symbol.
_SYMBOL_QUERY = re.compile(r"^\$?(?:[A-Za-z_]\w*(?:(?:::|\\|->|\.)[A-Za-z_]\w*)+|_\w*|[A-Za-z][A-Za-z0-9]*[A-Z_]\w*"
                           r"|[A-Z]\w*)$")
# CamelCase or camelCase words inside a sentence ("where is ZodNumber validated"): semble's pattern
_EMBEDDED_SYMBOL = re.compile(r"\b(?:[A-Z][a-z][a-zA-Z0-9]*[A-Z][a-zA-Z0-9]*|[a-z][a-zA-Z0-9]*[A-Z][a-zA-Z0-9]+)\b")
# Words that start a declaration across the indexed languages; a title holding one of them before the name
# declares it (`pub fn spawn`, `export default class Cache`, `defmodule Phoenix.Router`, `data class Point`).
DECLARATION_KEYWORDS = ("class", "def", "defp", "defmacro", "defmodule", "defprotocol", "defimpl", "fn", "fun",
                        "func", "function", "interface", "struct", "enum", "trait", "type", "typedef", "object",
                        "module", "namespace", "protocol", "record", "impl", "macro_rules!", "val", "var", "let",
                        "const", "sub", "method")
# semble's stop words, plus "its this that into"
_STOPWORDS = frozenset("a an and are as at be by do does for from has have how if in is it its not of on or the to "
                       "was what when where which who why with this that into".split())
_OWNER = re.compile(r"^[\w.$]+: ")  # "Cache: " before a member's first line (codesearch.chunking)
_INSIDE_A_TYPE = ("->", ":", "(", ",", "<", "&", "=")
_TYPE_ARGUMENTS = r"<(?:[^<>]|<[^<>]*>)*>"  # `<T>` or `<Flow<T>>`: type arguments nested one level deep
_IMPL_FOR = re.compile(r"^(?:pub(?:\([\w:]+\))?\s+)?(?:unsafe\s+)?impl\b.*?\bfor\s+(.*)$")  # Rust
# The four boost sizes below are semble's (boosting.py: definition 3.0, embedded scale 0.5, the 1.5 tier of a file
# named after the symbol, stem boost 1.0), kept after measuring them on semble's benchmark and our own sets.
DEFINITION_BOOST = 3.0  # times the best score: a definition of the queried name outranks every other candidate
EMBEDDED_DEFINITION_BOOST = 1.5  # a name inside a sentence may be incidental to it: half as strong
NAMED_FILE_BOOST = 0.5  # times the best score, for a definition in a file named after the symbol
FILE_NAME_BOOST = 1.0  # times the best score times the share of the query's words the file's name holds
SYMBOL_FILE_BOOST = 1.0  # times the best score, for the best piece of a file named after a queried symbol
NAMED_FILE_CANDIDATES = 100  # the file-name boost reorders the best candidates, never lifts the tail
# The rules, each of which a benchmark may turn off to measure what it is worth (codesearch.ranking.RankingConfig):
# definitions (of a queried name), file-names (files a sentence names, or named after a queried symbol).
PRIOR_RULES = frozenset({"definitions", "file-names"})


def queried_symbols(query: str) -> tuple[set[str], bool]:
    """The names a query asks for, and whether the query is one symbol: a one-identifier query its last segment
    (`Sinatra::Base` -> Base, and the whole), a sentence its CamelCase words."""
    query = query.strip()
    if _SYMBOL_QUERY.match(query):
        last = re.split(r"::|\\|->|\.", query)[-1]
        return {last, query} - {""}, True
    return set(_EMBEDDED_SYMBOL.findall(query)), False


def _declares(title: str, name: str) -> bool:
    """`title` (a piece's first line, after its owner: "Cache: public int get(") declares `name`: a declaration
    keyword right before it (`class Cache`, `fn spawn<F>`, `func (e *Engine) ServeHTTP(`, `defmodule Phoenix.Router`),
    or, in C-like languages, a return type before it and its argument list after (`int uv_run(`). A Rust
    `impl Trait for Type` declares Type, not Trait; a parameter or return type (`fun current(): Transaction`,
    `newFactory(TypeAdapter<T> adapter)`) declares nothing."""
    declaration = _OWNER.sub("", title, count=1)
    implemented = _IMPL_FOR.match(declaration)
    if implemented:
        return re.match(rf"(?:[\w$]+::)*{re.escape(name)}(?![\w$])", implemented.group(1)) is not None
    for match in _declaration_pattern(name).finditer(declaration):
        # a keyword inside a type (`-> impl IntoResponse`, `x: impl Trait`, `(f: fn(...))`) declares nothing
        if not declaration[:match.start()].rstrip().endswith(_INSIDE_A_TYPE):
            return True
    return _c_declaration_pattern(name).match(declaration) is not None


@functools.lru_cache(maxsize=256)
def _declaration_pattern(name: str) -> re.Pattern[str]:
    """A keyword, then generic parameters or a Go receiver, then `name` (qualified or not), then its end."""
    keywords = "|".join(re.escape(word) for word in DECLARATION_KEYWORDS)
    # a Kotlin extension (`fun <T> Flow<T>.asFlow()`, `fun <T> Flow<Flow<T>>.flattenConcat()`) declares the
    # function, not the type it extends
    return re.compile(rf"(?<![\w$])(?:{keywords})(?:\s*<[^>]*>\s*|\s*\([^)]*\)\s*|\s+)(?:[\w$]+(?:\.|::))*"
                      rf"{re.escape(name)}(?!{_TYPE_ARGUMENTS}\.)(?:\s|[<({{:\[;,]|$)")


@functools.lru_cache(maxsize=256)
def _c_declaration_pattern(name: str) -> re.Pattern[str]:
    """A C, C++, Java or C# function: words of a return type and modifiers (no call, assignment or argument list
    before), then `name(`."""
    return re.compile(rf"^(?!.*\b(?:return|new|throw)\s)[\w$:<>,*&\[\] ~]*?[\w$>*&\]]\s+[*&]*"
                      rf"(?:[\w$]+::)*{re.escape(name)}\s*\(")


@functools.lru_cache(maxsize=65536)
def _file_words(path: str) -> frozenset[str]:
    """The lower-cased words of a file's name and its folder's (`lib/router/route_group.go` -> router, route,
    group, routegroup)."""
    parts = path.rsplit("/", 2)[-2:]
    stem = parts[-1].rsplit(".", 1)[0]
    words = set()
    for part in (stem, *parts[:-1]):
        pieces = [w.lower() for w in re.findall(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])", part)]
        words.update(pieces)
        words.add("".join(pieces))
    return frozenset(words)


def _shares_a_word(word: str, file_words: frozenset[str]) -> bool:
    """`word` of a query names one of a file's words: the same word, or one that starts the other with 4 letters or
    more, each also read past a plural ending (`route` ~ `router`, `dependency` ~ `dependencies`, `cookies` ~
    `cookie`, `implementations` ~ `impls`, whose `impl` starts it). A word ending in `s` that is no plural is read
    without it too (`redis` ~ `redirect`): rare in file names, and a 4-letter start already matched loosely."""
    return word in file_words or any(
        (len(mine) >= 4 and theirs.startswith(mine)) or (len(theirs) >= 4 and mine.startswith(theirs))
        for mine in _forms(word) for other in file_words for theirs in _forms(other))


@functools.lru_cache(maxsize=65536)
def _forms(word: str) -> tuple[str, ...]:
    """The word, and its singular forms if it may be a plural: `dependencies` -> dependency, dependencie;
    `impls` -> impl; `classes` -> classe, class. A word of 4 letters or fewer, or ending in `ss`, is only itself."""
    if len(word) <= 4 or word.endswith("ss") or not word.endswith("s"):
        return (word,)
    forms = [word, word[:-1]]
    if word.endswith("ies"):
        forms.append(word[:-3] + "y")
    if word.endswith(("sses", "xes", "ches", "shes")):
        forms.append(word[:-2])
    return tuple(forms)


def apply_priors(scores: np.ndarray, query: str, paths: Sequence[str], titles: Sequence[str],
                 rules: frozenset[str] = PRIOR_RULES) -> np.ndarray:
    """`scores` (n,) >= 0 (BM25 or fused) with the definition and file-name boosts added; a new array. `rules`: those
    of PRIOR_RULES that apply (all of them, as codesearch ranks)."""
    if unknown := rules - PRIOR_RULES:
        raise ValueError(f"unknown prior rules {sorted(unknown)}; valid: {', '.join(sorted(PRIOR_RULES))}")
    if not query.strip() or not len(scores) or scores.max() <= 0:
        return scores
    best = float(scores.max())
    boosted = scores.astype(np.float64, copy=True)
    names, symbol_query = queried_symbols(query)
    strength = 0.0 if "definitions" not in rules else DEFINITION_BOOST if symbol_query else EMBEDDED_DEFINITION_BOOST
    file_names = "file-names" in rules
    if not symbol_query and file_names:  # a sentence: the files it names
        _boost_named_files(boosted, scores, query, paths, best)
    if not names:
        return boosted
    lowered = {name.lower().replace("_", "").lstrip("$") for name in names}
    defining: set[str] = set()
    for row, title in enumerate(titles):
        if strength and any(name in title for name in names) and any(_declares(title, name) for name in names):
            boosted[row] += best * (strength + (NAMED_FILE_BOOST if _named_after(paths[row], lowered) else 0.0))
            defining.add(paths[row])
    if symbol_query and file_names and SYMBOL_FILE_BOOST:
        _boost_files_named_after(boosted, scores, lowered, paths, defining, best)
    return boosted


def _named_after(path: str, lowered_names: set[str]) -> bool:
    """The file's stem is one of the names (lower case, `_` dropped, a plural `s` allowed): `json_pointer.hpp`."""
    stem = _stem(path)
    return stem in lowered_names or stem.rstrip("s") in lowered_names


@functools.lru_cache(maxsize=65536)
def _stem(path: str) -> str:
    return path.rsplit("/", 1)[-1].split(".", 1)[0].lower().replace("_", "")


def _boost_files_named_after(boosted: np.ndarray, scores: np.ndarray, lowered_names: set[str],
                             paths: Sequence[str], defining: set[str], best: float) -> None:
    """A file named after the queried symbol where no title declares it (the declaration sits inside a longer
    piece, or the file holds the symbol's helpers): its best piece gains best * SYMBOL_FILE_BOOST."""
    named = {path for path in set(paths) if path not in defining and _named_after(path, lowered_names)}
    best_row: dict[str, int] = {}
    for row, path in enumerate(paths):
        if path not in named:
            continue
        if path not in best_row or scores[row] > scores[best_row[path]]:
            best_row[path] = row
    for row in best_row.values():
        boosted[row] += best * SYMBOL_FILE_BOOST


def _boost_named_files(boosted: np.ndarray, scores: np.ndarray, query: str, paths: Sequence[str],
                       best: float) -> None:
    """The best NAMED_FILE_CANDIDATES candidates (score > 0) in files whose name or folder holds words of the query
    gain best * FILE_NAME_BOOST * the share of the query's words they hold."""
    words = {w.lower() for w in re.findall(r"[A-Za-z]\w*", query) if len(w) > 2 and w.lower() not in _STOPWORDS}
    if not words:
        return
    share: dict[str, float] = {}
    candidates = np.argpartition(-scores, NAMED_FILE_CANDIDATES)[:NAMED_FILE_CANDIDATES] \
        if len(scores) > NAMED_FILE_CANDIDATES else np.arange(len(scores))
    for row in candidates[scores[candidates] > 0]:
        path = paths[row]
        if path not in share:
            file_words = _file_words(path)
            share[path] = sum(_shares_a_word(word, file_words) for word in words) / len(words)
        boosted[row] += best * FILE_NAME_BOOST * share[path]
