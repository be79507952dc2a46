"""Typed run configs: a YAML file in ``configs/`` plus ``key=value`` overrides.

One file describes one run. Its top-level keys are either the trainer's own
(:class:`TrainConfig`) or the task's (the dataclass its ``config_class`` names), so
``data=PATH`` and ``max_steps=500`` are overridden the same way. Nested dataclass fields
are reached with dots (``model.hidden_size=96``). Unknown keys are errors that list the
valid ones: a typo must not silently train with a default for twelve hours.

Every setting has one route: the command line's options (``--budget``, ``--store``,
``--hub-repo``...) are overrides of keys here, so they are validated when the config loads,
before any device or network is touched, and a notebook sets them the same way.

A field made with :func:`free_setting` may change between sessions of one run; all
other fields are part of the run's fingerprint (see :func:`fingerprint`).

``task:`` names the task (:mod:`fintts.train.registry` finds it and its settings); the
trainer itself knows no task.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import types
import typing
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from fintts.errors import ConfigDrift, ConfigError  # noqa: F401 (ConfigDrift: the trainer's modules import it from here)
from fintts.train.registry import resolve_settings, resolve_task
from fintts.train.repo_id import repo_id_problem
from fintts.train.task import Task

#: The configs that come with fintts (``configs/`` of its checkout, which an editable install runs from): found by
#: name from any folder (:func:`find_config`). A Kaggle session reads them from the wheels dataset instead.
SHIPPED_CONFIGS = Path(__file__).resolve().parents[2] / "configs"

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(h|m|s|ms)?", re.IGNORECASE)


def parse_duration(value: Any, *, key: str = "duration") -> float | None:
    """``11h30m``, ``90s``, ``45m``, ``2.5h`` or a number of seconds; ``none``/``off`` is ``None``."""
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip().lower().replace(" ", "")
    if text in {"none", "off", "never", "", "0"}:
        return None if text != "0" else 0.0
    total, pos = 0.0, 0
    for match in _DURATION.finditer(text):
        if match.start() != pos:
            break
        number, unit = float(match.group(1)), (match.group(2) or "s").lower()
        total += number * {"h": 3600, "m": 60, "s": 1, "ms": 0.001}[unit]
        pos = match.end()
    if pos != len(text) or pos == 0:
        raise ConfigError(f"{key}: {value!r} is not a duration; write e.g. 11h30m, 45m or 90s")
    return total


def free_setting(default: Any = dataclasses.MISSING, *, speed: bool = False, **kwargs) -> Any:
    """A dataclass field that does not change the math, so it may differ between sessions of a run.

    ``speed=True`` marks one that changes how fast a step runs or how much memory it takes
    (loader workers, recomputation, cuDNN autotuning): a benchmark is valid for a config
    only with the same values of these and of the math settings (:func:`speed_settings`).
    """
    return dataclasses.field(default=default, metadata={"math": False, "speed": speed}, **kwargs)


def duration_setting(default: str, *, auto: bool = False) -> Any:
    """A free setting that is a duration: written ``30m``, ``11h30m`` or ``90s`` (or ``none``; ``auto`` where
    ``auto=True``), held as seconds (a float, ``None`` for none), converted and checked when the config is built."""
    seconds = default if auto and default == "auto" else parse_duration(default)
    return dataclasses.field(default=seconds, metadata={"math": False, "speed": False, "duration": "auto" if auto else True})


#: Settings that were renamed, old name → new. A config (or a checkpoint's copy of one) written with the old name
#: still loads, with a FutureWarning asking for the new one; both names at once are an error.
RENAMED = {"session_limit": "budget"}

#: Settings of the whole run, which a phase cannot set for itself.
RUN_SETTINGS = ("task", "run_name", "seed", "precision", "max_steps", "epochs", "budget", "store", "hub_repo",
                "push_every", "hub_timeout", "storage_cap_gb", "storage_limit_gb", "hub_public", "collective_timeout",
                "exit_grace", "export_wait", "phases")


@dataclasses.dataclass
class Phase:
    """One stage of a run: its settings over the run's, and when it ends (see :mod:`fintts.train.phases`).

    A phase ends after ``steps`` optimizer steps or ``epochs`` passes over its data
    (0: no such limit), or when its validations stop improving (its ``patience``),
    whichever comes first; the last phase ends with the run (``max_steps``, early stopping).
    """

    #: a name for logs and the status; default ``phase<N>``.
    name: str = ""
    steps: int = 0
    epochs: int = 0
    #: config settings for this phase, as in the file: ``{lr: 1.0e-3, lora: {r: 8}, patience: 3}``.
    settings: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class TrainConfig:
    """The session trainer's settings; everything else in a config file belongs to the task."""

    #: a task registered under this name (``fintts.tasks`` entry points) or ``package.module:Class``.
    task: str = ""
    #: the run's name; default: the config file's stem, and with other data than the file's given on the command line
    #: (``--data DIR``) that folder's name after it (``demo-my-voice``). Names the default local folder ``runs/<name>``.
    run_name: str = free_setting("")
    seed: int = 1234
    max_steps: int = free_setting(1000)
    #: passes over the training items (may be fractional); when set it decides the run's length
    #: (epochs × steps per epoch, known once the data is) and ``max_steps`` is not used. 0: ``max_steps``.
    epochs: float = free_setting(0.0)
    #: samples per optimizer step, whatever the number of devices (the effective batch).
    batch_size: int = 16
    #: samples per device per forward pass; 0 = batch_size / devices. Accumulation follows.
    micro_batch_size: int = free_setting(0, speed=True)
    #: fp16 | bf16 | fp32 | auto (fp16 on T4-class GPUs, bf16 where supported, fp32 on CPU).
    precision: str = "auto"
    warmup_steps: int = 0
    #: constant | exponential (lr × lr_decay^step) | cosine (to 0 at decay_steps).
    lr_schedule: str = "constant"
    lr_decay: float = 0.9999
    decay_steps: int = 100_000
    #: validate every N steps (0 = never) and stop after ``patience`` validations without improvement (0 = never).
    eval_every: int = free_setting(100)
    patience: int = free_setting(5)
    #: minimum improvement of the monitored metric that resets patience.
    min_delta: float = free_setting(0.0)
    #: metric for early stopping and "best"; default: the task's.
    monitor: str = free_setting("")
    #: a checkpoint every this long (e.g. 30m; seconds once loaded), so a hard kill loses at most that; and/or every N steps.
    checkpoint_every: float | None = duration_setting("30m")
    checkpoint_every_steps: int = free_setting(0)
    keep_last: int = free_setting(3)
    #: this session's length (``--budget``): a duration, ``auto`` (12 h on Kaggle and Colab, unlimited elsewhere) or ``none``.
    budget: float | str | None = duration_setting("auto", auto=True)
    #: stop this long before the session limit as well as the measured reserve.
    safety_margin: float | None = duration_setting("5m")
    #: the reserve for the final save + upload is this × the longest recent measured one.
    reserve_factor: float = free_setting(2.0)
    #: reserve used until this run has measured a save (at most a quarter of the session).
    initial_reserve: float | None = duration_setting("3m")
    #: stop after this many optimizer steps in a row were skipped (non-finite gradients or loss, loss spikes); 0: never.
    max_skipped_steps: int = free_setting(25)
    #: fp16: stop when the GradScaler's loss scale falls below this (below 1 the gradients overflow fp16 even unscaled).
    min_loss_scale: float = free_setting(1.0)
    #: skip a step whose main loss is above this × the median of the last ``spike_window`` applied steps; 0: off.
    spike_factor: float = free_setting(10.0)
    spike_window: int = free_setting(100)
    num_workers: int = free_setting(2, speed=True)
    #: keep the data-loader workers alive from one epoch to the next instead of starting new ones
    #: every epoch (with few items per epoch, restarting them is a large share of the epoch).
    persistent_workers: bool = free_setting(True, speed=True)
    #: page-locked host memory for batches, so copies to the GPU overlap compute (CUDA only).
    pin_memory: bool = free_setting(True, speed=True)
    #: batch items of similar length together (less padding); changes which items meet, so it is part of the math.
    length_buckets: bool = True
    #: let cuDNN time its algorithms for every new input shape and keep the fastest (CUDA only;
    #: with inputs of many different lengths the timing itself may cost more than it saves).
    cudnn_benchmark: bool = free_setting(False, speed=True)
    #: TF32 tensor cores for float32 matrix products and convolutions (Ampere and newer GPUs; no
    #: effect on a T4 or a CPU). ``false`` keeps them in full float32.
    tf32: bool = free_setting(True, speed=True)
    log_every: int = free_setting(10)
    #: the run's local folder (``--store``); default ``runs/<run_name>``. With ``hub_repo`` it is the Hub's mirror,
    #: by default ``runs/<repo name>``, and bound to that repo (see :class:`fintts.train.stores.hub.HubStore`).
    store: str = free_setting("")
    #: keep the run in this Hugging Face Hub repo, ``user/name`` (``--hub-repo``); empty: the local folder only.
    hub_repo: str = free_setting("")
    #: with ``hub_repo``: push a full checkpoint at most this often (0: every checkpoint); a session's end always pushes.
    push_every: float | None = duration_setting("1h")
    #: with ``hub_repo``: warn before the repo's storage passes this many GB (0: no warning).
    storage_cap_gb: float = free_setting(0.0)
    #: with ``hub_repo``: the account's private storage in GB, which a session's start checks this run has room in
    #: (refused when not). 0: as the account's plan on the Hub says (100 GB free, 1 TB PRO/Team/Enterprise), only
    #: warning where that is not sure (a plan the Hub did not say, an older account that keeps more, pay-as-you-go).
    storage_limit_gb: float = free_setting(0.0)
    #: with ``hub_repo``: allow a repo that is public (``hub_public=true``); a run's checkpoints, samples of the speaker
    #: and corpus text then go out publicly. Default: a public repo is refused (a new one is always made private).
    hub_public: bool = free_setting(False)
    #: with ``hub_repo``: the longest any one Hub request may take before it counts as failed and is retried
    #: (never past the session's end). A stalled Hub then costs this, not the session.
    hub_timeout: float | None = duration_setting("60s")
    #: with several processes: the least time one may wait in a collective (e.g. a gradient all-reduce) before the
    #: process group aborts it; once steps are measured the bound is 4 × the longest stretch between two votes when
    #: that is longer (:mod:`fintts.train.session.watchdog`). ``auto``: 5 min, and 10 min (at most the session's limit) until
    #: steps are measured.
    collective_timeout: float | str | None = duration_setting("auto", auto=True)
    #: with several processes: how long another process may outlive a first process that ended its session
    #: cleanly before the launcher ends it.
    exit_grace: float | None = duration_setting("30s")
    #: without a ``budget``: how long the end of a session waits at most for ``model/``'s slow export (a voice's
    #: ONNX graphs) before it leaves it to the next session (``none``: as long as it takes).
    export_wait: float | None = duration_setting("10m")
    #: stages of the run, each with its own settings (e.g. a full fine-tune, then an adapter on one
    #: speaker); empty: one stage with the settings above. Fingerprinted phase by phase.
    phases: list[Phase] = dataclasses.field(default_factory=list, metadata={"math": "per phase"})

    def local_dir(self) -> Path:
        """The one rule for where a run lives on this machine: ``store``; else ``runs/<repo name>`` for a Hub run
        (one folder per repo, so two voices trained from one config never share a folder); else ``runs/<run_name>``."""
        default = self.hub_repo.rpartition("/")[2] if self.hub_repo else self.run_name
        return Path(self.store or Path("runs") / default).expanduser()


