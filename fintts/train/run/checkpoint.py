"""Checkpoint folders that are either complete or invisible.

A checkpoint is written into ``checkpoints/.partial-<name>/``; every file is flushed to
disk, ``MANIFEST.json`` (sha256 and size of every other file) is written last, the folder
is renamed to ``checkpoints/<name>`` and only then is ``latest`` replaced, atomically,
by a file naming it. A kill at any moment leaves ``latest`` naming a complete checkpoint
(or nothing), and resuming verifies the manifest before trusting a folder. A save that
fails (a full disk) removes its ``.partial-`` folder, so the space is not lost for the next
try and the previous checkpoint stays ``latest``. A disk that fills between the rename and
``latest`` (:class:`LatestNotWritten`) loses the old ``latest`` rather than the new checkpoint.

Checkpoints hold regular files only, named by relative paths that stay inside the folder.
A symbolic link is refused rather than followed: hashed and uploaded, it would carry
whatever it points at (a token file included) into the run. :func:`verify` trusts a folder
only when its manifest lists exactly the files present, each by a safe relative path.

What a checkpoint holds is written and read here too, side by side (:func:`write_files`,
:func:`load_files`, :func:`read_state`), under the names below: the only place they are spelled.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import stat
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from fintts.train.run.layout import CHECKPOINTS, LATEST, LOSS_PLOT
from fintts.train.run.state import TrainerState

MANIFEST = "MANIFEST.json"
#: The trainer's files in each checkpoint, beside each model's weights (:func:`weights_file`), the task's own files
#: (``Task.checkpoint_files``), the newest validation's files (``samples/``) and, in a pushed or final one, ``loss.png``.
OPTIMIZERS = "optim.pt"
SCHEDULERS = "sched.pt"
SCALER = "scaler.pt"
STATE = "state.json"
#: the settings the checkpoint's phase trains with (resolved values included), for ``fintts eval`` and people
CONFIG = "config.yaml"
_NAME = re.compile(r"^step-(\d{8,})$")
#: the errnos of a disk that has no room left: full, or the user's quota spent
DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})


def is_disk_full(err: BaseException | None) -> bool:
    """Does ``err`` (or an error it came from) say the disk is full: ENOSPC or EDQUOT (:data:`DISK_FULL`), also when a
    library reports it as its own error (safetensors: "No space left on device")."""
    while err is not None:
        if isinstance(err, OSError) and err.errno in DISK_FULL:
            return True
        if any(text in str(err) for text in (os.strerror(errno.ENOSPC), os.strerror(errno.EDQUOT))):
            return True
        err = err.__cause__ or err.__context__
    return False


class CheckpointError(Exception):
    """A checkpoint folder is missing, incomplete or does not match its manifest."""


class WeightsDoNotFit(Exception):
    """The checkpoint's weights for the task's model ``model`` do not fit the one built now: ``detail`` says how."""

    def __init__(self, model: str, detail: str):
        super().__init__(f"{model}: {detail}")
        self.model, self.detail = model, detail


class LatestNotWritten(OSError):
    """Checkpoint ``name`` is complete, but the disk had no room for a ``latest`` naming it.

    An ``OSError`` with the disk's errno, so whoever stops a session on a full disk stops it
    here too; its own type, so the message can say that the checkpoint is whole.
    """

    def __init__(self, name: str, root: Path, cause: OSError):
        super().__init__(cause.errno, cause.strerror, str(root / LATEST))
        self.name, self.root = name, root


def weights_file(model: str) -> str:
    """The file of a checkpoint that holds the weights of the task's model ``model`` (a key of ``Task.build_models``)."""
    return f"{model}.safetensors"


def name_for_step(step: int) -> str:
    return f"step-{step:08d}"


def is_checkpoint_name(name: object) -> bool:
    return isinstance(name, str) and _NAME.fullmatch(name) is not None


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


