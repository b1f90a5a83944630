"""Every recipe in train/configs loads (the experiments' tables name them as the commands that reproduce them), and
the experiments' --set variants of them load too."""

from pathlib import Path

import pytest

from train.recipe import load_recipe

REPO_ROOT = Path(__file__).resolve().parents[1]
CONFIG_DIR = REPO_ROOT / "train" / "configs"
LAUNCHER_CONFIGS = ("accelerate-", "deepspeed-")  # accelerate / DeepSpeed settings, not recipes
RECIPES = sorted(
    path for path in CONFIG_DIR.glob("*.yaml") if not path.name.startswith(LAUNCHER_CONFIGS)
)
CAUSAL_TOY_SHAPE = (
    "vocab_size: 151936, hidden_size: 128, intermediate_size: 512, num_hidden_layers: 2, num_attention_heads: 4, "
    "num_key_value_heads: 2, bos_token_id: 151643, eos_token_id: 151643, pad_token_id: 151643, pma_num_heads: 8"
)
EPOCH_RUN = [
    "training.max_steps=800", "model.train_top_layers=4", "training.warmup_ratio=0.025", "training.bf16=true",
    "training.save_steps=200", "training.save_total_limit=4", "merge.start_model_weight=0.6",
]  # fmt: skip


def test_the_recipe_list_holds_the_experiments_recipes():
    assert {"default-minilm.yaml", "causal-toy.yaml", "cpu-smoke.yaml"} <= {path.name for path in RECIPES}


@pytest.mark.parametrize("path", RECIPES, ids=lambda path: path.name)
def test_every_recipe_loads(path):
    assert load_recipe(path).data.datasets


@pytest.mark.parametrize("pooling", ["pma", "last_token", "mean"])
def test_the_causal_toy_runs_each_pooling_on_the_same_shape(pooling):
    default = load_recipe(CONFIG_DIR / "causal-toy.yaml")
    varied = load_recipe(
        CONFIG_DIR / "causal-toy.yaml", [f"model.config_overrides={{{CAUSAL_TOY_SHAPE}, pooling: {pooling}}}"]
    )
    assert varied.model.config_overrides == default.model.config_overrides | {"pooling": pooling}


@pytest.mark.parametrize(
    "overrides",
    [
        ["training.max_steps=30", "model.train_top_layers=2", "training.learning_rate=3e-5",
         "training.warmup_ratio=0.167", "merge.start_model_weight=0"],
        EPOCH_RUN,
        [*EPOCH_RUN, "merge.num_checkpoints=1", "merge.checkpoint_steps=[200]", "merge.start_model_weight=0"],
        [*EPOCH_RUN, "merge.num_checkpoints=4", "merge.start_model_weight=0.4"],
        ["training.max_steps=200", "model.train_top_layers=4", "training.warmup_ratio=0.1", "training.bf16=true",
         "merge.start_model_weight=0.5", "training.seed=1", "training.learning_rate=1e-5", "loss.scale=50"],
    ],
    ids=["30-steps", "epoch", "epoch-step-curve", "checkpoint-average", "ablation"],
)  # fmt: skip
def test_the_minilm_experiments_commands_load(overrides):
    recipe = load_recipe(CONFIG_DIR / "default-minilm.yaml", overrides)
    settings = dict(override.split("=", 1) for override in overrides)
    assert recipe.training.max_steps == int(settings.get("training.max_steps", 160))
    assert recipe.merge.start_model_weight == float(settings["merge.start_model_weight"])


@pytest.mark.parametrize("head", ["pma_dim: 576, pooling: pma", "pma_dim: 128, pooling: pma",
                                  "pma_dim: 576, pooling: last_token", "pma_dim: 576, pooling: mean"])
def test_the_smollm2_ablation_varies_only_the_head(head):
    """experiments/smollm2/run_ablation.sh: every variant is the recipe with another head, 32 PMA heads dividing
    each width."""
    from configuration_c2llm import C2LLMConfig

    default = load_recipe(CONFIG_DIR / "smollm2-cpu.yaml")
    varied = load_recipe(CONFIG_DIR / "smollm2-cpu.yaml", [f"model.config_overrides={{pma_num_heads: 32, {head}}}"])
    assert varied.model.config_overrides.keys() - default.model.config_overrides.keys() <= {"pooling"}
    config = C2LLMConfig(hidden_size=576, num_attention_heads=9, num_key_value_heads=3,
                         **varied.model.config_overrides)  # raises when 32 heads do not divide the width
    assert config.embedding_dim == varied.model.config_overrides["pma_dim"]
