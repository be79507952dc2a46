"""Is training still healthy? Which steps to skip, and when a run has diverged.

A session runs unattended for hours. A loss that turned NaN must not keep stepping the
schedule, saving and pushing until the quota is gone, and a NaN must never reach the
weights that a checkpoint makes ``latest``. After the backward pass of each optimizer step,
and before any optimizer steps, the trainer asks :meth:`StepGuard.judge` about the step's
main loss and its gradient norms; a *bad* step is skipped (no optimizer updates its
weights, the data moves on):

- **non-finite gradients** (inf/NaN in any gradient after unscaling): in fp16 with a finite
  loss this is an *overflow*, which the GradScaler skips by itself and answers by halving its
  scale — routine while it finds its scale, so it is not reported step by step; in bf16/fp32
  nothing would skip it, so the trainer does — a finite loss with NaN gradients would
  otherwise put NaN into every weight;
- **a non-finite loss**;
- **a loss spike**: the main loss above ``spike_factor`` times the median of the last
  ``spike_window`` applied steps (once ten are known; a median, so one outlier does not
  move it). Off with ``spike_factor: 0``.

:meth:`StepGuard.verdict` says when to stop: ``max_skipped_steps`` bad steps in a row, or in
fp16 a loss scale below ``min_loss_scale`` (below 1 the gradients overflow fp16 even
unscaled). The trainer writes no checkpoint while bad steps are in a row, so ``latest``
stays the last one saved before the trouble; the session then ends as *failed* with the
advice in the message. The recent losses are part of the trainer state, so a resumed run
judges its steps exactly as an unbroken one would.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Iterable
from typing import Any

import torch

#: Applied steps needed before the spike test starts.
SPIKE_WARMUP = 10
#: Why an fp16 step with a finite loss and overflowing gradients was skipped: the GradScaler's routine, not news.
FP16_OVERFLOW = "fp16 overflow (non-finite gradients)"


def gradient_norm(parameters: Iterable[torch.Tensor], device: torch.device) -> torch.Tensor:
    """The L2 norm of the parameters' gradients (float32, on ``device``, no host sync); 0 when none has one."""
    norms = [torch.linalg.vector_norm(p.grad.detach(), dtype=torch.float32) for p in parameters if p.grad is not None]
    return torch.linalg.vector_norm(torch.stack(norms)) if norms else torch.zeros((), device=device)


@dataclasses.dataclass
class StepGuard:
    max_skipped: int
    min_loss_scale: float
    spike_factor: float
    spike_window: int
    #: main losses of the newest applied steps (persisted with the trainer state).
    recent: list[float] = dataclasses.field(default_factory=list)
    #: bad steps in a row now, and skipped steps of the whole run.
    in_row: int = 0
    skipped: int = 0
    last_problem: str | None = None

    def judge(self, loss: float, grad_norms: list[float], *, fp16: bool = False) -> str | None:
        """Why this step must be skipped (``None``: apply it)."""
        if not all(math.isfinite(n) for n in grad_norms):
            if not math.isfinite(loss):
                return "non-finite loss"
            return FP16_OVERFLOW if fp16 else "non-finite gradients"
        if not math.isfinite(loss):
            return "non-finite loss"
        if self.spike_factor and len(self.recent) >= SPIKE_WARMUP:
            median = statistics.median(self.recent)
            if median > 0 and loss > self.spike_factor * median:
                return f"loss spike ({loss:.4g} > {self.spike_factor:g} × the recent median {median:.4g})"
        return None

    def record(self, loss: float, problem: str | None) -> None:
        if problem is None:
            self.in_row = 0
            self.recent = (self.recent + [loss])[-self.spike_window:]
        else:
            self.in_row += 1
            self.skipped += 1
            self.last_problem = problem

    def verdict(self, loss_scale: float | None) -> str | None:
        """Why training must stop now (``None``: go on). ``loss_scale``: fp16's GradScaler scale, else ``None``."""
        if self.in_row >= self.max_skipped > 0:
            return f"{self.in_row} steps in a row were skipped ({self.last_problem})"
        if loss_scale is not None and loss_scale < self.min_loss_scale:
            return (
                f"the fp16 loss scale fell to {loss_scale:.3g}, below min_loss_scale={self.min_loss_scale:g}: the gradients "
                "overflow fp16 even unscaled"
            )
        return None

    def state(self) -> dict[str, Any]:
        return {"recent": list(self.recent), "skipped": self.skipped}

    def restore(self, state: dict[str, Any]) -> None:
        self.recent = [float(v) for v in state.get("recent", [])][-self.spike_window:]
        self.skipped = int(state.get("skipped", 0))
