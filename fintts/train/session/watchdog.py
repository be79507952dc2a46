"""What keeps a session of several processes inside its time, whatever one of them does.

A process that hangs (a device fault, a stuck loader, a teardown) or ends without a word (the OOM killer)
leaves the others waiting in their next collective: NCCL need not notice a peer gone. Three bounds keep that
from costing the session: a collective waits a few slow steps, not the session (:class:`CollectiveBound`), and
minutes before any step is measured (:func:`first_timeout`, the process group's first timeout); the launcher,
which sees a process end, tells the main one at once (:data:`PEER_EXITS_VARIABLE`); and the session's end
comes whatever a peer does. The last two are :class:`SessionWatchdog`: the main process's clock and the
launcher's word watched from a thread, which ends the session as failed with its newest checkpoint pushed.
None saves the step under way: that needs every process (a collective). The numbers are in the table of
docs/sessions-and-stores.md; this module imports nothing of the session, which it is given as a :class:`Watched`.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

import torch.distributed as dist
from accelerate.utils import InitProcessGroupKwargs

from fintts.train.session.clock import ENDING, SessionClock, StopRequest

#: A collective waits at most this many times the longest stretch between two votes seen so far ...
GAP_FACTOR = 4.0
#: ... and never less than this (``collective_timeout: auto``): room for a first checkpoint, export or validation
#: slower than any stretch measured before it.
COLLECTIVE_FLOOR = 300.0
#: Before any stretch is measured (``collective_timeout: auto``): what one process may wait for another in the process
#: group's start, its first collectives and first steps. Room for the slowest process's start-up, model building and
#: first step, and for a download the task makes in the main process only while the others wait in the models' first
#: broadcast (a voice's pretrained discriminator: at most 5 min, docs/sessions-and-stores.md). Not the session's limit:
#: a process lost in its first minute under NCCL, which need not notice a peer gone, would cost the whole session.
FIRST_COLLECTIVE = 600.0
#: How often the watchdog looks at the clock.
LOOK_EVERY = 0.5
#: The exit code of a process the watchdog ends (``fintts train``'s "training failed").
EXIT_FAILED = 1
#: Given by the launcher to the main process only: a file it writes (whole, at once) when another process of the
#: session has ended with an error, saying which and how; the watchdog then ends the session at once.
PEER_EXITS_VARIABLE = "FINTTS_PEER_EXITS"


def first_timeout(setting: float | str | None, limit: float | None) -> float:
    """Seconds a collective may wait before any stretch between votes is measured: ``collective_timeout`` when set,
    else (``auto``) :data:`FIRST_COLLECTIVE`, at most the session's ``limit`` (``None``: no limit)."""
    if setting not in ("auto", None):
        return float(setting)  # type: ignore[arg-type]
    return FIRST_COLLECTIVE if limit is None else min(FIRST_COLLECTIVE, limit)


def collective_timeout(floor: float, longest_gap: float, limit: float | None) -> float:
    """Seconds a collective may wait: :data:`GAP_FACTOR` × ``longest_gap``, at least ``floor``, at most ``limit``."""
    seconds = max(floor, GAP_FACTOR * longest_gap)
    return seconds if limit is None else min(seconds, limit)


def set_collective_timeout(seconds: float) -> None:
    """From now on a collective of this process's group waits at most ``seconds``."""
    if not (dist.is_available() and dist.is_initialized()):
        return
    from torch.distributed import distributed_c10d  # the private setter lives there (torch >= 2.3)

    setter = getattr(distributed_c10d, "_set_pg_timeout", None)  # torch >= 2.3
    if setter is not None:
        setter(datetime.timedelta(seconds=seconds))


def process_group_settings(bound: CollectiveBound) -> list[InitProcessGroupKwargs]:
    """The process group's timeout until the steps are measured (:func:`first_timeout`), for its start (the wait for
    every process to join); set again once it has started (:meth:`CollectiveBound.joined`)."""
    return [InitProcessGroupKwargs(timeout=datetime.timedelta(seconds=bound.initial))]


class CollectiveBound:
    """The process group's timeout of one process, following the stretches between its votes (see the module)."""

    def __init__(self, setting: float | str | None, limit: float | None):
        self.floor = COLLECTIVE_FLOOR if setting in ("auto", None) else float(setting)
        #: before anything is measured (:func:`first_timeout`)
        self.initial = first_timeout(setting, limit)
        self.limit = limit
        self.current = self.initial
        self.longest = 0.0
        self._last: float | None = None

    def joined(self) -> None:
        """The process group has started: its collectives wait :attr:`initial` seconds. Set here, as accelerate passes
        on a timeout only where it differs from its own default, 600 s whatever the backend (accelerate 1.15.0,
        utils/dataclasses.py: ``KwargsHandler.to_kwargs`` keeps what differs from ``InitProcessGroupKwargs()``, whose
        ``__post_init__`` makes it 600 s for its default backend, nccl): gloo's group would keep torch's 30 min."""
        set_collective_timeout(self.initial)

    def voted(self) -> None:
        """A vote was taken: the stretch since the last one counts, and the timeout follows the longest."""
        now = time.time()
        if self._last is not None:
            self.longest = max(self.longest, now - self._last)
            wanted = collective_timeout(self.floor, self.longest, self.limit)
            if abs(wanted - self.current) > 0.1 * self.current:
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


