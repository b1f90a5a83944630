"""Leaderboard submission, offline, checked with mteb's own code: the ModelMeta entry for mteb's
codefuse_models.py, the results folder the runner writes, mteb's mock-run report and `--submit`'s refusals.

The release folder is the tiny random C2LLM of `tests/conftest.py` with the repository README as its
model card (as `train.release` ships it), the paper recipe's Hub datasets in the card's front matter (as the
trainer's export writes them, `train.card.card_datasets`) and bfloat16 weights declared (as the released C2LLM).
"""

import functools
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from evaluation import model_meta, mteb_code
from c2llm_data.packaged_minilm import packaged_minilm_folder
from evaluation.model_meta import (
    ReleaseDetails,
    c2llm_loader_kwargs,
    model_meta_from_folder,
    mteb_languages,
    mteb_training_datasets,
    task_programming_languages,
    training_source_tasks,
)
from evaluation.mteb_entry import bibtex_key, bibtex_title, entry_variable_name
from evaluation.submission import SubmissionError, check_training_datasets_known
from c2llm_data.tasks import MTEB_CODE_TASKS
from train.recipe import load_recipe
from train.card import card_datasets

REPO_ROOT = Path(__file__).resolve().parents[1]
RECIPES = REPO_ROOT / "train" / "configs"
PAPER_RECIPE = RECIPES / "c2llm-0.5b.yaml"
NAME = "test-org/C2LLM-tiny-repro"
REVISION = "0123456789abcdef0123456789abcdef01234567"
RELEASE_DATE = "2026-01-01"
TRAINING_CODE = "https://github.com/test-org/c2llm"
PUBLISHED_C2LLM = "codefuse-ai/C2LLM-0.5B"
META_OPTIONS = ["--release-date", RELEASE_DATE, "--training-code", TRAINING_CODE]


def release_folder_with_card_datasets(tiny_model_dir: Path, folder: Path, datasets: list[str] | None) -> Path:
    from huggingface_hub import ModelCard

    shutil.copytree(tiny_model_dir, folder)
    card = ModelCard.load(REPO_ROOT / "README.md")
    card.data.datasets = datasets
    card.save(folder / "README.md")
    config = json.loads((folder / "config.json").read_text())
    config["dtype"] = "bfloat16"
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    return folder


