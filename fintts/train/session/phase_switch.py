"""A phase switch inside a session: the ended phase saved, the next one built from its final weights.

Which phase a step is in, and what a switch carries over, are pure functions over the run's state
(:mod:`fintts.train.phases`); this is the act. The switch is a checkpoint first (the ended phase's
last weights stay in the run for good), then a new :class:`~fintts.train.step.building.BuiltPhase`
replacing the old one whole in the session, its random draws on a stream of their own so a
resumed run and an unbroken one build the same models. A disk too full for the checkpoint keeps
the phase as it is, and the session stops as for any save the disk refuses.
"""

from __future__ import annotations

from fintts.train import phases
from fintts.train.decision import SaveReason, save_line
from fintts.train.run import checkpoint
from fintts.train.run.rng import isolated_rng
from fintts.train.session import saving
from fintts.train.session.resume import data_record
from fintts.train.session.session import Session, build


def next_phase(reason: str, session: Session) -> bool:
    """End the current phase and build the next one from its final weights into ``session``; ``False`` when the phase's
    end could not be saved (the disk is full): the phase then does not end."""
    facts, state = session.facts, session.state
    config = facts.config
    ended = config.train.phases[state.phase].name
    latest = checkpoint.read_latest(facts.store.root)
    if latest is None or checkpoint.step_of(latest) != state.step:
        facts.log(save_line(SaveReason.PHASE_END, state.step))
        if not saving.save(session):
            return False
    start = {name: model.state_dict() for name, model in session.built.raw_models.items()}
    seed = session.built.cfg.seed
    facts.accelerator.free_memory()  # the ended phase's models and optimizers are not kept alive by accelerate
    phases.begin_next(config.train.phases, state, reason, checkpoint.name_for_step(state.step))
    with isolated_rng(seed + 7_777 * state.phase):
        session.built = build(state, facts, session.learnt, progress=session.progress, start=start)
    del start
    state.data = data_record(session.built)
    facts.log(f"step {state.step}: phase {ended} ended ({reason}); phase {config.train.phases[state.phase].name} "
        f"begins" + "".join(f", {k}: {v}" for k, v in state.resolved.items()))
    return True
