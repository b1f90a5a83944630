"""The package-source miner (train/mining_packages): doc comments found per language, the query cut, the filters,
decontamination by upstream and by benchmark text, the per-language report, resumption. Offline: registries are
faked by replacing the one function that runs their clients; the test that fetches for real is slow and opt-in."""

import io
import json
import os
import tarfile
from pathlib import Path

import pytest

from train.decontaminate import Exclusions, repositories_in
from train.mining_packages import fetch, filters, run
from train.mining_packages.extract import LANGUAGES, documented_functions

# language -> (file name, source, the documented function's name, its doc's first paragraph, code's first line)
SOURCES = {
    "go": ("errors.go", "package errors\n\n// Wrap returns an error annotating err\n// with a message.\n//\n// More "
           "text.\nfunc Wrap(err error, message string) error {\n\tif err == nil {\n\t\treturn nil\n\t}\n\treturn "
           "err\n}\n", "Wrap", "Wrap returns an error annotating err with a message.", "func Wrap("),
    "rust": ("lib.rs", "/// Splits the input at every comma.\n///\n/// # Examples\n#[inline]\npub fn split(text: &str) "
             "-> Vec<&str> {\n    text.split(',').collect()\n}\n", "split", "Splits the input at every comma.",
             "#[inline]"),
    "javascript": ("pad.js", "/**\n * Pads a string on the left.\n * @param {string} text\n */\nfunction leftPad("
                   "text, width) {\n  return text.padStart(width);\n}\n", "leftPad", "Pads a string on the left.",
                   "function leftPad("),
    "typescript": ("sum.ts", "/** Adds every number of the list. */\nexport const sum = (values: number[]) => {\n  "
                   "return values.reduce((a, b) => a + b, 0);\n};\n", "sum", "Adds every number of the list.",
                   "export const sum"),
    "java": ("Text.java", "class Text {\n  /**\n   * Joins the parts with a {@code separator}.\n   * <p>Details.\n   "
             "*/\n  @Deprecated\n  static String join(String separator, String... parts) {\n    return String.join("
             "separator, parts);\n  }\n}\n", "join", "Joins the parts with a separator.", "@Deprecated"),
    "kotlin": ("Text.kt", "/** Reverses the words of a line. */\nfun reverseWords(line: String): String {\n  return "
               "line.split(\" \").reversed().joinToString(\" \")\n}\n", "reverseWords",
               "Reverses the words of a line.", "fun reverseWords("),
    "c": ("buf.c", "/* Frees the buffer and its data. */\nvoid buf_free(struct buf *b)\n{\n  free(b->data);\n  free(b);"
          "\n}\n", "buf_free", "Frees the buffer and its data.", "void buf_free("),
    "cpp": ("clamp.hpp", "/// Clamps a value into a range.\ntemplate <class T>\nT clamp(T v, T lo, T hi) {\n  return "
            "v < lo ? lo : hi < v ? hi : v;\n}\n", "clamp", "Clamps a value into a range.", "template <class T>"),
    "csharp": ("Text.cs", "class Text {\n  /// <summary>Counts the words of a <see cref=\"string\"/>.</summary>\n  "
               "/// <param name=\"s\">text</param>\n  public static int CountWords(string s) {\n    return s.Split("
               "' ').Length;\n  }\n}\n", "CountWords", "Counts the words of a string.", "public static int"),
    "ruby": ("text.rb", "class Text\n  # Squeezes runs of spaces into one.\n  def squeeze_spaces(s)\n    s.squeeze("
             "' ')\n  end\nend\n", "squeeze_spaces", "Squeezes runs of spaces into one.", "def squeeze_spaces("),
    "php": ("Text.php", "<?php\nclass Text {\n  /**\n   * Converts a title into a URL slug.\n   * @param string $t\n   "
            "*/\n  public function slug($t) {\n    return strtolower($t);\n  }\n}\n", "slug",
            "Converts a title into a URL slug.", "public function slug("),
    "swift": ("Text.swift", "/// Trims the whitespace around a string.\n/// - Parameter s: the text\nfunc trimmed(_ s: "
              "String) -> String {\n  return s.trimmingCharacters(in: .whitespaces)\n}\n", "trimmed",
              "Trims the whitespace around a string.", "func trimmed("),
    "elixir": ("text.ex", "defmodule Text do\n  @doc \"\"\"\n  Capitalizes every word of the text.\n\n  ## Examples\n"
               "  \"\"\"\n  @spec title(String.t()) :: String.t()\n  def title(text) do\n    text\n  end\nend\n",
               "title", "Capitalizes every word of the text.", "@spec title"),
}


