"""``lease.json``: which session writes a Hub run, so two sessions never interleave checkpoints.

The writer commits its lease when it starts, refreshes it with heartbeat commits while it
trains (every full push refreshes it too) and deletes it when it ends. Another session
refuses to start while the lease is fresh, takes over a stale one (its writer died without
releasing), and takes any one with ``--force``.

**Fresh by the Hub's clock alone.** Comparing the writer's heartbeat time with the reader's
clock would let two machines' clocks decide: a reader whose clock runs an hour ahead would
take a live lease, one whose clock runs behind would never take a dead one. Instead the
lease's age is the time since the repo's newest commit as the Hub tells both (the commit's
date and the ``Date`` of the same answer, :meth:`HubClient.head_state`). While a lease
exists only its holder commits (heartbeats, pushes, its release), so the newest commit is
its newest sign of life; a commit made by hand in the meantime only makes the lease look
younger, which errs on the side of refusing (``--force`` then decides). When the Hub does
not say, the lease counts as fresh. ``heartbeat_unix`` stays in the file, for people.

**Slow pushes.** No heartbeat can land while a full push is committing, so the holder
writes a ``timeout`` of at least :data:`LONG_PUSH_FACTOR` times its longest recent push:
a live session is not taken over in the middle of a slow upload. That timeout has a
ceiling, :data:`MAX_LEASE_SHARE` of the session (:data:`MAX_LEASE_TIMEOUT` without a
session limit): after one stalled push, a dead session's lease must not block the next
sessions for hours. Uploads are bounded too (:meth:`.client.HubClient.upload`), so a bounded one fits in it.

**One commit at a time.** :class:`LeaseHolder` is this session's side: it takes and releases
the lease and keeps the branch head, under the commit lock that every commit of the run
(pushes on the publisher's thread, heartbeats on theirs, the caller's take and release) is
made under, each on the head it checked its lease at.

**A rewrite deletes nothing of another writer's.** Freeing deleted checkpoints' storage deletes
every LFS object of the repo that the head does not reference (:meth:`LeaseHolder.free_unreferenced`).
Made while another session writes the run — one that took it with ``--force`` while this one still
ran, or took it after this one's release — it would delete that session's newest files. So a rewrite
first reads the lease at the head and goes on only when nobody holds the run or this session does,
and reads the head again just before the deletion: a head that moved (someone else committed)
deletes nothing. What is left is that writer's to free.

**The lease as others see it.** A caller that does not write the run — ``fintts kaggle run``,
which follows sessions from a laptop — reads who holds it (:func:`lease_now`) and, once Kaggle
says that session's kernel ended, releases its lease for the next session (:func:`release_ended`).
Both live here, beside the lease's own rules, so that ``lease.json`` has one owner.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from huggingface_hub import CommitOperationAdd, CommitOperationDelete

from fintts.errors import LeaseConflict, StoreError
from fintts.train.run.layout import LEASE
from fintts.train.stores.hub.client import HubClient
from fintts.train.stores.hub.errors import LeaseLost

log = logging.getLogger(__name__)

#: A lease's timeout is at least this many times the holder's longest recent push.
LONG_PUSH_FACTOR = 3.0
#: ... but at most this share of the session it is written in,
MAX_LEASE_SHARE = 0.25
#: or this many seconds for a session without a limit.
MAX_LEASE_TIMEOUT = 3 * 3600.0
#: How long release() waits at most for an upload still holding the repo before leaving the lease to expire.
RELEASE_WAIT = 30.0


@dataclasses.dataclass(frozen=True)
class Lease:
    session: str
    host: str
    pid: int
    #: when this session first took the run (ISO 8601, UTC).
    acquired: str
    heartbeat_unix: float
    #: seconds without a heartbeat after which another session may take over.
    timeout: float

    @classmethod
    def at(cls, client: HubClient, revision: str) -> Lease | None:
        """The lease in the run at ``revision`` (``None``: nobody holds the run there)."""
        return cls.parse(client.read(LEASE, revision))

    @classmethod
    def parse(cls, data: bytes | None) -> Lease | None:
        """The lease in ``data``; ``None`` when there is none or it is unreadable (nobody holds the run)."""
        try:
            value: Any = json.loads(data) if data else None
            return cls(
                session=str(value["session"]), host=str(value.get("host", "?")), pid=int(value.get("pid", 0)),
                acquired=str(value.get("acquired", "")), heartbeat_unix=float(value.get("heartbeat_unix", 0.0)),
                timeout=float(value["timeout"]),
            )
        except (ValueError, TypeError, KeyError):
            return None

    def to_bytes(self) -> bytes:
        data = dataclasses.asdict(self) | {"heartbeat": iso(self.heartbeat_unix)}
        return json.dumps(data, indent=1).encode()

    def stale(self, age: float | None) -> bool:
        """Has the holder been silent longer than ``timeout``? ``age``: seconds since its last commit, by the Hub's clock."""
        return age is not None and age >= self.timeout

    def conflict_message(self, url: str, age: float | None) -> str:
        silent = "unknown" if age is None else f"{duration(age)} ago"
        expires = f"in {duration(self.timeout - age)}" if age is not None else f"{duration(self.timeout)} after its last commit"
        return (
            f"{url} is being trained by session {self.session} on {self.host} since {self.acquired} "
            f"(last commit {silent}, by the Hub's clock). If that session is still running, let it finish or stop it. "
            f"If it died, its lease expires {expires}, or take over now with --force."
        )


