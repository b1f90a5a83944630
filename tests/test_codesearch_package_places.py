"""The place-level set of packages kept out of training (benchmarks/codesearch_package_places.py): the build on a
stand-in package (no network: a fake registry client), the answer spans, the doc comments removed from the tree
copy, the fixed dev/test split, the place-level rank, and the miner refusing every evaluation package."""

import hashlib
import json
from pathlib import Path

import pytest

from benchmarks.codesearch_package_places import (PlacesSet, Source, Tree, blank_docs, build, half_of, load_set,
                                                  parse_arguments, place_and_file_rank, read_build, summary)
from tests.test_package_pairs import SOURCES
from train.decontaminate import Exclusions
from train.mining_packages import run
from train.mining_packages.extract import LANGUAGES, documented_functions
from train.mining_packages.fetch import PackageInfo, PackageSpec

REPO_ROOT = Path(__file__).resolve().parents[1]
PARSE_DOC = "// Parse reads a configuration file and returns its settings.\n"
STAND_IN_GO = ("package standin\n\n" + PARSE_DOC +
               "func Parse(path string) (Settings, error) {\n\tdata, err := os.ReadFile(path)\n\tif err != nil {\n"
               "\t\treturn Settings{}, err\n\t}\n\treturn decode(data)\n}\n\n"
               "// Merge combines two settings objects into a single result.\n"
               "func Merge(a, b Settings) Settings {\n\tout := a\n\tout.Values = append(out.Values, b.Values...)\n"
               "\treturn out\n}\n")
# the same query above other code in another file: its comment must go too, or the query finds it by its words
STAND_IN_COPY = ("package legacy\n\n" + PARSE_DOC.replace("Parse", "ParseLegacy") +
                 "func ParseLegacy(path string) Settings {\n\tsettings, _ := Parse(path)\n\treturn settings\n}\n")
# a declaration's doc (a comment above no function body) that repeats a query's words: that query is dropped
STAND_IN_NOTES = ("package standin\n\n// Merge combines two settings objects into a single result.\n"
                  "var MergeHook func(a, b Settings) Settings\n")
ARCHIVE_BYTES = b"stand-in archive"
ARCHIVE = "golang-stand-in-dev_1.0-1_all.deb"


class FakeClient:
    """The miner's registry client for one stand-in Debian package: lists version 1.0-1 and 'downloads' an
    archive and a tree of Go files (with a built copy and a copyright file the miner does not read)."""

    def __init__(self, files: dict[str, str], listed_version: str = "1.0-1"):
        self.files = files
        self.listed_version = listed_version
        self.fetched = []

    def client(self, spec: PackageSpec):
        return self

    def lookup(self, spec: PackageSpec) -> PackageInfo:
        return PackageInfo(version=self.listed_version)

    def fetch(self, spec: PackageSpec, work: Path, suffixes: tuple[str, ...], info: PackageInfo) -> Path:
        self.fetched.append(spec.key)
        (work / "download").mkdir(parents=True)
        (work / "download" / ARCHIVE).write_bytes(ARCHIVE_BYTES)
        for relative, text in self.files.items():
            (work / "tree" / relative).parent.mkdir(parents=True, exist_ok=True)
            (work / "tree" / relative).write_text(text, encoding="utf-8")
        return work / "tree"


def stand_in_set(half: str = "by hash", sha256: str = hashlib.sha256(ARCHIVE_BYTES).hexdigest()) -> PlacesSet:
    source = Source(registry="debian", name="golang-stand-in-dev", version="1.0-1", archives={ARCHIVE: sha256})
    return PlacesSet(about="stand-in", split="stand-in", queries_per_package=10,
                     trees={"stand-in": Tree(language="go", half=half, sources=[source])})


def stand_in_files() -> dict[str, str]:
    return {"pkg/standin.go": STAND_IN_GO, "pkg/tools/legacy.go": STAND_IN_COPY,
            "pkg/dist/standin.go": STAND_IN_GO, "pkg/debian/copyright": "Files: *\nLicense: MIT\n"}