@dataclasses.dataclass
class RunConfig:
    """A loaded config: the trainer's part, the task's part and class, and where it came from."""

    train: TrainConfig
    task: Any
    source: str = ""
    #: the config came from a checkpoint: its task is imported only from an installed package's entry point
    registered_only: bool = False

    @functools.cached_property
    def task_class(self) -> type[Task]:
        """The task's class, imported when it is first asked for (a session, a bench, a plan), not when the config is read."""
        try:
            return resolve_task(self.train.task, registered_only=self.registered_only)
        except ValueError as err:
            raise ConfigError(f"{self.source or 'config'}: {err}") from None

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self.train), **dataclasses.asdict(self.task)}

    def phase(self, index: int, resolved: Mapping[str, Any] | None = None) -> RunConfig:
        """The config phase ``index`` trains with: its settings over the run's, then what it ``resolved``.

        ``resolved`` are the values its task decided from the data when the phase began
        (:meth:`fintts.train.task.Task.resolved_settings`), recorded in the run's state.
        """
        data = {k: v for k, v in self.to_dict().items() if k != "phases"}
        if self.train.phases:
            data = _merge(data, self.train.phases[index].settings)
        return split_config(_merge(data, dict(resolved or {})), source=self.source, default_name=self.train.run_name,
                            registered_only=self.registered_only)

    def with_overrides(self, overrides: list[str] | Mapping[str, Any]) -> RunConfig:
        """A copy with ``overrides`` applied and validated as if they had been given at load time."""
        if not overrides:
            return self
        extra = dict(overrides) if isinstance(overrides, Mapping) else parse_overrides(list(overrides))
        extra = _renamed(extra, "overrides")
        return split_config(_merge(self.to_dict(), extra), source=self.source, default_name=self.train.run_name,
                            registered_only=self.registered_only)


