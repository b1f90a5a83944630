"""Declaration pieces for the common languages, from the grammars tree-sitter-language-pack ships in its wheel.

Each snippet has imports, a documented function, a type with a method and one more declaration: the documentation
comment belongs to the function's piece, each declaration is a piece of its own, imports are grouped.
"""

import socket
import textwrap

import pytest

from codesearch import chunking
from codesearch.chunking import MAX_PIECE_LINES, TREE_SITTER_LANGUAGES, split_file

SNIPPETS = {
    "server.js": ("""\
        import fs from "fs";

        /** Read the config file as JSON. */
        export function readConfig(path) {
          return JSON.parse(fs.readFileSync(path));
        }
        const handler = async (req, res) => {
          res.send(readConfig("x"));
        };
        module.exports.listen = function listen(port) {
          return port;
        };
        """, [(1, 1, 'import fs from "fs";'), (3, 6, "export function readConfig(path) {"),
              (7, 9, "const handler = async (req, res) => {"),
              (10, 12, "module.exports.listen = function listen(port) {")]),
    "server.ts": ("""\
        import { Request } from "express";
        // Options of a server.
        interface Options {
          port: number;
        }
        @Injectable()
        export class Server {
          start(options: Options): void {}
        }
        export const route = (path: string): void => {};
        """, [(1, 1, 'import { Request } from "express";'), (2, 5, "interface Options {"),
              (6, 9, "export class Server {"), (10, 10, "export const route = (path: string): void => {};")]),
    "server.go": ("""\
        package server

        import "fmt"

        // Serve starts the server on addr.
        func Serve(addr string) error {
        	return fmt.Errorf("no")
        }

        type Server struct {
        	addr string
        }

        func (s *Server) Start() error { return nil }
        """, [(1, 3, "package server"), (5, 8, "func Serve(addr string) error {"), (10, 12, "type Server struct {"),
              (14, 14, "func (s *Server) Start() error { return nil }")]),
    "config.rs": ("""\
        use std::fs;

        /// Read the config file.
        #[inline]
        pub fn read_config(path: &str) -> String {
            fs::read_to_string(path).unwrap()
        }

        pub struct Config {
            port: u16,
        }

        impl Config {
            pub fn new() -> Self { Config { port: 80 } }
        }
        """, [(1, 1, "use std::fs;"), (3, 7, "pub fn read_config(path: &str) -> String {"),
              (9, 11, "pub struct Config {"), (13, 15, "impl Config {")]),
    "Cache.java": ("""\
        package app;

        import java.util.Map;

        /** A cache of values. */
        @Deprecated
        public class Cache {
            public int get(int key) { return key; }
        }

        interface Loader { void load(); }
        """, [(1, 3, "package app;"), (5, 9, "public class Cache {"), (11, 11, "interface Loader { void load(); }")]),
    "config.c": ("""\
        #include <stdio.h>

        /* Read the config file. */
        static int read_config(const char *path) {
            return 0;
        }

        struct config {
            int port;
        };
        #define MAX_PORT 65535
        """, [(1, 1, "#include <stdio.h>"), (3, 6, "static int read_config(const char *path) {"),
              (8, 10, "struct config {"), (11, 11, "#define MAX_PORT 65535")]),
    "cache.cpp": ("""\
        #include <map>

        namespace app {
        class Cache {
          public:
            int get(int key) { return key; }
        };

        template <typename T> T max_of(T a, T b) { return a > b ? a : b; }
        }  // namespace app
        """, [(1, 1, "#include <map>"), (4, 7, "class Cache {"),
              (9, 9, "template <typename T> T max_of(T a, T b) { return a > b ? a : b; }"),
              (10, 10, "}  // namespace app")]),
    "Cache.cs": ("""\
        using System;

        namespace App
        {
            /// <summary>A cache of values.</summary>
            public class Cache
            {
                public int Get(int key) { return key; }
            }

            public interface ILoader { void Load(); }
        }
        """, [(1, 1, "using System;"), (5, 9, "public class Cache"),
              (11, 11, "public interface ILoader { void Load(); }")]),
    "cache.rb": ("""\
        require "json"

        # Read the config file.
        def read_config(path)
          JSON.parse(File.read(path))
        end

        class Cache < Base
          def get(key)
            @map[key]
          end
        end
        """, [(1, 1, 'require "json"'), (3, 6, "def read_config(path)"), (8, 12, "class Cache < Base")]),
    "cache.php": ("""\
        <?php
        namespace App;

        /** Read the config file. */
        function read_config($path) {
            return json_decode(file_get_contents($path));
        }

        class Cache {
            public function get($key) { return $key; }
        }
        """, [(1, 2, "<?php"), (4, 7, "function read_config($path) {"), (9, 11, "class Cache {")]),
}


