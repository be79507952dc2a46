"""What every process does after an optimizer step, decided by all of them together.

Each process brings its own :class:`Flags` — a signal it received, its clock running out,
a checkpoint due by its own clock or by the step count, early stopping or an error found
in its part of validation, divergence, out-of-memory in its step — and one all-reduce
sums them over the processes (:func:`decide`). Every process then acts on the same
:class:`Decision`: they all stop after the same step for the same reason, and they all
save or none does. No process ever enters a collective (a save gathers every process's
random streams) because of a value only it has.

When several reasons hold at once, :data:`PRECEDENCE` picks one: a failure first (what
went wrong decides what is saved), then the run being finished, then a person's signal,
then the session's own deadline. An early stop found at the last step is ``early_stopping``,
and a signal that arrives in the step that finishes the run does not turn ``finished``
into ``paused``.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import TYPE_CHECKING

from fintts.train.processes.collective import vote

if TYPE_CHECKING:
    import torch


class StopReason(str, enum.Enum):
    """Why a session stopped; the value is what ``status.json`` and the sessions log say."""

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


#: Which reason wins when several hold after one step: the first in this order.
PRECEDENCE: tuple[StopReason, ...] = tuple(StopReason)
#: Reasons that end the session as ``failed``.
FAILURES = frozenset({StopReason.VALIDATION_ERROR, StopReason.OUT_OF_MEMORY, StopReason.DIVERGED, StopReason.DISK_FULL})
#: Reasons that end the run as ``finished``.
FINISHED = frozenset({StopReason.EARLY_STOPPING, StopReason.MAX_STEPS})


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
    """What every process does next: stop (and why), save a checkpoint, or go on."""

    stop: StopReason | None
    save: bool
    #: a validation of this step ran out of patience (it ends the run in the last phase, the phase otherwise).
    early_stop: bool = False
    #: processes whose validation raised (their errors are in the process group's store).
    failed_processes: tuple[int, ...] = ()


_BOOLS = ("deadline", "save_by_time", "save_by_steps", "early_stop", "diverged", "out_of_memory", "max_steps")
_SIGNALS = (StopReason.SIGINT, StopReason.SIGTERM)


def decide(flags: Flags, *, rank: int, world: int, device: torch.device, early_stop_ends_run: bool = True) -> Decision:
    """Vote every process's flags in one all-reduce (:func:`~fintts.train.processes.collective.vote`) and turn the
    votes into one :class:`Decision`.

    ``early_stop_ends_run``: whether an early stop ends the run (the last phase) or only its phase.
    """
    local = [bool(getattr(flags, name)) for name in _BOOLS]
    local += [flags.signal == reason.value for reason in _SIGNALS]
    local += [flags.validation_error and r == rank for r in range(world)]
    votes = vote(local, device)
    seen = dict(zip(_BOOLS, votes))
    signals = [reason for reason, raised in zip(_SIGNALS, votes[len(_BOOLS):]) if raised]
    failed = tuple(r for r in range(world) if votes[len(_BOOLS) + len(_SIGNALS) + r])
    return from_votes(seen, signals, failed, early_stop_ends_run)


def from_votes(seen: dict[str, bool], signals: list[StopReason], failed: tuple[int, ...], early_stop_ends_run: bool = True) -> Decision:
    """The decision for the summed flags: the stop reason by :data:`PRECEDENCE`, and whether to save.

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
    save = stop is None and (seen["save_by_time"] or seen["save_by_steps"])
    return Decision(stop=stop, save=save, early_stop=seen["early_stop"], failed_processes=failed)

