"""Train C2LLM from raw pairs to a Hub-ready folder.

    python -m train.train train/configs/cpu-smoke.yaml --output-dir runs/smoke
    accelerate launch --config_file train/configs/accelerate-ddp.yaml -m train.train \
        train/configs/c2llm-0.5b.yaml --output-dir runs/c2llm-0.5b

Steps (run from the repository root; every step logs as it starts). ``run`` calls them in this order and this file
defines them in this order; what differs between start models (a causal LM, a sentence-transformers encoder) is the
``StartModel`` the recipe names (train/start_models.py), chosen once in step 1.
  1. Recipe: the config (+ --set overrides), its paths and the start model checked; DIR claimed (no silent
     overwrite of a different run).
  2. Start model: its folder, built once in DIR/init when it must be built.
  3. Data: every source in one schema; bad rows counted in DIR/data/report.json.
  4. Groups: one dataset per (source, language); a held-out share of queries per group for evaluation.
  5. Hard negatives: mined once per group, cached in DIR/data/mined.
  6. Training: LoRA (or the top layers) + PMA head, InfoNCE over in-batch and hard negatives; checkpoints
     DIR/checkpoint-*, tensorboard logs DIR/runs; a rerun resumes from the newest complete checkpoint.
  7. Merge: weighted average of the last N checkpoints (LoRA folded in first), optionally with the start model.
  8. Export: DIR/final in the start model's layout with a model card built from the run (train/card.py);
     held-out metrics in DIR/metrics.json.
  9. Push (optional, --push-to-hub REPO).

A kill at any moment loses at most the steps since the last complete checkpoint: rerun the same command.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import logging
import os
import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from train.args import ConfigError, RecipeConfig
from train.checkpoints import remove_interrupted_writes, write_json_atomic
from train.data import SchemaError
from train.decontaminate import (BenchmarkIndex, ExcludeListError, Exclusions, benchmark_folders, drop_overlaps,
                                 read_exclude_list)
from train.losses import check_matryoshka
from train.recipe import describe_options, load_recipe
from train.start_models import StartModel, start_model_for

REPO_ROOT = Path(__file__).resolve().parents[1]

logger = logging.getLogger("train")

RECIPE_FILE = "recipe.json"
# Options that may change between a run and its resumption without making it a different model.
RESUMABLE_KEYS = {
    "training.max_steps", "training.num_train_epochs", "training.logging_steps", "training.eval_steps",
    "training.save_steps", "training.save_total_limit", "training.dataloader_num_workers", "training.report_to",
    "mining.batch_size", "mining.use_faiss", "mining.use_multi_process", "data.num_proc",
}  # fmt: skip
RESUMABLE_SECTIONS = ("merge.", "export.")
SEED_BYTES = 4  # numpy takes seeds below 2**32


class OutputDirError(RuntimeError):
    """DIR holds something this recipe must not overwrite."""


class TrainingDivergedError(RuntimeError):
    """The loss or a trained weight stopped being a finite number: the run stops before it saves such weights."""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m train.train", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("config", nargs="?", help="recipe file (YAML or JSON), e.g. train/configs/cpu-smoke.yaml")
    parser.add_argument(
        "--output-dir", help="run folder: checkpoints, logs, data cache; DIR/final is the exported model"
    )
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
        help="override a recipe option (value parsed as YAML), e.g. --set training.max_steps=100; repeatable",
    )  # fmt: skip
    parser.add_argument("--overwrite-output-dir", action="store_true", help="delete DIR first if it holds another run")
    parser.add_argument(
        "--push-to-hub", nargs="?", const="", metavar="REPO",
        help="upload DIR/final to this Hub model repo at the end (default: the recipe's export.hub_model_id)",
    )  # fmt: skip
    parser.add_argument("--list-options", action="store_true", help="print every recipe option with its help and exit")
    cli = parser.parse_args(argv)
    if cli.list_options:
        print(describe_options())
        return
    if not cli.config or not cli.output_dir:
        parser.error("CONFIG and --output-dir are required")
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    try:
        recipe = load_recipe(cli.config, cli.overrides)
        push_to = None
        if cli.push_to_hub is not None:
            push_to = cli.push_to_hub or recipe.export.hub_model_id
            if not push_to:
                raise ConfigError("--push-to-hub needs a repo id, here or in the recipe's export.hub_model_id.")
            recipe.export.hub_model_id = push_to
        run(recipe, Path(cli.output_dir), overwrite=cli.overwrite_output_dir, push_to_hub=push_to)
    except (ConfigError, SchemaError, OutputDirError) as error:
        parser.exit(2, f"error: {error}\n")
    except TrainingDivergedError as error:
        parser.exit(1, f"error: {error}\n")


def run(recipe: RecipeConfig, output_dir: Path, overwrite: bool = False, push_to_hub: str | None = None) -> Path:
    """The whole recipe; returns DIR/final."""
    sources, start_model, args = check_recipe(recipe, output_dir)
    is_main = args.process_index == 0
    data_dir = output_dir / "data"
    # The main process prepares everything (filling the caches); the other processes then find it ready.
    with args.main_process_first(desc="start model, data and mining"):
        new_run = is_main and (overwrite or not output_dir.exists() or not any(output_dir.iterdir()))
        with removed_on_failure(output_dir, new_run):
            if is_main:
                claim_output_dir(output_dir, recipe, overwrite)
            logger.info("step 1: recipe checked, output in %s", output_dir)
            logger.info("step 2: start model")
            seed_step(recipe.training.seed, "start model")
            start_folder = start_model.prepare(output_dir / "init", recipe.training.seed)
            model = start_model.load(start_folder)
            # inside the guard: data that fails its schema checks leaves a new run's DIR as it found it
            prepared = prepared_data_of_finished_run(recipe, output_dir, data_dir)
            if prepared is None:
                prepared = prepare_data(recipe, sources, start_model, model, data_dir)
                if is_main:
                    save_data_report(prepared, data_dir)
    train_model(recipe, model, prepared, args, output_dir)
    if not is_main:
        return output_dir / "final"
    del model
    merged = merge(recipe, start_model, start_folder, output_dir)
    final = export(recipe, start_model, merged, prepared, start_folder, output_dir)
    if push_to_hub:
        from train.export import push_to_hub as upload

        logger.info("step 9: push to %s", push_to_hub)
        logger.info("uploaded: %s", upload(final, push_to_hub, private=recipe.export.private))
    return final


# --------------------------------------------------------------------------------------------------------------------
# Step 1: the recipe


def check_recipe(recipe: RecipeConfig, output_dir: Path) -> tuple[list, StartModel, Any]:
    """Everything that can be checked without loading anything, before DIR is written to: the data sources, the
    start model's options (its class chosen here, once), the card and benchmark paths, the trainer's arguments
    (last: they set up the distributed state that ``main_process_first`` needs)."""
    from train import data as data_lib

    sources = data_lib.check_sources(recipe.data.datasets, REPO_ROOT, recipe_exclusions(recipe))
    start_model = start_model_for(recipe.model, recipe.export, output_dir / "init")
    check_matryoshka(recipe.loss, start_model.embedding_dim())
    if recipe.export.model_card and not (REPO_ROOT / recipe.export.model_card).is_file():
        raise ConfigError(f"export.model_card: {REPO_ROOT / recipe.export.model_card} does not exist.")
    if recipe.data.decontaminate:
        benchmark_folders([REPO_ROOT / entry for entry in recipe.data.decontaminate])
    args = training_arguments(recipe, output_dir, has_evaluator=recipe.data.eval_fraction > 0,
                              has_pooling_head=start_model.has_pooling_head())
    return sources, start_model, args


def recipe_exclusions(recipe: RecipeConfig) -> Exclusions | None:
    """``data.exclude_repositories`` and the projects of benchmarks/data as one ``train.decontaminate.Exclusions``;
    None when the recipe names no list. A list missing on this machine (``../shared`` is not in a user's clone) is
    skipped with a warning."""
    if not recipe.data.exclude_repositories:
        return None
    exclusions = Exclusions()
    try:
        for entry in recipe.data.exclude_repositories:
            path = REPO_ROOT / entry
            if path.is_file():
                exclusions.repositories |= read_exclude_list(path)
            else:
                logger.warning("data.exclude_repositories: %s does not exist on this machine; not applied", path)
        exclusions.add_benchmarks(REPO_ROOT / "benchmarks" / "data")
    except ExcludeListError as error:
        raise ConfigError(f"data.exclude_repositories: {error}") from None
    return exclusions


def training_arguments(recipe: RecipeConfig, output_dir: Path, has_evaluator: bool, has_pooling_head: bool = True):
    """The recipe's `training:` section as sentence-transformers' SentenceTransformerTrainingArguments.

    The section's library fields go to the library as written. Fields it leaves out that the pipeline depends on get
    the recipe's values (``RECIPE_TRAINER_DEFAULTS``); the run folder, the PMA head's learning rate and the
    single-group global batches are always the recipe's. ``save_total_limit`` is applied by the checkpoint-completion
    callback, which counts complete checkpoints only, so the library's own rotation is turned off.
    """
    import torch
    from sentence_transformers import SentenceTransformerTrainingArguments
    from sentence_transformers.base.sampler import BatchSamplers
    from transformers import HfArgumentParser

    from train.args import RECIPE_TRAINER_DEFAULTS, trainer_fields
    from train.sampler import LengthBucketedBatchSampler, SingleGroupGlobalBatchSampler

    training = recipe.training
    # transformers 5.23 renamed gradient_checkpointing to activation_checkpointing
    checkpointing = (
        "activation_checkpointing" if "activation_checkpointing" in trainer_fields() else "gradient_checkpointing"
    )
    options = {
        "batch_sampler": BatchSamplers(RECIPE_TRAINER_DEFAULTS["batch_sampler"]),
        "logging_first_step": RECIPE_TRAINER_DEFAULTS["logging_first_step"],
        "save_strategy": RECIPE_TRAINER_DEFAULTS["save_strategy"],
        "eval_strategy": "steps" if has_evaluator else "no",
        "per_device_eval_batch_size": training.per_device_train_batch_size,
        f"{checkpointing}_kwargs": RECIPE_TRAINER_DEFAULTS[f"{checkpointing}_kwargs"],
        # Several processes without GPUs: accelerate runs them as gloo DDP on CPU only when told to use the CPU.
        "use_cpu": int(os.environ.get("WORLD_SIZE", "1")) > 1 and not torch.cuda.is_available(),
        **training.trainer,
        "eval_steps": training.eval_steps or training.save_steps,
        "output_dir": str(output_dir),
        "save_total_limit": None,
    }
    if training.head_learning_rate and has_pooling_head:  # last_token / mean pooling: no head parameters to map
        head_rate = {r"(^|\.)pma\.": training.head_learning_rate}
        options["learning_rate_mapping"] = {**(training.learning_rate_mapping or {}), **head_rate}
    parser = HfArgumentParser(SentenceTransformerTrainingArguments)
    try:
        (args,) = parser.parse_dict(options, allow_extra_keys=False)
    except (ValueError, TypeError, OSError) as error:  # the library's own checks of its values
        raise ConfigError(f"training: {error}") from error
    # Under DDP every rank must gather same-shaped embeddings: full batches only, one group per global step.
    args.dataloader_drop_last = args.world_size > 1
    args.multi_dataset_batch_sampler = partial(SingleGroupGlobalBatchSampler, world_size=args.world_size)
    if training.length_bucketed_batches:
        if "batch_sampler" in training.trainer:
            raise ConfigError("training: length_bucketed_batches replaces the batch sampler; drop training."
                              f"batch_sampler ({training.trainer['batch_sampler']}) or length_bucketed_batches.")
        args.batch_sampler = LengthBucketedBatchSampler  # a class the trainer builds per group, as its own samplers
    return args


def claim_output_dir(output_dir: Path, recipe: RecipeConfig, overwrite: bool) -> None:
    """DIR must be new, empty, or a previous run of the same model (which is then resumed); its recipe is recorded
    and what an interrupted run left half-written is removed."""
    check_output_dir(output_dir, recipe, overwrite)
    remove_interrupted_writes(output_dir)


def check_output_dir(output_dir: Path, recipe: RecipeConfig, overwrite: bool) -> None:
    """DIR must be new, empty, or a previous run of the same model: record the recipe, or compare with it."""
    marker = output_dir / RECIPE_FILE
    current = recipe.to_dict()
    if output_dir.exists() and any(output_dir.iterdir()):
        if overwrite:
            logger.warning("--overwrite-output-dir: deleting %s", output_dir)
            shutil.rmtree(output_dir)
        elif not marker.is_file():
            raise OutputDirError(
                f"{output_dir} is not empty and holds no {RECIPE_FILE}: it is not a run of this recipe. Choose a new "
                "--output-dir, or pass --overwrite-output-dir to delete it."
            )
        else:
            previous, now = flatten(json.loads(marker.read_text())), flatten(current)
            changed = sorted(
                key
                for key in previous.keys() | now.keys()
                if previous.get(key) != now.get(key)
                and key not in RESUMABLE_KEYS
                and not key.startswith(RESUMABLE_SECTIONS)
            )
            if changed:
                details = "; ".join(f"{key}: {previous.get(key)!r} -> {now.get(key)!r}" for key in changed[:5])
                raise OutputDirError(
                    f"{output_dir} holds a different model (changed: {details}). Use a new --output-dir, or pass "
                    "--overwrite-output-dir to delete the old run."
                )
    write_json_atomic(marker, current)


def flatten(config: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """{section: {key: value}} -> {"section.key": value}."""
    return {f"{section}.{key}": value for section, values in config.items() for key, value in values.items()}


@contextmanager
def removed_on_failure(output_dir: Path, enabled: bool):
    """Empty ``output_dir`` if the block fails: a new run that stops before training (its start model or its data
    failing) leaves nothing (a folder that existed empty before stays, empty). A kill leaves the caches it wrote,
    which the rerun uses."""
    existed = output_dir.exists()
    try:
        yield
    except BaseException:
        if enabled and output_dir.exists():
            logger.info("removing %s: the run stopped before it began", output_dir)
            shutil.rmtree(output_dir, ignore_errors=True)
            if existed:
                output_dir.mkdir()
        raise


# --------------------------------------------------------------------------------------------------------------------
# Steps 3-5: data, groups, hard negatives


@dataclass
class PreparedData:
    """Steps 3-5 in the shape the trainer wants, keyed by (source, language) group."""

    train_groups: dict[str, Any]  # group -> Dataset(query, positive, negative_1..K)
    eval_groups: dict[str, Any]  # group -> held-out schema rows
    prompts: dict[str, tuple[str, str]]  # group -> (query prompt, document prompt)
    loss_weights: dict[str, float]  # group -> loss multiplier
    summary: dict[str, Any]  # what DIR/data/report.json records


def prepare_data(recipe: RecipeConfig, sources: list, start_model: StartModel, model, data_dir: Path) -> PreparedData:
    """Steps 3-5: load and clean every source, group, hold out queries, mine hard negatives (with ``model``, the
    start model loaded, unless ``mining.model`` names another)."""
    from train import data as data_lib
    from train.mining import mine_group

    logger.info("step 3: data")
    decontaminate = None
    if recipe.data.decontaminate:
        folders = benchmark_folders([REPO_ROOT / entry for entry in recipe.data.decontaminate])
        decontaminate = functools.partial(drop_overlaps, index=BenchmarkIndex(folders))
        logger.info("dropping rows that overlap %d benchmark folders", len(folders))
    loaded = data_lib.load_training_data(
        sources, REPO_ROOT, recipe.data.max_bad_row_fraction, num_proc=recipe.data.num_proc,
        decontaminate=decontaminate,
    )  # fmt: skip
    groups = data_lib.group_by_source_language(loaded.dataset)

    logger.info("step 4: %d (source, language) groups, held-out split", len(groups))
    prepared = PreparedData({}, {}, {}, {}, {"groups": {}})
    for index, (group, rows) in enumerate(groups.items()):
        source = rows[0]["source"]
        prepared.prompts[group] = prompts_for_task(model.prompts, loaded.tasks[source])
        prepared.loss_weights[group] = loaded.loss_weights[source]
        seed = recipe.training.seed + index
        prepared.train_groups[group], heldout = data_lib.split_heldout(
            rows, recipe.data.eval_fraction, recipe.data.max_eval_queries, seed
        )
        if heldout is not None:
            prepared.eval_groups[group] = heldout

    logger.info("step 5: hard negatives")
    mining = recipe.mining
    # Loaded on the first cache miss only (functools.cache), then shared by all groups.
    mining_model = functools.cache(
        lambda: model
        if mining.model is None
        else start_model.load(mining.model, safetensors_only=False)
    )
    # The cache lives in DIR, whose recipe (and so start model) cannot change: name the start model, not its path.
    mining_model_id = mining.model or "start model"
    for group, rows in list(prepared.train_groups.items()):
        if mining.enabled:
            seed_step(recipe.training.seed, f"mining {group}")  # the same negatives whether earlier groups were cached
            mined, dropped = mine_group(
                rows, mining_model, mining, mining_model_id, prepared.prompts[group], data_dir / "mined"
            )
        else:
            # negatives the source brings (neighbour_negatives_column) train where every row of the group has one
            mined, dropped = data_lib.to_training_columns(rows, data_lib.given_negatives(rows)), 0
        heldout = prepared.eval_groups.get(group)
        prepared.summary["groups"][group] = {
            "train_rows": len(mined),
            "eval_queries": len(set(heldout["query"])) if heldout is not None else 0,
            "mining_dropped": dropped,
            "hard_negatives": sum(name.startswith("negative_") for name in mined.column_names),
        }
        if len(mined):
            prepared.train_groups[group] = mined
        else:
            del prepared.train_groups[group]
    prepared.summary.update(rows_loaded=loaded.rows_loaded, bad_rows=loaded.bad_rows, tasks=loaded.tasks)

    if not prepared.train_groups:
        raise ConfigError("No training rows left after cleaning and mining; see DIR/data/report.json.")
    return prepared


def seed_step(seed: int, step: str) -> None:
    """Seed Python's, numpy's and torch's global generators from the recipe's seed and the step they serve, for
    library code that draws from them and takes no generator of its own (sentence-transformers' random negative
    sampling): a step draws the same numbers whatever ran before it in this process, so a rerun that finds the
    earlier steps cached (or a kill at any point) gives the same model."""
    from transformers import set_seed

    digest = hashlib.sha256(f"{seed}/{step}".encode()).digest()
    set_seed(int.from_bytes(digest[:SEED_BYTES], "big"))


def prompts_for_task(model_prompts: dict[str, str], task: str) -> tuple[str, str]:
    """(query prompt, document prompt) of an MTEB task from the start model's stored prompts, looked up as mteb
    looks them up (``c2llm_data.tasks.prompt_name_for``), so training and evaluation give a task the same text."""
    from c2llm_data.tasks import DOCUMENT_SIDE, QUERY_SIDE, prompt_name_for

    if not any(model_prompts.values()):  # a model trained without instructions (e.g. all-MiniLM-L6-v2) gets none
        return "", ""
    query_name = prompt_name_for(model_prompts, task, QUERY_SIDE)
    if query_name not in (f"{task}-{QUERY_SIDE}", task):  # a generic fallback would drop the task's instruction
        tasks = sorted(name.removesuffix(f"-{QUERY_SIDE}") for name in model_prompts if name.endswith(f"-{QUERY_SIDE}"))
        raise ConfigError(
            f"Unknown task {task!r}: the model has no prompt '{task}-{QUERY_SIDE}'. Tasks with prompts: {tasks}."
        )
    document_name = prompt_name_for(model_prompts, task, DOCUMENT_SIDE)
    return model_prompts[query_name], model_prompts[document_name] if document_name else ""


def prepared_data_of_finished_run(recipe: RecipeConfig, output_dir: Path, data_dir: Path) -> PreparedData | None:
    """The data a rerun of a finished run needs, read back instead of prepared again: only the data report, when
    training already reached max_steps and nothing is held out (``data.eval_fraction: 0``), so the rerun merges and
    exports (another merge share, say) in seconds rather than the data step's minutes. None otherwise."""
    from train.checkpoints import latest_complete_checkpoint

    report = data_dir / "report.json"
    if recipe.data.eval_fraction > 0 or not report.is_file():
        return None
    checkpoint = latest_complete_checkpoint(output_dir, remove_incomplete=False)
    if checkpoint is None or not training_is_done(checkpoint, recipe.training.max_steps):
        return None
    logger.info("step 3-5: skipped: training is done (%s) and nothing is held out; data report read from %s",
                checkpoint.name, report)
    return PreparedData({}, {}, {}, {}, json.loads(report.read_text(encoding="utf-8")))


def save_data_report(prepared: PreparedData, data_dir: Path) -> None:
    write_json_atomic(data_dir / "report.json", prepared.summary)
    logger.info("data report: %s", json.dumps(prepared.summary))
    for group, rows in prepared.eval_groups.items():
        rows.save_to_disk(str(data_dir / "heldout" / group))


# --------------------------------------------------------------------------------------------------------------------
# Step 6: training


def train_model(recipe: RecipeConfig, model, prepared: PreparedData, args, output_dir: Path) -> None:
    """Step 6: LoRA + head training, resumed from the newest complete checkpoint if there is one."""
    from datasets import DatasetDict
    from transformers import set_seed

    from train.checkpoints import checkpoint_completion_callback, latest_complete_checkpoint
    from train.losses import build_group_losses
    from train.model import add_lora, freeze_below_top_layers

    logger.info(
        "step 6: training on %d process(es), %d rows per device, global batch %d rows",
        args.world_size,
        args.per_device_train_batch_size,
        args.world_size * args.per_device_train_batch_size,
    )
    resume_from = latest_complete_checkpoint(output_dir, remove_incomplete=args.process_index == 0)
    if resume_from is not None and training_is_done(resume_from, recipe.training.max_steps):
        # The trainer would skip max_steps batches of the epoch and then take one step more.
        logger.info("training already reached max_steps=%d in %s", recipe.training.max_steps, resume_from)
        return
    # Everything random from here (the adapter's initial weights, the trainer) depends on the seed alone, not on
    # how much randomness data preparation used: a rerun that finds DIR/data cached skips mining.
    set_seed(recipe.training.seed)
    if not recipe.lora.enabled and recipe.model.train_top_layers:
        freeze_below_top_layers(model, recipe.model.train_top_layers)
    if recipe.lora.enabled:
        add_lora(model, recipe.lora)
        if recipe.model.dtype != "float32":  # trainable weights stay in float32 under bf16 autocast
            for parameter in model.parameters():
                if parameter.requires_grad:
                    parameter.data = parameter.data.float()
    # Queries get the task's query prompt; positive and negatives its document prompt.
    args.prompts = {}
    for group, rows in prepared.train_groups.items():
        query_prompt, document_prompt = prepared.prompts[group]
        args.prompts[group] = {
            column: query_prompt if column == "query" else document_prompt for column in rows.column_names
        }
    evaluator = build_evaluator(prepared.eval_groups, prepared.prompts, recipe.training.per_device_train_batch_size)
    callbacks = [save_on_last_step_callback(), finite_weights_callback(),
                 checkpoint_completion_callback(recipe.training.save_total_limit)]
    dev_pairs = None
    if recipe.training.dev_loss_patience is not None:
        dev_pairs = dev_loss_pairs(prepared)
        callbacks.append(dev_loss_stopping_callback(
            list(dev_pairs), recipe.training.dev_loss_patience, recipe.training.dev_loss_min_steps
        ))
    # Tensorboard logs in DIR/runs (transformers' default would be ./runs for anything logged before training).
    os.environ.setdefault("TENSORBOARD_LOGGING_DIR", str(output_dir / "runs"))
    trainer = recipe_trainer_class()(
        model=model,
        args=args,
        train_dataset=DatasetDict(prepared.train_groups),
        loss=build_group_losses(
            model, {group: prepared.loss_weights[group] for group in prepared.train_groups}, recipe.loss
        ),
        eval_dataset=dev_pairs,
        # With a dev loss, held-out retrieval is measured before and after training only: encoding the held-out
        # texts again at every evaluation would double its cost, and the dev loss is what stopping judges.
        evaluator=evaluator if dev_pairs is None else None,
        callbacks=callbacks,
    )
    if resume_from is not None:
        logger.info("resuming from %s", resume_from)
    elif evaluator is not None and args.process_index == 0:
        before = evaluator(model)
        trainer.log({f"eval_{key}": value for key, value in before.items()})
        update_metrics(output_dir, {"before": before})
    trainer.train(resume_from_checkpoint=None if resume_from is None else str(resume_from))


def training_is_done(checkpoint: Path, max_steps: int) -> bool:
    """Whether ``checkpoint`` is the end of a run limited to ``max_steps`` (> 0) optimizer steps."""
    state = json.loads((checkpoint / "trainer_state.json").read_text(encoding="utf-8"))
    return max_steps > 0 and state["global_step"] >= max_steps


def recipe_trainer_class():
    """sentence-transformers' trainer, resuming in float32.

    The library resumes by loading the checkpoint folder as a new model in that model's default dtype, which for
    C2LLM is bfloat16 on CPUs and GPUs that compute it (`modeling_c2llm.preferred_dtype`), and copying its weights
    into the model being trained: the trained float32 weights came back rounded, so a resumed run drifted from an
    uninterrupted one (max weight difference 3.9e-3 after 20 more steps of the CPU recipe). Loaded in float32, the
    checkpoint gives back exactly what was saved; a bfloat16 base is rounded back to the values it started from.
    """
    import torch
    from sentence_transformers import SentenceTransformerTrainer
    from sentence_transformers.util import fullname
    from sentence_transformers.base.modules import Module

    from modeling_c2llm import DTYPE_ARGUMENT

    class RecipeTrainer(SentenceTransformerTrainer):
        def _load_from_checkpoint(self, checkpoint_path: str, model=None) -> None:
            model = getattr(self.model, "_orig_mod", self.model)
            # the library's own reload (its module classes, so no remote code is imported again), in float32
            modules = [module for module in model.modules() if isinstance(module, Module)]
            module_classes = {fullname(module): type(module) for module in modules}
            loaded = model.__class__._load_with_module_classes(
                checkpoint_path, module_classes, trust_remote_code=model.trust_remote_code,
                model_kwargs={DTYPE_ARGUMENT: torch.float32},
            )
            model.load_state_dict(loaded.state_dict())

        def compute_loss(self, model, inputs, *args, **kwargs):
            loss = super().compute_loss(model, inputs, *args, **kwargs)
            value = (loss[0] if isinstance(loss, tuple) else loss).detach()  # a tuple with return_outputs
            if not bool(torch.isfinite(value).all()):
                raise TrainingDivergedError(diverged(f"the loss is {value.item()}", self.state, self.args))
            return loss

    return RecipeTrainer


def finite_weights_callback():
    """Stop after an optimizer step that left a trained weight NaN or infinite (a finite loss can still give
    infinite gradients), before the checkpoint of that step is written."""
    import torch
    from transformers import TrainerCallback

    class FiniteWeights(TrainerCallback):
        def on_step_end(self, args, state, control, model=None, **kwargs):
            trained = [(name, parameter) for name, parameter in model.named_parameters() if parameter.requires_grad]
            finite = torch.stack([torch.isfinite(parameter).all() for _, parameter in trained])  # (trained,): one sync
            if not bool(finite.all()):
                damaged = [name for (name, _), ok in zip(trained, finite.tolist()) if not ok]
                raise TrainingDivergedError(diverged(f"{len(damaged)} trained weights ({', '.join(damaged[:3])}"
                                                     f"{', ...' if len(damaged) > 3 else ''}) hold NaN or infinite "
                                                     "values", state, args, done=True))
            return control

    return FiniteWeights()


def diverged(what: str, state, args, done: bool = False) -> str:
    """The error of a run whose optimizer step (just ``done``, or the next one) went non-finite."""
    from train.checkpoints import complete_checkpoints

    step = state.global_step if done else state.global_step + 1
    saved = complete_checkpoints(Path(args.output_dir))
    kept = f"the last good checkpoint, {saved[max(saved)]}, is kept" if saved else "no checkpoint was saved before it"
    return (f"training diverged at step {step}: {what}. The run stops without saving these weights; {kept}. Lower "
            "training.learning_rate, loss.scale or the loss weights (loss.matryoshka_weights, data.datasets[]."
            "loss_weight) and run again in a new --output-dir.")


def dev_loss_pairs(prepared: PreparedData):
    """The held-out pairs of every group that trains, as (query, positive) columns: the dev set whose loss (each
    group's own loss, in-batch negatives only) decides when training stops."""
    from datasets import DatasetDict

    from train.data import to_training_columns

    pairs = {group: to_training_columns(rows, 0) for group, rows in prepared.eval_groups.items()
             if group in prepared.train_groups}  # fmt: skip
    if not pairs:
        raise ConfigError("training.dev_loss_patience: no group that trains has held-out pairs; raise "
                          "data.eval_fraction (and data.max_eval_queries) so that every group keeps some.")
    return DatasetDict(pairs)


def dev_loss_stopping_callback(groups: list[str], patience: int, min_steps: int):
    """Stop training once the dev loss (the mean over ``groups`` of eval_GROUP_loss) has not reached a new minimum
    for ``patience`` evaluations in a row, and not before ``min_steps``; the stopping step is saved.

    Written here because transformers' EarlyStoppingCallback needs load_best_model_at_end (which the recipe's own
    checkpoint merge replaces), has no minimum step, and judges one metric while the trainer evaluates each group
    separately (one on_evaluate call per group)."""
    from transformers import TrainerCallback

    class DevLossStopping(TrainerCallback):
        def __init__(self) -> None:
            self.best = float("inf")
            self.evaluations_without_new_minimum = 0
            self.losses_this_step: dict[str, float] = {}

        def on_evaluate(self, args, state, control, metrics=None, **kwargs):
            for group in groups:
                if f"eval_{group}_loss" in (metrics or {}):
                    self.losses_this_step[group] = metrics[f"eval_{group}_loss"]
            if len(self.losses_this_step) < len(groups):  # the other groups are evaluated next, same step
                return control
            dev_loss = sum(self.losses_this_step.values()) / len(groups)
            self.losses_this_step = {}
            if dev_loss < self.best:
                self.best, self.evaluations_without_new_minimum = dev_loss, 0
            else:
                self.evaluations_without_new_minimum += 1
            logger.info("step %d: dev loss %.4f (lowest %.4f, %d evaluation(s) without a new minimum)",
                        state.global_step, dev_loss, self.best, self.evaluations_without_new_minimum)
            if self.evaluations_without_new_minimum >= patience and state.global_step >= min_steps:
                logger.info("stopping at step %d: the dev loss has not fallen for %d evaluations", state.global_step,
                            patience)
                control.should_training_stop = True
                control.should_save = True
            return control

    return DevLossStopping()


def save_on_last_step_callback():
    """A checkpoint at the final step too, so the merge can use the end of training."""
    from transformers import TrainerCallback

    class SaveOnLastStep(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step >= state.max_steps:
                control.should_save = True
            return control

    return SaveOnLastStep()


# --------------------------------------------------------------------------------------------------------------------
# Steps 7-8: merge and export


@dataclass(frozen=True)
class MergedModel:
    """Step 7's model and the names of the checkpoints averaged into it (the model card lists them)."""

    model: Any  # a SentenceTransformer
    checkpoints: list[str]


def merge(recipe: RecipeConfig, start_model: StartModel, start_folder: Path, output_dir: Path) -> MergedModel:
    """Step 7: the last checkpoints averaged (and blended with the start model when the recipe asks)."""
    from train.merge import merge_checkpoints, select_checkpoints

    logger.info("step 7: merge")
    checkpoints = select_checkpoints(output_dir, recipe.merge)
    final_model = merge_checkpoints(checkpoints, start_folder, recipe.merge, recipe.model)
    if recipe.merge.start_model_weight:
        from train.start_merge import blend_with_start

        start = start_model.load(start_folder, device="cpu")
        blend_with_start(final_model, start, recipe.merge.start_model_weight, recipe.merge.start_model_merge_head)
        del start
    return MergedModel(final_model, [path.name for path in checkpoints])


def export(recipe: RecipeConfig, start_model: StartModel, merged: MergedModel, prepared: PreparedData,
           start_folder: Path, output_dir: Path) -> Path:  # fmt: skip
    """Step 8: held-out metrics of the final model, then DIR/final in the start model's layout with its card."""
    from train.card import model_card

    logger.info("step 8: export")
    evaluator = build_evaluator(prepared.eval_groups, prepared.prompts, recipe.training.per_device_train_batch_size)
    metrics = update_metrics(output_dir, {"final": evaluator(merged.model)} if evaluator is not None else {})
    card = model_card(recipe, prepared.summary, metrics, merged.checkpoints)
    if recipe.loss.matryoshka_dims:
        from train.export import record_matryoshka_dims

        record_matryoshka_dims(merged.model, recipe.loss.matryoshka_dims)
    final = start_model.export(merged.model, start_folder, output_dir / "final", str(card))
    logger.info("exported %s", final)
    return final


# --------------------------------------------------------------------------------------------------------------------
# Used by several steps: held-out retrieval evaluation (before training in step 6, of the final model in step 8)


def build_evaluator(eval_groups: dict[str, Any], group_prompts: dict[str, tuple[str, str]], batch_size: int):
    """One InformationRetrievalEvaluator per group with held-out queries; main score = mean NDCG@10."""
    from sentence_transformers.sentence_transformer.evaluation import (
        InformationRetrievalEvaluator,
        SequentialEvaluator,
    )

    from train.data import retrieval_split

    evaluators = []
    for group, rows in eval_groups.items():
        queries, corpus, relevant = retrieval_split(rows)
        query_prompt, document_prompt = group_prompts[group]
        evaluators.append(
            InformationRetrievalEvaluator(
                queries, corpus, relevant, name=group, query_prompt=query_prompt, corpus_prompt=document_prompt,
                batch_size=batch_size, ndcg_at_k=[10], mrr_at_k=[10], accuracy_at_k=[1, 10], precision_recall_at_k=[10],
                map_at_k=[10], show_progress_bar=False,
            )
        )  # fmt: skip
    if not evaluators:
        return None
    return SequentialEvaluator(evaluators, main_score_function=lambda scores: sum(scores) / len(scores))


def update_metrics(output_dir: Path, metrics: dict[str, Any]) -> dict[str, Any]:
    """Merge ``metrics`` into DIR/metrics.json (held-out retrieval `before` training and of the `final` model)."""
    path = output_dir / "metrics.json"
    merged = {**(json.loads(path.read_text()) if path.is_file() else {}), **metrics}
    write_json_atomic(path, merged)
    return merged


if __name__ == "__main__":
    main()