@pytest.mark.parametrize("path", SNIPPETS)
def test_declarations_are_pieces_with_their_comments(path):
    source, expected = SNIPPETS[path]
    pieces = split_file(path, textwrap.dedent(source))
    assert [(piece.line, piece.end_line, piece.title) for piece in pieces] == expected


def test_a_doc_comment_one_blank_line_above_belongs_to_the_declaration_a_license_does_not():
    source = textwrap.dedent("""\
        /*!
         * license header
         */

        /**
         * Clear cookie `name`.
         */

        res.clearCookie = function clearCookie(name) {
          return this.cookie(name, "");
        };
        """)
    pieces = split_file("response.js", source)
    assert [(piece.line, piece.end_line) for piece in pieces] == [(1, 3), (5, 11)]
    assert pieces[1].title == "res.clearCookie = function clearCookie(name) {"


def test_a_long_class_is_split_at_its_methods_titled_with_the_class():
    methods = "".join(f"    public int get{i}(int key) {{\n        return key + {i};\n    }}\n\n" for i in range(30))
    source = f"public class Cache {{\n    private int size;\n\n{methods}}}\n"
    pieces = split_file("Cache.java", source)
    assert len(source.splitlines()) > MAX_PIECE_LINES
    # the header piece holds the class line and its fields, as a Python class piece does; methods are holes in it
    header, *methods = pieces
    assert (header.line, header.title) == (1, "public class Cache {")
    assert header.text == "public class Cache {\n    private int size;"
    assert [piece.title for piece in methods[:3]] == [f"Cache: public int get{i}(int key) {{" for i in range(3)]
    assert (methods[0].line, methods[0].end_line) == (4, 6)
    assert len(methods) == 30


LONG_BODY = "".join(f"    int offset{i} = pos.getIndex() + {i};\n" for i in range(120))


def test_a_long_method_is_windows_that_all_carry_its_signature_and_class():
    source = ("/** Dates in ISO 8601. */\n@SuppressWarnings(\"MemberName\")\npublic class ISO8601Utils {\n"
              "  /** Parse a date. */\n  public static Date parse(String date, ParsePosition pos) {\n"
              f"{LONG_BODY}    return null;\n  }}\n}}\n")
    pieces = split_file("ISO8601Utils.java", source)
    header, *windows = pieces
    # the class's doc comment and annotation are its header piece, titled by its declaration line
    assert (header.line, header.end_line, header.title) == (1, 3, "public class ISO8601Utils {")
    assert len(windows) == 3 and windows[0].line == 4  # the method's doc comment opens its first window
    assert {window.title for window in windows} == {
        "ISO8601Utils: public static Date parse(String date, ParsePosition pos) {"}
    assert all(window.text.startswith(windows[0].title) for window in windows[1:])
    assert windows[-1].end_line == len(source.splitlines()) - 1


@pytest.mark.parametrize("path, function", [
    ("server.go", "func Serve(addr string) error {\n{body}}}\n"),
    ("lib.rs", "pub fn serve(addr: &str) -> u32 {{\n{body}}}\n".replace("{{", "{")),
    ("app.ts", "export function serve(addr: string): number {\n{body}}}\n"),
    # a function a call makes from a function argument: zod's `$constructor`, React's `forwardRef`
    ("schemas.ts", "export const $ZodType = core.$constructor(\"$ZodType\", (inst, def) => {\n{body}});\n"),
])
def test_a_long_function_is_never_split_into_its_statements(path, function):
    body = "".join(f"    let_{i}(addr);\n" for i in range(100))
    pieces = split_file(path, "// Serve on addr.\n" + function.replace("{body}", body))
    assert {piece.title for piece in pieces} == {function.split("\n")[0]}
    assert pieces[0].line == 1 and len(pieces) == 2


