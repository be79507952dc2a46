"""configs/chatterbox-fi.yaml as shipped, through the CLI, with what a machine without the release sets from outside:
random weights at a tiny size, the demo corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from chatterbox_helpers import TINY_MODEL

from trainer_helpers import cli

#: every test here starts a process (a fintts command, a server's session, espeak-ng or ffmpeg): not the unit tier
pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[3]
CONFIG = ROOT / "configs" / "chatterbox-fi.yaml"


def test_the_shipped_config_trains_and_resumes_to_its_budget_on_random_weights(tmp_path):
    """A first session ends by its steps; the next resumes it and ends at its time budget, as a Kaggle session ends."""
    store = tmp_path / "store"
    outside = ["--data", "demo", "weights=random", f"model={json.dumps(TINY_MODEL)}", "speakers=[espeak_f2, espeak_m3]"]
    first = cli("train", str(CONFIG), *outside, "--max-steps", "2", "--store", str(store), "--no-progress", cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    second = cli("train", str(CONFIG), *outside, "--budget", "25s", "--store", str(store), "--no-progress", cwd=tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    status = json.loads((store / "status.json").read_text())
    assert [s["start_step"] for s in status["sessions"]] == [0, 2] and status["step"] > 2
    assert status["state"] == "paused" and status["sessions"][-1]["reason"] == "deadline"
    assert (store / "model" / "t3_mtl23ls_v2.safetensors").is_file()
