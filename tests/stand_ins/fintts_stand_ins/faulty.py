"""The toy task, failing on purpose at a chosen step: what the trainer must survive, raised for real.

``fault`` picks what happens from the ``fault_at``-th micro-batch of the model group in
this process (with ``micro_batch_size`` = ``batch_size``, the ``fault_at``-th step of a new
run) for ``fault_steps`` micro-batches (0: for ever):

- ``nan``: the loss is NaN (in fp16 the GradScaler then skips every step);
- ``nan-grad``: the loss stays finite but its gradients are NaN (``sqrt`` at 0);
- ``spike``: the loss is 1000 times larger;
- ``oom``: ``torch.OutOfMemoryError``, the exception CUDA raises (the trainer's handling is what is tested);
- ``escape``: every validation returns a sample file named ``../../../escaped.json``.
"""

from __future__ import annotations

import dataclasses

import torch

from fintts.train.config import free_setting
from fintts.train.task import Evaluation
from fintts_stand_ins.toy import ToyConfig, ToyTask


@dataclasses.dataclass
class FaultyConfig(ToyConfig):
    fault: str = free_setting("")
    fault_at: int = free_setting(1)
    fault_steps: int = free_setting(1)


class FaultyToy(ToyTask):
    config_class = FaultyConfig

    def _faulting(self) -> bool:
        cfg = self.config
        self._calls = getattr(self, "_calls", 0) + 1
        return self._calls >= cfg.fault_at and (not cfg.fault_steps or self._calls < cfg.fault_at + cfg.fault_steps)

    def step(self, models, batch, group):
        losses = super().step(models, batch, group)
        if group != "model" or self.config.fault not in ("nan", "nan-grad", "spike", "oom") or not self._faulting():
            return losses
        loss = losses["loss"]
        if self.config.fault == "oom":
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (raised by the test task)")
        if self.config.fault == "nan":
            loss = loss * float("nan")
        elif self.config.fault == "nan-grad":
            anchor = next(models["model"].parameters())
            loss = loss + torch.sqrt((anchor - anchor).sum())  # value + 0, gradient inf * 0 = NaN
        else:
            loss = loss * 1000
        return {**losses, "loss": loss}

    def evaluate(self, models, step) -> Evaluation:
        evaluation = super().evaluate(models, step)
        if self.config.fault == "escape":
            evaluation.files["../../../escaped.json"] = b'{"written": "outside the checkpoint"}'
        return evaluation
