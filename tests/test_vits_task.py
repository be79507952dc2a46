"""The Finnish VITS task through the trainer and the CLI, on the shipped demo corpus and tiny models."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import soundfile as sf
import torch
import yaml
from transformers import VitsModel, VitsTokenizer, pipeline

from fintts.train import checkpoint, train
from fintts.tts.audio import load_audio
from fintts.tts.eval import noise_floor_db
from fintts.tts.vits.task import DEMO_CORPUS
from fintts.tts.voice import Voice
from trainer_helpers import assert_bit_identical, cli, final_weights

QUIET = {"progress": False, "log": lambda message: None}

TINY_MODEL = {
    "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "ffn_dim": 32, "flow_size": 8,
    "spectrogram_bins": 65, "upsample_initial_channel": 32, "upsample_rates": [4, 4, 4], "upsample_kernel_sizes": [8, 8, 8],
    "resblock_kernel_sizes": [3], "resblock_dilation_sizes": [[1, 3]], "prior_encoder_num_flows": 2,
    "prior_encoder_num_wavenet_layers": 1, "posterior_encoder_num_wavenet_layers": 2, "duration_predictor_num_flows": 2,
    "duration_predictor_filter_channels": 16, "depth_separable_num_layers": 2, "sampling_rate": 16000,
}
TINY_DISCRIMINATOR = {"periods": [2, 3], "scale_channels": [8, 16, 16], "scale_groups": [1, 2, 1], "period_channels": [8, 16]}
TINY = {
    "task": "vits", "data": "demo", "init": "scratch", "max_steps": 6, "batch_size": 4, "eval_every": 3,
    "num_workers": 0, "segment_frames": 16, "mcd_items": 2, "eval_speakers": 1, "eval_sentences": ["Kello on 7.30."],
    "speakers": ["espeak_f2", "espeak_m3"], "model": TINY_MODEL, "discriminator_config": TINY_DISCRIMINATOR,
}


def tiny_config(folder, **settings):
    path = folder / "tiny.yaml"
    path.write_text(yaml.safe_dump({**TINY, **settings}, allow_unicode=True))
    return path


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    folder = tmp_path_factory.mktemp("vits")
    config = tiny_config(folder)
    summary = train(config, store=folder / "store", **QUIET)
    return folder, config, summary


def test_vits_training_resumes_bit_identically(trained, tmp_path):
    folder, config, _ = trained
    train(config, store=tmp_path / "store", max_steps=2, **QUIET)
    train(config, store=tmp_path / "store", max_steps=4, **QUIET)
    summary = train(config, store=tmp_path / "store", **QUIET)
    assert summary.end_step == 6
    assert_bit_identical(final_weights(tmp_path / "store"), final_weights(folder / "store"))


def test_the_gan_starts_at_its_step_and_resumes_across_it_bit_identically(tmp_path):
    config = tiny_config(tmp_path, gan_start_step=3, max_steps=5, eval_every=0, log_every=1)
    train(config, store=tmp_path / "straight", **QUIET)
    train(config, store=tmp_path / "resumed", max_steps=2, **QUIET)
    train(config, store=tmp_path / "resumed", **QUIET)
    assert_bit_identical(final_weights(tmp_path / "straight"), final_weights(tmp_path / "resumed"))
    history = json.loads((checkpoint.latest_complete(tmp_path / "straight") / "state.json").read_text())["history"]
    assert [h["step"] for h in history] == [1, 2, 3, 4, 5]
    for entry in history:
        gan_terms = [entry[k] for k in ("generator/adversarial", "generator/feature_matching", "discriminator/loss")]
        assert all(v == 0 for v in gan_terms) if entry["step"] <= 3 else all(v > 0 for v in gan_terms), entry
        assert entry["generator/mel"] > 0


def test_validation_scores_mcd_and_keeps_samples_and_a_plot(trained):
    folder, _, summary = trained
    status = json.loads((folder / "store" / "status.json").read_text())
    assert [e["step"] for e in status["evals"]] == [3, 6]
    assert all(np.isfinite(e["val/mcd"]) and e["val/mcd"] > 0 for e in status["evals"])
    assert all(0 <= e["val/identified"] <= 1 for e in status["evals"])
    # the floor of the recordings is the same every validation; a 6-step voice is far noisier
    assert status["evals"][0]["val/floor_db_ref"] == status["evals"][1]["val/floor_db_ref"] > 20
    assert all(0 <= e["val/floor_db"] < e["val/floor_db_ref"] for e in status["evals"])
    assert status["about"]["speakers"] == ["espeak_f2", "espeak_m3"] and status["about"]["clips"] > 40
    sample = folder / "store" / "checkpoints" / "step-00000006" / "samples" / "0-espeak_f2.wav"
    audio, rate = sf.read(sample)
    assert rate == 16000 and len(audio) > 1000
    assert (folder / "store" / "checkpoints" / "step-00000006" / "loss.png").read_bytes()[:4] == b"\x89PNG"


def test_exported_voice_loads_in_plain_transformers_and_fintts(trained):
    folder, _, _ = trained
    model_dir = folder / "store" / "model"
    model = VitsModel.from_pretrained(model_dir)
    assert model.config.num_speakers == 2
    tts = pipeline("text-to-speech", model=str(model_dir))
    speech = tts("hyvää huomenta")
    assert speech["sampling_rate"] == 16000 and np.asarray(speech["audio"]).size > 100
    voice = Voice.load(model_dir)
    assert voice.speakers == ["espeak_f2", "espeak_m3"]
    assert voice.synthesize("Kello on 7.30.", "espeak_m3", warn=None).numel() > 100
    card = (model_dir / "README.md").read_text()
    assert "language: fi" in card and "text-to-speech" in card


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_a_few_steps_under_cpu_autocast_stay_finite(tmp_path, precision):
    config = tiny_config(tmp_path, precision=precision, max_steps=4, eval_every=0)
    train(config, store=tmp_path / "store", **QUIET)
    status = json.loads((tmp_path / "store" / "status.json").read_text())
    assert all(np.isfinite(v) for k, v in status["loss"].items())
    for tensor in final_weights(tmp_path / "store").values():
        assert torch.isfinite(tensor).all()
    if precision == "fp16":
        scaler = torch.load(checkpoint.latest_complete(tmp_path / "store") / "scaler.pt", weights_only=True)
        assert scaler["scale"] > 0


def test_punctuation_tokens_reach_the_exported_voice(tmp_path):
    config = tiny_config(tmp_path, punctuation_tokens=",.!?", max_steps=1, eval_every=0)
    train(config, store=tmp_path / "store", **QUIET)
    voice = Voice.load(tmp_path / "store" / "model")
    assert voice.text.normalize("Hyvää huomenta! Kello on 7.30.") == "hyvää huomenta! kello on seitsemän kolmekymmentä."
    tokenizer = VitsTokenizer.from_pretrained(tmp_path / "store" / "model")
    assert tokenizer("a, b")["input_ids"] == voice.text.encode("a, b")


def test_punctuation_tokens_a_pretrained_vocabulary_lacks_are_refused(trained, tmp_path):
    folder, _, _ = trained
    config = tiny_config(tmp_path, init=str(folder / "store" / "model"), model={}, punctuation_tokens="!", max_steps=1)
    result = cli("train", str(config), "--store", str(tmp_path / "store"), "--no-progress", cwd=tmp_path)
    assert result.returncode == 2 and "punctuation_tokens" in result.stderr and "!" in result.stderr


def test_bad_clips_are_reported_and_skipped_not_fatal(tmp_path):
    corpus = tmp_path / "corpus"
    (corpus / "wavs").mkdir(parents=True)
    lines = []
    for n, source in enumerate(sorted((DEMO_CORPUS / "espeak_f5" / "wavs").glob("*.flac"))[:24]):
        shutil.copy(source, corpus / "wavs" / f"c{n}.flac")
        lines.append(f"c{n}|{(DEMO_CORPUS / 'espeak_f5' / 'metadata.csv').read_text().splitlines()[0].split('|')[1]}")
    (corpus / "wavs" / "broken.wav").write_bytes(b"RIFF not really a wav file")
    shutil.copy(corpus / "wavs" / "c0.flac", corpus / "wavs" / "silent_text.flac")
    lines += ["broken|Tämä tiedosto on rikki.", "silent_text|"]
    (corpus / "metadata.csv").write_text("\n".join(lines) + "\n")
    report = cli("check", str(corpus), "--no-progress", cwd=tmp_path)
    assert report.returncode == 0 and "broken.wav" in report.stdout
    assert "silent_text.flac: empty transcript" in report.stdout
    messages: list[str] = []
    config = tiny_config(tmp_path, data=str(corpus), speakers=[], max_steps=2, eval_every=2)
    summary = train(config, store=tmp_path / "store", progress=False, log=messages.append)
    assert summary.end_step == 2
    assert any("skipped" in m for m in messages) and any("broken.wav" in m for m in messages)


def test_init_from_a_save_pretrained_folder_and_eval_cli(trained, tmp_path):
    folder, _, _ = trained
    base = tmp_path / "base"
    shutil.copytree(folder / "store" / "model", base)
    config = tiny_config(tmp_path, init=str(base), model={}, max_steps=2, eval_every=2)
    train(config, store=tmp_path / "store", **QUIET)
    result = cli("eval", "--store", str(tmp_path / "store"), "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    scores = json.loads(result.stdout)
    assert scores["mcd_mean_db"] > 0 and {c["speaker"] for c in scores["clips"]} == {"espeak_f2", "espeak_m3"}
    # each clip is matched among its speaker's 5 held-out recordings (demo heldout.csv)
    assert {c["candidates"] for c in scores["clips"]} == {5} and scores["chance"] == pytest.approx(len(scores["clips"]) / 5)
    assert 0 <= scores["identified"] == sum(c["identified"] for c in scores["clips"]) <= len(scores["clips"])
    # each recording's floor is the measure of its own file; the means are over the clips
    for clip in scores["clips"]:
        speaker, name = clip["id"].split("/")
        recording = load_audio(DEMO_CORPUS / speaker / "wavs" / f"{name}.flac", 16000)
        assert clip["floor_ref_db"] == pytest.approx(noise_floor_db(recording, 16000))
    assert scores["floor_mean_db"] == pytest.approx(np.mean([c["floor_db"] for c in scores["clips"]]))
    assert scores["floor_ref_mean_db"] == pytest.approx(np.mean([c["floor_ref_db"] for c in scores["clips"]]))


def test_a_new_run_can_start_from_an_old_runs_checkpoint(trained, tmp_path):
    folder, _, _ = trained
    old_checkpoint = checkpoint.latest_complete(folder / "store")
    config = tiny_config(tmp_path, init=str(old_checkpoint), model={}, max_steps=1, eval_every=0, lr=0.0)
    train(config, store=tmp_path / "store", **QUIET)
    # lr 0: one step changes nothing, so the new run holds exactly the old checkpoint's weights
    assert_bit_identical(final_weights(tmp_path / "store"), final_weights(folder / "store"))


def test_init_from_the_hub_without_network_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # as on a Kaggle session without internet, minus ~25 s of retries
    config = tiny_config(tmp_path, init="facebook/mms-tts-fin", model={}, max_steps=1)
    result = cli("train", str(config), "--store", str(tmp_path / "store"), "--no-progress", cwd=tmp_path)
    assert result.returncode != 0
    assert "init: PATH" in result.stderr or "init: PATH" in result.stdout

