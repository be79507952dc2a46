"""`fintts demo`: two real sessions (the first pauses at its budget, the second resumes), then a wav."""

from __future__ import annotations

import json

import pytest
import soundfile as sf

from test_vits_task import tiny_config
from trainer_helpers import cli


@pytest.mark.slow
def test_demo_trains_pauses_resumes_and_speaks(tmp_path):
    config = tiny_config(tmp_path, max_steps=100_000, eval_every=20, batch_size=4, patience=0)  # as configs/demo.yaml
    result = cli(
        "demo", "--config", str(config), "--budget", "35s", "--store", str(tmp_path / "demo"),
        "--out", str(tmp_path / "demo.wav"), "--no-progress", cwd=tmp_path, timeout=240,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    status = json.loads((tmp_path / "demo" / "status.json").read_text())
    sessions = status["sessions"]
    assert len(sessions) == 2 and sessions[0]["reason"] == "deadline" and sessions[1]["reason"] == "deadline"
    assert sessions[1]["start_step"] == sessions[0]["end_step"] > 0
    audio, rate = sf.read(tmp_path / "demo.wav")
    assert rate == 16000 and len(audio) > rate // 4
    assert "the demo voice says" in result.stdout and "noise floor" in result.stdout
    # the last lines: steps reached in the two sessions, and the voice against each clean-voice target
    assert f"== {status['step']:,} steps in 2 session(s)" in result.stdout
    report = result.stdout[result.stdout.index(f"== {status['step']:,} steps"):]
    assert all(label in report for label in ("sentences identified", "held-out MCD", "noise floor"))
    assert "not a clean voice yet" in report or "a clean voice by all three targets" in report
