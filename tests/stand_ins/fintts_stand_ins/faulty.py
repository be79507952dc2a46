"""The toy task, failing on purpose at a chosen step: what the trainer must survive, raised for real.

``fault`` picks what happens from the ``fault_at``-th micro-batch of the model group in
this process (with ``micro_batch_size`` = ``batch_size``, the ``fault_at``-th step of a new
run) for ``fault_steps`` micro-batches (0: for ever):

- ``nan``: the loss is NaN (in fp16 the GradScaler then skips every step);
- ``nan-grad``: the loss stays finite but its gradients are NaN (``sqrt`` at 0);
- ``spike``: the loss is 1000 times larger;
- ``oom``: ``torch.OutOfMemoryError``, the exception CUDA raises (the trainer's handling is what is tested);
- ``escape``: every validation returns a sample file named ``../../../escaped.json``;
- ``cuda``: a ``RuntimeError`` as CUDA raises it for a device fault (not out of memory);
- ``eval-bug``: every validation from step ``fault_at`` on raises (a bug in the task's ``evaluate``);
- ``eval-error``: the ``fault_at``-th validation raises ``ValueError``;
- ``slow-status``: describing the run for its status (main process only, at the start and in
  every save) takes ``fault_seconds``: the main process is held back while the others go on;
- ``slow-export``: the export's slow part (:meth:`Task.export_later`, as a voice's ONNX graphs) takes
  ``fault_seconds`` and then writes ``derived.json`` with the sha256 of the folder's ``model.safetensors``
  (what it was made from), so a test can see that ``model/`` never mixes weights;
- ``linger``: after its session the process never leaves the process group, so it never exits
  (as a NCCL teardown can hang);
- ``hang``: the process sleeps for ever in its ``fault_at``-th micro-batch (a hung device or data
  loader: its peers wait for it in their next collective);
- ``crash``: the process ends at once in its ``fault_at``-th micro-batch, exit code 1, outside any
  vote and without a word (as the kernel's OOM killer or a segfault ends it);
- ``vanish``: as ``crash``, but the process's connections outlive it (a child it forks holds them until
  fintts's launcher has ended, at most :data:`VANISHED_FOR` seconds; without that launcher, torchrun's
  say, not at all): its peers' next collective does not fail, as a NCCL collective need not when a peer
  dies (only the launcher sees the process end), where gloo's fails at once with "Connection closed by peer".

``fault_rank`` picks the process the fault happens in (-1: every process).

``oom_above`` (any ``fault``): every micro-batch of more than that many items raises
``torch.OutOfMemoryError``, as a device with room for ``oom_above`` items would (0: never).
``noise_dir``: each process writes the first random draw of its first step (what dropout and
a VITS posterior would get) to ``noise_dir/rank-<rank>.json``. ``probe_dir``: each process writes
what it holds at its first step to ``probe_dir/rank-<rank>.json`` (:func:`_probe`).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import time
from pathlib import Path

import torch

from fintts.train.config import free_setting
from fintts.train.task import Evaluation
from fintts_stand_ins.toy import ToyConfig, ToyTask

#: Seconds at most that a ``vanish``-ed process's connections outlive it.
VANISHED_FOR = 600.0


def _hang(*args, **kwargs) -> None:
    time.sleep(600)


def _vanish() -> None:
    """End this process (exit code 1) with its sockets held open by a child until the launcher is gone (see ``vanish``)."""
    if os.fork() == 0:
        launcher, until = int(os.environ.get("FINTTS_LAUNCHER_PID", "0")), time.time() + VANISHED_FOR
        while time.time() < until and launcher and Path(f"/proc/{launcher}").exists():
            time.sleep(0.1)
        os._exit(0)
    os._exit(1)


def _probe(folder: str, rank: int) -> None:
    """What this process holds, as a test reads it: its environment (``env``, its own ``os.environ``, what torch reads
    when it makes the process group), the Hugging Face token huggingface_hub would find (``token``: the variables, then
    the file at ``HF_TOKEN_PATH``), and its process group's timeout in seconds (``collective_timeout``)."""
    from huggingface_hub import get_token

    group = None
    if torch.distributed.is_initialized():
        device = torch.device("cuda" if torch.distributed.get_backend() == "nccl" else "cpu")
        group = torch.distributed.group.WORLD._get_backend(device)
    facts = {"env": dict(os.environ), "token": get_token(),
             "collective_timeout": group.options._timeout.total_seconds() if group is not None else None}
    Path(folder, f"rank-{rank}.json").write_text(json.dumps(facts))


