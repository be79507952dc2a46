"""fintts's T3: the release's weight layout loads with strict=True; a batch computes what its items compute alone."""

from __future__ import annotations

import pytest
import torch
from chatterbox_helpers import TINY_MODEL, release_layout
from safetensors.torch import load_file, save_file

from fintts.errors import ConfigError
from fintts.tts.chatterbox.t3 import IGNORE, T3, T3Settings, parameter_count, speech_loss


def test_the_release_layout_has_the_sizes_upstream_states():
    layout = release_layout()
    total = sum(torch.Size(shape).numel() for shape in layout.values())
    llama = sum(torch.Size(shape).numel() for name, shape in layout.items() if name.startswith("tfmr."))
    assert (round(total / 1e6, 1), round(llama / 1e6, 1)) == (536.0, 503.4)
    with torch.device("meta"):
        t3 = T3()
    assert (parameter_count(t3), parameter_count(t3.tfmr)) == (total, llama)


@pytest.mark.slow
def test_a_real_size_state_dict_saved_under_the_release_names_loads_strictly(tmp_path):
    """2.1 GB written as the release is (fp32 safetensors), read back memory-mapped and assigned into a T3 built on the
    meta device: one copy of the weights in memory, not two."""
    generator = torch.Generator().manual_seed(0)
    path = tmp_path / "t3_mtl23ls_v2.safetensors"
    saved = {name: torch.empty(shape).normal_(generator=generator) for name, shape in release_layout().items()}
    probe = {name: saved[name][..., :3].clone() for name in ("speech_head.weight", "tfmr.layers.29.mlp.down_proj.weight")}
    save_file(saved, str(path))
    del saved
    with torch.device("meta"):
        t3 = T3()
    result = t3.load_state_dict(load_file(str(path)), strict=True, assign=True)
    assert not result.missing_keys and not result.unexpected_keys
    weights = dict(t3.named_parameters())
    for name, values in probe.items():
        assert torch.equal(weights[name][..., :3], values)


@pytest.mark.parametrize("change", ["renamed", "misshapen", "missing"])
def test_a_layout_that_is_not_the_release_is_refused(change):
    layout = dict(release_layout())
    if change == "renamed":
        layout["cond_enc.perceiver.attn.to_qkv.weight"] = layout.pop("cond_enc.perceiver.attn.to_q.weight")
    elif change == "misshapen":
        layout["text_emb.weight"] = (704, 1024)  # the English-only T3's vocabulary
    else:
        del layout["cond_enc.emotion_adv_fc.weight"]
    with torch.device("meta"):
        t3 = T3()
    with pytest.raises(RuntimeError, match="state_dict"):
        t3.load_state_dict({name: torch.empty(shape, device="meta") for name, shape in layout.items()}, strict=True, assign=True)


def test_settings_outside_t3_are_refused_by_name():
    with pytest.raises(ConfigError, match="hidden_sise"):
        T3Settings.from_overrides({"hidden_sise": 8})
    with pytest.raises(ConfigError, match="start_text_token 255 is outside text_vocab_size 100"):
        T3Settings.from_overrides({"text_vocab_size": 100})


def _item(settings: T3Settings, text: int, speech: int, prompt: int, seed: int):
    generator = torch.Generator().manual_seed(seed)
    return {
        "text": torch.cat([torch.tensor([settings.start_text_token]), torch.randint(1, 200, (text,), generator=generator),
                           torch.tensor([settings.stop_text_token])]),
        "speech": torch.randint(0, 6561, (speech,), generator=generator),
        "prompt": torch.randint(0, 6561, (prompt,), generator=generator),
        "speaker": torch.randn(settings.speaker_embed_size, generator=generator),
    }


def _batch(items):
    pad = torch.nn.utils.rnn.pad_sequence
    return dict(
        speaker=torch.stack([i["speaker"] for i in items]), prompt=pad([i["prompt"] for i in items], batch_first=True),
        prompt_mask=pad([torch.ones(len(i["prompt"]), dtype=torch.bool) for i in items], batch_first=True),
        emotion=torch.full((len(items),), 0.5), text=pad([i["text"] for i in items], batch_first=True),
        text_lens=torch.tensor([len(i["text"]) for i in items]), speech=pad([i["speech"] for i in items], batch_first=True),
        speech_lens=torch.tensor([len(i["speech"]) for i in items]),
    )


def test_an_item_padded_in_a_batch_gets_the_logits_it_gets_alone():
    """Right padding of text, speech and prompt: the short item's positions see nothing of the padding."""
    torch.manual_seed(0)
    settings = T3Settings.from_overrides(TINY_MODEL)
    t3 = T3(settings).eval()
    short, long = _item(settings, 5, 7, 3, seed=1), _item(settings, 9, 12, 6, seed=2)
    with torch.no_grad():
        together = t3(**_batch([short, long]))
        alone = t3(**_batch([short]))
    torch.testing.assert_close(together[0, : 7 + 1], alone[0], rtol=1e-4, atol=1e-5)


def test_targets_are_the_next_tokens_then_stop_and_the_loss_is_fp32():
    settings = T3Settings.from_overrides(TINY_MODEL)
    t3 = T3(settings)
    speech = torch.tensor([[5, 6, 7], [8, 0, 0]])
    targets = t3.targets(speech, torch.tensor([3, 1]))
    assert targets.tolist() == [[5, 6, 7, settings.stop_speech_token], [8, settings.stop_speech_token, IGNORE, IGNORE]]
    logits = torch.zeros(2, 4, settings.speech_vocab_size, dtype=torch.float16)
    assert speech_loss(logits, targets).dtype == torch.float32
