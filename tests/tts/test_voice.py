"""The laptop voice: load_voice on torch and ONNX, their parity, the API, torch-free use, fintts say, pull and export.

Voices are tiny random VITS models written by the same ``save_voice`` the VITS task's
export calls (the task's own export is covered in test_vits_task.py); the Hub is the
local stand-in server.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import numpy as np
import onnx
import pytest
import soundfile as sf
import torch
from huggingface_hub import HfApi
from nbclient import NotebookClient
from transformers import VitsModel

import fintts
from fintts.tts.hub_voice import is_public
from fintts.tts.text import FinnishText
from fintts.tts.vits.export import save_voice
from fintts.tts.vits.inference import VitsSynthesizer
from fintts.tts.vits.init import vits_initialisation
from fintts.tts.vits.voice import PAUSES
from fintts.tts.voice import load_voice
from fintts.tts.voice_format import VoiceError
from hub_helpers import TOKEN
from trainer_helpers import assert_quiet, built_once, cli, in_process
from vits_helpers import tiny_vits_config

ROOT = Path(__file__).resolve().parents[2]
TEXT = "Hyvää huomenta! Kello on 7.30. Ei."
SPEAKERS = ["anna", "ben", "cai"]
#: torch (oneDNN) and onnxruntime (MLAS) add up convolutions in different orders; over the
#: ~30 layers of the tiny voice the float32 waveforms differ by ~1e-6..1e-5 (MMS-sized:
#: ~1e-4, see benchmarks/voice_rtf.py). 1e-4 keeps a margin and still fails on any real
#: difference: another noise or speaker moves samples by more than 10 times as much.
PARITY_ATOL = 1e-4


def tiny_voice(folder: Path, speakers: list[str], *, onnx: bool = True, **config) -> Path:
    torch.manual_seed(len(speakers))
    extra = {"num_speakers": len(speakers), "speaker_embedding_size": 8} if len(speakers) > 1 else {}
    extra.update(config)
    vits = vits_initialisation(VitsModel(tiny_vits_config(**extra)))
    save_voice(vits, folder, FinnishText.default(), speakers, onnx=onnx)
    return folder


@pytest.fixture(scope="session")
def voices(tmp_path_factory):
    def build(root):
        tiny_voice(root / "single", ["solo"])
        tiny_voice(root / "multi", SPEAKERS)
        # deterministic durations: a graph with no duration_noise input, int8 calibration included
        tiny_voice(root / "fixed", ["solo"], use_stochastic_duration_prediction=False)

    root = built_once(tmp_path_factory, "voices", build)
    return {kind: root / kind for kind in ("single", "multi", "fixed")}


def test_synthesizer_matches_transformers_given_the_same_noise():
    """VitsSynthesizer is VitsModel's inference with the noise passed in: same noise, same audio."""
    torch.manual_seed(0)
    vits = vits_initialisation(VitsModel(tiny_vits_config(num_speakers=3, speaker_embedding_size=8))).eval()
    ids = torch.tensor([FinnishText.default().encode("Hyvää huomenta, tänään on kaunis päivä.")])
    with torch.no_grad():
        torch.manual_seed(5)
        reference = vits(ids, speaker_id=2)
        frames = reference.spectrogram.shape[-1]
        torch.manual_seed(5)  # VitsModel's draws, in its order and memory layout
        duration_noise = torch.randn(1, 2, ids.shape[1]) * vits.noise_scale_duration
        prior_noise = torch.randn_like(torch.empty(1, frames, vits.config.flow_size).transpose(1, 2)) * vits.noise_scale
        extra = torch.randn(1, vits.config.flow_size, 9)  # columns past the last frame must not matter
        waveform, used = VitsSynthesizer(vits)(ids, duration_noise, torch.cat([prior_noise, extra], 2), torch.tensor([1.0]),
                                               torch.tensor([2]))
    assert int(used) == frames
    assert torch.allclose(waveform, reference.waveform, atol=PARITY_ATOL)


