"""`fintts demo`'s report and its wav's noise floor. The demo itself, two real sessions of ``demo.yaml`` (the first
pauses at its budget, the second resumes) and a wav, is tests/test_configs_as_shipped.py's; its report from a real run's
validations, tests/tts/vits/test_vits_task.py's."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fintts.tts.demo.run import progress_report, speech_only
from fintts.tts.eval import noise_floor_db


def _status(store, evals, best_step):
    store.mkdir(parents=True, exist_ok=True)
    sessions = [{"start_step": 0, "end_step": 1000}, {"start_step": 1000, "end_step": 2000}]
    (store / "status.json").write_text(json.dumps({
        "step": 2000, "time_used_seconds": 1740.0, "sessions": sessions, "evals": evals,
        "best": {"value": min(e["val/mcd"] for e in evals), "step": best_step},
    }))


def _eval(step, mcd, identified, floor):
    return {"step": step, "val/mcd": mcd, "val/identified": identified, "val/floor_db": floor, "val/floor_db_ref": 50.0}


def test_demo_report_measures_the_speaking_voice_against_the_targets(tmp_path):
    evals = [_eval(1200, 3.4, 0.95, 36.0), _eval(1400, 2.75, 1.0, 46.0), _eval(1600, 2.7, 1.0, 47.0),
             _eval(1800, 2.9, 1.0, 40.0)]
    _status(tmp_path / "clean", evals, best_step=1600)
    report = progress_report(tmp_path / "clean")
    assert report.startswith("== 2,000 steps in 2 session(s), 29 min of training (0.87 s/step")
    # the voice that speaks is the best MCD's (step 1600), not the newest validation's
    assert "the voice of step 1,600" in report and "noise floor 47.0 dB (met ≥ 45 dB)" in report
    assert "every validation since step 1,400" in report

    _status(tmp_path / "noisy", evals[:1] + [_eval(1400, 2.6, 1.0, 41.0)], best_step=1400)
    report = progress_report(tmp_path / "noisy")
    assert "noise floor 41.0 dB (target ≥ 45 dB)" in report and "held-out MCD 2.60 dB (met ≤ 2.8 dB)" in report
    assert "not a clean voice yet (noise floor short of the target)" in report


def test_the_demo_wavs_floor_leaves_out_the_pause_fintts_puts_between_sentences():
    rate, rng = 16000, np.random.default_rng(0)
    hiss = 1e-3 * rng.standard_normal(rate // 2)
    speech = np.concatenate([0.3 * rng.standard_normal(rate // 2), hiss]).astype(np.float32)
    paused = np.concatenate([speech, np.zeros(int(0.4 * rate), np.float32), speech])
    assert len(speech_only(paused, rate)) == 2 * len(speech)
    # with the inserted digital silence counted, the floor would read the pause, not the voice's hiss
    assert noise_floor_db(paused, rate) > noise_floor_db(speech, rate) + 20
    assert noise_floor_db(speech_only(paused, rate), rate) == pytest.approx(noise_floor_db(speech, rate), abs=1.0)
