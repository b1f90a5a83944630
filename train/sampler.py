"""Batch samplers: every global batch (all devices, one optimizer micro-step) comes from one (source, language) group;
within a group, batches may hold texts of similar length (``LengthBucketedBatchSampler``).

sentence-transformers' ``ProportionalBatchSampler`` already keeps each local batch inside one group, but under
DDP accelerate deals consecutive batches to different ranks, so the gathered in-batch negatives would mix
groups. This sampler draws a group per global step and yields ``world_size`` consecutive batches from it; with
one process it is the proportional sampler. Every group's batches come from its own sampler (no duplicate texts
within a batch), and the order depends only on (seed, epoch), so a resumed run skips exactly the batches it
already trained on.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import accumulate

import torch
from sentence_transformers.base.sampler import DefaultBatchSampler, MultiDatasetDefaultBatchSampler
from torch.utils.data import BatchSampler, ConcatDataset

# Rows sorted by length within windows of this many batches: wide enough that a batch's rows have similar lengths,
# narrow enough that a window is still a random draw from the whole group (the "sortish" order of length-grouped
# samplers, e.g. transformers' LengthGroupedSampler, which groups 50 batches per window).
LENGTH_WINDOW_BATCHES = 50


class SingleGroupGlobalBatchSampler(MultiDatasetDefaultBatchSampler):
    """Proportional multi-dataset sampling in runs of ``world_size`` same-group batches.

    Args:
        dataset: the ConcatDataset of all groups (built by the trainer from the DatasetDict).
        batch_samplers: one batch sampler per group, in the same order.
        generator: random generator for the group order.
        seed: base seed; the order of epoch e uses seed + e.
        world_size: number of data-parallel processes. A group's batches beyond the last full run of
            ``world_size`` are skipped this epoch (every rank must gather tensors of the same shape).
    """

    def __init__(
        self,
        dataset: ConcatDataset,
        batch_samplers: list[BatchSampler],
        generator: torch.Generator | None = None,
        seed: int = 0,
        world_size: int = 1,
    ) -> None:
        super().__init__(dataset, batch_samplers, generator=generator, seed=seed)
        self.world_size = world_size

    def __iter__(self):
        offsets = [0, *accumulate(len(group) for group in self.dataset.datasets)]
        runs_per_group = []
        for offset, sampler in zip(offsets, self.batch_samplers):
            batches = [[index + offset for index in batch] for batch in sampler]
            usable = len(batches) - len(batches) % self.world_size
            runs_per_group.append([batches[i : i + self.world_size] for i in range(0, usable, self.world_size)])
        # Seed after the group samplers ran: they re-seed the shared generator when iterated.
        if self.generator is not None:
            self.generator.manual_seed(self.seed + self.epoch)
        group_of_run = [group for group, runs in enumerate(runs_per_group) for _ in runs]
        pending = [iter(runs) for runs in runs_per_group]
        for position in torch.randperm(len(group_of_run), generator=self.generator).tolist():
            yield from next(pending[group_of_run[position]])

    def __len__(self) -> int:
        return sum(len(sampler) - len(sampler) % self.world_size for sampler in self.batch_samplers)


class LengthBucketedBatchSampler(DefaultBatchSampler):
    """Batches of one group whose documents have similar lengths, no text twice in a batch.

    The collator pads each column to its longest text in the batch, so a random batch of code (median 80 tokens,
    many at the 128 cap) computes mostly padding; batches of similar length compute real tokens. The order: a random
    permutation of the rows (seeded by seed + epoch), cut into windows of ``window_batches`` batches, each window
    sorted by the length (characters, a proxy for tokens that needs no tokenizer) of ``length_column``, cut into
    batches; the batches are then shuffled, so long and short batches alternate over training. A row whose text is
    already in the batch being filled waits for the next batch, as sentence-transformers' NoDuplicatesBatchSampler
    does (in-batch negatives must not contain the positive). sentence-transformers ships no length-grouped batch
    sampler (5.x, 6.x), and transformers' LengthGroupedSampler knows nothing of duplicate texts: hence this one.

    Args: as sentence-transformers' batch samplers (it is passed as ``batch_sampler`` to its trainer), plus
        length_column: the column whose length orders the rows (the documents: the longer texts).
        window_batches: batches per sorted window.
    """

    def __init__(self, dataset, batch_size: int, drop_last: bool, valid_label_columns: list[str] | None = None,
                 generator: torch.Generator | None = None, seed: int = 0, length_column: str = "positive",
                 window_batches: int = LENGTH_WINDOW_BATCHES) -> None:
        super().__init__(dataset, batch_size, drop_last, valid_label_columns, generator, seed)
        if length_column not in dataset.column_names:
            raise ValueError(f"length_column {length_column!r} is not a column of the training data "
                             f"(columns: {', '.join(dataset.column_names)}); pass one of them.")
        text_columns = [name for name in dataset.column_names if name not in (valid_label_columns or [])]
        self.lengths = [len(text) for text in dataset[length_column]]
        # Each row's texts, for the no-duplicates rule: a row shares no text with the rest of its batch.
        self.row_texts = [frozenset(texts) for texts in zip(*(dataset[name] for name in text_columns))]
        self.window = window_batches * batch_size

    def __iter__(self) -> Iterator[list[int]]:
        if self.generator is not None:
            self.generator.manual_seed(self.seed + self.epoch)
        order = torch.randperm(len(self.lengths), generator=self.generator).tolist()
        batches, left = [], []
        for start in range(0, len(order), self.window):
            left = sorted(left + order[start:start + self.window], key=self.lengths.__getitem__)
            while True:
                batch, rest = self._take_batch(left)
                if len(batch) < self.batch_size:  # the rest waits for the next window's rows
                    break
                batches.append(batch)
                left = rest
        while left and not self.drop_last:  # what no full batch could take: smaller batches, still no text twice
            batch, left = self._take_batch(left)
            batches.append(batch)
        for position in torch.randperm(len(batches), generator=self.generator).tolist():
            yield batches[position]

    def _take_batch(self, rows: list[int]) -> tuple[list[int], list[int]]:
        """The first rows of `rows` (in order) that fill a batch sharing no text, and the rows left waiting."""
        batch, texts, waiting = [], set(), []
        for row in rows:
            if len(batch) == self.batch_size or not texts.isdisjoint(self.row_texts[row]):
                waiting.append(row)
            else:
                batch.append(row)
                texts |= self.row_texts[row]
        return batch, waiting

    def __len__(self) -> int:
        full, rest = divmod(len(self.lengths), self.batch_size)
        return full + (1 if rest and not self.drop_last else 0)
