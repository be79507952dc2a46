"""The GPU check's judgements that its VITS parts (gpu_parts.py) and its Chatterbox part (gpu_chatterbox.py) share.

A module of their own, so that the Chatterbox part needs nothing of the VITS parts' file, which starts it.
"""

from __future__ import annotations

import gc

import torch

#: at most this share of an fp16 run's steps may be skipped by the loss scaler (it halves its scale on each).
MAX_SKIPPED_SHARE = 0.25


def release() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def is_oom(err: BaseException) -> bool:
    from fintts.train.step.memory import is_out_of_memory

    return is_out_of_memory(err)


def scaler_story(row: dict) -> tuple[str, bool]:
    """What the loss scaler did in one fp16 row, and whether it is healthy.

    A fresh GradScaler starts at 2**16 and halves its scale on every step whose gradients
    overflow fp16, skipping that step: the first steps of every fp16 run are its search for a
    scale, routine and not a storm. A storm is skipping on after that, or a scale below 1.
    """
    skipped, steps = row["skipped_steps"], row["steps"]
    first = next((step for step in range(steps) if step not in skipped), None)
    if first is None:
        return f"batch {row['batch']}: all {steps} steps skipped (scale {row['loss_scale']:g})", False
    later = [step for step in skipped if step > first]
    healthy = len(later) <= MAX_SKIPPED_SHARE * (steps - first) and row["loss_scale"] >= 1
    return (f"batch {row['batch']}: its search skipped the first {first} step(s), then {len(later)} of {steps - first} "
            f"skipped; scale {row['loss_scale']:g}"), healthy