@pytest.fixture(scope="module", autouse=True)
def each_folder_loaded_once():
    """ModelMeta reads a folder through its model loaded on the meta device, its Qwen2.5 tokenizer included (about a
    CPU-second); the tests here read the same two folders again and again, so each one's model is loaded once and
    reused (model_meta_from_folder only reads it)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(model_meta, "load_without_weights", functools.cache(model_meta.load_without_weights))
        yield


@pytest.fixture(scope="module")
def release_folder(tiny_model_dir, tmp_path_factory):
    folder = tmp_path_factory.mktemp("release") / "C2LLM-tiny"
    return release_folder_with_card_datasets(tiny_model_dir, folder, card_datasets(load_recipe(PAPER_RECIPE)))


@pytest.fixture(scope="module")
def undocumented_release_folder(tiny_model_dir, tmp_path_factory):
    """A release folder whose card does not say what the weights were trained on."""
    folder = tmp_path_factory.mktemp("release") / "C2LLM-tiny-undocumented"
    return release_folder_with_card_datasets(tiny_model_dir, folder, None)


def mteb_task_names() -> set[str]:
    return set(model_meta.mteb_task_index()[0])


@pytest.mark.parametrize(
    "card_dataset, task",
    [
        ("code-search-net/code_search_net", "CodeSearchNetRetrieval"),  # not COIRCodeSearchNetRetrieval
        ("gretelai/synthetic_text_to_sql", "SyntheticText2SQL"),
        ("CoIR-Retrieval/CodeSearchNet", "COIRCodeSearchNetRetrieval"),
        ("CoIR-Retrieval/stackoverflow-qa", "StackOverflowQA"),
        ("SyntheticText2SQL", "SyntheticText2SQL"),
    ],
)
@pytest.mark.slow  # builds an mteb task per case (about 1.5 s each)
def test_card_dataset_maps_to_the_task_built_from_it(card_dataset, task):
    assert mteb_training_datasets([card_dataset]) == {task}


@pytest.mark.slow  # loads every MTEB-Code task's metadata through mteb (about a minute)
def test_benchmark_data_and_training_sources_map_to_their_own_task():
    import mteb

    for task in mteb.get_benchmark(mteb_code.BENCHMARK_NAME).tasks:
        assert mteb_training_datasets([task.metadata.dataset["path"]]) == {task.metadata.name}
    known = mteb_task_names()
    for hub_id, task in training_source_tasks().items():
        assert task in known
        assert mteb_training_datasets([hub_id]) == {task}, hub_id


@pytest.mark.slow  # builds the twelve mteb tasks
@pytest.mark.parametrize("recipe", ["c2llm-0.5b.yaml", "c2llm-7b.yaml"])
def test_the_papers_recipes_card_datasets_are_the_twelve_mteb_code_tasks(recipe):
    assert mteb_training_datasets(card_datasets(load_recipe(RECIPES / recipe))) == set(MTEB_CODE_TASKS)


def test_mined_docstrings_and_local_files_are_no_mteb_training_data():
    # cpu-smoke trains on docstrings of installed modules and a local file with CodeTransOceanDL's instruction
    assert mteb_training_datasets(card_datasets(load_recipe(RECIPES / "cpu-smoke.yaml"))) is None


def test_card_language_code_stands_for_the_training_tasks_programming_languages():
    assert mteb_languages(["en", "code"], task_programming_languages(["CosQA", "SyntheticText2SQL"])) == [
        "eng-Latn", "python-Code", "sql-Code"
    ]
    assert mteb_languages(["en", "code"], task_programming_languages([])) == ["eng-Latn"]  # training data unknown


def test_c2llm_loader_is_mtebs_c2llm_loader():
    from mteb.models.model_implementations import codefuse_models

    assert c2llm_loader_kwargs() == codefuse_models.c2llm_loader_kwargs


def test_model_card_cites_the_paper_under_mtebs_key(release_folder):
    import mteb

    ours = model_meta_from_folder(release_folder, name=NAME, revision=REVISION).citation
    published = mteb.get_model_meta(PUBLISHED_C2LLM).citation
    assert bibtex_title(ours) == bibtex_title(published)
    assert bibtex_key(ours) == bibtex_key(published)


def test_printed_entry_passes_mtebs_registry_rules(release_folder, capsys):
    import mteb
    from mteb.models import ModelMeta
    from mteb.models.instruct_wrapper import InstructSentenceTransformerModel
    from mteb.models.model_implementations import codefuse_models

    assert model_meta.main([str(release_folder), "--name", NAME, "--revision", REVISION, *META_OPTIONS]) == 0
    source = capsys.readouterr().out
    namespace = dict(vars(codefuse_models))  # the file the entry is added to, with its imports and constants
    exec(source, namespace)
    entry = namespace[entry_variable_name(NAME)]
    assert isinstance(entry, ModelMeta)
    registry = mteb.get_model_metas()
    # mteb's registry is a dict by name: a second entry with a taken name would silently replace the first.
    assert entry.name not in {meta.name for meta in registry}
    # One paper, one BibTeX key across the registry: the entry cites C2LLM with the existing constant.
    assert "    citation=C2LLM_CITATION," in source
    same_paper = [meta for meta in [*registry, entry] if bibtex_title(meta.citation) == bibtex_title(entry.citation)]
    assert {meta.name for meta in same_paper} >= {PUBLISHED_C2LLM, NAME}
    assert len({bibtex_key(meta.citation) for meta in same_paper}) == 1
    # Loaded as mteb's C2LLM entries load the published weights.
    assert entry.loader is InstructSentenceTransformerModel
    assert "    loader_kwargs=c2llm_loader_kwargs," in source
    # Not zero-shot on the tasks it trained on, all of them task names mteb knows.
    assert entry.training_datasets == set(MTEB_CODE_TASKS) <= mteb_task_names()
    assert entry.is_zero_shot_on(list(MTEB_CODE_TASKS)) is False
    # The fields where mteb's built-in entry sets the convention.
    published = mteb.get_model_meta(PUBLISHED_C2LLM)
    config = json.loads((release_folder / "config.json").read_text())
    assert entry.max_tokens == config["max_position_embeddings"]
    assert entry.output_dtypes == published.output_dtypes
    programming = {language for language in published.languages if language.endswith("-Code")}
    assert "eng-Latn" in entry.languages and programming <= set(entry.languages)
    assert (entry.release_date, entry.public_training_code) == (RELEASE_DATE, TRAINING_CODE)


@pytest.mark.slow
def test_results_folder_passes_mtebs_own_checks(release_folder, tmp_path, monkeypatch):
    import mteb
    from mteb.models import ModelMeta
    from mteb.models.instruct_wrapper import InstructSentenceTransformerModel
    from mteb.models.model_implementations import MODEL_REGISTRY
    from mteb.results import TaskResult

    cache_dir = tmp_path / "cache"
    argv = ["--model", str(release_folder), "--mock", "--cache-dir", str(cache_dir), "--model-name", NAME,
            "--revision", REVISION, "--no-progress", *META_OPTIONS]
    assert mteb_code.main(argv) == 0
    assert not (cache_dir / "results").exists()  # a mock run never lands beside real results
    offline_cache = cache_dir / mteb_code.OFFLINE_CACHE_FOLDER
    folder = offline_cache / "results" / NAME.replace("/", "__") / REVISION

    saved = ModelMeta.model_validate_json_resolved((folder / "model_meta.json").read_text())
    assert saved.loader is InstructSentenceTransformerModel
    release = ReleaseDetails(release_date=RELEASE_DATE, public_training_code=TRAINING_CODE)
    printed = model_meta_from_folder(release_folder, name=NAME, revision=REVISION, release=release)
    assert saved.to_dict() | {"training_datasets": None} == printed.to_dict() | {"training_datasets": None}
    assert saved.training_datasets == printed.training_datasets

    task = mteb_code.mock_retrieval_task()
    TaskResult.from_disk(folder / "MockRetrievalTask.json").validate_and_filter_scores(task=task)
    monkeypatch.setitem(MODEL_REGISTRY, NAME, saved)  # as after the mteb PR
    results = mteb.ResultCache(offline_cache).load_results(
        models=[NAME], tasks=[task], include_remote=False, validate_and_filter=True
    )
    assert [(result.model_name, result.model_revision) for result in results.model_results] == [(NAME, REVISION)]
    assert [result.task_name for result in results.model_results[0].task_results] == ["MockRetrievalTask"]


@pytest.mark.slow
def test_mock_run_report_of_the_release_folder(release_folder, tmp_path):
    report = tmp_path / "mteb_mock_run_results.md"
    assert mteb_code.main(["--model", str(release_folder), "--mock-run", str(report), "--no-progress"]) == 0
    text = report.read_text()
    assert text.startswith("# MTEB Mock-Run Results") and "| MockRetrievalTask | text | ✓ | - |" in text
    assert "✗" not in text


@pytest.mark.parametrize(
    "arguments, reason",
    [
        ([], "--model-name ORG/NAME"),
        (["--model-name", "local/tiny", "--revision", REVISION], "--model-name ORG/NAME"),
        (["--model-name", NAME], "40-hex-digit Hub commit"),
        (["--model-name", NAME, "--revision", "local-6c788381c39c"], "40-hex-digit Hub commit"),
        (["--model-name", NAME, "--revision", REVISION, "--mock"], "cannot be combined with offline checks"),
    ],
)
def test_submit_refuses_what_the_results_repository_rejects(arguments, reason, capsys):
    with pytest.raises(SystemExit) as exit_info:
        mteb_code.main(["--model", "minilm", "--submit", *arguments])
    assert exit_info.value.code == 2
    assert reason in capsys.readouterr().err


@pytest.mark.parametrize("revision", ["published", "another"])
def test_submit_refuses_a_name_mteb_already_has_at_any_revision(capsys, revision):
    """A new revision under a taken name used to pass; the results repository's CI then failed
    test_no_duplicate_task_results_exist on all 12 tasks."""
    import mteb

    published = mteb.get_model_meta(PUBLISHED_C2LLM)
    commit = published.revision if revision == "published" else "0123456789abcdef0123456789abcdef01234567"
    with pytest.raises(SystemExit) as exit_info:
        mteb_code.main(["--model", "minilm", "--submit", "--model-name", published.name, "--revision", commit])
    assert exit_info.value.code == 2
    assert f"mteb already has {published.name}" in (err := capsys.readouterr().err) and "new name" in err


def test_submit_refuses_results_an_earlier_submission_left_on_a_branch(tmp_path, capsys):
    """mteb compares with the results repository's main branch only: submitting twice made a second branch."""
    clone = tmp_path / "cache" / "remote"  # where mteb's ResultCache keeps its clone of the results repository
    git = lambda *args: subprocess.run(["git", "-C", str(clone), *args], check=True, capture_output=True)
    clone.mkdir(parents=True)
    git("init", "-q", "-b", "main")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "main")
    git("checkout", "-q", "-b", "mteb-results-1764000000")
    result = clone / "results" / NAME.replace("/", "__") / REVISION / "CosQA.json"
    result.parent.mkdir(parents=True)
    result.write_text("{}")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "results")
    git("checkout", "-q", "main")
    argv = ["--model", "minilm", "--submit", "--model-name", NAME, "--revision", REVISION,
            "--cache-dir", str(tmp_path / "cache")]
    with pytest.raises(SystemExit) as exit_info:
        mteb_code.main(argv)
    assert exit_info.value.code == 2
    assert "left results/test-org__C2LLM-tiny-repro/" in (err := capsys.readouterr().err)
    assert "mteb-results-1764000000" in err and "branch -D" in err


