"""When does this session end, and when must training stop to save in time?

The session starts when its container or process did (:mod:`fintts.train.machine.platform`), and its end
is a hard one (Kaggle kills the container there), so its last part is planned backwards from it: the
*reserve* for the final save and upload is learned (``reserve_factor`` × the run's slowest recent one,
kept across sessions; ``initial_reserve`` until one is measured) and capped at :data:`MAX_RESERVE_SHARE`
of the session, and the final wait gives up at :meth:`SessionClock.closing_time` so the summary and the
lease's release still fit. Nothing may eat the reserve: a validation runs only when it ends before the
reserve begins (:meth:`SessionClock.validation_fits`, from how long the run's validations took), since
one under way cannot be cut short. Signals (:class:`StopRequest`) are handled by the session's phase, never by
dying half-way. The numbers and what each signal does are in docs/sessions-and-stores.md.
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
    #: seconds that recent validations took, newest last (kept across sessions, as ``measured`` is).
    validations: list[float] = field(default_factory=list)

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

    def record_validation(self, seconds: float) -> None:
        self.validations = (self.validations + [round(seconds, 3)])[-10:]

    def validation_seconds(self) -> float:
        """How long the next validation may take: ``reserve_factor`` × the slowest recent one, as for the reserve (a busy
        machine slows one down); never measured, as long as the reserve itself."""
        if self.validations:
            return self.reserve_factor * max(self.validations[-5:])
        return self.reserve()

    def validation_fits(self, now: float | None = None) -> bool:
        """Would a validation started now end before the reserve for the final save and upload begins?

        A validation under way cannot be cut short (the task's ``evaluate`` is one call), so one that
        would run into the reserve is not started: on a busy machine one ran past the session's end,
        and the final checkpoint was never pushed.
        """
        left = self.remaining(now)
        return left is None or left >= self.validation_seconds()

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
    """SIGTERM/SIGINT during a session, handled as its :attr:`phase` needs.

    Kaggle sends SIGTERM before killing a session; a notebook's "interrupt" button sends SIGINT. While
    the session sets up, a signal aborts the set-up at once (it then gives the lease back and changes
    nothing); while it trains, it stops training at the end of the current step (a second SIGINT raises
    ``KeyboardInterrupt`` at once for a person who means it); while it ends, it only cuts the wait for the
    upload short, so the checkpoint stays safe on this disk. Handlers are installed only in the main
    thread, and only inside :meth:`installed`.
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
