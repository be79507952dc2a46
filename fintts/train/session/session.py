"""The running session as one value: its facts and the run as it trains, every part present before the first step.

Why one value: the trainer used to set its state, phase, guard and exports on itself one by one
(each ``None`` until set-up reached it) and hand its own methods to the helpers as callbacks, so
following one step meant re-entering the trainer from every helper. :class:`Session` is built at
the end of set-up with everything in it; each part of the session (saving, validating, exporting,
switching phase, ending) takes it and does its work one call away. What changes as the run trains
changes inside it (the state's counters, the phase rebuilt at a switch, what the session learnt);
nothing in it is ever ``None``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from fintts.train.processes.collective import main_first
from fintts.train.run.layout import CACHE_DIR
from fintts.train.run.state import TrainerState
from fintts.train.session.background_export import BackgroundExport
from fintts.train.session.facts import SessionFacts
from fintts.train.step.building import BuiltPhase, build_phase, describe_data
from fintts.train.step.guard import StepGuard
from fintts.train.task import Weights


@dataclasses.dataclass
class Learnt:
    """What a session learns as it goes and reads again later (see each field for who sets it)."""

    #: verified checkpoints of this session: the one it resumed from, then each one it saved (the final save trusts these)
    good: set[str] = dataclasses.field(default_factory=set)
    #: seconds the newest checkpoint took to save and push (main process; ``None``: none yet)
    durable: float | None = None
    #: seconds the newest save took, until the clock learnt it with the run's pushes (main process; see
    #: :func:`fintts.train.session.saving.learn`)
    unlearnt_save: float | None = None
    #: the phase's newest validation (its files go into each checkpoint; a phase's build forgets it; ``None``: none yet)
    last_eval: dict[str, Any] | None = None
    #: every process's peak memory, as last measured (for the status)
    peaks: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    #: what the phase's data is (for the status)
    data: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: where training stands, for the watchdog's error: when the step under way began (``None``: not yet), steps' mean
    step_began: float | None = None
    mean_step: float = 0.0


@dataclasses.dataclass
class Session:
    """One running session (see the module): built once set-up has built its phase, never holding ``None``."""

    #: what the session runs on and with (never rebound)
    facts: SessionFacts
    #: where the run stands: the checkpoint's state, then this session's steps
    state: TrainerState
    #: the phase being trained (see :mod:`fintts.train.step.building`); a phase switch replaces it whole
    built: BuiltPhase
    #: what decides whether a step is applied, and when the steps diverged
    guard: StepGuard
    #: the slow part of ``model/``'s exports (it makes nothing outside the main process)
    exports: BackgroundExport
    learnt: Learnt
    #: progress bars shown (the caller's choice)
    progress: bool


def build(state: TrainerState, facts: SessionFacts, learnt: Learnt, *, progress: bool, start: Weights | None = None,
          resuming: bool = False) -> BuiltPhase:
    """Build the phase ``state`` names (see :mod:`fintts.train.step.building`) from the weights ``start`` (``None``: the
    task's own); its resolved settings go into ``state``, what its data is into ``learnt``, and the previous phase's
    validation is forgotten. Returns the phase built, which replaces the previous one whole."""
    built = build_phase(
        facts.config.phase(state.phase, state.resolved), start, accelerator=facts.accelerator, device=facts.device,
        precision=facts.precision, cache=facts.store.root / CACHE_DIR, main=facts.main, log=facts.log, progress=progress,
        spent=facts.spent, warn=facts.warn, resuming=resuming, fetch_first=fetching_first(state.phase, facts.clock.end),
    )
    state.resolved = {**state.resolved, **built.resolved}
    learnt.data = describe_data(built, facts.log)
    learnt.last_eval = None
    return built


def fetching_first(phase: int, deadline: float | None) -> Callable[[str, Callable[[], Any]], Any]:
    """The task's ``fetch_first`` (:class:`~fintts.train.task.TaskContext`) in ``phase``: ``fetch`` in the main process,
    which alone holds the Hugging Face token, while the others wait off the device until ``deadline`` (the session's
    end): the first collective, whose timeout is minutes (:data:`~fintts.train.session.watchdog.FIRST_COLLECTIVE`), is
    met only once the download is done. Each phase's names are its own: a later phase's build fetches again."""
    return lambda name, fetch: main_first(f"fetch/{phase}/{name}", fetch, deadline)