@pytest.mark.parametrize("language", sorted(SOURCES))
def test_each_language_gives_its_documented_function_without_the_comment(language):
    file_name, source, name, doc, first_line = SOURCES[language]
    suffix = "." + file_name.rsplit(".", 1)[1]
    found = list(documented_functions(LANGUAGES[language], suffix, source))
    assert [(function.name, function.doc) for function in found] == [(name, doc)]
    assert found[0].code.startswith(first_line)
    assert " ".join(doc.split()[:3]) not in found[0].code  # the comment is not part of the code


def test_a_gtk_doc_comment_gives_its_description():
    source = ("/**\n * xmlStrdup:\n * @cur:  the input xmlChar *\n *\n * a strdup for array of xmlChar's.\n *\n"
              " * Returns a new xmlChar *\n */\nxmlChar *\nxmlStrdup(const xmlChar *cur) {\n    return cur;\n}\n")
    assert [f.doc for f in documented_functions(LANGUAGES["c"], ".c", source)] == ["a strdup for array of xmlChar's."]


def test_functions_returning_pointers_or_references_are_found():
    source = ("/// Gets the name.\nconst std::string &App::get_name() const {\n  return name_;\n}\n"
              "// Makes a list.\nchar **make_list(void) {\n  return 0;\n}\n")
    assert [(f.name, f.doc) for f in documented_functions(LANGUAGES["cpp"], ".cpp", source)] == [
        ("get_name", "Gets the name."), ("make_list", "Makes a list.")]


def test_a_doc_found_in_the_source_and_in_the_build_output_keeps_the_source(tmp_path, registries, exclude_file,
                                                                            benchmark_data, beir_folder):
    built = "/** Adds every number of the list. */\nexport const sum = (values) => {\n  var total = 0;\n  " \
            "values.forEach(function (v) { total += v; });\n  return total;\n};\n"
    registries.npm["summer"] = ({"version": "1.0.0", "license": "MIT"}, {
        "package/dist/sum.ts": built, "package/src/sum.ts": SOURCES["typescript"][1]})
    assert mine(tmp_path, exclude_file, benchmark_data, beir_folder, "typescript:npm:summer") == 0
    rows = [json.loads(line) for line in (tmp_path / "out" / "pairs" / "typescript.jsonl").read_text().splitlines()]
    assert [row["path"] for row in rows] == ["package/src/sum.ts"]


def test_doxygen_markers_are_cut_and_section_banners_are_no_docs():
    source = ("//! Splits a path into its parts.\nstd::vector<std::string> split(const std::string &p) {\n"
              "  return {};\n}\n"
              "/************************************************\n *  I/O for FTP file accesses  *\n"
              " ************************************************/\nint ftp_match(const char *f) {\n  return 0;\n}\n")
    assert [(f.name, f.doc) for f in documented_functions(LANGUAGES["cpp"], ".cpp", source)] == [
        ("split", "Splits a path into its parts.")]


def test_undocumented_functions_and_directives_give_no_pair():
    source = "package x\n\nfunc Plain() {\n}\n\n//go:noinline\nfunc Directive() {\n}\n\n// Spaced.\n\nfunc Far() {}\n"
    assert list(documented_functions(LANGUAGES["go"], ".go", source)) == []
    # Rust: a plain `//` comment is no doc
    assert list(documented_functions(LANGUAGES["rust"], ".rs", "// plain\nfn f() {\n}\n")) == []


