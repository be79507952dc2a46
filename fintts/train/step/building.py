"""Building a phase: one value holding everything a phase of the run trains with.

The task, its models (as built and as prepared for the devices), optimizer groups, their
schedules, the fp16 loss scaler, the data and its epoch plan are built together from the
config the phase trains with (:meth:`fintts.train.config.RunConfig.phase`), and replaced
whole at a phase switch (:mod:`fintts.train.phases`): nothing of the ended phase stays
half-current.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from fintts.train.config import ConfigError, RunConfig, TrainConfig, total_steps
from fintts.train.report import status
from fintts.train.step.sampler import EpochPlan, padding_fraction
from fintts.train.step.stepping import AUTOCAST_DTYPES, lr_factor
from fintts.train.task import DataFingerprint, OptimizerGroup, Task, TaskContext, TrainData, Weights, fetch_here


@dataclasses.dataclass
class BuiltPhase:
    """What one phase trains with; see the module's docstring."""

    config: RunConfig
    task: Task
    #: the task's models as it built them (saved, loaded, exported), and as prepared for the devices (trained).
    raw_models: dict[str, torch.nn.Module]
    models: dict[str, torch.nn.Module]
    groups: list[OptimizerGroup]
    #: each group's trainable parameters (its backward computes gradients for these only).
    group_params: dict[str, list[torch.nn.Parameter]]
    schedulers: dict[str, torch.optim.lr_scheduler.LambdaLR]
    scaler: torch.amp.GradScaler
    #: samples per device per forward pass, and micro-batches per optimizer step.
    micro: int
    accumulation: int
    data: TrainData
    plan: EpochPlan
    max_steps: int
    data_fingerprint: DataFingerprint | None
    #: the metric for best and early stopping, and whether lower (``min``) or higher (``max``) is better.
    monitor: str
    monitor_mode: str
    #: the loss judged by the step guard and shown on the progress bar.
    main_loss: str
    #: what the task decided from the data (``speaker: best`` → a name), for the run's state.
    resolved: dict[str, Any]

    @property
    def cfg(self) -> TrainConfig:
        return self.config.train


def build_phase(
    config: RunConfig,
    start: Weights | None,
    *,
    accelerator,
    device: torch.device,
    precision: str,
    cache: Path,
    main: bool,
    log: Callable[[str], None],
    progress: bool,
    spent: Callable[[str, float], None],
    warn: Callable[[str], None] = print,
    resuming: bool = False,
    fetch_first: Callable[[str, Callable[[], Any]], Any] = fetch_here,
) -> BuiltPhase:
    """Build a phase from the config it trains with; ``start``: the previous phase's final weights.
    ``resuming``: a checkpoint's weights replace the ones built; ``fetch_first``: how the task fetches its inputs from
    the Hub (both: see :class:`~fintts.train.task.TaskContext`).

    ``spent(part, since)`` is told when the models and the data were started on (the session's time accounting).
    """
    cfg, world = config.train, accelerator.num_processes
    task = config.task_class(
        config.task, TaskContext(cfg.seed, device, AUTOCAST_DTYPES[precision], cache, main, log, progress and main,
                                 warn=warn, resuming=resuming, fetch_first=fetch_first)
    )
    started = time.time()
    raw_models = {name: m.to(device) for name, m in task.build_models(start).items()}
    resolved = task.resolved_settings()
    groups = task.build_optimizers(raw_models)
    group_params = {g.name: [p for name in g.models for p in raw_models[name].parameters() if p.requires_grad] for g in groups}
    schedulers = {g.name: torch.optim.lr_scheduler.LambdaLR(g.optimizer, lambda s: lr_factor(cfg, s)) for g in groups}
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")
    models = {name: accelerator.prepare_model(m) for name, m in raw_models.items()}
    micro = cfg.micro_batch_size or cfg.batch_size // world
    if micro <= 0 or cfg.batch_size % (micro * world):
        raise ConfigError(f"batch_size={cfg.batch_size} must be a multiple of micro_batch_size={micro} × {world} device(s)")
    spent("models", started)
    started = time.time()
    data = task.train_data()
    plan = EpochPlan(len(data.dataset), cfg.batch_size, cfg.seed, data.lengths if cfg.length_buckets else None)
    data_fingerprint = task.data_fingerprint()
    spent("data", started)
    monitor = cfg.monitor or task.monitor or ""
    mode, _, monitor = monitor.rpartition(":") if ":" in monitor else (task.monitor_mode, "", monitor)
    return BuiltPhase(
        config=config, task=task, raw_models=raw_models, models=models, groups=groups, group_params=group_params,
        schedulers=schedulers, scaler=scaler, micro=micro, accumulation=cfg.batch_size // (micro * world), data=data,
        plan=plan, max_steps=total_steps(cfg, plan.steps_per_epoch), data_fingerprint=data_fingerprint, monitor=monitor,
        monitor_mode=mode, main_loss=status.main_loss_key([g.name for g in groups]), resolved=resolved,
    )


def describe_data(built: BuiltPhase, log: Callable[[str], None]) -> dict[str, Any]:
    """Items, steps per epoch, the run's length, and how much of each micro-batch is padding (also said in ``log``)."""
    cfg, plan, data = built.cfg, built.plan, built.data
    facts: dict[str, Any] = {"items": plan.n_items, "batch_size": cfg.batch_size, "steps_per_epoch": plan.steps_per_epoch}
    line = f"data: {plan.n_items} items, {plan.steps_per_epoch} steps per epoch at batch_size={cfg.batch_size}"
    if cfg.epochs:
        line += f"; epochs={cfg.epochs:g} → {built.max_steps} steps (max_steps is not used)"
    if data.seconds is not None:
        facts["item_seconds"] = sum(data.seconds) / len(data.seconds)
    if data.lengths is not None:
        facts["padding"] = {
            name: padding_fraction(EpochPlan(plan.n_items, cfg.batch_size, cfg.seed, lengths).steps(0), data.lengths, built.micro)
            for name, lengths in (("bucketed", data.lengths), ("unbucketed", None))
        }
        used, other = ("bucketed", "unbucketed") if cfg.length_buckets else ("unbucketed", "bucketed")
        line += f"; padding {facts['padding'][used]:.0%} of each micro-batch ({facts['padding'][other]:.0%} {other})"
    facts["length_buckets"] = cfg.length_buckets and data.lengths is not None
    log(line)
    return facts