def test_build_gives_each_query_its_function_span_and_removes_its_doc_from_the_tree_copy(tmp_path):
    client = FakeClient(stand_in_files())
    queries = build(stand_in_set(), tmp_path / "trees", client, set_digest="0" * 64)
    assert [json.loads(line) for line in (tmp_path / "trees" / "queries.jsonl").read_text().splitlines()] == queries
    tree = tmp_path / "trees" / "stand-in"
    by_name = {query["name"]: query for query in queries}
    assert sorted(by_name) == ["Merge", "Parse"]  # ParseLegacy's doc gives Parse's query again
    assert by_name["Parse"] | {"half": None} == {
        "query": "Reads a configuration file and returns its settings.", "tree": "stand-in", "path": "pkg/standin.go",
        "line": 4, "end_line": 10, "name": "Parse", "language": "go", "half": None}
    assert (by_name["Merge"]["line"], by_name["Merge"]["end_line"]) == (13, 17)
    copied = (tree / "pkg/standin.go").read_text(encoding="utf-8").split("\n")
    original = STAND_IN_GO.split("\n")
    assert len(copied) == len(original)  # line numbers hold
    assert copied[2] == "" and copied[11] == ""  # both docs gone
    assert copied[3:10] == original[3:10] and copied[12:17] == original[12:17]  # the code is untouched
    everything = "".join(path.read_text(encoding="utf-8") for path in tree.rglob("*") if path.is_file())
    assert "configuration file" not in everything and "combines two settings" not in everything
    # the tree is what the miner reads: no built copy beside the source, no metadata
    assert sorted(path.relative_to(tree).as_posix() for path in tree.rglob("*") if path.is_file()) == [
        "pkg/standin.go", "pkg/tools/legacy.go"]
    assert json.loads((tmp_path / "trees" / "build.json").read_text(encoding="utf-8")) == {"set_sha256": "0" * 64}


def test_a_query_whose_words_stay_in_the_tree_is_dropped(tmp_path):
    client = FakeClient({**stand_in_files(), "pkg/hooks.go": STAND_IN_NOTES})
    queries = build(stand_in_set(), tmp_path / "trees", client, set_digest="0" * 64)
    assert [query["name"] for query in queries] == ["Parse"]


def test_read_build_gives_the_queries_of_this_set_only(tmp_path):
    this_set, other = tmp_path / "set.json", tmp_path / "other.json"
    this_set.write_text("this set", encoding="utf-8")
    other.write_text("another set", encoding="utf-8")
    queries = build(stand_in_set(), tmp_path / "trees", FakeClient(stand_in_files()),
                    set_digest=hashlib.sha256(b"this set").hexdigest())
    assert read_build(tmp_path / "trees", places_path=this_set) == queries
    with pytest.raises(SystemExit, match="built from another version.*--build"):
        read_build(tmp_path / "trees", places_path=other)
    with pytest.raises(SystemExit, match="no finished build.*--build"):
        read_build(tmp_path / "nothing", places_path=other)


def test_a_changed_archive_or_version_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(SystemExit, match="sha256 .* update the pin"):
        build(stand_in_set(sha256="1" * 64), tmp_path / "trees", FakeClient(stand_in_files()), set_digest="0" * 64)
    client = FakeClient(stand_in_files(), listed_version="1.0-2")
    with pytest.raises(SystemExit, match="lists golang-stand-in-dev 1.0-2, the set pins 1.0-1"):
        build(stand_in_set(), tmp_path / "trees", client, set_digest="0" * 64)
    assert client.fetched == []  # refused before the download
    assert not (tmp_path / "trees" / "stand-in").exists() and not (tmp_path / "trees" / "queries.jsonl").exists()


@pytest.mark.parametrize("language", sorted(set(SOURCES) - {"elixir"}))
def test_blanking_a_doc_keeps_every_line_and_the_function(language):
    file_name, source, name, _, first_line = SOURCES[language]
    suffix = "." + file_name.rsplit(".", 1)[1]
    [function] = documented_functions(LANGUAGES[language], suffix, source)
    blanked = blank_docs(source, [function.doc_bytes]).split("\n")
    lines = source.split("\n")
    assert len(blanked) == len(lines)
    assert blanked[function.line - 1:function.end_line] == lines[function.line - 1:function.end_line]
    assert lines[function.line - 1].lstrip().startswith(first_line)  # the span starts at the signature
    assert lines[function.end_line - 1].strip() in ("}", "};", "end")  # ... and ends at the function's end
    doc_words = " ".join(function.doc.split()[1:4])  # three words of the doc, past a name it may open with
    assert doc_words in source and doc_words not in "\n".join(blanked)


