"""The end of a session: the final save, the wait for the store, the status and page, the lease given back.

Every end gives the lease back within the session's clock: a finished or stopped session
(:func:`final_save`, :func:`wait_durable`, :func:`tell_final`, :func:`give_back`), one that
failed (:func:`fail`: nothing saved is dropped, the newest verified checkpoint is pushed or
said to be on this disk only), one stopped by a signal during set-up (:func:`abandon`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from fintts.train import phases
from fintts.train.decision import FAILURES, FINISHED, StopReason
from fintts.train.machine.clock import SessionClock, SessionInterrupted
from fintts.train.processes.collective import announce, await_main, post_failure, posted_failures, vote
from fintts.train.report import card, status
from fintts.train.run import checkpoint
from fintts.train.run.layout import CARD, LOSS_PLOT
from fintts.train.run.state import TrainerState
from fintts.train.session.facts import SessionFacts
from fintts.train.step.building import BuiltPhase

#: Seconds the main process waits at most for the others to read the session's final status (they poll for it).
FINAL_READ = 10.0
#: Seconds the lease's release may take after a person stopped the final wait (they want the prompt back).
INTERRUPTED_RELEASE = 5.0


def final_save(reason: StopReason, state: TrainerState, facts: SessionFacts, *, intact: Callable[[str], bool],
               save: Callable[..., bool], export: Callable[[], None], settle: Callable[[StopReason], None]) -> StopReason:
    """Save the session's last step unless a checkpoint of it is intact, and publish it as final; why the session ended
    (a final save the disk refuses ends it for that). Every process takes part (the save gathers their random streams).

    ``save(final=True, export=False)`` saves a checkpoint, ``export()`` makes ``model/`` (the final weights are the
    voice while no validation has found a best), ``settle(reason)`` finishes the background export first.
    """
    main, store = facts.main, facts.store
    here = checkpoint.name_for_step(state.step)
    keep_latest = reason in (StopReason.DIVERGED, StopReason.DISK_FULL)  # the last good checkpoint / no room for another
    saving = not keep_latest and vote([main and not intact(here)], facts.device)[0]
    if saving and main and state.best_step is None:
        export()  # no validated best yet: the final weights are the voice, exported before the wait below
    settle(reason)  # so the final checkpoint says truly whether model/ still lacks its slow part
    if keep_latest:
        latest = checkpoint.current(store.root)
        if main and checkpoint.is_checkpoint_name(latest) and (store.root / checkpoint.CHECKPOINTS / latest).is_dir():
            store.publish(latest, final=True)
    elif saving:
        if not save(final=True, export=False):
            reason = StopReason.DISK_FULL
    elif main:
        try:
            checkpoint.point_latest(store.root, here)
        except checkpoint.LatestNotWritten:
            pass  # ``latest`` is gone, and without it every reader takes the newest complete checkpoint: this one
        store.publish(here, final=True)
    return reason


def final_state(reason: StopReason) -> str:
    """The run's status after a session that ended for ``reason``."""
    return "failed" if reason in FAILURES else "finished" if reason in FINISHED else "paused"


def tell_final(final: dict[str, Any], facts: SessionFacts) -> None:
    """The main process's final status, for the other processes to read (they wait for it off the device)."""
    closing = facts.clock.closing_time()
    announce("final", json.dumps(final), read_by=facts.world - 1,
             deadline=time.time() + FINAL_READ if closing is None else min(time.time() + FINAL_READ, closing))


def hear_final(clock: SessionClock) -> dict[str, Any]:
    """Rank 0's final status, so every process returns the same summary (and exits with the same code)."""
    return json.loads(await_main("final", clock.end))


def intact(name: str, good: set[str], facts: SessionFacts, *, step: int) -> bool:
    """Is ``name`` a checkpoint this session resumed from or saved (``good``), still matching its manifest?

    The end of a session decides by what it knows, not by ``latest``'s text: a ``latest``
    edited by hand, or a checkpoint damaged since, gets this step saved again.
    """
    if name not in good:
        return False
    try:
        checkpoint.verify(facts.store.root / checkpoint.CHECKPOINTS / name)
    except checkpoint.CheckpointError as err:
        facts.log(f"warning: {err}; saving step {step} again")
        return False
    return True