def test_javascript_line_comments_and_c_block_comments_one_blank_line_above_are_docs():
    source = "// Return a random integer between min and max.\nexport default function random(min, max) {\n  " \
             "return min;\n}\n"
    assert [f.doc for f in documented_functions(LANGUAGES["javascript"], ".js", source)] == [
        "Return a random integer between min and max."]
    source = "/*\n * Create a new parser object.\n */\n\nint\nyaml_parser_initialize(void *parser)\n{\n  return 1;\n}\n"
    assert [f.doc for f in documented_functions(LANGUAGES["c"], ".c", source)] == ["Create a new parser object."]
    lint = "// eslint-disable-next-line no-unused-vars\nfunction f() {\n  return 1;\n}\n"
    assert list(documented_functions(LANGUAGES["javascript"], ".js", lint)) == []


@pytest.mark.parametrize(("doc", "name", "query"), [
    ("NewReader returns a reader over the bytes.", "NewReader", "Returns a reader over the bytes."),
    ("`parse` reads the header line.", "parse", "Reads the header line."),
    ("Cache.get() looks a key up.", "get", "Looks a key up."),
    ("Reads the header line.", "parse", "Reads the header line."),
    ("Newer readers buffer more.", "New", "Newer readers buffer more."),
])
def test_the_leading_function_name_is_cut_from_the_doc(doc, name, query):
    assert filters.query_from_doc(doc, name) == query


def test_per_pair_filters_name_their_reason():
    code = "func f() {\n\treturn\n}"
    assert filters.pair_drop_reason("Returns the value.", code) is None
    assert filters.pair_drop_reason("Returns.", code) == filters.REASON_QUERY_TOO_SHORT
    assert filters.pair_drop_reason("TODO: make this faster somehow", code) == filters.REASON_BOILERPLATE
    assert filters.pair_drop_reason("Returns the value.", "func f() {}") == filters.REASON_CODE_TOO_SHORT
    assert filters.pair_drop_reason("Returns the value.", "\n" * filters.MAX_CODE_LINES) == filters.REASON_CODE_TOO_LONG


def pair(query, code, package="go:debian:a"):
    return {"query": query, "positive": code, "package": package}


def test_duplicates_and_templated_docs_are_dropped():
    pairs = [pair("Returns the value.", "f1"), pair("returns the value", "f2"), pair("Adds one.", "f1"),
             *(pair(f"Returns the Field{index} field value if set.", f"g{index}") for index in range(6))]
    kept, dropped = filters.select_pairs(pairs)
    assert [p["positive"] for p in kept] == ["f1", "g0", "g1", "g2"]
    assert dropped == {filters.REASON_DUPLICATE_QUERY: 1, filters.REASON_DUPLICATE_CODE: 1,
                       filters.REASON_TEMPLATED: 3}


def test_one_package_share_is_capped():
    big = [pair(f"Does thing number {index} {'x' * (index % 7)}", f"code {index}", "go:debian:big")
           for index in range(filters.MIN_PACKAGE_CAP + 100)]
    small = [pair(f"Other work {index} {'y' * (index % 5)}", f"other {index}", "go:debian:small")
             for index in range(10)]
    # distinct templates: the masked identifiers differ in length
    for index, row in enumerate(big + small):
        row["query"] = f"{row['query']} " + " ".join(["word"] * (index % 50))
    kept, dropped = filters.select_pairs(big + small)
    per_package = {name: sum(p["package"] == name for p in kept) for name in ("go:debian:big", "go:debian:small")}
    assert per_package == {"go:debian:big": filters.MIN_PACKAGE_CAP, "go:debian:small": 10}
    assert dropped[filters.REASON_PACKAGE_CAP] == 100


def test_upstream_urls_name_their_repository():
    assert repositories_in(["git+https://github.com/Gin-Gonic/gin.git", "git@github.com:pkg/errors.git",
                            "github:colinhacks/zod", "https://gitlab.com/o/n/-/tree/main", "expressjs/express",
                            "https://rack.github.io/", "https://owner.github.io/site/"]) == {
        "gin-gonic/gin", "pkg/errors", "colinhacks/zod", "o/n", "expressjs/express", "rack/rack", "owner/site"}


