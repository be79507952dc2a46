"""Has the data changed since the checkpoint a run resumes from? (The trainer's side of :class:`DataFingerprint`.)

The comparison is by item id and size, which is what a person changes when they add,
remove or replace clips; it costs one ``stat`` per item, not a read. What each kind of
change means for the run is decided in :class:`fintts.train.task.DataFingerprint`'s
docstring; here the changes are found and said in words, with a few examples.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from fintts.train.task import DataFingerprint

EXAMPLES = 3


@dataclasses.dataclass
class DataChanges:
    """Each field: what changed, in words, or ``None``."""

    items: str | None = None
    heldout: str | None = None
    labels: str | None = None


def compare(saved: Mapping[str, Any] | None, current: DataFingerprint | None) -> DataChanges:
    """The changes from the fingerprint a checkpoint ``saved`` to ``current`` (none when either is missing)."""
    if not saved or current is None:
        return DataChanges()
    return DataChanges(
        items=_items(saved.get("items") or {}, current.items, "training items"),
        heldout=_items(saved.get("heldout") or {}, current.heldout, "held-out items"),
        labels=_labels(list(saved.get("labels") or []), current.labels),
    )


def _items(before: Mapping[str, int], now: Mapping[str, int], noun: str) -> str | None:
    added = sorted(set(now) - set(before))
    removed = sorted(set(before) - set(now))
    resized = sorted(k for k in set(now) & set(before) if now[k] != before[k])
    parts = [f"{len(ids)} {what} ({_examples(ids)})" for ids, what in ((added, "added"), (removed, "removed"), (resized, "changed size"))
             if ids]
    return f"{noun}: " + ", ".join(parts) if parts else None


def _labels(before: list[str], now: list[str]) -> str | None:
    if before == now:
        return None
    added, removed = [n for n in now if n not in before], [n for n in before if n not in now]
    parts = [f"added {', '.join(added)}"] if added else []
    parts += [f"removed {', '.join(removed)}"] if removed else []
    return f"{', '.join(parts) or 'reordered'} (was: {', '.join(before) or 'none'}; now: {', '.join(now) or 'none'})"


def _examples(ids: list[str]) -> str:
    shown = ", ".join(ids[:EXAMPLES])
    return shown + (f" and {len(ids) - EXAMPLES} more" if len(ids) > EXAMPLES else "")
