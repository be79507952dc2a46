"""What the run's commits carry: a full push's operations, the small files of heartbeats and the release.

A full push is one commit (docs/sessions-and-stores.md, "One commit per pushed checkpoint"): the
checkpoint's files (only those its manifest lists), the deletions the keep-last rule asks for, ``latest``, the extras of a snapshot
(``status.json`` with its ``saved`` block, the card, ``loss.png``, ``model/``, ``samples/``,
``tb/``), ``pushes.json`` and the refreshed lease; the card only when it changed and its metadata
passed the Hub's validator (see :mod:`.card_gate`), and never in a heartbeat. The snapshot is taken by :class:`Outbox`
when the checkpoint is published, so a push sends one consistent state while the trainer goes
on rewriting those files. Only regular files are sent: symbolic links are skipped with a warning.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from huggingface_hub import CommitOperationAdd, CommitOperationDelete

from fintts.train.run import checkpoint as ckpt
from fintts.train.run.layout import CARD, CARRIED_CACHE, HUB_DIR, LEASE, LOSS_PLOT, MODEL_DIR, PUSHES, SAMPLES_DIR, STATUS, TENSORBOARD_DIR
from fintts.train.stores.hub.card_gate import CardGate
from fintts.train.stores.hub.client import HubClient, json_object
from fintts.train.stores.hub.lease import LeaseHolder
from fintts.train.stores.hub.ledger import Ledger
from fintts.train.stores.hub.publisher import Target

log = logging.getLogger(__name__)

#: Pushed with every full push. ``model/`` is mirrored (files gone locally are deleted on
#: the Hub); ``samples/`` and ``tb/`` only gain files, because a session on a fresh disk
#: has only its own and must not delete the earlier sessions'.
MIRRORED_DIRS = (MODEL_DIR,)
ADDED_DIRS = (SAMPLES_DIR, TENSORBOARD_DIR)
#: The task's cache carried to fresh disks (:attr:`fintts.train.task.TaskContext.carried_dir`): its files are named by
#: their content and never rewritten, so a push adds only those the Hub lacks (a corpus's thousands of small files are
#: not sent again with every checkpoint), and a session that resumes from the Hub fetches them (:mod:`.resume`).
CARRIED_DIRS = (CARRIED_CACHE,)
EXTRA_FILES = (LOSS_PLOT, STATUS, CARD)


@dataclasses.dataclass(frozen=True)
class Saved:
    """The ``saved`` block of the Hub's ``status.json`` (:meth:`Commits.status_for_hub` writes it, :meth:`of` reads it):
    the newest checkpoint the Hub holds, the newest this disk holds and whether only this disk does, and where that is."""

    hub: str | None = None
    local: str | None = None
    local_only: bool = False
    host: str | None = None
    folder: str | None = None

    @classmethod
    def of(cls, status: Mapping[str, Any] | None) -> Saved:
        """The block in ``status`` (a status written before there was one, or none: an empty one)."""
        saved = (status or {}).get("saved")
        if not isinstance(saved, dict):
            return cls()
        text = {key: str(saved[key]) if saved.get(key) else None for key in ("hub", "local", "host", "folder")}
        return cls(local_only=bool(saved.get("local_only")), **text)


def read_status(client: HubClient, head: str, paths: Collection[str]) -> dict[str, Any] | None:
    """The run's ``status.json`` at commit ``head``, as :meth:`Commits.status_for_hub` pushed it (``None``: not among
    ``paths``, the repo's files at ``head``, or not a JSON object)."""
    return json_object(client.read(STATUS, head)) if STATUS in paths else None


