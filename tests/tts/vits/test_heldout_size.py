"""How many clips a one-speaker run holds out: enough that its validation figures decide (issue 45)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from fintts.train import train
from fintts.train.config import load_config
from fintts.tts.corpus.selection import select_corpus
from fintts.tts.vits.heldout import CANDIDATES
from trainer_helpers import in_process
from vits_helpers import TRAINING_ONLY, tiny_config

CONFIGS = Path(__file__).resolve().parents[3] / "configs"


def _corpus(root: Path, clips: int, seconds: float = 1.5) -> Path:
    """One speaker in LJSpeech's layout: ``clips`` tones of ``seconds`` (a corpus check takes them), one line each."""
    (root / "wavs").mkdir(parents=True)
    rate = 16000
    t = np.arange(int(seconds * rate)) / rate
    for n in range(clips):
        tone = 0.3 * np.sin(2 * np.pi * (180 + n) * t)
        sf.write(root / "wavs" / f"clip_{n:04d}.wav", tone.astype(np.float32), rate)
    lines = [f"clip_{n:04d}|Hyvää huomenta, tänään sataa lunta." for n in range(clips)]
    (root / "metadata.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def test_the_shipped_fine_tune_holds_out_24_clips_of_one_speaker_and_scores_them_all(tmp_path):
    corpus = _corpus(tmp_path / "voice", 300)
    run = load_config(CONFIGS / "mms-fin.yaml", [f"data={corpus}"])
    selection = select_corpus(run.task, log=lambda _: None, progress=False)
    assert len(selection.heldout) == 24 and len(selection.items) == 276
    assert not {i.id for i in selection.heldout} & {i.id for i in selection.items}
    assert selection.heldout_minutes == pytest.approx(24 * 1.5 / 60)
    assert run.task.mcd_items >= len(selection.heldout)  # every held-out clip is scored, not the first 8


@pytest.mark.slow
@pytest.mark.parametrize(("clips", "held"), [(4, 0), (5, 2), (30, 3), (120, 12), (2000, 24)])
def test_a_small_corpus_gives_at_most_a_tenth_of_its_clips(tmp_path, clips, held):
    corpus = _corpus(tmp_path / "voice", clips, seconds=0.6)
    run = load_config(tiny_config(tmp_path, data=str(corpus), speakers=[], heldout_per_speaker=24), [])
    selection = select_corpus(run.task, log=lambda _: None, progress=False)
    assert len(selection.heldout) == held and len(selection.items) == clips - held


@pytest.mark.slow
def test_the_held_out_set_stays_when_the_corpus_grows_by_a_few_clips(tmp_path):
    """The clips hashing lowest are held out: a few new recordings add to the set, never swap a trained clip into it."""
    small = _corpus(tmp_path / "small", 240)
    run = load_config(tiny_config(tmp_path, data=str(small), speakers=[], heldout_per_speaker=24), [])
    before = {i.id for i in select_corpus(run.task, log=lambda _: None, progress=False).heldout}
    grown = _corpus(tmp_path / "grown", 260)
    run = load_config(tiny_config(tmp_path, data=str(grown), speakers=[], heldout_per_speaker=24), [])
    after = {i.id for i in select_corpus(run.task, log=lambda _: None, progress=False).heldout}
    assert len(before) == len(after) == 24 and len(before & after) >= 20


@pytest.mark.slow
def test_the_session_summary_says_how_many_clips_validation_scores(tmp_path):
    corpus = _corpus(tmp_path / "voice", 100)
    messages: list[str] = []
    train(tiny_config(tmp_path, data=str(corpus), speakers=[], max_steps=2, eval_every=2, mcd_items=24,
                      **TRAINING_ONLY),
          store=tmp_path / "store", progress=False, log=messages.append)
    summary = "\n".join(messages)
    assert "validated  on 10 held-out clips (0.2 min) of 1 speaker(s), 10 scored each validation" in summary, summary[-2000:]
    status = in_process("status", "--store", str(tmp_path / "store"), cwd=tmp_path)
    assert "validated   on 10 held-out clips (0.2 min)" in status.stdout, status.stdout + status.stderr

    scored = json.loads(in_process("eval", "--store", str(tmp_path / "store"), "--json", cwd=tmp_path).stdout)
    assert len(scored["clips"]) == 10  # every clip scored, each told apart among its own and the 7 closest in length
    assert {clip["candidates"] for clip in scored["clips"]} == {CANDIDATES} and scored["chance"] == pytest.approx(10 / 8)
    said = in_process("eval", "--store", str(tmp_path / "store"), cwd=tmp_path).stdout  # the chance as a count, not a probability
    assert "of 10 (a random pick among each clip's candidates would get 1.2 of 10)" in said, said
