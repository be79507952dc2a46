"""Data order that survives a session break and a change of GPU count.

Each epoch has a *plan*: a list of optimizer-step batches of ``batch_size`` item indices,
derived only from ``(seed, epoch)``. Resuming at step ``k`` of the epoch starts the plan
at ``k`` — O(1), no batches are loaded to be thrown away. Each step batch is cut into
micro-batches of ``micro_batch_size``; rank ``r`` of ``world`` processes takes micro-batches
``r, r + world, ...``. So the samples in every optimizer step are the same on one CPU,
one GPU with accumulation, or two GPUs: the effective batch is the config's quantity.

With item lengths, the plan sorts each window of ``bucket_windows`` step batches by
length before cutting it (and shuffles the order of the resulting step batches), so a
micro-batch holds items of similar length and little padding, as bucketing samplers of
sequence models do.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from torch.utils.data import Sampler

from fintts.errors import ConfigError


@dataclass(frozen=True)
class EpochPlan:
    n_items: int
    batch_size: int
    seed: int
    lengths: Sequence[int] | None = None
    bucket_windows: int = 32

    def __post_init__(self) -> None:
        if self.n_items < self.batch_size:  # bad input, said in one line (a ValueError was a traceback)
            raise ConfigError(
                f"batch_size: the dataset has {self.n_items} usable items, fewer than batch_size={self.batch_size}; "
                "lower batch_size or add data"
            )

    @property
    def steps_per_epoch(self) -> int:
        return self.n_items // self.batch_size

    def steps(self, epoch: int) -> list[list[int]]:
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
        order = torch.randperm(self.n_items, generator=generator).tolist()
        usable = order[: self.steps_per_epoch * self.batch_size]
        if self.lengths is not None:
            window = self.batch_size * self.bucket_windows
            usable = [
                index
                for start in range(0, len(usable), window)
                for index in sorted(usable[start:start + window], key=lambda i: self.lengths[i])
            ]
        batches = [usable[i:i + self.batch_size] for i in range(0, len(usable), self.batch_size)]
        if self.lengths is not None:
            shuffle = torch.randperm(len(batches), generator=generator).tolist()
            batches = [batches[i] for i in shuffle]
        return batches


class MicroBatchSampler(Sampler[list[int]]):
    """This rank's micro-batches for the steps of one epoch from ``start_step`` on.

    One sampler (and one data loader) serves a whole session: :meth:`set_epoch` moves it to
    the next epoch, so a loader with persistent workers keeps them between epochs.
    """

    def __init__(self, plan: EpochPlan, epoch: int, start_step: int, *, micro_batch_size: int, rank: int = 0, world: int = 1):
        if plan.batch_size % (micro_batch_size * world):
            raise ValueError(
                f"batch_size={plan.batch_size} is not a multiple of micro_batch_size={micro_batch_size} × {world} device(s)"
            )
        self.plan, self.epoch, self.start_step = plan, epoch, start_step
        self.micro, self.rank, self.world = micro_batch_size, rank, world

    def set_epoch(self, epoch: int, start_step: int = 0) -> None:
        """Yield ``epoch``'s micro-batches from ``start_step`` on, the next time it is iterated."""
        self.epoch, self.start_step = epoch, start_step

    @property
    def accumulation(self) -> int:
        return self.plan.batch_size // (self.micro * self.world)

    def __len__(self) -> int:
        return (self.plan.steps_per_epoch - self.start_step) * self.accumulation

    def __iter__(self) -> Iterator[list[int]]:
        for batch in self.plan.steps(self.epoch)[self.start_step:]:
            micro = [batch[i:i + self.micro] for i in range(0, len(batch), self.micro)]
            yield from micro[self.rank::self.world]


def padding_fraction(batches: Sequence[Sequence[int]], lengths: Sequence[int], micro_batch_size: int) -> float:
    """The share of the padded micro-batches' positions that hold padding, not data.

    A micro-batch is padded to its longest item, so it costs ``items × longest`` positions
    of which ``sum(lengths)`` are data; over ``batches`` (one epoch's step batches) that is
    ``1 − Σ data / Σ padded``.
    """
    data = padded = 0
    for batch in batches:
        for start in range(0, len(batch), micro_batch_size):
            sizes = [lengths[i] for i in batch[start:start + micro_batch_size]]
            data += sum(sizes)
            padded += len(sizes) * max(sizes)
    return 1.0 - data / padded if padded else 0.0