def test_an_exported_class_names_its_methods_once():
    methods = "".join(f"  get{i}(key: string): number {{\n    return {i};\n  }}\n" for i in range(30))
    pieces = split_file("cache.ts", f"/** A cache. */\nexport class Cache {{\n  size = 0;\n{methods}}}\n")
    assert (pieces[0].line, pieces[0].title) == (1, "export class Cache {")
    assert pieces[0].text.endswith("size = 0;")
    assert [piece.title for piece in pieces[1:3]] == ["Cache: get0(key: string): number {",
                                                       "Cache: get1(key: string): number {"]
    assert not any("Cache.Cache" in piece.title for piece in pieces)


LONG_METHODS = 30  # enough three-line methods that their class is over MAX_PIECE_LINES and split


@pytest.mark.parametrize("path, source, titles", [
    # Rust names an impl's type in a field of its own (`impl Display for Cache`: Cache)
    ("cache.rs", "impl fmt::Display for Cache {{\n{methods}}}\n",
     ("impl fmt::Display for Cache {", "Cache: fn get{i}(&self) -> u32 {{")),
    # Kotlin names a class in no field; its primary constructor is part of the class line, not a piece
    ("Cache.kt", "class Cache(val size: Int) {{\n{methods}}}\n",
     ("class Cache(val size: Int) {", "Cache: fun get{i}(): Int {{")),
    # `template <class T>` on a line of its own opens the class's header piece, which the class line titles
    ("cache.hpp", "template <class T>\nclass Cache {{\n public:\n  int size;\n{methods}}};\n",
     ("class Cache {", "Cache: int get{i}() {{")),
])
def test_the_methods_of_a_long_class_name_their_class_and_no_brace_is_a_piece(path, source, titles):
    body = {"cache.rs": "    fn get{i}(&self) -> u32 {{\n        {i}\n    }}\n",
            "Cache.kt": "    fun get{i}(): Int {{\n        return {i}\n    }}\n",
            "cache.hpp": "  int get{i}() {{\n    return {i};\n  }}\n"}[path]
    source = source.format(methods="".join(body.format(i=i) for i in range(LONG_METHODS)))
    assert len(source.splitlines()) > MAX_PIECE_LINES
    header, *methods = split_file(path, source)
    assert (header.line, header.title) == (1, titles[0])
    assert [piece.title for piece in methods] == [titles[1].format(i=i) for i in range(LONG_METHODS)]
    assert methods[-1].end_line == len(source.splitlines()) - 1  # nothing after the last method: `}` is no piece


def test_the_fields_of_a_long_go_struct_are_titled_by_the_struct():
    fields = "".join(f"\tField{i} int // the {i}th\n" for i in range(100))
    pieces = split_file("engine.go", f"package gin\n\n// Engine is the framework's instance.\ntype Engine struct {{\n"
                                     f"{fields}}}\n")
    assert [piece.title for piece in pieces[1:]] == ["type Engine struct {"] * 2  # two windows of one declaration
    assert pieces[1].line == 3 and pieces[-1].end_line == 104  # the last field: a split node's `}` is no piece


def test_a_cpp_header_named_h_is_read_as_cpp_and_a_template_line_does_not_title():
    # the C grammar reads `namespace`, `template` and `class` as errors; C++ reads them all
    source = textwrap.dedent("""\
        #pragma once
        namespace fmt {
        /** A view of formatting arguments. */
        template <typename Context> class basic_format_args {
         public:
          int size() const { return 0; }
        };

        template <typename Char>
        auto to_string(const Char* text) -> int {
          return 0;
        }
        }  // namespace fmt
        """)
    pieces = split_file("include/fmt/base.h", source)
    assert [(piece.line, piece.end_line, piece.title) for piece in pieces] == [
        (1, 1, "#pragma once"), (3, 7, "template <typename Context> class basic_format_args {"),
        (9, 12, "auto to_string(const Char* text) -> int {"), (13, 13, "}  // namespace fmt")]
    c_header = "struct config {\n  int port;\n};\nint read_config(const char *path);\n"
    assert [piece.title for piece in split_file("config.h", c_header)] == ["struct config {",
                                                                          "int read_config(const char *path);"]