@pytest.mark.parametrize("kind", ["single", "multi", "fixed"])
def test_onnx_and_torch_say_the_same_with_the_same_seed(voices, kind):
    speaker = "cai" if kind == "multi" else None
    said = {}
    for backend in ("torch", "onnx"):
        voice = load_voice(voices[kind], speaker, backend=backend, int8=False, seed=7)
        said[backend], rate = voice.synthesize(TEXT + " A.")  # a one-letter sentence: shorter than the attention window
    assert rate == 16000 and said["torch"].dtype == np.float32 and said["torch"].ndim == 1
    assert said["onnx"].shape == said["torch"].shape
    np.testing.assert_allclose(said["onnx"], said["torch"], atol=PARITY_ATOL, rtol=0)
    int8, _ = load_voice(voices[kind], speaker, seed=7).synthesize(TEXT + " A.")
    assert int8.shape == said["torch"].shape  # durations are computed in float32 in both graphs


def test_speakers_and_seeds_change_the_speech_and_the_int8_graph_keeps_the_timing(voices):
    voice = load_voice(voices["multi"], seed=3)
    assert voice.backend.name == "onnx (model.int8.onnx)" and voice.speakers == SPEAKERS
    anna, _ = voice.synthesize(TEXT, speaker="anna")
    assert np.array_equal(anna, voice.synthesize(TEXT, speaker=0)[0])  # a seed repeats itself, names and numbers agree
    ben, _ = voice.synthesize(TEXT, speaker="ben")
    assert anna.shape != ben.shape or np.abs(anna - ben).max() > 10 * PARITY_ATOL
    other_seed, _ = load_voice(voices["multi"], seed=4).synthesize(TEXT, speaker="anna")
    assert other_seed.shape != anna.shape or np.abs(other_seed - anna).max() > 10 * PARITY_ATOL
    float32, _ = load_voice(voices["multi"], int8=False, seed=3).synthesize(TEXT, speaker="anna")
    assert float32.shape == anna.shape  # durations are computed in float32 in both graphs
    with pytest.raises(VoiceError, match="unknown speaker 'dora'.*anna, ben, cai"):
        voice.synthesize(TEXT, speaker="dora")


@pytest.mark.parametrize("kind", ["single", "multi"])
def test_the_int8_graph_says_what_the_float32_graph_says(voices, kind):
    """The fast graph keeps the voice: same noise, the same speech within int8's rounding, and its last stage float32.

    Signal-to-difference (the float32 waveform's energy over that of the int8 one's difference from it): an int8
    graph whose ranges were calibrated wrongly falls far below the bound. These tiny voices give 69-70 dB (all their
    residual blocks in int8: 59-70 dB); MMS-sized, 61 dB (all blocks: 54 dB; benchmarks/README.md, "The laptop voice").
    """
    speaker = "ben" if kind == "multi" else None
    float32, _ = load_voice(voices[kind], speaker, int8=False, seed=5).synthesize(TEXT)
    int8, _ = load_voice(voices[kind], speaker, seed=5).synthesize(TEXT)
    assert int8.shape == float32.shape
    assert 10 * np.log10(np.sum(float32**2) / np.sum((int8 - float32) ** 2)) > 40.0
    graph = onnx.load(str(voices[kind] / "model.int8.onnx")).graph
    dequantized = {node.output[0] for node in graph.node if node.op_type == "DequantizeLinear"}
    weights = {node.name: node.input[1] in dequantized for node in graph.node if node.op_type == "Conv"}
    blocks = [name for name in weights if name.startswith("/decoder/resblocks.")]
    config = VitsModel.config_class.from_pretrained(voices[kind])
    last_stage = [f"/decoder/resblocks.{len(config.resblock_kernel_sizes) * (len(config.upsample_rates) - 1) + k}/"
                  for k in range(len(config.resblock_kernel_sizes))]
    assert blocks and all(weights[name] != name.startswith(tuple(last_stage)) for name in blocks)
    assert not any(int8 for name, int8 in weights.items() if name not in blocks)  # the rest of the graph is float32


