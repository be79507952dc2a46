"""The Finnish VITS task through the trainer and the CLI, on the shipped demo corpus and tiny models."""

from __future__ import annotations

import json
import shutil
import threading

import numpy as np
import pytest
import soundfile as sf
import torch
from huggingface_hub import ModelCard
from transformers import VitsModel, VitsTokenizer, pipeline

from fintts.train import ConfigDrift, TaskContext, train
from fintts.train.report.card import render
from fintts.train.run import checkpoint
from fintts.tts.audio import load_audio
from fintts.tts.corpus.data_names import DEMO_CORPUS
from fintts.tts.demo.run import progress_report
from fintts.tts.eval import noise_floor_db
from fintts.tts.vits.task import VitsTask, VitsTaskConfig
from fintts.tts.voice import load_voice
from trainer_helpers import QUIET, assert_bit_identical, built_once, cli, export_processes, final_weights, in_process
from vits_helpers import TRAINING_ONLY, tiny_config


@pytest.fixture(scope="session")
def trained(tmp_path_factory):
    """A tiny run trained 6 steps, validated at 3 and 6, and what it left running when ``train()`` returned
    (``left-running.json``); its folder, config and last step (its tests only read it)."""

    def build(folder):
        # with its ONNX graphs (at the best of step 3 and at the end); the resumed runs below make none, and their
        # weights equal these: making the graphs touches no RNG of training's
        before = {t.ident for t in threading.enumerate()}
        train(tiny_config(folder, export_onnx=True), store=folder / "store", **QUIET)
        # tqdm's monitor is tqdm's daemon, one per process, started by the first bar anywhere in it (here transformers'
        # "Writing model shards" in save_pretrained) and left by tqdm: not a thread of ours; in a process where an earlier
        # bar started it, it was there before and passed unseen
        left = [t.name for t in threading.enumerate() if t.ident not in before and t.is_alive() and t.name != "tqdm_monitor"]
        (folder / "left-running.json").write_text(json.dumps({"threads": left, "exports": export_processes(folder / "store")}))

    folder = built_once(tmp_path_factory, "vits", build)
    step = json.loads((folder / "store" / "status.json").read_text())["step"]
    return folder, folder / "tiny.yaml", step


@pytest.mark.slow
def test_vits_training_resumes_bit_identically(trained, tmp_path):
    folder, config, _ = trained
    # the resumed sessions without graphs (TRAINING_ONLY), against the fixture's run with them
    train(config, store=tmp_path / "store", max_steps=2, **TRAINING_ONLY, **QUIET)
    train(config, store=tmp_path / "store", max_steps=4, **TRAINING_ONLY, **QUIET)
    summary = train(config, store=tmp_path / "store", **TRAINING_ONLY, **QUIET)
    assert summary.end_step == 6
    assert_bit_identical(final_weights(tmp_path / "store"), final_weights(folder / "store"))


@pytest.mark.process
def test_train_returns_with_no_thread_or_process_of_ours_left(trained):
    folder, _, _ = trained
    assert json.loads((folder / "left-running.json").read_text()) == {"threads": [], "exports": []}  # when train() returned
    assert (folder / "store" / "model" / "model.onnx").is_file()  # the final save waited for the graphs: the clock had time


@pytest.mark.process
def test_features_are_computed_as_training_first_reads_each_clip(trained):
    folder, _, step = trained
    entries = list((folder / "store" / "cache" / "features").glob("stft-*/*.safetensors"))
    assert step == 6 and len(entries) == 6 * 4  # the clips of 6 steps at batch 4, not all 102


@pytest.mark.slow
def test_the_gan_starts_at_its_step_and_resumes_across_it_bit_identically(tmp_path):
    config = tiny_config(tmp_path, gan_start_step=3, max_steps=5, eval_every=0, log_every=1, **TRAINING_ONLY)
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


@pytest.mark.process
def test_validation_scores_mcd_and_keeps_samples_and_a_plot(trained):
    folder, _, _ = trained
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


@pytest.mark.process
def test_the_demo_report_reads_a_real_runs_validations(trained):
    """What ``fintts demo`` prints last, from a run's own status: the voice that speaks (the best held-out MCD's) against
    each clean-voice target (the demo's two sessions, without a validation in 25 s: tests/test_configs_as_shipped.py)."""
    folder, _, step = trained
    report = progress_report(folder / "store")
    assert report.startswith(f"== {step:,} steps in 1 session(s)")
    assert "the voice of step" in report and all(label in report for label in ("sentences identified", "held-out MCD", "noise floor"))
    assert "not a clean voice yet" in report or "a clean voice by all three targets" in report