class PeerExited(RuntimeError):
    """Another process of the session ended with an error, and this one would wait for it in its next collective."""


class Watched(Protocol):
    """What the watchdog ends: :class:`fintts.train.session.ending.SessionEnd` (not imported: it is made of the
    session, whose facts are built with :func:`process_group_settings`)."""

    def where(self) -> str:
        """Where training stands, for the watchdog's error."""

    def overrun(self, error: BaseException) -> None:
        """End the session as failed (status, newest checkpoint pushed, lease), from the watchdog's thread."""


class SessionWatchdog(threading.Thread):
    """The main process's guard of the session's end (see the module's docstring).

    It ends ``watched`` (:meth:`Watched.overrun`) when the clock says training is late, or as soon as
    ``peer_exits`` (a file the launcher writes: :data:`PEER_EXITS_VARIABLE`) says another process
    ended, with why in the error. The main thread calls :meth:`stand_down` before it ends the session
    itself; ``False`` means the watchdog has taken the end, and the main thread must leave it the
    process (:meth:`join`).
    """

    def __init__(self, clock: SessionClock, stop: StopRequest, watched: Watched, log: Callable[[str], None],
                 peer_exits: Path | None = None):
        super().__init__(name="fintts-session-watchdog", daemon=True)
        self.clock, self.stop, self.watched, self.log, self.peer_exits = clock, stop, watched, log, peer_exits
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
            if fire is None and self.peer_exits is None:
                return
            time.sleep(LOOK_EVERY if fire is None else max(0.0, min(LOOK_EVERY, fire - time.time())))
            with self._lock:
                if self._state != "watching" or self.stop.phase == ENDING:
                    return
                error = self._why_end()
                if error is None:
                    continue
                self._state = "fired"
            self._end(error)

    def _why_end(self) -> BaseException | None:
        """Why the session must end now (``None``: it need not): another process ended, or training is late."""
        if self.peer_exits is not None and self.peer_exits.is_file():
            return PeerExited(
                f"{self.peer_exits.read_text().strip()}; the others would wait for it in their next collective. The session "
                "ends now with its newest checkpoint; the steps since it are lost"
            )
        fire = self.fire_time()
        if fire is not None and time.time() >= fire:
            return SessionOverrun(
                f"the session's end is near and training has not stopped: {self.watched.where()}. The session ends now with "
                "its newest checkpoint; the steps since it are lost"
            )
        return None

    def _end(self, error: BaseException) -> None:
        self.log(f"stopping: {error}")
        try:
            self.watched.overrun(error)
        except BaseException as err:  # whatever went wrong, the process still ends before the session does
            print(f"error while ending the session: {type(err).__name__}: {err}", file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT_FAILED)


def start(watched: Watched, *, clock: SessionClock, stop: StopRequest, log: Callable[[str], None], world: int) -> SessionWatchdog | None:
    """With several processes, the main one's clock and the launcher's word (:data:`PEER_EXITS_VARIABLE`) watched from
    a thread (started here); ``None`` with one (a single process may be the notebook's own kernel, which the watchdog
    would end), or with neither a limit nor a launcher of ours (``torchrun``)."""
    told = os.environ.get(PEER_EXITS_VARIABLE)
    if world > 1 and (clock.end is not None or told):
        watchdog = SessionWatchdog(clock, stop, watched, log, Path(told) if told else None)
        watchdog.start()
        return watchdog
    return None


def own_end(watchdog: SessionWatchdog | None) -> None:
    """The main thread ends the session, unless the watchdog took the end: then it leaves it the process."""
    if watchdog is not None and not watchdog.stand_down():
        watchdog.join()


def where(step: int, began: float | None, mean_step: float) -> str:
    """Where training stands, for the watchdog's error: ``step`` done, the next one ``began`` (``None``: not yet)."""
    if began is None:
        return "the session was still setting up"
    return (f"step {step + 1} began {time.time() - began:.0f} s ago"
            + (f" (steps took {mean_step:.1f} s)" if mean_step else "") + ": a process hung, or this step is far slower than measured")
