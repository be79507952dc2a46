"""The Hub store's background worker: when to push, retrying, and never making training wait.

**Schedule.** :meth:`Publisher.publish` returns at once. A *full* push is due for the first
checkpoint of the session, then at most every ``push_every`` seconds, and always for
``final=True``; publishes in between are skipped (the trainer keeps them locally, and the
next due push takes the state of that moment). When nothing was committed for
``heartbeat_every`` seconds and heartbeats are on (the store holds the lease), a small
heartbeat commit is made instead.

**Catch-up, newest first.** While a due push fails with a transient error, the worker retries
with capped exponential backoff plus jitter, honouring ``Retry-After``; training goes on.
Each retry pushes the newest due checkpoint, so after an outage one commit catches up and
the checkpoints in between are skipped.

The commits themselves are the store's (``push`` and ``heartbeat`` callables); this module
only decides when they run and keeps the account of what is due, in flight and failed.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import threading
import time
from pathlib import Path
from typing import Callable

from fintts.train.stores.hub.client import Backoff
from fintts.train.stores.hub.errors import HubError

log = logging.getLogger(__name__)


@dataclasses.dataclass
class Target:
    """A checkpoint due for a full push, with the run's mutable files as they were when it was published."""

    name: str
    snapshot: Path
    final: bool


class Publisher:
    """Runs the store's pushes and heartbeats on one daemon thread."""

    def __init__(
        self,
        *,
        push: Callable[[Target], None],
        heartbeat: Callable[[], None],
        after_push: Callable[[], None],
        classify: Callable[[BaseException], HubError],
        push_every: float,
        heartbeat_every: float,
        backoff: Backoff,
        label: str,
    ):
        self._push, self._heartbeat, self._after_push, self._classify = push, heartbeat, after_push, classify
        self.push_every, self.heartbeat_every, self.backoff, self.label = push_every, heartbeat_every, backoff, label
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._heartbeats = False
        self._target: Target | None = None  # the newest checkpoint due for a full push
        self._inflight: Target | None = None  # the one being pushed now
        self._retry_at = 0.0
        self._last_full_request: float | None = None
        self._last_commit = time.monotonic()
        #: the newest checkpoint handed to :meth:`publish`, due or not.
        self.published: str | None = None
        #: why the last attempt failed (cleared by a success), and why pushing stopped for good.
        self.last_error: str | None = None
        self.fatal: str | None = None

    # -- the trainer's side ------------------------------------------------------------

    def publish(self, name: str, snapshot: Callable[[], Path], *, final: bool) -> None:
        """Note checkpoint ``name``; if a full push is due, queue it with ``snapshot()`` of the mutable files."""
        now = time.monotonic()
        with self._cond:
            self.published = name
            due = (
                final
                or self._target is not None
                or self._last_full_request is None
                or now - self._last_full_request >= self.push_every
            )
            if not due:
                return
            previous = self._target
            self._target = Target(name, snapshot(), final or bool(previous and previous.final))
            self._last_full_request = now
            if previous is not None and previous is not self._inflight:
                shutil.rmtree(previous.snapshot, ignore_errors=True)
            self._ensure_thread()
            self._cond.notify_all()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every due push landed; ``False`` on timeout or when pushing stopped for good."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while (self._target is not None or self._inflight is not None) and self.fatal is None:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return self.fatal is None

    def busy(self) -> set[str]:
        """Checkpoints that must stay on disk: the one being pushed and the one waiting to be."""
        with self._cond:
            return {t.name for t in (self._target, self._inflight) if t is not None}

    def heartbeats(self, on: bool) -> None:
        """Heartbeat commits keep the lease fresh while the store holds it."""
        with self._cond:
            self._heartbeats = on
            if on:
                self._last_commit = time.monotonic()
                self._ensure_thread()
            self._cond.notify_all()

    def committed(self) -> None:
        """A commit landed (any kind): the next heartbeat is due ``heartbeat_every`` from now."""
        with self._cond:
            self._last_commit = time.monotonic()

    def landed(self, target: Target) -> None:
        """``target``'s commit is on the Hub: waiters may go on before the storage tidy-up."""
        with self._cond:
            if self._target is target:
                self._target = None
            self._inflight = None
            self._last_commit = time.monotonic()
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout=5)

    # -- the worker ----------------------------------------------------------------------

    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._stopping = False
            self._thread = threading.Thread(target=self._run, name=f"hub-push-{self.label}", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        failures = 0
        while True:
            with self._cond:
                job = self._next_job()
                while job is None and not self._stopping:
                    self._cond.wait(self._sleep_for())
                    job = self._next_job()
                if self._stopping:
                    return
                if isinstance(job, Target):
                    self._inflight = job
            try:
                if isinstance(job, Target):
                    self._push(job)
                    self.landed(job)
                    self._after_push()
                else:
                    self._heartbeat()
                    self.committed()
            except Exception as err:
                failure = self._classify(err)
                failures += 1
                with self._cond:
                    self.last_error = str(failure)
                    if failure.transient:
                        delay = self.backoff.delay(failures, failure.retry_after)
                        self._retry_at = time.monotonic() + delay
                        (log.warning if failures == 1 else log.info)(
                            "%s: push failed (%s); checkpoints stay local, retrying in %.1fs", self.label, failure, delay
                        )
                    else:
                        self.fatal = str(failure)
                        log.error("%s: pushing stopped: %s", self.label, failure)
            else:
                failures = 0
                with self._cond:
                    self.last_error = None
                    self._retry_at = 0.0
            finally:
                with self._cond:
                    self._inflight = None
                    if isinstance(job, Target) and job is not self._target:
                        shutil.rmtree(job.snapshot, ignore_errors=True)  # pushed, or replaced by a newer target
                    self._cond.notify_all()

    def _next_job(self) -> Target | str | None:
        now = time.monotonic()
        if self.fatal is not None or now < self._retry_at:
            return None
        if self._target is not None:
            return self._target
        if self._heartbeats and now - self._last_commit >= self.heartbeat_every:
            return "heartbeat"
        return None

    def _sleep_for(self) -> float | None:
        now = time.monotonic()
        wakes = []
        if self._retry_at > now:
            wakes.append(self._retry_at - now)
        if self._heartbeats and self.fatal is None:
            wakes.append(self._last_commit + self.heartbeat_every - now)
        return max(0.01, min(wakes)) if wakes else None
