"""Writing a checkpoint's files, and the run's ``model/`` export so that a full disk costs nothing already saved."""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import yaml
from safetensors.torch import save_model

from fintts.train.report.summary import loss_plot_png
from fintts.train.run import checkpoint
from fintts.train.run.state import TrainerState
from fintts.train.step.building import BuiltPhase


def is_disk_full(err: BaseException | None) -> bool:
    """ENOSPC or EDQUOT, also when a library reports it as its own error (safetensors: "No space left on device")."""
    while err is not None:
        if isinstance(err, OSError) and err.errno in checkpoint.DISK_FULL:
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


def write_checkpoint(folder: Path, built: BuiltPhase, state: TrainerState, samples: dict[str, bytes], *, plot: bool) -> None:
    """Every file of one checkpoint (see the design's checkpoint folder) into ``folder``; ``samples``: the newest validation's;
    ``plot``: draw its loss plot (only for a checkpoint a person will look at: a pushed or a session's final one)."""
    for name, model in built.raw_models.items():
        save_model(model, str(folder / f"{name}.safetensors"))
    torch_save({g.name: g.optimizer.state_dict() for g in built.groups}, folder / "optim.pt")
    torch_save({g.name: s.state_dict() for g, s in zip(built.groups, built.schedulers.values())}, folder / "sched.pt")
    torch_save(built.scaler.state_dict(), folder / "scaler.pt")
    (folder / "state.json").write_text(state.to_json())
    # the settings this checkpoint's phase trains with (resolved values included), for `fintts eval` and people
    (folder / "config.yaml").write_text(yaml.safe_dump(built.config.to_dict(), sort_keys=False, allow_unicode=True))
    # the task's own files, and the newest validation's samples (state.json's evals say at which step)
    for rel, data in {**built.task.checkpoint_files(built.raw_models), **samples}.items():
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    png = loss_plot_png(state.history, state.evals) if plot else None
    if png:
        (folder / "loss.png").write_bytes(png)
