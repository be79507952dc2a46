"""The Piper voice: Piper's own runtime (piper-tts 1.8.0, in a venv of its own) speaks it as transformers' VitsModel does.

The venv is made once per machine under pytest's cache (``.pytest_cache/d/piper-tts-1.8.0``): piper-tts pins its own
onnxruntime, which must not meet ours. The voices are tiny random VITS models saved by ``save_voice``.
"""

from __future__ import annotations

import fcntl
import json
import random
import subprocess
import sys
import textwrap
import unicodedata
import wave
from pathlib import Path

import numpy as np
import pytest
import torch
from huggingface_hub import HfApi
from transformers import VitsModel

from fintts.cli import main
from fintts.tts.text import FALLBACK_VOCAB, FinnishText
from fintts.tts.vits.export import export_folder, save_voice
from fintts.tts.vits.init import vits_initialisation
from fintts.tts.vits.piper import PiperGraph, PiperTables
from fintts.tts.voice_format import PIPER_FILE
from hub_helpers import TOKEN
from trainer_helpers import cli
from vits_helpers import tiny_vits_config

PIPER = "piper-tts==1.8.0"
#: Finnish as written, no digits: ä/ö composed from NFD, capitals, punctuation, quotes, in-word ' and -, a dash.
SENTENCES = [
    "Hyvää päivää, Äiti!",
    "ÖLJYÄ JA VAA'AN EU-MAA – sanoi hän: \"Ei.\"",
    "Onko tämä se talo, jonka ostit viime vuonna?",
    "Café & Søn, Müller; (ja niin edelleen)…",
]
SPEAKERS = ["anna", "ben", "cai"]
#: onnxruntime and torch add up convolutions in different orders (tests/tts/test_voice.py's PARITY_ATOL); the tiny voices
#: here agree to ~1e-7.
ATOL = 1e-5

RUN_PIPER = textwrap.dedent("""
    import json, sys
    import numpy as np
    from piper import PiperVoice, SynthesisConfig
    model, out, speaker = sys.argv[1], sys.argv[2], int(sys.argv[3])
    voice = PiperVoice.load(model)
    config = SynthesisConfig(speaker_id=speaker, noise_scale=0.0, noise_w_scale=0.0, normalize_audio=False)
    arrays = {}
    for n, sentence in enumerate(json.loads(sys.stdin.read())):
        chunks = list(voice.synthesize(sentence, config))
        assert len(chunks) == 1, len(chunks)  # text mode: the whole text is one sentence
        arrays[f"s{n}"] = chunks[0].audio_float_array
    np.savez(out, **arrays)
""")


