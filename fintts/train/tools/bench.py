"""``fintts bench``: what a training step of a config costs on this machine, measured by training it.

A bench runs the trainer itself — the config's task, models, data, precision, devices — for
a few optimizer steps in a temporary store: ``warmup`` steps that are not timed (allocator
growth, lazy initialisation, cuDNN autotuning), then ``steps`` timed ones. Every figure comes
from what that session recorded about itself (the history's ``step_seconds``, its phases, its
memory peaks, its data's padding), so a bench measures exactly what training does and nothing
a copy of the training code could get wrong.

The first session of a process is a fresh session's start-up: it computes the task's caches
(features) from nothing, builds the models, validates once and saves; its phases are the
per-session overhead :mod:`fintts.train.tools.plan` uses, its end's wait for the slow part of the
voice's export included. Its steps are also the first the process runs (lazy initialisation,
kernels chosen per new input shape), so the config's step time is taken from a second session,
like every switch's, on an equal footing. Those sessions make no slow part of an export: their
stores are thrown away, and an MMS-sized voice's takes tens of seconds of a session's end, each
time (benchmarks/README.md, "Figures behind the code's comments").

``compare`` runs the same for each speed switch — the trainer's and the task's
(:attr:`fintts.train.task.Task.speed_switches`) — one at a time against the config, and
makes one table of them. On CUDA with one process it also searches for the largest
micro-batch that fits (doubling, then bisecting, each try one short session that may run
out of memory); asked for, it searches on any device (on a CPU only a task that raises
out-of-memory itself ends the doubling: the OS kills a process that runs out of RAM).
Switches that only act on CUDA are listed, not run, on a CPU.

A try that runs out of memory is a row like any other, its error saying so: the trainer
ends such a session cleanly (no timed steps to read), the search takes it as "too big",
and the report keeps every row measured, so ``fintts bench`` always keeps what it learnt.

Results are kept in ``<store>/bench.json`` under the device's name and the settings a step
depends on (:func:`fintts.train.config.speed_settings`), where :mod:`fintts.train.tools.plan`
finds them.
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from accelerate import PartialState

from fintts.errors import UsageError
from fintts.train.config import ConfigError, RunConfig, speed_settings
from fintts.train.decision import StopReason
from fintts.train.machine.platform import device_label
from fintts.train.run import checkpoint
from fintts.train.run.layout import BENCH_FILE, CACHE_DIR, STATUS
from fintts.train.session.loop import train
from fintts.train.step.memory import is_out_of_memory
from fintts.train.step.precision import resolve_precision

#: the trainer's own switches: name → (settings, acts only on CUDA).
TRAINER_SWITCHES: dict[str, tuple[dict[str, Any], bool]] = {
    "precision=fp32": ({"precision": "fp32"}, False),
    "precision=fp16": ({"precision": "fp16"}, False),
    "precision=bf16": ({"precision": "bf16"}, False),
    "length_buckets=false": ({"length_buckets": False}, False),
    "persistent_workers=false": ({"persistent_workers": False}, False),
    "cudnn_benchmark=true": ({"cudnn_benchmark": True}, True),
    "tf32=false": ({"tf32": False}, True),
    "pin_memory=false": ({"pin_memory": False}, True),
}


@dataclasses.dataclass
class Measurement:
    """One configuration's bench session. Times in seconds; ``error`` says why there are no figures."""

    label: str
    settings: dict[str, Any]
    device: str = ""
    precision: str = ""
    world: int = 1
    batch_size: int = 0
    micro_batch_size: int = 0
    timed_steps: int = 0
    seconds_per_step: float | None = None
    samples_per_second: float | None = None
    #: seconds of training data (audio...) per second, when the task gives item lengths in seconds.
    data_seconds_per_second: float | None = None
    memory: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    #: share of the micro-batches that is padding, as trained (``None`` without item lengths).
    padding: float | None = None
    padding_other: dict[str, float] | None = None
    items: int = 0
    steps_per_epoch: int = 0
    item_seconds: float | None = None
    #: the session's phases (see :data:`fintts.train.run.state.PHASES`); ``validation`` is one validation.
    phases: dict[str, float] = dataclasses.field(default_factory=dict)
    checkpoint_bytes: int = 0
    note: str = ""
    error: str | None = None
    #: the try needed more device memory than there is (``error`` says where).
    out_of_memory: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None and self.seconds_per_step is not None


