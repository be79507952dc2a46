"""Folding a LoRA into T3's weights: peft's own merge, made one adapted weight at a time."""

from __future__ import annotations

import copy
import weakref

import torch
from chatterbox_helpers import TINY_MODEL
from peft.tuners.lora.layer import Linear as LoraLinear

from fintts.tts.chatterbox.adapter import add_lora, merged_weights
from fintts.tts.chatterbox.settings import ChatterboxLora
from fintts.tts.chatterbox.t3 import T3, T3Settings


def _adapted():
    torch.manual_seed(0)
    adapted = add_lora(T3(T3Settings.from_overrides(TINY_MODEL)), ChatterboxLora(r=4, alpha=8, dropout=0.0), "voice")
    with torch.no_grad():
        for name, parameter in adapted.named_parameters():
            if ".lora_B." in name:  # peft starts B at zero: a trained adapter has moved it
                parameter.normal_()
    return adapted


def test_the_merged_weights_are_peft_merge_and_their_deltas_are_made_one_at_a_time(monkeypatch):
    adapted = _adapted()
    expected = copy.deepcopy(adapted).merge_and_unload().state_dict()
    made, most_alive = [], 0
    delta_weight = LoraLinear.get_delta_weight

    def counted(self, adapter):
        nonlocal most_alive
        most_alive = max(most_alive, 1 + sum(ref() is not None for ref in made))  # this one and those still held
        delta = delta_weight(self, adapter)
        made.append(weakref.ref(delta))
        return delta

    monkeypatch.setattr(LoraLinear, "get_delta_weight", counted)
    merged = merged_weights(adapted, "voice", to="meta")  # where the merged weights go: not the model's device
    assert len(made) == 7 * TINY_MODEL["num_hidden_layers"]
    assert most_alive == 1  # the export's extra room on the model's device is one projection's, not every delta's
    assert merged.keys() == expected.keys()
    adapted_keys = {key for key in merged if ".self_attn." in key or ".mlp." in key}
    assert adapted_keys and all(merged[key].device.type == "meta" for key in adapted_keys)
    monkeypatch.undo()
    merged = merged_weights(adapted, "voice")
    for key, value in expected.items():
        torch.testing.assert_close(merged[key], value, rtol=0, atol=1e-6)
