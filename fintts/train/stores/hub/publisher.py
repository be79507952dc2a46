"""The Hub store's background worker: when to push, retrying, and never making training wait.

**Schedule.** :meth:`Publisher.publish` returns at once. A *full* push is due for the first
checkpoint of the session, then at most every ``push_every`` seconds, and always for
``final=True``; publishes in between are skipped (the trainer keeps them locally, and the
next due push takes the state of that moment). When nothing was committed for
``heartbeat_every`` seconds and heartbeats are on (the store holds the lease), a small
heartbeat commit is made, on a thread of its own: a push that is uploading never keeps
the lease from being refreshed (the store holds its commit lock only for commits).

**Catch-up, newest first.** While a due push fails with a transient error, the worker retries
with capped exponential backoff plus jitter, honouring ``Retry-After``; training goes on.
Each retry pushes the newest due checkpoint, so after an outage one commit catches up and
the checkpoints in between are skipped.

**A refusal is not the end.** A push the Hub refuses (400, 413, 422, a revoked token) is
retried too, after the longest backoff wait, because the next checkpoint's commit is
another commit (a new card, other files) and may well be accepted; stopping for good would
leave hours of training with nothing durable. Every refusal is logged as a warning, and so
is a transient failure when it starts and then every ``WARN_EVERY`` seconds while it lasts,
so a person sees it however long the session runs. Only a lost lease (another session took
the run) stops pushing for good. A final wait does not outlast a refusal of the very
checkpoint it waits for: it returns ``False`` at once, and the summary says why.

The commits themselves are the store's (``push`` and ``heartbeat`` callables); this module
only decides when they run and keeps the account of what is due, in flight and failed.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fintts.train.retry import Backoff
from fintts.train.stores.hub.errors import HubDeadline, HubError, HubUnexpected, LeaseLost

log = logging.getLogger(__name__)

#: While a push keeps failing transiently, a warning at most this often (seconds); the first failure always warns.
WARN_EVERY = 600.0


@dataclasses.dataclass
class Target:
    """A checkpoint due for a full push, with the run's mutable files as they were when it was published."""

    name: str
    #: ``None`` when the copy failed (a full disk): the push carries the checkpoint and ``latest`` only.
    snapshot: Path | None
    final: bool

    def discard(self) -> None:
        if self.snapshot is not None:
            shutil.rmtree(self.snapshot, ignore_errors=True)


