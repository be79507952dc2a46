"""fintts speakers: per-speaker material and the best speaker; speaker= trains one of them, and the pick holds."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from fintts.train import train
from fintts.tts.corpus import check_corpus
from fintts.tts.corpus.data_names import DEMO_CORPUS
from fintts.tts.corpus.speakers import analyse_speakers
from trainer_helpers import QUIET, in_process
from vits_helpers import TRAINING_ONLY, tiny_config


def _clip(path: Path, seconds: float, rate: int = 16000, amplitude: float = 0.3) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    t = np.arange(int(seconds * rate)) / rate
    sf.write(path, (amplitude * np.sin(2 * np.pi * 220 * t)).astype(np.float32), rate)


def _speaker(root: Path, name: str, clips: dict[str, float], rate: int = 16000, extra_lines: tuple[str, ...] = ()) -> None:
    for clip, seconds in clips.items():
        _clip(root / name / "wavs" / f"{clip}.wav", seconds, rate)
    lines = [f"{clip}|Hyvää huomenta" for clip in clips] + list(extra_lines)
    (root / name / "metadata.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_speakers_cli_counts_usable_material_and_marks_the_best(tmp_path):
    corpus = tmp_path / "corpus"
    _speaker(corpus, "anna", {"a1": 1.0, "a2": 2.0, "short": 0.2})          # 3 s usable, one clip too short
    _speaker(corpus, "pekka", {"p1": 2.0, "p2": 2.5}, rate=22050, extra_lines=("lost|Ei ääntä",))  # no lost.wav
    result = in_process("speakers", str(corpus), "--json", "--no-progress", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["best"] == "pekka" and report["other_problems"] == 1
    anna, pekka = report["speakers"]
    assert (anna["name"], anna["clips"], anna["bad"], anna["minutes"], anna["mean_seconds"]) == ("anna", 2, 1, 0.05, 1.5)
    assert anna["sample_rates"] == {"16000": 2}
    assert (pekka["clips"], pekka["bad"], pekka["minutes"], pekka["sample_rates"]) == (2, 0, 0.075, {"22050": 2})
    text = in_process("speakers", str(corpus), "--no-progress", cwd=tmp_path).stdout
    assert "best: pekka" in text and "* pekka" in text and "  anna" in text and "1 other problem(s)" in text


def test_speakers_of_the_embedded_demo_corpus_by_its_name(tmp_path):
    report = json.loads(in_process("speakers", "demo", "--json", "--no-progress", cwd=tmp_path).stdout)
    assert [s["name"] for s in report["speakers"]] == ["espeak_f2", "espeak_f5", "espeak_klatt3", "espeak_m3"]
    assert report["best"] in {s["name"] for s in report["speakers"]} and all(s["minutes"] > 1 for s in report["speakers"])


def test_the_best_speaker_is_the_same_whatever_the_order_ties_broken_by_clips_then_name(tmp_path):
    corpus = tmp_path / "corpus"
    _speaker(corpus, "cai", {"c1": 2.0, "c2": 1.0})
    _speaker(corpus, "bea", {"b1": 1.0, "b2": 1.0, "b3": 1.0})   # as long as cai, one clip more
    _speaker(corpus, "ada", {"a1": 1.5, "a2": 1.5})               # as long and as many as cai, first by name
    report = check_corpus(corpus, progress=False)
    assert analyse_speakers(report).best == "bea"
    assert analyse_speakers(report, among=["cai", "ada"]).best == "ada"
    report.items.reverse()
    assert analyse_speakers(report).best == "bea"


@pytest.mark.slow
def test_speaker_best_trains_one_voice_and_keeps_it_when_the_corpus_grows(tmp_path):
    corpus = tmp_path / "corpus"
    for name, keep in (("espeak_f5", 24), ("espeak_m3", 16)):
        shutil.copytree(DEMO_CORPUS / name, corpus / name)
        lines = (corpus / name / "metadata.csv").read_text(encoding="utf-8").splitlines()
        (corpus / name / "metadata.csv").write_text("\n".join(lines[:keep]) + "\n", encoding="utf-8")
    config = tiny_config(tmp_path, data=str(corpus), speakers=[], speaker="best", max_steps=2, eval_every=2, mcd_items=20,
                         **TRAINING_ONLY)
    train(config, store=tmp_path / "store", **QUIET)
    status = json.loads((tmp_path / "store" / "status.json").read_text())
    assert status["about"]["speaker"] == "espeak_f5" and status["about"]["speakers"] == ["espeak_f5", "espeak_m3"]
    assert status["about"]["clips"] == 24 and status["about"]["heldout_clips"] == 5  # espeak_f5's own held-out set
    samples = {p.name for p in (tmp_path / "store" / "checkpoints" / "step-00000002" / "samples").iterdir()}
    assert samples == {"0-espeak_f5.wav"}

    lines = (DEMO_CORPUS / "espeak_m3" / "metadata.csv").read_text(encoding="utf-8").splitlines()
    (corpus / "espeak_m3" / "metadata.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")  # 52 clips now
    assert json.loads(in_process("speakers", str(corpus), "--json", "--no-progress", cwd=tmp_path).stdout)["best"] == "espeak_m3"
    messages: list[str] = []
    train(config, store=tmp_path / "store", max_steps=4, progress=False, log=messages.append)
    status = json.loads((tmp_path / "store" / "status.json").read_text())
    assert status["step"] == 4 and status["about"]["speaker"] == "espeak_f5"  # the pick recorded at the start holds


@pytest.mark.slow
def test_an_unknown_speaker_is_refused_with_the_model_speakers(tmp_path):
    result = in_process("train", str(tiny_config(tmp_path)), "--store", str(tmp_path / "store"), "--no-progress",
                        "speaker=nobody", cwd=tmp_path)
    assert result.returncode == 2
    assert "speaker: 'nobody' is not one of the model's speakers" in result.stderr and "espeak_f2, espeak_m3" in result.stderr
