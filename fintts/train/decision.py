"""Why a session stops or saves a checkpoint: every reason, in one place, and the one decision after each step.

**Start here** to learn why a session ended or saved. Every reason a session stops is a
:class:`StopReason`, and :data:`STOPS` says of each the run's state after it, whether the session
saves its last step, what decides it and the line the session logs; every reason it saves a
checkpoint is a :class:`SaveReason`, with its line (:data:`SAVES`). Nothing else stops or saves a
session that trains: a failure outside these (an error in a step, a kill) ends it through
:mod:`fintts.train.session.ending`'s ``fail``, with nothing but what it already saved.

Most reasons are found after an optimizer step, by each process alone (:func:`judge`, and the
step's own flags: a signal, an out-of-memory step, a validation's patience or error), and one
all-reduce sums every process's :class:`Flags` (:func:`decide`). Every process then acts on the same
:class:`Decision`: they all stop after the same step for the same reason, and they all save or none
does. No process ever enters a collective (a save gathers every process's random streams) because of
a value only it has. The loop (:mod:`fintts.train.session.loop`) logs each decision's
:meth:`Decision.line`; the few reasons found elsewhere (a run already over, a phase's end, a save the
disk refused, the final save) are named in the tables too, with where they are decided.

When several reasons hold at once, :data:`PRECEDENCE` picks one: a failure first (what
went wrong decides what is saved), then the run being finished, then a person's signal,
then the session's own deadline. An early stop found at the last step is ``early_stopping``,
and a signal that arrives in the step that finishes the run does not turn ``finished``
into ``paused``.

Pure functions over what the processes saw: torch is imported only by :func:`decide`'s vote, so the
summary and ``fintts status`` read the reasons' words without it.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


class StopReason(str, enum.Enum):
    """Why a session stopped, in :data:`PRECEDENCE`'s order; the value is what ``status.json`` and the sessions log say."""

    VALIDATION_ERROR = "error"
    OUT_OF_MEMORY = "out_of_memory"
    DIVERGED = "diverged"
    DISK_FULL = "disk_full"
    EARLY_STOPPING = "early_stopping"
    MAX_STEPS = "max_steps"
    SIGINT = "SIGINT"
    SIGTERM = "SIGTERM"
    DEADLINE = "deadline"

    def __str__(self) -> str:
        return self.value

    @property
    def words(self) -> str:
        """What a person reads: the summary's ``stopped`` line and the log's."""
        return STOPS[self].words


@dataclasses.dataclass(frozen=True)
class Stop:
    """What a stop reason means for the run: its state after the session, and whether its last step is saved."""

    #: the run's ``status.json`` state after a session that stopped for this reason.
    run_state: str
    #: the final save saves the session's last step (else ``latest`` stays: the last good checkpoint, or no room for one).
    final_save: bool
    words: str


#: Every reason a session stops, and where it is decided.
STOPS: dict[StopReason, Stop] = {
    # a validation raised in some process (validating.validate, brought to the vote); the session then fails with it
    StopReason.VALIDATION_ERROR: Stop("failed", True, "a validation raised an error (see the error)"),
    # a step ran out of memory in some process (step.optimizer_step, which every process learns of in the step)
    StopReason.OUT_OF_MEMORY: Stop("failed", True, "the device ran out of memory (see the warning for what to change)"),
    # the step guard's verdict (step.guard.StepGuard: non-finite or spiking losses, too many skipped steps; judge)
    StopReason.DIVERGED: Stop("failed", False, "training diverged: the steps went non-finite or spiked (see the warning)"),
    # a save the disk refused: after a vote to save, at a phase's end, or the final save (session.saving.save)
    StopReason.DISK_FULL: Stop("failed", False, "the disk is full (see the warning)"),
    # the last phase's validation ran out of patience (validating; an earlier phase's only ends the phase)
    StopReason.EARLY_STOPPING: Stop("finished", True, "early stopping: the monitored metric stopped improving"),
    # the step count reached max_steps (judge), or an earlier session already had (already_over)
    StopReason.MAX_STEPS: Stop("finished", True, "reached max_steps"),
    # a person's signal (session.clock.StopRequest), brought to the vote
    StopReason.SIGINT: Stop("paused", True, "interrupted (SIGINT)"),
    StopReason.SIGTERM: Stop("paused", True, "asked to stop (SIGTERM)"),
    # the session clock: one more step would eat the reserve for the final save and push (judge)
    StopReason.DEADLINE: Stop("paused", True, "the session's time budget is used up (stopped before the deadline, with the "
                                              "reserve for saving)"),
}
#: Which reason wins when several hold after one step: the first in this order.
PRECEDENCE: tuple[StopReason, ...] = tuple(StopReason)
#: Reasons that end the session as ``failed``.
FAILURES = frozenset(reason for reason, stop in STOPS.items() if stop.run_state == "failed")
#: Reasons that end the run as ``finished``.
FINISHED = frozenset(reason for reason, stop in STOPS.items() if stop.run_state == "finished")


