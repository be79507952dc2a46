"""When does this session end, and when must training stop to save in time?

The session starts when its container or process did (:mod:`fintts.train.machine.platform`).
The *reserve* is the time the final checkpoint needs to be saved and uploaded. It is
learned: ``reserve_factor`` × the longest of this run's recent measured save+upload
times, kept in the trainer state so the next session starts with it. Until a run has
measured one, ``initial_reserve`` (at most a quarter of the session) stands in. The reserve
never exceeds :data:`MAX_RESERVE_SHARE` of the session either: one slow push (a stalled Hub)
would otherwise take the better part of every later session for itself. When the ceiling
bites, :meth:`SessionClock.ceiling_note` says so for the session's summary.

The session's *end* (its limit) is a hard one: on Kaggle the container is killed there. The
last part of the session is planned backwards from it: the final wait for the store gives
up at :meth:`SessionClock.closing_time`, leaving ``CLOSING`` seconds (at most half the
safety margin) to print the summary and release the lease, which are bounded by the end too.

Signals (:class:`StopRequest`) are handled from the session's start to its end, never by
dying half-way: while the session sets up (taking the lease, downloading the checkpoint) a
signal aborts the set-up at once, which then gives the lease back and changes nothing;
while it trains, a signal stops training at the end of the current step (a second Ctrl-C
aborts); while it ends (the final save, the wait for the upload, releasing the lease), a
signal only cuts the wait for the upload short, so the checkpoint stays safe on this disk
and the summary says how to push it.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from fintts.train.machine.platform import PLATFORM_LIMITS, detect_platform, session_start

#: Seconds before the end at which the final wait gives up at most (less for short sessions: half the margin).
CLOSING = 30.0
#: The reserve is at most this share of the session, however slow the run's pushes were.
MAX_RESERVE_SHARE = 0.25


def hms(seconds: float) -> str:
    """``seconds`` as ``h:mm:ss``, how fintts shows a duration to a person."""
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def in_words(seconds: float) -> str:
    """``seconds`` rounded as a person says a length of time: ``90 s``, ``15 min``, ``2.5 h``, ``12 h``.

    Session limits and estimates are read at a glance; ``0.0333333 h`` is two minutes to no one.
    """
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    hours = seconds / 3600
    return f"{hours:.0f} h" if hours >= 10 or hours == round(hours) else f"{hours:.1f} h"


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
    def end(self) -> float | None:
        """The session's hard end (``time.time()``), ``None`` without a limit."""
        return None if self.limit is None else self.start + self.limit

    def _margin(self) -> float:
        return min(self.margin, 0.05 * self.limit) if self.limit is not None else 0.0

    @property
    def deadline(self) -> float | None:
        """When the reserve for the final save and upload must start (training's own deadline)."""
        if self.end is None:
            return None
        return self.end - self._margin()

    def closing_time(self) -> float | None:
        """When the final wait for the store must give up, so the summary and the lease's release fit before the end."""
        if self.end is None:
            return None
        return self.end - min(CLOSING, 0.5 * self._margin())

    def left(self, slack_share: float = 0.5) -> float | None:
        """Seconds to the end, less ``slack_share`` of the closing time (kept for exiting); ``None`` without a limit."""
        if self.end is None:
            return None
        return max(0.0, self.end - slack_share * (self.end - self.closing_time()) - time.time())

    def reserve(self) -> float:
        if self.limit is None:
            return self._wanted_reserve()
        return min(self._wanted_reserve(), MAX_RESERVE_SHARE * self.limit)

    def _wanted_reserve(self) -> float:
        if self.measured:
            return self.reserve_factor * max(self.measured[-5:])
        return 0.0 if self.limit is None else self.initial_reserve

    def ceiling_note(self) -> str | None:
        """What the reserve's ceiling cut, for the session's summary; ``None`` when it did not bite."""
        wanted = self._wanted_reserve()
        if self.limit is None or not self.measured or wanted <= self.reserve():
            return None
        return (
            f"the reserve for the final save and upload is capped at {MAX_RESERVE_SHARE:.0%} of the session "
            f"({_minutes(self.reserve())} of {_minutes(self.limit)}); {self.reserve_factor:g} × the slowest recent one "
            f"({_minutes(max(self.measured[-5:]))}) would be {_minutes(wanted)}. If the final upload is that slow again, its "
            "checkpoint stays on this disk and the summary says how to push it"
        )

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


def session_clock(cfg: Any, *, own_process: bool = False) -> tuple[SessionClock, str]:
    """The clock of a session with the train settings ``cfg``, and where its start came from (for the summary).

    The launcher builds the same clock as its processes (and hands them its start), so it knows the
    session's end they keep to, and can end what outlives it.
    """
    platform = detect_platform()
    start, how = session_start(platform, own_process=own_process)
    limit = PLATFORM_LIMITS.get(platform) if cfg.budget == "auto" else cfg.budget
    clock = SessionClock(
        start=start, limit=limit, margin=cfg.safety_margin or 0.0, reserve_factor=cfg.reserve_factor,
        initial_reserve=cfg.initial_reserve or 0.0,
    )
    return clock, how


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 120 else f"{seconds:.0f} s"


class SessionInterrupted(KeyboardInterrupt):
    """A signal arrived while the session was setting up; nothing was trained or changed."""

    def __init__(self, signal_name: str):
        super().__init__(f"stopped by {signal_name} before training began; the run is unchanged")
        self.signal_name = signal_name


#: The phases of a session, for :class:`StopRequest`.
SETUP, TRAINING, ENDING = "setup", "training", "ending"


class StopRequest:
    """SIGTERM/SIGINT during a session, handled as its :attr:`phase` needs (see the module's docstring).

    Kaggle sends SIGTERM before killing a session; a notebook's "interrupt" button sends
    SIGINT. While training, a second SIGINT raises ``KeyboardInterrupt`` at once for a person
    who means it. Handlers are installed only in the main thread, and only inside :meth:`installed`.
    """

    def __init__(self) -> None:
        self.signal_name: str | None = None
        self.phase = SETUP
        #: signals received so far (a wait notices a new one by this count).
        self.received = 0

    def __bool__(self) -> bool:
        return self.signal_name is not None

    def _handle(self, signum: int, frame) -> None:
        name = signal.Signals(signum).name
        self.received += 1
        if self.phase == SETUP:
            self.signal_name = name
            raise SessionInterrupted(name)
        if self.phase == TRAINING:
            if signum == signal.SIGINT and self.signal_name == "SIGINT":
                raise KeyboardInterrupt
            self.signal_name = name
        else:
            self.signal_name = self.signal_name or name

    @contextmanager
    def installed(self) -> Iterator[StopRequest]:
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = {s: signal.signal(s, self._handle) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            yield self
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
