"""One session of training: resume, step until a reason to stop, save, make it durable, exit.

Read :meth:`Trainer.run` top to bottom; it is the whole story: build the phase, resume, and
for each step: step, log, validate, decide, save or stop. The acts it calls have rooms of
their own: :mod:`~fintts.train.step.building` (a phase as one value), :mod:`~fintts.train.session.resume`
(the checkpoint it starts from, and a phase switch's rebuild), :mod:`~fintts.train.step.optimizer_step`,
:mod:`~fintts.train.session.validating` (validation, the best and ``model/``'s exports), :mod:`~fintts.train.decision`
(what every process does after a step, decided together), :mod:`~fintts.train.session.stopping` (what training's
own stops say), :mod:`~fintts.train.session.saving`, :mod:`~fintts.train.session.ending` (the final save, the status and
the lease given back), :mod:`~fintts.train.session.watching` and :mod:`~fintts.train.processes.collective` (how the
processes wait for the main one off the device). What they all need of the session (its device, processes,
precision, clock, store, record and log) is one value, :class:`~fintts.train.session.facts.SessionFacts`,
built when the session starts and passed to each.

The session's end is planned backwards from its limit (:mod:`fintts.train.machine.clock`): the
store's requests are bounded by it, the final wait gives up before it, and the summary is
printed before the lease is released, so a session killed at its limit has already said
whether its checkpoint is safe and how to push it if not.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from accelerate.utils import gather_object
from torch.utils.data import DataLoader

from fintts.train import phases
from fintts.train.config import ConfigDrift, RunConfig, as_run_config, fingerprint
from fintts.train.decision import Decision, Flags, StopReason, decide
from fintts.train.machine.clock import ENDING, TRAINING, SessionInterrupted, StopRequest
from fintts.train.machine.platform import library_versions
from fintts.train.processes.collective import announce, await_main, vote
from fintts.train.report.metrics import Board, LossWindow
from fintts.train.report.progress import SessionBar
from fintts.train.report.summary import SessionSummary
from fintts.train.run import checkpoint
from fintts.train.run.layout import CACHE_DIR, MODEL_DIR, TENSORBOARD_DIR
from fintts.train.run.rng import capture_rng
from fintts.train.run.state import TrainerState
from fintts.train.session import ending, pending_export, resume, stopping, validating, watching
from fintts.train.session.background_export import BackgroundExport
from fintts.train.session.facts import SessionFacts
from fintts.train.session.saving import is_disk_full, write_checkpoint
from fintts.train.session.watchdog import SessionWatchdog
from fintts.train.step import memory
from fintts.train.step.building import BuiltPhase, build_phase, describe_data
from fintts.train.step.guard import FP16_OVERFLOW, StepGuard
from fintts.train.step.optimizer_step import OutOfMemory, optimizer_step
from fintts.train.step.sampler import MicroBatchSampler
from fintts.train.step.seeding import seed_process
from fintts.train.step.stepping import cuda_switches
from fintts.train.stores import Store, store_for
from fintts.train.task import Weights


@dataclasses.dataclass
class _Pace:
    """What one session's loop carries from step to step: how long steps and validations take, when it last saved."""

    last_save: float
    #: the session's checkpoint interval by time, as the session began (a phase switch keeps it)
    checkpoint_every: float | None = None
    step_times: list[float] = dataclasses.field(default_factory=list)  # the last 20
    eval_seconds: float = 0.0
    skipped: int = 0
    last_skipped: str = ""

    @property
    def mean_step(self) -> float:
        return sum(self.step_times) / len(self.step_times)


@dataclasses.dataclass
class _Learnt:
    """What a session learns as it goes and reads again later (one per session; see each field for who sets it)."""

    #: verified checkpoints of this session: the one it resumed from, then each one it saved (the final save trusts these)
    good: set[str] = dataclasses.field(default_factory=set)
    #: seconds the newest checkpoint took to save and push (main process; ``None``: none yet)
    durable: float | None = None
    #: the phase's newest validation (its files go into each checkpoint; a phase's build forgets it)
    last_eval: dict[str, Any] | None = None
    #: every process's peak memory, as last measured (for the status)
    peaks: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    #: what the phase's data is (for the status)
    data: dict[str, Any] | None = None
    #: where training stands, for the watchdog's error: when the step under way began (``None``: not yet), steps' mean
    step_began: float | None = None
    mean_step: float = 0.0