class SaveReason(str, enum.Enum):
    """Why a session saves a checkpoint (one decision picks the first that holds, in this order)."""

    STEPS = "checkpoint_every_steps"
    TIME = "checkpoint_every"
    PHASE_END = "phase_end"
    FINAL = "final"

    def __str__(self) -> str:
        return self.value

    @property
    def words(self) -> str:
        return SAVES[self]


#: Every reason a session saves, and where it is decided. No save is made while steps are being skipped (``latest``
#: stays the last good checkpoint), and none by time or steps when the session stops anyway (the final save takes it).
SAVES: dict[SaveReason, str] = {
    # judge: the step count is a multiple of checkpoint_every_steps
    SaveReason.STEPS: "every checkpoint_every_steps steps",
    # judge: checkpoint_every seconds since the session's last save
    SaveReason.TIME: "checkpoint_every seconds since the last save",
    # phases.phase_end: the phase is over; its last weights stay in the run (session.phase_switch, unless the newest
    # checkpoint is of this step)
    SaveReason.PHASE_END: "the phase ended: its last weights stay in the run",
    # the session stops for a reason whose STOPS entry saves (session.ending.final_save, unless a checkpoint of this
    # step is intact)
    SaveReason.FINAL: "the session ends: its last step",
}


#: A save due by steps or time (never a phase's end or the final one) is skipped when the disk has no room for it, and
#: the session trains on: the main process reads the free space before it writes (session.disk_room); the save's vote
#: then sends every process on together, as after any save that is not full (session.saving.save). The next due save tries again.
NO_ROOM = "the disk has no room for it"


def no_room_line(step: int, needed: int, free: int) -> str:
    """What the session logs of a save it skipped (:data:`NO_ROOM`): the figures, and what would make room."""
    return (f"step {step}: the checkpoint was not saved: {NO_ROOM} (it needs ~{needed / 1e9:.2f} GB, {free / 1e9:.2f} GB "
            "is free); training goes on and the next due save tries again. Free space or lower keep_last")


@dataclasses.dataclass
class Flags:
    """What one process found after a step. Each flag is this process's own view."""

    signal: str | None = None
    deadline: bool = False
    save_by_time: bool = False
    save_by_steps: bool = False
    early_stop: bool = False
    diverged: bool = False
    out_of_memory: bool = False
    validation_error: bool = False
    max_steps: bool = False


@dataclasses.dataclass(frozen=True)
class Decision:
    """What every process does next: stop (and why), save a checkpoint (and why), or go on."""

    stop: StopReason | None
    save: SaveReason | None = None
    #: a validation of this step ran out of patience (it ends the run in the last phase, the phase otherwise).
    early_stop: bool = False
    #: processes whose validation raised (their errors are in the process group's store).
    failed_processes: tuple[int, ...] = ()

    def line(self, step: int) -> str | None:
        """What the session logs of this decision after ``step`` (``None``: it goes on without saving)."""
        if self.stop is not None:
            return stop_line(self.stop, step)
        return None if self.save is None else save_line(self.save, step)


def reason_words(reason: str) -> str:
    """A session's reason as its record says it, in words: a :class:`StopReason`'s, else as it is (a failure's own,
    ``error: ValueError``)."""
    known = {stop.value: stop for stop in StopReason}
    return known[reason].words if reason in known else reason