def wait_durable(facts: SessionFacts) -> tuple[bool, bool]:
    """Wait for the store to make the final checkpoint durable: until the clock's closing time, or a signal.

    Returns whether it is durable, and whether a person stopped the wait (they want the prompt back).
    """
    store, clock, stop = facts.store, facts.clock, facts.stop
    if store.wait(timeout=0):
        return True, False
    closing = clock.closing_time()
    seen = stop.received  # before saying so: a signal sent on reading the line below must count
    facts.log(f"waiting for the final checkpoint to reach {store.url} (Ctrl-C stops waiting; it stays on this disk)")
    durable = store.wait(timeout=None if closing is None else max(0.0, closing - time.time()), interrupted=lambda: stop.received > seen)
    return durable, stop.received > seen


def give_back(facts: SessionFacts, *, wait_interrupted: bool = False) -> None:
    """Release the lease within what is left of the session and close the store; hurried when a person stopped the wait."""
    left = facts.clock.left()
    if wait_interrupted:  # a person stopped the wait and wants the prompt back
        left = INTERRUPTED_RELEASE if left is None else min(left, INTERRUPTED_RELEASE)
    facts.store.release(timeout=left)
    facts.store.close(timeout=0.0 if wait_interrupted else 5.0 if left is None else min(5.0, left))


def release_now(facts: SessionFacts) -> None:
    """Release the lease within what is left of the session, and close the store without waiting for its pushes."""
    facts.store.release(timeout=facts.clock.left())
    facts.store.close(timeout=0.0)


def abandon(err: SessionInterrupted, facts: SessionFacts) -> None:
    """A signal during set-up: nothing was trained, so nothing is saved or marked failed; the lease is given back."""
    if facts.main:
        facts.log(str(err))
        release_now(facts)


def fail(err: BaseException, state: TrainerState | None, facts: SessionFacts, *, write_status: Callable[..., Any]) -> None:
    """Record why the session failed in its record; with several processes, the one that raised first is the reason.

    ``state`` is ``None`` when set-up had not built the phase: there is no state worth a status.
    """
    own = f"{type(err).__name__}: {err}"
    post_failure(facts.rank, own)
    if not facts.main or state is None:  # set-up had not built the phase: no state worth a status
        if facts.main:
            release_now(facts)
        return
    record, store, stop = facts.record, facts.store, facts.stop
    peers = posted_failures(facts.rank)
    record.ended, record.end_step = time.time(), state.step
    record.reason = f"error: {type(err).__name__}" if not peers else f"error in process {min(peers)}"
    if record not in state.sessions:
        state.sessions.append(record)
    seen = stop.received
    try:
        write_status("failed", reason="; ".join(f"process {r}: {m}" for r, m in sorted(peers.items())) or own)
        # nothing saved is dropped: the newest verified checkpoint is pushed, or said to be on this disk only
        facts.log(store.secure_newest(facts.clock.closing_time(), interrupted=lambda: stop.received > seen))
    finally:
        release_now(facts)


def clock_facts(clock: SessionClock) -> dict[str, float | None]:
    """The session's length and what its clock keeps free at the end, for estimates of the next sessions."""
    if clock.limit is None or clock.deadline is None:
        return {"limit": None, "held_back": 0.0}
    return {"limit": clock.limit, "held_back": round(clock.start + clock.limit - clock.deadline + clock.reserve(), 1)}


def write_status(state_name: str, reason: str | None, facts: SessionFacts, *, run: TrainerState, built: BuiltPhase,
                 peaks: list[dict[str, Any]], data: dict[str, Any] | None) -> dict[str, Any]:
    """Write ``status.json`` and, from it, the run's card (with the newest loss plot beside it) (main process).

    Returns the status even when the disk is too full to write it: a full disk is said
    (in the warnings, the log and the summary), never a reason to lose the session.
    """
    store, clock = facts.store, facts.clock
    root = store.root
    current = status.build(
        state=state_name, reason=reason, run=run, task=built.cfg.task, max_steps=built.max_steps,
        groups=[g.name for g in built.groups], monitor=built.monitor, monitor_mode=built.monitor_mode,
        root=root, store=store.url, about=built.task.describe(), memory=peaks,
        data=data, clock=clock_facts(clock),
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
