"""What this session knows of its run on the Hub, shared by the caller's thread and the publisher's.

The checkpoints the Hub holds, what its ``latest`` names, the keep-last rule the next full push
applies there, and the run's recent pushes (``pushes.json``, which size the lease's timeout):
read by the trainer's thread (``pending``, ``prune``, ``describe``) and written by the push
thread after each commit. One lock guards them all, held only to read or write these fields
(never while talking to the Hub or taking another lock).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from fintts.train.run import checkpoint as ckpt
from fintts.train.stores.hub.lease import iso
from fintts.train.stores.hub.publisher import read_pushes

RECENT_PUSHES = 10


class Ledger:
    """The run's Hub-side facts as this session last saw or made them; ``pushes_file`` is the run's ``pushes.json``."""

    def __init__(self, pushes_file: Path):
        self.pushes_file = pushes_file
        self._lock = threading.Lock()  # guards the fields below, shared with the publisher's thread
        self._on_hub: set[str] = set()
        self._hub_latest: str | None = None  # what the Hub's latest names, once _hub_latest_known
        self._hub_latest_known = False
        self._keep_last: int | None = None
        self._protect: set[str] = set()
        self._pushes: list[dict[str, Any]] = read_pushes(pushes_file)
        self._last_push_bytes = 0
        self._last_commit_url: str | None = None

    # -- the Hub's checkpoints and latest ------------------------------------------------------

    def looked_up(self, names: set[str], pointed: str) -> None:
        """The Hub holds checkpoints ``names`` and its ``latest`` reads ``pointed`` (a name only if it is one of them)."""
        with self._lock:
            self._on_hub = set(names)
            self._hub_latest = pointed if ckpt.is_checkpoint_name(pointed) and pointed in names else None
            self._hub_latest_known = True

    def on_hub(self) -> set[str]:
        with self._lock:
            return set(self._on_hub)

    def hub_latest(self) -> tuple[bool, str | None]:
        """Whether the Hub's ``latest`` is known yet, and what it names."""
        with self._lock:
            return self._hub_latest_known, self._hub_latest

    def saw_latest(self, name: str) -> None:
        """The Hub's ``latest`` reads ``name`` (``None`` unless it is a checkpoint name)."""
        with self._lock:
            self._hub_latest, self._hub_latest_known = (name if ckpt.is_checkpoint_name(name) else None), True

    # -- the keep-last rule for the Hub -------------------------------------------------------

    def keep(self, keep_last: int, protect: set[str]) -> None:
        with self._lock:
            self._keep_last, self._protect = keep_last, protect

    def rule(self) -> tuple[set[str], int | None]:
        """The protected checkpoints and ``keep_last`` the next full push applies on the Hub."""
        with self._lock:
            return set(self._protect), self._keep_last

    # -- pushes ----------------------------------------------------------------------------------

    def pushed(self, name: str, on_hub: set[str], seconds: float, size: int, commit_url: str | None) -> None:
        """Checkpoint ``name``'s full push landed, leaving ``on_hub``: record it here and in ``pushes.json``."""
        with self._lock:
            self._on_hub = on_hub
            self._hub_latest, self._hub_latest_known = name, True
            self._last_commit_url = commit_url
            self._last_push_bytes = size
            record = {"checkpoint": name, "seconds": round(seconds, 3), "bytes": size, "at": iso(time.time())}
            self._pushes = (self._pushes + [record])[-RECENT_PUSHES:]
            pushes = list(self._pushes)
        ckpt.write_atomic(self.pushes_file, json.dumps(pushes, indent=1).encode())

    def reload_pushes(self) -> None:
        """Read ``pushes.json`` again (a resume just downloaded the Hub's)."""
        with self._lock:
            self._pushes = read_pushes(self.pushes_file)

    def pushes(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._pushes)

    def push_seconds(self) -> list[float]:
        """Seconds of this run's recent full pushes."""
        with self._lock:
            return [float(p["seconds"]) for p in self._pushes[-RECENT_PUSHES:]]

    def last_push_bytes(self) -> int:
        with self._lock:
            return self._last_push_bytes

    def last_commit_url(self) -> str | None:
        with self._lock:
            return self._last_commit_url