Retrying = Callable[[str, Callable[[], Any]], Any]


class LeaseHolder:
    """This session's lease on the run and the branch head it commits on, behind the commit lock.

    ``minimum``: the store's ``lease_timeout``. ``push_seconds()``: how long the run's recent
    full pushes took (they lengthen the lease, see the module). ``session_seconds``: the
    session's length as the store's deadline saw it (``None``: no limit).
    """

    def __init__(self, client: HubClient, *, host: str, minimum: float, push_seconds: Callable[[], list[float]]):
        self._client = client
        self.host = host
        self.minimum = minimum
        self._push_seconds = push_seconds
        self.session_seconds: float | None = None
        #: guards the branch head: one commit at a time, each made on the head it checked its lease at.
        self._lock = threading.Lock()
        self.head: str | None = None
        self.lease: Lease | None = None  # ours, while we hold the run
        #: the session that took the lease (kept after the release: a rewrite then still knows our own lease)
        self.session: str | None = None

    # -- the lease's timeout ----------------------------------------------------------------

    def timeout(self) -> float:
        """The lease's timeout: ``minimum``, longer when this run's pushes are slow.

        No heartbeat can land while a full push is committing, so a lease must outlast the
        longest push or a live session would look dead to others during a slow upload; but
        never more than the ceiling (a share of the session, see the module), which
        :meth:`notes` reports when it cuts.
        """
        return max(self.minimum, min(self._wanted_timeout(), self._ceiling()))

    def _wanted_timeout(self) -> float:
        return max([self.minimum] + [LONG_PUSH_FACTOR * s for s in self._push_seconds()])

    def _ceiling(self) -> float:
        return MAX_LEASE_TIMEOUT if self.session_seconds is None else MAX_LEASE_SHARE * self.session_seconds

    def notes(self) -> list[str]:
        """The lease's ceiling, when it cut the timeout this run's slow pushes asked for."""
        wanted, used = self._wanted_timeout(), self.timeout()
        if wanted <= used:
            return []
        return [
            f"the lease on {self._client.url} times out after {duration(used)} (at most {MAX_LEASE_SHARE:.0%} of the session), "
            f"not {LONG_PUSH_FACTOR:g} × this run's slowest recent push ({duration(wanted)}): if this session dies, the next "
            f"one may take the run over {duration(used)} after its last commit"
        ]

    # -- take and release -------------------------------------------------------------------

    def take(self, session_id: str, force: bool, retrying: Retrying) -> None:
        """Commit this session's lease, taking over a stale one (or any with ``force``); or raise :class:`LeaseConflict`."""
        url = self._client.url

        def take() -> Any:
            head = self._client.head_state()
            holder = Lease.at(self._client, head.sha)
            if holder is not None and holder.session != session_id:
                if not holder.stale(head.age) and not force:
                    raise LeaseConflict(holder.conflict_message(url, head.age))
                log.warning(
                    "%s: taking over the lease of session %s on %s (no commit for %s by the Hub's clock%s)",
                    url, holder.session, holder.host, "?" if head.age is None else duration(head.age),
                    ", forced" if force else "",
                )
            acquired = holder.acquired if holder is not None and holder.session == session_id else iso(time.time())
            lease = Lease(session_id, self.host, os.getpid(), acquired, time.time(), self.timeout())
            info = self._client.commit(
                [CommitOperationAdd(LEASE, lease.to_bytes())], f"lease: session {session_id} on {self.host}", parent=head.sha
            )
            return info, lease

        with self._lock:
            info, self.lease = retrying("take the lease", take)
            self.head, self.session = info.oid, session_id

    def release(self, timeout: float | None, small_files: Callable[[str], list[Any]], retrying: Retrying) -> bool:
        """Delete the lease in a commit that also carries ``small_files(head)``, within ``timeout`` seconds (the
        caller bounds the client by them too); whether that commit landed.

        A commit still holding the repo is waited for at most :data:`RELEASE_WAIT` (and
        ``timeout``); then the lease is left to expire, which the warning says.
        """
        if self.lease is None:
            return False
        patience = RELEASE_WAIT if timeout is None else max(0.0, min(RELEASE_WAIT, timeout))
        expires = duration(self.lease.timeout)
        if not self._lock.acquire(timeout=patience):
            log.warning("%s: a commit is still being made; the lease stays and expires in %s", self._client.url, expires)
            return False
        try:
            session = self.lease.session
            retrying("release the lease", lambda: self._commit(
                lambda head: [CommitOperationDelete(LEASE)] + small_files(head), f"release: session {session} ended"
            ))
        except StoreError as err:
            log.warning("%s: could not release the lease (%s); it expires in %s", self._client.url, err, expires)
            return False
        finally:
            self.lease = None
            self._lock.release()
        return True

    def refreshed(self) -> Lease | None:
        """Our lease with a new heartbeat and timeout, for the next commit to carry (``None`` when we hold none)."""
        lease = self.lease
        if lease is not None:
            self.lease = lease = Lease(lease.session, lease.host, lease.pid, lease.acquired, time.time(), self.timeout())
        return lease

    # -- commits ---------------------------------------------------------------------------

    def checked_head(self) -> str:
        """The branch head, with the lease checked on it."""
        with self._lock:
            return self._check(self._client.head())

    def commit(self, operations: Callable[[str], list[Any]], message: str) -> Any:
        """Commit ``operations(head)`` on the head, once no other commit is being made and the lease is still ours."""
        with self._lock:
            return self._commit(operations, message)

    def free_unreferenced(self, patience: float | None = None) -> int:
        """Free the LFS objects the head no longer references, when the run is ours to rewrite; return bytes freed.

        It rewrites history, so no commit of ours may land meanwhile (the commit lock, waited for at most
        ``patience`` seconds: ``None``, as long as it takes); and it deletes nothing while another session writes
        the run (see the module): the lease is read at the head first, and the head read again just before the
        deletion. A run held by another session, a head that moved, or a lock not had in time, frees nothing (0).
        """
        if not self._lock.acquire(timeout=-1 if patience is None else max(0.0, patience)):
            return 0
        try:
            head = self._client.head()
            if not self._rewritable(head):
                return 0
            doomed = self._client.unreferenced(head)
            if not doomed:
                return 0
            if self._client.head() != head:
                log.info("%s: the run moved while its storage was being listed; nothing freed this time", self._client.url)
                return 0
            return self._client.delete_lfs(doomed)
        finally:
            self._lock.release()

    def _rewritable(self, head: str) -> bool:
        """May this session rewrite the run at ``head``: nobody's lease is there, or its own (held or just released)?"""
        holder = Lease.at(self._client, head)
        if holder is None or holder.session == self.session:
            return True
        log.info("%s: session %s on %s holds the run now; its storage is left for it to free", self._client.url,
                 holder.session, holder.host)
        return False

    def _commit(self, operations: Callable[[str], list[Any]], message: str) -> Any:
        head = self._check(self._client.head())
        info = self._client.commit(operations(head), message, parent=head)
        self.head = info.oid
        return info

    def _check(self, head: str) -> str:
        """``head``, after making sure the lease is still ours if the branch moved since we last looked."""
        if self.lease is None or head == self.head:
            return head
        holder = Lease.at(self._client, head)
        if holder is None or holder.session != self.lease.session:
            raise LeaseLost(
                f"session {holder.session if holder else '(none)'} on {holder.host if holder else '?'} took over "
                f"{self._client.url}; this session stopped pushing"
            )
        self.head = head
        return head


def lease_now(client: HubClient) -> Lease | None:
    """Who holds the run at the branch head now (``None``: nobody); a read, for a caller that does not write the run."""
    return Lease.at(client, client.head())


def release_ended(client: HubClient, ended: Callable[[Lease], bool], message: Callable[[Lease], str]) -> Lease | None:
    """Delete the lease at the head when ``ended(lease)``: its holder is known to be gone (Kaggle said its kernel
    ended), so the next session need not wait for the lease to expire. The lease released, or ``None``.

    The delete is committed on the head the lease was read at (``parent_commit``: "the commit will fail if
    ``revision`` does not point to ``parent_commit``", huggingface_hub 2.4 ``HfApi.create_commit``), so a lease
    taken by a new session in the meantime is never deleted: the commit is refused instead, and the caller says
    the lease stays.
    """
    head = client.head()
    lease = Lease.at(client, head)
    if lease is None or not ended(lease):
        return None
    client.commit([CommitOperationDelete(LEASE)], message(lease), parent=head)
    return lease


def iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 60} min {seconds % 60} s" if seconds >= 60 else f"{seconds} s"