def _coerce(value: Any, hint: Any, key: str) -> Any:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if value is None:
            return None
        return _coerce(value, args[0], key)
    if dataclasses.is_dataclass(hint):
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a mapping of {hint.__name__} settings, got {value!r}")
        return build(hint, value, prefix=key + ".")
    if hint is bool:
        if isinstance(value, bool):
            return value
        if str(value).lower() in {"true", "yes", "1", "on"}:
            return True
        if str(value).lower() in {"false", "no", "0", "off"}:
            return False
    elif hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str) and re.fullmatch(r"[+-]?\d[\d_]*", value):
            return int(value)
    elif hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        try:
            return float(value)
        except (TypeError, ValueError):
            pass
    elif hint is str:
        return value if isinstance(value, str) else str(value)
    elif origin in (list, tuple):
        if isinstance(value, (list, tuple)):
            (inner, *_) = typing.get_args(hint) or (Any,)
            items = [_coerce(v, inner, f"{key}[{i}]") if inner is not Any else v for i, v in enumerate(value)]
            return list(items) if origin is list else tuple(items)
    elif origin is dict or hint is dict:
        if isinstance(value, dict):
            return dict(value)
    elif hint is Any:
        return value
    raise ConfigError(f"{key}: expected {getattr(hint, '__name__', hint)}, got {value!r}")


