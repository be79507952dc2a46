"""The run's ``status.json`` and page, written from the running session (main process).

A person (or ``fintts status``, or the next session's plan) reads where the run stands from these
two files, so every checkpoint, the session's start and its end rewrite them. Building the status
is the report's (:mod:`fintts.train.report.status`); what is here is what a session adds: its
clock's facts, its warnings with the store's and the clock's notes, and the rule that a disk too
full for them is said, never a reason to lose the session.
"""

from __future__ import annotations

from typing import Any

from fintts.train import phases
from fintts.train.report import card, status
from fintts.train.run import checkpoint
from fintts.train.run.layout import CARD, LOSS_PLOT
from fintts.train.session.clock import SessionClock
from fintts.train.session.session import Session


def clock_facts(clock: SessionClock) -> dict[str, float | None]:
    """The session's length and what its clock keeps free at the end, for estimates of the next sessions."""
    if clock.limit is None or clock.deadline is None:
        return {"limit": None, "held_back": 0.0}
    return {"limit": clock.limit, "held_back": round(clock.start + clock.limit - clock.deadline + clock.reserve(), 1)}


def write_status(session: Session, state_name: str, *, reason: str | None = None) -> dict[str, Any] | None:
    """Write ``status.json`` and, from it, the run's card (with the newest loss plot beside it); the status written.

    Only the main process writes (the others: ``None``). Returns the status even when the disk
    is too full to write it: a full disk is said (in the warnings, the log and the summary).
    """
    facts, run, built = session.facts, session.state, session.built
    if not facts.main:
        return None
    store, clock = facts.store, facts.clock
    root = store.root
    current = status.build(
        state=state_name, reason=reason, run=run, task=built.cfg.task, max_steps=built.max_steps,
        groups=[g.name for g in built.groups], monitor=built.monitor, monitor_mode=built.monitor_mode,
        root=root, store=store.url, about=built.task.describe(), memory=session.learnt.peaks,
        data=session.learnt.data, clock=clock_facts(clock),
        warnings=facts.record.warnings + [p for p in (store.problem(), clock.ceiling_note(), *store.notes()) if p],
        phases=phases.describe(facts.config.train.phases, run),
    )
    try:
        store.write_status(current)
        latest = checkpoint.current(root)
        plot = root / checkpoint.CHECKPOINTS / latest / LOSS_PLOT if checkpoint.is_checkpoint_name(latest) else None
        if plot is not None and plot.is_file():
            checkpoint.write_atomic(root / LOSS_PLOT, plot.read_bytes())
        repo = store.hub_repo
        page = card.render(current, built.task.card(current, repo), repo=repo, loss_plot=(root / LOSS_PLOT).is_file())
        checkpoint.write_atomic(root / CARD, page.encode())
    except OSError as err:
        facts.warn(f"could not write the run's status and page in {root} ({err})")
    return current