@dataclasses.dataclass
class BenchReport:
    config: str
    device: str
    measured: float
    rows: list[Measurement]
    #: the process's first session of the config: cold caches, one validation, a checkpoint.
    first: Measurement | None = None
    warmup: int = 1
    #: one process: the largest micro-batch that fit (``None``: not searched; 0: not even the first try).
    largest_micro_batch: int | None = None
    search_note: str = ""

    @property
    def base(self) -> Measurement:
        return self.rows[0]

    def speed(self, row: Measurement) -> float | None:
        """``row``'s samples per second over the config's: its speed against the config.

        Samples, not steps: a micro-batch search row trains ``batch_size = micro_batch_size``, so
        its steps hold another number of samples than the config's, and a smaller micro-batch's
        steps are quicker by more than they are smaller (twice by steps against 1.1× by samples on
        an H200: benchmarks/README.md, "Figures behind the code's comments"). For every other row the
        batch is the config's and both ratios are the same."""
        if not (self.base.ok and row.ok and self.base.samples_per_second and row.samples_per_second):
            return None
        return row.samples_per_second / self.base.samples_per_second

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BenchReport:
        rows = [Measurement(**row) for row in data["rows"]]
        first = Measurement(**data["first"]) if data.get("first") else None
        return cls(**{**data, "rows": rows, "first": first})


def measure(
    config: RunConfig,
    label: str,
    overrides: dict[str, Any],
    *,
    steps: int,
    warmup: int,
    validate: bool,
    cache: Path,
    log: Callable[[str], None],
) -> Measurement:
    """Train ``config`` with ``overrides`` for ``warmup + steps`` steps in a temporary store and read the figures.

    ``cache`` is kept across measurements as the store's ``cache/`` folder, so the task's caches
    (features) are computed once per bench, by its first session. The figures are read on the
    main process, which alone writes the store; other processes return the row without them.
    """
    run = config.with_overrides(overrides)
    row = Measurement(label=label, settings=overrides)
    with tempfile.TemporaryDirectory(prefix="fintts-bench-") as tmp:
        store = Path(tmp) / "run"
        store.mkdir()
        (store / CACHE_DIR).symlink_to(cache, target_is_directory=True)
        session = {
            "store": str(store), "hub_repo": "", "max_steps": warmup + steps, "epochs": 0, "log_every": 1,
            "eval_every": warmup + steps if validate else 0, "patience": 0, "checkpoint_every": "none",
            "checkpoint_every_steps": 0, "budget": "none",
        }
        try:
            # the slow part of model/'s export (ONNX graphs) only where it is a cost to measure: the fresh session's end
            summary = train(run.with_overrides(session), progress=False, log=lambda message: None, background_export=validate)
        finally:
            _release_memory()
        if summary.reason == StopReason.OUT_OF_MEMORY:  # the trainer stopped the session cleanly: nothing timed to read
            row.out_of_memory = True
            row.error = next((w for w in summary.warnings if w.startswith("out of memory")), "out of memory")[:240]
            log(f"  {label}: {row.error}")
        elif PartialState().is_main_process:
            _read_session(row, store, warmup)
            log(f"  {label}: {row.seconds_per_step:.3f} s/step")
    return row


def _try(config: RunConfig, label: str, overrides: dict[str, Any], **options: Any) -> Measurement:
    """:func:`measure`, with a failure (out of memory outside a step, an operation without fp16 on this device) as the row's error."""
    try:
        return measure(config, label, overrides, **options)
    except (RuntimeError, ValueError, NotImplementedError) as err:
        _release_memory()
        first_line = (str(err).strip().splitlines() or [""])[0][:160]
        oom = is_out_of_memory(err)
        row = Measurement(
            label=label, settings=overrides, out_of_memory=oom,
            error=f"{'out of memory: ' if oom else ''}{type(err).__name__}: {first_line}",
        )
        options["log"](f"  {label}: {row.error}")
        return row


