"""One session of training: resume, step until a reason to stop, save, make it durable, exit.

Read :meth:`Trainer.run` top to bottom; it is the whole story: build the phase, resume, and
for each step: step, log, validate, decide, save or stop. The pieces it calls have rooms of
their own: :mod:`~fintts.train.building` (a phase as one value), :mod:`~fintts.train.optimizer_step`,
:mod:`~fintts.train.validation` (best and patience), :mod:`~fintts.train.decision` (what every
process does after a step, decided together), :mod:`~fintts.train.saving` and
:mod:`~fintts.train.collective` (how the processes wait for the main one off the device).

The session's end is planned backwards from its limit (:mod:`fintts.train.clock`): the
store's requests are bounded by it, the final wait gives up before it, and the summary is
printed before the lease is released, so a session killed at its limit has already said
whether its checkpoint is safe and how to push it if not.
"""

from __future__ import annotations

import dataclasses
import datetime
import errno
import json
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator
from accelerate.utils import InitProcessGroupKwargs, gather_object
from safetensors.torch import load_model
from torch.utils.data import DataLoader

from fintts.train import card, checkpoint, data_drift, memory, phases, status, validation
from fintts.train.background_export import BackgroundExport
from fintts.train.building import BuiltPhase, build_phase, describe_data
from fintts.train.clock import ENDING, TRAINING, SessionClock, SessionInterrupted, StopRequest, session_clock
from fintts.train.collective import announce, await_main, post_failure, posted_failures, read_note, vote
from fintts.train.config import ConfigDrift, RunConfig, as_run_config, fingerprint, fingerprint_changes
from fintts.train.decision import FAILURES, FINISHED, Decision, Flags, StopReason, decide
from fintts.train.guard import FP16_OVERFLOW, StepGuard
from fintts.train.metrics import Board, LossWindow
from fintts.train.optimizer_step import OutOfMemory, optimizer_step
from fintts.train.platform import device_label, host_name, library_versions
from fintts.train.precision import resolve_precision
from fintts.train.progress import SessionBar
from fintts.train.sampler import MicroBatchSampler
from fintts.train.saving import is_disk_full, replace_export, write_checkpoint
from fintts.train.seeding import seed_process
from fintts.train.state import SessionRecord, TrainerState, capture_rng, isolated_rng, restore_rng
from fintts.train.stepping import cuda_switches, first_line
from fintts.train.stores import Store, store_for
from fintts.train.stores.base import CACHE_DIR, MODEL_DIR
from fintts.train.summary import SessionSummary
from fintts.train.task import Weights
from fintts.train.watchdog import CollectiveBound, SessionWatchdog

#: Seconds the main process waits at most for the others to read the session's final status (they poll for it).
FINAL_READ = 10.0
#: Seconds the lease's release may take after a person stopped the final wait (they want the prompt back).
INTERRUPTED_RELEASE = 5.0


class ValidationFailed(RuntimeError):
    """Another process's validation raised; every process ends the session with it (the vote said so)."""


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