@pytest.fixture(scope="session")
def piper_python(request) -> Path:
    """The venv's python with piper-tts 1.8.0 (made once, kept in pytest's cache)."""
    cache = getattr(request.config, "cache", None)  # None under -p no:cacheprovider: a venv for this run only
    venv = Path(cache.mkdir("piper-tts-1.8.0")) if cache else request.getfixturevalue("tmp_path_factory").mktemp("piper-venv")
    python, done = venv / "bin" / "python", venv / "installed"
    with open(venv.with_name(venv.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # under pytest -n the workers share the cache: one makes the venv, the others wait
        if not done.is_file():
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
            pip = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-compile", "--disable-pip-version-check", PIPER],
                                 capture_output=True, text=True)
            if pip.returncode != 0:
                reachable = "Could not find a version" not in pip.stderr and "NewConnectionError" not in pip.stderr
                if reachable:
                    pytest.fail(f"pip install {PIPER} failed:\n{pip.stderr[-3000:]}")
                pytest.skip(f"pip cannot reach the package registry to install {PIPER}: {pip.stderr.strip().splitlines()[-1]}")
            done.write_text(PIPER)
    return python


def tiny_voice(folder: Path, speakers: list[str], *, onnx: bool = False) -> Path:
    torch.manual_seed(len(speakers))
    extra = {"num_speakers": len(speakers), "speaker_embedding_size": 8} if len(speakers) > 1 else {}
    save_voice(vits_initialisation(VitsModel(tiny_vits_config(**extra))), folder, FinnishText.default(), speakers, onnx=onnx)
    return folder


def transformers_says(folder: Path, sentence: str, speaker: int | None) -> np.ndarray:
    """VitsModel with its noise off, on FinnishText's ids: what the voice says."""
    vits = VitsModel.from_pretrained(folder).eval()
    vits.noise_scale = vits.noise_scale_duration = 0.0
    with torch.no_grad():
        return vits(torch.tensor([FinnishText.from_folder(folder).encode(sentence)]), speaker_id=speaker).waveform[0].numpy()


def piper_says(python: Path, model: Path, speaker: int, tmp: Path) -> list[np.ndarray]:
    script, out = tmp / "run_piper.py", tmp / "piper.npz"
    script.write_text(RUN_PIPER)
    run = subprocess.run([str(python), str(script), str(model), str(out), str(speaker)], input=json.dumps(SENTENCES),
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    arrays = np.load(out)
    return [arrays[f"s{n}"] for n in range(len(SENTENCES))]


@pytest.mark.process
def test_piper_speaks_a_voice_as_transformers_does(piper_python, tmp_path):
    voice = tiny_voice(tmp_path / "voice", ["solo"])
    assert main(["export", "--piper", "--voice", str(voice), "--out", str(tmp_path / "fi_FI-solo.onnx")]) == 0
    config = json.loads((tmp_path / "fi_FI-solo.onnx.json").read_text(encoding="utf-8"))
    assert config["phoneme_type"] == "text" and config["audio"]["sample_rate"] == 16000 and config["num_speakers"] == 1
    assert config["inference"] == {"noise_scale": 0.667, "length_scale": 1.0, "noise_w": 0.8}
    for sentence, said in zip(SENTENCES, piper_says(piper_python, tmp_path / "fi_FI-solo.onnx", 0, tmp_path)):
        np.testing.assert_allclose(said, transformers_says(voice, sentence, None), atol=ATOL, rtol=0, err_msg=sentence)


@pytest.mark.process
def test_piper_speaks_each_speaker_of_a_voice_as_transformers_does(piper_python, tmp_path):
    voice = tiny_voice(tmp_path / "voice", SPEAKERS)
    assert main(["export", "--piper", "--voice", str(voice)]) == 0
    model = voice / "fi_FI-fintts.onnx"
    config = json.loads(Path(f"{model}.json").read_text(encoding="utf-8"))
    assert config["num_speakers"] == 3 and config["speaker_id_map"] == {"anna": 0, "ben": 1, "cai": 2}
    for sentence, said in zip(SENTENCES, piper_says(piper_python, model, 2, tmp_path)):
        np.testing.assert_allclose(said, transformers_says(voice, sentence, 2), atol=ATOL, rtol=0, err_msg=sentence)
        assert np.abs(said - transformers_says(voice, sentence, 0)).max() > 100 * ATOL  # the speaker is heard
    # Piper's command line: int16 WAV, the same samples to the last bit of rounding
    wav = tmp_path / "cli.wav"
    run = subprocess.run([str(piper_python), "-m", "piper", "-m", str(model), "-s", "1", "--noise-scale", "0", "--noise-w", "0",
                          "--no-normalize", "-f", str(wav), "--", SENTENCES[0]], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    with wave.open(str(wav)) as f:
        assert f.getframerate() == 16000
        samples = np.frombuffer(f.readframes(f.getnframes()), np.int16) / 32767.0
    np.testing.assert_allclose(samples, transformers_says(voice, SENTENCES[0], 1), atol=1.5 / 32767, rtol=0)


def piper_ids(tables: PiperTables, text: str) -> list[int]:
    """Piper 1.8's ids for ``text`` with phoneme_type text (piper/voice.py phonemize, piper/phoneme_ids.py)."""
    pad = [tables.id_map["_"]]
    ids = [tables.id_map["^"]] + pad
    for ch in unicodedata.normalize("NFD", text):
        if ch in tables.id_map:  # Piper skips (and logs) a code point not in the map
            ids += [tables.id_map[ch]] + pad
    return ids + [tables.id_map["$"]]


@pytest.mark.parametrize("text", [
    FinnishText.default(),
    # an MMS-like vocabulary: a real letter at id 0, punctuation of its own, no hyphen or apostrophe, no blanks
    FinnishText({"k": 0, " ": 1, ",": 2, ".": 3, **{c: n + 4 for n, c in enumerate("abdeghijlmnoprstuvyäöå")}}, add_blank=False),
], ids=["fallback", "mms-like"])
def test_the_graph_reads_text_as_fintts_does(text):
    """The graph's reading (Piper's ids → the voice's ids) is FinnishText.encode's, for any digit-free text."""
    tables = PiperTables.build(text)
    graph = PiperGraph(VitsModel(tiny_vits_config(vocab_size=max(FALLBACK_VOCAB.values()) + 1)), tables)
    rng = random.Random(0)
    alphabet = [c for c in tables.id_map if not c.isdigit()] + list("aeiouäöÄÖ '-,.\u0308\u0301") * 30
    written = ["Hyvää päivää!", "ÄITI ÖLJYÄ.", "vaa'an EU-maa – 'lainaus' ja \"toinen\".", "", "!!!", "a_b $ ^x", "ﬁ Ω Å ệ ǘ",
               "  väli  , , piste .  ", "a''b a-'b -a- a--b", "ä\u031d ö\u0308"]
    written += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 16))) for _ in range(600)]
    for sentence in written:
        ids = piper_ids(tables, sentence)
        got = graph.text_ids(torch.tensor([ids]), torch.tensor([len(ids)])).tolist()
        assert got == text.encode(sentence), sentence


