"""The toy task, failing on purpose at a chosen step: what the trainer must survive, raised for real.

``fault`` picks what happens from the ``fault_at``-th micro-batch of the model group in
this process (with ``micro_batch_size`` = ``batch_size``, the ``fault_at``-th step of a new
run) for ``fault_steps`` micro-batches (0: for ever):

- ``nan``: the loss is NaN (in fp16 the GradScaler then skips every step);
- ``nan-grad``: the loss stays finite but its gradients are NaN (``sqrt`` at 0);
- ``spike``: the loss is 1000 times larger;
- ``oom``: ``torch.OutOfMemoryError``, the exception CUDA raises (the trainer's handling is what is tested);
- ``escape``: every validation returns a sample file named ``../../../escaped.json``;
- ``eval-error``: the ``fault_at``-th validation raises ``ValueError``;
- ``slow-status``: describing the run for its status (main process only, at the start and in
  every save) takes ``fault_seconds``: the main process is held back while the others go on;
- ``linger``: after its session the process never leaves the process group, so it never exits
  (as a NCCL teardown can hang).

``fault_rank`` picks the process the fault happens in (-1: every process).
"""

from __future__ import annotations

import dataclasses
import time

import torch

from fintts.examples.toy import ToyConfig, ToyTask
from fintts.train.config import free_setting
from fintts.train.task import Evaluation


def _hang(*args, **kwargs) -> None:
    time.sleep(600)


@dataclasses.dataclass
class FaultyConfig(ToyConfig):
    fault: str = free_setting("")
    fault_at: int = free_setting(1)
    fault_steps: int = free_setting(1)
    fault_rank: int = free_setting(-1)
    fault_seconds: float = free_setting(0.0)


class FaultyToy(ToyTask):
    config_class = FaultyConfig

    def _here(self) -> bool:
        rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
        return self.config.fault_rank in (-1, rank)

    def _faulting(self) -> bool:
        cfg = self.config
        self._calls = getattr(self, "_calls", 0) + 1
        return self._calls >= cfg.fault_at and (not cfg.fault_steps or self._calls < cfg.fault_at + cfg.fault_steps)

    def step(self, models, batch, group):
        losses = super().step(models, batch, group)
        if self.config.fault == "linger" and self._here():
            torch.distributed.destroy_process_group = _hang
        if group != "model" or self.config.fault not in ("nan", "nan-grad", "spike", "oom") or not self._here() or not self._faulting():
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
        if self.config.fault == "eval-error" and self._here():
            self._validations = getattr(self, "_validations", 0) + 1
            if self._validations == self.config.fault_at:
                raise ValueError(f"validation broke at step {step} (raised by the test task)")
        evaluation = super().evaluate(models, step)
        if self.config.fault == "escape":
            evaluation.files["../../../escaped.json"] = b'{"written": "outside the checkpoint"}'
        return evaluation

    def describe(self):
        if self.config.fault == "slow-status" and self._here():
            time.sleep(self.config.fault_seconds)
        return super().describe()
