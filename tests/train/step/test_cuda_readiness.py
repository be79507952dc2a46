"""What the first session on CUDA would meet, tested where the CPU can show it: the precision a GPU
can train in, the CUDA libraries' out-of-memory spellings, settings that break two-GPU training, pinned batches."""

from __future__ import annotations

import pytest
import torch

from fintts.train.config import ConfigError
from fintts.train.step.memory import is_out_of_memory
from fintts.train.step.precision import precision_for, resolve_precision
from fintts.tts.vits.task import VitsBatch
from trainer_helpers import in_process
from vits_helpers import tiny_config


def test_auto_precision_follows_the_compute_capability_and_forced_bf16_on_a_t4_is_refused():
    assert precision_for("auto", "cuda", (7, 5), "Tesla T4") == "fp16"
    assert precision_for("auto", "cuda", (8, 0), "A100") == "bf16"
    assert precision_for("bf16", "cuda", (9, 0), "H100") == "bf16"
    assert precision_for("fp32", "cuda", (7, 5), "Tesla T4") == "fp32"
    with pytest.raises(ConfigError, match=r"precision: bf16 on Tesla T4 \(compute capability 7\.5\).*precision: fp16"):
        precision_for("bf16", "cuda", (7, 5), "Tesla T4")
    # the CPU has bf16 autocast: asking for it is allowed; auto stays fp32
    assert resolve_precision("bf16", torch.device("cpu")) == "bf16"
    assert resolve_precision("auto", torch.device("cpu")) == "fp32"


@pytest.mark.parametrize("message", [
    "CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
    "cuDNN error: CUDNN_STATUS_ALLOC_FAILED",
    "cuDNN error: CUDNN_STATUS_NOT_ENOUGH_WORKSPACE",
    "cuFFT error: CUFFT_ALLOC_FAILED",
    "CUDA error: out of memory",
])
@pytest.mark.parametrize("kind", [RuntimeError, torch.AcceleratorError])
def test_cuda_library_allocation_failures_are_out_of_memory(kind, message):
    assert is_out_of_memory(kind(message))


def test_other_cuda_errors_are_not_out_of_memory():
    assert is_out_of_memory(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert not is_out_of_memory(RuntimeError("CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasSgemm`"))
    assert not is_out_of_memory(torch.AcceleratorError("CUDA error: an illegal memory access was encountered"))
    assert not is_out_of_memory(ValueError("out of memory"))


def test_layerdrop_is_refused_when_the_config_loads(tmp_path):
    config = tiny_config(tmp_path)
    result = in_process("train", str(config), "--store", str(tmp_path / "store"), "--no-progress", "model.layerdrop=0.1", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "model.layerdrop: 0.1 is refused" in result.stderr and "DDP" in result.stderr
    assert not (tmp_path / "store" / "checkpoints").exists()


class _PinRecorder(torch.Tensor):
    """A tensor that tells whether it is what ``.pin_memory()`` returned (pinning itself needs CUDA)."""

    def pin_memory(self, *args, **kwargs):
        pinned = self.detach().clone().as_subclass(_PinRecorder)
        pinned.from_pin_memory = True
        return pinned


def _batch(make) -> VitsBatch:
    return VitsBatch(
        input_ids=make(torch.ones(2, 5, dtype=torch.long)), input_mask=make(torch.ones(2, 5)),
        spec=make(torch.randn(2, 9, 7)), spec_mask=make(torch.ones(2, 7)), wav=make(torch.randn(2, 1, 112)),
        speaker_ids=None,
    )


def test_a_vits_batch_pins_every_tensor_it_holds():
    batch = _batch(lambda t: t.as_subclass(_PinRecorder))
    pinned = batch.pin_memory()
    assert isinstance(pinned, VitsBatch) and pinned.speaker_ids is None
    for field in ("input_ids", "input_mask", "spec", "spec_mask", "wav"):
        tensor = getattr(pinned, field)
        assert getattr(tensor, "from_pin_memory", False), f"{field} was not pinned"
        assert torch.equal(tensor, getattr(batch, field))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="page-locked (pinned) memory needs a CUDA device; this machine has none")
def test_a_loader_with_pin_memory_hands_out_pinned_vits_batches():
    loader = torch.utils.data.DataLoader(range(4), batch_size=2, collate_fn=lambda items: _batch(lambda t: t), pin_memory=True)
    for batch in loader:
        assert all(getattr(batch, f).is_pinned() for f in ("input_ids", "input_mask", "spec", "spec_mask", "wav"))