@pytest.mark.process
def test_exported_voice_loads_in_plain_transformers_and_fintts(trained):
    folder, _, _ = trained
    model_dir = folder / "store" / "model"
    model = VitsModel.from_pretrained(model_dir)
    assert model.config.num_speakers == 2
    tts = pipeline("text-to-speech", model=str(model_dir))
    speech = tts("hyvää huomenta")
    assert speech["sampling_rate"] == 16000 and np.asarray(speech["audio"]).size > 100
    for backend in ("torch", "onnx"):
        voice = load_voice(model_dir, backend=backend)
        assert voice.speakers == ["espeak_f2", "espeak_m3"]
        waveform, rate = voice.synthesize("Kello on 7.30.", speaker="espeak_m3")
        assert rate == 16000 and waveform.dtype == np.float32 and waveform.ndim == 1 and waveform.size > 100
    card = ModelCard.load(model_dir / "README.md")
    assert card.data.language == ["fi"] and card.data.pipeline_tag == "text-to-speech" and "fintts say" in card.text


@pytest.mark.process
def test_the_final_voices_onnx_graphs_are_of_its_own_weights(trained):
    # the graphs are made in the background from model/'s own files: they speak as its torch weights do
    model_dir = trained[0] / "store" / "model"
    assert (model_dir / "model.onnx").is_file() and (model_dir / "model.int8.onnx").is_file()
    piper = json.loads((model_dir / "fi_FI-fintts.onnx.json").read_text())  # and the Piper voice (tests/tts/vits/test_piper.py)
    assert piper["speaker_id_map"] == {"espeak_f2": 0, "espeak_m3": 1} and (model_dir / "fi_FI-fintts.onnx").is_file()
    said = [load_voice(model_dir, "espeak_f2", backend=b, int8=False, seed=5).synthesize("Hyvää päivää.")[0]
            for b in ("onnx", "torch")]
    np.testing.assert_allclose(*said, atol=1e-4, rtol=0)


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_a_few_steps_under_cpu_autocast_stay_finite(tmp_path, precision):
    config = tiny_config(tmp_path, precision=precision, max_steps=4, eval_every=0, **TRAINING_ONLY)
    train(config, store=tmp_path / "store", **QUIET)
    status = json.loads((tmp_path / "store" / "status.json").read_text())
    assert all(np.isfinite(v) for k, v in status["loss"].items())
    for tensor in final_weights(tmp_path / "store").values():
        assert torch.isfinite(tensor).all()
    if precision == "fp16":
        scaler = torch.load(checkpoint.latest_complete(tmp_path / "store") / "scaler.pt", weights_only=True)
        assert scaler["scale"] > 0


@pytest.mark.process
def test_punctuation_tokens_reach_the_exported_voice(tmp_path):
    config = tiny_config(tmp_path, punctuation_tokens=",.!?", max_steps=1, eval_every=0)
    train(config, store=tmp_path / "store", **QUIET)
    voice = load_voice(tmp_path / "store" / "model")
    assert voice.text.normalize("Hyvää huomenta! Kello on 7.30.") == "hyvää huomenta! kello on seitsemän kolmekymmentä."
    tokenizer = VitsTokenizer.from_pretrained(tmp_path / "store" / "model")
    assert tokenizer("a, b")["input_ids"] == voice.text.encode("a, b")


@pytest.mark.process
def test_punctuation_tokens_a_pretrained_vocabulary_lacks_are_refused(trained, tmp_path):
    folder, _, _ = trained
    config = tiny_config(tmp_path, init=str(folder / "store" / "model"), model={}, punctuation_tokens="!", max_steps=1)
    result = in_process("train", str(config), "--store", str(tmp_path / "store"), "--no-progress", cwd=tmp_path)
    assert result.returncode == 2 and "punctuation_tokens" in result.stderr and "!" in result.stderr


@pytest.mark.slow
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
    report = in_process("check", str(corpus), "--no-progress", cwd=tmp_path)
    assert report.returncode == 0 and "broken.wav" in report.stdout
    assert "silent_text.flac: empty transcript" in report.stdout
    messages: list[str] = []
    config = tiny_config(tmp_path, data=str(corpus), speakers=[], max_steps=2, eval_every=2, **TRAINING_ONLY)
    summary = train(config, store=tmp_path / "store", progress=False, log=messages.append)
    assert summary.end_step == 2
    assert any("skipped" in m for m in messages) and any("broken.wav" in m for m in messages)


@pytest.mark.process
def test_init_from_a_save_pretrained_folder_and_eval_cli(trained, tmp_path):
    folder, _, _ = trained
    base = tmp_path / "base"
    shutil.copytree(folder / "store" / "model", base)
    config = tiny_config(tmp_path, init=str(base), model={}, max_steps=2, eval_every=2, **TRAINING_ONLY)
    train(config, store=tmp_path / "store", **QUIET)
    result = in_process("eval", "--store", str(tmp_path / "store"), "--json", cwd=tmp_path)
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