def test_a_namespace_opened_by_a_macro_is_split_at_its_declarations_not_windowed():
    # `NLOHMANN_JSON_NAMESPACE_BEGIN namespace detail {` parses as a function named `namespace` whose body is the
    # whole file: its declarations are pieces, each titled by its own line, as inside a plain namespace
    functions = "".join(f"inline int get{i}(int x)\n{{\n    return x + {i};\n}}\n\n" for i in range(20))
    source = ("#include <cstdint>\n\nNLOHMANN_JSON_NAMESPACE_BEGIN\nnamespace detail\n{\n\n"
              f"/// A reader.\ntemplate<typename T>\nclass binary_reader\n{{\n  public:\n    int size;\n}};\n\n"
              f"{functions}}}  // namespace detail\nNLOHMANN_JSON_NAMESPACE_END\n")
    assert len(source.splitlines()) > MAX_PIECE_LINES
    pieces = split_file("include/nlohmann/detail/input/binary_reader.hpp", source)
    titles = [piece.title for piece in pieces]
    assert "class binary_reader" in titles and pieces[titles.index("class binary_reader")].line == 7
    assert [title for title in titles if title.startswith("inline")] == [f"inline int get{i}(int x)" for i in range(20)]
    assert all(piece.end_line - piece.line < 10 for piece in pieces)  # no window of the whole namespace


@pytest.mark.parametrize("path, source, pieces", [
    # a short macro namespace is opened too, as a plain namespace of that size is
    ("detail.hpp", "NLOHMANN_JSON_NAMESPACE_BEGIN\nnamespace detail\n{\ninline int a(int x)\n{\n    return x;\n}\n"
                   "inline int b(int x)\n{\n    return x;\n}\n}  // namespace detail\nNLOHMANN_JSON_NAMESPACE_END\n",
     [(4, 7, "inline int a(int x)"), (8, 11, "inline int b(int x)")]),
    # a class with an export macro, which the grammar reads as a function named after the class, is no namespace
    ("options.hpp", "struct TORCH_API Options {\n  int x;\n  Options() {}\n};\n",
     [(1, 4, "struct TORCH_API Options {")]),
    # a macro that defines a function, its brace on the next line, titles it
    ("read.c", "SYSCALL_DEFINE3(read, unsigned int, fd)\n{\n\treturn ksys_read(fd);\n}\n",
     [(1, 4, "SYSCALL_DEFINE3(read, unsigned int, fd)")]),
])
def test_macro_scopes_macro_classes_and_macro_functions(path, source, pieces):
    found = [(piece.line, piece.end_line, piece.title) for piece in split_file(path, source)]
    assert all(piece in found for piece in pieces), found


def test_a_comment_after_code_on_its_line_stays_with_that_code():
    # `import d.E // why` is the import's comment, not the doc comment of the function below
    pieces = split_file("Main.kt", "package a\n\nimport b.C\nimport d.E // why\nfun f() = 1\n")
    assert [(piece.line, piece.end_line) for piece in pieces] == [(1, 4), (5, 5)]


def test_a_ruby_comment_starting_with_if_is_no_directive():
    # a group's title skips `#if` directives (C), not a comment that says "if" (titles keep comments)
    assert split_file("greet.rb", "# if the user is logged in\ngreet(user)\n")[0].title == "# if the user is logged in"


