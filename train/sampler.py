"""Batch sampler: every global batch (all devices, one optimizer micro-step) comes from one (source, language) group.

sentence-transformers' ``ProportionalBatchSampler`` already keeps each local batch inside one group, but under
DDP accelerate deals consecutive batches to different ranks, so the gathered in-batch negatives would mix
groups. This sampler draws a group per global step and yields ``world_size`` consecutive batches from it; with
one process it is the proportional sampler. Every group's batches come from its own sampler (no duplicate texts
within a batch), and the order depends only on (seed, epoch), so a resumed run skips exactly the batches it
already trained on.
"""

from __future__ import annotations

from itertools import accumulate

import torch
from sentence_transformers.base.sampler import MultiDatasetDefaultBatchSampler
from torch.utils.data import BatchSampler, ConcatDataset


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