class Commits:
    """Builds the operations of the commits of the run mirrored in ``root``, written by ``host``.

    ``ledger``: what the Hub holds and the keep-last rule; ``holder``: the lease each commit refreshes.
    """

    def __init__(self, root: Path, *, host: str, client: HubClient, ledger: Ledger, holder: LeaseHolder):
        self.root, self.host = root, host
        self._client, self._ledger, self._holder = client, ledger, holder
        self.cards = CardGate(client)

    def full(
        self, target: Target, files: dict[str, Any], on_hub: set[str]
    ) -> tuple[list[Any], int, set[str], set[str], bytes | None]:
        """The commit for ``target``: its files, deletions, the extras; and its size, deleted and added checkpoints,
        and the card it carries (``None``: none)."""
        protect, keep_last = self._ledger.rule()
        added = {target.name} | {
            n for n in protect - on_hub if (self.root / ckpt.CHECKPOINTS / n / ckpt.MANIFEST).is_file()
        }
        deleted: set[str] = set()
        if keep_last is not None:
            after = sorted(on_hub | added, key=ckpt.step_of)
            deleted = (set(after[:-keep_last] if keep_last > 0 else after) & on_hub) - protect - {target.name}
        deletions: list[Any] = [CommitOperationDelete(f"{ckpt.CHECKPOINTS}/{n}/", is_folder=True) for n in sorted(deleted)]
        additions: list[Any] = []
        size = 0
        for name in sorted(added, key=ckpt.step_of):
            folder = self.root / ckpt.CHECKPOINTS / name
            prefix = f"{ckpt.CHECKPOINTS}/{name}/"
            rels = sorted([*ckpt.read_manifest(folder), ckpt.MANIFEST])  # what the manifest vouches for, nothing else
            # a checkpoint pushed again (saved again at the same step) replaces its folder: files it no longer has go
            deletions += [CommitOperationDelete(p) for p in sorted(files) if p.startswith(prefix) and p[len(prefix):] not in rels]
            for rel in rels:
                additions.append(CommitOperationAdd(prefix + rel, folder / rel))
                size += (folder / rel).stat().st_size
        snapshot_files = extra_files(target.snapshot)
        card = None
        for rel in snapshot_files:
            if rel in files and rel.startswith(tuple(d + "/" for d in CARRIED_DIRS)):
                continue  # named by its content: the Hub's is this one
            source = target.snapshot / rel
            if rel == CARD:
                card = self.cards.wanted(source)
                if card is None:
                    continue
            content = self.status_for_hub(source.read_bytes(), target.name, target.name) if rel == STATUS else source
            additions.append(CommitOperationAdd(rel, content))
            size += source.stat().st_size
        for mirrored in MIRRORED_DIRS:
            ours = {rel for rel in snapshot_files if rel.startswith(mirrored + "/")}
            if ours:
                deletions += [CommitOperationDelete(p) for p in sorted(files) if p.startswith(mirrored + "/") and p not in ours]
        additions += [CommitOperationAdd(ckpt.LATEST, f"{target.name}\n".encode())] + self.bookkeeping(with_lease=True)
        return deletions + additions, size, deleted, added, card

    def small(self, head: str, *, with_lease: bool, with_card: bool) -> list[Any]:
        """``status.json`` (saying where the newest checkpoint is) as it is now, ``with_card`` the card if it changed,
        with ``pushes.json`` (and the refreshed lease), for a commit on ``head``."""
        operations = []
        if (self.root / STATUS).is_file():
            known, hub_latest = self._ledger.hub_latest()
            if not known:
                self._ledger.saw_latest((self._client.read(ckpt.LATEST, head) or b"").decode(errors="replace").strip())
                _, hub_latest = self._ledger.hub_latest()
            local = ckpt.read_latest(self.root)
            operations.append(CommitOperationAdd(STATUS, self.status_for_hub((self.root / STATUS).read_bytes(), hub_latest, local)))
        card = self.cards.wanted(self.root / CARD) if with_card else None
        if card is not None:
            operations.append(CommitOperationAdd(CARD, card))
        return operations + self.bookkeeping(with_lease=with_lease)

    def status_for_hub(self, data: bytes, hub: str | None, local: str | None) -> bytes:
        """``status.json`` with its ``saved`` block (:class:`Saved`): which checkpoint the Hub holds, which only this disk
        (docs/sessions-and-stores.md, "Where the newest checkpoint is")."""
        try:
            status = json.loads(data)
        except ValueError:
            return data
        if not isinstance(status, dict):
            return data
        local = local if ckpt.is_checkpoint_name(local) else None
        local_only = local is not None and (hub is None or ckpt.step_of(local) > ckpt.step_of(hub))
        saved: dict[str, Any] = dataclasses.asdict(Saved(hub, local, local_only, self.host, str(self.root)))
        step = status.get("step")
        if local_only or (isinstance(step, int) and step > (-1 if hub is None else ckpt.step_of(hub))):
            saved["note"] = (
                f"step {step} was reached; the newest checkpoint on the Hub is {hub or 'none yet'}"
                + (f"; {local} is only on {self.host} in {self.root}" if local_only else "")
            )
        return json.dumps({**status, "saved": saved}, indent=1, sort_keys=True).encode()

    def bookkeeping(self, *, with_lease: bool) -> list[Any]:
        """``pushes.json`` (once there are pushes) and, ``with_lease``, our lease with a fresh heartbeat."""
        pushes = self._ledger.pushes()
        operations = [CommitOperationAdd(PUSHES, json.dumps(pushes, indent=1).encode())] if pushes else []
        lease = self._holder.refreshed() if with_lease else None
        if lease is not None:
            operations.append(CommitOperationAdd(LEASE, lease.to_bytes()))
        return operations


