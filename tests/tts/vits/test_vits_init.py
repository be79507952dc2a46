"""Starting points of the generator: scratch, a local save_pretrained folder, the Hub, new speakers."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import VitsModel, VitsTokenizer

from fintts.errors import ConfigError
from fintts.train.config import load_config
from fintts.train.task import TaskContext
from fintts.tts.vits.generator import train_forward
from fintts.tts.vits.init import add_speakers, build_generator
from trainer_helpers import ROOT
from vits_helpers import TINY_MODEL, tiny_vits_config


def _tiny_folder(tmp_path, **config_overrides):
    torch.manual_seed(0)
    model = VitsModel(tiny_vits_config(**config_overrides))
    vocab = {symbol: index for index, symbol in enumerate(["_", " ", *"abdefghijklmnoprstuvyäö"])}
    (tmp_path / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    tokenizer = VitsTokenizer(str(tmp_path / "vocab.json"), phonemize=False, language="fin")
    folder = tmp_path / "voice"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return model, folder


def _waveform(model: VitsModel, speaker_id: int | None = None) -> torch.Tensor:
    model.eval()
    torch.manual_seed(1)
    with torch.no_grad():
        return model(torch.tensor([[3, 1, 4, 1, 5, 9, 2, 6]]), speaker_id=speaker_id).waveform


def test_tiny_config_accepts_overrides():
    config = tiny_vits_config(hidden_size=24, num_speakers=2, speaker_embedding_size=4)
    assert (config.hidden_size, config.num_speakers, config.flow_size) == (24, 2, 8)


def test_scratch_builds_a_random_model_from_the_overrides():
    model, tokenizer = build_generator("scratch", config_overrides=tiny_vits_config().to_diff_dict())
    assert tokenizer is None
    assert model.config.hidden_size == 16 and model.config.layerdrop == 0.0


def test_scratch_starts_as_vits_does_quiet_decoder_and_identity_flows():
    # transformers' Kaiming init made the decoder emit loud noise and the flows scramble
    # their input; VITS starts from a near-silent decoder and identity flows.
    torch.manual_seed(0)
    overrides = {**tiny_vits_config().to_diff_dict(), "upsample_initial_channel": 64}
    model, _ = build_generator("scratch", config_overrides=overrides, num_speakers=2, speaker_embedding_size=4)
    latents = torch.randn(3, model.config.flow_size, 20)
    speakers = model.embed_speaker(torch.tensor([0, 1, 1])).unsqueeze(-1)
    mask = torch.ones(3, 1, 20)
    with torch.no_grad():
        assert torch.equal(model.flow(latents, mask, speakers), latents)
        assert model.decoder(latents, speakers).std() < 0.02
        reference = VitsModel(model.config).decoder(latents, speakers)
    assert reference.std() > 10 * model.decoder(latents, speakers).detach().std()
    assert model.text_encoder.embed_tokens.weight.std().item() == pytest.approx(model.config.hidden_size**-0.5, rel=0.2)
    # weight-normed layers were re-initialised through their parametrization, not bypassed
    wavenet = model.posterior_encoder.wavenet.in_layers[0]
    assert torch.allclose(wavenet.parametrizations.weight.original0.flatten(), wavenet.weight.flatten(1).norm(dim=1))


def test_scratch_with_speakers_gets_speaker_conditioning():
    overrides = tiny_vits_config().to_diff_dict()
    model, _ = build_generator("scratch", config_overrides=overrides, num_speakers=3, speaker_embedding_size=4)
    assert model.embed_speaker.weight.shape == (3, 4)


@pytest.mark.slow
def test_local_folder_loads_weights_tokenizer_and_overrides(tmp_path):
    original, folder = _tiny_folder(tmp_path, layerdrop=0.1)

    model, tokenizer = build_generator(folder, config_overrides={"noise_scale": 0.3})

    assert isinstance(tokenizer, VitsTokenizer) and tokenizer("aika")["input_ids"]
    assert model.config.noise_scale == 0.3
    assert model.config.layerdrop == 0.0, "LayerDrop is off for training unless asked for"
    for name, tensor in original.state_dict().items():
        torch.testing.assert_close(model.state_dict()[name], tensor, msg=name)


def test_folder_without_tokenizer_gives_none(tmp_path):
    VitsModel(tiny_vits_config()).save_pretrained(tmp_path)
    _, tokenizer = build_generator(tmp_path)
    assert tokenizer is None


def test_unknown_override_is_rejected(tmp_path):
    _, folder = _tiny_folder(tmp_path)
    with pytest.raises(ValueError, match="hiden_size"):
        build_generator(folder, config_overrides={"hiden_size": 8})


def test_a_typo_in_a_model_field_from_scratch_is_refused_with_the_field_it_meant():
    """``VitsConfig(hiden_size=64)`` would keep the typo as an attribute and train with the default width."""
    with pytest.raises(ConfigError, match=r"model\.hiden_size: .*did you mean model\.hidden_size\?"):
        build_generator("scratch", config_overrides={**TINY_MODEL, "hiden_size": 64})


def test_a_typo_in_a_model_setting_fails_the_run_before_it_trains(tmp_path):
    """``fintts train configs/demo.yaml model.hiden_size=64``: refused as the models are built, and nothing lands in a
    ``model/config.json``."""
    config = load_config(ROOT / "configs" / "demo.yaml", [f"store={tmp_path / 'run'}", "model.hiden_size=64"])
    task = config.task_class(config.task, TaskContext(config.train.seed, torch.device("cpu"), None, tmp_path / "cache",
                                                       log=lambda _: None, progress=False))
    with pytest.raises(ConfigError, match="did you mean model.hidden_size"):
        task.build_models()


def test_unreachable_hub_id_says_how_to_work_offline(tmp_path):
    with pytest.raises(ConfigError, match="hf download facebook/mms-tts-fin --local-dir mms-tts-fin"):
        build_generator("facebook/mms-tts-fin", cache_dir=tmp_path, local_files_only=True)


def test_new_speakers_start_out_as_the_single_speaker_voice(tmp_path):
    original, folder = _tiny_folder(tmp_path)
    reference = _waveform(original)

    extended, _ = build_generator(folder, num_speakers=3, speaker_embedding_size=4)

    assert extended.config.num_speakers == 3
    for speaker in range(3):
        torch.testing.assert_close(_waveform(extended, speaker), reference)


def test_new_speaker_conditioning_receives_gradients():
    torch.manual_seed(0)
    model = add_speakers(VitsModel(tiny_vits_config()), num_speakers=2, speaker_embedding_size=4)
    model.train()
    frames, hop = 24, 16
    output = train_forward(
        model,
        torch.randint(1, 38, (2, 5)),
        torch.ones(2, 5),
        torch.rand(2, 33, frames),
        torch.ones(2, frames),
        torch.randn(2, 1, frames * hop),
        torch.tensor([0, 1]),
        segment_frames=8,
    )
    (output.wav_fake.square().mean() + output.z_p.square().mean() + output.duration_loss).backward()

    assert model.decoder.cond.weight.grad.abs().sum() > 0
    assert model.posterior_encoder.wavenet.cond_layer.parametrizations.weight.original0.grad.abs().sum() > 0
    assert model.flow.flows[0].wavenet.cond_layer.parametrizations.weight.original0.grad.abs().sum() > 0


@pytest.mark.slow
def test_multi_speaker_checkpoint_cannot_change_its_speaker_count(tmp_path):
    _, folder = _tiny_folder(tmp_path, num_speakers=2, speaker_embedding_size=4)
    with pytest.raises(ValueError, match="2 speakers"):
        build_generator(folder, num_speakers=5)