def safe_relative_path(rel: str, *, what: str = "path") -> str:
    """``rel`` if it names a file inside a folder (relative, ``/``-separated, no ``..``); else :class:`CheckpointError`.

    Paths come from manifests, tasks' artefacts and Hub listings: none of them may reach
    outside the folder they are written into or read from.
    """
    parts = PurePosixPath(rel).parts if isinstance(rel, str) else ()
    if (
        not parts
        or rel.startswith("/")
        or "\\" in rel
        or any(part in (".", "..") for part in parts)
        or any(ord(c) < 32 for c in rel)
        or PurePosixPath(*parts).as_posix() != rel
    ):
        raise CheckpointError(f"{what} {rel!r} is not a relative path inside its folder (no leading /, no .., no \\)")
    return rel


def regular_files(folder: Path) -> list[Path]:
    """Every file under ``folder``, sorted; :class:`CheckpointError` for a symbolic link or another special file."""
    found = []
    for base, dirs, names in os.walk(folder):
        for name in sorted(dirs + names):
            path = Path(base) / name
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode):
                raise CheckpointError(f"{path} is a symbolic link; a checkpoint holds regular files only")
            if stat.S_ISREG(mode):
                found.append(path)
            elif not stat.S_ISDIR(mode):
                raise CheckpointError(f"{path} is not a regular file")
    return sorted(found)


def _files(folder: Path) -> list[Path]:
    return [p for p in regular_files(folder) if p.relative_to(folder).as_posix() != MANIFEST]


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that readers see the old or the new file, never a mix."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a full disk must not also keep a half-written copy
        raise


def write_manifest(folder: Path) -> dict:
    paths = _files(folder)
    files = {p.relative_to(folder).as_posix(): {"sha256": sha256_file(p), "size": p.stat().st_size} for p in paths}
    for p in paths:
        _fsync(p)
    manifest = {"format": 1, "files": files}
    write_atomic(folder / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True).encode())
    return manifest


def read_manifest(folder: Path) -> dict:
    """The manifest's ``files`` (relative path → sha256 and size), each path checked to stay inside ``folder``."""
    try:
        files = json.loads((folder / MANIFEST).read_text())["files"]
        entries = {safe_relative_path(rel, what=f"{MANIFEST} entry"): (str(e["sha256"]), int(e["size"])) for rel, e in files.items()}
    except FileNotFoundError:
        raise CheckpointError(f"{folder}: no {MANIFEST} (the checkpoint was not finished)") from None
    except CheckpointError as err:
        raise CheckpointError(f"{folder}: {err}") from None
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise CheckpointError(f"{folder}/{MANIFEST} is unreadable: {err}") from None
    if not entries:
        raise CheckpointError(f"{folder}/{MANIFEST} lists no files")
    return {rel: {"sha256": sha, "size": size} for rel, (sha, size) in entries.items()}


def verify(folder: Path) -> None:
    """Raise :class:`CheckpointError` naming the first file that is missing, unlisted or differs."""
    if not folder.is_dir():
        raise CheckpointError(f"{folder} does not exist")
    expected = read_manifest(folder)
    present = {p.relative_to(folder).as_posix() for p in _files(folder)}
    unlisted = sorted(present - set(expected))
    if unlisted:
        raise CheckpointError(f"{folder}: {unlisted[0]} is not in {MANIFEST} (added after the checkpoint was written)")
    for rel, entry in expected.items():
        path = folder / rel
        if rel not in present:
            raise CheckpointError(f"{folder}: {rel} is missing")
        if path.stat().st_size != entry["size"] or sha256_file(path) != entry["sha256"]:
            raise CheckpointError(f"{folder}: {rel} does not match its sha256 in {MANIFEST} (corrupt or truncated)")


def save(root: Path, name: str, write: Callable[[Path], None]) -> Path:
    """Create checkpoint ``name`` under ``root`` with ``write(folder)`` and point ``latest`` at it."""
    base = root / CHECKPOINTS
    base.mkdir(parents=True, exist_ok=True)
    partial = base / f".partial-{name}"
    final = base / name
    if partial.exists():
        shutil.rmtree(partial)
    try:
        partial.mkdir()
        write(partial)
        write_manifest(partial)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)  # e.g. a full disk: give the space back, keep latest as it was
        raise
    if final.exists():  # a re-save of the same step (e.g. a session that stopped right after one)
        shutil.rmtree(final)
    os.replace(partial, final)
    point_latest(root, name)
    return final


