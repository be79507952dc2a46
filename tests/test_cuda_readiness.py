"""What the first session on CUDA would meet, tested where the CPU can show it: the precision a GPU
can train in, the CUDA libraries' out-of-memory spellings, settings that break two-GPU training."""

from __future__ import annotations

import pytest
import torch

from fintts.train.config import ConfigError
from fintts.train.memory import is_out_of_memory
from fintts.train.precision import precision_for, resolve_precision
from trainer_helpers import cli
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
    result = cli("train", str(config), "--store", str(tmp_path / "store"), "--no-progress", "model.layerdrop=0.1", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "model.layerdrop: 0.1 is refused" in result.stderr and "DDP" in result.stderr
    assert not (tmp_path / "store" / "checkpoints").exists()
