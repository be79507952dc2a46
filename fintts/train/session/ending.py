"""The end of a session: the final save, the wait for the store, the status and page, the lease given back.

Every end gives the lease back within the session's clock, and says what is safe before it does:
a finished or stopped session (:func:`finish`: the final save, the wait, the summary, the release),
one that failed (:func:`fail`: nothing saved is dropped, the newest verified checkpoint is pushed or
said to be on this disk only), one stopped by a signal during set-up (:func:`abandon`), and one whose
training overran its time (:class:`SessionEnd`, which the watchdog's thread ends). The other
processes wait for the main one's final word off the device, never in a collective while it waits
for the Hub, so a slow final push cannot make a process group's timeout abort them.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

from accelerate.utils import gather_object

from fintts.train.decision import STOPS, SaveReason, StopReason, save_line, stop_line
from fintts.train.processes.collective import announce, await_main, post_failure, posted_failures, vote
from fintts.train.report.summary import SessionSummary
from fintts.train.run import checkpoint
from fintts.train.session import exporting, reporting, saving, watchdog
from fintts.train.session.background_export import BackgroundExport
from fintts.train.session.clock import SessionClock, SessionInterrupted
from fintts.train.session.facts import SessionFacts
from fintts.train.session.session import Session
from fintts.train.step import memory

#: Seconds the main process waits at most for the others to read the session's final status (they poll for it).
FINAL_READ = 10.0
#: Seconds the lease's release may take after a person stopped the final wait (they want the prompt back).
INTERRUPTED_RELEASE = 5.0


@dataclasses.dataclass
class SessionEnd:
    """How the session ends when the loop cannot end it: on an error, or (the watchdog's thread) when training overran.

    ``session`` is ``None`` while the session sets up (it is set once built): then there is no
    state worth a status, and failing only gives the lease back.
    """

    facts: SessionFacts
    exports: BackgroundExport
    session: Session | None = None

    def fail(self, err: BaseException) -> None:
        """Record why the session failed, push what it saved, give the lease back (see :func:`fail`)."""
        fail(err, self.session, self.facts)

    def overrun(self, error: BaseException) -> None:
        """The watchdog's end of the session (another thread; the main one is stuck): as a failure, export closed."""
        try:
            self.fail(error)
        finally:
            self.exports.close()

    def where(self) -> str:
        """Where training stands, for the watchdog's error."""
        if self.session is None:
            return watchdog.where(0, None, 0.0)
        learnt = self.session.learnt
        return watchdog.where(self.session.state.step, learnt.step_began, learnt.mean_step)


def finish(session: Session, reason: StopReason, resumed_from: str | None) -> SessionSummary:
    """The final save, then (main process) the wait for the store, the status and the lease's release; the summary,
    the same in every process (printed before the release: whatever happens next, it has been said)."""
    facts, record, state = session.facts, session.facts.record, session.state
    record.reason = reason.value  # before the final save, so the checkpoint's sessions log says why
    started = time.time()
    reason = final_save(reason, session)
    record.reason = reason.value  # a final save the disk refused
    session.learnt.peaks = gather_object([memory.peak_memory(facts.device)])
    wait_interrupted = False
    if facts.main:
        durable, wait_interrupted = wait_durable(facts)
        saving.learn(session)  # the final push's time, for the status's estimates of the next sessions
        pending = facts.store.pending()
        facts.spent("final", started)
        record.end_step, record.ended = state.step, time.time()
        final = {"status": reporting.write_status(session, final_state(reason), reason=reason.value), "durable": durable,
                 "pending": pending}
        tell_final(final, facts)
    else:
        final = hear_final(facts.clock)
    summary = SessionSummary.from_status(
        final["status"], resumed_from=resumed_from, durable=final["durable"], pending=final["pending"],
        clock_origin=facts.clock_origin,
    )
    facts.log(summary.format())  # before the release: whatever happens next, this has been said
    if facts.main:
        give_back(facts, wait_interrupted=wait_interrupted)
    return summary


def final_save(reason: StopReason, session: Session) -> StopReason:
    """Save the session's last step unless a checkpoint of it is intact, and publish it as final; why the session ended
    (a final save the disk refuses ends it for that). Every process takes part (the save gathers their random streams).

    While no validation has found a best, the final weights are the voice: ``model/`` is exported from them first, and
    the background export settled, so the final checkpoint says truly whether ``model/`` still lacks its slow part.
    """
    facts, state = session.facts, session.state
    main, store = facts.main, facts.store
    here = checkpoint.name_for_step(state.step)
    keep_latest = not STOPS[reason].final_save  # the last good checkpoint / no room for another
    save_here = not keep_latest and vote([main and not intact(here, session)], facts.device)[0]
    if save_here and main and state.best_step is None:
        exporting.export(session)  # no validated best yet: the final weights are the voice, exported before the wait below
    exporting.settle(reason, session)
    if keep_latest:
        latest = checkpoint.current(store.root)
        if main and checkpoint.is_checkpoint_name(latest) and (store.root / checkpoint.CHECKPOINTS / latest).is_dir():
            store.publish(latest, final=True)
    elif save_here:
        facts.log(save_line(SaveReason.FINAL, state.step))
        if not saving.save(session, final=True, export=False):
            reason = StopReason.DISK_FULL
            facts.log(stop_line(reason, state.step))
    elif main:
        try:
            checkpoint.point_latest(store.root, here)
        except checkpoint.LatestNotWritten:
            pass  # ``latest`` is gone, and without it every reader takes the newest complete checkpoint: this one
        store.publish(here, final=True)
    return reason


def final_state(reason: StopReason) -> str:
    """The run's status after a session that ended for ``reason`` (:data:`fintts.train.decision.STOPS`)."""
    return STOPS[reason].run_state


def tell_final(final: dict[str, Any], facts: SessionFacts) -> None:
    """The main process's final status, for the other processes to read (they wait for it off the device)."""
    closing = facts.clock.closing_time()
    announce("final", json.dumps(final), read_by=facts.world - 1,
             deadline=time.time() + FINAL_READ if closing is None else min(time.time() + FINAL_READ, closing))


def hear_final(clock: SessionClock) -> dict[str, Any]:
    """Rank 0's final status, so every process returns the same summary (and exits with the same code)."""
    return json.loads(await_main("final", clock.end))


def intact(name: str, session: Session) -> bool:
    """Is ``name`` a checkpoint this session resumed from or saved (``good``), still matching its manifest?

    The end of a session decides by what it knows, not by ``latest``'s text: a ``latest``
    edited by hand, or a checkpoint damaged since, gets this step saved again.
    """
    facts = session.facts
    if name not in session.learnt.good:
        return False
    try:
        checkpoint.verify(facts.store.root / checkpoint.CHECKPOINTS / name)
    except checkpoint.CheckpointError as err:
        facts.log(f"warning: {err}; saving step {session.state.step} again")
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


def fail(err: BaseException, session: Session | None, facts: SessionFacts) -> None:
    """Record why the session failed in its record; with several processes, the one that raised first is the reason.

    ``session`` is ``None`` when set-up had not built the phase: there is no state worth a status.
    """
    own = f"{type(err).__name__}: {err}"
    post_failure(facts.rank, own)
    if not facts.main or session is None:  # set-up had not built the phase: no state worth a status
        if facts.main:
            release_now(facts)
        return
    record, store, stop, state = facts.record, facts.store, facts.stop, session.state
    peers = posted_failures(facts.rank)
    record.ended, record.end_step = time.time(), state.step
    record.reason = f"error: {type(err).__name__}" if not peers else f"error in process {min(peers)}"
    if record not in state.sessions:
        state.sessions.append(record)
    seen = stop.received
    try:
        reporting.write_status(session, "failed", reason="; ".join(f"process {r}: {m}" for r, m in sorted(peers.items())) or own)
        # nothing saved is dropped: the newest verified checkpoint is pushed, or said to be on this disk only
        facts.log(store.secure_newest(facts.clock.closing_time(), interrupted=lambda: stop.received > seen))
    finally:
        release_now(facts)
