"""What a session says when training itself stops it: a failed validation, divergence, a device out of memory, a full disk.

Each is said once, in words that name what to change; the caller keeps it in the session's
warnings (so the status and the summary carry it) and logs it.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import NoReturn

from fintts.train.processes.collective import read_note
from fintts.train.run import checkpoint
from fintts.train.run.layout import TENSORBOARD_DIR
from fintts.train.run.state import TrainerState
from fintts.train.step.building import BuiltPhase
from fintts.train.step.optimizer_step import OutOfMemory
from fintts.train.step.stepping import first_line


class ValidationFailed(RuntimeError):
    """Another process's validation raised; every process ends the session with it (the vote said so)."""


def validation_failed(error: BaseException | None, processes: tuple[int, ...], *, rank: int, step: int) -> NoReturn:
    """The vote found an error in some process's validation: each process ends the session with it (``error``: this one's)."""
    if rank in processes:
        raise error
    raise ValidationFailed(f"validation failed in process {min(processes)} at step {step}")


def diverged(why: str, *, step: int, latest: str | None) -> str:
    """Training went bad: the session ends keeping the last good checkpoint (``latest``; no new one is saved)."""
    return (
        f"training diverged at step {step}: {why}. No checkpoint was saved since the trouble began; "
        f"{latest or 'no checkpoint'} is kept as latest. Lower lr, set a gradient clip, or use precision=bf16 or fp32 "
        "(fp16 overflows most easily), then run again (with --allow-config-change for changed settings)"
    )


def out_of_memory(step: OutOfMemory, built: BuiltPhase, *, at: int, world: int, rank: int) -> str:
    """A device ran out of memory: where, and what to change; the session ends saving where it was (the step is redone)."""
    cfg = built.cfg
    world_batch = cfg.batch_size // world
    smaller = next((m for m in range(built.micro - 1, 0, -1) if world_batch % m == 0), None)
    advice = [
        f"micro_batch_size={smaller} (batch_size={cfg.batch_size} stays: {world_batch // smaller} micro-batches "
        "are accumulated per step, same result, slower)"
    ] if smaller else []
    advice += built.task.memory_advice()
    first = step.processes[0]
    message = first_line(step.error) if step.error is not None and first == rank else read_note("out-of-memory", first)
    where = f" in process {first}" if world > 1 else ""
    return (
        f"out of memory{where} at step {at + 1} ({message or 'out of memory'}). The session saved step "
        f"{at} and stopped; the same batch comes again at the same step, so run again with less memory per step: "
        + ("; ".join(advice) if advice else "a smaller model or shorter clips")
    )


def latest_not_written(name: str, root: Path) -> str:
    """Checkpoint ``name`` is whole but ``latest`` could not name it (:class:`checkpoint.LatestNotWritten`)."""
    return (
        f"the disk under {root} is full ({os.strerror(errno.ENOSPC)}): checkpoint {name} was written whole, but there was "
        f"no room left for {root / checkpoint.LATEST} to name it, so that file was removed; without it the next session "
        f"resumes from the newest complete checkpoint, {name}. Free space (a smaller keep_last, or delete {root / TENSORBOARD_DIR}), "
        f"then run again"
    )


def disk_full(name: str, state: TrainerState, root: Path) -> str:
    """Checkpoint ``name`` could not be written: the best is no longer said to be in it; what is intact, and what to do."""
    if state.best_checkpoint == name:
        state.best_checkpoint = None
    latest = checkpoint.current(root)
    return (
        f"the disk under {root} is full ({os.strerror(errno.ENOSPC)}): checkpoint {name} was not written and its "
        f"partial folder was removed; {latest or 'no checkpoint'} is intact as latest. Free space (a smaller keep_last, "
        f"or delete {root / TENSORBOARD_DIR}), then run again: the run continues from {latest or 'the start'}"
    )
