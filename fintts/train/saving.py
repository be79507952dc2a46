"""Writing a checkpoint's files and the run's ``model/`` export so that a full disk costs nothing already saved."""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path
from typing import Any, Callable

import torch


def is_disk_full(err: BaseException | None) -> bool:
    """ENOSPC or EDQUOT, also when a library reports it as its own error (safetensors: "No space left on device")."""
    while err is not None:
        if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if any(text in str(err) for text in (os.strerror(errno.ENOSPC), os.strerror(errno.EDQUOT))):
            return True
        err = err.__cause__ or err.__context__
    return False

def torch_save(obj: Any, path: Path) -> None:
    """``torch.save`` through a Python file, so a full disk raises ``OSError(ENOSPC)`` (given a path, torch raises an opaque error)."""
    with open(path, "wb") as handle:
        torch.save(obj, handle)


def replace_export(final: Path, write: Callable[[Path], None]) -> Exception | None:
    """Replace the folder ``final`` with what ``write`` puts in a fresh one, never leaving a half-written folder.

    A disk too full for the export (or any other ``OSError``) keeps the previous folder and
    returns the error: an export never stops training or the checkpoint it accompanies.
    """
    fresh, stale = final.with_name(f".{final.name}-new"), final.with_name(f".{final.name}-old")
    for leftover in (fresh, stale):
        shutil.rmtree(leftover, ignore_errors=True)
    try:
        write(fresh)
        if final.exists():
            os.replace(final, stale)
        os.replace(fresh, final)
    except Exception as err:
        if not (isinstance(err, OSError) or is_disk_full(err)):
            raise
        shutil.rmtree(fresh, ignore_errors=True)
        if stale.exists() and not final.exists():
            os.replace(stale, final)
        return err
    shutil.rmtree(stale, ignore_errors=True)
    return None
