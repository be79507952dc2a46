"""The run's status: one dict, built in one place, that every reader shares.

``status.json`` in the store, the session summary printed at the end, ``fintts status``
and the run's card all show the same facts (state, step, best, latest checkpoint, loss,
sessions). They are computed here once, from the trainer's state, so they cannot
disagree; readers take them from the dict instead of recomputing them.

Keys: ``state`` (running | paused | finished | failed), ``reason``, ``run_name``, ``task``,
``step``, ``max_steps``, ``epoch``, ``monitor`` and ``monitor_mode``, ``best``
(``{"value", "step", "checkpoint"}``: the checkpoint that holds the best weights, see
:func:`best_checkpoint`), ``latest_checkpoint`` (its path), ``loss`` (the newest logged
losses) and ``main_loss`` (which of them is the headline), ``evals`` (the newest
validations), ``sessions``, ``time_used_seconds``, ``store``, ``about`` (the task's facts),
``warnings`` (what needs a person's attention now: this session's warnings and the store's
current trouble, e.g. a failing push), ``memory`` (the session's peak memory per device, :func:`fintts.train.step.memory.peak_memory`; empty
until the first validation), ``data`` (``items``, ``batch_size``, ``steps_per_epoch``, and where the
task says ``item_seconds``, the mean length of an item, and ``padding``, the share of padding in
the micro-batches with and without length buckets), ``clock`` (``limit``: the session's length
in seconds, ``None`` for none; ``held_back``: what the clock keeps free at its end, safety margin
and reserve), ``phase`` (a run in phases: the current one's ``index``, ``count``, ``name``, ``start_step``,
``resolved`` and the ``finished`` ones' records, see :mod:`fintts.train.phases`; ``None``
without phases) and ``updated`` (unix time). Each session's ``phases`` say where its time went
(:data:`fintts.train.run.state.PHASES`); history entries carry ``step_seconds``, the mean seconds
per optimizer step since the previous entry.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fintts.train.run import checkpoint
from fintts.train.run.state import TrainerState

#: Validations kept in the status (the full list is in each checkpoint's ``state.json``).
RECENT_EVALS = 20
#: The history key that holds seconds per step; the other keys but ``step`` and ``lr`` are losses.
STEP_SECONDS = "step_seconds"
NOT_LOSSES = frozenset({"step", "lr", STEP_SECONDS})


def main_loss_key(groups: Sequence[str]) -> str:
    """The loss a person watches: ``loss`` with one optimizer group, else the first group's (the generator's)."""
    return "loss" if len(groups) == 1 else f"{groups[0]}/loss"


def best_checkpoint(best_step: int | None, names: Sequence[str]) -> str | None:
    """The checkpoint holding the best weights: the first one saved at or after the best validation.

    A validation does not write a checkpoint (that would double the writes of a run that keeps
    improving); the weights it scored are exported to ``model/`` at once, and the next
    checkpoint, which the trainer then protects from pruning, holds them for resuming. The
    trainer records that name in its state when it saves it (``TrainerState.best_checkpoint``);
    this search among ``names`` (the store's, the Hub's included) is for checkpoints saved before it did.
    """
    if best_step is None:
        return None
    after = sorted((n for n in names if checkpoint.step_of(n) >= best_step), key=checkpoint.step_of)
    return after[0] if after else None


def build(
    *,
    state: str,
    reason: str | None,
    run: TrainerState,
    task: str,
    max_steps: int,
    groups: Sequence[str],
    monitor: str | None,
    monitor_mode: str,
    root: Path,
    store: str,
    about: dict[str, Any],
    warnings: Sequence[str] = (),
    memory: list[dict[str, Any]],
    data: dict[str, Any],
    clock: dict[str, float | None],
    phases: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The status of the run in ``root`` as its trainer sees it now."""
    latest = checkpoint.current(root)
    best = None
    if run.best_step is not None:
        best = {"value": run.best_value, "step": run.best_step, "checkpoint": run.best_checkpoint}
    return {
        "state": state,
        "reason": reason,
        "run_name": run.run_name,
        "task": task,
        "step": run.step,
        "max_steps": max_steps,
        "epoch": run.epoch,
        "monitor": monitor or None,
        "monitor_mode": monitor_mode,
        "best": best,
        "latest_checkpoint": str(root / checkpoint.CHECKPOINTS / latest) if latest else None,
        "loss": run.history[-1] if run.history else None,
        "main_loss": main_loss_key(groups),
        "evals": run.evals[-RECENT_EVALS:],
        "sessions": [
            dataclasses.asdict(s) | {"seconds": round(s.seconds, 1), "phases": {k: round(v, 3) for k, v in s.phases.items()}}
            for s in run.sessions
        ],
        "time_used_seconds": round(run.seconds_trained, 1),
        "store": store,
        "about": about,
        "warnings": list(warnings),
        "memory": memory,
        "data": data,
        "clock": clock,
        "phase": phases,
        "updated": time.time(),
    }
