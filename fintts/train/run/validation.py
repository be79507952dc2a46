"""Best and patience: what a validation's metrics change in the run's state (Lightning's ``EarlyStopping``).

Pure functions over :class:`~fintts.train.run.state.TrainerState`, as :mod:`fintts.train.phases`.
The best value, its step and the patience counter are the current phase's (see there); the
checkpoint holding the best weights is the next one saved, so it is cleared here.
"""

from __future__ import annotations

from collections.abc import Mapping

from fintts.train.run.state import TrainerState


def improves(value: float, best: float | None, mode: str, min_delta: float) -> bool:
    """Whether ``value`` beats ``best`` by more than ``min_delta`` (``mode``: ``min`` or ``max``)."""
    if best is None:
        return True
    return value < best - min_delta if mode == "min" else value > best + min_delta


def record(
    state: TrainerState, metrics: Mapping[str, float], *, monitor: str, mode: str, min_delta: float, patience: int
) -> tuple[bool, bool]:
    """Add this step's metrics to ``state``: whether the monitored one improved, and whether patience ran out.

    Without the monitored metric (none named, or the task did not give it) nothing changes.
    """
    state.evals.append({"step": state.step, **metrics})
    value = metrics.get(monitor) if monitor else None
    if value is None:
        return False, False
    if improves(value, state.best_value, mode, min_delta):
        state.best_value, state.best_step, state.bad_evals = value, state.step, 0
        state.best_checkpoint = None  # the next checkpoint saved will hold these weights
        return True, False
    state.bad_evals += 1
    return False, bool(patience) and state.bad_evals >= patience
