"""A voice's ONNX graphs left unmade by one session are made by the next, on the empty disk a Kaggle session starts on."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from fintts.train.run import checkpoint
from hub_helpers import REPO
from trainer_helpers import children, cli, start_cli, stop
from vits_helpers import tiny_config

#: What the slow part of a voice's export adds to model/: its ONNX graphs, the int8 one, the Piper voice.
GRAPHS = {"model.onnx", "model.int8.onnx", "fi_FI-fintts.onnx", "fi_FI-fintts.onnx.json"}


def hold_exports(pid: int) -> int:
    """SIGSTOP every export child under ``pid``, however fast this machine would have finished it (a Kaggle CPU busy
    feeding two GPUs makes it slowly); how many are held. The session still ends them itself (SIGKILL)."""
    held, todo = 0, [pid]
    while todo:
        for child in children(todo.pop()):
            todo.append(child)
            try:
                if b"background_export" in Path(f"/proc/{child}/cmdline").read_bytes():
                    os.kill(child, signal.SIGSTOP)
                    held += 1
            except (OSError, ProcessLookupError):
                pass  # it ended meanwhile
    return held


@pytest.mark.slow
def test_a_voice_left_without_its_graphs_gets_them_from_a_session_on_a_fresh_disk(tmp_path, hub_env):
    hub = hub_env
    config = tiny_config(tmp_path, max_steps=1000, eval_every=3, checkpoint_every_steps=3)
    hub_args = ("--hub-repo", REPO, "--push-every", "0", "--no-progress")
    first = tmp_path / "first"
    process = start_cli("train", str(config), "--store", str(first), *hub_args, cwd=tmp_path)
    deadline, held = time.time() + 300, 0
    # the best's export under way, held where it is, and a checkpoint: then the session is stopped
    while not (held and checkpoint.read_latest(first)) and time.time() < deadline:
        assert process.poll() is None, process.stdout.read()
        held += hold_exports(process.pid)
        time.sleep(0.02)
    hold_exports(process.pid)  # one a newer best started meanwhile too
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
