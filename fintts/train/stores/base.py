"""Where a run lives between sessions.

Every store has a local ``root`` folder laid out as :mod:`fintts.train.run.layout` (its
names and tree, the same on the Hub) and :mod:`fintts.train.run.checkpoint` (its checkpoints)
describe; the trainer always writes checkpoints there. A store then makes a finished
checkpoint *durable* with :meth:`Store.publish`: for the local store the folder already
is the store, for the Hub store it is an upload in the background. The trainer never
knows which one it has.
"""

from __future__ import annotations

import abc
import json
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from fintts.train.run import checkpoint
from fintts.train.run.layout import STATUS


class Store(abc.ABC):
    root: Path
    #: the Hugging Face Hub repo (``user/name``) the run is kept in, ``None`` for a store on this machine only.
    hub_repo: str | None = None

    @property
    @abc.abstractmethod
    def url(self) -> str:
        """How a person names this store (a path, ``hf://user/name``)."""

    def acquire(self, session_id: str, *, force: bool = False) -> None:
        """Become the run's only writer, or raise :class:`LeaseConflict`."""

    def release(self, timeout: float | None = None) -> None:
        """Give up the writer's lease at the end of a session, trying for at most ``timeout`` seconds."""

    def set_deadline(self, deadline: float | None) -> None:
        """No call of this store may block past ``deadline`` (a ``time.time()``: the session's end; ``None``: none)."""

    def resume_point(self, log: Callable[[str], None] = print) -> Path | None:
        """Local folder of the newest complete checkpoint, fetched if need be; ``None`` for a new run."""
        return checkpoint.latest_complete(self.root, log)

    def push_due(self) -> bool:
        """Would :meth:`publish` now send a checkpoint somewhere a person looks (a Hub push)? The trainer draws a
        checkpoint's loss plot only for such a one and for a session's final checkpoint: drawing it is most of a small
        model's save. Here the run is on this disk: only the final one."""
        return False

    def publish(self, name: str, *, final: bool = False) -> None:
        """Make local checkpoint ``name`` (with ``latest``, ``model/``, status) durable.

        May return before it is; :meth:`wait` blocks until it is. ``final`` marks the
        session's last checkpoint, which a store must not skip for a newer one.
        """

    def wait(self, timeout: float | None = None, interrupted: Callable[[], bool] = lambda: False) -> bool:
        """Block until everything published is durable; ``False`` if ``timeout`` ran out or ``interrupted()`` first."""
        return True

    def secure_newest(self, deadline: float | None, interrupted: Callable[[], bool] = lambda: False) -> str:
        """A failing session's last act: make the newest verified checkpoint durable before ``deadline`` (a
        ``time.time()``) unless ``interrupted()``, and say which step is safe where. Here it already is."""
        newest = checkpoint.latest_complete(self.root, lambda _: None)
        return f"{newest.name} is safe in {newest}" if newest is not None else f"no complete checkpoint in {self.root}"

    def checkpoint_names(self) -> list[str]:
        """The run's checkpoints this store knows of (here: on this disk), oldest first."""
        return checkpoint.list_names(self.root)

    def prune(self, keep_last: int, protect: Iterable[str] = ()) -> list[str]:
        """Drop checkpoints beyond the newest ``keep_last`` and ``protect``; return their names."""
        return checkpoint.prune(self.root, keep_last, protect)

    def free_bytes(self) -> int:
        """Bytes free on the disk under :attr:`root`, where checkpoints are written (the trainer checks a save fits)."""
        folder = self.root
        while not folder.exists():  # a new run's folder is made by its first write
            folder = folder.parent
        return shutil.disk_usage(folder).free

    def transfer_seconds(self) -> list[float]:
        """Measured seconds of this run's recent publishes (earlier sessions too), for the clock's reserve."""
        return []

    def pending(self) -> str | None:
        """What is not yet durable and how to push it by hand, or ``None`` when nothing is."""
        return None

    def problem(self) -> str | None:
        """Why checkpoints are not becoming durable right now (e.g. a failing push), for the run's status; ``None``: all well."""
        return None

    def notes(self) -> list[str]:
        """Limits this store applied that a person should know of (for the session's summary)."""
        return []

    def write_status(self, status: dict[str, Any]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        checkpoint.write_atomic(self.root / STATUS, json.dumps(status, indent=1, sort_keys=True).encode())

    def read_status(self) -> dict[str, Any] | None:
        try:
            return json.loads((self.root / STATUS).read_text())
        except FileNotFoundError:
            return None

    def describe(self) -> dict[str, Any]:
        """Store facts for ``fintts status`` (e.g. the Hub repo's size)."""
        return {"store": self.url}

    def close(self, timeout: float | None = None) -> None:
        """Stop background work (waiting at most ``timeout`` seconds for it); call after :meth:`wait`."""
