"""The exported model card is built from the run: its own base model (none for a random start), datasets, recipe
and measured results, in front matter that huggingface_hub parses and evaluation.model_meta reads."""

import json
from pathlib import Path

import pytest
from huggingface_hub import ModelCard

from tests.conftest import copy_sharing_tokenizer
from train.recipe import load_recipe

CONFIG_DIR = Path(__file__).resolve().parents[1] / "train" / "configs"
GROUP = "python_docstrings__python"
SUMMARY = {"groups": {GROUP: {"train_rows": 120, "eval_queries": 12, "mining_dropped": 1}}}
METRICS = {
    "before": {f"{GROUP}_cosine_ndcg@10": 0.05, f"{GROUP}_cosine_mrr@10": 0.04, "sequential_score": 0.05},
    "final": {f"{GROUP}_cosine_ndcg@10": 0.25, f"{GROUP}_cosine_mrr@10": 0.2, "sequential_score": 0.25},
}


def export_with_card(model, folder, tokenizer_dir, recipe):
    from train.card import model_card
    from train.export import export_release

    card = model_card(recipe, SUMMARY, METRICS, ["checkpoint-20", "checkpoint-40"])
    return export_release(model, folder, tokenizer_dir, 128, card)


def test_a_smoke_export_names_no_base_model_and_its_own_results(tiny_sentence_transformer, tiny_model_dir, tmp_path):
    final = export_with_card(
        tiny_sentence_transformer, tmp_path / "final", tiny_model_dir, load_recipe(CONFIG_DIR / "cpu-smoke.yaml")
    )
    card = ModelCard.load(final / "README.md")
    front_matter = card.content.split("---")[1]
    assert card.data.base_model is None and "Qwen2.5-Coder-0.5B-Instruct" not in front_matter
    assert (card.data.library_name, card.data.license, card.data.model_name) == (
        "sentence-transformers", "apache-2.0", "C2LLM tiny CPU smoke test"
    )
    assert card.data.datasets is None  # docstrings of installed modules and a local file: no Hub dataset
    results = {(result.dataset_type, result.metric_type): result.metric_value for result in card.data.eval_results}
    assert results == {(GROUP, "cosine_ndcg@10"): 0.25, (GROUP, "cosine_mrr@10"): 0.2}
    assert "## Training details" in card.text and "checkpoint-20, checkpoint-40" in card.text
    assert "random initialisation (smoke test)" in card.text and "```bibtex" in card.text


@pytest.mark.parametrize(
    "recipe_file, base",
    [("c2llm-0.5b.yaml", "Qwen2.5-Coder-0.5B-Instruct"), ("c2llm-7b.yaml", "Qwen2.5-Coder-7B-Instruct")],
)
def test_a_paper_export_names_its_own_backbone_and_model_meta_reads_it(
    tiny_sentence_transformer, tiny_model_dir, tmp_path, recipe_file, base
):
    from evaluation.model_meta import model_meta_from_folder
    from c2llm_data.tasks import TRAINING_SOURCES

    recipe = load_recipe(CONFIG_DIR / recipe_file)
    final = export_with_card(tiny_sentence_transformer, tmp_path / "final", tiny_model_dir, recipe)
    card = ModelCard.load(final / "README.md")
    assert card.data.base_model == f"Qwen/{base}"
    assert len(card.data.datasets) == len(recipe.data.datasets)  # every paper source is a Hub dataset
    meta = model_meta_from_folder(final)
    assert meta.adapted_from == f"Qwen/{base}"
    # the card's datasets name the same mteb tasks as the recipe they were trained with
    assert meta.training_datasets == {TRAINING_SOURCES[spec.name].task for spec in recipe.data.datasets}
    assert meta.license == "apache-2.0"


def test_a_local_start_folder_is_not_written_as_base_model(tmp_path):
    from train.card import card_base_model

    (tmp_path / "base").mkdir()
    local = load_recipe(CONFIG_DIR / "cpu-smoke.yaml", [f"model.base_model={tmp_path / 'base'}"])
    assert card_base_model(local) is None
    named = load_recipe(
        CONFIG_DIR / "cpu-smoke.yaml", [f"model.base_model={tmp_path / 'base'}", "export.base_model_hub_id=org/base"]
    )
    assert card_base_model(named) == "org/base"


def test_the_schedule_and_head_are_described_as_the_recipe_runs_them():
    from train.card import training_details

    recipe = load_recipe(CONFIG_DIR / "default-minilm.yaml")  # max_steps 160 overrides the 3 default epochs
    text = training_details(recipe, {"groups": {}}, {}, ["checkpoint-160"])
    assert "Schedule: 160 steps," in text and "epochs" not in text
    assert "PMA head started as layer-normalised mean pooling" in text
    paper = training_details(load_recipe(CONFIG_DIR / "c2llm-0.5b.yaml"), {"groups": {}}, {}, ["checkpoint-1"])
    assert "Schedule: 3 epochs," in paper and "PMA head trained from scratch" in paper


def test_a_c2llm_matryoshka_export_records_its_widths_in_config_and_card(tiny_sentence_transformer, tiny_model_dir,
                                                                         tmp_path):
    """The C2LLM start model's side of matryoshka training: the widths go into config.json (what encode's
    truncate_dim checks) and the card; a trained width truncates without a warning, another one warns."""
    import warnings

    import torch

    from modeling_c2llm import DTYPE_ARGUMENT, C2LLMModel
    from train.export import record_matryoshka_dims
    from train.start_models import start_model_for

    recipe = load_recipe(CONFIG_DIR / "cpu-smoke.yaml", ["loss.matryoshka_dims=[8, 32, 16]"])
    assert start_model_for(recipe.model, recipe.export, tmp_path / "init").embedding_dim() == 64  # its hidden size
    model = copy_sharing_tokenizer(tiny_sentence_transformer)  # record_matryoshka_dims changes its config
    record_matryoshka_dims(model, recipe.loss.matryoshka_dims)
    final = export_with_card(model, tmp_path / "final", tiny_model_dir, recipe)
    assert json.loads((final / "config.json").read_text())["matryoshka_dims"] == [32, 16, 8]
    assert "the loss is also taken at 32, 16, 8 dimensions" in (final / "README.md").read_text()
    reloaded = C2LLMModel.from_pretrained(final, **{DTYPE_ARGUMENT: torch.float32})
    tokenizer = model.tokenizer  # the export's tokenizer files are the start model's (loading them: a CPU-second)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert reloaded.encode(["def f(): pass"], tokenizer, truncate_dim=16).shape == (1, 16)
    with pytest.warns(UserWarning, match="truncate_dim=12"):
        reloaded.encode(["def f(): pass"], tokenizer, truncate_dim=12)
