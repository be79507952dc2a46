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


def test_text_targets_are_the_ids_after_the_start_token_and_the_text_logits_line_up_with_them():
    settings = T3Settings.from_overrides(TINY_MODEL)
    t3 = T3(settings).eval()
    start, stop = settings.start_text_token, settings.stop_text_token
    text = torch.tensor([[start, 5, 6, stop], [start, 7, stop, stop]])
    assert T3.text_targets(text, torch.tensor([4, 3])).tolist() == [[5, 6, stop], [7, stop, IGNORE]]
    batch = _batch([_item(settings, 2, 5, 3, seed=0), _item(settings, 1, 4, 3, seed=1)])
    speech_logits, text_logits = t3(**batch, with_text=True)
    assert text_logits.shape == (2, 3, settings.text_vocab_size) and torch.equal(speech_logits, t3(**batch))
    alone = t3(**_batch([_item(settings, 1, 4, 3, seed=1)]), with_text=True)[1]
    torch.testing.assert_close(text_logits[1, :2], alone[0], rtol=1e-4, atol=1e-5)  # right padding changes nothing


def _held_and_gradients(model: T3, batch: dict) -> tuple[int, dict[str, torch.Tensor]]:
    """Bytes autograd holds for the backward pass (each storage once), then the gradients of the loss."""
    held: dict[int, int] = {}

    def pack(tensor):
        held[tensor.untyped_storage().data_ptr()] = tensor.untyped_storage().nbytes()
        return tensor

    model.zero_grad(set_to_none=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        loss = speech_loss(model(**batch), model.targets(batch["speech"], batch["speech_lens"]))
    loss.backward()
    return sum(held.values()), {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


def _long_items(items: int, speech: int) -> dict:
    generator = torch.Generator().manual_seed(items * 1000 + speech)
    return dict(speaker=torch.randn(items, 256, generator=generator), prompt=torch.randint(0, 6561, (items, 6), generator=generator),
                prompt_mask=None, emotion=torch.full((items,), 0.5), text=torch.randint(1, 255, (items, 7), generator=generator),
                text_lens=torch.full((items,), 7), speech=torch.randint(0, 6561, (items, speech), generator=generator),
                speech_lens=torch.full((items,), speech))


def test_a_micro_batch_over_the_positions_bound_recomputes_its_layers_with_the_same_gradients():
    settings = T3Settings.from_overrides({**TINY_MODEL, "perceiver_dropout": 0.0})
    short, long = _long_items(1, 10), _long_items(4, 40)  # 1 × 24 positions (6 conditioning rows, 7 text, 11 speech); 4 × 54
    torch.manual_seed(0)
    plain, always, bounded = T3(settings).train(), T3(settings).train(), T3(settings).train()
    always.load_state_dict(plain.state_dict())
    bounded.load_state_dict(plain.state_dict())
    always.set_checkpointing(True)
    bounded.set_checkpointing(False, over_positions=100)
    for batch, recomputed in ((short, False), (long, True), (short, False)):
        plain_held, plain_grads = _held_and_gradients(plain, batch)
        always_held, _ = _held_and_gradients(always, batch)
        held, grads = _held_and_gradients(bounded, batch)
        assert always_held < plain_held
        assert held == (always_held if recomputed else plain_held)  # the layers' activations: recomputed, or held
        assert grads.keys() == plain_grads.keys()
        for name, grad in grads.items():
            torch.testing.assert_close(grad, plain_grads[name], rtol=0, atol=0, msg=name)


def test_greedy_generation_through_the_cache_is_the_argmax_of_training_s_forward_pass_on_its_own_output():
    """Each token generate picks one at a time (the key/value cache) is the argmax training's packed pass gives at that
    position when fed the tokens before it: the same sequence, the same position tables; it stops at max_tokens."""
    torch.manual_seed(0)
    settings = T3Settings.from_overrides(TINY_MODEL)
    t3 = T3(settings).eval()
    item = _item(settings, 6, 1, 4, seed=3)
    batch = _batch([item])
    cond = t3.conditioning(batch["speaker"], batch["prompt"], batch["prompt_mask"], batch["emotion"])
    tokens = t3.generate(cond, item["text"], max_tokens=12)
    assert len(tokens) == 12  # a random T3 does not say stop: the cap ends it
    with torch.no_grad():
        logits = t3(**{**batch, "speech": tokens[None], "speech_lens": torch.tensor([len(tokens)])})
    assert torch.equal(logits[0, :-1].argmax(-1), tokens)
    assert torch.equal(t3.generate(cond, item["text"], max_tokens=5), tokens[:5])
