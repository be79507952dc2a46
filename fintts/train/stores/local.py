"""The embedded default store: a folder on this machine (``--store PATH``)."""

from __future__ import annotations

import fcntl
import json
import os
import socket
from pathlib import Path

from fintts.errors import LeaseConflict
from fintts.train.run.layout import WRITER_LOCK
from fintts.train.stores.base import Store


class LocalStore(Store):
    """A directory that is the run. Publishing is a no-op: the checkpoint is already there.

    **One writer.** The writer holds an exclusive ``flock`` on ``writer.lock`` for the whole
    session; the file's text names it, for the message another trainer gets. The kernel
    takes the lock and gives it back when the process ends, however it ends: there is no
    window between checking and writing in which two trainers both win, no stale lock after
    a kill, and releasing can only ever drop this session's own lock. ``--force`` does not
    take a lock that a running process holds: two writers would interleave checkpoints,
    and a lock is only ever held by a process that is running.
    """

    def __init__(self, root: str | Path):
        self.root = Path(root).expanduser().resolve()
        self._lock_fd: int | None = None

    @property
    def url(self) -> str:
        return str(self.root)

    def acquire(self, session_id: str, *, force: bool = False) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / WRITER_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise LeaseConflict(
                f"{self.root} is being trained by process {holder.get('pid', '?')} on {holder.get('host', '?')} "
                f"(session {holder.get('session', '?')}). Stop it first: a running trainer's lock is not taken "
                "over, not even with --force."
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"session": session_id, "pid": os.getpid(), "host": socket.gethostname()}).encode(), 0)
        self._lock_fd = fd

    def release(self, timeout: float | None = None) -> None:
        if self._lock_fd is not None:
            os.ftruncate(self._lock_fd, 0)
            os.close(self._lock_fd)  # closing drops the flock; the file stays, so no other trainer's lock is deleted
            self._lock_fd = None


def _holder(fd: int) -> dict:
    try:
        value = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
