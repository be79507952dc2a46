"""A run in phases: one resumable run whose settings change at chosen points.

A config's ``phases:`` lists stages, each a :class:`~fintts.train.config.Phase` — a name,
settings over the run's (``lr``, ``patience``, or a task's own, e.g. an adapter on one
speaker) and an end: ``steps`` or ``epochs`` of its own, or early stopping by its own
``patience``. The last phase ends with the run (``max_steps`` or early stopping).
Without ``phases`` a run is one phase with the file's settings.

How the trainer goes through them (:class:`fintts.train.session.loop.Trainer`):

- **State.** The phase index, the step it began at and what its task resolved from the
  data (:meth:`~fintts.train.task.Task.resolved_settings`: ``speaker: best`` becomes a
  name) are in the checkpointed :class:`~fintts.train.run.state.TrainerState`, with a record
  of every finished phase. ``epoch``, ``step_in_epoch``, the best value and the patience
  counter are the current phase's: phases validate on their own data, so their scores
  are not compared. The step count and checkpoint names go on across phases.
- **The switch.** Before each step the trainer asks :func:`phase_end`. When the phase is
  over it saves a checkpoint of the phase's end (unless the newest one is at this step),
  which is kept from pruning: it holds the last weights of the phase, e.g. the fully
  fine-tuned model an adapter phase then adapts. Then it builds the next phase's task,
  models, optimizers, schedulers and data from that phase's config, handing
  :meth:`~fintts.train.task.Task.build_models` the previous phase's final weights (its
  models' state dicts, before any wrapping the new phase adds), under a random stream of
  its own so the training stream is not disturbed. A phase starts with a validation of the
  weights it begins from, on its own held-out data: the baseline its early stopping has to
  beat, and the "before" of a phase's effect.
- **Resuming.** The trainer reads the checkpoint's state first, builds the phase it names
  (with its recorded resolved settings), then loads the weights. A checkpoint holds
  everything its phase needs: a session that finds only the newest checkpoint on an empty
  disk continues in any phase. A session that ended exactly at a switch finds the ended
  phase's checkpoint and switches first; the switch depends only on what that checkpoint
  holds, so every path through it gives the same bits.
- **Drift.** The fingerprint covers each phase's name, end and settings
  (:func:`fintts.train.config.fingerprint`), so changing any phase of a run is refused like
  any other math-changing setting.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fintts.train.config import Phase
from fintts.train.run.state import TrainerState


def in_last_phase(phases: Sequence[Phase], state: TrainerState) -> bool:
    """Whether no phase follows the current one (always so in a run without phases)."""
    return state.phase >= len(phases) - 1


def phase_end(phases: Sequence[Phase], state: TrainerState, steps_per_epoch: int) -> str | None:
    """Why the current phase is over (``steps``, ``epochs``, ``early_stopping``), or ``None``.

    The last phase (and a run without phases) never ends here: it ends with the run.
    """
    if in_last_phase(phases, state):
        return None
    phase = phases[state.phase]
    if state.stopped_early:
        return "early_stopping"
    if phase.steps and state.step - state.phase_start_step >= phase.steps:
        return "steps"
    epochs_done = state.epoch + (1 if state.step_in_epoch >= steps_per_epoch else 0)
    if phase.epochs and epochs_done >= phase.epochs:
        return "epochs"
    return None


def begin_next(phases: Sequence[Phase], state: TrainerState, reason: str, checkpoint_name: str) -> None:
    """Record the ended phase in ``state`` and make it the next one's, at the same step."""
    state.phases.append({
        "name": phases[state.phase].name, "start_step": state.phase_start_step, "end_step": state.step, "reason": reason,
        "best": None if state.best_step is None else {
            "value": state.best_value, "step": state.best_step, "checkpoint": state.best_checkpoint,
        },
        "resolved": dict(state.resolved), "checkpoint": checkpoint_name,
    })
    state.phase += 1
    state.phase_start_step = state.step
    state.epoch = state.step_in_epoch = 0
    state.best_value = state.best_step = state.best_checkpoint = None
    state.bad_evals, state.stopped_early = 0, False
    state.resolved = {}


def describe(phases: Sequence[Phase], state: TrainerState) -> dict[str, Any] | None:
    """The run's phases for its status: the current one and the finished ones (``None`` without phases)."""
    if not phases:
        return None
    return {
        "index": state.phase, "count": len(phases), "name": phases[state.phase].name, "start_step": state.phase_start_step,
        "resolved": dict(state.resolved), "finished": list(state.phases),
    }
