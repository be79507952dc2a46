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
from typing import Any, Callable, Iterator

import torch
import yaml
from accelerate import Accelerator
from accelerate.utils import gather_object
from safetensors.torch import load_model, save_model
from torch.utils.data import DataLoader
from tqdm.auto import tqdm

from fintts.train import card, checkpoint, memory, status
from fintts.train.plan import total_steps
from fintts.train.clock import SessionClock, StopRequest
from fintts.train.config import ConfigError, RunConfig, fingerprint, fingerprint_changes, load_config, parse_duration
from fintts.train.platform import PLATFORM_LIMITS, detect_platform, device_label, host_name, session_start
from fintts.train.sampler import EpochPlan, MicroBatchSampler, padding_fraction
from fintts.train.state import SessionRecord, TrainerState, capture_rng, isolated_rng, restore_rng
from fintts.train.stores import Store, store_for
from fintts.train.stores.base import CACHE_DIR, MODEL_DIR
from fintts.train.summary import SessionSummary, loss_plot_png
from fintts.train.task import OptimizerGroup, Task, TaskContext


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


@contextlib.contextmanager
def cuda_switches(cudnn_benchmark: bool, tf32: bool) -> Iterator[None]:
    """cuDNN autotuning and TF32 for one session; torch's process-wide flags are put back after.

    Neither changes anything on a CPU. ``set_float32_matmul_precision`` rather than
    ``torch.backends.cuda.matmul.allow_tf32``: newer torch refuses to mix that legacy flag
    with its new per-backend precision settings, and this call works with both.
    """
    saved = torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32, torch.get_float32_matmul_precision()
    torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32 = cudnn_benchmark, tf32
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    try:
        yield
    finally:
        torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32 = saved[:2]
        torch.set_float32_matmul_precision(saved[2])


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
            id=uuid.uuid4().hex[:12], host=host_name(), devices=device_label(self.device, self.world), precision=self.precision, started=time.time()
        )
        self.session.phases["before"] = max(0.0, self.session.started - self.clock.start)
        memory.reset_peaks(self.device)  # this session's peak, also when one process trains several
        if self.main:
            self.store.acquire(self.session.id, force=self.force)
        try:
            self._build()
            started = time.time()
            resumed_from = self._resume()
            self._spent("resume", started)
            self.session.start_step = self.session.end_step = self.state.step
            self.state.sessions.append(self.session)
            self._write_status("running")
            stop = StopRequest()
            with stop.installed(), cuda_switches(self.cfg.cudnn_benchmark, self.cfg.tf32):
                reason = self._train(stop) if self._work_left() else self._nothing_left()
            return self._finish(reason, resumed_from)
        except BaseException as err:
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

    def _build(self) -> None:
        task_cls = self.config.task_class
        autocast_dtype = AUTOCAST_DTYPES[self.precision]
        cache = self.store.root / CACHE_DIR
        self.task: Task = task_cls(
            self.config.task,
            TaskContext(self.cfg.seed, self.device, autocast_dtype, cache, self.main, self.log, self.progress and self.main),
        )
        started = time.time()
        torch.manual_seed(self.cfg.seed)  # model init; replaced by the checkpoint's weights when resuming
        models = self.task.build_models()
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
        self._spent("models", started)
        started = time.time()
        self.data = self.task.train_data()
        lengths = self.data.lengths if self.cfg.length_buckets else None
        self.plan = EpochPlan(len(self.data.dataset), self.cfg.batch_size, self.cfg.seed, lengths)
        self.max_steps = total_steps(self.cfg, self.plan.steps_per_epoch)
        self.data_facts = self._describe_data()
        self._spent("data", started)
        self.state = TrainerState(run_name=self.cfg.run_name, fingerprint=fingerprint(self.config))
        monitor = self.cfg.monitor or self.task.monitor or ""
        self.monitor_mode, _, self.monitor = monitor.rpartition(":") if ":" in monitor else (self.task.monitor_mode, "", monitor)
        self.last_eval: dict[str, Any] | None = None
        self.memory: list[dict[str, Any]] = []

    def _describe_data(self) -> dict[str, Any]:
        """Items, steps per epoch, the run's length, and how much of each micro-batch is padding."""
        cfg, plan, data = self.cfg, self.plan, self.data
        facts: dict[str, Any] = {"items": plan.n_items, "batch_size": cfg.batch_size, "steps_per_epoch": plan.steps_per_epoch}
        line = f"data: {plan.n_items} items, {plan.steps_per_epoch} steps per epoch at batch_size={cfg.batch_size}"
        if cfg.epochs:
            line += f"; epochs={cfg.epochs:g} → {self.max_steps} steps (max_steps is not used)"
        if data.seconds is not None:
            facts["item_seconds"] = sum(data.seconds) / len(data.seconds)
        if data.lengths is not None:
            facts["padding"] = {
                name: padding_fraction(EpochPlan(plan.n_items, cfg.batch_size, cfg.seed, lengths).steps(0), data.lengths, self.micro)
                for name, lengths in (("bucketed", data.lengths), ("unbucketed", None))
            }
            used, other = ("bucketed", "unbucketed") if cfg.length_buckets else ("unbucketed", "bucketed")
            line += f"; padding {facts['padding'][used]:.0%} of each micro-batch ({facts['padding'][other]:.0%} {other})"
        facts["length_buckets"] = cfg.length_buckets and data.lengths is not None
        self.log(line)
        return facts

    def _resume(self) -> str | None:
        folder = self.store.resume_point(self.log) if self.main else None
        self.accelerator.wait_for_everyone()
        if not self.main:
            folder = checkpoint.latest_complete(self.store.root, log=lambda _: None)
        if folder is None:
            self.log(f"starting run {self.cfg.run_name!r} in {self.store.url}")
            return None
        saved = TrainerState.from_json((folder / "state.json").read_text())
        changes = fingerprint_changes(saved.fingerprint, self.state.fingerprint)
        if changes and not self.allow_config_change:
            raise ConfigDrift(
                f"{folder.name} in {self.store.url} was trained with other settings that change the result:\n  "
                + "\n  ".join(changes)
                + "\nRestore them, or pass --allow-config-change (allow_config_change=True) to continue with the new ones,"
                " or train a new run in another --store."
            )
        if changes:
            self.log("continuing with changed settings (--allow-config-change):\n  " + "\n  ".join(changes))
            saved.fingerprint = self.state.fingerprint
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
        self.state = saved
        self.clock.measured = list(saved.durable_seconds)
        self.log(f"resuming run {self.cfg.run_name!r} from {folder.name} (step {saved.step}, epoch {saved.epoch}) in {self.store.url}")
        return folder.name

    # ------------------------------------------------------------------ the loop
    def _work_left(self) -> bool:
        return self.state.step < self.max_steps and not (self.state.stopped_early and self.cfg.patience)

    def _nothing_left(self) -> str:
        return "early_stopping" if self.state.stopped_early else "max_steps"

    def _loader(self) -> DataLoader:
        """This session's loader, from where the run stands; each epoch iterates it again."""
        self.sampler = MicroBatchSampler(
            self.plan, self.state.epoch, self.state.step_in_epoch,
            micro_batch_size=self.micro, rank=self.accelerator.process_index, world=self.world,
        )
        return DataLoader(
            self.data.dataset,
            batch_sampler=self.sampler,
            collate_fn=self.data.collate,
            num_workers=self.cfg.num_workers,
            persistent_workers=self.cfg.persistent_workers and self.cfg.num_workers > 0,
            pin_memory=self.cfg.pin_memory and self.device.type == "cuda",
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
        bar = tqdm(total=self.max_steps, initial=self.state.step, disable=not (self.progress and self.main), desc=cfg.run_name, dynamic_ncols=True)
        writer = self._tensorboard()
        main_loss = status.main_loss_key([g.name for g in self.groups])
        loader = self._loader()
        batches = iter(loader)
        for model in self.models.values():
            model.train()
        reason = None
        while reason is None:
            started = time.time()
            if self.state.step_in_epoch >= self.plan.steps_per_epoch:
                self.state.epoch += 1
                self.state.step_in_epoch = 0
                self.sampler.set_epoch(self.state.epoch)
                batches = iter(loader)
            losses = self._optimizer_step(batches)
            self.state.step += 1
            self.state.step_in_epoch += 1
            step_times = (step_times + [time.time() - started])[-20:]
            self._spent("steps", started)
            window[status.STEP_SECONDS] = window.get(status.STEP_SECONDS, 0.0) + step_times[-1]
            for key, value in losses.items():
                window[key] = window.get(key, 0.0) + value
            if self.state.step % cfg.log_every == 0 or self.state.step == self.max_steps:
                self._record_losses(window, cfg.log_every, writer)
                window = {}
            if cfg.eval_every and self.state.step % cfg.eval_every == 0:
                eval_started = time.time()
                if self._evaluate(writer):
                    reason = "early_stopping"
                eval_seconds = time.time() - eval_started
                self._spent("validation", eval_started)
            next_eval = bool(cfg.eval_every) and (self.state.step + 1) % cfg.eval_every == 0
            if self.state.step >= self.max_steps:
                reason = reason or "max_steps"
            elif self._agree(bool(stop)):
                reason = stop.signal_name or "signal"
            elif self._agree(self.clock.must_stop(max(step_times) * 1.2 + (eval_seconds if next_eval else 0.0))):
                reason = "deadline"
            elif (every and time.time() - last_save >= every) or (
                cfg.checkpoint_every_steps and self.state.step % cfg.checkpoint_every_steps == 0
            ):
                saving = time.time()
                self._save()
                self._spent("checkpoints", saving)
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
        self.memory = gather_object([memory.peak_memory(self.device)])
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
                + f"; memory: {memory.describe(self.memory)}"
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
            self.store.prune(self.cfg.keep_last, [holder] if holder else [])
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
        (folder / "config.yaml").write_text(yaml.safe_dump(self.config.to_dict(), sort_keys=False, allow_unicode=True))
        if self.last_eval is not None:  # the newest validation's samples (state.json's evals say at which step)
            for rel, data in self.last_eval["files"].items():
                target = folder / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
        png = loss_plot_png(self.state.history, self.state.evals)
        if png:
            (folder / "loss.png").write_bytes(png)

    # ------------------------------------------------------------------ the end
    def _finish(self, reason: str, resumed_from: str | None) -> SessionSummary:
        self.session.reason = reason  # before the final save, so the checkpoint's sessions log says why
        started = time.time()
        latest = checkpoint.read_latest(self.store.root)
        if latest is None or checkpoint.step_of(latest) != self.state.step:
            self._save(final=True)
        elif self.main:
            self.store.publish(latest, final=True)
        finished = reason in {"max_steps", "early_stopping"}
        durable, pending = True, None
        final_status = None
        self.memory = gather_object([memory.peak_memory(self.device)])
        if self.main:
            hard_end = None if self.clock.limit is None else self.clock.start + self.clock.limit - time.time() - 5.0
            durable = self.store.wait(timeout=None if hard_end is None else max(1.0, hard_end))
            pending = self.store.pending()
            self._spent("final", started)
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
        if not self.main or not hasattr(self, "state"):
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

    def _clock_facts(self) -> dict[str, float | None]:
        """The session's length and what its clock keeps free at the end, for estimates of the next sessions."""
        clock = self.clock
        if clock.limit is None or clock.deadline is None:
            return {"limit": None, "held_back": 0.0}
        return {"limit": clock.limit, "held_back": round(clock.start + clock.limit - clock.deadline + clock.reserve(), 1)}

    def _write_status(self, state: str, *, reason: str | None = None) -> dict[str, Any] | None:
        """Write ``status.json`` and, from it, the run's card (with the newest loss plot beside it)."""
        if not self.main:
            return None
        root = self.store.root
        current = status.build(
            state=state, reason=reason, run=self.state, task=self.cfg.task, max_steps=self.max_steps,
            groups=[g.name for g in self.groups], monitor=self.monitor, monitor_mode=self.monitor_mode,
            root=root, store=self.store.url, about=self.task.describe(), memory=self.memory,
            data=self.data_facts, clock=self._clock_facts(),
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