def _duration(value: Any, key: str, kind: Any) -> float | str | None:
    """A :func:`duration_setting`'s value in seconds (``auto`` kept where the setting allows it)."""
    if kind == "auto" and isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    if isinstance(value, bool):
        raise ConfigError(f"{key}: {value!r} is not a duration; write e.g. 11h30m, 45m or 90s")
    return parse_duration(value, key=key)


def build(cls: type, data: dict[str, Any], *, prefix: str = "") -> Any:
    """Instantiate dataclass ``cls`` from ``data``, checking every key and type."""
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(
            f"unknown setting{'s' if len(unknown) > 1 else ''} {', '.join(prefix + k for k in unknown)}; "
            f"valid settings are: {', '.join(prefix + k for k in sorted(fields))}"
        )
    values = {
        name: _duration(value, prefix + name, fields[name].metadata["duration"]) if fields[name].metadata.get("duration")
        else _coerce(value, hints[name], prefix + name)
        for name, value in data.items()
    }
    missing = [
        n for n, f in fields.items()
        if n not in values and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise ConfigError(f"missing required setting{'s' if len(missing) > 1 else ''}: {', '.join(prefix + m for m in missing)}")
    try:
        return cls(**values)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"{prefix.rstrip('.') or cls.__name__}: {err}") from err


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """``["max_steps=500", "model.hidden_size=96"]`` → a nested dict, values read as YAML scalars."""
    result: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"override {item!r} is not key=value (e.g. max_steps=500)")
        value = yaml.safe_load(raw) if raw.strip() else ""
        node = result
        *parents, leaf = key.strip().split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return result


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def find_config(path: str | Path) -> Path:
    """The config file ``path`` names: that file where it exists, else fintts's own of that name.

    ``mms-fin``, ``mms-fin.yaml`` and ``configs/mms-fin.yaml`` name the shipped ``configs/mms-fin.yaml`` from any
    folder, as the README's commands write them: a person who ran ``cd`` elsewhere (their corpus's folder) is not told
    the file does not exist. A file of that name where they are wins.
    """
    path = Path(path).expanduser()
    return path if path.exists() else shipped_config(path) or path