@pytest.mark.process
def test_a_new_run_can_start_from_an_old_runs_checkpoint(trained, tmp_path):
    folder, _, _ = trained
    old_checkpoint = checkpoint.latest_complete(folder / "store")
    config = tiny_config(tmp_path, init=str(old_checkpoint), model={}, max_steps=1, eval_every=0, lr=0.0, **TRAINING_ONLY)
    train(config, store=tmp_path / "store", **QUIET)
    # lr 0: one step changes nothing, so the new run holds exactly the old checkpoint's weights
    assert_bit_identical(final_weights(tmp_path / "store"), final_weights(folder / "store"))


@pytest.mark.process
def test_init_from_the_hub_without_network_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # as on a Kaggle session without internet, minus ~25 s of retries
    config = tiny_config(tmp_path, init="facebook/mms-tts-fin", model={}, max_steps=1)
    result = cli("train", str(config), "--store", str(tmp_path / "store"), "--no-progress", cwd=tmp_path)
    assert result.returncode != 0
    assert "init: PATH" in result.stderr or "init: PATH" in result.stdout



@pytest.mark.process
def test_the_runs_page_describes_the_finnish_voice_and_the_run(trained):
    folder, _, step = trained
    page = (folder / "store" / "README.md").read_text()
    assert "language:\n- fi" in page and "pipeline_tag: text-to-speech" in page and "license: apache-2.0" in page
    assert "# tiny: a Finnish text-to-speech voice" in page  # the run's name: its config file's stem
    assert f"at step {step} of 6" in page and "**Base model:** scratch" in page
    assert "MCD, dB, lower is better):** " in page and "**Speakers:** 2" in page
    assert "![training curves](loss.png)" in page and (folder / "store" / "loss.png").is_file()
    assert "| 1 | " in page and "max_steps |" in page  # the sessions table
    assert f"fintts train CONFIG.yaml --store {folder / 'store'}" in page


def test_a_fine_tune_of_mms_names_its_base_model_and_licence(tmp_path):
    context = TaskContext(seed=0, device=torch.device("cpu"), autocast_dtype=None, cache_dir=tmp_path)
    task = VitsTask(VitsTaskConfig(init="facebook/mms-tts-fin"), context)
    status = {"state": "paused", "step": 500, "max_steps": 2800, "monitor": "val/mcd", "best": {"value": 7.25, "step": 250},
              "sessions": [{"id": "a1", "host": "kaggle", "devices": "2×Tesla T4", "start_step": 0, "end_step": 500,
                            "reason": "deadline"}]}
    page = render(status, task.card(status, "alice/voice"), repo="alice/voice", loss_plot=False)
    assert "base_model: facebook/mms-tts-fin" in page and "license: cc-by-nc-4.0" in page and "non-commercial" in page
    assert "MCD, dB, lower is better):** 7.250" in page and "| 1 | a1 | kaggle 2×Tesla T4 |" in page
    assert "fintts pull alice/voice --out my-model" in page and "--hub-repo alice/voice" in page
    assert "fintts say \"Hyvää huomenta! Kello on 7.30.\" --voice my-model" in page  # the folder pull wrote


@pytest.mark.slow
def test_the_corpus_is_compared_by_its_clips_not_its_path(tmp_path):
    """Moved: the same run. Clips added: a warning. A new speaker: refused by name, not by a strict-load error."""
    corpus = tmp_path / "mounted-here"
    for speaker in ("espeak_f2", "espeak_m3"):
        shutil.copytree(DEMO_CORPUS / speaker, corpus / speaker)
    store = tmp_path / "store"
    config = tiny_config(tmp_path, data=str(corpus), speakers=[], max_steps=1, eval_every=0, **TRAINING_ONLY)
    train(config, store=store, **QUIET)

    moved = tmp_path / "mounted-elsewhere"
    corpus.rename(moved)
    messages: list[str] = []
    summary = train(config, store=store, data=str(moved), max_steps=2, progress=False, log=messages.append)
    assert summary.start_step == 1 and not summary.warnings, summary.warnings

    metadata = moved / "espeak_f2" / "metadata.csv"
    first_id, text = metadata.read_text(encoding="utf-8").splitlines()[0].split("|", 1)
    shutil.copy(moved / "espeak_f2" / "wavs" / f"{first_id}.flac", moved / "espeak_f2" / "wavs" / "added_0001.flac")
    metadata.write_text(metadata.read_text(encoding="utf-8") + f"added_0001|{text}\n", encoding="utf-8")
    summary = train(config, store=store, data=str(moved), max_steps=3, **QUIET)
    assert summary.start_step == 2
    assert any("the data changed since step-00000002: training items: 1 added (espeak_f2/added_0001)" in w for w in summary.warnings)

    shutil.copytree(DEMO_CORPUS / "espeak_f5", moved / "espeak_f5")
    with pytest.raises(ConfigDrift, match=r"other labels .*added espeak_f5"):
        train(config, store=store, data=str(moved), max_steps=4, **QUIET)
