"""Everything besides tensors that a resumed run needs to continue exactly.

Saved as ``state.json`` in each checkpoint: readable by a person, loadable without
unpickling. The random generators' states are kept per process (:mod:`fintts.train.run.rng`),
so dropout noise and random slices continue as if never stopped. No torch here: ``fintts
status`` and the run's card read this on a laptop.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

#: Where a session's time goes. ``before``: from the session's start (the container's on
#: Kaggle, the process's elsewhere) until training began: installs, imports, copying data.
#: ``models`` and ``data``: building the task's models and optimizers, and its training data.
#: ``resume``: finding, fetching and loading the checkpoint. ``steps``: optimizer steps, with
#: their waits for data. ``validation``, ``checkpoints`` (saves during the session) and
#: ``final`` (the last save and waiting until the store has it). All but ``steps`` is overhead.
PHASES = ("before", "models", "data", "resume", "steps", "validation", "checkpoints", "final")


@dataclasses.dataclass
class SessionRecord:
    id: str
    host: str
    devices: str
    precision: str
    started: float
    ended: float | None = None
    start_step: int = 0
    end_step: int = 0
    reason: str = "running"
    #: what went wrong or needs a person's attention in this session (a full disk, a refused push, skipped steps...).
    warnings: list[str] = dataclasses.field(default_factory=list)
    #: seconds this session spent on each part of its work (see :data:`PHASES`).
    phases: dict[str, float] = dataclasses.field(default_factory=dict)

    @property
    def seconds(self) -> float:
        return (self.ended or self.started) - self.started


@dataclasses.dataclass
class TrainerState:
    run_name: str
    step: int = 0
    epoch: int = 0
    #: optimizer steps already taken in ``epoch`` (where the resumable sampler starts).
    step_in_epoch: int = 0
    best_value: float | None = None
    best_step: int | None = None
    #: the checkpoint holding the best weights: the first one saved at or after ``best_step`` (kept from pruning,
    #: on the Hub too, whatever the disk of the session that prunes holds).
    best_checkpoint: str | None = None
    #: validations in a row without improvement (early stopping's patience counter).
    bad_evals: int = 0
    stopped_early: bool = False
    micro_batch_size: int = 0
    world_size: int = 1
    #: the precision the checkpoint was trained in (``precision: auto`` resolved: fp16, bf16 or fp32).
    precision: str = ""
    #: Python's and the tracked libraries' versions when it was saved (:func:`fintts.train.machine.platform.library_versions`).
    versions: dict[str, str] = dataclasses.field(default_factory=dict)
    #: the phase being trained (an index into the config's ``phases``; 0 without phases), the step it
    #: began at, and what its task resolved from the data then (re-applied in every later session).
    phase: int = 0
    phase_start_step: int = 0
    resolved: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: one record per finished phase: name, start_step, end_step, reason, best, resolved, checkpoint.
    phases: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    fingerprint: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: the task's :class:`~fintts.train.task.DataFingerprint` (items, held-out items, labels), if it gives one.
    data: dict[str, Any] | None = None
    sessions: list[SessionRecord] = dataclasses.field(default_factory=list)
    #: ``model/`` holds an export whose slow part (``Task.export_later``, made in the background) it lacks: a session
    #: ended before it was made, so the next one makes it.
    export_pending: bool = False
    #: seconds recent checkpoints took to become durable (save + upload): the clock's reserve.
    durable_seconds: list[float] = dataclasses.field(default_factory=list)
    #: seconds recent validations took: whether the next one fits before the reserve.
    validation_seconds: list[float] = dataclasses.field(default_factory=list)
    #: mean losses every ``log_every`` steps and validation metrics, for plots and summaries.
    history: list[dict[str, float]] = dataclasses.field(default_factory=list)
    evals: list[dict[str, float]] = dataclasses.field(default_factory=list)
    rng: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    #: the step guard's memory (recent losses for the spike test, skipped steps), see :mod:`fintts.train.step.guard`.
    guard: dict[str, Any] = dataclasses.field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str, note: Callable[[str], None] = lambda _: None) -> TrainerState:
        """The state saved as ``text``; keys this version does not know are dropped, and ``note`` is told which.

        A checkpoint written by a newer fintts may hold fields added since, at the top or in a session's
        record; this version resumes from it all the same, without them (its next save no longer has them).
        """
        unknown: list[str] = []
        data = _known_fields(cls, json.loads(text), "", unknown)
        data["sessions"] = [SessionRecord(**_known_fields(SessionRecord, record, f"sessions[{index}].", unknown))
                            for index, record in enumerate(data.get("sessions", []))]
        if unknown:
            note(f"state.json holds what this fintts does not know (written by a newer one?): {', '.join(unknown)}; "
                 "resuming without it, and the next checkpoint will not have it")
        return cls(**data)

    @property
    def seconds_trained(self) -> float:
        return sum(s.seconds for s in self.sessions)



def _known_fields(record: type, data: dict[str, Any], where: str, unknown: list[str]) -> dict[str, Any]:
    """``data`` less the keys that are no field of the dataclass ``record``, whose names (after ``where``) go to ``unknown``."""
    known = {f.name for f in dataclasses.fields(record)}
    unknown.extend(f"{where}{key}" for key in data if key not in known)
    return {key: value for key, value in data.items() if key in known}