class Publisher:
    """Runs the store's pushes and heartbeats on one daemon thread."""

    def __init__(
        self,
        *,
        push: Callable[[Target], None],
        heartbeat: Callable[[], None],
        after_push: Callable[[Target], None],
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
        self._beat_thread: threading.Thread | None = None
        self._beat_retry_at = 0.0
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
        self._refused: Target | None = None  # the target whose last attempt the Hub refused
        self._warned_at = float("-inf")

    # -- the trainer's side ------------------------------------------------------------

    def due(self, final: bool = False) -> bool:
        """Would :meth:`publish` queue a full push now?"""
        with self._cond:
            return self._due(final, time.monotonic())

    def _due(self, final: bool, now: float) -> bool:
        return (
            final
            or self._target is not None
            or self._last_full_request is None
            or now - self._last_full_request >= self.push_every
        )

    def publish(self, name: str, snapshot: Callable[[], Path | None], *, final: bool) -> None:
        """Note checkpoint ``name``; if a full push is due, queue it with ``snapshot()`` of the mutable files."""
        now = time.monotonic()
        with self._cond:
            self.published = name
            if not self._due(final, now):
                return
            previous = self._target
            self._target = Target(name, snapshot(), final or bool(previous and previous.final))
            self._last_full_request = now
            if previous is not None and previous is not self._inflight:
                previous.discard()
            self._ensure_thread()
            self._cond.notify_all()

    def wait(self, timeout: float | None = None, interrupted: Callable[[], bool] = lambda: False) -> bool:
        """Block until every due push landed; ``False`` on timeout, on ``interrupted()``, when the Hub refused
        the checkpoint waited for, or when pushing stopped for good."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._target is not None or self._inflight is not None:
                if self.fatal is not None or (self._refused is not None and self._refused is self._target):
                    return False
                remaining = None if deadline is None else deadline - time.monotonic()
                if (remaining is not None and remaining <= 0) or interrupted():
                    return False
                self._cond.wait(0.2 if remaining is None else min(remaining, 0.2))  # short, so a signal is noticed
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
                if self._beat_thread is None or not self._beat_thread.is_alive():
                    self._stopping = False
                    self._beat_thread = threading.Thread(target=self._beat, name=f"hub-heartbeat-{self.label}", daemon=True)
                    self._beat_thread.start()
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

    def close(self, timeout: float = 5.0) -> None:
        """Stop the worker; a push still running (a stalled Hub) is left behind on its daemon thread after ``timeout``."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            threads = [t for t in (self._thread, self._beat_thread) if t is not None]
        end = time.monotonic() + max(0.0, timeout)
        for thread in threads:
            thread.join(timeout=max(0.0, end - time.monotonic()))

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
                self._inflight = job
            try:
                self._push(job)
                self.landed(job)
                self._after_push(job)
            except Exception as err:
                failure = self._failure(err)
                failures += 1
                with self._cond:
                    self._failed(job, failure, failures)
            else:
                failures = 0
                with self._cond:
                    self.last_error = None
                    self._refused = None
                    self._retry_at = 0.0
            finally:
                with self._cond:
                    self._inflight = None
                    if job is not self._target:
                        job.discard()  # pushed, or replaced by a newer target
                    self._cond.notify_all()

    def _beat(self) -> None:
        """The heartbeat thread: a small commit whenever nothing was committed for ``heartbeat_every`` seconds."""
        failures = 0
        while True:
            with self._cond:
                while not self._stopping and not self._beat_due():
                    self._cond.wait(self._beat_sleep())
                if self._stopping:
                    return
            try:
                self._heartbeat()
                self.committed()
            except Exception as err:
                failures += 1
                failure = self._failure(err)
                with self._cond:
                    self._failed("heartbeat", failure, failures)
            else:
                failures = 0
                with self._cond:
                    self._beat_retry_at = 0.0

    def _failure(self, err: BaseException) -> HubError:
        """``err`` classified; an error in classifying it is an unexpected failure too, tried again: the thread that
        pushes must outlive anything a push raises, or the session's checkpoints would stop reaching the Hub unsaid."""
        try:
            return self._classify(err)
        except Exception as bug:
            log.exception("%s: describing a failed push raised %s", self.label, type(bug).__name__)
            return HubUnexpected(f"unexpected {type(err).__name__} (describing it failed: {type(bug).__name__}); it is tried again")

    def _beat_due(self) -> bool:
        now = time.monotonic()
        return (
            self._heartbeats and self.fatal is None and now >= self._beat_retry_at
            and now - self._last_commit >= self.heartbeat_every
        )

    def _beat_sleep(self) -> float | None:
        if not self._heartbeats or self.fatal is not None:
            return None
        now = time.monotonic()
        return max(0.01, self._beat_retry_at - now, self._last_commit + self.heartbeat_every - now)

    def _failed(self, job: Target | str, failure: HubError, failures: int) -> None:
        """Account for a failed push or heartbeat (under the lock): retry later, and say so where a person looks."""
        what = "push" if isinstance(job, Target) else "heartbeat"
        if isinstance(failure, HubDeadline):  # the session is ending: keep the reason the push had not landed before
            self.last_error = self.last_error or f"{what} not sent: {failure}"
            self._retry_later(job, time.monotonic() + 3600.0)
            return
        self.last_error = f"{what} failed: {failure}"
        if isinstance(failure, LeaseLost):
            self.fatal = str(failure)
            log.error("%s: pushing stopped: %s", self.label, failure)
            return
        now = time.monotonic()
        if failure.transient:
            delay = self.backoff.delay(failures, failure.retry_after)
            loud = failures == 1 or now - self._warned_at >= WARN_EVERY
            (log.warning if loud else log.info)(
                "%s: %s failed (%s); checkpoints stay on this disk, retrying in %.0fs", self.label, what, failure, delay
            )
        else:
            delay = max(self.backoff.cap, failure.retry_after or 0.0)
            loud = True
            if isinstance(job, Target):
                self._refused = job
            log.warning(
                "%s: the Hub refused the %s (%s); checkpoints stay on this disk. Trying again in %.0fs with the newest "
                "checkpoint; if it keeps failing, fix the cause and run `fintts push` by hand", self.label, what, failure, delay,
            )
        if loud:
            self._warned_at = now
        self._retry_later(job, now + delay)

    def _retry_later(self, job: Target | str, at: float) -> None:
        """A failed heartbeat delays the next heartbeat only; a failed push, the next push."""
        if isinstance(job, Target):
            self._retry_at = at
        else:
            self._beat_retry_at = at

    def _next_job(self) -> Target | None:
        if self.fatal is not None or time.monotonic() < self._retry_at:
            return None
        return self._target

    def _sleep_for(self) -> float | None:
        now = time.monotonic()
        return max(0.01, self._retry_at - now) if self._retry_at > now else None


def read_pushes(path: Path) -> list[dict[str, Any]]:
    """The run's recent push records (``pushes.json``); a file of another shape is treated as absent, with a warning.

    The records only size the lease's timeout from how long pushes take, so a file edited by
    hand or written by another tool must never stop a push: the next push writes a new one.
    """
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return []
    except (ValueError, OSError):
        data = None
    if isinstance(data, list) and all(
        isinstance(p, dict) and isinstance(p.get("seconds"), (int, float)) and not isinstance(p.get("seconds"), bool) for p in data
    ):
        return data
    log.warning("%s is not a list of push records ({\"seconds\": …}); treating it as absent (the next push writes a new one)", path)
    return []