def test_a_c_function_whose_body_holds_a_function_stays_one_function():
    # a real function's body can seem to hold functions (a GNU C nested function; the functions after one whose
    # `#ifdef` branches leave a brace open): it has a parameter list, so it stays one declaration in windows
    body = "".join(f"  step_{i}(loop);\n" for i in range(90))
    source = f"void run_loop(loop_t* loop, int timeout) {{\n  int helper(int y) {{\n    return y;\n  }}\n{body}}}\n"
    pieces = split_file("loop.c", source)
    assert [piece.title for piece in pieces] == ["void run_loop(loop_t* loop, int timeout) {"] * 2


METHODS = "".join(f"    int get{i}() {{\n        return {i};\n    }}\n" for i in range(LONG_METHODS))


@pytest.mark.parametrize("path, source, title", [
    # an attribute macro alone on its line, after a template line, titles nothing: the declaration after it does
    ("parser.hpp", "template<typename SAX>\nJSON_HEDLEY_NON_NULL(2)\nbool sax_parse(SAX* sax)\n{\n    return 1;\n}\n",
     "bool sax_parse(SAX* sax)"),
    # an access label opens a group of members; the group's next line titles it
    ("json.hpp", f"NLOHMANN_BASIC_JSON_TPL_DECLARATION\nclass basic_json\n{{\n{METHODS}  public:\n"
                 "    /// parser event types\n    using parse_event_t = int;\n};\n", "/// parser event types"),
    # an include guard's `#ifndef` titles nothing: its `#define` does
    ("args.h", "#ifndef FMT_ARGS_H_\n#define FMT_ARGS_H_\n\n#include \"base.h\"\n\nint x;\n#endif\n",
     "#define FMT_ARGS_H_"),
    # a Java constructor named in capitals is no macro
    ("LHS.java", f"class LHS {{\n{METHODS}    LHS( NameSpace nameSpace, String varName )\n"
                 "    {\n        x = 1;\n    }\n}\n",
     "LHS: LHS( NameSpace nameSpace, String varName )"),
])
def test_titles_skip_macros_labels_and_directives_that_open_a_declaration(path, source, title):
    assert title in [piece.title for piece in split_file(path, source)]


@pytest.mark.parametrize("path, source", [
    ("Channels.kt", "package kotlinx.coroutines\n\n/**\n * Consumes every element.\n */\n@Deprecated(\n"
                    "    message = \"Use Flow\",\n    level = DeprecationLevel.ERROR\n)\n@PublishedApi\n"
                    "public fun <E> ReceiveChannel<E>.consumeAll(): Unit = Unit\n"),
    ("Alamofire.swift", "import Foundation\n\n/**\n Consumes every element.\n */\n@available(\n"
                        "    macOS 10.15, iOS 13,\n    *\n)\npublic func consumeAll() {}\n"),
])
def test_a_kdoc_comment_and_a_multi_line_annotation_belong_to_the_declaration_that_titles_them(path, source):
    header, declaration = split_file(path, source)
    assert (declaration.line, declaration.end_line) == (3, len(source.splitlines()))
    assert "Consumes every element." in declaration.text
    assert declaration.title == source.splitlines()[-1]


def test_a_kdoc_the_grammar_nests_in_the_last_import_belongs_to_the_declaration_below():
    # Kotlin's grammar makes the comment after the imports part of the import list
    source = ('@file:JvmName("ChannelsKt")\n\npackage kotlinx.coroutines.channels\n\nimport kotlinx.coroutines.*\n'
              'import kotlin.contracts.*\n\n/**\n * Consumes it.\n */\n@ObsoleteCoroutinesApi\n'
              '@Suppress("DEPRECATION_ERROR")\nfun consume() = 1\n')
    assert [(piece.line, piece.end_line, piece.title) for piece in split_file("Channels.kt", source)] == [
        (1, 6, "package kotlinx.coroutines.channels"), (8, 13, "fun consume() = 1")]


