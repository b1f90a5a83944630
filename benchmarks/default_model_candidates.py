"""The offline default model's candidates on the dev halves: the tables of docs/default-model.md that choose whether a
retrained model goes on to the test halves, and how far fine-tuning has moved code search so far.

The records are runs of `benchmarks/codesearch_semble.py --half dev` (semble's dev repositories: place and file
level) and of `benchmarks/codesearch_package_places.py` (the package place-level set; its dev half is read) with
`--model` the stock all-MiniLM-L6-v2 of the PyPI package, `default` and a candidate folder; their commands are in the
records and in docs/default-model.md. This module only renders them (`python -m benchmarks.render`).
"""

from __future__ import annotations

from pathlib import Path

import yaml

from benchmarks.tables import markdown_table, number

REPO_ROOT = Path(__file__).resolve().parents[1]
# (model label, the recipe that trained it: None for the stock model, which this project did not fine-tune)
MODELS = (("all-MiniLM-L6-v2 (stock)", None),
          ("default_model", "train/configs/default-minilm.yaml"),
          ("package-pairs candidate", "train/configs/default-minilm-packages.yaml"))
SEMBLE_RECORDS = ("default_candidates_semble_stock", "default_candidates_semble_default",
                  "default_candidates_semble_packages")
PACKAGE_RECORDS = ("default_candidates_packages_stock", "default_candidates_packages_default",
                   "default_candidates_packages_packages")


def pairs_seen(recipe: str | None) -> int:
    """Training pairs the recipe's run saw: its steps x its batch (0 for the stock model)."""
    if recipe is None:
        return 0
    training = yaml.safe_load((REPO_ROOT / recipe).read_text(encoding="utf-8"))["training"]
    return training["max_steps"] * training["per_device_train_batch_size"]


def semble_dev(record: dict, ranking: str) -> dict:
    return record["metrics"]["by_half"]["dev"][f"codesearch {ranking}"]


def packages_dev(record: dict, ranking: str) -> dict:
    return record["metrics"]["languages"]["all"]["dev"][ranking]


def table_default_candidates(*records: dict) -> str:
    """Per model, pairs seen -> its dense and hybrid figures on both dev halves: semble's NDCG@10 (place, then
    file level) and the package set's MRR@10 (first place, then file)."""
    semble, packages = records[:len(MODELS)], records[len(MODELS):]
    rows = []
    for (label, recipe), semble_record, package_record in zip(MODELS, semble, packages):
        cells = []
        for ranking in ("dense", "hybrid"):
            figures = semble_dev(semble_record, ranking)
            cells += [number(figures["place"]["overall"]), number(figures["overall"])]
        for ranking in ("dense", "hybrid"):
            figures = packages_dev(package_record, ranking)
            cells += [number(figures["place_mrr@10"]), number(figures["file_mrr@10"])]
        rows.append([label, f"{pairs_seen(recipe):,}", *cells])
    return markdown_table(["model", "pairs seen", "semble dev: dense place", "dense file", "hybrid place",
                           "hybrid file", "packages dev: dense place", "dense file", "hybrid place", "hybrid file"],
                          rows, "lr" + "r" * 8)


def table_default_candidates_languages(*records: dict) -> str:
    """semble's dev half per language at file level: each model's dense NDCG@10 beside BM25's (the same index
    words for every model), the goal being dense >= BM25 in every language."""
    bm25 = semble_dev(records[0], "bm25")["languages"]
    dense = [semble_dev(record, "dense")["languages"] for record in records]
    rows = [[language, number(bm25[language]), *(number(model[language]) for model in dense)]
            for language in sorted(bm25)]
    return markdown_table(["language", "BM25", *(f"dense: {label}" for label, _ in MODELS)], rows,
                          "l" + "r" * (1 + len(MODELS)))


TABLES = {
    "default_candidates": ((*SEMBLE_RECORDS, *PACKAGE_RECORDS), table_default_candidates),
    "default_candidates_languages": (SEMBLE_RECORDS, table_default_candidates_languages),
}
