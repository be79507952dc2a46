"""``model/``'s exports: the voice a person would use now, replaced as the run trains.

``model/`` holds the validated best, or (no validation yet) the newest weights. Its quick part is
written in place by the main process, whole or not at all (a full disk keeps the previous one);
its slow part is made in a child process (:mod:`fintts.train.session.background_export`) while
training goes on, put in place when it finishes, and waited for by the final save as long as the
session's clock allows, so the final push carries it. What a session could not make is recorded
in the checkpoint (``export_pending``) for the next one (:mod:`fintts.train.session.pending_export`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from fintts.train.decision import StopReason
from fintts.train.processes.collective import announce, await_main
from fintts.train.run.layout import MODEL_DIR
from fintts.train.session.background_export import replace_export
from fintts.train.session.session import Session


def export(session: Session) -> None:
    """Replace ``model/`` with the task's export, and start its slow part in the background (main process); a disk too
    full for it keeps the previous one, and says so."""
    built, facts = session.built, session.facts
    final = facts.store.root / MODEL_DIR
    err = replace_export(final, lambda folder: built.task.export(built.models, folder))
    if err is not None:
        facts.warn(f"could not export {final} at step {session.state.step} ({err}); it holds the previous export")
        return
    export_later(session)


def slow_part(session: Session) -> Callable[[Path], None] | None:
    """The slow part of ``model/``'s export this session makes: ``None`` where the task has none or the session makes
    none (a bench's, or another process's)."""
    return session.built.task.export_later() if session.exports.enabled else None


def export_later(session: Session) -> None:
    """Start the slow part of the export ``model/`` holds (main process), in the background."""
    derive = slow_part(session)
    session.state.export_pending = derive is not None
    session.exports.exported(derive, session.state.step)


def poll(session: Session) -> None:
    """Put a finished background export in place (main process); the final save waits for it, so the clock's reserve
    counts its time with the save's (the newest checkpoint's save and push)."""
    exports, state, clock = session.exports, session.state, session.facts.clock
    seconds = exports.poll()
    state.export_pending = exports.pending()
    if seconds is not None:
        clock.record(seconds + (session.learnt.durable or 0.0))
        state.durable_seconds = list(clock.measured)


def settle(reason: StopReason, session: Session) -> None:
    """Before the final save, the main process finishes the newest background export (so the final push carries it)
    while the others wait off the device. It gives up when only the final save's own time is left (without a session
    limit: after ``export_wait``), or on a signal (a stop asked for by a signal, or one while it waits): the export is
    then the next session's to make."""
    facts = session.facts
    clock, stop = facts.clock, facts.stop
    if facts.main:
        closing = clock.closing_time()
        need = session.learnt.durable or clock.initial_reserve / 2
        deadline = time.time() if reason in (StopReason.SIGINT, StopReason.SIGTERM) else (
            None if closing is None else closing - 2 * need)
        if deadline is None and facts.config.train.export_wait is not None:
            deadline = time.time() + facts.config.train.export_wait
        seen = stop.received
        seconds = session.exports.settle(deadline, interrupted=lambda: stop.received > seen, say=facts.log)
        session.state.export_pending = session.exports.pending()  # what the final checkpoint tells the next session
        if seconds:
            facts.log(f"waited {seconds:.1f} s for the export of {MODEL_DIR}/ to finish")
        announce("exports")
    else:
        await_main("exports", clock.end)