def test_elixir_modules_and_functions_are_declarations_with_their_docs():
    source = textwrap.dedent('''\
        defmodule Phoenix.Router do
          alias Phoenix.Route

          @doc "Match a route."
          @spec match(term, term) :: term
          def match(conn, path) do
            Route.find(conn, path)
          end

          defp helper(x), do: x
        end
        ''')
    pieces = split_file("router.ex", source)
    assert [(piece.line, piece.end_line, piece.title) for piece in pieces] == [(1, 11, "defmodule Phoenix.Router do")]
    short_functions = "".join(f"  def f{i}(x), do: x\n" for i in range(80))
    long_source = source.replace("  defp helper", short_functions + "  defp helper")
    long_pieces = split_file("router.ex", long_source)
    titles = [(piece.line, piece.title) for piece in long_pieces]
    assert titles[:2] == [(1, "defmodule Phoenix.Router do"), (4, "Phoenix.Router: def match(conn, path) do")]
    assert long_pieces[0].text == "defmodule Phoenix.Router do\n  alias Phoenix.Route"  # the module's header piece
    assert (10, "Phoenix.Router: def f0(x), do: x") in titles


def test_a_ruby_module_is_a_declaration_that_names_its_members():
    helpers = "".join(f"    # Helper {i}.\n    def helper{i}(value)\n      value + {i}\n    end\n\n" for i in range(20))
    source = (f"module Sinatra\n  # Methods available to routes.\n  module Helpers\n    # Set the status.\n"
              f"{helpers}  end\nend\n")
    pieces = split_file("base.rb", source)
    titles = [(piece.line, piece.end_line, piece.title) for piece in pieces]
    # the module's doc comment and name line are its header; the comment right below it belongs to the first method
    assert titles[:3] == [(1, 1, "module Sinatra"), (2, 3, "Sinatra: module Helpers"),
                          (4, 8, "Sinatra.Helpers: def helper0(value)")]
    assert pieces[2].text.lstrip().startswith("# Set the status.\n    # Helper 0.")
    assert titles[-1][2] == "Sinatra.Helpers: def helper19(value)"
    short = split_file("version.rb", "module Sinatra\n  VERSION = '4.0'\nend\n")
    assert [(piece.line, piece.end_line, piece.title) for piece in short] == [(1, 3, "module Sinatra")]


@pytest.mark.parametrize("path", ["deploy.bash", "Main.hs", "main.zig", "app.dart", "build.gradle.kts", "mix.exs"])
def test_more_languages_are_indexed(path):
    assert split_file(path, "x = 1\n"), path


def test_a_file_ending_in_a_newline_terminated_node_stays_inside_the_file():
    pieces = split_file("max.h", "#define MAX 3\n#define MIN 1\n")
    assert [(piece.line, piece.end_line) for piece in pieces] == [(1, 2)]