def test_voice_streams_sentences_with_pauses_saves_a_wav_and_reports_unknown_characters_once(voices, tmp_path):
    voice = fintts.load_voice(voices["single"], seed=1)
    notes = []
    chunks = list(voice.stream("Ensimmäinen lause ж. Toinen ж lause!\n\nKolmas kappale.", warn=notes.append))
    assert len(chunks) == 3 and notes == ["left out characters this voice cannot say: 'ж'"]
    silence = round(PAUSES["sentence"] * voice.sample_rate)
    assert not chunks[0][-silence:].any() and not chunks[1][-round(PAUSES["paragraph"] * voice.sample_rate):].any()
    whole, rate = voice.synthesize("Ensimmäinen lause ж. Toinen ж lause!\n\nKolmas kappale.", warn=None)
    assert np.array_equal(whole, np.concatenate(chunks))
    path = voice.save(TEXT, tmp_path / "out.wav")
    data, file_rate = sf.read(path, dtype="float32")
    assert file_rate == rate and sf.info(path).subtype == "PCM_16"
    assert np.abs(data - voice.synthesize(TEXT)[0]).max() < 1e-4
    faster, _ = fintts.load_voice(voices["single"], seed=1, speed=2.0).synthesize(TEXT)
    assert len(faster) < 0.75 * len(voice.synthesize(TEXT)[0])
    with pytest.raises(VoiceError, match="nothing to say"):
        voice.save("ж @ #", tmp_path / "empty.wav")
    assert not (tmp_path / "empty.wav").exists()


