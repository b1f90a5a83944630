"""Recipe files: the shipped configs load, every option has help, unknown keys and bad values fail clearly."""

import dataclasses
from pathlib import Path

import pytest

from train import args as recipe_args
from train.args import ConfigError, load_recipe

CONFIG_DIR = Path(__file__).resolve().parents[1] / "train" / "configs"


@pytest.mark.parametrize("name", ["c2llm-0.5b.yaml", "c2llm-7b.yaml", "cpu-smoke.yaml"])
def test_shipped_recipes_load(name):
    recipe = load_recipe(CONFIG_DIR / name)
    assert recipe.data.datasets


def test_paper_recipes_follow_section_4_1():
    for name, base in [
        ("c2llm-0.5b.yaml", "Qwen2.5-Coder-0.5B-Instruct"),
        ("c2llm-7b.yaml", "Qwen2.5-Coder-7B-Instruct"),
    ]:
        recipe = load_recipe(CONFIG_DIR / name)
        assert recipe.model.base_model == f"Qwen/{base}"
        assert recipe.model.config_overrides["pma_num_heads"] == 32
        assert (recipe.lora.r, recipe.lora.alpha) == (64, 32)
        assert (recipe.training.num_train_epochs, recipe.training.learning_rate) == (3, 1e-4)
        assert recipe.model.max_seq_length == 1024 and recipe.loss.scale == 20
        assert recipe.mining.num_negatives == 7 and recipe.merge.num_checkpoints == 4
        names = {spec.name for spec in recipe.data.datasets}
        assert names == {
            "codesearchnet", "codesearchnet_ccr", "coir_codesearchnet", "apps", "codefeedback_st", "codefeedback_mt",
            "codeeditsearch", "cosqa", "stackoverflowqa", "synthetic_text2sql", "codetransocean_contest",
            "codetransocean_dl",
        }  # fmt: skip


def test_every_option_has_help_text():
    sections = [recipe_args.DatasetSpec] + [f.default_factory for f in dataclasses.fields(recipe_args.RecipeConfig)]
    for cls in sections:
        for spec in dataclasses.fields(cls):
            assert spec.metadata.get("help"), f"{cls.__name__}.{spec.name} has no help text"
    listing = recipe_args.describe_options()
    assert "lora.r (default: 64)" in listing and "data.datasets[].loss_weight" in listing


def write(tmp_path, text):
    path = tmp_path / "recipe.yaml"
    path.write_text(text)
    return path


def test_unknown_keys_name_the_closest_valid_one(tmp_path):
    with pytest.raises(
        ConfigError, match=r"Unknown config key lora\.rank.*Did you mean lora\.'r'|Unknown config key lora\.'rank'"
    ):
        load_recipe(write(tmp_path, "lora:\n  rank: 8\n"))
    with pytest.raises(
        ConfigError, match="Unknown config key training.'learning_rte'. Did you mean training.'learning_rate'"
    ):
        load_recipe(write(tmp_path, "training:\n  learning_rte: 0.1\n"))
    with pytest.raises(ConfigError, match="Unknown config section 'trainig'. Did you mean 'training'"):
        load_recipe(write(tmp_path, "trainig: {}\n"))
    with pytest.raises(ConfigError, match=r"data\.datasets\[\]\.'nmae'"):
        load_recipe(write(tmp_path, "data:\n  datasets:\n    - nmae: apps\n"))


def test_overrides_are_parsed_as_yaml(tmp_path):
    recipe = load_recipe(
        write(tmp_path, "data:\n  datasets:\n    - name: apps\n"),
        ["training.max_steps=7", "training.learning_rate=3e-4", "lora.target_modules=[q_proj, v_proj]"],
    )
    assert recipe.training.max_steps == 7 and recipe.training.learning_rate == 3e-4
    assert recipe.lora.target_modules == ["q_proj", "v_proj"]
    with pytest.raises(ConfigError, match="section.key=value"):
        load_recipe(write(tmp_path, "{}\n"), ["max_steps=3"])


def test_inconsistent_values_fail_before_training(tmp_path):
    with pytest.raises(ConfigError, match="exactly one of `name` or `path`"):
        load_recipe(write(tmp_path, "data:\n  datasets:\n    - {name: apps, path: x.jsonl}\n"))
    with pytest.raises(ConfigError, match="keeps fewer checkpoints than merge needs"):
        load_recipe(write(tmp_path, "training: {save_total_limit: 2}\nmerge: {num_checkpoints: 4}\n"))
    with pytest.raises(ConfigError, match="merge.weights has 2 entries for 4 checkpoints"):
        load_recipe(write(tmp_path, "merge: {weights: [1, 2]}\n"))


def test_command_line_reports_config_errors_without_a_traceback(tmp_path, capsys):
    from train.train import main

    with pytest.raises(SystemExit) as stopped:
        main([str(write(tmp_path, "lora:\n  rnak: 8\n")), "--output-dir", str(tmp_path / "out")])
    assert stopped.value.code == 2
    assert "Unknown config key lora.'rnak'" in capsys.readouterr().err
    main(["--list-options"])
    assert "mining.num_negatives (default: 7)" in capsys.readouterr().out
