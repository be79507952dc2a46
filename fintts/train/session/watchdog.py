"""What keeps a session of several processes inside its time, whatever one of them does.

A process that hangs (a device fault, a stuck data loader, a teardown) leaves the others
waiting in their next collective. Two bounds, both from the session's own measurements and
clock, keep that from costing the session:

- **A collective waits a few slow steps, not the session** (:class:`CollectiveBound`). Once
  the steps are measured, every process sets its process group's timeout to
  :data:`GAP_FACTOR` × the longest stretch between two of its votes so far (a step with its
  validation and its checkpoint, whatever the slowest process took), never less than the
  floor (``collective_timeout``; ``auto``: :data:`COLLECTIVE_FLOOR`) nor more than the
  session's limit. A hung peer then makes the main process's collective fail within minutes,
  and it ends the session as failed, pushing its newest checkpoint (``Trainer._fail``).
  Until the steps are measured (set-up, the first step, a phase switch's building) the bound
  is the session's limit, as before.
- **The session's end comes whatever a peer does** (:class:`SessionWatchdog`). The main
  process watches its clock from a thread: when training has not ended half a reserve after
  the time it should have stopped, it takes the session's end out of the main thread's hands:
  it writes the ``failed`` status, pushes the newest verified checkpoint until the clock's
  closing time, gives the lease back, and ends the process (exit code 1). The launcher then
  ends the others.

Neither saves a checkpoint of the step the processes were in: that needs every process's
random streams (a collective), and a process stopped inside a step may hold weights from
two steps (one optimizer group stepped, the next one not). What a hung process costs is
the steps since the last checkpoint, at most ``checkpoint_every``.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator

import torch.distributed as dist

from fintts.train.session.clock import ENDING, SessionClock, StopRequest

#: A collective waits at most this many times the longest stretch between two votes seen so far ...
GAP_FACTOR = 4.0
#: ... and never less than this (``collective_timeout: auto``): room for a first checkpoint, export or validation
#: slower than any stretch measured before it.
COLLECTIVE_FLOOR = 300.0
#: How often the watchdog looks at the clock.
LOOK_EVERY = 0.5
#: The exit code of a process the watchdog ends (``fintts train``'s "training failed").
EXIT_FAILED = 1


def collective_timeout(floor: float, longest_gap: float, limit: float | None) -> float:
    """Seconds a collective may wait: :data:`GAP_FACTOR` × ``longest_gap``, at least ``floor``, at most ``limit``."""
    seconds = max(floor, GAP_FACTOR * longest_gap)
    return seconds if limit is None else min(seconds, limit)


def set_collective_timeout(seconds: float | None) -> None:
    """From now on a collective of this process's group waits at most ``seconds`` (``None``: leave it)."""
    if seconds is None or not (dist.is_available() and dist.is_initialized()):
        return
    from torch.distributed import distributed_c10d  # the private setter lives there (torch >= 2.3)

    setter = getattr(distributed_c10d, "_set_pg_timeout", None)  # torch >= 2.3
    if setter is not None:
        setter(datetime.timedelta(seconds=seconds))


class CollectiveBound:
    """The process group's timeout of one process, following the stretches between its votes (see the module)."""

    def __init__(self, setting: float | str | None, limit: float | None):
        self.floor = COLLECTIVE_FLOOR if setting in ("auto", None) else float(setting)
        #: before anything is measured: the setting, or (``auto``) the session's limit (``None``: torch's default)
        self.initial: float | None = limit if setting == "auto" else setting  # type: ignore[assignment]
        self.limit = limit
        self.current = self.initial
        self.longest = 0.0
        self._last: float | None = None

    def voted(self) -> None:
        """A vote was taken: the stretch since the last one counts, and the timeout follows the longest."""
        now = time.time()
        if self._last is not None:
            self.longest = max(self.longest, now - self._last)
            wanted = collective_timeout(self.floor, self.longest, self.limit)
            if self.current is None or abs(wanted - self.current) > 0.1 * self.current:
                set_collective_timeout(wanted)
                self.current = wanted
        self._last = now

    @contextlib.contextmanager
    def lifted(self) -> Iterator[None]:
        """The initial bound while something unmeasured runs (a phase switch builds new models); then back."""
        set_collective_timeout(self.initial)
        try:
            yield
        finally:
            set_collective_timeout(self.current)
            self._last = time.time()


class SessionOverrun(RuntimeError):
    """The session's end came while training still ran: a process hung, or a step took far longer than measured."""


class SessionWatchdog(threading.Thread):
    """The main process's guard of the session's end (see the module's docstring).

    ``fail(error)`` is the trainer's failure path (status, newest checkpoint pushed, lease);
    ``describe()`` says what each process last reported, for the error. The main thread calls
    :meth:`stand_down` before it ends the session itself; ``False`` means the watchdog has
    taken the end, and the main thread must leave it the process (:meth:`join`).
    """

    def __init__(self, clock: SessionClock, stop: StopRequest, fail: Callable[[BaseException], None],
                 describe: Callable[[], str], log: Callable[[str], None]):
        super().__init__(name="fintts-session-watchdog", daemon=True)
        self.clock, self.stop, self.fail, self.describe, self.log = clock, stop, fail, describe, log
        self._lock = threading.Lock()
        self._state = "watching"  # then "stood-down" (the main thread ends the session) or "fired"

    def fire_time(self) -> float | None:
        """When training is half a reserve late: what is left then pushes the newest checkpoint, not a new one."""
        if self.clock.deadline is None:
            return None
        return self.clock.deadline - self.clock.reserve() / 2

    def stand_down(self) -> bool:
        """The main thread ends the session itself: ``True``, unless the watchdog already took the end."""
        with self._lock:
            if self._state == "fired":
                return False
            self._state = "stood-down"
            return True

    def run(self) -> None:
        while True:
            fire = self.fire_time()
            if fire is None:
                return
            time.sleep(max(0.0, min(LOOK_EVERY, fire - time.time())))
            with self._lock:
                if self._state != "watching" or self.stop.phase == ENDING:
                    return
                if time.time() < self.fire_time():
                    continue
                self._state = "fired"
            self._end()

    def _end(self) -> None:
        error = SessionOverrun(
            f"the session's end is near and training has not stopped: {self.describe()}. The session ends now with its "
            "newest checkpoint; the steps since it are lost"
        )
        self.log(f"stopping: {error}")
        try:
            self.fail(error)
        except BaseException as err:  # whatever went wrong, the process still ends before the session does
            print(f"error while ending the session: {type(err).__name__}: {err}", file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT_FAILED)