def shipped_config(name: str | Path) -> Path | None:
    """fintts's own config that ``name`` names (``mms-fin``, ``mms-fin.yaml``, ``configs/mms-fin.yaml``); ``None``: none."""
    path = Path(name)
    if len(path.parts) > 2 or (len(path.parts) == 2 and path.parts[0] != SHIPPED_CONFIGS.name):
        return None
    shipped = SHIPPED_CONFIGS / (path.name if path.suffix in (".yaml", ".yml") else f"{path.name}.yaml")
    return shipped if shipped.is_file() else None


def load_config(path: str | Path | None, overrides: list[str] | Mapping[str, Any] = (), *,
                registered_only: bool = False) -> RunConfig:
    """Read a YAML config (or none: all defaults), apply overrides, split and validate.

    ``registered_only``: the file came from outside (a checkpoint pulled from the Hub), so its
    ``task`` must be an installed one; an import path in it would run code it names. Such a
    copy was written by fintts, not by the person: an old setting's name in it is read without
    asking them to rename it.
    """
    data: dict[str, Any] = {}
    source = ""
    if path is not None:
        path = find_config(path)
        source = str(path)
        try:
            loaded = yaml.safe_load(path.read_text()) or {}
        except FileNotFoundError:
            shipped = ", ".join(sorted(p.stem for p in SHIPPED_CONFIGS.glob("*.yaml")))
            raise ConfigError(f"config file {path} does not exist; fintts's own are found by name from any folder: "
                              f"{shipped or 'none in this install'}") from None
        except yaml.YAMLError as err:
            raise ConfigError(f"{path} is not valid YAML: {err}") from None
        if not isinstance(loaded, dict):
            raise ConfigError(f"{path} must be a mapping of settings, not {type(loaded).__name__}")
        data = _renamed(loaded, source, tell=not registered_only)
    extra = dict(overrides) if isinstance(overrides, Mapping) else parse_overrides(list(overrides))
    name = default_run_name(Path(source).stem if source else "run", data.get("data"), extra.get("data"))
    data = _merge(data, _renamed(extra, "overrides"))
    return split_config(data, source=source, default_name=name, registered_only=registered_only)


def default_run_name(config_name: str, file_data: Any, given_data: Any) -> str:
    """The run's name when the config gives none: the config's, and the data's where the command line gave other data.

    ``fintts train configs/demo.yaml --data my-voice`` is another run than the config's own (``fintts demo``): it
    trains other clips, maybe other speakers, so it gets a folder of its own, ``runs/demo-my-voice``, instead of
    resuming, or refusing, the other one's checkpoint in ``runs/demo``. ``data`` is the task's setting of that name,
    where it has one; a path is named by its last part, ``hf://datasets/USER/NAME`` by ``NAME``.
    """
    if given_data in (None, "") or given_data == file_data:
        return config_name
    label = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(str(given_data).rstrip("/")).name).strip("-.")
    return f"{config_name}-{label}" if label else config_name