@pytest.fixture
def exclude_file(tmp_path):
    path = tmp_path / "mining-exclude.txt"
    path.write_text("# header\ngin-gonic/gin\nColinhacks/Zod\n", encoding="utf-8")
    return path


@pytest.fixture
def benchmark_data(tmp_path):
    folder = tmp_path / "benchmark-data"
    folder.mkdir()
    (folder / "queries.jsonl").write_text(json.dumps({"package": "dill", "query": "pickle a lambda function",
                                                      "path": "a.py"}) + "\n", encoding="utf-8")
    (folder / "heldout.json").write_text(json.dumps({"trees": {"ripgrep": {"sources": [
        {"registry": "debian", "name": "librust-ignore-dev"}]}}, "queries": [{"query": "walk a tree"}]}))
    return folder


def test_exclusions_refuse_listed_upstreams_and_benchmark_projects(exclude_file, benchmark_data):
    exclusions = Exclusions.load(exclude_file, benchmark_data)
    assert "gin-gonic/gin" in exclusions.refusal("golang-github-gin-gonic-dev", ["https://github.com/gin-gonic/gin"])
    assert "colinhacks/zod" in exclusions.refusal("zod", ["git+https://github.com/colinhacks/zod.git"])
    assert "dill" in exclusions.refusal("python-dill", ["https://github.com/uqfoundation/dill"])
    assert "benchmark" in exclusions.refusal("librust-ignore-dev", [])
    assert exclusions.refusal("golang-github-pkg-errors-dev", ["https://github.com/pkg/errors"]) is None
    assert sorted(exclusions.query_texts) == ["pickle a lambda function", "walk a tree"]


