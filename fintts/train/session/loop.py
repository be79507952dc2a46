"""One session of training: set up, step until the processes decide to stop, end with a summary.

Read :meth:`Trainer.run` and :meth:`Trainer._train` top to bottom; they are the whole story. Set-up
builds one :class:`~fintts.train.session.session.Session` (its facts, the run's state, the phase, the
step guard, the exports), never ``None`` once built, and every act takes it: each step is switch
phase if due (:mod:`~fintts.train.session.phase_switch`), step (:meth:`Trainer._one_step`, returning
what it did), decide together, act (save or stop), report. Every reason a session stops or saves, and the
line it logs, is in :mod:`fintts.train.decision`: read it first to learn why a session ended. The end is
:func:`fintts.train.session.ending.finish`; a session's end is planned backwards from its limit
(:mod:`fintts.train.session.clock`), so one killed at its limit has already said whether its
checkpoint is safe and how to push it if not.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader

from fintts.train import phases
from fintts.train.config import ConfigDrift, RunConfig, as_run_config, fingerprint
from fintts.train.decision import Decision, Flags, StopReason, already_over, decide, judge, stop_line
from fintts.train.processes.collective import announce, await_main
from fintts.train.report.metrics import Board, LossWindow
from fintts.train.report.progress import SessionBar
from fintts.train.report.summary import SessionSummary
from fintts.train.run import checkpoint
from fintts.train.run.layout import MODEL_DIR, TENSORBOARD_DIR
from fintts.train.run.state import TrainerState
from fintts.train.session import ending, exporting, pending_export, phase_switch, reporting, resume, saving, stopping, validating, watchdog
from fintts.train.session.background_export import BackgroundExport
from fintts.train.session.clock import ENDING, TRAINING, SessionInterrupted, StopRequest
from fintts.train.session.facts import SessionFacts
from fintts.train.session.session import Learnt, Session, build
from fintts.train.session.store_choice import store_for
from fintts.train.step.guard import FP16_OVERFLOW, StepGuard
from fintts.train.step.optimizer_step import OutOfMemory, optimizer_step
from fintts.train.step.sampler import MicroBatchSampler
from fintts.train.step.seeding import seed_process
from fintts.train.step.stepping import cuda_switches
from fintts.train.stores import Store


@dataclasses.dataclass
class _Pace:
    """How long steps and validations take, and when the session last saved."""

    last_save: float
    #: the session's checkpoint interval by time, as the session began (a phase switch keeps it)
    checkpoint_every: float | None = None
    step_times: list[float] = dataclasses.field(default_factory=list)  # the last 20
    skipped: int = 0
    last_skipped: str = ""

    @property
    def mean_step(self) -> float:
        return sum(self.step_times) / len(self.step_times)


@dataclasses.dataclass
class _Steps:
    """What the loop carries from step to step besides the session: the phase's loader and batches, the pace, the
    losses since they were last logged, TensorBoard and the progress bar."""

    loader: DataLoader
    batches: Any
    pace: _Pace
    window: LossWindow
    writer: Board
    bar: SessionBar


@dataclasses.dataclass
class StepDone:
    """What one step did, as this process saw it: its flags for the vote, its losses, and what the vote's acts need
    to say why (this process's validation error, why its steps diverged, where memory ran out)."""

    flags: Flags = dataclasses.field(default_factory=Flags)
    losses: dict[str, float] = dataclasses.field(default_factory=dict)
    #: ``None``: the step fitted in every process's memory
    out_of_memory: OutOfMemory | None = None
    #: a validation ran with this step (a phase's first, or one ``eval_every`` asked for)
    validated: bool = False
    failed: Exception | None = None
    diverged: str | None = None

    def took(self, validated: validating.Validated) -> None:
        """A validation ran with this step: patience and its error go to the vote (the newest error is the one said)."""
        self.validated = True
        self.flags.early_stop = self.flags.early_stop or validated.early_stop
        self.flags.validation_error = self.flags.validation_error or validated.error is not None
        self.failed = validated.error or self.failed


class Trainer:
    """Trains one session of a run and leaves it resumable.

    Every setting comes from ``config``. ``store`` replaces the store the config describes
    (for a store built in code, e.g. a Hub store with other retry timings).
    ``allow_config_change`` accepts a resumed run whose math-changing settings differ from
    its checkpoint's; ``force`` takes the store from another writer. After :meth:`run`,
    :attr:`session` is the session it ran (its state, phase and facts).
    """

    def __init__(
        self,
        config: RunConfig,
        *,
        store: Store | None = None,
        allow_config_change: bool = False,
        force: bool = False,
        progress: bool = True,
        log: Callable[[str], None] = print,
        background_export: bool = True,
        own_process: bool = False,
    ):
        self.config = config
        self.allow_config_change, self.force = allow_config_change, force
        self.progress, self._log = progress, log
        #: this process was started for this session: off Kaggle/Colab its clock starts with the process (the CLI's)
        self.own_process = own_process
        #: ``False``: ``model/`` gets the task's quick export only, never its slow part (see :func:`train`)
        self.background_export = background_export
        self.store = store or store_for(config.train)
        #: the session :meth:`run` built, whole (``None`` until a run built one)
        self.session: Session | None = None

    # ------------------------------------------------------------------ the story
    def run(self) -> SessionSummary:
        """Set up one session, train it until the processes decide to stop, end it; its summary (also printed)."""
        stop = StopRequest()
        with stop.installed():  # from the session's start to its end: a signal never kills it half-way
            facts = SessionFacts.begin(self.config, self.store, stop, self._log, own_process=self.own_process)
            exports = BackgroundExport(self.store.root / MODEL_DIR, facts.warn, enabled=facts.main and self.background_export)
            end = ending.SessionEnd(facts, exports)
            watching: watchdog.SessionWatchdog | None = None
            try:
                if facts.main:
                    self.store.acquire(facts.record.id, force=self.force)
                    exports.sweep()
                    watching = watchdog.start(end, clock=facts.clock, stop=stop, log=facts.log, world=facts.world)
                session, folder = self._open(facts, exports)
                self.session = end.session = session
                resumed_from = self._resume(session, folder)
                facts.record.start_step = facts.record.end_step = session.state.step
                session.state.sessions.append(facts.record)
                reporting.write_status(session, "running")
                stop.phase = TRAINING
                with cuda_switches(session.built.cfg.cudnn_benchmark, session.built.cfg.tf32):
                    reason = _already_over(session) or self._train(session)
                stop.phase = ENDING
                watchdog.own_end(watching)
                return ending.finish(session, reason, resumed_from)
            except SessionInterrupted as err:
                watchdog.own_end(watching)
                ending.abandon(err, facts)
                raise
            except BaseException as err:
                watchdog.own_end(watching)
                end.fail(err)
                raise
            finally:
                exports.close()  # whatever ended the session: no export process outlives it

    # ------------------------------------------------------------------ set-up
    def _open(self, facts: SessionFacts, exports: BackgroundExport) -> tuple[Session, Path | None]:
        """The checkpoint to start from (drift refused before anything is built), the run's state and its phase built:
        the session, and the checkpoint to load into it (``None``: a new run)."""
        started = time.time()
        folder, saved = resume.starting_checkpoint(facts, allow_config_change=self.allow_config_change)
        facts.spent("resume", started)
        cfg = self.config.train
        state = saved or TrainerState(run_name=cfg.run_name, fingerprint=fingerprint(self.config))
        guard = StepGuard(
            max_skipped=cfg.max_skipped_steps, min_loss_scale=cfg.min_loss_scale, spike_factor=cfg.spike_factor,
            spike_window=cfg.spike_window,
        )
        torch.manual_seed(cfg.seed)  # model init; replaced by the checkpoint's weights when resuming
        learnt = Learnt()
        built = build(state, facts, learnt, progress=self.progress, resuming=folder is not None)
        return Session(facts=facts, state=state, built=built, guard=guard, exports=exports, learnt=learnt,
                       progress=self.progress), folder

    def _resume(self, session: Session, folder: Path | None) -> str | None:
        """Load the checkpoint's weights, optimizers and random streams into the phase built from its state (see
        :mod:`fintts.train.session.resume`), or start a new run on its data; then make the export an earlier session
        left unmade. The checkpoint resumed from (``None``: a new run)."""
        facts, state, built = session.facts, session.state, session.built
        started = time.time()
        if folder is None:  # a new run: its state records the data it starts on
            state.data = resume.data_record(built)
            seed_process(built.cfg.seed, facts.rank)
        else:
            resume.load_checkpoint(folder, state, built, facts, guard=session.guard, allow_config_change=self.allow_config_change)
            session.learnt.good.add(folder.name)
        if state.export_pending:  # an earlier session ended before model/'s slow part was made
            if facts.main:  # (it may download model/ from the Hub: the others wait off the device meanwhile)
                pending_export.make_pending(session)
                announce("pending-export")
            else:
                await_main("pending-export", facts.clock.end)
        facts.spent("resume", started)
        return None if folder is None else folder.name

    # ------------------------------------------------------------------ the loop
    def _train(self, session: Session) -> StopReason:
        """Step until the processes decide together to stop: switch phase if due, step, decide, act, report."""
        facts, config = session.facts, self.config.train
        steps = _start_steps(session)
        decision = Decision(stop=None)
        session.learnt.mean_step = 0.0
        while decision.stop is None:
            opening = None
            ended = phases.phase_end(config.phases, session.state, session.built.plan.steps_per_epoch)
            if ended:
                with facts.bound.lifted():  # new models are built: an unmeasured wait
                    if not phase_switch.next_phase(ended, session):
                        facts.log(stop_line(StopReason.DISK_FULL, session.state.step))
                        return StopReason.DISK_FULL
                steps.loader, steps.batches = _batches(session)
                # a phase starts with a validation of the weights it begins from (if it ends before the reserve)
                if session.built.cfg.eval_every and validating.fits(session):
                    opening = _validate(session, steps)
            done = self._one_step(session, steps, opening)
            decision = _decide(session, done, steps.pace)
            decision = _act(session, decision, done, steps.pace)
            if done.out_of_memory is None:
                loss = done.losses.get(session.built.main_loss, float("nan"))
                steps.bar.update(session.state.step, loss=f"{loss:.4g}", s_step=f"{steps.pace.mean_step:.2f}")
        steps.bar.close()
        _record_losses(session, steps)
        if steps.pace.skipped:
            facts.record.warnings.append(
                f"{steps.pace.skipped} step(s) were skipped in this session, the last for: {steps.pace.last_skipped}")
        steps.writer.close()
        return decision.stop

    def _one_step(self, session: Session, steps: _Steps, opening: validating.Validated | None) -> StepDone:
        """One optimizer step, and this process's view after it: its validation when due, divergence, the run's end,
        the deadline, a checkpoint due. ``opening``: the validation a phase began with, this step's too."""
        facts, state, built = session.facts, session.state, session.built
        done = StepDone()
        if opening is not None:
            done.took(opening)
        started = session.learnt.step_began = time.time()
        if state.step_in_epoch >= built.plan.steps_per_epoch:
            steps.batches = _next_epoch(session, steps.loader)
        done.losses, skipped, done.out_of_memory = optimizer_step(
            built, steps.batches, accelerator=facts.accelerator, guard=session.guard, precision=facts.precision,
            device=facts.device, rank=facts.rank, world=facts.world,
        )
        if done.out_of_memory is not None:
            done.flags.out_of_memory = True
            return done
        _count_step(session, steps, started, done.losses, skipped)
        every = built.cfg.eval_every
        if every and state.step % every == 0 and validating.fits(session):
            done.took(_validate(session, steps, timed=True))
        done.diverged = _judge(session, done.flags, steps.pace)
        return done


# ---------------------------------------------------------------------- the loop's detail, one call away
def _already_over(session: Session) -> StopReason | None:
    """Why the run has nothing left to train, having ended in an earlier session (``None``: train; see
    :func:`fintts.train.decision.already_over`), said in the log."""
    state, built = session.state, session.built
    over = already_over(state.step, built.max_steps, stopped_early=state.stopped_early, patience=built.cfg.patience,
                        last_phase=phases.in_last_phase(session.facts.config.train.phases, state))
    if over is not None:
        session.facts.log(stop_line(over, state.step))
    return over


def _start_steps(session: Session) -> _Steps:
    """The loop's own things at its start: the phase's loader, the pace, the loss window, TensorBoard, the bar."""
    facts, built = session.facts, session.built
    loader, batches = _batches(session)
    bar = SessionBar(step=session.state.step, max_steps=built.max_steps, clock=facts.clock,
                     enabled=session.progress and facts.main, desc=built.cfg.run_name)
    return _Steps(loader=loader, batches=batches, pace=_Pace(time.time(), built.cfg.checkpoint_every), window=LossWindow(),
                  writer=Board.open(facts.store.root / TENSORBOARD_DIR if facts.main else None, facts.warn), bar=bar)


def _batches(session: Session) -> tuple[DataLoader, Any]:
    """The phase's loader from where the run stands (each epoch iterates it again), its first batches, and its models
    in training mode."""
    facts, state, built = session.facts, session.state, session.built
    cfg = built.cfg
    sampler = MicroBatchSampler(
        built.plan, state.epoch, state.step_in_epoch, micro_batch_size=built.micro, rank=facts.rank, world=facts.world,
    )
    loader = DataLoader(
        built.data.dataset,
        batch_sampler=sampler,
        collate_fn=built.data.collate,
        num_workers=cfg.num_workers,
        persistent_workers=cfg.persistent_workers and cfg.num_workers > 0,
        pin_memory=cfg.pin_memory and facts.device.type == "cuda",
        # a private generator: creating a loader must not consume the training RNG
        generator=torch.Generator().manual_seed(cfg.seed + state.epoch),
    )
    for model in built.models.values():
        model.train()
    return loader, iter(loader)


def _next_epoch(session: Session, loader: DataLoader) -> Any:
    session.state.epoch += 1
    session.state.step_in_epoch = 0
    loader.batch_sampler.set_epoch(session.state.epoch)
    return iter(loader)


def _count_step(session: Session, steps: _Steps, started: float, losses: dict[str, float], skipped: str | None) -> None:
    """A step taken: the run's counters, its time, its losses (logged when due) and whether it was skipped."""
    state, pace, facts = session.state, steps.pace, session.facts
    state.step += 1
    state.step_in_epoch += 1
    pace.step_times = (pace.step_times + [time.time() - started])[-20:]
    facts.spent("steps", started)
    steps.window.add(losses, pace.step_times[-1])
    if skipped is not None and skipped != FP16_OVERFLOW:
        pace.skipped, pace.last_skipped = pace.skipped + 1, skipped
        if session.guard.in_row == 1 or "spike" in skipped:
            facts.log(f"step {state.step} skipped: {skipped}")
    if state.step % session.built.cfg.log_every == 0 or state.step == session.built.max_steps:
        _record_losses(session, steps)


def _validate(session: Session, steps: _Steps, *, timed: bool = False) -> validating.Validated:
    """Validate in every process (see :func:`fintts.train.session.validating.validate`); what the session keeps of it,
    and how long it took (the clock's measure of whether the next one fits, kept in the run's state).

    ``timed``: a validation ``eval_every`` asked for (counted as the session's validation time); a phase's first is not.
    """
    started = time.time()
    done = validating.validate(session, steps.writer)
    session.learnt.peaks = done.peaks
    if done.evaluated is not None:
        session.learnt.last_eval = done.evaluated
    clock = session.facts.clock
    clock.record_validation(time.time() - started)
    session.state.validation_seconds = list(clock.validations)
    if timed:
        session.facts.spent("validation", started)
    return done


def _judge(session: Session, flags: Flags, pace: _Pace) -> str | None:
    """This process's view after a step taken (:func:`fintts.train.decision.judge`: divergence, the run's end, the
    deadline, a checkpoint due), from the step guard, the clock and the pace.

    Returns why the steps diverged (``None``: they did not), for the message should the vote stop on it.
    """
    state, built, guard = session.state, session.built, session.guard
    diverged = guard.verdict(built.scaler.get_scale() if built.scaler.is_enabled() else None)
    # one more step: a validation due with it runs only if it fits too (validating.fits), else the step goes on without it
    out_of_time = session.facts.clock.must_stop(max(pace.step_times) * 1.2)
    judge(flags, step=state.step, max_steps=built.max_steps, diverged=diverged is not None, out_of_time=out_of_time,
          steady=guard.in_row == 0, since_save=time.time() - pace.last_save, checkpoint_every=pace.checkpoint_every,
          checkpoint_every_steps=built.cfg.checkpoint_every_steps)
    return diverged


def _decide(session: Session, done: StepDone, pace: _Pace) -> Decision:
    """Every process's vote on this step (see :func:`fintts.train.decision.decide`), a finished export put in place
    and a landed push learnt first (main process)."""
    facts = session.facts
    done.flags.signal = facts.stop.signal_name
    if facts.main:
        exporting.poll(session)
        saving.learn(session)  # a push that landed since the save
    decision = decide(
        done.flags, rank=facts.rank, world=facts.world, device=facts.device,
        early_stop_ends_run=phases.in_last_phase(facts.config.train.phases, session.state),
    )
    facts.bound.voted()
    session.learnt.mean_step = pace.mean_step if pace.step_times else 0.0
    if done.validated:
        session.state.stopped_early = decision.early_stop
    return decision


def _act(session: Session, decision: Decision, done: StepDone, pace: _Pace) -> Decision:
    """Do what the processes decided, said in the log first (:meth:`fintts.train.decision.Decision.line`): report the
    failure that stops them, or save; a save the disk refuses stops them."""
    facts, state = session.facts, session.state
    said = decision.line(state.step)
    if said is not None:
        facts.log(said)
    if decision.stop is StopReason.VALIDATION_ERROR:
        stopping.validation_failed(done.failed, decision.failed_processes, rank=facts.rank, step=state.step)
    elif decision.stop is StopReason.OUT_OF_MEMORY:
        if done.out_of_memory is not None:  # always: every process learnt it in the step (see optimizer_step)
            facts.stopping(stopping.out_of_memory(done.out_of_memory, session.built, at=state.step, world=facts.world,
                                                  rank=facts.rank))
    elif decision.stop is StopReason.DIVERGED:
        latest = checkpoint.current(facts.store.root) if facts.main else None
        facts.stopping(stopping.diverged(done.diverged or "the steps of another process diverged", step=state.step, latest=latest))
    elif decision.save is not None:
        started = time.time()
        if not saving.save(session, skippable=True):  # due by steps or time: skipped when the disk has no room
            decision = Decision(stop=StopReason.DISK_FULL)
            facts.log(stop_line(decision.stop, state.step))
        facts.spent("checkpoints", started)
        pace.last_save = time.time()
    return decision


def _record_losses(session: Session, steps: _Steps) -> None:
    """The window's mean losses (and the learning rate) into the run's history and TensorBoard; none if it is empty."""
    lr = session.built.groups[0].optimizer.param_groups[0]["lr"]
    steps.window.record(steps.writer, session.state.history, session.state.step, lr=lr)


def train(
    config: RunConfig | str | Path,
    *,
    overrides: list[str] | dict[str, Any] = (),
    allow_config_change: bool = False,
    force: bool = False,
    progress: bool = True,
    log: Callable[[str], None] = print,
    background_export: bool = True,
    **settings: Any,
) -> SessionSummary:
    """Train one session of the run a config describes; resume if its store holds a checkpoint.

    ``overrides`` (``["max_steps=500", "hub_repo=me/my-run"]``) and ``settings`` (the same as
    keyword arguments: ``max_steps=500, store="runs/x"``) are applied to the config and
    validated as if they were in the file. Returns the session's summary (also printed).

    ``background_export=False`` makes no slow part of ``model/``'s export (a voice's ONNX graphs):
    for a session whose store is thrown away, as :mod:`fintts.train.tools.bench`'s measurements are.
    An MMS-sized voice's takes tens of seconds of a session's end, once per session (benchmarks/README.md, "Figures
    behind the code's comments").
    """
    config = as_run_config(config, overrides, settings)
    trainer = Trainer(config, allow_config_change=allow_config_change, force=force, progress=progress, log=log,
                      background_export=background_export)
    return trainer.run()

__all__ = ["ConfigDrift", "Trainer", "train"]
