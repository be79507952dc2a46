"""How long a run takes: steps, epochs, sessions and weeks of quota, from measured figures.

The arithmetic people do by hand, done once: a data set of ``N`` items at ``batch_size``
gives ``N // batch_size`` optimizer steps per epoch (the sampler drops the remainder), so
2000 clips at batch 8 give 250 steps per epoch, and 2800 steps are 11.2 epochs.

Time comes from measurements, never from a constant in the code: the seconds per step,
per validation and per checkpoint of a :mod:`fintts.train.bench` run of the same config on
the same device (or the run's own sessions, for a run in progress), and the start-up of a
session as the trainer recorded it (:data:`fintts.train.state.PHASES`). What cannot be
measured before the first session on the target machine — the install and model download
of a fresh container, the upload of the final checkpoint — is an :class:`Assumptions`
field, printed as assumed.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping

from fintts.train.config import TrainConfig, parse_duration


def total_steps(cfg: TrainConfig, steps_per_epoch: int) -> int:
    """The run's length in optimizer steps: ``epochs`` × steps per epoch when set, else ``max_steps``."""
    if cfg.epochs:
        return max(1, round(cfg.epochs * steps_per_epoch))
    return cfg.max_steps