def point_latest(root: Path, name: str) -> None:
    """Make ``latest`` name checkpoint ``name`` (atomically; nothing is written when it already does).

    A disk too full for the new ``latest`` gets the old one removed, then a second try (the old
    file's block is free again). Without a ``latest`` every reader takes the newest complete
    checkpoint, and that is ``name``, complete since its rename: the next session resumes from
    it, never from the older checkpoint the old ``latest`` named. Only when the second try fails
    too is :class:`LatestNotWritten` raised; the folder stays.
    """
    if read_latest(root) == name:
        return
    data = (name + "\n").encode()
    try:
        write_atomic(root / LATEST, data)
    except OSError as err:
        if err.errno not in DISK_FULL:
            raise
        (root / LATEST).unlink(missing_ok=True)
        try:
            write_atomic(root / LATEST, data)
        except OSError as again:
            if again.errno not in DISK_FULL:
                raise
            raise LatestNotWritten(name, root, again) from again


def list_names(root: Path) -> list[str]:
    """Names of checkpoint folders (complete or not), oldest first."""
    base = root / CHECKPOINTS
    if not base.is_dir():
        return []
    return sorted((p.name for p in base.iterdir() if p.is_dir() and _NAME.match(p.name)), key=step_of)


def read_latest(root: Path) -> str | None:
    """The checkpoint ``latest`` names; ``None`` when there is no ``latest`` or it names no checkpoint.

    ``latest`` is a text file a person can edit: text that is not a checkpoint's name
    (``step-NNNNNNNN``), or not text at all, is treated as absent, so every reader (the phase
    switch, the end of a session, the status) falls back as for a run without one, and
    resuming takes the newest checkpoint that verifies (:func:`latest_complete` says so).
    """
    name = _latest_text(root)
    return name if is_checkpoint_name(name) else None


def _latest_text(root: Path) -> str | None:
    try:
        return (root / LATEST).read_bytes().decode("utf-8", errors="replace").strip() or None
    except FileNotFoundError:
        return None


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


def current(root: Path) -> str | None:
    """The checkpoint a reader takes without hashing it: the one ``latest`` names, else the newest with a manifest.

    What a status shows and a session's end publishes: ``latest`` is absent where a full disk took
    it (:func:`point_latest`) or a person's edit made it unreadable, and resuming then takes the
    newest checkpoint that verifies (:func:`latest_complete`), so a status names that one too.
    """
    pointed = read_latest(root)
    if pointed is not None:
        return pointed
    return next((name for name in reversed(list_names(root)) if (root / CHECKPOINTS / name / MANIFEST).is_file()), None)


def latest_complete(root: Path, log: Callable[[str], None] = print) -> Path | None:
    """The checkpoint to resume from: ``latest`` if it verifies, else the newest that does."""
    text, pointed = _latest_text(root), read_latest(root)
    names = list_names(root)
    if text and text not in names:
        what = "" if pointed else ", not a checkpoint's name"
        log(f"warning: {root / LATEST} names {text[:80]!r}{what}, which is not in {root / CHECKPOINTS}")
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
    removed = prunable(root, keep_last, protect)
    for name in removed:
        shutil.rmtree(root / CHECKPOINTS / name, ignore_errors=True)
    for stale in (root / CHECKPOINTS).glob(".partial-*") if (root / CHECKPOINTS).is_dir() else ():
        shutil.rmtree(stale, ignore_errors=True)
    return removed


def size_of(root: Path, name: str) -> int:
    """Bytes the files of checkpoint ``name`` take: what the next save is expected to need (a phase's checkpoints
    are all alike in size), learnt from the newest one rather than estimated."""
    return sum(path.stat().st_size for path in regular_files(root / CHECKPOINTS / name))


