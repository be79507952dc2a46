"""The embedded default store: a folder on this machine (``--store PATH``)."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

from fintts.train.stores.base import LeaseConflict, Store

LOCK = "writer.lock"


class LocalStore(Store):
    """A directory that is the run. Publishing is a no-op: the checkpoint is already there.

    A lock file naming the writing process keeps two trainers of one machine from
    interleaving checkpoints; a lock whose process is gone is taken over.
    """

    def __init__(self, root: str | Path):
        self.root = Path(root).expanduser().resolve()
        self._locked = False

    @property
    def url(self) -> str:
        return str(self.root)

    def acquire(self, session_id: str, *, force: bool = False) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        lock = self.root / LOCK
        try:
            holder = json.loads(lock.read_text())
        except (FileNotFoundError, ValueError):
            holder = None
        if holder and not force and holder.get("host") == socket.gethostname() and _alive(holder.get("pid")):
            raise LeaseConflict(
                f"{self.root} is being trained by process {holder.get('pid')} (session {holder.get('session')}). "
                "Stop it first, or pass --force if it is not really running."
            )
        lock.write_text(json.dumps({"session": session_id, "pid": os.getpid(), "host": socket.gethostname()}))
        self._locked = True

    def release(self) -> None:
        if self._locked:
            (self.root / LOCK).unlink(missing_ok=True)
            self._locked = False


def _alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
