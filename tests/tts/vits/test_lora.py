"""LoRA voices: a full phase then an adapter phase on the best speaker, its files, resuming it, merging it."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from transformers import VitsModel

from fintts.train import train
from fintts.train.config import ConfigError, load_config
from fintts.train.run import checkpoint
from fintts.tts.vits.inference import VitsSynthesizer
from fintts.tts.vits.lora import add_adapter, base_weights
from fintts.tts.vits.settings import VitsLora
from fintts.tts.voice import load_voice
from trainer_helpers import QUIET, assert_bit_identical, built_once, cli, final_weights, in_process
from vits_helpers import TRAINING_ONLY, tiny_config, tiny_vits_config

#: two full steps on both speakers, then two steps of an adapter on the best one: a high rate, so that the adapter
#: matters, and no validation, so that model/ is the newest adapter (two steps do not beat the phase's first score)
PHASES = [
    {"name": "full", "steps": 2},
    {"name": "voice", "settings": {"speaker": "best", "lr": 0.02, "eval_every": 0, "lora": {"r": 4, "alpha": 8, "dropout": 0.0}}},
]
SENTENCE = "Hyvää huomenta, Suomi."


@pytest.fixture(scope="session")
def adapted(tmp_path_factory):
    def build(folder):
        train(tiny_config(folder, phases=PHASES, max_steps=4, eval_every=2), store=folder / "store", **QUIET)

    folder = built_once(tmp_path_factory, "lora", build)
    return folder / "tiny.yaml", folder / "store"


def _synthesize(vits: VitsModel, speaker: int | None = None) -> torch.Tensor:
    torch.manual_seed(3)
    ids = torch.randint(1, vits.config.vocab_size, (1, 12))
    duration_noise, prior_noise = torch.randn(1, 2, 12), torch.randn(1, vits.config.flow_size, 400)
    with torch.inference_mode():
        waveform, _ = VitsSynthesizer(vits.eval())(ids, duration_noise, prior_noise, torch.tensor([1.0]),
                                                   None if speaker is None else torch.tensor([speaker]))
    return waveform


def test_folding_the_weight_norm_and_wrapping_keep_the_output():
    """At the start the adapter adds nothing (peft's B is zero): only the folding could change the voice."""
    torch.manual_seed(0)
    vits = VitsModel(tiny_vits_config())
    before = _synthesize(vits)
    adapter = add_adapter(vits, VitsLora(r=4), "voice")
    folded = [name for name, module in vits.named_modules() if name.endswith("wavenet.in_layers.0.base_layer")]
    assert folded and not any(hasattr(dict(vits.named_modules())[name], "parametrizations") for name in folded)
    torch.testing.assert_close(_synthesize(adapter.get_base_model()), before, rtol=0, atol=1e-6)
    trainable = {name for name, p in adapter.named_parameters() if p.requires_grad}
    assert trainable and all(".lora_" in name for name in trainable)
    assert any("decoder.resblocks.0.convs1.1.lora_A" in name for name in trainable)  # a dilated HiFi-GAN conv


@pytest.mark.process
def test_the_adapter_phase_trains_the_adapter_and_the_discriminator_only(adapted):
    _, store = adapted
    status = json.loads((store / "status.json").read_text())
    speaker = status["about"]["speaker"]
    assert status["phase"]["resolved"] == {"speaker": speaker} and status["about"]["lora"]["r"] == 4
    lora = status["about"]["lora"]
    assert 0 < lora["trainable_parameters"] < lora["generator_parameters"] / 5 and 0 < lora["adapter_mb"] < 1
    switch, latest = store / "checkpoints" / "step-00000002", checkpoint.latest_complete(store)
    assert latest.name == "step-00000004"
    full, adapted_weights = load_file(switch / "model.safetensors"), load_file(latest / "model.safetensors")
    base = base_weights(adapted_weights)
    folded = [key for key in full if key.endswith("parametrizations.weight.original0")]
    assert folded  # the full phase keeps weight norm; the adapter phase holds some of those convs folded
    for key, value in base.items():
        if key in full:
            assert torch.equal(value, full[key]), f"{key} changed in the adapter phase"
    lora_keys = [key for key in adapted_weights if ".lora_B." in key]
    assert lora_keys and any(adapted_weights[key].abs().sum() > 0 for key in lora_keys)
    discriminator = (load_file(switch / "discriminator.safetensors"), load_file(latest / "discriminator.safetensors"))
    assert any(not torch.equal(discriminator[0][k], discriminator[1][k]) for k in discriminator[0])
    for folder in (latest / "adapters" / speaker, store / "model" / "adapters" / speaker):
        assert json.loads((folder / "adapter_config.json").read_text())["r"] == 4
        assert (folder / "adapter_model.safetensors").stat().st_size < 1_000_000


@pytest.mark.process
def test_merge_folds_the_adapter_in_and_speaks_as_the_adapter_does(adapted, tmp_path):
    _, store = adapted
    speaker = json.loads((store / "status.json").read_text())["about"]["speaker"]
    result = in_process("merge", str(store), "--out", str(tmp_path / "merged"), "--no-onnx", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"{speaker}'s adapter" in result.stdout
    plain = VitsModel.from_pretrained(tmp_path / "merged")  # plain transformers loads it: no peft, no fintts
    assert plain.config.num_speakers == 1
    merged = load_voice(tmp_path / "merged", backend="torch", seed=5).synthesize(SENTENCE, warn=None)[0]
    on = load_voice(store / "model", speaker=speaker, backend="torch", seed=5).synthesize(SENTENCE, warn=None)[0]
    row = json.loads((store / "model" / "speakers.json").read_text()).index(speaker)
    base = load_voice(store / "model", speaker=row, backend="torch", seed=5).synthesize(SENTENCE, warn=None)[0]
    # merging changes the order of float sums (W + B·A once, not W·x + B·A·x every call): equal to 1e-4
    assert merged.shape == on.shape and np.abs(merged - on).max() < 1e-4
    assert base.shape != on.shape or np.abs(base - on).max() > 1e-2  # the adapter matters: the parity is not trivial


@pytest.mark.process
@pytest.mark.parametrize("breaks", [[2], [3]])
def test_resuming_at_the_switch_and_inside_the_adapter_phase_is_bit_identical(adapted, tmp_path, breaks):
    config, whole = adapted
    store = tmp_path / "store"
    for stop_at in breaks:
        train(config, store=store, max_steps=stop_at, **TRAINING_ONLY, **QUIET)
    for name in checkpoint.list_names(store)[:-1]:  # a new machine: only the newest checkpoint comes down
        shutil.rmtree(store / "checkpoints" / name)
    train(config, store=store, **TRAINING_ONLY, **QUIET)
    assert_bit_identical(final_weights(store), final_weights(whole))


@pytest.mark.process
def test_an_adapter_is_one_speakers_and_ends_the_run(adapted, tmp_path):
    with pytest.raises(ConfigError, match=r"phases: phases\[1\] follows an adapter phase"):
        load_config(tiny_config(tmp_path, phases=[{"steps": 2, "settings": {"lora": {"r": 4}}}, {}]))
    with pytest.raises(ConfigError, match=r"lora: .*targets: '\(' is not a regular expression"):
        load_config(tiny_config(tmp_path, lora={"r": 4, "targets": ["("]}))
    with pytest.raises(ValueError, match=r"an adapter is one speaker's voice; set speaker: NAME or best .*espeak_f2, espeak_m3"):
        train(tiny_config(tmp_path, lora={"r": 4}), store=tmp_path / "store", **QUIET)
    _, store = adapted
    result = in_process("merge", str(store), "--speaker", "nobody", "--out", str(tmp_path / "merged"), cwd=tmp_path)
    assert result.returncode == 2 and "has no adapter for 'nobody' (it has: espeak_" in result.stderr


@pytest.mark.slow
def test_the_adapter_goes_to_the_hub_with_the_run_and_speaks_after_a_pull(adapted, tmp_path, hub_env):
    config, local = adapted
    repo = "alice/finnish-voices"
    result = cli("train", str(config), "--hub-repo", repo, "--store", str(tmp_path / "store"), "--push-every", "0",
                 "--no-progress", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    files = hub_env.files(repo)
    speaker = json.loads(files["status.json"])["about"]["speaker"]
    newest = files["latest"].decode().strip()
    for folder in ("model", f"checkpoints/{newest}"):
        assert {f"{folder}/adapters/{speaker}/adapter_model.safetensors", f"{folder}/adapters/{speaker}/adapter_config.json"} <= set(files)
    pulled = cli("pull", repo, "--out", str(tmp_path / "pulled"), cwd=tmp_path)
    assert pulled.returncode == 0, pulled.stderr
    voice_dir = next(p.parent.parent for p in (tmp_path / "pulled").rglob(f"adapters/{speaker}"))
    there = load_voice(voice_dir, speaker=speaker, backend="torch", seed=5).synthesize(SENTENCE, warn=None)[0]
    here = load_voice(local / "model", speaker=speaker, backend="torch", seed=5).synthesize(SENTENCE, warn=None)[0]
    assert np.array_equal(there, here)  # the same run, trained again into the Hub: the same voice, bit for bit


@pytest.mark.process
def test_an_adapter_config_naming_its_targets_by_a_pattern_is_refused_not_matched(adapted, tmp_path):
    """adapter_config.json may come from the Hub: its target_modules are a list of names, and a string is refused."""
    from fintts.tts.vits.settings import DEFAULT_TARGETS

    _, store = adapted
    speaker = json.loads((store / "status.json").read_text())["about"]["speaker"]
    voice = shutil.copytree(store / "model", tmp_path / "voice")
    saved = voice / "adapters" / speaker / "adapter_config.json"
    settings = json.loads(saved.read_text())
    assert isinstance(settings["target_modules"], list) and "decoder.conv_pre" in settings["target_modules"]
    # the same modules, as a regular expression (what peft would match a string against)
    saved.write_text(json.dumps({**settings, "target_modules": "|".join(f"(?:{t})" for t in DEFAULT_TARGETS)}))
    result = in_process("say", SENTENCE, "--voice", str(voice), "--speaker", speaker, "--backend", "torch", "-o", "x.wav", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert f"{saved}: target_modules must be a list of module names, not str" in result.stderr
    assert not (tmp_path / "x.wav").exists()