def test_submit_refuses_tasks_outside_the_code_benchmark_before_running(capsys):
    with pytest.raises(SystemExit) as exit_info:
        mteb_code.main(["--model", "minilm", "--submit", "--tasks", "SciFact", "--model-name", NAME,
                        "--revision", REVISION])
    assert exit_info.value.code == 2 and "--tasks names tasks outside it (SciFact)" in capsys.readouterr().err


@pytest.mark.parametrize(
    "arguments, reason",
    [
        ([], "needs --name ORG/NAME"),  # the local/FOLDER stand-in
        (["--name", NAME], "needs --revision HUB_COMMIT"),  # the local-... stand-in
        (["--name", NAME, "--revision", "main"], "needs --revision HUB_COMMIT"),
        (["--name", NAME, "--revision", REVISION, "--release-date", "24-11-2026"], "release_date"),
    ],
)
def test_model_meta_refuses_what_mteb_would_reject_unless_draft(release_folder, capsys, arguments, reason):
    options = ["--training-code", TRAINING_CODE]
    if "--release-date" not in arguments:
        options += ["--release-date", RELEASE_DATE]
    with pytest.raises(SystemExit) as exit_info:
        model_meta.main([str(release_folder), *arguments, *options])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert reason in err and "Traceback" not in err and "pydantic" not in err.lower()
    if "--release-date" not in arguments:
        assert model_meta.main([str(release_folder), *arguments, *options, "--draft"]) == 0


