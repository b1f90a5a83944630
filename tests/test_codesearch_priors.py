"""The code priors of BM25 and hybrid rankings: definitions of a queried name, the files a sentence names."""

import numpy as np
import pytest

from codesearch import priors
from codesearch.priors import apply_priors, queried_symbols


@pytest.mark.parametrize("query, names, symbol", [
    ("ServeHTTP", {"ServeHTTP"}, True),
    ("parse_config", {"parse_config"}, True),
    ("Sinatra::Base", {"Base", "Sinatra::Base"}, True),
    ("_private", {"_private"}, True),
    ("$ZodRegistry", {"$ZodRegistry"}, True),  # JavaScript/PHP names may start with `$`
    ("session", set(), False),  # a plain word is a topic
    ("where is ZodNumber validated", {"ZodNumber"}, False),
    ("how does routing work", set(), False),
])
def test_which_queries_name_symbols(query, names, symbol):
    assert queried_symbols(query) == (names, symbol)


@pytest.mark.parametrize("title, name, declares", [
    ("def parse_config", "parse_config", True),
    ("Engine: func (engine *Engine) ServeHTTP(w http.ResponseWriter, req *http.Request) {", "ServeHTTP", True),
    ("pub fn spawn<F>(future: F) -> JoinHandle<F::Output>", "spawn", True),
    ("export default class Cache {", "Cache", True),
    ("export class $ZodRegistry<Meta extends MetadataType = MetadataType> {", "$ZodRegistry", True),
    ("export class $ZodRegistry<Meta> {", "ZodRegistry", False),  # another name: zod's core type, not its API
    ("defmodule Phoenix.Router do", "Phoenix.Router", True),
    ("Gson: public <T> T fromJson(String json, Class<T> classOfT) {", "fromJson", True),
    ("int uv_run(uv_loop_t* loop, uv_run_mode mode) {", "uv_run", True),  # C: a return type, then the name
    ("uv_run(loop, UV_RUN_DEFAULT);", "uv_run", False),  # a call, not a declaration
    ("result = parse_config(path)", "parse_config", False),
    ("return fromJson(json, type);", "fromJson", False),
    ("def parse_config_file", "parse_config", False),  # another name that starts the same
    ("impl<S> FromRequest<S> for RawForm", "FromRequest", False),  # Rust: implements the trait, declares RawForm
    ("impl<S> FromRequest<S> for RawForm", "RawForm", True),
    ("impl<S, E> BoxedIntoRoute<S, E> {", "BoxedIntoRoute", True),
    ("fun currentTransaction(): Transaction = current()", "Transaction", False),  # Kotlin: a return type
    ("internal fun <T> Flow<T>.asChannelFlow(): ChannelFlow<T> =", "Flow", False),  # an extension of Flow
    ("public fun <T> Flow<Flow<T>>.flattenConcat(): Flow<T> = flow {", "Flow", False),  # nested type arguments
    ("public interface Flow<out T> {", "Flow", True),
    # Java: a parameter type, not the method's name
    ("TypeAdapters: public static <T> TypeAdapterFactory newFactory(Class<T> type, TypeAdapter<T> adapter) {",
     "TypeAdapter", False),
    ("func (mx *Mux) With(middlewares ...func(http.Handler) http.Handler) Router {", "Router", False),
    ("async fn inner_fallback() -> impl IntoResponse {", "IntoResponse", False),  # a return type
])
def test_a_title_declares_a_name(title, name, declares):
    assert priors._declares(title, name) is declares


def test_a_definition_outranks_the_pieces_that_use_the_name():
    paths = ["src/app.py", "src/client.py", "src/config.py"]
    titles = ["def main", "def fetch", "def parse_config"]
    scores = np.array([9.0, 5.0, 1.0])  # the callers mention parse_config more often than its definition
    boosted = apply_priors(scores, "parse_config", paths, titles)
    # 3 x the best score for the definition, half a best score more in a file named after it
    assert boosted.tolist() == [9.0, 5.0, 1.0 + 9.0 * priors.DEFINITION_BOOST]
    named = apply_priors(scores, "parse_config", paths[:2] + ["src/parse_config.py"], titles)
    assert named[2] == 1.0 + 9.0 * (priors.DEFINITION_BOOST + priors.NAMED_FILE_BOOST)