@pytest.mark.process
def test_pull_brings_the_piper_voice_or_makes_it(tmp_path, hub_env, monkeypatch):
    """A run's model/ with the Piper voice (the trainer's export) comes as it is; one from before fintts made Piper voices
    gets it made on the laptop."""
    api = HfApi(endpoint=hub_env.endpoint, token=TOKEN)
    trained = tiny_voice(tmp_path / "trained", ["solo"])
    export_folder(trained, int8=False)
    older = tiny_voice(tmp_path / "older", ["solo"], onnx=True)
    for repo, folder in (("alice/new", trained), ("alice/old", older)):
        api.create_repo(repo, private=True)
        api.upload_folder(folder_path=str(folder), path_in_repo="model", repo_id=repo)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    for repo in ("alice/new", "alice/old"):  # a process of its own: huggingface_hub reads its endpoint at import
        pulled = cli("pull", repo, "--out", str(tmp_path / repo), cwd=tmp_path)
        assert pulled.returncode == 0, pulled.stderr
    pulled = tmp_path / "alice/new/model"
    for name in (PIPER_FILE, f"{PIPER_FILE}.json"):
        assert (pulled / name).read_bytes() == (trained / name).read_bytes()
    made = json.loads((tmp_path / "alice/old/model" / f"{PIPER_FILE}.json").read_text(encoding="utf-8"))
    assert made["phoneme_type"] == "text" and (tmp_path / "alice/old/model" / PIPER_FILE).stat().st_size > 100_000


def test_export_piper_refuses_what_it_cannot_write(tmp_path, capsys):
    voice = tiny_voice(tmp_path / "voice", ["solo"])
    for args, message in ((["--voice", str(voice)], "--onnx"), (["--onnx", "--piper", "--voice", str(voice)], "exactly one"),
                          (["--piper", "--voice", str(voice), "--out", str(tmp_path / "x.wav")], ".onnx"),
                          (["--onnx", "--voice", str(voice), "--out", "x.onnx"], "--piper")):
        assert main(["export", *args]) == 2 and message in capsys.readouterr().err, args
    assert not list(tmp_path.rglob("*.onnx*"))
