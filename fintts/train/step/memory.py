"""How much memory training needed: the peak per device, for logs, summaries and benchmarks.

On a GPU the figures are the CUDA caching allocator's peaks: *allocated* is what tensors
held at most, *reserved* what the allocator took from the driver (what ``nvidia-smi`` shows,
and what runs out first). On the CPU there is one figure, the process's peak resident set
(``VmHWM``): model, optimizer state and activations all live there. Data-loader workers are
processes of their own and are not counted.

Peaks run from the session's start or the last :func:`reset_peaks`, so a benchmark can
measure each configuration it tries in one process.

:func:`is_out_of_memory` tells a step that needed more memory than the device has from other
failures, in every spelling the CUDA libraries use for it.

torch is imported where a device is measured, not at the top. The figures are put in words for people by
:func:`fintts.train.report.summary.describe_peaks`: the report reads a run on a laptop, so it imports
nothing of the step's room (the step's room is below the report: it names its headline loss with
:func:`fintts.train.report.status.main_loss_key`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

GIB = 2**30
#: how the CUDA libraries say they could not allocate: cuBLAS (its handle or workspace), cuDNN, cuFFT (the STFT).
ALLOCATION_FAILURES = (
    "out of memory",
    "CUBLAS_STATUS_ALLOC_FAILED",
    "CUDNN_STATUS_ALLOC_FAILED",
    "CUDNN_STATUS_NOT_ENOUGH_WORKSPACE",
    "CUFFT_ALLOC_FAILED",
)
_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _peak_rss_bytes() -> int | None:
    try:
        match = re.search(r"^VmHWM:\s+(\d+)\s+kB", _STATUS.read_text(), re.MULTILINE)
    except OSError:
        return None
    return int(match.group(1)) * 1024 if match else None


def peak_memory(device: torch.device) -> dict[str, Any]:
    """This process's peak memory on ``device``: ``{"device", "allocated_gib", "reserved_gib"}`` on
    CUDA, ``{"device", "rss_gib"}`` on the CPU (``None`` where the system does not say)."""
    import torch  # imported already where a device is measured (see the module docstring)

    if device.type == "cuda":
        return {
            "device": f"cuda:{device.index if device.index is not None else torch.cuda.current_device()}",
            "allocated_gib": round(torch.cuda.max_memory_allocated(device) / GIB, 3),
            "reserved_gib": round(torch.cuda.max_memory_reserved(device) / GIB, 3),
        }
    rss = _peak_rss_bytes()
    return {"device": device.type, "rss_gib": None if rss is None else round(rss / GIB, 3)}


def reset_peaks(device: torch.device) -> None:
    """Start the peaks afresh (Linux resets ``VmHWM`` when ``5`` is written to ``clear_refs``)."""
    import torch  # imported already where a device is measured (see the module docstring)

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return
    try:
        _CLEAR_REFS.write_text("5")
    except OSError:
        pass  # an older kernel or a sandbox: the peak then runs from the process's start


def is_out_of_memory(err: BaseException) -> bool:
    """CUDA's out-of-memory error, the generic "out of memory" RuntimeError of other backends and older
    torch, or a CUDA library's allocation failure (a ``RuntimeError`` or ``torch.AcceleratorError``)."""
    import torch  # imported already: the error came from a step (see the module docstring)

    if isinstance(err, torch.OutOfMemoryError):
        return True
    return isinstance(err, RuntimeError) and any(text in str(err) for text in ALLOCATION_FAILURES)
