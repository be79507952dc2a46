"""The pieces of one optimizer step that need no trainer: autocast, the device switches, the
learning-rate schedule and moving a batch to the device (precision and out-of-memory have
modules of their own, which the bench uses too)."""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Iterator
from typing import Any

import torch

AUTOCAST_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": None}


@contextlib.contextmanager
def cuda_switches(cudnn_benchmark: bool, tf32: bool) -> Iterator[None]:
    """cuDNN autotuning and TF32 for one session; torch's process-wide flags are put back after.

    Neither changes anything on a CPU. ``set_float32_matmul_precision`` rather than
    ``torch.backends.cuda.matmul.allow_tf32``: newer torch refuses to mix that legacy flag
    with its new per-backend precision settings, and this call works with both.
    """
    saved = torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32, torch.get_float32_matmul_precision()
    torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32 = cudnn_benchmark, tf32
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    try:
        yield
    finally:
        torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32 = saved[:2]
        torch.set_float32_matmul_precision(saved[2])

def lr_factor(cfg, step: int) -> float:
    """Warm-up then decay, as a factor of each optimizer's base learning rate."""
    warm = min(1.0, (step + 1) / cfg.warmup_steps) if cfg.warmup_steps else 1.0
    if cfg.lr_schedule == "exponential":
        return warm * cfg.lr_decay ** step
    if cfg.lr_schedule == "cosine":
        progress = min(step / max(1, cfg.decay_steps), 1.0)
        return warm * 0.5 * (1.0 + math.cos(math.pi * progress))
    return warm

def to_device(batch: Any, device: torch.device) -> Any:
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, dict):
        return {k: to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(v, device) for v in batch)
    if dataclasses.is_dataclass(batch):
        return dataclasses.replace(batch, **{f.name: to_device(getattr(batch, f.name), device) for f in dataclasses.fields(batch)})
    return batch

def first_line(err: BaseException) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