def test_model_meta_refuses_unknown_training_data_unless_draft(undocumented_release_folder, capsys):
    arguments = [str(undocumented_release_folder), "--name", NAME, "--revision", REVISION]  # no card datasets
    with pytest.raises(SystemExit) as exit_info:
        model_meta.main(arguments)
    assert exit_info.value.code == 2 and "zero-shot" in capsys.readouterr().err
    assert model_meta.main([*arguments, "--draft"]) == 0


def test_training_datasets_option_names_what_the_card_does_not(undocumented_release_folder, capsys):
    arguments = [str(undocumented_release_folder), "--name", NAME, "--revision", REVISION, "--json"]
    assert model_meta.main([*arguments, "--training-datasets", "gretelai/synthetic_text_to_sql", "CosQA"]) == 0
    meta = json.loads(capsys.readouterr().out)
    assert set(meta["training_datasets"]) == {"SyntheticText2SQL", "CosQA"}


def test_submit_refuses_unknown_training_data():
    meta = model_meta_from_folder(packaged_minilm_folder(), name=NAME, revision=REVISION)
    with pytest.raises(SubmissionError, match="--training-datasets"):
        check_training_datasets_known(meta.model_copy(update={"training_datasets": None}))


def test_real_tasks_and_offline_checks_are_run_separately(capsys):
    with pytest.raises(SystemExit):
        mteb_code.main(["--model", "minilm", "--tasks", "CosQA", "--mock"])
    assert "run them separately" in capsys.readouterr().err
