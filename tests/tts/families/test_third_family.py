"""A third voice family, defined only here, works through fintts's commands with no change to fintts.

The family is two modules written into a folder of the test's (its face, importing nothing heavy, and its task, a
toy model that trains in seconds) and a distribution's metadata beside them that registers both through the entry
points, ``fintts.tasks`` and ``fintts.families``, as an installed package would. Its voice speaks a sine. Each
command runs as a person runs it, ``python -m fintts`` in a process of its own, with that folder on its PYTHONPATH:
the point is that fintts finds the family by its entry point and the CLI and ``say`` dispatch to it.
"""

from __future__ import annotations

import json
import os
import textwrap

import numpy as np
import pytest
import soundfile as sf
import yaml

from trainer_helpers import cli

#: every test here starts a process (a fintts command): not the unit tier
pytestmark = pytest.mark.process

#: the family's face: what fintts's commands ask of it (fintts/tts/family.py); numpy only, so `say` loads no torch
FACE = '''
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from fintts.tts.family import Family, Scores
from fintts.tts.streamed_voice import StreamedVoice

MARK = "sine.json"


class SineVoice(StreamedVoice):
    backend_name = "sine"
    sample_rate = 16_000

    def __init__(self, hz: float):
        self.hz = hz

    def stream(self, text, *, speaker=None, warn=None):
        for sentence in filter(None, (part.strip() for part in text.split("."))):
            t = np.arange(round(0.05 * len(sentence) * self.sample_rate)) / self.sample_rate
            yield (0.5 * np.sin(2 * np.pi * self.hz * t)).astype(np.float32)


def owns(folder: Path) -> bool:
    return (folder / MARK).is_file()


def load_voice(folder: Path, speaker=None, **options) -> SineVoice:
    return SineVoice(json.loads((folder / MARK).read_text())["hz"])


def export(folder: Path, *, piper=False, out=None, int8=True) -> list[Path]:
    written = folder / "sine.csv"
    waveform, _ = load_voice(folder).synthesize("Hei.")
    written.write_text("\\n".join(f"{x:.4f}" for x in waveform))
    return [written]


def evaluate(model_dir: Path, settings) -> Scores:
    voice = load_voice(model_dir)
    audio, _ = voice.synthesize("Hyvää huomenta.")
    heard = float(np.argmax(np.abs(np.fft.rfft(audio)))) * voice.sample_rate / len(audio)
    return Scores({"hz": heard}, f"the voice's pitch: {heard:.0f} Hz")


FAMILY = Family(name="sine", task="sine", owns=owns, load_voice=load_voice, export=export, evaluate=evaluate)
'''

#: its task: the tests' toy regression (tests/stand_ins), whose export also writes the voice's mark
TASK = '''
import json
import os

from fintts_stand_ins.toy import ToyTask


class SineTask(ToyTask):
    def export(self, models, out_dir):
        super().export(models, out_dir)
        (out_dir / "sine.json").write_text(json.dumps({"hz": 440.0}))
'''

ENTRY_POINTS = """
[fintts.tasks]
sine = sine_task:SineTask

[fintts.families]
sine = sine_family:FAMILY
"""


@pytest.fixture
def sine_family(tmp_path, monkeypatch):
    """A folder with the family's modules and its distribution's metadata, on the PYTHONPATH of the commands run."""
    package = tmp_path / "site"
    info = package / "fintts_sine-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fintts-sine\nVersion: 0\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(ENTRY_POINTS))
    (package / "sine_family.py").write_text(FACE)
    (package / "sine_task.py").write_text(TASK)
    monkeypatch.setenv("PYTHONPATH", ":".join(filter(None, [str(package), os.environ.get("PYTHONPATH")])))
    return package


def test_a_family_defined_only_in_a_test_trains_speaks_exports_and_is_evaluated_through_the_commands(sine_family, tmp_path):
    config = tmp_path / "sine.yaml"
    config.write_text(yaml.safe_dump({"task": "sine", "seed": 1, "batch_size": 16, "eval_every": 2, "num_workers": 0,
                                      "checkpoint_every_steps": 2, "n_items": 64, "dropout": 0.0}))
    store = tmp_path / "run"
    trained = cli("train", str(config), "--store", str(store), "--max-steps", "2", "--no-progress", cwd=tmp_path)
    assert trained.returncode == 0, trained.stderr[-3000:]
    assert (store / "model" / "sine.json").is_file()

    said = cli("say", "Hyvää huomenta. Hei.", "--store", str(store), "-o", str(tmp_path / "out.wav"), cwd=tmp_path)
    assert said.returncode == 0, said.stderr[-3000:]
    assert "in 2 chunk(s) with sine" in said.stdout
    audio, rate = sf.read(tmp_path / "out.wav")
    assert rate == 16_000 and round(np.argmax(np.abs(np.fft.rfft(audio))) * rate / len(audio)) == 440

    exported = cli("export", "--voice", str(store / "model"), "--onnx", cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr[-3000:]
    assert (store / "model" / "sine.csv").is_file() and "sine.csv" in exported.stdout

    scored = cli("eval", "--store", str(store), "--json", cwd=tmp_path)
    assert scored.returncode == 0, scored.stderr[-3000:]
    assert round(json.loads(scored.stdout)["hz"]) == 440


def test_a_command_the_family_does_not_offer_says_so_in_one_line(sine_family, tmp_path):
    voice = tmp_path / "voice"
    voice.mkdir()
    (voice / "sine.json").write_text(json.dumps({"hz": 220.0}))
    merged = cli("merge", str(voice), "--out", str(tmp_path / "merged"), cwd=tmp_path)
    assert merged.returncode == 2
    assert merged.stderr.strip().splitlines() == [
        "error: sine voices offer no fintts merge; what they offer: fintts say, fintts export, fintts eval"]
    assert not (tmp_path / "merged").exists()
