"""Validating: the held-out evaluation in every process, the best kept (see :mod:`fintts.train.run.validation`), patience.

Every process validates the same held-out data with the same weights and random stream, so
their votes agree; the main process keeps the results and exports a new best
(:mod:`fintts.train.session.exporting`). A validation's error is not raised where it happens but
brought to the step's vote (:mod:`fintts.train.decision`), so every process learns of it in the
same collective instead of waiting for the failed one in the next. A validation that would run
into the reserve for the final save and push is skipped (:func:`fits`), decided together.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from accelerate.utils import gather_object

from fintts.train.processes.collective import post_failure, vote
from fintts.train.report.metrics import Board
from fintts.train.report.summary import describe_peaks
from fintts.train.run import checkpoint, validation
from fintts.train.run.rng import isolated_rng
from fintts.train.session import exporting
from fintts.train.session.session import Session
from fintts.train.step import memory
from fintts.train.step.building import BuiltPhase
from fintts.train.task import BOARD_KINDS


@dataclasses.dataclass
class Validated:
    """What one validation leaves: every process's peak memory, the evaluation (``None`` if it raised), whether
    patience ran out, and this process's error (brought to the step's vote, not raised)."""

    peaks: list[dict[str, Any]]
    evaluated: dict[str, Any] | None = None
    early_stop: bool = False
    error: Exception | None = None


def fits(session: Session) -> bool:
    """Does a validation started now end before the reserve for the final save and push (see
    :meth:`~fintts.train.session.clock.SessionClock.validation_fits`)? Voted, so every process validates or none (each
    one's clock reads its own time); a skipped one is said, with the seconds that decided it."""
    facts = session.facts
    clock = facts.clock
    (late,) = vote([not clock.validation_fits()], facts.device)
    if late:
        left = clock.remaining()
        facts.log(
            f"step {session.state.step}: validation skipped: it may take {clock.validation_seconds():.1f} s and "
            f"{max(0.0, left or 0.0):.1f} s are left before the reserve for the final save and push"
        )
    return not late


def validate(session: Session, writer: Board) -> Validated:
    """Validate in every process: the evaluation, the best kept (and exported, by the main process), patience.

    An error is posted first (so the main process can name it) and returned, for the step's vote.
    """
    facts, state = session.facts, session.state
    done = Validated(peaks=gather_object([memory.peak_memory(facts.device)]))
    try:
        done.evaluated = evaluate(session.built, state.step)
        done.early_stop = keep_best(done.evaluated, session, writer, peaks=done.peaks)
    except Exception as err:
        done.error = err
        post_failure(facts.rank, f"{type(err).__name__}: {err}")
        facts.log(f"validation failed at step {state.step}: {type(err).__name__}: {err}")
    return done


def evaluate(built: BuiltPhase, step: int) -> dict[str, Any]:
    """The task's evaluation of the phase's models at ``step`` (on its own random stream): metrics and files."""
    for model in built.models.values():
        model.eval()
    with torch.no_grad(), isolated_rng(built.cfg.seed + 99_991):
        evaluation = built.task.evaluate(built.models, step)
    for model in built.models.values():
        model.train()
    for rel in evaluation.files:  # written into checkpoints: a name from a corpus must not reach outside them
        checkpoint.safe_relative_path(rel, what=f"{type(built.task).__name__}.evaluate() file")
    for tag, entry in evaluation.board.items():  # a wrong kind fails at the first validation, not as a missing log
        if entry.kind not in BOARD_KINDS:
            raise ValueError(f"{type(built.task).__name__}.evaluate() board entry {tag!r}: kind {entry.kind!r} is not one of "
                             f"{', '.join(BOARD_KINDS)}")
    return {"step": step, "metrics": evaluation.metrics, "files": evaluation.files, "board": evaluation.board}


def keep_best(evaluated: dict[str, Any], session: Session, writer: Board, *, peaks: list[dict[str, Any]]) -> bool:
    """Record a validation (best and patience), export a new best (main process), say it; whether patience ran out."""
    state, built, facts = session.state, session.built, session.facts
    metrics = evaluated["metrics"]
    for key, value in metrics.items():
        writer.scalar(key, value, state.step)
    for tag, entry in evaluated.pop("board", {}).items():  # logged once; the checkpoint keeps the files, not these
        writer.entry(tag, entry, state.step)
    improved, stop = validation.record(
        state, metrics, monitor=built.monitor, mode=built.monitor_mode, min_delta=built.cfg.min_delta, patience=built.cfg.patience,
    )
    if improved and facts.main:
        exporting.export(session)
    facts.log(
        f"step {state.step}: "
        + ", ".join(f"{k} {v:.4g}" for k, v in metrics.items())
        + (f" (best {state.best_value:.4g} at step {state.best_step})" if state.best_value is not None else "")
        + f"; memory: {describe_peaks(peaks)}"
    )
    return stop
