"""Checkpoint folders that are either complete or invisible.

A checkpoint is written into ``checkpoints/.partial-<name>/``; every file is flushed to
disk, ``MANIFEST.json`` (sha256 and size of every other file) is written last, the folder
is renamed to ``checkpoints/<name>`` and only then is ``latest`` replaced, atomically,
by a file naming it. A kill at any moment leaves ``latest`` naming a complete checkpoint
(or nothing), and resuming verifies the manifest before trusting a folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path
from typing import Callable, Iterable

MANIFEST = "MANIFEST.json"
LATEST = "latest"
CHECKPOINTS = "checkpoints"
_NAME = re.compile(r"^step-(\d{8,})$")


class CheckpointError(Exception):
    """A checkpoint folder is missing, incomplete or does not match its manifest."""


def name_for_step(step: int) -> str:
    return f"step-{step:08d}"


def step_of(name: str) -> int:
    match = _NAME.match(name)
    if not match:
        raise CheckpointError(f"{name!r} is not a checkpoint name (step-NNNNNNNN)")
    return int(match.group(1))


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _files(folder: Path) -> Iterable[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that readers see the old or the new file, never a mix."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def write_manifest(folder: Path) -> dict:
    files = {p.relative_to(folder).as_posix(): {"sha256": sha256_file(p), "size": p.stat().st_size} for p in _files(folder)}
    for p in _files(folder):
        _fsync(p)
    manifest = {"format": 1, "files": files}
    write_atomic(folder / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True).encode())
    return manifest


def read_manifest(folder: Path) -> dict:
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
        return manifest["files"]
    except FileNotFoundError:
        raise CheckpointError(f"{folder}: no {MANIFEST} (the checkpoint was not finished)") from None
    except (ValueError, KeyError, TypeError) as err:
        raise CheckpointError(f"{folder}/{MANIFEST} is unreadable: {err}") from None


def verify(folder: Path) -> None:
    """Raise :class:`CheckpointError` naming the first file that is missing or differs."""
    if not folder.is_dir():
        raise CheckpointError(f"{folder} does not exist")
    for rel, expected in read_manifest(folder).items():
        path = folder / rel
        if not path.is_file():
            raise CheckpointError(f"{folder}: {rel} is missing")
        if path.stat().st_size != expected["size"] or sha256_file(path) != expected["sha256"]:
            raise CheckpointError(f"{folder}: {rel} does not match its sha256 in {MANIFEST} (corrupt or truncated)")


def save(root: Path, name: str, write: Callable[[Path], None]) -> Path:
    """Create checkpoint ``name`` under ``root`` with ``write(folder)`` and point ``latest`` at it."""
    base = root / CHECKPOINTS
    base.mkdir(parents=True, exist_ok=True)
    partial = base / f".partial-{name}"
    final = base / name
    if partial.exists():
        shutil.rmtree(partial)
    partial.mkdir()
    write(partial)
    write_manifest(partial)
    if final.exists():  # a re-save of the same step (e.g. a session that stopped right after one)
        shutil.rmtree(final)
    os.replace(partial, final)
    write_atomic(root / LATEST, (name + "\n").encode())
    return final


def list_names(root: Path) -> list[str]:
    """Names of checkpoint folders (complete or not), oldest first."""
    base = root / CHECKPOINTS
    if not base.is_dir():
        return []
    return sorted((p.name for p in base.iterdir() if p.is_dir() and _NAME.match(p.name)), key=step_of)


def read_latest(root: Path) -> str | None:
    try:
        name = (root / LATEST).read_text().strip()
    except FileNotFoundError:
        return None
    return name or None


def resume_order(names: Iterable[str], pointed: str | None) -> list[str]:
    """Checkpoints to try when resuming: the one ``latest`` points at, then the rest newest first.

    ``latest`` goes first even when a higher-numbered folder exists (a session that
    resumed from an older checkpoint after a corrupt newer one was skipped).
    """
    order = sorted(set(names), key=step_of, reverse=True)
    if pointed in order:
        order.remove(pointed)
        order.insert(0, pointed)
    return order


def latest_complete(root: Path, log: Callable[[str], None] = print) -> Path | None:
    """The checkpoint to resume from: ``latest`` if it verifies, else the newest that does."""
    pointed = read_latest(root)
    names = list_names(root)
    if pointed and pointed not in names:
        log(f"warning: {root / LATEST} names {pointed!r}, which is not in {root / CHECKPOINTS}")
    for name in resume_order(names, pointed):
        folder = root / CHECKPOINTS / name
        try:
            verify(folder)
        except CheckpointError as err:
            log(f"warning: skipping checkpoint {name}: {err}")
            continue
        return folder
    return None


def prune(root: Path, keep_last: int, protect: Iterable[str] = ()) -> list[str]:
    """Delete all but the newest ``keep_last`` checkpoints and the ``protect``-ed ones; return the deleted."""
    names = list_names(root)
    keep = set(names[-keep_last:] if keep_last > 0 else []) | set(protect)
    pointed = read_latest(root)
    if pointed:
        keep.add(pointed)
    removed = [n for n in names if n not in keep]
    for name in removed:
        shutil.rmtree(root / CHECKPOINTS / name, ignore_errors=True)
    for stale in (root / CHECKPOINTS).glob(".partial-*") if (root / CHECKPOINTS).is_dir() else ():
        shutil.rmtree(stale, ignore_errors=True)
    return removed
