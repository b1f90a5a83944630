"""Hard-negative mining with sentence-transformers' ``mine_hard_negatives``, cached on disk.

For each (source, language) group, every query is scored against the group's positives (the corpus), and the K
best-ranked candidates that pass the false-negative guards (rank range, relative/absolute margin below the
positive, max score) become its hard negatives. Queries with fewer than K valid candidates are dropped and
counted. Results are saved per group under a key that covers the data, the mining settings, the model and the
prompts, so a restarted run reuses them instead of mining again.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from datasets import Dataset, load_from_disk

from c2llm_plumbing.atomic import atomic_target

from .args import MiningArguments
from .data import to_training_columns

logger = logging.getLogger(__name__)

# Settings that change which negatives are mined (batch size, faiss and multi-process only change speed).
MINING_KEY_FIELDS = (
    "num_negatives",
    "range_min",
    "range_max",
    "relative_margin",
    "absolute_margin",
    "max_score",
    "sampling_strategy",
)


def mining_cache_key(group: Dataset, args: MiningArguments, model_id: str, prompts: tuple[str, str]) -> str:
    """Hash of the group's pairs, the mining settings, the mining model and the prompts."""
    digest = hashlib.sha256()
    settings = {name: getattr(args, name) for name in MINING_KEY_FIELDS}
    digest.update(json.dumps([settings, model_id, prompts], sort_keys=True).encode())
    for batch in group.select_columns(["query", "positive"]).iter(batch_size=10_000):
        for query, positive in zip(batch["query"], batch["positive"]):
            digest.update(query.encode() + b"\0" + positive.encode() + b"\0")
    return digest.hexdigest()[:16]


def remove_unreadable_embeddings(folder: Path) -> None:
    """Delete cached embedding files that do not load: ``mine_hard_negatives`` writes them in place, so a kill
    during the write leaves a truncated file that every later run would fail on."""
    import numpy as np

    for path in sorted(Path(folder).glob("*.npy")):
        try:
            np.load(path, mmap_mode="r")
        except (ValueError, OSError, EOFError) as error:
            logger.warning("removing %s, cut short by an interrupted run (%s)", path, error)
            path.unlink()


def mine_group(
    group: Dataset,
    load_model: Callable[[], Any],
    args: MiningArguments,
    model_id: str,
    prompts: tuple[str, str],
    cache_dir: Path,
) -> tuple[Dataset, int]:
    """Schema rows of one group -> (query, positive, negative_1..K) rows and the number of rows dropped.

    ``load_model`` returns the SentenceTransformer to mine with; it is only called on a cache miss, so a resumed
    run (or every process but the first under DDP) never loads it. ``prompts`` is (query prompt, document
    prompt), the same instructions training uses.
    """
    from sentence_transformers.util import mine_hard_negatives

    cached = cache_dir / mining_cache_key(group, args, model_id, prompts)
    if cached.is_dir():
        mined = load_from_disk(str(cached))
        logger.info("reusing mined negatives from %s (%d rows)", cached, len(mined))
        return mined, len(group) - len(mined)

    given = to_training_columns(group, args.num_negatives)
    if len(given) == len(group):
        mined = given  # the source already brings K negatives for every row: keep them
    elif len(set(group["positive"])) <= args.range_min + args.num_negatives:
        logger.warning("group of %d rows is too small to mine %d negatives: dropped", len(group), args.num_negatives)
        mined = given.select([])
    else:
        remove_unreadable_embeddings(cache_dir / "embeddings")
        mined = mine_hard_negatives(
            group.select_columns(["query", "positive"]),
            load_model(),
            anchor_column_name="query",
            positive_column_name="positive",
            num_negatives=args.num_negatives,
            range_min=args.range_min,
            range_max=args.range_max,
            relative_margin=args.relative_margin,
            absolute_margin=args.absolute_margin,
            max_score=args.max_score,
            sampling_strategy=args.sampling_strategy,
            query_prompt=prompts[0],
            corpus_prompt=prompts[1],
            output_format="n-tuple",
            batch_size=args.batch_size,
            use_faiss=args.use_faiss,
            use_multi_process=args.use_multi_process,
            cache_folder=str(cache_dir / "embeddings"),
            verbose=False,
        )
    # Write then rename, so an interrupted save never looks like a finished cache entry.
    with atomic_target(cached) as partial:
        mined.save_to_disk(str(partial))
    return load_from_disk(str(cached)), len(group) - len(mined)
