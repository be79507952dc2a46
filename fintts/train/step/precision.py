"""Which floating-point precision a session trains in, from the config's ``precision`` and the device.

``auto`` goes by the GPU's compute capability, not by ``torch.cuda.is_bf16_supported()``:
that says yes on a T4 (sm 7.5), which has no bf16 units and only emulates it, many times
slower than fp16. For the same reason ``bf16`` asked for by name on such a GPU is refused
rather than trained slowly for twelve hours.
"""

from __future__ import annotations

import torch

from fintts.train.config import ConfigError

#: the first compute capability with native bf16 (Ampere, sm 8.0).
NATIVE_BF16 = (8, 0)


def precision_for(requested: str, device_type: str, capability: tuple[int, int] | None = None, name: str = "") -> str:
    """``requested`` (``auto``, ``fp32``, ``fp16``, ``bf16``) resolved for a device; ``capability`` is a CUDA GPU's."""
    if device_type == "cuda" and capability is not None:
        native_bf16 = tuple(capability) >= NATIVE_BF16
        if requested == "auto":
            return "bf16" if native_bf16 else "fp16"
        if requested == "bf16" and not native_bf16:
            raise ConfigError(
                f"precision: bf16 on {name or 'this GPU'} (compute capability {capability[0]}.{capability[1]}): it has no "
                "native bf16 (Ampere, 8.0, and newer do) and would emulate it, many times slower. Use precision: fp16 "
                "(or auto, which picks fp16 here)"
            )
        return requested
    return "fp32" if requested == "auto" else requested


def resolve_precision(requested: str, device: torch.device) -> str:
    """:func:`precision_for` on ``device``: fp16 on a T4, bf16 on Ampere and newer, fp32 on a CPU for ``auto``."""
    if device.type != "cuda":
        return precision_for(requested, device.type)
    return precision_for(requested, "cuda", torch.cuda.get_device_capability(device), torch.cuda.get_device_name(device))