def stop_line(reason: StopReason, step: int) -> str:
    return f"step {step}: the session stops ({reason}): {reason.words}"


def save_line(reason: SaveReason, step: int) -> str:
    return f"step {step}: saving a checkpoint ({reason}): {reason.words}"


def judge(flags: Flags, *, step: int, max_steps: int, diverged: bool, out_of_time: bool, steady: bool,
          since_save: float, checkpoint_every: float | None, checkpoint_every_steps: int) -> None:
    """This process's own view after a step taken, into ``flags``: divergence, the run's end, the deadline, a checkpoint
    due by steps or time. ``out_of_time``: the clock says one more step would eat the reserve; ``steady``: no step is
    being skipped (while one is, no checkpoint is due: ``latest`` stays the last good one)."""
    flags.diverged = diverged
    flags.max_steps = step >= max_steps
    flags.deadline = out_of_time
    flags.save_by_time = steady and bool(checkpoint_every) and since_save >= checkpoint_every
    flags.save_by_steps = steady and bool(checkpoint_every_steps) and step % checkpoint_every_steps == 0


def already_over(step: int, max_steps: int, *, stopped_early: bool, patience: int, last_phase: bool) -> StopReason | None:
    """Why a session has nothing to train, the run having ended in an earlier one (``None``: there is work left)."""
    if step < max_steps and not (stopped_early and patience and last_phase):
        return None
    return StopReason.EARLY_STOPPING if stopped_early else StopReason.MAX_STEPS


_BOOLS = ("deadline", "save_by_time", "save_by_steps", "early_stop", "diverged", "out_of_memory", "max_steps")
_SIGNALS = (StopReason.SIGINT, StopReason.SIGTERM)


def decide(flags: Flags, *, rank: int, world: int, device: torch.device, early_stop_ends_run: bool = True) -> Decision:
    """Vote every process's flags in one all-reduce (:func:`~fintts.train.processes.collective.vote`) and turn the
    votes into one :class:`Decision`.

    ``early_stop_ends_run``: whether an early stop ends the run (the last phase) or only its phase.
    """
    from fintts.train.processes.collective import vote  # imports torch: the reasons' words are read without it

    local = [bool(getattr(flags, name)) for name in _BOOLS]
    local += [flags.signal == reason.value for reason in _SIGNALS]
    local += [flags.validation_error and r == rank for r in range(world)]
    votes = vote(local, device)
    seen = dict(zip(_BOOLS, votes))
    signals = [reason for reason, raised in zip(_SIGNALS, votes[len(_BOOLS):]) if raised]
    failed = tuple(r for r in range(world) if votes[len(_BOOLS) + len(_SIGNALS) + r])
    return from_votes(seen, signals, failed, early_stop_ends_run)


def from_votes(seen: dict[str, bool], signals: list[StopReason], failed: tuple[int, ...], early_stop_ends_run: bool = True) -> Decision:
    """The decision for the summed flags: the stop reason by :data:`PRECEDENCE`, and whether to save (and why).

    A checkpoint due by time or steps is not saved when the session stops anyway (the
    final save takes it), nor while steps are diverging (latest stays the last good one).
    """
    holding = {
        StopReason.VALIDATION_ERROR: bool(failed),
        StopReason.OUT_OF_MEMORY: seen["out_of_memory"],
        StopReason.DIVERGED: seen["diverged"],
        StopReason.EARLY_STOPPING: seen["early_stop"] and early_stop_ends_run,
        StopReason.MAX_STEPS: seen["max_steps"],
        StopReason.DEADLINE: seen["deadline"],
        **{reason: True for reason in signals},
    }
    stop = next((reason for reason in PRECEDENCE if holding.get(reason)), None)
    due = {SaveReason.STEPS: seen["save_by_steps"], SaveReason.TIME: seen["save_by_time"]}
    save = None if stop is not None else next((reason for reason, held in due.items() if held), None)
    return Decision(stop=stop, save=save, early_stop=seen["early_stop"], failed_processes=failed)