def test_the_split_is_fixed_by_package_or_by_a_stable_hash():
    by_hash = Tree(language="go", half="by hash", sources=stand_in_set().trees["stand-in"].sources)
    # pinned: sha1("pkg/standin.go\0Parse") starts with an even byte, sha1("pkg/standin.go\0Merge") with an odd one
    assert [half_of(by_hash, "pkg/standin.go", name) for name in ("Parse", "Merge", "Parse")] == _halves_by_sha1()
    assert {half_of(by_hash.model_copy(update={"half": "test"}), "pkg/standin.go", name)
            for name in ("Parse", "Merge")} == {"test"}


def _halves_by_sha1() -> list[str]:
    digests = [hashlib.sha1(f"pkg/standin.go\0{name}".encode()).digest()[0] for name in ("Parse", "Merge", "Parse")]
    return ["dev" if byte % 2 == 0 else "test" for byte in digests]


def test_the_committed_set_is_valid_and_each_language_splits_both_ways():
    committed = load_set()
    assert {tree.language for tree in committed.trees.values()} == set(LANGUAGES) - {"elixir"}
    with pytest.raises(ValueError, match="one with more gives each package `dev` or `test`"):
        PlacesSet.model_validate({**committed.model_dump(), "trees": {
            "a": {**committed.trees["jsoup"].model_dump()}, "b": {**committed.trees["jsoup"].model_dump()}}})


def test_every_evaluation_package_is_refused_by_the_miner(tmp_path):
    exclude_file = tmp_path / "exclude.txt"
    exclude_file.write_text("# nothing listed\n", encoding="utf-8")
    exclusions = Exclusions.load(exclude_file, REPO_ROOT / "benchmarks" / "data")
    for tree in load_set().trees.values():
        for source in tree.sources:
            assert exclusions.refusal(source.name, []) is not None, source.name


def test_the_miner_refuses_an_evaluation_package_before_downloading_it(tmp_path):
    exclude_file = tmp_path / "exclude.txt"
    exclude_file.write_text("# nothing listed\n", encoding="utf-8")
    exclusions = Exclusions.load(exclude_file, REPO_ROOT / "benchmarks" / "data")
    client = FakeClient(stand_in_files(), listed_version="1.15.3-1")
    spec = PackageSpec("java", "debian-source", "jsoup")

    class Registries:
        def client(self, spec):
            return client

    record = run.mine_package(spec, tmp_path / "out", Registries(), exclusions)
    assert "benchmark" in record["refused"] and record["functions"] == [] and client.fetched == []


def test_the_place_rank_counts_a_file_only_when_its_first_place_is_the_answer():
    expected = {"path": "a.go", "line": 10, "end_line": 20}
    other_first = [[(0, ["b.go"], (1, 5))], [(1, ["a.go"], (30, 40)), (2, ["a.go"], (12, 18))]]
    assert place_and_file_rank(other_first, expected) == (None, 2)
    answer_first = [[(0, ["b.go"], (1, 5))], [(2, ["copy.go", "a.go"], (12, 18)), (1, ["a.go"], (30, 40))]]
    assert place_and_file_rank(answer_first, expected) == (2, 2)
    assert place_and_file_rank([[(0, ["b.go"], (10, 20))]], expected) == (None, None)
    figures = summary([(2, 2), (None, 1), (1, 1), (None, None)])
    assert figures["place_mrr@10"] == pytest.approx((1 / 2 + 1) / 4)
    assert (figures["place_hit@1"], figures["place_hit@10"], figures["file_hit@10"]) == (0.25, 0.5, 0.75)


def test_a_run_says_what_it_chose_and_reports_when_it_chose_nothing():
    assert parse_arguments([]).used_to_choose is None
    assert parse_arguments(["--used-to-choose", "the data mix"]).used_to_choose == "the data mix"
