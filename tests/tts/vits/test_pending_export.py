"""A voice's ONNX graphs left unmade by one session are made by the next, on the empty disk a Kaggle session starts on."""

from __future__ import annotations

import json
import signal
import time

import pytest

from fintts.train.run import checkpoint
from hub_helpers import REPO
from trainer_helpers import cli, start_cli, stop
from vits_helpers import tiny_config

#: What the slow part of a voice's export adds to model/: its ONNX graphs, the int8 one, the Piper voice.
GRAPHS = {"model.onnx", "model.int8.onnx", "fi_FI-fintts.onnx", "fi_FI-fintts.onnx.json"}


@pytest.mark.slow
def test_a_voice_left_without_its_graphs_gets_them_from_a_session_on_a_fresh_disk(tmp_path, hub_env):
    hub = hub_env
    config = tiny_config(tmp_path, max_steps=1000, eval_every=3, checkpoint_every_steps=3)
    hub_args = ("--hub-repo", REPO, "--push-every", "0", "--no-progress")
    first = tmp_path / "first"
    process = start_cli("train", str(config), "--store", str(first), *hub_args, cwd=tmp_path)
    deadline = time.time() + 300
    # the best's export under way (its child still importing torch) and a checkpoint: then the session is stopped
    while not (list(first.glob(".model-later-*/")) and checkpoint.read_latest(first)) and time.time() < deadline:
        assert process.poll() is None, process.stdout.read()
        time.sleep(0.02)
    out = stop(process, signal.SIGTERM)
    assert process.returncode == 0, out
    files = hub.files(REPO)
    state = json.loads(files[f"checkpoints/{files['latest'].decode().strip()}/state.json"])
    assert state["export_pending"] is True and state["best_step"] is not None, out
    assert "model/model.safetensors" in files and not GRAPHS & {p.removeprefix("model/") for p in files}, out

    config = tiny_config(tmp_path, max_steps=state["step"] + 1, eval_every=0)
    result = cli("train", str(config), "--store", str(tmp_path / "second"), *hub_args, cwd=tmp_path, timeout=400)
    assert result.returncode == 0, result.stdout + result.stderr
    files = hub.files(REPO)
    assert json.loads(files["status.json"])["state"] == "finished"
    model = {p.removeprefix("model/") for p in files if p.startswith("model/")}
    assert GRAPHS <= model, sorted(model)
    state = json.loads(files[f"checkpoints/{files['latest'].decode().strip()}/state.json"])
    assert state["export_pending"] is False