@pytest.mark.process
def test_import_fintts_and_an_onnx_voice_never_import_torch(voices, tmp_path):
    blocker = textwrap.dedent("""
        import sys

        class NoTorch:  # as if the light install had no torch: importing it fails as a missing module does
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("torch", "transformers", "accelerate"):
                    raise ModuleNotFoundError(f"No module named {name!r}", name=name)

        sys.meta_path.insert(0, NoTorch())

        def leaked():
            return sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "transformers") or m.startswith("fintts.train"))
    """)
    api = blocker + textwrap.dedent(f"""
        import fintts
        assert leaked() == [], leaked()
        voice = fintts.load_voice({str(voices["multi"])!r}, "ben", seed=2)
        print(voice.backend.name, voice.save("Hyvää yötä.", {str(tmp_path / "api.wav")!r}), leaked())
    """)
    result = subprocess.run([sys.executable, "-c", api], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("[]") and (tmp_path / "api.wav").stat().st_size > 1000
    command = blocker + textwrap.dedent("""
        import atexit, runpy
        atexit.register(lambda: print("leaked:", leaked(), file=sys.stderr))  # run by any exit of the command
        runpy.run_module("fintts", run_name="__main__")
    """)
    result = subprocess.run([sys.executable, "-c", command, "say", TEXT, "--voice", str(voices["single"]), "-o", "cli.wav"],
                            capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0 and "leaked: []" in result.stderr, result.stderr
    assert "onnx (model.int8.onnx)" in result.stdout and sf.info(tmp_path / "cli.wav").duration > 0
    result = subprocess.run([sys.executable, "-c", command, "train", str(ROOT / "configs" / "demo.yaml")],
                            capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 2 and "pip install 'fintts[train]'" in result.stderr


@pytest.mark.process
def test_fintts_say_from_an_argument_a_file_and_stdin(voices, tmp_path):
    (tmp_path / "text.txt").write_text("Tiedostosta luettu lause. Ja toinen.\n", encoding="utf-8")
    runs = {
        "argument": in_process("say", TEXT, "--voice", str(voices["multi"]), "--speaker", "ben", "-o", "a.wav", cwd=tmp_path),
        "file": in_process("say", "-f", "text.txt", "--voice", str(voices["single"]), "-o", "f.wav", "--seed", "1", "--fp32", cwd=tmp_path),
        "stdin": subprocess.run([sys.executable, "-m", "fintts", "say", "--voice", str(voices["single"]), "-o", "s.wav", "--seed", "1",
                                 "--backend", "torch"], input="Tiedostosta luettu lause. Ja toinen.\n", capture_output=True,
                                text=True, cwd=tmp_path),
    }
    for name, run in runs.items():
        assert run.returncode == 0, (name, run.stderr)
    assert "2 chunk(s)" in runs["file"].stdout and "with torch" in runs["stdin"].stdout
    file_said, _ = sf.read(tmp_path / "f.wav", dtype="int16")
    stdin_said, _ = sf.read(tmp_path / "s.wav", dtype="int16")
    assert np.abs(file_said.astype(int) - stdin_said).max() <= 4  # the same seed, ONNX float32 and torch: the same speech
    unknown = in_process("say", "Pöö ж! Ж taas.", "--voice", str(voices["single"]), "-o", "u.wav", cwd=tmp_path)
    assert unknown.returncode == 0 and unknown.stderr.count("cannot say") == 1 and "'ж'" in unknown.stderr
    missing = in_process("say", TEXT, "--voice", str(tmp_path / "nowhere"), "-o", "x.wav", cwd=tmp_path)
    assert missing.returncode == 2 and "does not exist" in missing.stderr


@pytest.mark.process
def test_fintts_say_play_streams_to_a_player_and_says_when_there_is_none(voices, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    player = bin_dir / "aplay"
    player.write_text(f"#!/bin/sh\ncat > {tmp_path / 'played.raw'}\n")
    player.chmod(player.stat().st_mode | stat.S_IEXEC)
    checkout = str(Path(__file__).resolve().parents[2])  # this checkout's fintts, wherever the installed one is
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": os.pathsep.join(filter(None, [checkout, os.environ.get("PYTHONPATH")]))}
    args = [sys.executable, "-m", "fintts", "say", TEXT, "--voice", str(voices["single"]), "-o", "p.wav", "--play", "--seed", "2"]
    played = subprocess.run(args, capture_output=True, text=True, cwd=tmp_path, env=env)
    assert played.returncode == 0, played.stderr
    saved, _ = sf.read(tmp_path / "p.wav", dtype="int16")
    assert np.array_equal(np.frombuffer((tmp_path / "played.raw").read_bytes(), "<i2"), saved)
    nothing = subprocess.run(args, capture_output=True, text=True, cwd=tmp_path, env={**env, "PATH": str(bin_dir / "none")})
    assert nothing.returncode == 2 and "no audio player found" in nothing.stderr
    # a player that fails (no sound device): the wav asked for is whole, so the command succeeds and says so;
    # asked only to play, it fails
    player.write_text("#!/bin/sh\ncat > /dev/null\necho 'aplay: no sound card' >&2\nexit 1\n")
    (tmp_path / "p.wav").unlink()
    failed = subprocess.run(args, capture_output=True, text=True, cwd=tmp_path, env=env)
    assert failed.returncode == 0, failed.stderr
    assert "--play: aplay failed (exit code 1" in failed.stderr and "p.wav is complete" in failed.stderr
    assert np.array_equal(sf.read(tmp_path / "p.wav", dtype="int16")[0], saved)
    only_played = subprocess.run([a for a in args if a not in ("-o", "p.wav")], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert only_played.returncode == 2 and "--play: aplay failed" in only_played.stderr


def upload_voice(hub, folder: Path, repo: str = "alice/voice") -> None:
    """A private Hub run whose model/ is ``folder``, as a trainer's push leaves it."""
    api = HfApi(endpoint=hub.endpoint, token=TOKEN)
    api.create_repo(repo, private=True)
    api.upload_folder(folder_path=str(folder), path_in_repo="model", repo_id=repo)


@pytest.mark.slow
def test_pull_brings_a_voice_with_onnx_and_say_works_from_the_hub_offline(tmp_path, hub_env, monkeypatch):
    upload_voice(hub_env, tiny_voice(tmp_path / "plain", ["solo"], onnx=False))  # exported without ONNX (an older fintts)
    assert not is_public("alice/voice", endpoint=hub_env.endpoint)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    pulled = cli("pull", "alice/voice", "--out", "laptop", cwd=tmp_path)
    assert pulled.returncode == 0, pulled.stderr
    assert TOKEN not in pulled.stdout + pulled.stderr
    folder = tmp_path / "laptop" / "model"
    assert {"model.onnx", "model.int8.onnx", "model.safetensors"} <= {p.name for p in folder.iterdir()}
    assert load_voice(folder, backend="onnx", int8=False).synthesize("Hei.")[0].size > 0
    online = cli("say", "Hei.", "--hub-repo", "alice/voice", "-o", "hub.wav", "--backend", "torch", cwd=tmp_path)
    assert_quiet(online, "say --backend torch")
    hub_env.stop()
    offline = cli("say", "Hei taas.", "--hub-repo", "alice/voice", "-o", "offline.wav", cwd=tmp_path)
    assert_quiet(offline, "say (onnx)")  # from the cache: no network needed once pulled, and no retries logged
    unknown = cli("say", "Hei.", "--hub-repo", "alice/nobody", "-o", "x.wav", cwd=tmp_path)
    assert unknown.returncode == 2 and "not downloaded yet" in unknown.stderr


@pytest.mark.process
def test_pull_takes_no_pickled_weights_from_the_hub(tmp_path, hub_env, monkeypatch):
    """A voice whose model/ has pytorch_model.bin instead of model.safetensors (and no ONNX) is refused, not unpickled."""
    from safetensors.torch import load_file

    voice = tiny_voice(tmp_path / "pickled", ["solo"], onnx=False)
    torch.save(load_file(voice / "model.safetensors"), voice / "pytorch_model.bin")  # what transformers would load instead
    (voice / "model.safetensors").unlink()
    upload_voice(hub_env, voice)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    pulled = cli("pull", "alice/voice", "--out", "laptop", cwd=tmp_path)
    assert pulled.returncode == 2, pulled.stdout + pulled.stderr
    assert "alice/voice's model/ has no model.safetensors" in pulled.stderr and "pytorch_model.bin" in pulled.stderr
    assert not list((tmp_path / "laptop").rglob("*.bin")) and not list((tmp_path / "laptop").rglob("*.onnx"))
    spoken = cli("say", "Hei.", "--hub-repo", "alice/voice", "--backend", "torch", "-o", "hub.wav", cwd=tmp_path)
    assert spoken.returncode == 2 and "no model.safetensors" in spoken.stderr, spoken.stderr


@pytest.mark.slow
def test_export_onnx_writes_the_graphs_into_a_voice_folder(tmp_path):
    plain = tiny_voice(tmp_path / "plain", SPEAKERS, onnx=False)
    result = in_process("export", "--onnx", "--voice", str(plain), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (plain / "model.onnx").is_file() and (plain / "model.int8.onnx").is_file()
    said = [load_voice(plain, "cai", backend=b, int8=False, seed=5).synthesize(TEXT)[0] for b in ("onnx", "torch")]
    np.testing.assert_allclose(*said, atol=PARITY_ATOL, rtol=0)
    refused = in_process("export", "--voice", str(plain), cwd=tmp_path)
    assert refused.returncode == 2 and "--onnx" in refused.stderr


@pytest.mark.process
def test_laptop_notebook_pulls_speaks_and_writes_a_wav(voices, tmp_path, hub_env, monkeypatch):
    notebook = nbformat.read(ROOT / "notebooks" / "laptop_voice.ipynb", as_version=4)
    parameters = next(i for i, c in enumerate(notebook.cells) if "parameters" in c.metadata.get("tags", []))
    out = tmp_path / "huomenta.wav"
    overrides = dict(INSTALL=False, REPO="alice/voice", VOICE=str(tmp_path / "voice"), OUT=str(out), SPEAKER="ben")
    notebook.cells.insert(parameters + 1, nbformat.v4.new_code_cell("\n".join(f"{k} = {v!r}" for k, v in overrides.items())))
    upload_voice(hub_env, voices["multi"])
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    NotebookClient(notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert sf.info(out).duration > 0.1
    outputs = json.dumps([c.get("outputs", []) for c in notebook.cells])
    assert "data:audio/x-wav;base64" in outputs and TOKEN not in outputs
