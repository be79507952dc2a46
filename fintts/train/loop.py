"""One session of training: resume, step until a reason to stop, save, make it durable, exit.

Read :meth:`Trainer.run` top to bottom; it is the whole story. Devices and data
parallelism come from ``accelerate``; autocast and the GradScaler are ours, so the same
fp16 path (scaler state included) runs and is tested on a CPU.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import shutil
import time
import uuid
import warnings
from pathlib import Path
from typing import Any, Callable

import torch
import yaml
from accelerate import Accelerator
from accelerate.utils import gather_object
from safetensors.torch import load_model, save_model
from torch.utils.data import DataLoader
from tqdm.auto import tqdm

from fintts.train import card, checkpoint, phases, status
from fintts.train.clock import SessionClock, StopRequest
from fintts.train.config import ConfigError, RunConfig, fingerprint, fingerprint_changes, load_config, parse_duration
from fintts.train.platform import PLATFORM_LIMITS, detect_platform, host_name, session_start
from fintts.train.sampler import EpochPlan, MicroBatchSampler
from fintts.train.state import SessionRecord, TrainerState, capture_rng, isolated_rng, restore_rng
from fintts.train.stores import Store, store_for
from fintts.train.stores.base import CACHE_DIR, MODEL_DIR
from fintts.train.summary import SessionSummary, loss_plot_png
from fintts.train.task import OptimizerGroup, Task, TaskContext, Weights


class ConfigDrift(ConfigError):
    """Resuming with settings that change the math; the message lists them and the override."""


def resolve_precision(requested: str, device: torch.device) -> str:
    if requested != "auto":
        return requested
    if device.type == "cuda":
        major, _ = torch.cuda.get_device_capability(device)
        return "bf16" if major >= 8 else "fp16"  # T4 (sm75) has no fast bf16
    return "fp32"


AUTOCAST_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": None}


def lr_factor(cfg, step: int) -> float:
    """Warm-up then decay, as a factor of each optimizer's base learning rate."""
    warm = min(1.0, (step + 1) / cfg.warmup_steps) if cfg.warmup_steps else 1.0
    if cfg.lr_schedule == "exponential":
        return warm * cfg.lr_decay ** step
    if cfg.lr_schedule == "cosine":
        progress = min(step / max(1, cfg.decay_steps), 1.0)
        return warm * 0.5 * (1.0 + math.cos(math.pi * progress))
    return warm


