"""When does this session end, and when must training stop to save in time?

The session's true start matters: on Kaggle the 12-hour limit counts from when the
notebook's container started, not from when ``train()`` was called after an hour of
installs and data copying. On Linux every container's PID 1 starts with it, so its start
time (``/proc/1/stat`` field 22, in clock ticks after boot, plus ``btime`` from
``/proc/stat``) is the container start; Kaggle and Colab run each session in a fresh
container. Elsewhere a session is this process, so the clock starts at this process's
own start time (``/proc/self/stat``), which also counts Python's import time.

The *reserve* is the time the final checkpoint needs to be saved and uploaded. It is
learned: ``reserve_factor`` × the longest of this run's recent measured save+upload
times, kept in the trainer state so the next session starts with it. Until a run has
measured one, ``initial_reserve`` (at most a quarter of the session) stands in.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator


def detect_platform() -> str:
    """``kaggle``, ``colab`` or ``local``, from variables those services set in every kernel."""
    if os.environ.get("KAGGLE_KERNEL_RUN_TYPE") or os.environ.get("KAGGLE_URL_BASE"):
        return "kaggle"
    if os.environ.get("COLAB_RELEASE_TAG") or os.environ.get("COLAB_GPU") is not None:
        return "colab"
    return "local"


#: default session limits of the services fintts targets (seconds).
PLATFORM_LIMITS = {"kaggle": 12 * 3600.0, "colab": 12 * 3600.0}


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


def session_start(platform: str) -> tuple[float, str]:
    """When this session began, and how that was determined (for the summary)."""
    if platform in PLATFORM_LIMITS:
        started = process_start_time(1)
        if started is not None:
            return started, f"{platform} container start (PID 1)"
    started = process_start_time("self")
    if started is not None:
        return started, "process start"
    return time.time(), "train() call"


@dataclass
class SessionClock:
    """Deadline arithmetic for one session. ``limit`` ``None`` means no deadline."""

    start: float
    limit: float | None
    margin: float = 300.0
    reserve_factor: float = 2.0
    initial_reserve: float = 180.0
    #: seconds that recent checkpoints took to become durable (save + upload), newest last.
    measured: list[float] = field(default_factory=list)

    @property
    def deadline(self) -> float | None:
        if self.limit is None:
            return None
        return self.start + self.limit - min(self.margin, 0.05 * self.limit)

    def reserve(self) -> float:
        if self.measured:
            return self.reserve_factor * max(self.measured[-5:])
        if self.limit is None:
            return 0.0
        return min(self.initial_reserve, 0.25 * self.limit)

    def record(self, seconds: float) -> None:
        self.measured = (self.measured + [round(seconds, 3)])[-10:]

    def remaining(self, now: float | None = None) -> float | None:
        """Seconds of training left before the reserve must start."""
        if self.deadline is None:
            return None
        return self.deadline - self.reserve() - (time.time() if now is None else now)

    def must_stop(self, next_step_seconds: float, now: float | None = None) -> bool:
        """Would one more step run into the reserve?"""
        left = self.remaining(now)
        return left is not None and left < next_step_seconds


class StopRequest:
    """SIGTERM/SIGINT ask the loop to stop at the end of the current step.

    Kaggle sends SIGTERM before killing a session; a notebook's "interrupt" button sends
    SIGINT. A second SIGINT raises ``KeyboardInterrupt`` at once for a person who means it.
    Handlers are installed only in the main thread, and only inside :meth:`installed`.
    """

    def __init__(self) -> None:
        self.signal_name: str | None = None

    def __bool__(self) -> bool:
        return self.signal_name is not None

    def _handle(self, signum: int, frame) -> None:
        if signum == signal.SIGINT and self.signal_name == "SIGINT":
            raise KeyboardInterrupt
        self.signal_name = signal.Signals(signum).name

    @contextmanager
    def installed(self) -> Iterator["StopRequest"]:
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = {s: signal.signal(s, self._handle) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            yield self
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
