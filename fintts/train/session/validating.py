"""Validating: the held-out evaluation, the best kept (see :mod:`fintts.train.run.validation`), and ``model/``'s exports.

``model/`` holds the voice a person would use now: the validated best, or (no validation
yet) the newest weights. Its quick part is written in place by the main process; its slow
part is made in the background (:mod:`fintts.train.session.background_export`) while training goes
on, and the final save waits for it as long as the session's clock allows.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from accelerate.utils import gather_object

from fintts.train.decision import StopReason
from fintts.train.machine.clock import SessionClock
from fintts.train.processes.collective import announce, await_main, post_failure
from fintts.train.report.metrics import Board
from fintts.train.run import checkpoint, validation
from fintts.train.run.layout import MODEL_DIR
from fintts.train.run.rng import isolated_rng
from fintts.train.run.state import TrainerState
from fintts.train.session.background_export import BackgroundExport
from fintts.train.session.facts import SessionFacts
from fintts.train.session.saving import replace_export
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


def validate(built: BuiltPhase, state: TrainerState, writer: Board, facts: SessionFacts, *, export: Callable[[], None]) -> Validated:
    """Validate in every process: the evaluation, the best kept (and exported, by the main process), patience.

    Every process validates the same held-out data with the same weights and random
    stream; the main process keeps the results. An error is not raised here but brought
    to the step's vote (posted first, so the main process can name it), so the other
    processes learn of it in the same collective instead of waiting in the next one.
    """
    done = Validated(peaks=gather_object([memory.peak_memory(facts.device)]))
    try:
        done.evaluated = evaluate(built, state.step)
        done.early_stop = keep_best(done.evaluated, state, built, writer, facts, export=export, peaks=done.peaks)
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


def keep_best(evaluated: dict[str, Any], state: TrainerState, built: BuiltPhase, writer: Board, facts: SessionFacts, *,
              export: Callable[[], None], peaks: list[dict[str, Any]]) -> bool:
    """Record a validation (best and patience), export a new best (main process), say it; whether patience ran out."""
    metrics = evaluated["metrics"]
    for key, value in metrics.items():
        writer.scalar(key, value, state.step)
    for tag, entry in evaluated.pop("board", {}).items():  # logged once; the checkpoint keeps the files, not these
        writer.entry(tag, entry, state.step)
    improved, stop = validation.record(
        state, metrics, monitor=built.monitor, mode=built.monitor_mode, min_delta=built.cfg.min_delta, patience=built.cfg.patience,
    )
    if improved and facts.main:
        export()
    facts.log(
        f"step {state.step}: "
        + ", ".join(f"{k} {v:.4g}" for k, v in metrics.items())
        + (f" (best {state.best_value:.4g} at step {state.best_step})" if state.best_value is not None else "")
        + f"; memory: {memory.describe(peaks)}"
    )
    return stop


def export(built: BuiltPhase, state: TrainerState, exports: BackgroundExport, facts: SessionFacts) -> None:
    """Replace ``model/`` with the task's export, and start its slow part in the background; a disk too full for it
    keeps the previous one, and says so."""
    final = facts.store.root / MODEL_DIR
    err = replace_export(final, lambda folder: built.task.export(built.models, folder))
    if err is not None:
        facts.warn(f"could not export {final} at step {state.step} ({err}); it holds the previous export")
        return
    export_later(built, state, exports)


def slow_part(built: BuiltPhase, exports: BackgroundExport) -> Callable[[Path], None] | None:
    """The slow part of ``model/``'s export this session makes: ``None`` where the task has none or the session makes
    none (a bench's)."""
    return built.task.export_later() if exports.enabled else None


def export_later(built: BuiltPhase, state: TrainerState, exports: BackgroundExport) -> None:
    """Start the slow part of the export ``model/`` holds (main process), in the background."""
    derive = slow_part(built, exports)
    state.export_pending = derive is not None
    exports.exported(derive, state.step)


def poll_exports(exports: BackgroundExport, state: TrainerState, clock: SessionClock, durable: float | None) -> None:
    """Put a finished background export in place (main process); the final save waits for it, so the clock's reserve
    counts its time with the save's (``durable``: the newest checkpoint's save and push)."""
    seconds = exports.poll()
    state.export_pending = exports.pending()
    if seconds is not None:
        clock.record(seconds + (durable or 0.0))
        state.durable_seconds = list(clock.measured)


def settle_exports(reason: StopReason, state: TrainerState, exports: BackgroundExport | None, facts: SessionFacts, *,
                   durable: float | None) -> None:
    """Before the final save, the main process finishes the newest background export (so the final push carries it)
    while the others wait off the device. It gives up when only the final save's own time is left (without a session
    limit: after ``export_wait``), or on a signal (a stop asked for by a signal, or one while it waits): the export is
    then the next session's to make."""
    clock, stop = facts.clock, facts.stop
    if facts.main:
        closing = clock.closing_time()
        need = durable or clock.initial_reserve / 2
        deadline = time.time() if reason in (StopReason.SIGINT, StopReason.SIGTERM) else (
            None if closing is None else closing - 2 * need)
        if deadline is None and facts.config.train.export_wait is not None:
            deadline = time.time() + facts.config.train.export_wait
        seen = stop.received
        seconds = exports.settle(deadline, interrupted=lambda: stop.received > seen, say=facts.log)
        state.export_pending = exports.pending()  # what the final checkpoint tells the next session
        if seconds:
            facts.log(f"waited {seconds:.1f} s for the export of {MODEL_DIR}/ to finish")
        announce("exports")
    else:
        await_main("exports", clock.end)