def test_every_language_parses_with_the_network_blocked(monkeypatch):
    """The grammars come from the installed wheel: no download at run time (1.x of the package downloads them)."""

    def refuse(*args, **kwargs):
        raise OSError("network blocked by the test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(chunking, "_parsers", {})  # load every grammar afresh, inside the block
    for language in sorted(set(TREE_SITTER_LANGUAGES.values())):
        assert chunking._parser(language) is not None, f"no grammar for {language}"
        tree = chunking._parser(language).parse(b"x")
        assert tree.root_node is not None


# Each snippet's last declaration is split from its type (MAX_PIECE_LINES lowered to 3), and its title must be the
# line that declares its name: C's return type on a line of its own joins it, annotations and comments above it do not.
DECLARATION_TITLES = [
    ("list.c", "/* Frees the list. */\nstatic void\nlist_free (struct list *l)\n{\n  free (l);\n}\n",
     "static void list_free (struct list *l)"),
    ("node.c", "static struct node *\nnode_new (int value)\n{\n  return NULL;\n}\n",
     "static struct node * node_new (int value)"),
    ("cache.cc", "template <typename T>\ninline T\nCache<T>::get (int key) const\n{\n  return values_[key];\n}\n",
     "inline T Cache<T>::get (int key) const"),
    ("engine.go", "package gin\n\n// ServeHTTP conforms to http.Handler.\nfunc (engine *Engine) ServeHTTP(w "
                  "http.ResponseWriter, req *http.Request) {\n\tengine.handle(c)\n}\n",
     "func (engine *Engine) ServeHTTP(w http.ResponseWriter, req *http.Request) {"),
    ("router.rs", "impl<S> Router<S> {\n    #[track_caller]\n    pub fn route(mut self, path: &str) -> Self {\n"
                  "        self\n    }\n}\n", "Router<S>: pub fn route(mut self, path: &str) -> Self {"),
    ("Client.kt", "class Client {\n    @Suppress(\"UNCHECKED_CAST\")\n    suspend fun <T> request(\n"
                  "        url: String,\n    ): T {\n        return get(url)\n    }\n}\n",
     "Client: suspend fun <T> request("),
    ("Strings.java", "public class Strings {\n    @Deprecated\n    // kept for binary compatibility\n"
                     "    public static String\n    abbreviate(String str, int maxWidth) {\n        return str;\n"
                     "    }\n}\n", "Strings: public static String abbreviate(String str, int maxWidth) {"),
    ("Pool.cs", "public class Pool {\n    [MethodImpl(MethodImplOptions.AggressiveInlining)]\n"
                "    public T Rent<T>(int size) where T : new() {\n        return new T();\n    }\n}\n",
     "Pool: public T Rent<T>(int size) where T : new() {"),
    ("Session.swift", "open class Session {\n    @discardableResult\n    open func request(_ url: URL) -> "
                      "DataRequest {\n        return DataRequest()\n    }\n}\n",
     "Session: open func request(_ url: URL) -> DataRequest {"),
    ("Apply.scala", "trait Apply[F[_]] {\n  @inline final def <*>[A, B](ff: F[A => B])(fa: F[A]): F[B] =\n"
                    "    ap(ff)(fa)\n}\n", "Apply: @inline final def <*>[A, B](ff: F[A => B])(fa: F[A]): F[B] ="),
    ("utils.rb", "module Rack\n  module Utils\n    # Escape a string for a URL.\n    def self.escape(s)\n"
                 "      URI.encode_www_form_component(s)\n    end\n  end\nend\n", "Rack.Utils: def self.escape(s)"),
    ("Router.php", "<?php\nclass Router {\n    #[Pure]\n    public static function\n"
                   "        dispatch(Request $request): Response {\n        return new Response();\n    }\n}\n",
     "Router: public static function dispatch(Request $request): Response {"),
    ("repo.ex", "defmodule Ecto.Repo do\n  @doc \"Fetches a record.\"\n  def get(queryable, id, opts \\\\ [])\n"
                "      when is_list(opts) do\n    :ok\n  end\nend\n",
     "Ecto.Repo: def get(queryable, id, opts \\\\ [])"),
    ("router.ts", "export class Router {\n  @Memoize()\n  public async resolve<TInput>(\n    input: TInput,\n"
                  "  ): Promise<void> {}\n}\n", "Router: public async resolve<TInput>("),
]


@pytest.mark.parametrize("path, source, title", DECLARATION_TITLES, ids=[path for path, _, _ in DECLARATION_TITLES])
def test_a_declaration_is_titled_by_the_line_that_names_it(path, source, title, monkeypatch):
    monkeypatch.setattr(chunking, "MAX_PIECE_LINES", 3)
    assert split_file(path, source)[-1].title == title


@pytest.mark.parametrize("path, source, title", [
    ("logger.cpp", "// Copyright(c) 2016 Gabi Melman.\n#include <mutex>\n\nint f() { return 1; }\n",
     "#include <mutex>"),
    ("doc.go", "// Package middleware provides helpers.\npackage middleware\n\nimport (\n\t\"fmt\"\n)\n\nfunc A() {}\n",
     "package middleware"),
    ("Strings.java", "/*\n * Licensed to the Apache Software Foundation\n */\npackage org.apache.commons;\n"
                     "import java.util.List;\n\nclass Strings {}\n", "package org.apache.commons;"),
])
def test_a_files_comment_and_import_header_is_titled_by_its_first_import_line(path, source, title):
    header, code = split_file(path, source)
    assert header.line == 1 and header.title == title
    assert code.title != title


def test_a_group_of_comments_and_code_is_no_header():
    assert split_file("helpers.ts", "// helpers\nconst x = 1;\nimport y from \"z\";\n")[0].title == "// helpers"
