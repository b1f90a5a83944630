"""Load and check a retrieval benchmark in BEIR layout, optionally cut down to a subset.

A BEIR folder holds three files:

- `queries.jsonl`: one `{"_id": ..., "text": ...}` per line;
- `corpus.jsonl`: one `{"_id": ..., "text": ...}` per line (an optional `"title"` is put before the text);
- `qrels.tsv`: tab-separated `query-id  corpus-id  score` rows after a header line; score > 0 = relevant.

Every problem is reported as a `BeirFormatError` naming the file (and line) and how to fix it.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

logger = logging.getLogger(__name__)

QUERIES_FILE = "queries.jsonl"
CORPUS_FILE = "corpus.jsonl"
QRELS_FILE = "qrels.tsv"
BEIR_FILES = (QUERIES_FILE, CORPUS_FILE, QRELS_FILE)
QRELS_COLUMNS = 3
# How many offending ids an error message shows.
EXAMPLES_IN_ERRORS = 5


class BeirFormatError(ValueError):
    """A benchmark folder or file that does not follow the BEIR layout (the message says what to fix)."""


@dataclass(frozen=True)
class BeirDataset:
    """One retrieval benchmark: ids -> texts, and query id -> {relevant corpus id: score}."""

    name: str
    queries: dict[str, str]
    corpus: dict[str, str]
    qrels: dict[str, dict[str, int]]

    def relevant_docs(self) -> dict[str, set[str]]:
        """Query id -> ids of its relevant documents (score > 0), the form the evaluators take."""
        relevant = {qid: {cid for cid, score in docs.items() if score > 0} for qid, docs in self.qrels.items()}
        return {qid: cids for qid, cids in relevant.items() if cids}


def is_beir_folder(folder: Path) -> bool:
    """Whether `folder` holds all three BEIR files."""
    return all((folder / name).is_file() for name in BEIR_FILES)


def expand_benchmark_folders(folders: list[Path]) -> list[Path]:
    """BEIR folders to evaluate: each folder itself, or, for a folder of BEIR folders, its BEIR subfolders.

    A folder that is neither is kept, so that `load_beir` reports which files it lacks.
    """
    expanded = []
    for folder in folders:
        children = sorted(child for child in folder.iterdir() if child.is_dir()) if folder.is_dir() else []
        beir_children = [child for child in children if is_beir_folder(child)]
        if not is_beir_folder(folder) and beir_children and not any((folder / name).exists() for name in BEIR_FILES):
            expanded.extend(beir_children)
        else:
            expanded.append(folder)
    return expanded


def _read_jsonl_texts(path: Path) -> dict[str, str]:
    """id -> text of a queries/corpus file; errors name the file, line and fix."""
    texts: dict[str, str] = {}
    for line_number, line in enumerate(_utf8_lines(path), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise BeirFormatError(f"{path}:{line_number}: not valid JSON ({error.msg}).") from error
        if not isinstance(record, dict) or "_id" not in record or "text" not in record:
            raise BeirFormatError(f'{path}:{line_number}: each line must be a JSON object with "_id" and "text" keys.')
        for key in ("text", "title"):  # a null or a number would otherwise be scored as the string "None" / "123"
            if key in record and not isinstance(record[key], str) and not (key == "title" and record[key] is None):
                raise BeirFormatError(f"{path}:{line_number}: {key!r} must be a string, got "
                                      f"{type(record[key]).__name__} ({record[key]!r}).")
        record_id = str(record["_id"])
        if record_id in texts:
            raise BeirFormatError(f"{path}:{line_number}: duplicate _id {record_id!r}; ids must be unique.")
        texts[record_id] = document_text(record.get("title"), record["text"])
    return texts


def document_text(title: str | None, text: str) -> str:
    """A document as every reader in the project embeds it: the title, if any, then a space, then the text."""
    return f"{title} {text}".strip() if title else text


def _utf8_lines(path: Path):
    """The lines of a UTF-8 text file; a file in another encoding is a BeirFormatError naming the file and line."""
    with path.open("rb") as handle:
        for line_number, raw in enumerate(handle, start=1):
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise BeirFormatError(f"{path}:{line_number}: not UTF-8 ({error.reason} at byte {error.start}); "
                                      "re-encode the file as UTF-8.") from None


def _read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """query id -> {corpus id: score} from a qrels TSV (a header line is optional)."""
    qrels: dict[str, dict[str, int]] = {}
    for line_number, line in enumerate(_utf8_lines(path), start=1):
        if not line.strip():
            continue
        columns = line.rstrip("\r\n").split("\t")
        if len(columns) != QRELS_COLUMNS:
            raise BeirFormatError(
                f"{path}:{line_number}: expected {QRELS_COLUMNS} tab-separated columns "
                f"(query-id, corpus-id, score), found {len(columns)}."
            )
        query_id, corpus_id, score = columns
        try:
            grade = float(score)
        except ValueError as error:
            if line_number == 1:  # the usual "query-id corpus-id score" header
                continue
            raise BeirFormatError(f"{path}:{line_number}: score {score!r} is not a number.") from error
        if not math.isfinite(grade):
            raise BeirFormatError(f"{path}:{line_number}: score {score!r} is not a finite number: write a relevance "
                                  "grade (0 for not relevant, 1 or more for relevant).")
        relevance = int(grade)
        qrels.setdefault(query_id, {})[corpus_id] = relevance
    return qrels


def _examples(ids: list[str]) -> str:
    shown = ", ".join(repr(i) for i in ids[:EXAMPLES_IN_ERRORS])
    return shown + (", ..." if len(ids) > EXAMPLES_IN_ERRORS else "")


def _check_qrels_ids(folder: Path, dataset: BeirDataset) -> None:
    """Fail if qrels point at queries or documents that do not exist."""
    unknown_queries = sorted(qid for qid in dataset.qrels if qid not in dataset.queries)
    unknown_docs = sorted({cid for docs in dataset.qrels.values() for cid in docs if cid not in dataset.corpus})
    problems = []
    if unknown_queries:
        problems.append(f"{len(unknown_queries)} query ids not in {QUERIES_FILE} ({_examples(unknown_queries)})")
    if unknown_docs:
        problems.append(f"{len(unknown_docs)} corpus ids not in {CORPUS_FILE} ({_examples(unknown_docs)})")
    if problems:
        raise BeirFormatError(
            f"{folder / QRELS_FILE} refers to {' and '.join(problems)}. Each qrels row must name an existing "
            f"query and document: fix the ids, or remove the rows."
        )


def judged_pairs(dataset: BeirDataset) -> list[dict[str, str]]:
    """One {"query", "positive"} pair per relevant (score > 0) judgement, in qrels order (training data)."""
    return [{"query": dataset.queries[qid], "positive": dataset.corpus[cid]}
            for qid, docs in dataset.qrels.items() for cid, score in docs.items() if score > 0]


def _subset(dataset: BeirDataset, max_queries: int | None, max_corpus: int | None) -> BeirDataset:
    """Keep the first `max_queries` judged queries, and a corpus of at most `max_corpus` documents.

    The corpus keeps every document relevant to a kept query, then fills up with the other documents
    in file order, so each kept query can still find its answers among distractors.
    """
    relevant = dataset.relevant_docs()
    query_ids = [qid for qid in dataset.queries if qid in relevant]
    if max_queries is not None:
        query_ids = query_ids[:max_queries]
    queries = {qid: dataset.queries[qid] for qid in query_ids}
    qrels = {qid: dataset.qrels[qid] for qid in query_ids}
    if max_corpus is None:
        return BeirDataset(dataset.name, queries, dataset.corpus, qrels)
    needed = {cid for qid in query_ids for cid in relevant[qid]}
    if len(needed) > max_corpus:
        logger.warning(
            "%s: the %d kept queries have %d relevant documents, more than --max-corpus %d; keeping them all.",
            dataset.name, len(query_ids), len(needed), max_corpus,
        )
    distractors = (cid for cid in dataset.corpus if cid not in needed)
    kept = needed | set(islice(distractors, max(0, max_corpus - len(needed))))
    corpus = {cid: text for cid, text in dataset.corpus.items() if cid in kept}
    qrels = {qid: {cid: s for cid, s in docs.items() if cid in corpus} for qid, docs in qrels.items()}
    return BeirDataset(dataset.name, queries, corpus, qrels)


def load_beir(folder: Path | str, max_queries: int | None = None, max_corpus: int | None = None) -> BeirDataset:
    """Read and check the BEIR folder `folder`, optionally cut down (see `_subset`).

    Raises:
        BeirFormatError: a missing file, a malformed line, qrels pointing at unknown ids, an empty
            corpus, or no query with a relevant document.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise BeirFormatError(f"{folder} is not a folder. Pass BEIR folders (with {', '.join(BEIR_FILES)}).")
    missing = [name for name in BEIR_FILES if not (folder / name).is_file()]
    if missing:
        raise BeirFormatError(
            f"{folder} is not a BEIR folder: missing {', '.join(missing)}. A BEIR folder holds "
            f"{', '.join(BEIR_FILES)} (see evaluation/README.md)."
        )
    dataset = BeirDataset(
        name=folder.resolve().name,
        queries=_read_jsonl_texts(folder / QUERIES_FILE),
        corpus=_read_jsonl_texts(folder / CORPUS_FILE),
        qrels=_read_qrels(folder / QRELS_FILE),
    )
    if not dataset.corpus:
        raise BeirFormatError(
            f"{folder / CORPUS_FILE} has no documents: a retrieval benchmark needs a corpus to search. "
            f"Add one JSON line per document, or drop this folder from --data."
        )
    _check_qrels_ids(folder, dataset)
    if not dataset.relevant_docs():
        raise BeirFormatError(
            f"{folder / QRELS_FILE} marks no document relevant (score > 0) to any query, so nothing can be "
            "measured. Add qrels rows with a positive score."
        )
    return _subset(dataset, max_queries, max_corpus)