class Outbox:
    """Snapshots of the files the trainer rewrites, one per published checkpoint, in ``root/.hub/outbox``."""

    def __init__(self, root: Path, url: str):
        self.root, self.url = root, url
        self._snapshots = 0

    def clear_others(self) -> None:
        """Remove the snapshots a previous writer process left behind."""
        outbox = self.root / HUB_DIR / "outbox"
        for leftover in outbox.iterdir() if outbox.is_dir() else ():
            if not leftover.name.startswith(f"{os.getpid()}-"):
                shutil.rmtree(leftover, ignore_errors=True)

    def snapshot(self) -> Path | None:
        """Copy the files the trainer rewrites (``model/`` and the carried cache by hard link) so a push sends one
        consistent state.

        On a full disk the copy fails: the push then carries the checkpoint and ``latest``
        without them (``None``), rather than not happening, and the next push brings them.
        """
        self._snapshots += 1
        dest = self.root / HUB_DIR / "outbox" / f"{os.getpid()}-{self._snapshots:06d}"
        try:
            shutil.rmtree(dest, ignore_errors=True)
            dest.mkdir(parents=True)
            for rel in extra_files(self.root):
                target = dest / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                try:
                    if not rel.startswith(tuple(d + "/" for d in (MODEL_DIR, *CARRIED_DIRS))):
                        raise OSError("copied, not linked")
                    os.link(self.root / rel, target)
                except OSError:
                    shutil.copyfile(self.root / rel, target)
        except OSError as err:
            shutil.rmtree(dest, ignore_errors=True)
            log.warning("%s: could not copy status, card and model/ for the push (%s); pushing the checkpoint without them", self.url, err)
            return None
        return dest


def extra_files(folder: Path | None) -> list[str]:
    """Relative paths of what a full push carries besides checkpoints: model/, samples/, tb/, the carried cache, the
    plot, status, card.

    Regular files only: a symbolic link is skipped with a warning, never followed.
    """
    if folder is None:
        return []
    found = []
    for rel in EXTRA_FILES + MIRRORED_DIRS + ADDED_DIRS + CARRIED_DIRS:
        path = folder / rel
        if path.is_symlink():
            log.warning("%s is a symbolic link; it is not pushed", path)
        elif path.is_file():
            found.append(rel)
        elif path.is_dir():
            try:
                found += [p.relative_to(folder).as_posix() for p in ckpt.regular_files(path)]
            except ckpt.CheckpointError as err:
                log.warning("%s; %s/ is not pushed this time", err, rel)
    return found
