"""A prepared corpus written beside the old one and swapped in whole, so that a table never meets another run's clips.

``fintts prepare`` owns three entries of its ``--out`` folder: ``wavs/``, ``metadata.csv`` and
``clips.tsv``; anything else there (the recordings themselves, a README) is never touched. A run
writes them into ``<out>/.preparing/``; an interrupted run leaves only that, which the next run
discards. When all is written, ``READY`` marks the staging as complete and the swap begins:

1. the old ``metadata.csv`` is renamed aside, to ``metadata.csv.<UTC time>.bak`` (it may hold
   transcripts someone typed: kept, never deleted);
2. the old ``wavs/`` and ``clips.tsv`` move to ``<out>/.replaced/``, the new ones take their place;
3. the new ``metadata.csv`` moves in last, and ``.replaced/`` and ``.preparing/`` are deleted.

A kill at any moment leaves either the old table with the old clips, no table (between 1 and 3),
or the new table with the new clips; the next run finishes a swap that ``READY`` marks (the
steps are idempotent) before anything else.
"""

from __future__ import annotations

import datetime
import os
import shutil
from pathlib import Path

from fintts.tts.corpus.ljspeech import METADATA

#: the clips' folder and the side table of where each clip came from (tab-separated; not read by ``fintts check``)
WAVS = "wavs"
CLIPS_TABLE = "clips.tsv"
STAGING = ".preparing"
REPLACED = ".replaced"
READY = "READY"


def recover(out: Path) -> None:
    """Finish a swap an earlier run was stopped in, or discard what it had not finished writing."""
    stage = out / STAGING
    if (stage / READY).exists():
        swap(out)
    elif stage.exists():
        shutil.rmtree(stage)
    if (out / REPLACED).exists():
        shutil.rmtree(out / REPLACED)


def existing(out: Path) -> list[str]:
    """What of a corpus ``out`` already holds: the table, the clips (``wavs/`` with anything in it), the side table."""
    wavs = out / WAVS
    found = [METADATA] if (out / METADATA).exists() else []
    if wavs.is_dir() and any(wavs.iterdir()):
        found.append(f"{WAVS}/")
    return found + ([CLIPS_TABLE] if (out / CLIPS_TABLE).exists() else [])


def start(out: Path) -> Path:
    """An empty staging folder in ``out``, with its ``wavs/``."""
    stage = out / STAGING
    (stage / WAVS).mkdir(parents=True)
    return stage


def swap(out: Path) -> Path | None:
    """Mark the staging complete and move it in (see the module's docstring); the old table's new name, if any."""
    stage, old = out / STAGING, out / REPLACED
    (stage / READY).touch()
    kept = None
    if (stage / METADATA).exists() and (out / METADATA).exists():
        kept = _aside(out / METADATA)
    old.mkdir(exist_ok=True)
    for name in (WAVS, CLIPS_TABLE):
        if (stage / name).exists():
            if (out / name).exists():
                if (old / name).exists():
                    shutil.rmtree(old / name) if (old / name).is_dir() else (old / name).unlink()
                os.replace(out / name, old / name)
            os.replace(stage / name, out / name)
    if (stage / METADATA).exists():
        os.replace(stage / METADATA, out / METADATA)
    shutil.rmtree(old)
    shutil.rmtree(stage)
    return kept


def _aside(table: Path) -> Path:
    """``table`` renamed to ``<name>.<UTC time>.bak`` (``-2``, ``-3``… when that name is taken)."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
    target, n = table.with_name(f"{table.name}.{stamp}.bak"), 1
    while target.exists():
        n += 1
        target = table.with_name(f"{table.name}.{stamp}-{n}.bak")
    os.replace(table, target)
    return target