def _read_session(row: Measurement, store: Path, warmup: int) -> None:
    status = json.loads((store / STATUS).read_text())
    folder = checkpoint.latest_complete(store, log=lambda _: None)
    state = checkpoint.read_state(folder)
    session = status["sessions"][-1]
    timed = [entry["step_seconds"] for entry in state.history if entry["step"] > warmup]
    data = status["data"]
    row.device, row.precision, row.world = session["devices"], session["precision"], state.world_size
    row.batch_size, row.micro_batch_size = data["batch_size"], state.micro_batch_size
    row.timed_steps, row.seconds_per_step = len(timed), statistics.mean(timed)
    row.samples_per_second = row.batch_size / row.seconds_per_step
    row.items, row.steps_per_epoch, row.item_seconds = data["items"], data["steps_per_epoch"], data.get("item_seconds")
    if row.item_seconds is not None:
        row.data_seconds_per_second = row.samples_per_second * row.item_seconds
    if "padding" in data:
        used = "bucketed" if data["length_buckets"] else "unbucketed"
        row.padding, row.padding_other = data["padding"][used], data["padding"]
    row.memory, row.phases = status["memory"], session["phases"]
    row.checkpoint_bytes = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _release_memory() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def switches(config: RunConfig, device: torch.device) -> list[tuple[str, dict[str, Any], str]]:
    """The switches to compare against ``config`` on ``device``: ``(name, overrides, why not run)``.

    A switch already on in the config is left out; one that acts only on CUDA is listed with
    the reason it is not run on a CPU.
    """
    current = {**dataclasses.asdict(config.train), **dataclasses.asdict(config.task)}
    current["precision"] = resolve_precision(config.train.precision, device)
    found = []
    candidates = {name: spec for name, spec in TRAINER_SWITCHES.items()}
    candidates |= {name: (settings, False) for name, settings in config.task_class.speed_switches.items()}
    for name, (settings, cuda_only) in candidates.items():
        if all(current.get(key) == value for key, value in settings.items()):
            continue
        if name == "persistent_workers=false" and not config.train.num_workers:
            continue
        skip = "acts on CUDA only" if cuda_only and device.type != "cuda" else ""
        found.append((name, settings, skip))
    return found


