"""Random streams of a run's processes: the same for building the models, each its own after.

Every process seeds the config's ``seed`` before it builds the models, so their initial
weights agree (DDP would broadcast the first process's anyway). The draws that follow —
dropout masks, a model's sampling noise, random crops — must not agree: with the same
stream on both GPUs each batch's second half gets the noise of its first, correlated
draws that waste half of what the noise is for. ``torch.manual_seed`` seeds the CPU and
every CUDA device, so one call per process covers both.
"""

from __future__ import annotations

import torch

#: Distance between the seeds of neighbouring processes: far from the small offsets a person gives ``seed``.
RANK_STRIDE = 1_000_003


def seed_process(seed: int, rank: int) -> None:
    """Give process ``rank`` of a new run its own random streams, once the models are built.

    The first process keeps the stream it has, so a one-process run draws exactly what it
    drew before processes had streams of their own.
    """
    if rank:
        torch.manual_seed(seed + RANK_STRIDE * rank)