class Trainer:
    """Trains one session of a run and leaves it resumable.

    Every setting comes from ``config``. ``store`` replaces the store the config describes
    (for a store built in code, e.g. a Hub store with other retry timings).
    ``allow_config_change`` accepts a resumed run whose math-changing settings differ from
    its checkpoint's; ``force`` takes the store from another writer.
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
    ):
        self.config, self.cfg = config, config.train
        self.allow_config_change, self.force = allow_config_change, force
        self.wait_interrupted = False
        self.progress, self._log = progress, log
        self.store = store or store_for(self.cfg)
        #: the phase being trained (see :mod:`fintts.train.building`); ``None`` until the session built it.
        self.built: BuiltPhase | None = None
        #: the slow part of model/'s exports (main process); ``None`` until the session holds its store.
        self.exports: BackgroundExport | None = None

    # ------------------------------------------------------------------ the story
    def run(self) -> SessionSummary:
        self.stop = StopRequest()
        with self.stop.installed():  # from the session's start to its end: a signal never kills it half-way
            try:
                return self._session()
            finally:
                if self.exports is not None:
                    self.exports.close()  # whatever ended the session: no export process outlives it

    def _session(self) -> SessionSummary:
        self.clock = self._make_clock()
        self.bound = CollectiveBound(self.cfg.collective_timeout, self.clock.limit)
        self.watchdog: SessionWatchdog | None = None
        self.accelerator = Accelerator(kwargs_handlers=self._process_group_settings())
        self.main = self.accelerator.is_main_process
        # accelerate names the CPU of a multi-process run "cpu:0", which torch.load and safetensors refuse
        self.device = torch.device("cpu") if self.accelerator.device.type == "cpu" else self.accelerator.device
        self.world, self.rank = self.accelerator.num_processes, self.accelerator.process_index
        self.precision = resolve_precision(self.cfg.precision, self.device)
        self.store.set_deadline(self.clock.end)
        self.session = SessionRecord(
            id=uuid.uuid4().hex[:12], host=host_name(), devices=device_label(self.device, self.world), precision=self.precision,
            started=time.time(),
        )
        self.session.phases["before"] = max(0.0, self.session.started - self.clock.start)
        memory.reset_peaks(self.device)  # this session's peak, also when one process trains several
        try:
            if self.main:
                self.store.acquire(self.session.id, force=self.force)
                self.exports = BackgroundExport(self.store.root / MODEL_DIR, self._warn)
                self._watch_the_end()
            self._durable: float | None = None  # seconds the newest checkpoint took to save and push (main process)
            started = time.time()
            folder, saved = self._resume_point()
            self._spent("resume", started)
            self.state = saved or TrainerState(run_name=self.cfg.run_name, fingerprint=fingerprint(self.config))
            self.guard = StepGuard(
                max_skipped=self.cfg.max_skipped_steps, min_loss_scale=self.cfg.min_loss_scale,
                spike_factor=self.cfg.spike_factor, spike_window=self.cfg.spike_window,
            )
            self.memory: list[dict[str, Any]] = []
            torch.manual_seed(self.cfg.seed)  # model init; replaced by the checkpoint's weights when resuming
            self._build(resuming=folder is not None)
            started = time.time()
            resumed_from = self._resume(folder) if folder is not None else self._begin()
            if self.main and self.state.export_pending and (self.store.root / MODEL_DIR).is_dir():
                self._export_later()  # an earlier session ended before the slow part of model/'s export was made
            self._spent("resume", started)
            self.session.start_step = self.session.end_step = self.state.step
            self.state.sessions.append(self.session)
            self._write_status("running")
            self.stop.phase = TRAINING
            with cuda_switches(self.cfg.cudnn_benchmark, self.cfg.tf32):
                reason = self._train() if self._work_left() else self._nothing_left()
            self.stop.phase = ENDING
            self._own_end()
            return self._finish(reason, resumed_from)
        except SessionInterrupted as err:
            self._own_end()
            self._abandon(err)
            raise
        except BaseException as err:
            self._own_end()
            self._fail(err)
            raise

    # ------------------------------------------------------------------ set-up
    def log(self, message: str) -> None:
        if self.main:
            self._log(message)

    def _spent(self, phase: str, since: float) -> None:
        """Add the time since ``since`` to this session's ``phase`` (see :data:`fintts.train.state.PHASES`)."""
        self.session.phases[phase] = self.session.phases.get(phase, 0.0) + time.time() - since

    def _make_clock(self) -> SessionClock:
        clock, self.clock_origin = session_clock(self.cfg)
        return clock

    def _process_group_settings(self) -> list[InitProcessGroupKwargs]:
        """The process group's timeout until the steps are measured (see :class:`~fintts.train.watchdog.CollectiveBound`):
        ``collective_timeout``, or (``auto``) the session's limit (torch's default without one)."""
        seconds = self.bound.initial
        return [InitProcessGroupKwargs(timeout=datetime.timedelta(seconds=seconds))] if seconds else []

    def _watch_the_end(self) -> None:
        """With several processes, the main one's clock is watched from a thread (see :mod:`fintts.train.watchdog`).

        Only then: a single process may be the notebook's own kernel, which the watchdog would end.
        """
        if self.world > 1 and self.clock.end is not None:
            self.watchdog = SessionWatchdog(self.clock, self.stop, self._overrun, self._where, self.log)
            self.watchdog.start()

    def _own_end(self) -> None:
        """The main thread ends the session, unless the watchdog took the end: then it leaves it the process."""
        if self.watchdog is not None and not self.watchdog.stand_down():
            self.watchdog.join()

    def _overrun(self, err: BaseException) -> None:
        """The watchdog's end of the session (another thread; the main one is stuck): as a failure, export closed."""
        try:
            self._fail(err)
        finally:
            if self.exports is not None:
                self.exports.close()

    def _where(self) -> str:
        """Where training stands, for the watchdog's error."""
        began = getattr(self, "_step_began", None)
        if began is None or not getattr(self, "state", None):
            return "the session was still setting up"
        mean = self._mean_step
        return (f"step {self.state.step + 1} began {time.time() - began:.0f} s ago"
                + (f" (steps took {mean:.1f} s)" if mean else "") + ": a process hung, or this step is far slower than measured")

    def _build(self, start: Weights | None = None, resuming: bool = False) -> None:
        """Build the current phase (see :mod:`fintts.train.building`), replacing the previous one whole."""
        self.built = build_phase(
            self.config.phase(self.state.phase, self.state.resolved), start, accelerator=self.accelerator, device=self.device,
            precision=self.precision, cache=self.store.root / CACHE_DIR, main=self.main, log=self.log, progress=self.progress,
            spent=self._spent, warn=self._warn, resuming=resuming,
        )
        self.state.resolved = {**self.state.resolved, **self.built.resolved}
        self.cfg = self.built.cfg
        self.data_facts = describe_data(self.built, self.log)
        self.last_eval: dict[str, Any] | None = None

    def _resume_point(self) -> tuple[Path | None, TrainerState | None]:
        """The checkpoint to resume from and its state, read before anything is built; drift is refused here."""
        if self.main:
            folder = self.store.resume_point(self.log)
            announce("resume-point")
        else:  # off the device: the main process may be downloading from the Hub for a while
            await_main("resume-point", self.clock.end)
            folder = checkpoint.latest_complete(self.store.root, log=lambda _: None)
        if folder is None:
            self.log(f"starting run {self.cfg.run_name!r} in {self.store.url}")
            return None, None
        saved = TrainerState.from_json((folder / "state.json").read_text())
        current = fingerprint(self.config)
        changes = fingerprint_changes(saved.fingerprint, current)
        if changes and not self.allow_config_change:
            raise ConfigDrift(
                f"{folder.name} in {self.store.url} was trained with other settings that change the result:\n  "
                + "\n  ".join(changes)
                + "\nRestore them, or pass --allow-config-change (allow_config_change=True) to continue with the new ones,"
                " or train a new run in another --store."
            )
        if changes:
            self.log("continuing with changed settings (--allow-config-change):\n  " + "\n  ".join(changes))
            saved.fingerprint = current
        return folder, saved

    def _begin(self) -> None:
        """A new run: its state records the data it starts on."""
        self.state.data = self._data_record()
        seed_process(self.cfg.seed, self.accelerator.process_index)
        self._good: set[str] = set()

    def _data_record(self) -> dict[str, Any] | None:
        return dataclasses.asdict(self.built.data_fingerprint) if self.built.data_fingerprint else None

    def _resume(self, folder: Path) -> str:
        """Load the checkpoint's weights, optimizers and random streams into the phase built from its state."""
        saved = self.state
        data = self._check_data(saved, folder.name)
        for name, model in self.built.raw_models.items():
            try:
                load_model(model, str(folder / f"{name}.safetensors"), strict=True, device=str(self.device))
            except RuntimeError as err:  # shapes that do not fit: say why, not a strict-load dump
                raise ConfigDrift(
                    f"{folder.name} in {self.store.url}: its {name} weights do not fit the model built now "
                    f"({str(err).strip().splitlines()[-1].strip()})."
                    + (f" The data changed: {data.labels}." if data.labels else "")
                    + " Restore the settings and data it was trained with, or train a new run in another --store."
                ) from None
        # on the CPU: the optimizer moves its tensors to its parameters' device itself, and keeps
        # AdamW's step counters on the CPU where it wants them (on the GPU each step would sync on them)
        optim = torch.load(folder / "optim.pt", map_location="cpu", weights_only=True)
        sched = torch.load(folder / "sched.pt", weights_only=True)
        for g in self.built.groups:
            g.optimizer.load_state_dict(optim[g.name])
            self.built.schedulers[g.name].load_state_dict(sched[g.name])
        self._load_scaler(torch.load(folder / "scaler.pt", weights_only=True), saved, folder.name)
        versions = library_versions()
        changed = {k: (v, versions.get(k, "(none)")) for k, v in saved.versions.items() if versions.get(k) != v}
        if changed:
            self.log(
                f"library versions changed since {folder.name} (results may differ slightly from an unbroken run): "
                + ", ".join(f"{k} {a} -> {b}" for k, (a, b) in sorted(changed.items()))
            )
        if saved.world_size != self.world or saved.micro_batch_size != self.built.micro:
            self.log(
                f"resuming on {self.world} device(s) with micro_batch_size={self.built.micro} (was {saved.world_size} × "
                f"{saved.micro_batch_size}): accumulation is now {self.built.accumulation} (was "
                f"{self.cfg.batch_size // max(1, saved.world_size * saved.micro_batch_size)}), so each step still uses "
                f"batch_size={self.cfg.batch_size} samples"
            )
        if saved.world_size == self.world and len(saved.rng) == self.world:
            restore_rng(saved.rng[self.accelerator.process_index])
        else:
            torch.manual_seed(self.cfg.seed + 7919 * saved.step + self.accelerator.process_index)
            self.log("the number of processes changed, so random streams restart from the seed and step (not bit-exact)")
        if saved.best_step is not None and saved.best_checkpoint is None:  # saved before the holder was recorded
            saved.best_checkpoint = status.best_checkpoint(saved.best_step, self.store.checkpoint_names())
        self._good = {folder.name}  # verified checkpoints of this session: the resumed one, then each one saved
        self.guard.restore(saved.guard)
        self.clock.measured = list(saved.durable_seconds)
        phase = f", phase {self.config.train.phases[saved.phase].name}" if self.config.train.phases else ""
        self.log(f"resuming run {self.cfg.run_name!r} from {folder.name} (step {saved.step}, epoch {saved.epoch}{phase}) "
                 f"in {self.store.url}")
        return folder.name

    def _check_data(self, saved: TrainerState, name: str) -> data_drift.DataChanges:
        """Compare the task's data with the checkpoint's: refuse changed labels, warn of changed items (and reset the best)."""
        changes = data_drift.compare(saved.data, self.built.data_fingerprint)
        if changes.labels and not self.allow_config_change:
            raise ConfigDrift(
                f"{name} in {self.store.url} was trained for other labels than the data has now: {changes.labels}. "
                "The model has one slot per label, so they cannot change within a run: restore the data, or train a new "
                "run in another --store (--allow-config-change continues if the shapes still fit, with the slots remapped)."
            )
        if changes.items:
            self._warn(
                f"the data changed since {name}: {changes.items}. The epoch plan follows the new data, so this "
                "resume is not exact"
            )
        if changes.heldout:
            self._warn(
                f"the validation data changed since {name}: {changes.heldout}. Validations are no longer comparable "
                f"with the stored best ({saved.best_value} at step {saved.best_step}), so the best starts again"
            )
            saved.best_value = saved.best_step = saved.best_checkpoint = None
            saved.bad_evals, saved.stopped_early = 0, False
        saved.data = self._data_record()
        return changes

    def _load_scaler(self, scaler_state: dict[str, Any], saved: TrainerState, name: str) -> None:
        """The fp16 loss scaler across a change of precision (other hardware, or another setting).

        fp16 → fp16 carries the scale on; bf16/fp32 → fp16 starts the scaler fresh (there is
        no scale to carry: the checkpoint's scaler state is empty); fp16 → bf16/fp32 drops the
        scale, which those precisions do not need. Each change is said, and kept in the
        session's warnings: the training dynamics change with the precision.
        """
        was = saved.precision or ("fp16" if scaler_state else "bf16 or fp32")
        if self.built.scaler.is_enabled() and scaler_state:
            self.built.scaler.load_state_dict(scaler_state)
            return
        if self.built.scaler.is_enabled():
            note = f"{name} was trained in {was}; fp16 loss scaling starts fresh (scale {self.built.scaler.get_scale():g})"
        elif scaler_state:
            note = (f"{name} was trained in fp16; its loss scale ({scaler_state.get('scale')}) is not needed in {self.precision} "
                    "and is dropped")
        elif saved.precision and saved.precision != self.precision:
            note = f"{name} was trained in {saved.precision}; training continues in {self.precision}"
        else:
            return
        self.log(note)
        self.session.warnings.append(note)

    # ------------------------------------------------------------------ the loop
    def _work_left(self) -> bool:
        last_phase = phases.in_last_phase(self.config.train.phases, self.state)
        return self.state.step < self.built.max_steps and not (self.state.stopped_early and self.cfg.patience and last_phase)

    def _nothing_left(self) -> StopReason:
        return StopReason.EARLY_STOPPING if self.state.stopped_early else StopReason.MAX_STEPS

    def _loader(self) -> DataLoader:
        """This session's loader, from where the run stands; each epoch iterates it again."""
        self.sampler = MicroBatchSampler(
            self.built.plan, self.state.epoch, self.state.step_in_epoch,
            micro_batch_size=self.built.micro, rank=self.accelerator.process_index, world=self.world,
        )
        return DataLoader(
            self.built.data.dataset,
            batch_sampler=self.sampler,
            collate_fn=self.built.data.collate,
            num_workers=self.cfg.num_workers,
            persistent_workers=self.cfg.persistent_workers and self.cfg.num_workers > 0,
            pin_memory=self.cfg.pin_memory and self.device.type == "cuda",
            # a private generator: creating a loader must not consume the training RNG
            generator=torch.Generator().manual_seed(self.cfg.seed + self.state.epoch),
        )

    def _train(self) -> StopReason:
        """Step until the processes decide together to stop: for each step, step, log, validate, decide, save or stop."""
        pace, window, writer = _Pace(time.time(), self.cfg.checkpoint_every), LossWindow(), self._tensorboard()
        bar = SessionBar(
            step=self.state.step, max_steps=self.built.max_steps, clock=self.clock, enabled=self.progress and self.main,
            desc=self.cfg.run_name,
        )
        loader, batches = self._batches()
        decision = Decision(stop=None, save=False)
        self._mean_step = 0.0
        while decision.stop is None:
            flags, validated, diverged = Flags(), False, None
            ended = phases.phase_end(self.config.train.phases, self.state, self.built.plan.steps_per_epoch)
            if ended:
                with self.bound.lifted():  # new models are built: an unmeasured wait
                    switched = self._next_phase(ended)
                if not switched:
                    return StopReason.DISK_FULL
                loader, batches = self._batches()
                if self.cfg.eval_every:  # a phase starts with a validation of the weights it begins from
                    validated = self._validate_into(flags, writer)
            started = self._step_began = time.time()
            if self.state.step_in_epoch >= self.built.plan.steps_per_epoch:
                batches = self._next_epoch(loader)
            losses, skipped, out_of_memory = optimizer_step(
                self.built, batches, accelerator=self.accelerator, guard=self.guard, precision=self.precision,
                device=self.device, rank=self.rank, world=self.world,
            )
            if out_of_memory is not None:
                flags.out_of_memory = True
            else:
                self._count_step(started, losses, skipped, pace, window, writer)
                validated = self._validate_if_due(flags, writer, pace) or validated
                diverged = self._judge(flags, pace)
            flags.signal = self.stop.signal_name
            if self.main:
                self._poll_exports()
            decision = decide(
                flags, rank=self.rank, world=self.world, device=self.device,
                early_stop_ends_run=phases.in_last_phase(self.config.train.phases, self.state),
            )
            self.bound.voted()
            self._mean_step = pace.mean_step if pace.step_times else 0.0
            if validated:
                self.state.stopped_early = decision.early_stop
            decision = self._act(decision, out_of_memory, diverged, pace)
            if out_of_memory is None:
                bar.update(self.state.step, loss=f"{losses.get(self.built.main_loss, float('nan')):.4g}", s_step=f"{pace.mean_step:.2f}")
        bar.close()
        self._record_losses(window, writer)
        if pace.skipped:
            self.session.warnings.append(f"{pace.skipped} step(s) were skipped in this session, the last for: {pace.last_skipped}")
        writer.close()
        return decision.stop

    def _batches(self) -> tuple[DataLoader, Any]:
        """The phase's loader from where the run stands, its first batches, and its models in training mode."""
        loader = self._loader()
        for model in self.built.models.values():
            model.train()
        return loader, iter(loader)

    def _next_epoch(self, loader: DataLoader) -> Any:
        self.state.epoch += 1
        self.state.step_in_epoch = 0
        self.sampler.set_epoch(self.state.epoch)
        return iter(loader)

    def _count_step(self, started: float, losses: dict[str, float], skipped: str | None, pace: _Pace, window: LossWindow,
                    writer: Board) -> None:
        """A step taken: the run's counters, its time, its losses (logged when due) and whether it was skipped."""
        self.state.step += 1
        self.state.step_in_epoch += 1
        pace.step_times = (pace.step_times + [time.time() - started])[-20:]
        self._spent("steps", started)
        window.add(losses, pace.step_times[-1])
        if skipped is not None and skipped != FP16_OVERFLOW:
            pace.skipped, pace.last_skipped = pace.skipped + 1, skipped
            if self.guard.in_row == 1 or "spike" in skipped:
                self.log(f"step {self.state.step} skipped: {skipped}")
        if self.state.step % self.cfg.log_every == 0 or self.state.step == self.built.max_steps:
            self._record_losses(window, writer)

    def _validate_if_due(self, flags: Flags, writer: Board, pace: _Pace) -> bool:
        """Validate when ``eval_every`` says so, timed (the clock keeps room for the next one); whether it ran."""
        if not (self.cfg.eval_every and self.state.step % self.cfg.eval_every == 0):
            return False
        started = time.time()
        self._validate_into(flags, writer)
        pace.eval_seconds = time.time() - started
        self._spent("validation", started)
        return True

    def _validate_into(self, flags: Flags, writer: Board) -> bool:
        early, failed = self._validate(writer)
        flags.early_stop, flags.validation_error = flags.early_stop or early, flags.validation_error or failed
        return True

    def _judge(self, flags: Flags, pace: _Pace) -> str | None:
        """This process's view after a step taken: divergence, the run's end, the deadline, a checkpoint due.

        Returns why the steps diverged (``None``: they did not), for the message should the vote stop on it.
        """
        cfg = self.cfg
        next_eval = bool(cfg.eval_every) and (self.state.step + 1) % cfg.eval_every == 0
        diverged = self.guard.verdict(self.built.scaler.get_scale() if self.built.scaler.is_enabled() else None)
        flags.diverged = diverged is not None
        flags.max_steps = self.state.step >= self.built.max_steps
        flags.deadline = self.clock.must_stop(max(pace.step_times) * 1.2 + (pace.eval_seconds if next_eval else 0.0))
        steady = self.guard.in_row == 0  # while steps are being skipped, latest stays the last good checkpoint
        flags.save_by_time = steady and bool(pace.checkpoint_every) and time.time() - pace.last_save >= pace.checkpoint_every
        flags.save_by_steps = steady and bool(cfg.checkpoint_every_steps) and self.state.step % cfg.checkpoint_every_steps == 0
        return diverged

    def _act(self, decision: Decision, out_of_memory: OutOfMemory | None, diverged: str | None, pace: _Pace) -> Decision:
        """Do what the processes decided: report the failure that stops them, or save; a save the disk refuses stops them."""
        if decision.stop is StopReason.VALIDATION_ERROR:
            self._validation_failed(decision.failed_processes)
        elif decision.stop is StopReason.OUT_OF_MEMORY:
            self._out_of_memory(out_of_memory)
        elif decision.stop is StopReason.DIVERGED:
            self._diverged(diverged or "the steps of another process diverged")
        elif decision.save:
            saving = time.time()
            if not self._save():
                decision = Decision(stop=StopReason.DISK_FULL, save=False)
            self._spent("checkpoints", saving)
            pace.last_save = time.time()
        return decision

    def _next_phase(self, reason: str) -> bool:
        """End the current phase and build the next one from its final weights (see :mod:`fintts.train.phases`).

        ``False`` when the phase's end could not be saved (the disk is full): the phase
        then does not end, and the session stops as for any checkpoint that cannot be saved.
        """
        ended = self.config.train.phases[self.state.phase].name
        latest = checkpoint.read_latest(self.store.root)
        if (latest is None or checkpoint.step_of(latest) != self.state.step) and not self._save():
            return False
        start = {name: model.state_dict() for name, model in self.built.raw_models.items()}
        self.accelerator.free_memory()  # the ended phase's models and optimizers are not kept alive by accelerate
        phases.begin_next(self.config.train.phases, self.state, reason, checkpoint.name_for_step(self.state.step))
        with isolated_rng(self.cfg.seed + 7_777 * self.state.phase):
            self._build(start)
        del start
        self.state.data = self._data_record()
        self.log(f"step {self.state.step}: phase {ended} ended ({reason}); phase {self.config.train.phases[self.state.phase].name} "
                 f"begins" + "".join(f", {k}: {v}" for k, v in self.state.resolved.items()))
        return True

    def _validation_failed(self, processes: tuple[int, ...]) -> None:
        """The vote found an error in some process's validation: each process ends the session with it."""
        if self.rank in processes:
            raise self.validation_error
        raise ValidationFailed(f"validation failed in process {min(processes)} at step {self.state.step}")

    def _diverged(self, why: str) -> None:
        """Training went bad: say so, and end the session keeping the last good checkpoint (no new one is saved)."""
        latest = checkpoint.read_latest(self.store.root) if self.main else None
        self.session.warnings.append(
            f"training diverged at step {self.state.step}: {why}. No checkpoint was saved since the trouble began; "
            f"{latest or 'no checkpoint'} is kept as latest. Lower lr, set a gradient clip, or use precision=bf16 or fp32 "
            "(fp16 overflows most easily), then run again (with --allow-config-change for changed settings)"
        )
        self.log("stopping: " + self.session.warnings[-1])

    def _out_of_memory(self, step: OutOfMemory | None) -> None:
        """A device ran out of memory: say where and what to change; the session ends saving where it was (the step is redone)."""
        if step is None:  # cannot be: every process learnt it in the step (see _optimizer_step)
            return
        world_batch = self.cfg.batch_size // self.world
        smaller = next((m for m in range(self.built.micro - 1, 0, -1) if world_batch % m == 0), None)
        advice = [
            f"micro_batch_size={smaller} (batch_size={self.cfg.batch_size} stays: {world_batch // smaller} micro-batches "
            "are accumulated per step, same result, slower)"
        ] if smaller else []
        advice += self.built.task.memory_advice()
        first = step.processes[0]
        message = first_line(step.error) if step.error is not None and first == self.rank else read_note("out-of-memory", first)
        where = f" in process {first}" if self.world > 1 else ""
        self.session.warnings.append(
            f"out of memory{where} at step {self.state.step + 1} ({message or 'out of memory'}). The session saved step "
            f"{self.state.step} and stopped; the same batch comes again at the same step, so run again with less memory per step: "
            + ("; ".join(advice) if advice else "a smaller model or shorter clips")
        )
        self.log("stopping: " + self.session.warnings[-1])

    def _record_losses(self, window: LossWindow, writer: Board) -> None:
        """The window's mean losses (and the learning rate) into the run's history and TensorBoard; none if it is empty."""
        means = window.take()
        if means is None:
            return
        entry = {"step": self.state.step, **means}
        entry["lr"] = self.built.groups[0].optimizer.param_groups[0]["lr"]
        self.state.history.append(entry)
        for key, value in entry.items():
            if key != "step":
                writer.scalar(f"train/{key}", value, self.state.step)

    def _tensorboard(self) -> Board:
        if not self.main:
            return Board(None, self._warn)
        from torch.utils.tensorboard import SummaryWriter  # imports tensorboard (seconds); only the main process logs

        try:
            return Board(SummaryWriter(str(self.store.root / "tb")), self._warn)
        except OSError as err:
            self._warn(f"no TensorBoard logs this session: {err}")
            return Board(None, self._warn)

    def _warn(self, message: str) -> None:
        """Something a person must know, that does not stop training: logged, and kept in the session's warnings."""
        if message not in self.session.warnings:
            self.session.warnings.append(message)
            self.log(f"warning: {message}")

    def _validate(self, writer: Board) -> tuple[bool, bool]:
        """Validate in every process: whether patience ran out, and whether this process's validation raised.

        Every process validates the same held-out data with the same weights and random
        stream; the main process keeps the results. An error is not raised here but brought
        to the step's vote (posted first, so the main process can name it), so the other
        processes learn of it in the same collective instead of waiting in the next one.
        """
        self.memory = gather_object([memory.peak_memory(self.device)])
        try:
            return self._evaluate(writer), False
        except Exception as err:
            self.validation_error = err
            post_failure(self.rank, f"{type(err).__name__}: {err}")
            self.log(f"validation failed at step {self.state.step}: {type(err).__name__}: {err}")
            return False, True

    def _evaluate(self, writer: Board) -> bool:
        """Validate, keep the best export (main process), and say whether patience ran out."""
        for model in self.built.models.values():
            model.eval()
        with torch.no_grad(), isolated_rng(self.cfg.seed + 99_991):
            evaluation = self.built.task.evaluate(self.built.models, self.state.step)
        for model in self.built.models.values():
            model.train()
        for rel in evaluation.files:  # written into checkpoints: a name from a corpus must not reach outside them
            checkpoint.safe_relative_path(rel, what=f"{type(self.built.task).__name__}.evaluate() file")
        self.last_eval = {"step": self.state.step, "metrics": evaluation.metrics, "files": evaluation.files}
        for key, value in evaluation.metrics.items():
            writer.scalar(key, value, self.state.step)
        improved, stop = validation.record(
            self.state, evaluation.metrics, monitor=self.built.monitor, mode=self.built.monitor_mode, min_delta=self.cfg.min_delta,
            patience=self.cfg.patience,
        )
        if improved and self.main:
            self._export()
        self.log(
            f"step {self.state.step}: "
            + ", ".join(f"{k} {v:.4g}" for k, v in evaluation.metrics.items())
            + (f" (best {self.state.best_value:.4g} at step {self.state.best_step})" if self.state.best_value is not None else "")
            + f"; memory: {memory.describe(self.memory)}"
        )
        return stop

    # ------------------------------------------------------------------ saving
    def _save(self, *, final: bool = False, export: bool = True) -> bool:
        """Save a checkpoint of this step and hand it to the store; ``False`` when the disk is full (then nothing changed).
        ``export=False``: ``model/`` already holds this step's export (the final save's, made before its wait).

        The checkpoint comes first: once it is written, nothing after it (the status, the
        ``model/`` export, the snapshot for a push) can keep it from being published.
        """
        started = time.time()
        rngs = gather_object([capture_rng()])
        name = checkpoint.name_for_step(self.state.step)
        full = False
        if self.main:
            self.state.rng = rngs
            self.state.guard = self.guard.state()
            self.state.precision, self.state.versions = self.precision, library_versions()
            self.state.world_size, self.state.micro_batch_size = self.world, self.built.micro
            self.session.end_step = self.state.step
            self.session.ended = time.time()
            if self.state.best_step is not None and self.state.best_checkpoint is None:
                self.state.best_checkpoint = name
            if export and self.state.best_step is None and self.built.task.export_later() is not None:
                self.state.export_pending = True  # a kill before the export below is made leaves it to the next session
            try:
                checkpoint.save(
                    self.store.root, name,
                    lambda folder: write_checkpoint(folder, self.built, self.state, self.last_eval["files"] if self.last_eval else {},
                                                    plot=final or self.store.push_due()),
                )
            except Exception as err:
                if not is_disk_full(err):
                    raise
                full = True
                self._disk_full(name, err)
            else:
                self._good.add(name)
                if export and self.state.best_step is None:  # no validated best yet: the newest weights are the model
                    self._export()
                self._poll_exports()  # a finished background export goes into this push
                holder = self.state.best_checkpoint
                phase_ends = [record["checkpoint"] for record in self.state.phases]  # each phase's last weights
                self.store.prune(self.cfg.keep_last, ([holder] if holder else []) + phase_ends)
                self._write_status("running")
                self.store.publish(name, final=final)
                self._durable = time.time() - started + max(self.store.transfer_seconds()[-5:] or [0.0])
                self.clock.record(self._durable)
                self.state.durable_seconds = list(self.clock.measured)
        (full,) = vote([full], self.device)
        self.accelerator.wait_for_everyone()
        return not full

    def _disk_full(self, name: str, err: Exception) -> None:
        if self.state.best_checkpoint == name:
            self.state.best_checkpoint = None
        latest = checkpoint.read_latest(self.store.root)
        self.session.warnings.append(
            f"the disk under {self.store.root} is full ({os.strerror(errno.ENOSPC)}): checkpoint {name} was not written and its "
            f"partial folder was removed; {latest or 'no checkpoint'} is intact as latest. Free space (a smaller keep_last, "
            f"or delete {self.store.root / 'tb'}), then run again: the run continues from {latest or 'the start'}"
        )
        self.log("stopping: " + self.session.warnings[-1])

    def _export(self) -> None:
        """Replace ``model/`` with the task's export, and start its slow part in the background; a disk too full for it
        keeps the previous one, and says so."""
        final = self.store.root / MODEL_DIR
        err = replace_export(final, lambda folder: self.built.task.export(self.built.models, folder))
        if err is not None:
            self._warn(f"could not export {final} at step {self.state.step} ({err}); it holds the previous export")
            return
        self._export_later()

    def _export_later(self) -> None:
        """Start the slow part of the export ``model/`` holds (main process), in the background."""
        derive = self.built.task.export_later()
        self.state.export_pending = derive is not None
        self.exports.exported(derive, self.state.step)

    def _poll_exports(self) -> None:
        """Put a finished background export in place (main process); the final save waits for it, so the clock's reserve
        counts its time with the save's."""
        seconds = self.exports.poll()
        self.state.export_pending = self.exports.pending()
        if seconds is not None:
            self.clock.record(seconds + (self._durable or 0.0))
            self.state.durable_seconds = list(self.clock.measured)

    def _settle_exports(self, reason: StopReason) -> None:
        """Before the final save, the main process finishes the newest background export (so the final push carries it)
        while the others wait off the device. It gives up when only the final save's own time is left, or on a signal
        (a stop asked for by a signal, or one while it waits): the export is then the next session's to make."""
        if self.main:
            closing = self.clock.closing_time()
            need = self._durable or self.clock.initial_reserve / 2
            deadline = time.time() if reason in (StopReason.SIGINT, StopReason.SIGTERM) else (
                None if closing is None else closing - 2 * need)
            seen = self.stop.received
            seconds = self.exports.settle(deadline, interrupted=lambda: self.stop.received > seen)
            self.state.export_pending = self.exports.pending()  # what the final checkpoint tells the next session
            if seconds:
                self.log(f"waited {seconds:.1f} s for the export of {MODEL_DIR}/ to finish")
            announce("exports")
        else:
            await_main("exports", self.clock.end)

    # ------------------------------------------------------------------ the end
    def _finish(self, reason: StopReason, resumed_from: str | None) -> SessionSummary:
        """The final save, then (main process) the wait for the store, the status and the lease's release.

        The other processes wait for the main one's final status off the device (on the
        process group's store, until the session's end), never in a collective while it
        waits for the Hub: a slow final push cannot make a watchdog abort them.
        """
        self.session.reason = reason.value  # before the final save, so the checkpoint's sessions log says why
        started = time.time()
        here = checkpoint.name_for_step(self.state.step)
        keep_latest = reason in (StopReason.DIVERGED, StopReason.DISK_FULL)  # the last good checkpoint / no room for another
        save = not keep_latest and vote([self.main and not self._intact(here)], self.device)[0]
        if save and self.main and self.state.best_step is None:
            self._export()  # no validated best yet: the final weights are the voice, exported before the wait below
        self._settle_exports(reason)  # so the final checkpoint says truly whether model/ still lacks its slow part
        if keep_latest:
            latest = checkpoint.read_latest(self.store.root)
            if self.main and checkpoint.is_checkpoint_name(latest) and (self.store.root / checkpoint.CHECKPOINTS / latest).is_dir():
                self.store.publish(latest, final=True)
        elif save:
            if not self._save(final=True, export=False):
                reason = StopReason.DISK_FULL
                self.session.reason = reason.value
        elif self.main:
            checkpoint.point_latest(self.store.root, here)
            self.store.publish(here, final=True)
        self.memory = gather_object([memory.peak_memory(self.device)])
        if self.main:
            durable = self._wait_durable()
            pending = self.store.pending()
            self._spent("final", started)
            self.session.end_step, self.session.ended = self.state.step, time.time()
            final = {
                "status": self._write_status(
                    "failed" if reason in FAILURES else "finished" if reason in FINISHED else "paused", reason=reason.value
                ),
                "durable": durable, "pending": pending,
            }
            closing = self.clock.closing_time()
            announce("final", json.dumps(final), read_by=self.world - 1,
                     deadline=time.time() + FINAL_READ if closing is None else min(time.time() + FINAL_READ, closing))
        else:  # rank 0's, so every process returns the same summary (and exits with the same code)
            final = json.loads(await_main("final", self.clock.end))
        summary = SessionSummary.from_status(
            final["status"], resumed_from=resumed_from, durable=final["durable"], pending=final["pending"],
            clock_origin=self.clock_origin,
        )
        self.log(summary.format())  # before the release: whatever happens next, this has been said
        if self.main:
            left = self.clock.left()
            if self.wait_interrupted:  # a person stopped the wait and wants the prompt back
                left = INTERRUPTED_RELEASE if left is None else min(left, INTERRUPTED_RELEASE)
            self.store.release(timeout=left)
            self.store.close(timeout=0.0 if self.wait_interrupted else 5.0 if left is None else min(5.0, left))
        return summary

    def _intact(self, name: str) -> bool:
        """Is ``name`` a checkpoint this session resumed from or saved, still matching its manifest?

        The end of a session decides by what it knows, not by ``latest``'s text: a ``latest``
        edited by hand, or a checkpoint damaged since, gets this step saved again.
        """
        if name not in self._good:
            return False
        try:
            checkpoint.verify(self.store.root / checkpoint.CHECKPOINTS / name)
        except checkpoint.CheckpointError as err:
            self.log(f"warning: {err}; saving step {self.state.step} again")
            return False
        return True

    def _wait_durable(self) -> bool:
        """Wait for the store to make the final checkpoint durable: until the clock's closing time, or a signal."""
        if self.store.wait(timeout=0):
            return True
        closing = self.clock.closing_time()
        seen = self.stop.received  # before saying so: a signal sent on reading the line below must count
        self.log(f"waiting for the final checkpoint to reach {self.store.url} (Ctrl-C stops waiting; it stays on this disk)")
        durable = self.store.wait(
            timeout=None if closing is None else max(0.0, closing - time.time()), interrupted=lambda: self.stop.received > seen
        )
        self.wait_interrupted = self.stop.received > seen
        return durable

    def _abandon(self, err: SessionInterrupted) -> None:
        """A signal during set-up: nothing was trained, so nothing is saved or marked failed; the lease is given back."""
        if self.main:
            self.log(str(err))
            self.store.release(timeout=self.clock.left())
            self.store.close(timeout=0.0)

    def _fail(self, err: BaseException) -> None:
        """Record why the session failed; with several processes, the one that raised first is the reason."""
        own = f"{type(err).__name__}: {err}"
        post_failure(self.accelerator.process_index, own)
        if not self.main or self.built is None:  # set-up had not built the phase: no state worth a status
            if self.main:
                self.store.release(timeout=self.clock.left())
                self.store.close(timeout=0.0)
            return
        peers = posted_failures(self.accelerator.process_index)
        self.session.ended, self.session.end_step = time.time(), self.state.step
        self.session.reason = f"error: {type(err).__name__}" if not peers else f"error in process {min(peers)}"
        if self.session not in self.state.sessions:
            self.state.sessions.append(self.session)
        seen = self.stop.received
        try:
            self._write_status("failed", reason="; ".join(f"process {r}: {m}" for r, m in sorted(peers.items())) or own)
            # nothing saved is dropped: the newest verified checkpoint is pushed, or said to be on this disk only
            self.log(self.store.secure_newest(self.clock.closing_time(), interrupted=lambda: self.stop.received > seen))
        finally:
            self.store.release(timeout=self.clock.left())
            self.store.close(timeout=0.0)

    def _clock_facts(self) -> dict[str, float | None]:
        """The session's length and what its clock keeps free at the end, for estimates of the next sessions."""
        clock = self.clock
        if clock.limit is None or clock.deadline is None:
            return {"limit": None, "held_back": 0.0}
        return {"limit": clock.limit, "held_back": round(clock.start + clock.limit - clock.deadline + clock.reserve(), 1)}

    def _write_status(self, state: str, *, reason: str | None = None) -> dict[str, Any] | None:
        """Write ``status.json`` and, from it, the run's card (with the newest loss plot beside it).

        Returns the status even when the disk is too full to write it: a full disk is said
        (in the warnings, the log and the summary), never a reason to lose the session.
        """
        if not self.main:
            return None
        root = self.store.root
        current = status.build(
            state=state, reason=reason, run=self.state, task=self.cfg.task, max_steps=self.built.max_steps,
            groups=[g.name for g in self.built.groups], monitor=self.built.monitor, monitor_mode=self.built.monitor_mode,
            root=root, store=self.store.url, about=self.built.task.describe(), memory=self.memory,
            data=self.data_facts, clock=self._clock_facts(),
            warnings=self.session.warnings + [p for p in (self.store.problem(), self.clock.ceiling_note(), *self.store.notes()) if p],
            phases=phases.describe(self.config.train.phases, self.state),
        )
        try:
            self.store.write_status(current)
            latest = checkpoint.read_latest(root)
            plot = root / checkpoint.CHECKPOINTS / latest / card.LOSS_PLOT if checkpoint.is_checkpoint_name(latest) else None
            if plot is not None and plot.is_file():
                checkpoint.write_atomic(root / card.LOSS_PLOT, plot.read_bytes())
            repo = self.store.hub_repo
            page = card.render(current, self.built.task.card(current, repo), repo=repo, loss_plot=(root / card.LOSS_PLOT).is_file())
            checkpoint.write_atomic(root / card.CARD, page.encode())
        except OSError as err:
            self._warn(f"could not write the run's status and page in {root} ({err})")
        return current


def train(
    config: RunConfig | str | Path,
    *,
    overrides: list[str] | dict[str, Any] = (),
    allow_config_change: bool = False,
    force: bool = False,
    progress: bool = True,
    log: Callable[[str], None] = print,
    **settings: Any,
) -> SessionSummary:
    """Train one session of the run a config describes; resume if its store holds a checkpoint.

    ``overrides`` (``["max_steps=500", "hub_repo=me/my-run"]``) and ``settings`` (the same as
    keyword arguments: ``max_steps=500, store="runs/x"``) are applied to the config and
    validated as if they were in the file. Returns the session's summary (also printed).
    """
    config = as_run_config(config, overrides, settings)
    trainer = Trainer(config, allow_config_change=allow_config_change, force=force, progress=progress, log=log)
    return trainer.run()

__all__ = ["ConfigDrift", "Trainer", "train"]
