"""``task: chatterbox`` through the trainer and the CLI: a tiny random T3 on the demo corpus, a full phase then a LoRA."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import soundfile as sf
import torch
from chatterbox_helpers import PHASES, TINY, TINY_MODEL, tiny_config
from safetensors.torch import load_file, save_file

import fintts
from fintts.train import train
from fintts.train.config import ConfigError, load_config
from fintts.train.run import checkpoint
from fintts.train.task import TaskContext
from fintts.tts.chatterbox.frozen import FROZEN_FILES
from fintts.tts.chatterbox.settings import ChatterboxTaskConfig
from fintts.tts.chatterbox.t3 import T3, T3Settings
from fintts.tts.chatterbox.task import ChatterboxTask, partners
from fintts.tts.corpus import Item
from trainer_helpers import QUIET, assert_bit_identical, built_once, cli, final_weights, train_cli


@pytest.fixture(scope="session")
def phased(tmp_path_factory):
    """Two steps of the full T3 on both speakers, two of a LoRA on the best one; trained once, only read."""

    def build(folder):
        train(tiny_config(folder, phases=PHASES, max_steps=4), store=folder / "store", **QUIET)

    folder = built_once(tmp_path_factory, "chatterbox", build)
    return folder / "tiny.yaml", folder / "store"


def _checkpoint(store, step):
    return store / "checkpoints" / f"step-{step:08d}"


@pytest.mark.slow
def test_training_resumes_bit_identically_and_validates_at_its_cadence(tmp_path):
    """In this process: the command line's sessions of chatterbox-fi.yaml as shipped are tests/tts/chatterbox/test_config.py's."""
    config = tiny_config(tmp_path, max_steps=4, eval_every=2)
    train(config, store=tmp_path / "once", **QUIET)
    first, second = [], []
    train(config, store=tmp_path / "twice", max_steps=2, progress=False, log=first.append)
    train(config, store=tmp_path / "twice", progress=False, log=second.append)
    assert any("token cache: making" in line for line in first)
    assert not any("token cache: making" in line for line in second)  # every clip's tokens were made by the first session
    assert_bit_identical(final_weights(tmp_path / "twice"), final_weights(tmp_path / "once"))
    status = json.loads((tmp_path / "once" / "status.json").read_text())
    assert status["step"] == 4 and [e["step"] for e in status["evals"]] == [2, 4]
    assert all(0 < e["val/loss"] < 10 for e in status["evals"])
    assert all(0 <= e["val/token_accuracy"] <= 1 and 0 < e["val/length_ratio"] <= 1.51 for e in status["evals"])


@pytest.mark.slow
def test_each_validation_speaks_held_out_clips_into_the_checkpoint_the_same_bytes_each_run(tmp_path):
    """``samples: 2``: two held-out clips spoken (greedy T3, the stand-in S3Gen's tones) with what they should say, into
    each validation's checkpoint (whence TensorBoard, the Hub push and the notebook's newest samples); seeded, so two
    runs (one of them resumed) write the same bytes."""
    config = tiny_config(tmp_path, max_steps=2, eval_every=1)
    train(config, store=tmp_path / "once", **QUIET)
    train(config, store=tmp_path / "twice", max_steps=1, **QUIET)
    assert sorted(p.name for p in (_checkpoint(tmp_path / "twice", 1) / "samples").iterdir())[-1] == "1-espeak_m3.wav"
    train(config, store=tmp_path / "twice", **QUIET)
    spoken = {p.name: p.read_bytes() for p in (_checkpoint(tmp_path / "once", 2) / "samples").iterdir()}
    assert sorted(spoken) == ["0-espeak_f2.txt", "0-espeak_f2.wav", "1-espeak_m3.txt", "1-espeak_m3.wav"]
    assert all(len(data) > 44 for name, data in spoken.items() if name.endswith(".wav"))  # more than a header: sound
    assert spoken == {p.name: p.read_bytes() for p in (_checkpoint(tmp_path / "twice", 2) / "samples").iterdir()}
    assert list((tmp_path / "once" / "tb").rglob("events.out.tfevents.*"))
    train(tiny_config(tmp_path, max_steps=1, eval_every=1, samples=0), store=tmp_path / "silent", **QUIET)
    assert not (_checkpoint(tmp_path / "silent", 1) / "samples").exists()
    assert "val/length_ratio" not in json.loads((tmp_path / "silent" / "status.json").read_text())["evals"][0]


@pytest.mark.slow
def test_the_adapter_phase_resumes_bit_identically(phased, tmp_path):
    config, store = phased
    train(config, store=tmp_path / "store", max_steps=3, **QUIET)  # into the adapter phase, then stopped
    train(config, store=tmp_path / "store", **QUIET)
    assert_bit_identical(final_weights(tmp_path / "store"), final_weights(store))


@pytest.mark.slow
def test_the_adapter_phase_trains_the_lora_alone_and_the_export_folds_it_in(phased):
    _, store = phased
    full = load_file(_checkpoint(store, 2) / "model.safetensors")
    adapted = load_file(_checkpoint(store, 4) / "model.safetensors")
    assert any(".lora_A." in key for key in adapted) and not any(".lora_" in key for key in full)
    base = {key.removeprefix("base_model.model.").replace(".base_layer.", "."): value
            for key, value in adapted.items() if ".lora_" not in key}
    assert_bit_identical(base, full)  # the base stayed frozen
    exported = load_file(store / "model" / "t3_mtl23ls_v2.safetensors")
    settings = T3Settings.from_overrides(TINY_MODEL)
    assert exported.keys() == T3(settings).state_dict().keys()  # the release's names, no peft's
    changed = {key for key in exported if not torch.equal(exported[key], full[key])}
    assert changed and all(".self_attn." in key or ".mlp." in key for key in changed)


@pytest.mark.slow
def test_the_merged_t3_computes_what_the_adapted_one_did(phased):
    from fintts.tts.chatterbox.adapter import add_lora
    from fintts.tts.chatterbox.settings import ChatterboxLora

    _, store = phased
    settings = T3Settings.from_overrides(TINY_MODEL)
    lora = ChatterboxLora(**PHASES[1]["settings"]["lora"])
    adapted = add_lora(T3(settings), lora, json.loads((store / "status.json").read_text())["about"]["speaker"])
    adapted.load_state_dict(load_file(_checkpoint(store, 4) / "model.safetensors"), strict=True)
    merged = T3(settings)
    merged.load_state_dict(load_file(store / "model" / "t3_mtl23ls_v2.safetensors"), strict=True)
    generator = torch.Generator().manual_seed(0)
    inputs = dict(speaker=torch.randn(1, 256, generator=generator), prompt=torch.randint(0, 6561, (1, 6), generator=generator),
                  prompt_mask=None, emotion=torch.tensor([0.5]), text=torch.tensor([[255, 3, 4, 5, 0]]), text_lens=torch.tensor([5]),
                  speech=torch.randint(0, 6561, (1, 8), generator=generator), speech_lens=torch.tensor([8]))
    with torch.no_grad():
        torch.testing.assert_close(merged.eval()(**inputs), adapted.eval()(**inputs), rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_the_exported_folder_has_what_from_local_reads(phased):
    _, store = phased
    model = store / "model"
    names = {path.name for path in model.iterdir()}
    assert {"t3_mtl23ls_v2.safetensors", "grapheme_mtl_merged_expanded_v1.json", "conds.pt", "chatterbox.json", "README.md"} <= names
    conds = torch.load(model / "conds.pt", weights_only=True)  # as upstream's Conditionals.load reads it
    assert set(conds) == {"t3", "gen"}
    assert conds["t3"]["speaker_emb"].shape == (1, 256) and conds["t3"]["emotion_adv"].shape == (1, 1, 1)
    assert conds["t3"]["cond_prompt_speech_tokens"].shape[1] <= TINY_MODEL["speech_cond_prompt_len"]
    description = json.loads((model / "chatterbox.json").read_text())
    assert description["reference_clip"].startswith(json.loads((store / "status.json").read_text())["about"]["speaker"])
    assert "license: mit" in (model / "README.md").read_text()


def test_without_the_chatterbox_package_a_release_s_samples_are_skipped_with_one_line_and_the_metrics_kept(tmp_path):
    """Where S3Gen cannot be loaded (here: no chatterbox package, a folder of the release's names standing for the
    release beside a tiny random T3), each validation still scores and decodes; the samples are skipped, said once."""
    said = []
    context = TaskContext(seed=0, device=torch.device("cpu"), autocast_dtype=None, cache_dir=tmp_path / "cache",
                          log=said.append, progress=False)
    settings = {k: v for k, v in TINY.items() if k not in ("task", "max_steps", "batch_size", "eval_every", "num_workers", "lr")}
    task = ChatterboxTask(ChatterboxTaskConfig(**settings), context)
    models = task.build_models()
    task.train_data()
    task.release = tmp_path / "release"  # what build_models sets from weights: a folder, whose S3Gen needs the package
    task.release.mkdir()
    for name in FROZEN_FILES:
        (task.release / name).write_bytes(b"")
    with torch.no_grad():
        evaluations = [task.evaluate(models, step) for step in (1, 2)]
    assert all(not e.files and not e.board and set(e.metrics) == {"val/loss", "val/token_accuracy", "val/length_ratio"}
               for e in evaluations)
    assert len([line for line in said if line.startswith("samples: skipped")]) == 1
    assert "chatterbox package" in next(line for line in said if line.startswith("samples: skipped"))


def test_a_clip_is_conditioned_on_another_clip_of_its_speaker():
    items = [Item(f"{speaker}/{n}", None, "", speaker) for speaker in ("a", "b") for n in range(3)] + [Item("c/0", None, "", "c")]
    pairs = partners(items)
    assert set(pairs) == {i.id for i in items if i.speaker != "c"}  # a speaker with one clip has nothing to condition on
    assert all(target != cond and target[0] == cond[0] for target, cond in pairs.items())


@pytest.mark.process
def test_an_adapter_needs_one_speaker_and_ends_the_run(tmp_path):
    with pytest.raises(ConfigError, match="phases\\[1\\] follows an adapter phase"):
        load_config(tiny_config(tmp_path, phases=[{"steps": 2, "settings": {"lora": {"r": 4}}}, {}]))
    with pytest.raises(ConfigError, match="model: sizes are set with weights: random only"):
        load_config(tiny_config(tmp_path, weights="ResembleAI/chatterbox"))
    store = tmp_path / "store"
    result = cli("train", str(tiny_config(tmp_path, lora={"r": 4})), "--store", str(store), "--no-progress", cwd=tmp_path)
    assert result.returncode == 2 and "set speaker: NAME or best" in result.stderr
    assert checkpoint.latest_complete(store, log=lambda _: None) is None


@pytest.mark.process
def test_fintts_say_speaks_a_dry_runs_voice_in_tones_and_names_what_speaks_a_releases(phased, tmp_path):
    """A random-weights export is spoken as its validation's samples were (its own T3 greedily, a 40-ms tone per speech
    token at 24 kHz), saying first that it is no speech; a release-based one speaks through the chatterbox package, which
    this environment lacks (torchaudio beside a CPU-only torch): that is said, exit code 2, no file."""
    _, store = phased
    out = tmp_path / "out.wav"
    result = cli("say", "Hyvää huomenta.", "--voice", str(store / "model"), "-o", str(out), cwd=tmp_path)
    assert result.returncode == 0 and "weights: random" in result.stderr and "not speech" in result.stderr, result.stderr
    audio, rate = sf.read(out)
    assert rate == 24_000 and len(audio) and len(audio) % 960 == 0 and np.abs(audio).max() > 0.2

    # what speaks is the folder's T3: the same text twice is the same audio; another speech head says other tokens
    voice = tmp_path / "voice"
    shutil.copytree(store / "model", voice)
    said = fintts.load_voice(voice).synthesize("Hyvää huomenta.", warn=None)[0]
    assert np.array_equal(said, fintts.load_voice(voice).synthesize("Hyvää huomenta.", warn=None)[0])
    assert np.abs(said - audio).max() < 1e-4  # the WAV's 16 bits
    weights = load_file(str(voice / "t3_mtl23ls_v2.safetensors"))
    weights["speech_head.weight"] = torch.flip(weights["speech_head.weight"], dims=[0])
    save_file(weights, str(voice / "t3_mtl23ls_v2.safetensors"))
    other = fintts.load_voice(voice).synthesize("Hyvää huomenta.", warn=None)[0]
    assert len(other) != len(said) or not np.array_equal(other, said)

    description = json.loads((voice / "chatterbox.json").read_text())
    (voice / "chatterbox.json").write_text(json.dumps({**description, "weights": "ResembleAI/chatterbox"}))
    result = cli("say", "Hyvää huomenta.", "--voice", str(voice), "-o", str(tmp_path / "no.wav"), cwd=tmp_path)
    assert result.returncode == 2 and "copy them from ResembleAI/chatterbox" in result.stderr, result.stderr[-2000:]
    for name in ("ve.pt", "s3gen.pt"):
        (voice / name).write_bytes(b"")
    result = cli("say", "Hyvää huomenta.", "--voice", str(voice), "-o", str(tmp_path / "no.wav"), cwd=tmp_path)
    assert result.returncode == 2 and "pip install chatterbox-light" in result.stderr, result.stderr[-2000:]
    assert not (tmp_path / "no.wav").exists()


@pytest.mark.process
def test_two_processes_train_it(tmp_path):
    """Data parallel: every trainable parameter gets a gradient (DDP refuses one that does not: the Llama's unused token
    table and the text head are frozen)."""
    config = tiny_config(tmp_path, max_steps=2, eval_every=2)
    result = train_cli(config, tmp_path / "store")
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads((tmp_path / "store" / "status.json").read_text())["step"] == 2


@pytest.mark.slow
def test_clips_longer_than_max_speech_tokens_are_left_out_and_named(tmp_path):
    said = []
    summary = train(tiny_config(tmp_path, max_steps=1, eval_every=1, max_speech_tokens=40), store=tmp_path / "store",
                    progress=False, log=said.append)
    assert summary.end_step == 1
    left_out = [line for line in said if "over 40 speech tokens" in line]
    assert left_out and "left out (espeak_" in left_out[0]


@pytest.mark.slow
def test_a_session_on_a_fresh_disk_reads_the_speech_tokens_the_first_one_made(tmp_path, hub_env):
    """The Hub store carries the token cache (cache/carried/) with the checkpoints: Kaggle's disks start empty."""
    config = tiny_config(tmp_path, max_steps=4, eval_every=2)
    hub = ("--hub-repo", "alice/chatterbox-fi", "--push-every", "0", "--no-progress")
    first = cli("train", str(config), "--store", str(tmp_path / "session-1"), *hub, "max_steps=2", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    second = cli("train", str(config), "--store", str(tmp_path / "session-2"), *hub, cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert "token cache: making" in first.stdout + first.stderr
    assert "from step-00000002" in second.stdout
    assert "token cache: making" not in second.stdout + second.stderr  # every clip's speech tokens came from the Hub
    carried = [p for p in hub_env.files("alice/chatterbox-fi") if p.startswith("cache/carried/chatterbox/")]
    assert carried and len(carried) == len(list((tmp_path / "session-2" / "cache" / "carried").rglob("*.safetensors")))
    spoken = [p for p in hub_env.files("alice/chatterbox-fi") if p.startswith("checkpoints/step-00000004/samples/")]
    assert "checkpoints/step-00000004/samples/0-espeak_f2.wav" in spoken  # each validation's samples reach the Hub


@pytest.mark.slow
def test_the_text_head_learns_beside_the_speech_tokens_as_upstream_and_is_frozen_at_weight_zero(tmp_path):
    """Upstream's T3.loss returns the text and the speech cross-entropy and its training scripts sum them."""
    heads, losses = {}, {}
    for weight in (1.0, 0.0):
        store = tmp_path / f"weight-{weight:g}"
        train(tiny_config(tmp_path, max_steps=1, eval_every=0, text_loss_weight=weight), store=store, **QUIET)
        heads[weight] = load_file(_checkpoint(store, 1) / "model.safetensors")["text_head.weight"]
        losses[weight] = json.loads((store / "status.json").read_text())["loss"]
    assert losses[1.0]["loss"] == pytest.approx(losses[1.0]["speech"] + losses[1.0]["text"], rel=1e-5)
    assert "text" not in losses[0.0] and losses[0.0]["loss"] == pytest.approx(losses[0.0]["speech"])
    assert losses[0.0]["speech"] == pytest.approx(losses[1.0]["speech"])  # the same first step, the same speech loss
    assert not torch.equal(heads[1.0], heads[0.0])  # the same start: only the summed loss moved the text head
