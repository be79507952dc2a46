"""Saving a checkpoint of the session's step and handing it to the store: the one act every process takes part in.

When a session saves, and why, is decided in :mod:`fintts.train.decision` (:class:`~fintts.train.decision.SaveReason`);
this room is the act, and the checkpoint's files are :mod:`fintts.train.run.checkpoint`'s.

Every process gives its random streams (a collective), the main one writes the folder whole or
not at all (:mod:`fintts.train.run.checkpoint`), and only then rewrites what depends on it: the
status, ``model/``'s export when no validation has found a best, the store's pruning and push.
Once the folder is written, nothing after it can keep it from being published. A disk too full
for it stops the session with what is intact said (:mod:`fintts.train.session.stopping`), decided
together by the processes so none waits for a peer that stopped.
"""

from __future__ import annotations

import time
from pathlib import Path

from accelerate.utils import gather_object

from fintts.train.decision import no_room_line
from fintts.train.machine.platform import library_versions
from fintts.train.processes.collective import vote
from fintts.train.report.summary import loss_plot_png
from fintts.train.run import checkpoint
from fintts.train.run.rng import capture_rng
from fintts.train.run.state import TrainerState
from fintts.train.session import exporting, reporting, stopping
from fintts.train.session.disk_room import make_room
from fintts.train.session.session import Session
from fintts.train.step.building import BuiltPhase


def save(session: Session, *, final: bool = False, export: bool = True, skippable: bool = False) -> bool:
    """Save a checkpoint of this step and hand it to the store; ``False`` when the disk is full (then nothing changed).
    ``final``: the session's last (it is published as such); ``export=False``: ``model/`` already holds this step's
    export (the final save's, made before its wait); ``skippable``: a save due by steps or time, which is skipped
    (``True``, nothing written) when the disk has no room for it (:mod:`fintts.train.session.disk_room`)."""
    facts, state, built, learnt = session.facts, session.state, session.built, session.learnt
    store = facts.store
    started = time.time()
    rngs = gather_object([capture_rng()])
    name = checkpoint.name_for_step(state.step)
    full = skipped = False
    if facts.main:
        state.rng = rngs
        state.guard = session.guard.state()
        state.precision, state.versions = facts.precision, library_versions()
        state.world_size, state.micro_batch_size = facts.world, built.micro
        facts.record.end_step = state.step
        facts.record.ended = time.time()
        if state.best_step is not None and state.best_checkpoint is None:
            state.best_checkpoint = name
        protect = [held for held in (state.best_checkpoint, *(r["checkpoint"] for r in state.phases)) if held]
        room = make_room(store, built.cfg.keep_last, protect) if skippable else None
        if room is not None and room.pruned:
            facts.log(f"step {state.step}: deleted {', '.join(room.pruned)} before this save, which keep_last deletes "
                      "after it, to make room for it on the disk")
        skipped = room is not None and not room.fits
        if skipped:
            facts.log(no_room_line(state.step, room.needed, room.free))
            if state.best_checkpoint == name:  # the best is not in it: the next save that is written holds it
                state.best_checkpoint = None
    if facts.main and not skipped:
        if export and state.best_step is None and exporting.slow_part(session) is not None:
            state.export_pending = True  # a kill before the export below is made leaves it to the next session
        try:
            checkpoint.save(
                store.root, name,
                lambda folder: write_checkpoint(folder, built, state, learnt.last_eval["files"] if learnt.last_eval else {},
                                                plot=final or store.push_due()),
            )
        except Exception as err:
            if not checkpoint.is_disk_full(err):
                raise
            full = True
            if isinstance(err, checkpoint.LatestNotWritten):  # the folder is whole: it is the one to resume from
                learnt.good.add(name)
                facts.stopping(stopping.latest_not_written(name, store.root))
            else:
                facts.stopping(stopping.disk_full(name, state, store.root))
        else:
            learnt.good.add(name)
            if export and state.best_step is None:  # no validated best yet: the newest weights are the model
                exporting.export(session)
            exporting.poll(session)  # a finished background export goes into this push
            holder = state.best_checkpoint
            phase_ends = [record["checkpoint"] for record in state.phases]  # each phase's last weights
            store.prune(built.cfg.keep_last, ([holder] if holder else []) + phase_ends)
            reporting.write_status(session, "running")
            store.publish(name, final=final)
            learnt.unlearnt_save = time.time() - started
            learn(session)
    # a skipped save needs no vote of its own: the other processes do the same either way (their random streams above,
    # this vote), and a skipped one is not full, so all go on together
    (full,) = vote([full], facts.device)
    facts.accelerator.wait_for_everyone()
    return not full


def learn(session: Session) -> None:
    """The clock's reserve learns how long the newest checkpoint takes to become durable: its save and the run's recent
    pushes (main process; after each save, each step, and the final wait).

    A save alone is not what the final one needs: a run's first saves, while its first push was still under way, made
    the reserve twice a save's seconds (0.6 s on the tests' Hub stand-in, whose pushes took 4 s there), and a final
    push had no time. So a save is learnt once a push has been measured (the run's, from earlier sessions too), or when
    the store has nothing left to push (a folder store: the save is all).
    """
    facts, learnt = session.facts, session.learnt
    if learnt.unlearnt_save is None:
        return
    store = facts.store
    pushes = store.transfer_seconds()[-5:]
    if not pushes and not store.wait(timeout=0):
        return  # its push is under way, and none was measured before: learnt when it lands
    learnt.durable = learnt.unlearnt_save + max(pushes or [0.0])
    learnt.unlearnt_save = None
    facts.clock.record(learnt.durable)
    session.state.durable_seconds = list(facts.clock.measured)


def write_checkpoint(folder: Path, built: BuiltPhase, state: TrainerState, samples: dict[str, bytes], *, plot: bool) -> None:
    """One checkpoint of the phase ``built`` into ``folder`` (:func:`checkpoint.write_files`); ``samples``: the newest
    validation's files; ``plot``: draw its loss plot (only for a checkpoint a person will look at: a pushed or a session's final one)."""
    checkpoint.write_files(
        folder, models=built.raw_models, optimizers={g.name: g.optimizer for g in built.groups}, schedulers=built.schedulers,
        scaler=built.scaler, state=state, config=built.config.to_dict(),
        files={**built.task.checkpoint_files(built.raw_models), **samples},
        loss_plot=loss_plot_png(state.history, state.evals) if plot else None,
    )