def tarball(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, text in files.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


GO_FILE = SOURCES["go"][1]
COPYRIGHT = ("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\nSource: {source}\n\n"
             "Files: *\nCopyright: someone\nLicense: BSD-2-clause\n")


class FakeRegistries:
    """Stands in for the registry clients (apt-get, apt-cache, npm): `run_tool` answers from these tables and
    writes the tarballs a download would."""

    def __init__(self):
        self.calls = []
        self.npm = {}  # name -> (view fields, tarball files)
        self.debian_sources = {}  # name -> (showsrc stanza, tarball files)
        self.offline = False
        self.mirror_unreachable = False
        self.missing_debian_tarball = set()
        self.damaged_tarball = set()

    def __call__(self, arguments, cwd=None):
        self.calls.append(arguments)
        if self.offline:
            raise fetch.NetworkError("npm cannot reach its registry (getaddrinfo ENOTFOUND registry.npmjs.org); "
                                     "check the network or the proxy, then run the same command again")
        if arguments[:2] == ["npm", "view"]:
            return json.dumps(self.npm[arguments[2]][0])
        if arguments[:2] == ["npm", "pack"]:
            name = arguments[2].rsplit("@", 1)[0]
            destination = Path(arguments[arguments.index("--pack-destination") + 1])
            (destination / f"{name}.tgz").write_bytes(tarball(self.npm[name][1]))
            return "[]"
        if arguments[0] == "apt-get" and arguments[-1] == "update":
            lists = next(option.split("=", 1)[1] for option in arguments if option.startswith("Dir::State::Lists="))
            if not self.mirror_unreachable:  # apt-get update warns and exits 0 when it fetched nothing
                (Path(lists) / "deb.debian.org_debian_dists_bookworm_main_source_Sources").write_text("")
            return ""
        if arguments[0] == "apt-cache":
            stanza = self.debian_sources.get(arguments[-1], ("", {}))[0]
            return stanza
        if arguments[0] == "apt-get" and "source" in arguments:
            name = arguments[-1]
            (Path(cwd) / f"{name}_1.0.orig.tar.gz").write_bytes(tarball(self.debian_sources[name][1]))
            (Path(cwd) / f"{name}_1.0.orig.tar.gz.asc").write_text("-----BEGIN PGP SIGNATURE-----\n")
            if name in self.damaged_tarball:
                (Path(cwd) / f"{name}_1.0.orig.tar.gz").write_bytes(b"\x1f\x8b" + b"\0" * 64)
            if name in self.missing_debian_tarball:  # the mirror lacks the packaging tarball: apt-get fails
                raise fetch.FetchError(f"apt-get source {name}: E: Failed to fetch some archives.")
            return ""
        raise AssertionError(f"unexpected call {arguments}")


@pytest.fixture
def registries(monkeypatch):
    fake = FakeRegistries()
    monkeypatch.setattr(fetch, "run_tool", fake)
    monkeypatch.setattr(run, "os_release_codename", lambda: "bookworm")
    return fake


@pytest.fixture
def beir_folder(tmp_path):
    folder = tmp_path / "beir" / "tiny"
    folder.mkdir(parents=True)
    (folder / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "Closes the file handle and flushes it."})
                                          + "\n", encoding="utf-8")
    (folder / "corpus.jsonl").write_text(json.dumps({"_id": "d1", "text": "def f():\n    return 1"}) + "\n",
                                         encoding="utf-8")
    (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n", encoding="utf-8")
    return folder


def mine(tmp_path, exclude_file, benchmark_data, beir_folder, *packages):
    return run.main(["--output", str(tmp_path / "out"), "--exclude", str(exclude_file), "--benchmark-data",
                     str(benchmark_data), "--decontaminate", str(beir_folder), *packages])


def go_package_files(extra: str = "") -> dict[str, str]:
    return {"pkg-1.0/errors.go": GO_FILE + extra, "pkg-1.0/vendor/other/x.go": GO_FILE.replace("Wrap", "Vendored"),
            "pkg-1.0/debian/copyright": COPYRIGHT.format(source="https://github.com/pkg/errors")}


def test_a_listed_upstream_is_refused_before_and_after_download(tmp_path, registries, exclude_file, benchmark_data,
                                                                 beir_folder):
    registries.npm["some-zod-fork"] = ({"version": "1.0.0", "license": "MIT",
                                        "repository": {"url": "git+https://github.com/colinhacks/zod.git"}}, {})
    registries.npm["renamed"] = ({"version": "2.0.0", "license": "MIT"}, {  # only its package.json names zod
        "package/package.json": json.dumps({"repository": "github:colinhacks/zod"}),
        "package/src/index.ts": SOURCES["typescript"][1]})
    registries.debian_sources["gin-copy"] = ("Package: gin-copy\nVersion: 1.0-1\n", {
        "gin-1.0/gin.go": GO_FILE,
        "gin-1.0/debian/copyright": COPYRIGHT.format(source="https://github.com/gin-gonic/gin")})
    registries.debian_sources["gin-fork"] = ("Package: gin-fork\nVersion: 1.0-1\n", {  # named in upstream/metadata
        "gin-1.0/gin.go": GO_FILE,
        "gin-1.0/debian/upstream/metadata": "Repository: https://github.com/gin-gonic/gin.git\n"})
    assert mine(tmp_path, exclude_file, benchmark_data, beir_folder, "typescript:npm:some-zod-fork",
                "typescript:npm:renamed", "go:debian-source:gin-copy", "go:debian-source:gin-fork") == 0
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert set(report["languages"]["typescript"]["refused"]) == {"typescript:npm:some-zod-fork",
                                                                 "typescript:npm:renamed"}
    assert "gin-gonic/gin" in report["languages"]["go"]["refused"]["go:debian-source:gin-copy"]
    assert not any(call[:2] == ["npm", "pack"] and "some-zod-fork" in call[2] for call in registries.calls)
    assert "gin-gonic/gin" in report["languages"]["go"]["refused"]["go:debian-source:gin-fork"]
    assert (tmp_path / "out" / "pairs" / "go.jsonl").read_text() == ""


def test_mined_pairs_keep_package_version_licence_and_the_report_counts_drops(tmp_path, registries, exclude_file,
                                                                             benchmark_data, beir_folder):
    overlapping = ("\n// Close closes the file handle and flushes it.\nfunc Close(f *File) error {\n\tf.Flush()\n"
                   "\treturn f.Close()\n}\n\n// Tiny is short.\nfunc Tiny() {}\n")
    registries.debian_sources["pkg"] = ("Package: pkg\nVersion: 1.0-1\nHomepage: https://github.com/pkg/errors\n",
                                        go_package_files(overlapping))
    assert mine(tmp_path, exclude_file, benchmark_data, beir_folder, "go:debian-source:pkg") == 0
    rows = [json.loads(line) for line in (tmp_path / "out" / "pairs" / "go.jsonl").read_text().splitlines()]
    assert json.loads((tmp_path / "out" / "cache" / "packages" / "go" / "debian-source" / "pkg.json").read_text())[
        "license"] == "BSD-2-clause"
    assert [(row["query"], row["name"], row["version"], row["license"], row["path"]) for row in rows] == [
        ("Returns an error annotating err with a message.", "Wrap", "1.0-1", "BSD-2-clause", "pkg-1.0/errors.go")]
    assert rows[0]["source"] == run.SOURCE_NAME and rows[0]["language"] == "go"
    figures = json.loads((tmp_path / "out" / "report.json").read_text())["languages"]["go"]
    assert figures["functions"] == 3  # the vendored copy is not read
    assert figures["dropped"] == {run.REASON_BENCHMARK_OVERLAP: 1, filters.REASON_QUERY_TOO_SHORT: 1}
    assert figures["pairs_per_package"] == {"go:debian-source:pkg": 1}


def test_one_npm_package_is_mined_for_each_language_it_ships(tmp_path, registries, exclude_file, benchmark_data,
                                                              beir_folder):
    registries.npm["expo-thing"] = ({"version": "1.0.0", "license": "MIT"}, {
        "package/android/Text.kt": SOURCES["kotlin"][1], "package/ios/Text.swift": SOURCES["swift"][1]})
    assert mine(tmp_path, exclude_file, benchmark_data, beir_folder, "kotlin:npm:expo-thing",
                "swift:npm:expo-thing") == 0
    for language, first_line in (("kotlin", "fun reverseWords("), ("swift", "func trimmed(")):
        lines = (tmp_path / "out" / "pairs" / f"{language}.jsonl").read_text().splitlines()
        rows = [json.loads(line) for line in lines]
        assert [row["positive"].split("\n")[0][:len(first_line)] for row in rows] == [first_line]


def test_a_source_package_whose_packaging_tarball_is_missing_is_mined_from_its_upstream_tarball(
        tmp_path, registries, exclude_file, benchmark_data, beir_folder):
    upstream_files = {name: text for name, text in go_package_files().items() if "debian/" not in name}
    registries.debian_sources["pkg"] = ("Package: pkg\nVersion: 1.0-1\n", upstream_files)
    registries.missing_debian_tarball.add("pkg")
    assert mine(tmp_path, exclude_file, benchmark_data, beir_folder, "go:debian-source:pkg") == 0
    assert json.loads((tmp_path / "out" / "report.json").read_text())["languages"]["go"]["pairs"] == 1
    rows = [json.loads(line) for line in (tmp_path / "out" / "pairs" / "go.jsonl").read_text().splitlines()]
    assert rows[0]["license"] == "unknown"  # no debian/copyright in the upstream tarball: said, not left blank


def test_a_damaged_tarball_fails_its_package_only_and_signatures_are_not_unpacked(tmp_path, registries, exclude_file,
                                                                                  benchmark_data, beir_folder):
    registries.debian_sources["broken"] = ("Package: broken\nVersion: 1.0-1\n", go_package_files())
    registries.debian_sources["pkg"] = ("Package: pkg\nVersion: 1.0-1\n", go_package_files())
    registries.damaged_tarball.add("broken")
    assert mine(tmp_path, exclude_file, benchmark_data, beir_folder, "go:debian-source:broken",
                "go:debian-source:pkg") == 0
    figures = json.loads((tmp_path / "out" / "report.json").read_text())["languages"]["go"]
    assert list(figures["failed"]) == ["go:debian-source:broken"]
    assert figures["failed"]["go:debian-source:broken"].startswith("broken_1.0.orig.tar.gz cannot be unpacked")
    assert figures["pairs"] == 1


def test_a_rerun_resumes_from_the_package_cache(tmp_path, registries, exclude_file, benchmark_data, beir_folder):
    registries.debian_sources["pkg"] = ("Package: pkg\nVersion: 1.0-1\n", go_package_files())
    assert mine(tmp_path, exclude_file, benchmark_data, beir_folder, "go:debian-source:pkg") == 0
    registries.offline = True  # a rerun needs no registry for what is cached
    assert mine(tmp_path, exclude_file, benchmark_data, beir_folder, "go:debian-source:pkg") == 0
    assert json.loads((tmp_path / "out" / "report.json").read_text())["languages"]["go"]["pairs"] == 1
    assert not list((tmp_path / "out").rglob(".*-*"))  # no temporary file left by the atomic writes


def test_bad_input_stops_before_any_work_with_the_fix(tmp_path, registries, exclude_file, benchmark_data, beir_folder,
                                                      capsys):
    assert mine(tmp_path, exclude_file, benchmark_data, beir_folder, "cobol:npm:x") == 2
    message = capsys.readouterr().err.strip()
    assert "unknown language 'cobol'" in message and "go, rust" in message and len(message.splitlines()) == 1
    assert mine(tmp_path, exclude_file, benchmark_data, beir_folder, "go:pypi:x") == 2
    assert "choose one of debian, debian-source, npm" in capsys.readouterr().err
    assert run.main(["--output", str(tmp_path / "out"), "--exclude", str(tmp_path / "missing.txt"), "go:npm:x"]) == 2
    assert "pass --exclude FILE" in capsys.readouterr().err
    (benchmark_data / "broken.jsonl").write_text("{not json\n", encoding="utf-8")
    assert mine(tmp_path, exclude_file, benchmark_data, beir_folder, "go:npm:x") == 2
    assert "broken.jsonl cannot be read as benchmark data" in capsys.readouterr().err
    assert registries.calls == [] and not (tmp_path / "out").exists()
    (tmp_path / "a-file").write_text("")
    assert run.main(["--output", str(tmp_path / "a-file"), "go:npm:x"]) == 2
    assert "is a file; give a folder" in capsys.readouterr().err


def test_no_network_is_one_line_naming_the_fix(tmp_path, registries, exclude_file, benchmark_data, beir_folder,
                                               capsys):
    registries.offline = True
    assert mine(tmp_path, exclude_file, benchmark_data, beir_folder, "javascript:npm:left-pad") == 1
    message = capsys.readouterr().err.strip().splitlines()
    assert message[-1].startswith("error: ") and "check the network" in message[-1]


def test_a_debian_mirror_that_gives_no_lists_stops_the_run_naming_the_fix(tmp_path, registries, exclude_file,
                                                                         benchmark_data, beir_folder, capsys):
    registries.mirror_unreachable = True
    assert mine(tmp_path, exclude_file, benchmark_data, beir_folder, "go:debian:golang-github-pkg-errors-dev") == 1
    message = capsys.readouterr().err.strip().splitlines()[-1]
    assert message.startswith("error: apt-get update fetched no package lists") and "--debian-mirror" in message


def test_unpacking_writes_nothing_outside_its_folder(tmp_path):
    archive_path = tmp_path / "evil.tar.gz"
    archive_path.write_bytes(tarball({"../escaped.go": GO_FILE, "/abs.go": GO_FILE, "pkg/ok.go": GO_FILE}))
    with tarfile.open(archive_path) as archive:
        fetch.extract_members(archive, tmp_path / "tree", (".go",))
    assert sorted(path.relative_to(tmp_path).as_posix() for path in tmp_path.rglob("*.go")) == ["tree/abs.go",
                                                                                              "tree/pkg/ok.go"]


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("C2LLM_NETWORK_TESTS"), reason="fetches from Debian and npm: set "
                    "C2LLM_NETWORK_TESTS=1 on a machine that reaches them (CI has no network guarantee)")
def test_real_registries(tmp_path):
    assert run.main(["--output", str(tmp_path / "out"), "go:debian:golang-github-pkg-errors-dev",
                     "javascript:npm:left-pad"]) == 0
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["languages"]["go"]["pairs"] > 0