def _renamed(data: dict[str, Any], where: str, *, tell: bool = True) -> dict[str, Any]:
    """``data`` with each setting of :data:`RENAMED` under its new name, and (``tell``) a warning naming ``where`` it was."""
    for old, new in RENAMED.items():
        if old not in data:
            continue
        if new in data:
            raise ConfigError(f"{where}: {old} is the old name of {new}; give only {new}")
        if tell:
            warnings.warn(f"{where}: the setting {old} is now called {new}; rename it there (the old name is still read, "
                          "but not for ever)", FutureWarning, stacklevel=3)
        data = {(new if key == old else key): value for key, value in data.items()}
    return data


def as_run_config(
    config: RunConfig | str | Path, overrides: list[str] | Mapping[str, Any] = (), settings: Mapping[str, Any] | None = None
) -> RunConfig:
    """A config file (or a loaded config) with ``overrides`` (``key=value`` strings) and ``settings`` (keywords) applied."""
    if not isinstance(config, RunConfig):
        config = load_config(config, overrides)
    elif overrides:
        config = config.with_overrides(overrides)
    return config.with_overrides(dict(settings or {}))


def split_config(data: dict[str, Any], *, source: str = "", default_name: str = "run", registered_only: bool = False) -> RunConfig:
    train_keys = {f.name for f in dataclasses.fields(TrainConfig)}
    train_part = {k: v for k, v in data.items() if k in train_keys}
    task_name = str(train_part.get("task") or "")
    try:
        settings = resolve_settings(task_name, registered_only=registered_only)
    except ValueError as err:
        raise ConfigError(f"{source or 'config'}: {err}") from None
    task_keys = {f.name for f in dataclasses.fields(settings)}
    unknown = sorted(set(data) - train_keys - task_keys)
    if unknown:
        raise ConfigError(
            f"{source or 'config'}: unknown setting{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}. "
            f"Trainer settings: {', '.join(sorted(train_keys))}. "
            f"Settings of task {task_name!r}: {', '.join(sorted(task_keys))}."
        )
    train = build(TrainConfig, train_part)
    if not train.run_name:
        train.run_name = default_name
    task = build(settings, {k: v for k, v in data.items() if k in task_keys})
    check_train_config(train)
    config = RunConfig(train=train, task=task, source=source, registered_only=registered_only)
    _check_phases(config)
    return config


def _check_phases(config: RunConfig) -> None:
    """Name the phases and validate each one's settings as the config it will train with."""
    names: set[str] = set()
    last = len(config.train.phases) - 1
    if config.train.phases and config.train.epochs:
        raise ConfigError("epochs: a run in phases is bounded by max_steps (phases train on different data, so the run's "
                          "epochs have no one length); give each phase its own steps or epochs")
    tasks = []
    for index, phase in enumerate(config.train.phases):
        phase.name = phase.name or f"phase{index + 1}"
        where = f"phases[{index}] ({phase.name})"
        if phase.name in names:
            raise ConfigError(f"{where}: another phase has this name; give each phase its own")
        names.add(phase.name)
        fixed = sorted(set(phase.settings) & set(RUN_SETTINGS))
        if fixed:
            raise ConfigError(f"{where}: {', '.join(fixed)} belong to the whole run; set them outside phases")
        if phase.steps < 0 or phase.epochs < 0:
            raise ConfigError(f"{where}: steps and epochs must be 0 (no limit) or positive")
        try:
            settings = config.phase(index)
        except ConfigError as err:
            raise ConfigError(f"{where}: {err}") from None
        tasks.append(settings.task)
        ends_itself = phase.steps or phase.epochs or (settings.train.patience and settings.train.eval_every)
        if index < last and not ends_itself:
            raise ConfigError(f"{where} never ends: give it steps, epochs, or patience with eval_every, "
                              "so the next phase can start")
    check = getattr(type(config.task), "check_phases", None)  # the settings' own rule for a sequence of phases, if any
    if tasks and check is not None:
        try:
            check(tasks)
        except ValueError as err:
            raise ConfigError(f"phases: {err}") from None


