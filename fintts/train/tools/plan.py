"""How long a run takes: steps, epochs, sessions and weeks of quota, from measured figures.

The arithmetic people do by hand, done once: a data set of ``N`` items at ``batch_size``
gives ``N // batch_size`` optimizer steps per epoch (the sampler drops the remainder), so
2000 clips at batch 8 give 250 steps per epoch, and 2800 steps are 11.2 epochs.

Time comes from measurements, never from a constant in the code: the seconds per step,
per validation and per checkpoint of a :mod:`fintts.train.tools.bench` run of the same config on
the same device, or, for a run in progress, what its own sessions recorded
(:data:`fintts.train.run.state.PHASES`). What cannot be measured before the first session on the
target machine — the install and model download of a fresh container, moving checkpoints to
and from the Hub — is an :class:`Assumptions` field, and every figure says which it is.

A session is the :class:`~fintts.train.session.clock.SessionClock`'s: training stops ``safety_margin``
plus a reserve (``reserve_factor`` × the final save and upload) before the limit, and the
session then ends, so the quota pays for what the session used, not for its limit.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fintts.train.config import ConfigError, RunConfig, TrainConfig, parse_duration, total_steps
from fintts.train.machine.platform import KAGGLE_SESSION_LIMIT
from fintts.train.report.durations import in_words
from fintts.train.run.layout import CACHE_DIR
from fintts.train.stores.base import Store

HOUR = 3600.0


def count_items(config: RunConfig, samples: int | None = None, *, log: Callable[[str], None] = lambda _: None) -> tuple[int, str]:
    """The number of training items and where it came from: ``samples`` (``--samples``), else the task's count of its data.

    ``log``: the task's lines as it counts (what it skips, how many it holds out for validation).
    """
    if samples is not None:
        if samples <= 0:
            raise ConfigError(f"--samples: must be a positive number of training items, got {samples}")
        return samples, "--samples"
    import torch  # the task's context names a device; counting never uses it

    from fintts.train.task import TaskContext  # the Task interface imports torch; a plan from --samples needs none

    context = TaskContext(config.train.seed, torch.device("cpu"), None, config.train.local_dir() / CACHE_DIR, log=log,
                          progress=False)
    return config.task_class(config.task, context).count_items(), "training items of the config's data, held-out ones apart"


@dataclasses.dataclass
class Assumptions:
    """What a plan cannot measure here. The defaults are Kaggle's free 2×T4 notebooks (a session's length is the
    config's ``budget``; ``auto``: Kaggle's limit).

    ``quota_hours``: Kaggle grants about 30 GPU hours a week; the figure floats from week to week.
    ``install_seconds``: a fresh container's ``pip install`` and model download before training
    starts (a run's own sessions measure it as their ``before`` phase). The transfer rates move
    checkpoints to and from the Hub: the final upload of each session, the download on resume.
    """

    quota_hours: float = 30.0
    install_seconds: float = 180.0
    upload_mb_per_second: float = 20.0
    download_mb_per_second: float = 50.0
    price_per_hour: float | None = None


@dataclasses.dataclass
class Figure:
    """A duration in seconds and where it comes from (``measured: …`` or ``assumed: …``)."""

    seconds: float
    source: str


@dataclasses.dataclass
class SessionCosts:
    """The time a run needs besides its steps, per session or per event."""

    step: Figure
    #: per session, before the first step: install, models, data (and resume, from the second session on)
    startup: Figure
    resume: Figure
    #: validations and periodic checkpoints, as a share of the time spent in steps
    overhead_share: Figure
    #: the last save of a session and making it durable (upload)
    final: Figure


@dataclasses.dataclass
class Estimate:
    steps: int
    sessions: int
    work_hours: float
    gpu_hours: float
    weeks: float
    #: share of a session that runs to its limit spent in optimizer steps
    session_useful_fraction: float
    cost: float | None


def estimate(steps: int, costs: SessionCosts, assumptions: Assumptions, limit: float | None, held_back: float) -> Estimate:
    """Sessions and GPU hours for ``steps`` more optimizer steps.

    ``limit``: a session's length in seconds (``None``: unlimited, one session); ``held_back``:
    what the clock keeps free at a session's end (safety margin and reserve).
    """
    work = steps * costs.step.seconds * (1.0 + costs.overhead_share.seconds)
    fixed = costs.startup.seconds + costs.final.seconds
    if limit is None:
        sessions, capacity = 1, None
    else:
        capacity = limit - fixed - costs.resume.seconds - held_back
        if capacity <= 0:
            raise ConfigError(
                f"a session of {limit / HOUR:.1f} h has no time left to train after start-up and saving "
                f"({(limit - capacity) / 60:.0f} min)"
            )
        sessions = max(1, math.ceil(work / capacity))
    gpu = work + sessions * fixed + (sessions - 1) * costs.resume.seconds
    useful = 1.0 if capacity is None else capacity / (1.0 + costs.overhead_share.seconds) / limit
    price = assumptions.price_per_hour
    return Estimate(
        steps=steps, sessions=sessions, work_hours=work / HOUR, gpu_hours=gpu / HOUR,
        weeks=gpu / HOUR / assumptions.quota_hours, session_useful_fraction=useful,
        cost=None if price is None else round(gpu / HOUR * price, 2),
    )


def held_back(cfg: TrainConfig, limit: float | None, final: float) -> float:
    """What the session clock keeps free at the end of a session of ``limit`` seconds: the safety
    margin and the reserve for the final save (``reserve_factor`` × its measured length)."""
    if limit is None:
        return 0.0
    margin = min(parse_duration(cfg.safety_margin) or 0.0, 0.05 * limit)
    return margin + cfg.reserve_factor * final


# ---------------------------------------------------------------------- before a run: from a bench


@dataclasses.dataclass
class Plan:
    """What ``fintts plan`` prints: the arithmetic, the figures it used, and the estimate."""

    config: str
    items: int
    items_source: str
    batch_size: int
    steps_per_epoch: int
    total_steps: int
    steps_source: str
    #: what ends the run, in words: its steps, its phases, and whether early stopping may end it sooner
    stops_on: str
    epochs: float
    validations: int
    costs: SessionCosts
    assumptions: Assumptions
    #: a session's length in seconds (the config's ``budget``; ``None``: unlimited)
    budget: float | None
    estimate: Estimate
    #: the bench's device (``None``: a step time given with ``--step-seconds``)
    device: str | None = None
    #: the estimate should early stopping end the run at its first chance (``None``: it cannot end it sooner)
    earliest: Estimate | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON keys: ``steps_per_epoch``, ``total_steps``, ``epochs``, ``sessions``, ``weeks`` and the rest."""
        data = dataclasses.asdict(self)
        data.update({key: data["estimate"][key] for key in ("sessions", "weeks", "gpu_hours", "session_useful_fraction", "cost")})
        return data


def plan_run(
    cfg: TrainConfig,
    *,
    config_name: str,
    items: int,
    items_source: str,
    step: Figure,
    first_session: Mapping[str, Any] | None,
    assumptions: Assumptions,
) -> Plan:
    """Plan a run of ``items`` training items with config ``cfg``.

    ``step`` is the measured (or given) seconds per optimizer step. ``first_session`` is a
    bench's first session (:class:`fintts.train.tools.bench.Measurement` as a dict): its phases
    give the start-up, one validation and the final save, its checkpoint size the transfers.
    Without one only the step is known and the overheads count as zero, which the plan says.
    """
    if items < cfg.batch_size:
        raise ConfigError(f"{items} items are fewer than batch_size={cfg.batch_size}: not one optimizer step per epoch")
    steps_per_epoch = items // cfg.batch_size
    steps = total_steps(cfg, steps_per_epoch)
    validations = steps // cfg.eval_every if cfg.eval_every else 0
    limit = KAGGLE_SESSION_LIMIT if cfg.budget == "auto" else cfg.budget
    costs = _costs_from_bench(cfg, step, first_session, items, validations, steps, assumptions)
    soonest = earliest_stop(cfg, steps)
    return Plan(
        config=config_name, items=items, items_source=items_source, batch_size=cfg.batch_size,
        steps_per_epoch=steps_per_epoch, total_steps=steps,
        steps_source=f"epochs={cfg.epochs:g}" if cfg.epochs else "max_steps", stops_on=stops_on(cfg, steps),
        epochs=steps / steps_per_epoch, validations=validations, costs=costs, assumptions=assumptions, budget=limit,
        estimate=estimate(steps, costs, assumptions, limit, held_back(cfg, limit, costs.final.seconds)),
        device=first_session["device"] if first_session else None,
        earliest=None if soonest is None else estimate(soonest, costs, assumptions, limit, held_back(cfg, limit, costs.final.seconds)),
    )


def earliest_stop(cfg: TrainConfig, steps: int) -> int | None:
    """The first step at which early stopping can end a run of ``steps`` steps: after ``patience``
    validations without improvement on the first one, so at validation ``patience + 1``
    (``None``: no early stopping, or not before the end; phases stop each on their own terms)."""
    if not (cfg.patience and cfg.eval_every) or cfg.phases:
        return None
    soonest = cfg.eval_every * (cfg.patience + 1)
    return soonest if soonest < steps else None


def stops_on(cfg: TrainConfig, steps: int) -> str:
    """What ends a run of ``steps`` steps, said so that the plan's figures read as what they are: its length
    when nothing stops it sooner. Early stopping ends a run after ``patience`` validations without
    improvement, so at the earliest at validation ``patience + 1``; a run in phases trains each phase
    for its own steps, the last to the run's end."""
    if cfg.phases:
        parts = [f"{phase.name or f'phase{number}'} {f'{phase.steps:,} steps' if phase.steps else 'to the end'}"
                 for number, phase in enumerate(cfg.phases, 1)]
        ends = f"{steps:,} steps in {len(cfg.phases)} phases ({', '.join(parts)})"
    else:
        ends = f"{steps:,} steps"
    earliest = earliest_stop(cfg, steps)
    if earliest is not None:
        return (f"at most {ends}; early stopping (patience {cfg.patience} × eval_every {cfg.eval_every}) "
                f"may end it sooner, at step {earliest:,} at the earliest; the figures below are for the whole length")
    return ends


def _costs_from_bench(
    cfg: TrainConfig, step: Figure, first: Mapping[str, Any] | None, items: int, validations: int, steps: int,
    assumptions: Assumptions,
) -> SessionCosts:
    install = assumptions.install_seconds
    if first is None:
        none = "not measured (no bench): counted as 0"
        return SessionCosts(
            step=step, startup=Figure(install, f"assumed: install {install:.0f} s; models and data {none}"),
            resume=Figure(0.0, none), overhead_share=Figure(0.0, none), final=Figure(0.0, none),
        )
    phases, where = first["phases"], f"measured: bench on {first['device']}"
    per_item = phases.get("data", 0.0) / max(1, first["items"])
    megabytes = first["checkpoint_bytes"] / 1e6
    startup = install + phases.get("models", 0.0) + per_item * items
    upload = megabytes / assumptions.upload_mb_per_second
    download = megabytes / assumptions.download_mb_per_second
    train_seconds = steps * step.seconds
    every = parse_duration(cfg.checkpoint_every) or 0.0
    # a periodic save stalls training about as long as the bench's final save took on the same disk
    stalls = (train_seconds / every) * phases.get("final", 0.0) if every else 0.0
    share = (validations * phases.get("validation", 0.0) + stalls) / train_seconds if train_seconds else 0.0
    return SessionCosts(
        step=step,
        startup=Figure(startup, f"assumed: install and model download {install:.0f} s; {where}: models "
                                f"{phases.get('models', 0.0):.1f} s, data {items} items × {per_item * 1000:.1f} ms"),
        resume=Figure(download, f"assumed: a {megabytes:.0f} MB checkpoint at {assumptions.download_mb_per_second:g} MB/s"),
        overhead_share=Figure(share, f"{where}: {validations} validations × {phases.get('validation', 0.0):.1f} s, "
                                     f"a save every {cfg.checkpoint_every} × {phases.get('final', 0.0):.1f} s"),
        final=Figure(phases.get("final", 0.0) + upload, f"{where}: save {phases.get('final', 0.0):.1f} s; assumed: upload "
                                                         f"{megabytes:.0f} MB at {assumptions.upload_mb_per_second:g} MB/s"),
    )


# ---------------------------------------------------------------------- a run in progress: from its sessions


def run_status(store: Store, assumptions: Assumptions) -> dict[str, Any] | None:
    """The run as ``fintts status`` shows it (``None``: no run in ``store``).

    Its ``status.json`` with the store's facts (``store_facts``) and, once its sessions have
    measured their pace, the estimate of what is left (``estimate``).
    """
    status = store.read_status()
    if status is None:
        return None
    status = {**status, "store_facts": store.describe()}
    left = estimate_from_status(status, assumptions)
    if left is not None:
        status["estimate"] = dataclasses.asdict(left[1])
    return status


def estimate_from_status(status: Mapping[str, Any], assumptions: Assumptions) -> tuple[SessionCosts, Estimate] | None:
    """What is left of the run ``status`` describes, at the pace its own sessions measured.

    ``None`` until a session has recorded its phases and trained at least one step.
    """
    sessions: Sequence[Mapping[str, Any]] = [
        s for s in status.get("sessions", []) if s.get("phases", {}).get("steps") and s["end_step"] > s["start_step"]
    ]
    if not sessions:
        return None
    total = lambda key: sum(s["phases"].get(key, 0.0) for s in sessions)  # noqa: E731
    steps_done = sum(s["end_step"] - s["start_step"] for s in sessions)
    where = f"measured: this run's {len(sessions)} session(s)"
    resumed = [s for s in sessions if s["start_step"] > 0]
    costs = SessionCosts(
        step=Figure(total("steps") / steps_done, f"{where}, {steps_done} steps"),
        startup=Figure(sum(total(k) for k in ("before", "models", "data")) / len(sessions), where),
        resume=Figure(sum(s["phases"].get("resume", 0.0) for s in resumed) / len(resumed) if resumed else 0.0, where),
        overhead_share=Figure((total("validation") + total("checkpoints")) / total("steps"), where),
        final=Figure(total("final") / len(sessions), where),
    )
    clock = status.get("clock") or {}
    left = max(0, status["max_steps"] - status["step"])
    return costs, estimate(left, costs, assumptions, clock.get("limit"), clock.get("held_back", 0.0))


# ---------------------------------------------------------------------- for people


def format_plan(plan: Plan) -> str:
    est, costs, a = plan.estimate, plan.costs, plan.assumptions
    limit = "no limit" if plan.budget is None else in_words(plan.budget)
    lines = [
        f"plan for {plan.config}",
        f"  items              {plan.items}   ({plan.items_source})",
        f"  steps per epoch    {plan.steps_per_epoch}   ({plan.items} // batch_size {plan.batch_size})",
        f"  total steps        {plan.total_steps}   ({plan.steps_source})",
        f"  the run ends       {plan.stops_on}",
        f"  epochs             {plan.epochs:.4g}",
        f"  seconds per step   {costs.step.seconds:.3f}   ({costs.step.source})",
        f"  validations        {plan.validations}",
        f"  start-up           {costs.startup.seconds / 60:.1f} min per session   ({costs.startup.source})",
        f"  resume             {costs.resume.seconds:.0f} s per session after the first   ({costs.resume.source})",
        f"  other overhead     {costs.overhead_share.seconds:.1%} of step time   ({costs.overhead_share.source})",
        f"  end of session     {costs.final.seconds:.0f} s   ({costs.final.source})",
        "",
        *format_estimate(est, limit, a, on_cpu=on_cpu(plan.device)),
    ]
    if plan.earliest is not None:
        lines.append(f"  if it stops early  {plan.earliest.gpu_hours:.2f} {'CPU' if on_cpu(plan.device) else 'GPU'} hours, "
                     f"{plan.earliest.sessions} session(s)   (early stopping at its first chance, step {plan.earliest.steps:,})")
    if plan.device is None:
        lines.append("  (an estimate from the step time you gave; fintts bench on the target machine measures it)")
    return "\n".join(lines)


def on_cpu(device: str | None) -> bool:
    """Whether a bench's device (``1×cpu (AMD EPYC, 2 threads)``, ``2×Tesla T4``) is a CPU: its hours are no GPU quota's."""
    return device is not None and "cpu" in device.lower().split("(")[0]


def format_estimate(est: Estimate, limit: str, assumptions: Assumptions, on_cpu: bool = False) -> list[str]:
    """The estimate's lines; a run measured on a CPU spends hours of that machine, no GPU quota."""
    hours = "CPU hours" if on_cpu else "GPU hours"
    lines = [
        f"  training           {in_words(est.work_hours * HOUR)} of steps, validations and checkpoints",
        f"  sessions           {est.sessions} of {limit}   (a full session trains {est.session_useful_fraction:.1%} of its time)",
        f"  {hours:<18} {est.gpu_hours:.2f}",
        "  weeks of quota     none: a CPU uses no GPU quota" if on_cpu else
        f"  weeks of quota     {est.weeks:.2f}   (at {assumptions.quota_hours:g} GPU h a week)",
    ]
    if est.cost is not None:
        lines.append(f"  cost               {est.cost:.2f} at {assumptions.price_per_hour:g} per GPU hour")
    return lines
