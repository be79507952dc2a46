"""When does this session end, and when must training stop to save in time?

The session starts when its container or process did (:mod:`fintts.train.platform`).
The *reserve* is the time the final checkpoint needs to be saved and uploaded. It is
learned: ``reserve_factor`` × the longest of this run's recent measured save+upload
times, kept in the trainer state so the next session starts with it. Until a run has
measured one, ``initial_reserve`` (at most a quarter of the session) stands in.
"""

from __future__ import annotations

import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator


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