def test_a_dollar_symbol_query_lifts_its_definition():
    paths = ["core/registries.ts", "core/registries.ts", "core/api.ts"]
    titles = ["export function registry<T>() {", "export class $ZodRegistry<Meta> {", "export const z = {"]
    scores = np.array([4.0, 1.0, 3.0])
    boosted = apply_priors(scores, "$ZodRegistry", paths, titles)
    assert boosted.tolist() == [4.0, 1.0 + 4.0 * priors.DEFINITION_BOOST, 3.0]


def test_a_sentence_lifts_the_files_it_names():
    paths = ["lib/helpers.go", "lib/router/tree.go", "lib/context.go"]
    scores = np.array([4.0, 2.0, 0.0])
    boosted = apply_priors(scores, "how does the router match a route", paths, ["a", "b", "c"])
    # "router" and "route" share the folder's name (2 of the 3 content words: router, match, route)
    assert boosted[1] == pytest.approx(2.0 + 4.0 * priors.FILE_NAME_BOOST * 2 / 3)
    assert boosted[0] == 4.0 and boosted[2] == 0.0  # no list found the third: it stays unfound


@pytest.mark.parametrize("query_word, path", [
    ("dependencies", "fastapi/dependency.py"),       # a plural and its singular
    ("implementations", "serde_core/src/ser/impls.rs"),  # past the file word's plural `s`, `impl` starts it
    ("classes", "lib/class_builder.py"),
    ("cookies", "lib/cookie.js"),                     # a plural in -ies of a word in -ie
])
def test_a_file_name_is_named_by_a_plural_or_an_abbreviation(query_word, path):
    scores = np.array([1.0, 1.0])
    boosted = apply_priors(scores, f"standard {query_word}", ["src/other.rs", path], ["a", "b"])
    assert boosted[0] == 1.0 and boosted[1] == pytest.approx(1.0 + priors.FILE_NAME_BOOST / 2)


def test_a_symbol_query_lifts_the_file_named_after_it():
    """No title declares `Tokenizer` (the class sits inside a longer piece): the file named after it still ranks
    first, by its best piece."""
    paths = ["pkg/distill.py", "pkg/tokenizer.py", "pkg/tokenizer.py"]
    titles = ["def distill", "def load_vocabulary", "def split_words"]
    scores = np.array([4.0, 1.0, 2.0])
    boosted = apply_priors(scores, "Tokenizer", paths, titles)
    assert boosted.tolist() == [4.0, 1.0, 2.0 + 4.0 * priors.SYMBOL_FILE_BOOST]


def test_a_dollar_symbol_query_lifts_the_file_named_after_the_name():
    paths = ["src/api.ts", "src/ZodRegistry.ts"]
    scores = np.array([4.0, 1.0])
    boosted = apply_priors(scores, "$ZodRegistry", paths, ["export const z = {", "import { util } from './util';"])
    assert boosted.tolist() == [4.0, 1.0 + 4.0 * priors.SYMBOL_FILE_BOOST]


def test_each_rule_turns_off_on_its_own_without_touching_the_module():
    """What a benchmark's ablation asks for (RankingConfig.priors), passed in: no module constant changes."""
    paths, titles = ["src/app.py", "src/parse_config.py"], ["def parse_config", "def helper"]
    scores = np.array([1.0, 2.0])
    every_rule = [1.0 + 2.0 * priors.DEFINITION_BOOST, 2.0 + 2.0 * priors.SYMBOL_FILE_BOOST]  # the file named after it
    assert apply_priors(scores, "parse_config", paths, titles).tolist() == every_rule
    no_definitions = apply_priors(scores, "parse_config", paths, titles, rules=frozenset({"file-names"}))
    assert no_definitions.tolist() == [1.0, every_rule[1]]
    assert apply_priors(scores, "parse_config", paths, titles, rules=frozenset({"definitions"})).tolist() == [
        every_rule[0], 2.0]
    assert apply_priors(scores, "parse_config", paths, titles, rules=frozenset()).tolist() == scores.tolist()
    assert priors.DEFINITION_BOOST > 0 and priors.SYMBOL_FILE_BOOST > 0
    with pytest.raises(ValueError, match="unknown prior rules \\['names'\\]; valid: definitions, file-names"):
        apply_priors(scores, "parse_config", paths, titles, rules=frozenset({"names"}))