def _to_device(batch: Any, device: torch.device) -> Any:
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, dict):
        return {k: _to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(_to_device(v, device) for v in batch)
    if dataclasses.is_dataclass(batch):
        return dataclasses.replace(batch, **{f.name: _to_device(getattr(batch, f.name), device) for f in dataclasses.fields(batch)})
    return batch


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
        self.progress, self._log = progress, log
        self.store = store or store_for(self.cfg)

    # ------------------------------------------------------------------ the story
    def run(self) -> SessionSummary:
        self.accelerator = Accelerator()
        self.main = self.accelerator.is_main_process
        self.device = self.accelerator.device
        self.world = self.accelerator.num_processes
        self.precision = resolve_precision(self.cfg.precision, self.device)
        self.clock = self._make_clock()
        self.session = SessionRecord(
            id=uuid.uuid4().hex[:12], host=host_name(), devices=self._devices(), precision=self.precision, started=time.time()
        )
        if self.main:
            self.store.acquire(self.session.id, force=self.force)
        try:
            folder, saved = self._resume_point()
            self.state = saved or TrainerState(run_name=self.cfg.run_name, fingerprint=fingerprint(self.config))
            torch.manual_seed(self.cfg.seed)  # model init; replaced by the checkpoint's weights when resuming
            self._build()
            resumed_from = self._resume(folder) if folder is not None else None
            self.session.start_step = self.session.end_step = self.state.step
            self.state.sessions.append(self.session)
            self._write_status("running")
            stop = StopRequest()
            with stop.installed():
                reason = self._train(stop) if self._work_left() else self._nothing_left()
            return self._finish(reason, resumed_from)
        except BaseException as err:
            self._fail(err)
            raise

    # ------------------------------------------------------------------ set-up
    def log(self, message: str) -> None:
        if self.main:
            self._log(message)

    def _make_clock(self) -> SessionClock:
        platform = detect_platform()
        start, how = session_start(platform)
        if self.cfg.session_limit == "auto":
            limit = PLATFORM_LIMITS.get(platform)
        else:
            limit = parse_duration(self.cfg.session_limit, key="session_limit")
        self.clock_origin = how
        return SessionClock(
            start=start,
            limit=limit,
            margin=parse_duration(self.cfg.safety_margin) or 0.0,
            reserve_factor=self.cfg.reserve_factor,
            initial_reserve=parse_duration(self.cfg.initial_reserve) or 0.0,
        )

    def _devices(self) -> str:
        if self.device.type == "cuda":
            return f"{self.world}×{torch.cuda.get_device_name(self.device)}"
        return f"{self.world}×{self.device.type}"

    def _build(self, start: Weights | None = None) -> None:
        """Build the current phase's task, models, optimizers and data from its config (see :mod:`fintts.train.phases`)."""
        phase_config = self.config.phase(self.state.phase, self.state.resolved)
        self.cfg = phase_config.train
        self.phase_config = phase_config
        autocast_dtype = AUTOCAST_DTYPES[self.precision]
        cache = self.store.root / CACHE_DIR
        self.task: Task = phase_config.task_class(
            phase_config.task,
            TaskContext(self.cfg.seed, self.device, autocast_dtype, cache, self.main, self.log, self.progress and self.main),
        )
        models = self.task.build_models(start)
        self.state.resolved = {**self.state.resolved, **self.task.resolved_settings()}
        self.raw_models = {name: m.to(self.device) for name, m in models.items()}
        self.groups: list[OptimizerGroup] = self.task.build_optimizers(self.raw_models)
        self.group_params = {
            g.name: [p for name in g.models for p in self.raw_models[name].parameters() if p.requires_grad] for g in self.groups
        }
        self.schedulers = {
            g.name: torch.optim.lr_scheduler.LambdaLR(g.optimizer, lambda s: lr_factor(self.cfg, s)) for g in self.groups
        }
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.precision == "fp16")
        self.models = {name: self.accelerator.prepare_model(m) for name, m in self.raw_models.items()}
        self.micro = self.cfg.micro_batch_size or self.cfg.batch_size // self.world
        if self.micro <= 0 or self.cfg.batch_size % (self.micro * self.world):
            raise ConfigError(
                f"batch_size={self.cfg.batch_size} must be a multiple of micro_batch_size={self.micro} × {self.world} device(s)"
            )
        self.accumulation = self.cfg.batch_size // (self.micro * self.world)
        self.data = self.task.train_data()
        self.plan = EpochPlan(len(self.data.dataset), self.cfg.batch_size, self.cfg.seed, self.data.lengths)
        monitor = self.cfg.monitor or self.task.monitor or ""
        self.monitor_mode, _, self.monitor = monitor.rpartition(":") if ":" in monitor else (self.task.monitor_mode, "", monitor)
        self.last_eval: dict[str, Any] | None = None

    def _resume_point(self) -> tuple[Path | None, TrainerState | None]:
        """The checkpoint to resume from and its state, read before anything is built; drift is refused here."""
        folder = self.store.resume_point(self.log) if self.main else None
        self.accelerator.wait_for_everyone()
        if not self.main:
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

    def _resume(self, folder: Path) -> str:
        """Load the checkpoint's weights, optimizers and random streams into the phase built from its state."""
        saved = self.state
        for name, model in self.raw_models.items():
            load_model(model, str(folder / f"{name}.safetensors"), strict=True, device=str(self.device))
        optim = torch.load(folder / "optim.pt", map_location=self.device, weights_only=True)
        sched = torch.load(folder / "sched.pt", weights_only=True)
        for g in self.groups:
            g.optimizer.load_state_dict(optim[g.name])
            self.schedulers[g.name].load_state_dict(sched[g.name])
        self.scaler.load_state_dict(torch.load(folder / "scaler.pt", weights_only=True))
        if saved.world_size != self.world or saved.micro_batch_size != self.micro:
            self.log(
                f"resuming on {self.world} device(s) with micro_batch_size={self.micro} (was {saved.world_size} × "
                f"{saved.micro_batch_size}): accumulation is now {self.accumulation}, so each step still uses "
                f"batch_size={self.cfg.batch_size} samples"
            )
        if saved.world_size == self.world and len(saved.rng) == self.world:
            restore_rng(saved.rng[self.accelerator.process_index])
        else:
            torch.manual_seed(self.cfg.seed + 7919 * saved.step + self.accelerator.process_index)
            self.log("the number of processes changed, so random streams restart from the seed and step (not bit-exact)")
        self.clock.measured = list(saved.durable_seconds)
        phase = f", phase {self.config.train.phases[saved.phase].name}" if self.config.train.phases else ""
        self.log(f"resuming run {self.cfg.run_name!r} from {folder.name} (step {saved.step}, epoch {saved.epoch}{phase}) "
                 f"in {self.store.url}")
        return folder.name

    # ------------------------------------------------------------------ the loop
    def _work_left(self) -> bool:
        last_phase = self.state.phase >= len(self.config.train.phases) - 1
        return self.state.step < self.cfg.max_steps and not (self.state.stopped_early and self.cfg.patience and last_phase)

    def _nothing_left(self) -> str:
        return "early_stopping" if self.state.stopped_early else "max_steps"

    def _loader(self) -> DataLoader:
        sampler = MicroBatchSampler(
            self.plan, self.state.epoch, self.state.step_in_epoch,
            micro_batch_size=self.micro, rank=self.accelerator.process_index, world=self.world,
        )
        return DataLoader(
            self.data.dataset,
            batch_sampler=sampler,
            collate_fn=self.data.collate,
            num_workers=self.cfg.num_workers,
            pin_memory=self.device.type == "cuda",
            # a private generator: creating a loader must not consume the training RNG
            generator=torch.Generator().manual_seed(self.cfg.seed + self.state.epoch),
        )

    def _train(self, stop: StopRequest) -> str:
        cfg = self.cfg
        every = parse_duration(cfg.checkpoint_every, key="checkpoint_every")
        last_save = time.time()
        step_times: list[float] = []
        eval_seconds = 0.0
        window: dict[str, float] = {}
        bar = tqdm(total=cfg.max_steps, initial=self.state.step, disable=not (self.progress and self.main), desc=cfg.run_name, dynamic_ncols=True)
        writer = self._tensorboard()
        main_loss = status.main_loss_key([g.name for g in self.groups])
        batches = iter(self._loader())
        for model in self.models.values():
            model.train()
        reason = None
        while reason is None:
            ended = phases.phase_end(self.config.train.phases, self.state, self.plan.steps_per_epoch)
            if ended:
                self._next_phase(ended, writer)
                cfg, batches = self.cfg, iter(self._loader())
                for model in self.models.values():
                    model.train()
            started = time.time()
            if self.state.step_in_epoch >= self.plan.steps_per_epoch:
                self.state.epoch += 1
                self.state.step_in_epoch = 0
                batches = iter(self._loader())
            losses = self._optimizer_step(batches)
            self.state.step += 1
            self.state.step_in_epoch += 1
            step_times = (step_times + [time.time() - started])[-20:]
            for key, value in losses.items():
                window[key] = window.get(key, 0.0) + value
            if self.state.step % cfg.log_every == 0 or self.state.step == cfg.max_steps:
                self._record_losses(window, cfg.log_every, writer)
                window = {}
            if cfg.eval_every and self.state.step % cfg.eval_every == 0:
                eval_started = time.time()
                if self._evaluate(writer) and not self.config.train.phases[self.state.phase + 1:]:
                    reason = "early_stopping"
                eval_seconds = time.time() - eval_started
            next_eval = bool(cfg.eval_every) and (self.state.step + 1) % cfg.eval_every == 0
            if self.state.step >= cfg.max_steps:
                reason = reason or "max_steps"
            elif self._agree(bool(stop)):
                reason = stop.signal_name or "signal"
            elif self._agree(self.clock.must_stop(max(step_times) * 1.2 + (eval_seconds if next_eval else 0.0))):
                reason = "deadline"
            elif (every and time.time() - last_save >= every) or (
                cfg.checkpoint_every_steps and self.state.step % cfg.checkpoint_every_steps == 0
            ):
                self._save()
                last_save = time.time()
            bar.update(1)
            left = self.clock.remaining()
            bar.set_postfix(
                loss=f"{losses.get(main_loss, float('nan')):.4g}",
                s_step=f"{sum(step_times) / len(step_times):.2f}",
                left="∞" if left is None else time.strftime("%H:%M:%S", time.gmtime(max(0.0, left))),
                refresh=False,
            )
        bar.close()
        if window:
            self._record_losses(window, max(1, self.state.step % cfg.log_every), writer)
        if writer is not None:
            writer.close()
        return reason

    def _next_phase(self, reason: str, writer) -> None:
        """End the current phase and build the next one from its final weights (see :mod:`fintts.train.phases`)."""
        ended = self.config.train.phases[self.state.phase].name
        latest = checkpoint.read_latest(self.store.root)
        if latest is None or checkpoint.step_of(latest) != self.state.step:
            self._save()
        start = {name: model.state_dict() for name, model in self.raw_models.items()}
        phases.begin_next(self.config.train.phases, self.state, reason, checkpoint.name_for_step(self.state.step))
        with isolated_rng(self.cfg.seed + 7_777 * self.state.phase):
            self._build(start)
        del start
        self.log(f"step {self.state.step}: phase {ended} ended ({reason}); phase {self.config.train.phases[self.state.phase].name} "
                 f"begins" + "".join(f", {k}: {v}" for k, v in self.state.resolved.items()))
        if self.cfg.eval_every:
            self._evaluate(writer)

    def _optimizer_step(self, batches) -> dict[str, float]:
        """Accumulate ``accumulation`` micro-batches into every group, then step every group."""
        totals: dict[str, torch.Tensor] = {}
        autocast_dtype = AUTOCAST_DTYPES[self.precision]
        for index in range(self.accumulation):
            batch = _to_device(next(batches), self.device)
            syncing = index == self.accumulation - 1
            with contextlib.ExitStack() as stack:
                if not syncing:
                    for model in self.models.values():
                        stack.enter_context(self.accelerator.no_sync(model))
                for group in self.groups:
                    with torch.autocast(self.device.type, dtype=autocast_dtype or torch.float32, enabled=autocast_dtype is not None):
                        losses = self.task.step(self.models, batch, group.name)
                    loss = losses["loss"]
                    if self.precision != "fp16" and not torch.isfinite(loss):
                        raise FloatingPointError(
                            f"loss of group {group.name!r} is {loss.item()} at step {self.state.step + 1}; "
                            "lower the learning rate or resume from the last checkpoint"
                        )
                    self.scaler.scale(loss / self.accumulation).backward(inputs=self.group_params[group.name])
                    for key, value in losses.items():
                        name = key if len(self.groups) == 1 else f"{group.name}/{key}"
                        totals[name] = totals.get(name, 0.0) + value.detach().float() / self.accumulation
        for group in self.groups:
            if group.clip_grad_norm:
                self.scaler.unscale_(group.optimizer)
                torch.nn.utils.clip_grad_norm_(self.group_params[group.name], group.clip_grad_norm)
            self.scaler.step(group.optimizer)
        self.scaler.update()
        for group in self.groups:
            group.optimizer.zero_grad(set_to_none=True)
            with warnings.catch_warnings():
                # when fp16 overflows, the scaler skips the optimizer step; the schedule moves on regardless
                warnings.filterwarnings("ignore", message=r"Detected call of `lr_scheduler.step\(\)` before")
                self.schedulers[group.name].step()
        values = torch.stack(list(totals.values())).cpu().tolist()  # one device sync per step
        return dict(zip(totals, values))

    def _agree(self, flag: bool) -> bool:
        """All processes stop at the same step: one process's signal stops them all."""
        if self.world == 1:
            return flag
        value = torch.tensor([1.0 if flag else 0.0], device=self.device)
        return bool(self.accelerator.reduce(value, reduction="sum").item() > 0)

    def _record_losses(self, window: dict[str, float], count: int, writer) -> None:
        entry = {"step": self.state.step, **{k: v / count for k, v in window.items()}}
        entry["lr"] = self.groups[0].optimizer.param_groups[0]["lr"]
        self.state.history.append(entry)
        if writer is not None:
            for key, value in entry.items():
                if key != "step":
                    writer.add_scalar(f"train/{key}", value, self.state.step)

    def _tensorboard(self):
        if not self.main:
            return None
        from torch.utils.tensorboard import SummaryWriter

        return SummaryWriter(str(self.store.root / "tb"))

    def _evaluate(self, writer) -> bool:
        """Validate, keep the best export, and say whether patience ran out."""
        stop = False
        if self.main:
            for model in self.models.values():
                model.eval()
            with torch.no_grad(), isolated_rng(self.cfg.seed + 99_991):
                evaluation = self.task.evaluate(self.models, self.state.step)
            for model in self.models.values():
                model.train()
            self.last_eval = {"step": self.state.step, "metrics": evaluation.metrics, "files": evaluation.files}
            self.state.evals.append({"step": self.state.step, **evaluation.metrics})
            if writer is not None:
                for key, value in evaluation.metrics.items():
                    writer.add_scalar(key, value, self.state.step)
            value = evaluation.metrics.get(self.monitor) if self.monitor else None
            if value is not None:
                best = self.state.best_value
                improved = best is None or (
                    value < best - self.cfg.min_delta if self.monitor_mode == "min" else value > best + self.cfg.min_delta
                )
                if improved:
                    self.state.best_value, self.state.best_step, self.state.bad_evals = value, self.state.step, 0
                    self._export()
                else:
                    self.state.bad_evals += 1
                    stop = bool(self.cfg.patience) and self.state.bad_evals >= self.cfg.patience
            self.log(
                f"step {self.state.step}: "
                + ", ".join(f"{k} {v:.4g}" for k, v in evaluation.metrics.items())
                + (f" (best {self.state.best_value:.4g} at step {self.state.best_step})" if self.state.best_value is not None else "")
            )
        stop = self._agree(stop)
        self.state.stopped_early = stop
        return stop

    # ------------------------------------------------------------------ saving
    def _save(self, *, final: bool = False) -> Path:
        started = time.time()
        rngs = gather_object([capture_rng()])
        name = checkpoint.name_for_step(self.state.step)
        path = self.store.root / checkpoint.CHECKPOINTS / name
        if self.main:
            self.state.rng = rngs
            self.state.world_size, self.state.micro_batch_size = self.world, self.micro
            self.session.end_step = self.state.step
            self.session.ended = time.time()
            if self.state.best_step is None:  # no validated best yet: the newest weights are the model
                self._export()
            path = checkpoint.save(self.store.root, name, self._write_checkpoint)
            holder = status.best_checkpoint(self.state.best_step, checkpoint.list_names(self.store.root))
            phase_ends = [record["checkpoint"] for record in self.state.phases]
            self.store.prune(self.cfg.keep_last, [holder] * bool(holder) + phase_ends)
            self._write_status("running")
            self.store.publish(name, final=final)
            self.clock.record(time.time() - started + max(self.store.transfer_seconds()[-5:] or [0.0]))
            self.state.durable_seconds = list(self.clock.measured)
        self.accelerator.wait_for_everyone()
        return path

    def _export(self) -> None:
        """Replace ``model/`` with the task's export, never leaving a half-written folder behind."""
        final = self.store.root / MODEL_DIR
        fresh, stale = final.with_name(f".{MODEL_DIR}-new"), final.with_name(f".{MODEL_DIR}-old")
        for leftover in (fresh, stale):
            shutil.rmtree(leftover, ignore_errors=True)
        self.task.export(self.models, fresh)
        if final.exists():
            os.replace(final, stale)
        os.replace(fresh, final)
        shutil.rmtree(stale, ignore_errors=True)

    def _write_checkpoint(self, folder: Path) -> None:
        for name, model in self.raw_models.items():
            save_model(model, str(folder / f"{name}.safetensors"))
        torch.save({g.name: g.optimizer.state_dict() for g in self.groups}, folder / "optim.pt")
        torch.save({g.name: s.state_dict() for g, s in zip(self.groups, self.schedulers.values())}, folder / "sched.pt")
        torch.save(self.scaler.state_dict(), folder / "scaler.pt")
        (folder / "state.json").write_text(self.state.to_json())
        # the settings this checkpoint's phase trains with (resolved values included), for `fintts eval` and people
        (folder / "config.yaml").write_text(yaml.safe_dump(self.phase_config.to_dict(), sort_keys=False, allow_unicode=True))
        # the task's own files, and the newest validation's samples (state.json's evals say at which step)
        files = {**self.task.checkpoint_files(self.raw_models), **(self.last_eval["files"] if self.last_eval else {})}
        for rel, data in files.items():
            target = folder / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        png = loss_plot_png(self.state.history, self.state.evals)
        if png:
            (folder / "loss.png").write_bytes(png)

    # ------------------------------------------------------------------ the end
    def _finish(self, reason: str, resumed_from: str | None) -> SessionSummary:
        self.session.reason = reason  # before the final save, so the checkpoint's sessions log says why
        latest = checkpoint.read_latest(self.store.root)
        if latest is None or checkpoint.step_of(latest) != self.state.step:
            self._save(final=True)
        elif self.main:
            self.store.publish(latest, final=True)
        finished = reason in {"max_steps", "early_stopping"}
        durable, pending = True, None
        final_status = None
        if self.main:
            hard_end = None if self.clock.limit is None else self.clock.start + self.clock.limit - time.time() - 5.0
            durable = self.store.wait(timeout=None if hard_end is None else max(1.0, hard_end))
            pending = self.store.pending()
            self.session.end_step, self.session.ended = self.state.step, time.time()
            final_status = self._write_status("finished" if finished else "paused", reason=reason)
            self.store.release()
            self.store.close()
        final_status = gather_object([final_status])[0]  # rank 0's, so every process returns the same summary
        summary = SessionSummary.from_status(
            final_status, resumed_from=resumed_from, durable=durable, pending=pending, clock_origin=self.clock_origin
        )
        self.log(summary.format())
        return summary

    def _fail(self, err: BaseException) -> None:
        if not self.main or not hasattr(self, "groups"):
            if self.main:
                self.store.release()
            return
        self.session.ended, self.session.end_step = time.time(), self.state.step
        self.session.reason = f"error: {type(err).__name__}"
        if self.session not in self.state.sessions:
            self.state.sessions.append(self.session)
        try:
            self._write_status("failed", reason=f"{type(err).__name__}: {err}")
        finally:
            self.store.release()
            self.store.close()

    def _write_status(self, state: str, *, reason: str | None = None) -> dict[str, Any] | None:
        """Write ``status.json`` and, from it, the run's card (with the newest loss plot beside it)."""
        if not self.main:
            return None
        root = self.store.root
        current = status.build(
            state=state, reason=reason, run=self.state, task=self.cfg.task, max_steps=self.cfg.max_steps,
            groups=[g.name for g in self.groups], monitor=self.monitor, monitor_mode=self.monitor_mode,
            root=root, store=self.store.url, about=self.task.describe(),
            phases=phases.describe(self.config.train.phases, self.state),
        )
        self.store.write_status(current)
        latest = checkpoint.read_latest(root)
        plot = root / checkpoint.CHECKPOINTS / latest / card.LOSS_PLOT if latest else None
        if plot is not None and plot.is_file():
            checkpoint.write_atomic(root / card.LOSS_PLOT, plot.read_bytes())
        repo = self.store.hub_repo
        page = card.render(current, self.task.card(current, repo), repo=repo, loss_plot=(root / card.LOSS_PLOT).is_file())
        checkpoint.write_atomic(root / card.CARD, page.encode())
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
    if not isinstance(config, RunConfig):
        config = load_config(config, overrides)
    elif overrides:
        config = config.with_overrides(overrides)
    config = config.with_overrides(settings)
    trainer = Trainer(config, allow_config_change=allow_config_change, force=force, progress=progress, log=log)
    return trainer.run()

__all__ = ["ConfigDrift", "Trainer", "train"]