def _derive_slowly(seconds: float, folder: Path) -> None:
    time.sleep(seconds)
    digest = hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()
    (folder / "derived.json").write_text(json.dumps({"model.safetensors": digest}))


def _derive_observed(record: str, seconds: float, folder: Path) -> None:
    """:func:`_derive_slowly`, first writing to ``record`` what the export's process holds: its environment, the Hugging
    Face token it could find, its OOM score, threads, and a file it left in its temporary folder (as onnxruntime's
    quantiser does)."""
    import tempfile

    from huggingface_hub import get_token

    with tempfile.NamedTemporaryFile(prefix="ort.quant.", delete=False) as scratch:
        scratch.write(b"graph" * 1024)
    facts = {"env": dict(os.environ), "token": get_token(), "oom_score_adj": Path("/proc/self/oom_score_adj").read_text().strip(),
             "threads": torch.get_num_threads(), "interop_threads": torch.get_num_interop_threads(), "temp_file": scratch.name}
    Path(record).write_text(json.dumps(facts))
    _derive_slowly(seconds, folder)


@dataclasses.dataclass
class FaultyConfig(ToyConfig):
    fault: str = free_setting("")
    fault_at: int = free_setting(1)
    fault_steps: int = free_setting(1)
    oom_above: int = free_setting(0)
    noise_dir: str = free_setting("")
    fault_rank: int = free_setting(-1)
    fault_seconds: float = free_setting(0.0)
    probe_dir: str = free_setting("")


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
        items = len(batch[0])
        if self.config.noise_dir and not getattr(self, "_noise_written", False):
            rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
            Path(self.config.noise_dir, f"rank-{rank}.json").write_text(json.dumps(torch.rand(8).tolist()))
            self._noise_written = True
        if self.config.probe_dir and not getattr(self, "_probed", False):
            _probe(self.config.probe_dir, torch.distributed.get_rank() if torch.distributed.is_initialized() else 0)
            self._probed = True
        if self.config.oom_above and items > self.config.oom_above:
            raise torch.OutOfMemoryError(f"CUDA out of memory. Tried to allocate {items} items' activations (raised by the test task)")
        losses = super().step(models, batch, group)
        if self.config.fault == "linger" and self._here():
            torch.distributed.destroy_process_group = _hang
        faulty = self.config.fault in ("nan", "nan-grad", "spike", "oom", "cuda", "hang", "crash", "vanish") and self._here()
        if group != "model" or not faulty or not self._faulting():  # counts the model group's micro-batches only
            return losses
        loss = losses["loss"]
        if self.config.fault == "hang":
            while True:
                time.sleep(3600)
        if self.config.fault == "crash":
            os._exit(1)
        if self.config.fault == "vanish":
            _vanish()
        if self.config.fault == "cuda":
            raise RuntimeError("CUDA error: an illegal memory access was encountered (raised by the test task)")
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
        if self.config.fault == "eval-bug" and step >= self.config.fault_at:
            raise ZeroDivisionError("division by zero in the task's evaluate (raised by the test task)")
        if self.config.fault == "eval-error" and self._here():
            self._validations = getattr(self, "_validations", 0) + 1
            if self._validations == self.config.fault_at:
                raise ValueError(f"validation broke at step {step} (raised by the test task)")
        evaluation = super().evaluate(models, step)
        if self.config.fault == "escape":
            evaluation.files["../../../escaped.json"] = b'{"written": "outside the checkpoint"}'
        return evaluation

    def export_later(self):
        if self.config.fault == "slow-export":
            return functools.partial(_derive_slowly, self.config.fault_seconds)
        return super().export_later()

    def describe(self):
        if self.config.fault == "slow-status" and self._here():
            time.sleep(self.config.fault_seconds)
        return super().describe()
