"""A checkpoint of the phase being trained (its files: :mod:`fintts.train.run.checkpoint`), and the run's ``model/`` export
replaced so that a full disk costs nothing already saved."""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Callable
from pathlib import Path

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
    """One checkpoint of the phase ``built`` into ``folder`` (:func:`checkpoint.write_files`); ``samples``: the newest
    validation's files; ``plot``: draw its loss plot (only for a checkpoint a person will look at: a pushed or a session's final one)."""
    checkpoint.write_files(
        folder, models=built.raw_models, optimizers={g.name: g.optimizer for g in built.groups}, schedulers=built.schedulers,
        scaler=built.scaler, state=state, config=built.config.to_dict(),
        files={**built.task.checkpoint_files(built.raw_models), **samples},
        loss_plot=loss_plot_png(state.history, state.evals) if plot else None,
    )