def prunable(root: Path, keep_last: int, protect: Iterable[str] = ()) -> list[str]:
    """What :func:`prune` with these arguments would delete (nothing is deleted here)."""
    names = list_names(root)
    keep = set(names[-keep_last:] if keep_last > 0 else []) | set(protect) | {read_latest(root)}
    return [n for n in names if n not in keep]


def torch_save(obj: Any, path: Path) -> None:
    """``torch.save`` through a Python file, so a full disk raises ``OSError(ENOSPC)`` (given a path, torch raises an opaque error)."""
    import torch  # only a session's writes need torch: status, the stores and the Kaggle commands read this module without it

    with open(path, "wb") as handle:
        torch.save(obj, handle)


def write_files(folder: Path, *, models: Mapping[str, Any], optimizers: Mapping[str, Any], schedulers: Mapping[str, Any],
                scaler: Any, state: TrainerState, config: dict[str, Any], files: Mapping[str, bytes], loss_plot: bytes | None) -> None:
    """Every file of one checkpoint into ``folder`` (the ``write`` of :func:`save`); :func:`load_files` reads them back.

    ``models``: the task's torch modules by name; ``optimizers``, ``schedulers``: by optimizer group;
    ``files``: the task's own and the newest validation's, by relative path (:func:`save`'s manifest
    checks them); ``loss_plot``: a PNG, drawn only for a checkpoint a person will look at (a pushed
    or a session's final one).
    """
    from safetensors.torch import save_model  # imports torch, which only a session's writes need (see torch_save)

    for name, model in models.items():
        save_model(model, str(folder / weights_file(name)))
    torch_save({name: optimizer.state_dict() for name, optimizer in optimizers.items()}, folder / OPTIMIZERS)
    torch_save({name: scheduler.state_dict() for name, scheduler in schedulers.items()}, folder / SCHEDULERS)
    torch_save(scaler.state_dict(), folder / SCALER)
    (folder / STATE).write_text(state.to_json())
    (folder / CONFIG).write_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True))
    for rel, data in files.items():
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    if loss_plot:
        (folder / LOSS_PLOT).write_bytes(loss_plot)


def read_state(folder: Path, note: Callable[[str], None] = lambda _: None) -> TrainerState:
    """The trainer's state saved in checkpoint ``folder``: read before anything is built, to refuse drift.

    ``note`` hears of keys a newer fintts wrote that this one drops (:meth:`TrainerState.from_json`)."""
    return TrainerState.from_json((folder / STATE).read_text(), note)


def load_files(folder: Path, *, models: Mapping[str, Any], optimizers: Mapping[str, Any], schedulers: Mapping[str, Any],
               device: Any) -> dict[str, Any]:
    """Load what :func:`write_files` saved into the models, optimizers and schedulers built now; return the scaler's state.

    ``device``: where the weights go (a ``torch.device``). The scaler's state is returned, not
    loaded: whether it applies depends on the precision now (``session/resume.py``). Weights that
    do not fit raise :class:`WeightsDoNotFit` before anything else is loaded.
    """
    import torch  # see torch_save
    from safetensors.torch import load_model  # see write_files

    for name, model in models.items():
        try:
            load_model(model, str(folder / weights_file(name)), strict=True, device=str(device))
        except RuntimeError as err:  # shapes that do not fit: say why, not a strict-load dump
            raise WeightsDoNotFit(name, str(err).strip().splitlines()[-1].strip()) from None
    # on the CPU: the optimizer moves its tensors to its parameters' device itself, and keeps
    # AdamW's step counters on the CPU where it wants them (on the GPU each step would sync on them)
    saved_optimizers = torch.load(folder / OPTIMIZERS, map_location="cpu", weights_only=True)
    saved_schedulers = torch.load(folder / SCHEDULERS, weights_only=True)
    for name, optimizer in optimizers.items():
        optimizer.load_state_dict(saved_optimizers[name])
        schedulers[name].load_state_dict(saved_schedulers[name])
    return torch.load(folder / SCALER, weights_only=True)