class Trainer:
    """Trains one session of a run and leaves it resumable.

    Every setting comes from ``config``. ``store`` replaces the store the config describes
    (for a store built in code, e.g. a Hub store with other retry timings).
    ``allow_config_change`` accepts a resumed run whose math-changing settings differ from
    its checkpoint's; ``force`` takes the store from another writer.

    Besides its arguments it holds the session's facts (:class:`~fintts.train.session.facts.SessionFacts`,
    built when the session starts) and what changes as the run trains: its state, the phase built,
    the step guard, ``model/``'s exports, and what the session learnt (:class:`_Learnt`).
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
        #: the session's facts; ``None`` until the session began
        self.facts: SessionFacts | None = None
        #: where the run stands (the checkpoint's state, then this session's steps); ``None`` until the session read it
        self.state: TrainerState | None = None
        #: the phase being trained (see :mod:`fintts.train.step.building`); ``None`` until the session built it.
        self.built: BuiltPhase | None = None
        #: what decides whether a step is applied, and when the steps diverged; ``None`` until the session set up
        self.guard: StepGuard | None = None
        #: the slow part of model/'s exports (main process); ``None`` until the session holds its store.
        self.exports: BackgroundExport | None = None
        self.learnt = _Learnt()

    # ------------------------------------------------------------------ the story
    def run(self) -> SessionSummary:
        stop = StopRequest()
        with stop.installed():  # from the session's start to its end: a signal never kills it half-way
            try:
                return self._session(stop)
            finally:
                if self.exports is not None:
                    self.exports.close()  # whatever ended the session: no export process outlives it

    def _session(self, stop: StopRequest) -> SessionSummary:
        self.facts = facts = SessionFacts.begin(self.config, self.store, stop, self._log, own_process=self.own_process)
        self.learnt = _Learnt()
        watchdog: SessionWatchdog | None = None
        try:
            if facts.main:
                self.store.acquire(facts.record.id, force=self.force)
                self.exports = BackgroundExport(self.store.root / MODEL_DIR, facts.warn, enabled=self.background_export)
                learnt = self.learnt
                watchdog = watching.watch_the_end(
                    facts, self._overrun, lambda: watching.where(self.state and self.state.step, learnt.step_began, learnt.mean_step),
                )
            started = time.time()
            folder, saved = resume.resume_point(facts, allow_config_change=self.allow_config_change)
            facts.spent("resume", started)
            cfg = self.config.train
            self.state = saved or TrainerState(run_name=cfg.run_name, fingerprint=fingerprint(self.config))
            self.guard = StepGuard(
                max_skipped=cfg.max_skipped_steps, min_loss_scale=cfg.min_loss_scale, spike_factor=cfg.spike_factor,
                spike_window=cfg.spike_window,
            )
            torch.manual_seed(cfg.seed)  # model init; replaced by the checkpoint's weights when resuming
            self._build(resuming=folder is not None)
            started = time.time()
            resumed_from = self._resume(folder) if folder is not None else self._begin()
            if self.state.export_pending:  # an earlier session ended before model/'s slow part was made
                if facts.main:  # (it may download model/ from the Hub: the others wait off the device meanwhile)
                    pending_export.make_pending(self.built, self.state, self.exports, facts)
                    announce("pending-export")
                else:
                    await_main("pending-export", facts.clock.end)
            facts.spent("resume", started)
            facts.record.start_step = facts.record.end_step = self.state.step
            self.state.sessions.append(facts.record)
            self._write_status("running")
            stop.phase = TRAINING
            with cuda_switches(self.built.cfg.cudnn_benchmark, self.built.cfg.tf32):
                reason = self._train() if self._work_left() else self._nothing_left()
            stop.phase = ENDING
            watching.own_end(watchdog)
            return self._finish(reason, resumed_from)
        except SessionInterrupted as err:
            watching.own_end(watchdog)
            ending.abandon(err, facts)
            raise
        except BaseException as err:
            watching.own_end(watchdog)
            self._fail(err)
            raise

    # ------------------------------------------------------------------ set-up
    def _overrun(self, err: BaseException) -> None:
        """The watchdog's end of the session (another thread; the main one is stuck): as a failure, export closed."""
        try:
            self._fail(err)
        finally:
            if self.exports is not None:
                self.exports.close()

    def _build(self, start: Weights | None = None, resuming: bool = False) -> BuiltPhase:
        """Build the current phase (see :mod:`fintts.train.step.building`), replacing the previous one whole; the phase built."""
        facts = self.facts
        self.built = build_phase(
            self.config.phase(self.state.phase, self.state.resolved), start, accelerator=facts.accelerator, device=facts.device,
            precision=facts.precision, cache=self.store.root / CACHE_DIR, main=facts.main, log=facts.log, progress=self.progress,
            spent=facts.spent, warn=facts.warn, resuming=resuming,
        )
        self.state.resolved = {**self.state.resolved, **self.built.resolved}
        self.learnt.data = describe_data(self.built, facts.log)
        self.learnt.last_eval = None
        return self.built

    def _begin(self) -> None:
        """A new run: its state records the data it starts on."""
        self.state.data = resume.data_record(self.built)
        seed_process(self.built.cfg.seed, self.facts.rank)

    def _resume(self, folder: Path) -> str:
        """Load the checkpoint's weights, optimizers and random streams into the phase built from its state (see
        :mod:`fintts.train.session.resume`)."""
        resume.load_checkpoint(folder, self.state, self.built, self.facts, guard=self.guard, allow_config_change=self.allow_config_change)
        self.learnt.good.add(folder.name)
        return folder.name

    # ------------------------------------------------------------------ the loop
    def _work_left(self) -> bool:
        last_phase = phases.in_last_phase(self.config.train.phases, self.state)
        return self.state.step < self.built.max_steps and not (self.state.stopped_early and self.built.cfg.patience and last_phase)

    def _nothing_left(self) -> StopReason:
        return StopReason.EARLY_STOPPING if self.state.stopped_early else StopReason.MAX_STEPS

    def _batches(self) -> tuple[DataLoader, Any]:
        """The phase's loader from where the run stands (each epoch iterates it again), its first batches, and its models
        in training mode."""
        cfg = self.built.cfg
        sampler = MicroBatchSampler(
            self.built.plan, self.state.epoch, self.state.step_in_epoch,
            micro_batch_size=self.built.micro, rank=self.facts.rank, world=self.facts.world,
        )
        loader = DataLoader(
            self.built.data.dataset,
            batch_sampler=sampler,
            collate_fn=self.built.data.collate,
            num_workers=cfg.num_workers,
            persistent_workers=cfg.persistent_workers and cfg.num_workers > 0,
            pin_memory=cfg.pin_memory and self.facts.device.type == "cuda",
            # a private generator: creating a loader must not consume the training RNG
            generator=torch.Generator().manual_seed(cfg.seed + self.state.epoch),
        )
        for model in self.built.models.values():
            model.train()
        return loader, iter(loader)

    def _train(self) -> StopReason:
        """Step until the processes decide together to stop: for each step, step, log, validate, decide, save or stop."""
        facts = self.facts
        pace, window = _Pace(time.time(), self.built.cfg.checkpoint_every), LossWindow()
        writer = Board.open(self.store.root / TENSORBOARD_DIR if facts.main else None, facts.warn)
        bar = SessionBar(
            step=self.state.step, max_steps=self.built.max_steps, clock=facts.clock, enabled=self.progress and facts.main,
            desc=self.built.cfg.run_name,
        )
        loader, batches = self._batches()
        decision = Decision(stop=None, save=False)
        self.learnt.mean_step = 0.0
        while decision.stop is None:
            flags, validated, failed, diverged = Flags(), False, None, None
            ended = phases.phase_end(self.config.train.phases, self.state, self.built.plan.steps_per_epoch)
            if ended:
                with facts.bound.lifted():  # new models are built: an unmeasured wait
                    switched = resume.next_phase(ended, self.state, self.built, facts, save=self._save, rebuild=self._build)
                if not switched:
                    return StopReason.DISK_FULL
                loader, batches = self._batches()
                if self.built.cfg.eval_every:  # a phase starts with a validation of the weights it begins from
                    failed, validated = self._validate(flags, writer), True
            started = self.learnt.step_began = time.time()
            if self.state.step_in_epoch >= self.built.plan.steps_per_epoch:
                batches = self._next_epoch(loader)
            losses, skipped, out_of_memory = optimizer_step(
                self.built, batches, accelerator=facts.accelerator, guard=self.guard, precision=facts.precision,
                device=facts.device, rank=facts.rank, world=facts.world,
            )
            if out_of_memory is not None:
                flags.out_of_memory = True
            else:
                self._count_step(started, losses, skipped, pace, window, writer)
                every = self.built.cfg.eval_every
                if every and self.state.step % every == 0:
                    failed, validated = self._validate(flags, writer, pace) or failed, True
                diverged = self._judge(flags, pace)
            flags.signal = facts.stop.signal_name
            if facts.main:
                self._poll_exports()
            decision = decide(
                flags, rank=facts.rank, world=facts.world, device=facts.device,
                early_stop_ends_run=phases.in_last_phase(self.config.train.phases, self.state),
            )
            facts.bound.voted()
            self.learnt.mean_step = pace.mean_step if pace.step_times else 0.0
            if validated:
                self.state.stopped_early = decision.early_stop
            decision = self._act(decision, out_of_memory, diverged, failed, pace)
            if out_of_memory is None:
                bar.update(self.state.step, loss=f"{losses.get(self.built.main_loss, float('nan')):.4g}", s_step=f"{pace.mean_step:.2f}")
        bar.close()
        self._record_losses(window, writer)
        if pace.skipped:
            facts.record.warnings.append(f"{pace.skipped} step(s) were skipped in this session, the last for: {pace.last_skipped}")
        writer.close()
        return decision.stop

    def _next_epoch(self, loader: DataLoader) -> Any:
        self.state.epoch += 1
        self.state.step_in_epoch = 0
        loader.batch_sampler.set_epoch(self.state.epoch)
        return iter(loader)

    def _count_step(self, started: float, losses: dict[str, float], skipped: str | None, pace: _Pace, window: LossWindow,
                    writer: Board) -> None:
        """A step taken: the run's counters, its time, its losses (logged when due) and whether it was skipped."""
        self.state.step += 1
        self.state.step_in_epoch += 1
        pace.step_times = (pace.step_times + [time.time() - started])[-20:]
        self.facts.spent("steps", started)
        window.add(losses, pace.step_times[-1])
        if skipped is not None and skipped != FP16_OVERFLOW:
            pace.skipped, pace.last_skipped = pace.skipped + 1, skipped
            if self.guard.in_row == 1 or "spike" in skipped:
                self.facts.log(f"step {self.state.step} skipped: {skipped}")
        if self.state.step % self.built.cfg.log_every == 0 or self.state.step == self.built.max_steps:
            self._record_losses(window, writer)

    def _validate(self, flags: Flags, writer: Board, pace: _Pace | None = None) -> Exception | None:
        """Validate in every process (see :func:`fintts.train.session.validating.validate`): patience and errors go to the
        step's vote; returns this process's error, for the message should the vote stop on it.

        ``pace``: a validation ``eval_every`` asked for, timed (the clock keeps room for the next one); a phase's
        first validation is not.
        """
        started = time.time()
        done = validating.validate(self.built, self.state, writer, self.facts, export=self._export)
        self.learnt.peaks = done.peaks
        if done.evaluated is not None:
            self.learnt.last_eval = done.evaluated
        flags.early_stop, flags.validation_error = flags.early_stop or done.early_stop, flags.validation_error or done.error is not None
        if pace is not None:
            pace.eval_seconds = time.time() - started
            self.facts.spent("validation", started)
        return done.error

    def _judge(self, flags: Flags, pace: _Pace) -> str | None:
        """This process's view after a step taken: divergence, the run's end, the deadline, a checkpoint due.

        Returns why the steps diverged (``None``: they did not), for the message should the vote stop on it.
        """
        cfg = self.built.cfg
        next_eval = bool(cfg.eval_every) and (self.state.step + 1) % cfg.eval_every == 0
        diverged = self.guard.verdict(self.built.scaler.get_scale() if self.built.scaler.is_enabled() else None)
        flags.diverged = diverged is not None
        flags.max_steps = self.state.step >= self.built.max_steps
        flags.deadline = self.facts.clock.must_stop(max(pace.step_times) * 1.2 + (pace.eval_seconds if next_eval else 0.0))
        steady = self.guard.in_row == 0  # while steps are being skipped, latest stays the last good checkpoint
        flags.save_by_time = steady and bool(pace.checkpoint_every) and time.time() - pace.last_save >= pace.checkpoint_every
        flags.save_by_steps = steady and bool(cfg.checkpoint_every_steps) and self.state.step % cfg.checkpoint_every_steps == 0
        return diverged

    def _act(self, decision: Decision, out_of_memory: OutOfMemory | None, diverged: str | None, failed: Exception | None,
             pace: _Pace) -> Decision:
        """Do what the processes decided: report the failure that stops them, or save; a save the disk refuses stops them."""
        facts = self.facts
        if decision.stop is StopReason.VALIDATION_ERROR:
            stopping.validation_failed(failed, decision.failed_processes, rank=facts.rank, step=self.state.step)
        elif decision.stop is StopReason.OUT_OF_MEMORY:
            if out_of_memory is not None:  # always: every process learnt it in the step (see optimizer_step)
                self._stopping(stopping.out_of_memory(out_of_memory, self.built, at=self.state.step, world=facts.world, rank=facts.rank))
        elif decision.stop is StopReason.DIVERGED:
            latest = checkpoint.current(self.store.root) if facts.main else None
            self._stopping(stopping.diverged(diverged or "the steps of another process diverged", step=self.state.step, latest=latest))
        elif decision.save:
            saving = time.time()
            if not self._save():
                decision = Decision(stop=StopReason.DISK_FULL, save=False)
            facts.spent("checkpoints", saving)
            pace.last_save = time.time()
        return decision

    def _stopping(self, why: str) -> None:
        """Why training stops the session: kept in its warnings (the status and the summary say it), and logged."""
        self.facts.record.warnings.append(why)
        self.facts.log("stopping: " + why)

    def _record_losses(self, window: LossWindow, writer: Board) -> None:
        """The window's mean losses (and the learning rate) into the run's history and TensorBoard; none if it is empty."""
        window.record(writer, self.state.history, self.state.step, lr=lambda: self.built.groups[0].optimizer.param_groups[0]["lr"])

    # ------------------------------------------------------------------ saving
    def _save(self, *, final: bool = False, export: bool = True) -> bool:
        """Save a checkpoint of this step and hand it to the store; ``False`` when the disk is full (then nothing changed).
        ``export=False``: ``model/`` already holds this step's export (the final save's, made before its wait).

        The checkpoint comes first: once it is written, nothing after it (the status, the
        ``model/`` export, the snapshot for a push) can keep it from being published.
        """
        facts, state, learnt = self.facts, self.state, self.learnt
        started = time.time()
        rngs = gather_object([capture_rng()])
        name = checkpoint.name_for_step(state.step)
        full = False
        if facts.main:
            state.rng = rngs
            state.guard = self.guard.state()
            state.precision, state.versions = facts.precision, library_versions()
            state.world_size, state.micro_batch_size = facts.world, self.built.micro
            facts.record.end_step = state.step
            facts.record.ended = time.time()
            if state.best_step is not None and state.best_checkpoint is None:
                state.best_checkpoint = name
            if export and state.best_step is None and validating.slow_part(self.built, self.exports) is not None:
                state.export_pending = True  # a kill before the export below is made leaves it to the next session
            try:
                checkpoint.save(
                    self.store.root, name,
                    lambda folder: write_checkpoint(folder, self.built, state, learnt.last_eval["files"] if learnt.last_eval else {},
                                                    plot=final or self.store.push_due()),
                )
            except Exception as err:
                if not is_disk_full(err):
                    raise
                full = True
                if isinstance(err, checkpoint.LatestNotWritten):  # the folder is whole: it is the one to resume from
                    learnt.good.add(name)
                    self._stopping(stopping.latest_not_written(name, self.store.root))
                else:
                    self._stopping(stopping.disk_full(name, state, self.store.root))
            else:
                learnt.good.add(name)
                if export and state.best_step is None:  # no validated best yet: the newest weights are the model
                    self._export()
                self._poll_exports()  # a finished background export goes into this push
                holder = state.best_checkpoint
                phase_ends = [record["checkpoint"] for record in state.phases]  # each phase's last weights
                self.store.prune(self.built.cfg.keep_last, ([holder] if holder else []) + phase_ends)
                self._write_status("running")
                self.store.publish(name, final=final)
                learnt.durable = time.time() - started + max(self.store.transfer_seconds()[-5:] or [0.0])
                facts.clock.record(learnt.durable)
                state.durable_seconds = list(facts.clock.measured)
        (full,) = vote([full], facts.device)
        facts.accelerator.wait_for_everyone()
        return not full

    def _export(self) -> None:
        """Replace ``model/`` with the task's export (main process; see :func:`fintts.train.session.validating.export`)."""
        validating.export(self.built, self.state, self.exports, self.facts)

    def _poll_exports(self) -> None:
        """Put a finished background export in place (main process; see :func:`fintts.train.session.validating.poll_exports`)."""
        validating.poll_exports(self.exports, self.state, self.facts.clock, self.learnt.durable)

    # ------------------------------------------------------------------ the end
    def _finish(self, reason: StopReason, resumed_from: str | None) -> SessionSummary:
        """The final save, then (main process) the wait for the store, the status and the lease's release
        (see :mod:`fintts.train.session.ending`).

        The other processes wait for the main one's final status off the device (on the
        process group's store, until the session's end), never in a collective while it
        waits for the Hub: a slow final push cannot make a watchdog abort them.
        """
        facts, record = self.facts, self.facts.record
        record.reason = reason.value  # before the final save, so the checkpoint's sessions log says why
        started = time.time()
        reason = ending.final_save(
            reason, self.state, facts, save=self._save, export=self._export,
            intact=lambda name: ending.intact(name, self.learnt.good, facts, step=self.state.step),
            settle=lambda why: validating.settle_exports(why, self.state, self.exports, facts, durable=self.learnt.durable),
        )
        record.reason = reason.value  # a final save the disk refused
        self.learnt.peaks = gather_object([memory.peak_memory(facts.device)])
        wait_interrupted = False
        if facts.main:
            durable, wait_interrupted = ending.wait_durable(facts)
            pending = self.store.pending()
            facts.spent("final", started)
            record.end_step, record.ended = self.state.step, time.time()
            final = {"status": self._write_status(ending.final_state(reason), reason=reason.value), "durable": durable, "pending": pending}
            ending.tell_final(final, facts)
        else:
            final = ending.hear_final(facts.clock)
        summary = SessionSummary.from_status(
            final["status"], resumed_from=resumed_from, durable=final["durable"], pending=final["pending"],
            clock_origin=facts.clock_origin,
        )
        facts.log(summary.format())  # before the release: whatever happens next, this has been said
        if facts.main:
            ending.give_back(facts, wait_interrupted=wait_interrupted)
        return summary

    def _fail(self, err: BaseException) -> None:
        """Record why the session failed, push what it saved, give the lease back (see :func:`fintts.train.session.ending.fail`)."""
        built = self.built is not None  # set-up had not built the phase: no state worth a status
        ending.fail(err, self.state if built else None, self.facts, write_status=self._write_status)

    def _write_status(self, state: str, *, reason: str | None = None) -> dict[str, Any] | None:
        """Write ``status.json`` and the run's page (main process; see :func:`fintts.train.session.ending.write_status`)."""
        if not self.facts.main:
            return None
        return ending.write_status(state, reason, self.facts, run=self.state, built=self.built, peaks=self.learnt.peaks,
                                   data=self.learnt.data)


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
    An MMS-sized voice's took ~36 s of an H200 session's end (2026-11-26), once per session.
    """
    config = as_run_config(config, overrides, settings)
    trainer = Trainer(config, allow_config_change=allow_config_change, force=force, progress=progress, log=log,
                      background_export=background_export)
    return trainer.run()

__all__ = ["ConfigDrift", "Trainer", "train"]