def check_train_config(cfg: TrainConfig) -> None:
    if cfg.precision not in {"auto", "fp16", "bf16", "fp32"}:
        raise ConfigError(f"precision: {cfg.precision!r} is not one of auto, fp16, bf16, fp32")
    if cfg.lr_schedule not in {"constant", "exponential", "cosine"}:
        raise ConfigError(f"lr_schedule: {cfg.lr_schedule!r} is not one of constant, exponential, cosine")
    for key in ("batch_size", "max_steps"):
        if getattr(cfg, key) <= 0:
            raise ConfigError(f"{key}: must be positive, got {getattr(cfg, key)}")
    if cfg.epochs < 0:
        raise ConfigError(f"epochs: must be 0 (use max_steps) or positive, got {cfg.epochs}")
    if cfg.micro_batch_size < 0:
        raise ConfigError("micro_batch_size: must be 0 (automatic) or positive")
    if not cfg.hub_timeout:
        raise ConfigError("hub_timeout: must be a positive duration, e.g. 60s")
    if cfg.store.startswith("hf://"):
        raise ConfigError(
            f"store: {cfg.store!r} — store is the run's local folder; name the Hub repo with hub_repo: "
            f"{cfg.store[len('hf://'):]} (--hub-repo on the command line)"
        )
    problem = repo_id_problem(cfg.hub_repo) if cfg.hub_repo else None
    if problem:
        raise ConfigError(f"hub_repo: {problem}")
    for key in ("max_skipped_steps", "spike_factor", "min_loss_scale"):
        if getattr(cfg, key) < 0:
            raise ConfigError(f"{key}: must be 0 or positive, got {getattr(cfg, key)}")
    if cfg.spike_window < 1:
        raise ConfigError(f"spike_window: must be at least 1, got {cfg.spike_window}")
    if cfg.storage_cap_gb < 0:
        raise ConfigError("storage_cap_gb: must be 0 (no warning) or a positive number of GB")
    if cfg.storage_limit_gb < 0:
        raise ConfigError("storage_limit_gb: must be 0 (the account's plan, as the Hub says it) or a positive number of GB")


def _flatten(obj: Any, prefix: str = "", *, speed: bool = False) -> dict[str, Any]:
    """The math settings of ``obj`` by dotted name; with ``speed``, the speed settings too."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        math = f.metadata.get("math", True)  # "per phase": fingerprinted phase by phase, not here
        if math is not True and not (speed and f.metadata.get("speed")):
            continue
        if dataclasses.is_dataclass(value):
            out.update(_flatten(value, prefix + f.name + ".", speed=speed))
        else:
            out[prefix + f.name] = list(value) if isinstance(value, tuple) else value
    return out


def fingerprint(config: RunConfig) -> dict[str, Any]:
    """The settings that change what training computes; resuming with others is refused.

    With phases: each phase's name and end, and every math setting in which the config a
    phase trains with differs from the run's (``phases.1.lr``), so a change to any phase
    is caught in any session, before or after that phase runs.
    """
    found = {**_flatten(config.train), **_flatten(config.task)}
    for index, phase in enumerate(config.train.phases):
        found[f"phases.{index}"] = {"name": phase.name, "steps": phase.steps, "epochs": phase.epochs}
        own = fingerprint(config.phase(index))
        found.update({f"phases.{index}.{key}": value for key, value in own.items() if found.get(key) != value})
    return found


def speed_settings(config: RunConfig) -> dict[str, Any]:
    """The settings a step's time and memory depend on: the math ones and those marked ``speed``."""
    return {**_flatten(config.train, speed=True), **_flatten(config.task, speed=True)}


def fingerprint_changes(saved: dict[str, Any], current: dict[str, Any]) -> list[str]:
    keys = sorted(set(saved) | set(current))
    return [f"{k}: {saved.get(k, '(unset)')!r} -> {current.get(k, '(unset)')!r}" for k in keys if saved.get(k) != current.get(k)]


def total_steps(cfg: TrainConfig, steps_per_epoch: int) -> int:
    """The run's length in optimizer steps: ``epochs`` × steps per epoch when set, else ``max_steps``."""
    if cfg.epochs:
        return max(1, round(cfg.epochs * steps_per_epoch))
    return cfg.max_steps