def largest_micro_batch(
    config: RunConfig, start: int, *, cache: Path, log: Callable[[str], None], limit: int = 256, tries: int = 8
) -> tuple[int, list[Measurement], str]:
    """The largest micro-batch of one process that trains without running out of device memory.

    Doubling from ``start`` until a try runs out of memory, then bisecting between the
    largest that fit and the smallest that did not (down from ``start`` if even that one
    did not fit), ``tries`` sessions at most; each try is a two-step session at ``batch_size
    = micro_batch_size`` whose memory is released for the next. A try that fails for another
    reason ends the search with what it found. Returns ``(largest that fit or 0, the tries'
    rows, a note)``.
    """
    fits, fails = 0, None
    size, rows, note = start, [], ""
    for _ in range(tries):
        if fails is None and size > limit:
            note = f"micro-batch search stopped at the limit of {limit}: every size tried fitted"
            break
        row = _try(config, f"micro_batch_size={size}", {"micro_batch_size": size, "batch_size": size},
                   steps=1, warmup=1, validate=False, cache=cache, log=log)
        rows.append(row)
        if row.ok:
            fits = size
        elif row.out_of_memory:
            fails = size
        else:
            note = f"micro-batch search stopped: micro_batch_size={size} failed for another reason ({row.error})"
            break
        if fails is None:
            size *= 2
        elif fails - fits <= max(1, fits // 8):
            break
        else:
            size = (fits + fails) // 2
    return fits, rows, note


def bench(
    config: RunConfig,
    *,
    compare: bool = False,
    steps: int = 3,
    warmup: int = 1,
    search: bool | None = None,
    log: Callable[[str], None] = print,
) -> BenchReport:
    """Measure ``config`` (and with ``compare`` each switch) on this machine's devices; see the module doc.

    ``search``: the largest micro-batch that fits, ``None`` on CUDA only, ``True`` on any device, ``False`` never.
    """
    state = PartialState()
    device, world = state.device, state.num_processes
    if not state.is_main_process:
        log = lambda message: None  # noqa: E731
    report = BenchReport(
        config=config.source or config.train.run_name, device=device_label(device, world), measured=time.time(), rows=[],
        warmup=warmup,
    )
    with tempfile.TemporaryDirectory(prefix="fintts-bench-cache-") as cache:
        options = dict(steps=steps, warmup=warmup, cache=Path(cache), log=log)
        log(f"bench of {report.config} on {report.device}: {warmup} warm-up + {steps} timed steps per configuration")
        report.first = measure(config, "first session", {}, validate=True, **options)
        report.rows.append(measure(config, "config", {}, validate=False, **options))
        if compare:
            for name, overrides, skip in switches(config, device):
                if skip:
                    report.rows.append(Measurement(label=name, settings=overrides, note=skip))
                else:
                    report.rows.append(_try(config, name, overrides, validate=False, **options))
            _annotate(report)
        if search or (search is None and device.type == "cuda"):
            if world == 1:
                start = report.base.micro_batch_size or config.train.micro_batch_size or config.train.batch_size
                report.largest_micro_batch, tries, report.search_note = largest_micro_batch(config, start, cache=Path(cache), log=log)
                report.rows += tries
            else:
                report.search_note = "micro-batch search needs one process (an out-of-memory error on one rank stalls the others)"
    return report


def _annotate(report: BenchReport) -> None:
    """Say what a row's figures mean where the table alone would mislead."""
    base = report.base
    for row in report.rows[1:]:
        if not row.ok:
            continue
        if row.label == "persistent_workers=false":
            # the first step of epoch e >= 1 is step e * steps_per_epoch + 1; the timed ones follow the warm-up
            starts = [e for e in range(1, report.warmup + row.timed_steps + 1)
                      if report.warmup <= e * row.steps_per_epoch < report.warmup + row.timed_steps]
            row.note = f"acts when an epoch starts, every {row.steps_per_epoch} steps: " + (
                f"{len(starts)} in the timed steps" if starts else "none in the timed steps, so no effect can show")
        if row.label == "length_buckets=false" and base.padding is not None:
            row.note = f"padding {base.padding:.0%} with buckets, {row.padding:.0%} without"


# ---------------------------------------------------------------------- the cache in the store


def cache_key(config: RunConfig) -> str:
    """A short hash of the settings a step's time and memory depend on."""
    return hashlib.sha256(json.dumps(speed_settings(config), sort_keys=True, default=str).encode()).hexdigest()[:16]


def save(config: RunConfig, report: BenchReport) -> Path:
    """Keep ``report`` in the run's folder under its device and the config's :func:`cache_key`, replacing an older one."""
    path = config.train.local_dir() / BENCH_FILE
    entries = [e for e in _entries(path) if not (e["device"] == report.device and e["key"] == cache_key(config))]
    entries.append({"device": report.device, "key": cache_key(config), "report": report.to_dict()})
    path.parent.mkdir(parents=True, exist_ok=True)
    checkpoint.write_atomic(path, json.dumps({"entries": entries}, indent=1).encode())
    return path


def load(config: RunConfig, device: str | None = None) -> BenchReport | None:
    """The newest kept bench of ``config``'s step settings on a device whose name contains ``device``
    (default: exactly this machine's), or ``None``."""
    key = cache_key(config)
    if device is None:
        state = PartialState()
        wanted: Callable[[str], bool] = device_label(state.device, state.num_processes).__eq__
    else:
        wanted = lambda name: device.lower() in name.lower()  # noqa: E731
    found = [e["report"] for e in _entries(config.train.local_dir() / BENCH_FILE) if e["key"] == key and wanted(e["device"])]
    return BenchReport.from_dict(max(found, key=lambda r: r["measured"])) if found else None


def for_plan(
    config: RunConfig, *, file: str | Path | None = None, device: str | None = None, log: Callable[[str], None] = print
) -> BenchReport:
    """The bench a plan is made from: ``file`` (``fintts bench --json`` output from elsewhere), else
    the kept bench of this config on ``device`` (default: this machine), else one run now and kept."""
    if file:
        try:
            given = BenchReport.from_dict(json.loads(Path(file).read_text()))
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise ConfigError(f"--bench {file}: not the JSON of fintts bench --json ({err})") from None
        return _timed(given, f"--bench {file}")
    report = load(config, device)
    if report is not None:
        return _timed(report, f"the kept bench in {config.train.local_dir() / BENCH_FILE}")
    if device:
        raise ConfigError(
            f"no bench of this config on a device named like {device!r} in {config.train.local_dir() / BENCH_FILE}; "
            "run fintts bench there with the same settings, or pass --bench FILE or --step-seconds"
        )
    log("no bench of this config on this machine yet: running one (fintts bench)")
    report = bench(config, log=log)
    save(config, report)
    return _timed(report, "the bench just run")


def _timed(report: BenchReport, source: str) -> BenchReport:
    """``report``, if its config row has a step time a plan can use."""
    if not report.base.ok:
        raise ConfigError(
            f"{source}: the config itself has no step time ({report.base.error}); "
            + ("lower micro_batch_size (batch_size stays, by accumulation) and run fintts bench again"
               if report.base.out_of_memory else "fix that and run fintts bench again, or pass --step-seconds")
        )
    return report


def _entries(path: Path) -> list[dict[str, Any]]:
    try:
        return json.loads(path.read_text())["entries"]
    except FileNotFoundError:
        return []
    except (ValueError, KeyError) as err:
        raise UsageError(f"{path} is not a fintts bench file ({err}); delete it and run fintts bench again") from None


# ---------------------------------------------------------------------- for people


def format_report(report: BenchReport) -> str:
    """The bench as a table: one row per configuration, the config first."""
    base = report.base
    lines = [
        f"fintts bench {report.config} on {report.device}, {base.precision}, batch_size {base.batch_size} = "
        f"{base.world} process(es) × micro-batch {base.micro_batch_size} × {base.batch_size // max(1, base.world * base.micro_batch_size)}"
        f" accumulation; {base.items} items ({base.steps_per_epoch} steps per epoch)",
        "",
        f"{'configuration':<26} {'s/step':>8} {'speed':>6} {'samples/s':>9} {'data s/s':>8} {'peak memory':>34} {'padding':>7}  note",
    ]
    for row in report.rows:
        if not row.ok:
            lines.append(f"{row.label:<26} {'—':>8} {'':>6} {'':>9} {'':>8} {'':>34} {'':>7}  {row.error or row.note}")
            continue
        speed = report.speed(row)
        speed = f"{speed:>5.2f}×" if speed is not None else f"{'—':>6}"
        data = f"{row.data_seconds_per_second:.2f}" if row.data_seconds_per_second is not None else "—"
        padding = f"{row.padding:.0%}" if row.padding is not None else "—"
        peak = _short_memory(row.memory)
        lines.append(
            f"{row.label:<26} {row.seconds_per_step:>8.3f} {speed} {row.samples_per_second:>9.2f} {data:>8} "
            f"{peak:>34} {padding:>7}  {row.note}"
        )
    lines.append("speed: samples per second against the config's (a micro_batch_size=N row trains batch_size N)")
    first = report.first
    phases = first.phases
    if not first.ok:
        lines += ["", f"a fresh session (the first of this process): {first.error}"]
    else:
        lines += [
        "",
            f"a fresh session (the first of this process, {first.seconds_per_step:.3f} s/step): models {phases.get('models', 0):.1f} s, "
            f"data {phases.get('data', 0):.1f} s ({first.items} items, from an empty cache), one validation "
            f"{phases.get('validation', 0):.1f} s, final checkpoint {phases.get('final', 0):.1f} s ({first.checkpoint_bytes / 1e6:.0f} MB)",
        ]
    if report.largest_micro_batch:
        lines.append(f"largest micro-batch that fits in one device's memory: {report.largest_micro_batch}")
    elif report.largest_micro_batch == 0:
        lines.append("largest micro-batch that fits in one device's memory: none of the sizes tried")
    if report.search_note:
        lines.append(report.search_note)
    return "\n".join(lines)


def _short_memory(peaks: list[dict[str, Any]]) -> str:
    if not peaks:
        return "—"
    if "allocated_gib" in peaks[0]:
        return f"{max(p['allocated_gib'] for p in peaks):.2f}/{max(p['reserved_gib'] for p in peaks):.2f} GiB alloc/resv"
    return f"{max(p['rss_gib'] or 0 for p in peaks):.2f} GiB RSS"
