"""LoRA on T3's Llama projections with peft, and folding it back into T3's own layout.

During an adapter phase the checkpoint holds peft's names (the frozen base and the adapter), enough
to resume; what leaves training (the exported ``t3_mtl23ls_v2.safetensors``) is T3 with each
adapted weight ``W + (alpha / r) B A`` (peft's ``get_delta_weight``), computed one weight at a time
without copying the model: on a T4 a second 536M-parameter copy would not fit beside training.
"""

from __future__ import annotations

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from peft.tuners.lora.layer import LoraLayer
from torch import Tensor, nn

from fintts.errors import ConfigError
from fintts.tts.chatterbox.settings import ChatterboxLora
from fintts.tts.lora_settings import matching_names

_PEFT_PREFIX = "base_model.model."


def target_names(t3: nn.Module, targets: list[str]) -> list[str]:
    """Names of the Linear layers ``targets`` match, refusing any other kind and a list that matches nothing."""
    names = matching_names((name for name, _ in t3.named_modules()), targets)
    if not names:
        raise ConfigError(f"lora.targets: {targets} match no module of T3 (names look like 'tfmr.layers.0.self_attn.q_proj')")
    modules = dict(t3.named_modules())
    wrong = [name for name in names if not isinstance(modules[name], nn.Linear)]
    if wrong:
        raise ConfigError(f"lora.targets: {', '.join(wrong[:3])} are not Linear layers; LoRA here adapts the Llama's projections")
    return names


def add_lora(t3: nn.Module, settings: ChatterboxLora, name: str) -> PeftModel:
    """``t3`` wrapped with a trainable adapter ``name``; everything else in it is frozen."""
    names = target_names(t3, settings.targets)
    config = LoraConfig(r=settings.r, lora_alpha=settings.alpha, lora_dropout=settings.dropout, target_modules=names)
    return get_peft_model(t3, config, adapter_name=name)


def merged_weights(adapted: PeftModel, name: str, *, to: torch.device | str = "cpu") -> dict[str, Tensor]:
    """T3's state dict (its own names) with adapter ``name`` folded into the weights it adapts; the model is not changed.

    One adapted weight at a time: its delta and ``W + delta`` are made on the model's device and the sum
    moved ``to`` the host before the next, so an export beside training needs one projection's room on the
    GPU, not every delta and merged weight at once (~4 GB at the release's sizes, issue #55). The weights
    the adapter leaves alone are the model's own tensors.
    """
    layers = {f"{module_name.removeprefix(_PEFT_PREFIX)}.weight": module
              for module_name, module in adapted.named_modules() if isinstance(module, LoraLayer) and name in module.lora_A}
    merged = {}
    with torch.no_grad():
        for key, value in adapted.state_dict().items():
            if ".lora_" in key:
                continue
            plain = key.removeprefix(_PEFT_PREFIX).replace(".base_layer.", ".")
            merged[plain] = (value + layers[plain].get_delta_weight(name).to(value.dtype)).to(to) if plain in layers else value
    return merged
