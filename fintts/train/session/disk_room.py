"""Room on the disk for the next checkpoint, made before it is written: a disk must not fill in the middle of a session.

A full disk mid-save is survived (:mod:`fintts.train.session.saving`: the partial folder goes, ``latest`` stays), but
it ends the session: hours of a Kaggle session lost. Chatterbox's full phase makes that likely on Kaggle's 20 GB working
disk: its checkpoints are 6.41 GB, and with ``keep_last: 1`` the latest, the best and the one being written, plus
``model/``, come to ~25.6 GB (docs/chatterbox.md, "Memory and disk on a T4"). So before a checkpoint due by steps or time,
the main process compares the free space with what the newest checkpoint took (a phase's checkpoints are all alike in
size: learnt, not estimated), plus :data:`HEADROOM`. When it does not fit it first deletes what ``keep_last`` would
delete once this one is written (never ``latest``, the best or a phase's end: :func:`fintts.train.run.checkpoint.prune`'s
rules); only when that would make room, so nothing is given up for a save that is then skipped anyway. Otherwise,
where a checkpoint kept now (the best) would make room once a later save frees it, the save is skipped, with one line
saying so, and the session trains on: the next due save tries again (a new best frees the old one's folder then). Where
nothing could ever make room, the save goes ahead and a full disk ends the session as before, its hours not spent on
steps no save could keep. The best checkpoint itself is kept: its folder is what ``fintts publish`` and a status name,
and ``model/`` is not always its export. The answer is the main process's alone (only it reads the disk); the other
processes do the same whether it writes or not (they give their random streams, then vote on a full disk), and a
skipped save is not a full one, so the save's vote sends every process on together (:func:`fintts.train.session.saving.save`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from fintts.train.run import checkpoint
from fintts.train.run.layout import CHECKPOINTS
from fintts.train.stores.base import Store

#: What a save writes beyond the checkpoint's own folder (``latest``, the status, a loss plot, TensorBoard's events),
#: as a share of the checkpoint's size.
HEADROOM = 0.05


@dataclasses.dataclass(frozen=True)
class Room:
    """Whether the next checkpoint fits, what was deleted to make it fit, and the figures behind the answer."""

    fits: bool
    needed: int = 0
    free: int = 0
    pruned: tuple[str, ...] = ()


def make_room(store: Store, keep_last: int, protect: Iterable[str]) -> Room:
    """Room for one more checkpoint in ``store`` (main process), pruning early what ``keep_last`` allows if need be."""
    newest = checkpoint.current(store.root)
    if newest is None or not (store.root / CHECKPOINTS / newest).is_dir():
        return Room(fits=True)  # nothing to learn the size from: the first save (a full disk is still survived)
    needed = int(checkpoint.size_of(store.root, newest) * (1 + HEADROOM))
    free = store.free_bytes()
    if free >= needed:
        return Room(fits=True, needed=needed, free=free)
    protect = set(protect)
    early = checkpoint.prunable(store.root, max(keep_last - 1, 0), protect)
    if free + sum(checkpoint.size_of(store.root, name) for name in early) < needed:
        # skipping helps only where a later save can find the room a checkpoint kept now (the best) will give back;
        # where even they all would not make room, no save ever fits: this one goes ahead, and the full disk ends the
        # session with `latest` intact (saving.py) rather than training on for hours that no save can keep
        latest = checkpoint.read_latest(store.root)
        kept = sum(checkpoint.size_of(store.root, name) for name in checkpoint.list_names(store.root) if name != latest)
        return Room(fits=free + kept < needed, needed=needed, free=free)
    pruned = tuple(store.prune(max(keep_last - 1, 0), protect))
    return Room(fits=True, needed=needed, free=store.free_bytes(), pruned=pruned)
