"""Where this session runs: Kaggle, Colab or elsewhere, and when the session began.

One place for the facts the services' environments give away, used by the session clock
(limits, true start) and by the Hub lease (how the writing machine is named).

The session's true start matters: on Kaggle the 12-hour limit counts from when the
notebook's container started, not from when ``train()`` was called after an hour of
installs and data copying. On Linux every container's PID 1 starts with it, so its start
time (``/proc/1/stat`` field 22, in clock ticks after boot, plus ``btime`` from
``/proc/stat``) is the container start; Kaggle and Colab run each session in a fresh
container. Elsewhere a session is this process, so the clock starts at this process's
own start time (``/proc/self/stat``), which also counts Python's import time.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform as _platform
import socket
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the Hub store names its host from here where no torch is imported (`fintts kaggle`, `fintts pull`)
    import torch


def detect_platform() -> str:
    """``kaggle``, ``colab`` or ``local``, from variables those services set in every kernel."""
    if os.environ.get("KAGGLE_KERNEL_RUN_TYPE") or os.environ.get("KAGGLE_URL_BASE"):
        return "kaggle"
    if os.environ.get("COLAB_RELEASE_TAG") or os.environ.get("COLAB_GPU") is not None:
        return "colab"
    return "local"


#: Kaggle ends a notebook session 12 hours after its container started, whatever it is doing (seconds): the one
#: place this figure is written (the session clock, the planner and ``fintts kaggle`` import it; this module imports
#: nothing of ours, tests/test_layers.py keeps it so).
KAGGLE_SESSION_LIMIT = 12 * 3600.0
#: default session limits of the services fintts targets (seconds); Colab's free notebooks stop at 12 hours too.
PLATFORM_LIMITS = {"kaggle": KAGGLE_SESSION_LIMIT, "colab": 12 * 3600.0}


def process_start_time(pid: int | str = "self") -> float | None:
    """Wall-clock start of a process from /proc, or ``None`` where /proc does not say."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            stat = handle.read()
        ticks = int(stat.rsplit(")", 1)[1].split()[19])  # field 22 overall, after "pid (comm)"
        with open("/proc/stat") as handle:
            boot = next(int(line.split()[1]) for line in handle if line.startswith("btime"))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


#: Set by the launcher (:mod:`fintts.train.session.launcher`) for the processes it starts: its own session start and how it
#: was found, so the launcher and every process keep one clock (a process started later would otherwise end later).
START_VARIABLE, ORIGIN_VARIABLE = "FINTTS_SESSION_START", "FINTTS_SESSION_ORIGIN"


def session_start(platform: str, *, own_process: bool = False) -> tuple[float, str]:
    """When this session began, and how that was determined (for the summary).

    On Kaggle and Colab their limit counts from the container's start. Elsewhere a session
    counts from the start of its process where that process was started for it (``own_process``:
    the ``fintts train`` command, whose ``--budget`` then covers its imports too), and otherwise
    from the call: a notebook's kernel may have run for hours before it trains (counted from its
    start, a short limit leaves a kernel older than it no step: benchmarks/README.md, "Figures behind the code's
    comments")."""
    shared = os.environ.get(START_VARIABLE)
    if shared:
        return float(shared), os.environ.get(ORIGIN_VARIABLE, "the launcher's start")
    if platform in PLATFORM_LIMITS:
        started = process_start_time(1)
        if started is not None:
            return started, f"{platform} container start (PID 1)"
    started = process_start_time("self") if own_process else None
    if started is not None:
        return started, "process start"
    return time.time(), "the call to train"


#: Libraries whose versions change what a step computes or how a checkpoint is read.
TRACKED_LIBRARIES = ("torch", "numpy", "accelerate", "safetensors", "transformers", "huggingface_hub", "fintts")


def library_versions() -> dict[str, str]:
    """Python's and :data:`TRACKED_LIBRARIES`' versions (those installed), recorded in every checkpoint."""
    versions = {"python": _platform.python_version()}
    for name in TRACKED_LIBRARIES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def host_name() -> str:
    """How a session names its machine to other sessions (the Hub lease, the sessions table)."""
    platform = detect_platform()
    return f"{platform}:{socket.gethostname()}" if platform == "local" else platform


def device_label(device: torch.device, world: int) -> str:
    """What a session trains on, e.g. ``2×Tesla T4`` or ``1×cpu (AMD EPYC 7B13, 2 threads)``.

    Benchmarks are kept under this name, so a CPU says which one: CPUs differ far more than
    the word ``cpu`` suggests.
    """
    import torch  # imported already: the caller holds a device

    if device.type == "cuda":
        return f"{world}×{torch.cuda.get_device_name(device)}"
    return f"{world}×{device.type} ({_cpu_model()}, {torch.get_num_threads()} threads)"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            return next((line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")), "unknown model")
    except OSError:
        return "unknown model"
