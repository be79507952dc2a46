"""The run as ``fintts kaggle run`` reads it on the Hub after each session: ``status.json``, ``latest`` and its files.

The Hub decides how a session went, not Kaggle's state alone (:mod:`.sessions`); reads only: no token for a public
repo, a read token for a private one (the sessions on Kaggle write, not the laptop). The reading is the Hub store's
(:func:`fintts.train.stores.hub.resume.look`: the head, its files and ``latest``, as a resuming session reads them;
:func:`fintts.train.stores.hub.commits.read_status`), as the lease is (:mod:`fintts.train.stores.hub.lease`); what is
here is what the chain judges from them.
"""

from __future__ import annotations

import dataclasses
from pathlib import PurePosixPath
from typing import Any

from fintts.kaggle.kernels import ATTEMPTS, BACKOFF, REQUEST_TIMEOUT
from fintts.train.run.checkpoint import is_checkpoint_name, step_of
from fintts.train.run.layout import CHECKPOINTS, MODEL_DIR
from fintts.train.stores.hub.client import HubClient
from fintts.train.stores.hub.commits import Saved, read_status
from fintts.train.stores.hub.errors import HubRepoError
from fintts.train.stores.hub.resume import look


@dataclasses.dataclass(frozen=True)
class HubRun:
    """The run on the Hub at one commit: its ``status.json``, ``latest`` and files."""

    status: dict[str, Any] | None
    latest: str | None
    paths: frozenset[str]

    def holds(self, folder: str) -> bool:
        return any(path.startswith(folder + "/") for path in self.paths)

    def missing(self) -> list[str]:
        """What the Hub lacks of what ``status.json`` names (its newest checkpoint, the best one, ``model/``)."""
        status = self.status or {}
        named = PurePosixPath(status.get("latest_checkpoint") or "").name
        best = (status.get("best") or {}).get("checkpoint")
        problems = []
        if named and self.latest != named:
            problems.append(f"the Hub's latest is {self.latest or 'missing'} while status.json names {named} (the final push did not land)")
        for name, what in ((named, "the newest"), (best, "the best")):
            if name and not self.holds(f"{CHECKPOINTS}/{name}"):
                problems.append(f"{CHECKPOINTS}/{name}/ ({what} checkpoint) is not on the Hub")
        if not self.holds(MODEL_DIR):
            problems.append(f"{MODEL_DIR}/ (the voice) is not on the Hub")
        return problems

    def unpushed(self) -> str | None:
        """The checkpoint ``status.json`` names as the session's newest when the Hub's ``latest`` is older (``None``: held).

        The newest of ``latest_checkpoint`` and ``saved.local`` (when ``saved.local_only``):
        the session saved it, and its final push did not land.
        """
        saved = Saved.of(self.status)
        named = PurePosixPath(str((self.status or {}).get("latest_checkpoint") or "")).name
        candidates = [n for n in (named, saved.local if saved.local_only else None) if is_checkpoint_name(n)]
        if not candidates:
            return None
        newest = max(candidates, key=step_of)
        if is_checkpoint_name(self.latest) and step_of(self.latest) >= step_of(newest):
            return None
        return newest

    def local_folder(self) -> tuple[str, str]:
        """(host, folder) of the session's run folder, where its unpushed checkpoint is."""
        saved = Saved.of(self.status)
        latest = str((self.status or {}).get("latest_checkpoint") or "")
        folder = saved.folder or (str(PurePosixPath(latest).parent.parent) if latest else "")
        return saved.host or "the Kaggle session", folder or "the run's folder"


def read_run(repo: str, timeout: float = REQUEST_TIMEOUT) -> HubRun | None:
    """The run on the Hub now (``None``: nothing trained there yet), transient failures tried again.

    A read: no token for a public repo, a read token for a private one (the sessions on Kaggle write, not this).
    """
    client = HubClient.connect(repo, timeout=timeout, anonymous_ok=True)

    def read() -> HubRun:
        head, files, latest = look(client)
        return HubRun(read_status(client, head, files), latest or None, frozenset(files))

    try:
        return client.retrying(f"read {repo}'s status", read, attempts=ATTEMPTS, backoff=BACKOFF)
    except HubRepoError:  # the first session creates the repo
        return None


def status_of(run: HubRun | None) -> dict[str, Any]:
    """``run``'s ``status.json`` (``{}``: no run, or no status)."""
    return (run.status if run is not None else None) or {}
