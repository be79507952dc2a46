"""One local folder keeps one Hub run: two voices from one config, and two processes on one folder,
with real ``fintts train`` processes against the local Hub stand-in."""

from __future__ import annotations

import json
import signal

import pytest

from hub_helpers import REPO, latest_on_hub
from trainer_helpers import cli, start_cli, stop, wait_for_step, write_config

#: every test here starts a process (a fintts command, a server's session, espeak-ng or ffmpeg): not the unit tier
pytestmark = pytest.mark.process


@pytest.mark.slow
def test_two_voices_from_one_config_never_share_a_folder(hub_env, tmp_path):
    hub = hub_env
    config = write_config(tmp_path, max_steps=8, eval_every=0, checkpoint_every_steps=4)
    args = ("train", str(config), "--push-every", "0", "--no-progress")
    first = cli(*args, "--hub-repo", "alice/voice-a", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    second = cli(*args, "--hub-repo", "alice/voice-b", "--max-steps", "4", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert "resuming" not in second.stdout, second.stdout  # a new voice starts from the base model
    assert latest_on_hub(hub, "alice/voice-b") == "step-00000004"
    assert latest_on_hub(hub, "alice/voice-a") == "step-00000008"
    assert (tmp_path / "runs" / "voice-a" / "checkpoints" / "step-00000008").is_dir()
    assert not (tmp_path / "runs" / "voice-b" / "checkpoints" / "step-00000008").exists()

    # The first voice's folder named by hand for the second: refused before anything moves, naming both.
    mixed = cli(*args, "--hub-repo", "alice/voice-b", "--store", str(tmp_path / "runs" / "voice-a"), cwd=tmp_path)
    assert mixed.returncode == 4, mixed.stdout
    assert "mirrors the Hub repo alice/voice-a, not alice/voice-b" in mixed.stderr, mixed.stderr
    assert "runs/voice-b" in mixed.stderr
    assert latest_on_hub(hub, "alice/voice-b") == "step-00000004"
    again = cli(*args, "--hub-repo", "alice/voice-a", "--max-steps", "12", cwd=tmp_path)
    assert again.returncode == 0 and "from step-00000008" in again.stdout, again.stdout


def test_a_second_process_never_shares_a_hub_runs_folder_even_with_force(hub_env, tmp_path):
    hub = hub_env
    config = write_config(tmp_path, max_steps=100_000, step_delay=0.02, eval_every=0, checkpoint_every_steps=4)
    store = tmp_path / "kaggle"
    args = ("train", str(config), "--hub-repo", REPO, "--store", str(store), "--push-every", "0", "--no-progress")
    first = start_cli(*args, cwd=tmp_path)
    try:
        wait_for_step(store, 4, first)
        second = cli(*args, "--force", "--max-steps", "6", cwd=tmp_path)
        assert second.returncode == 4, second.stdout
        assert f"being trained by process {first.pid}" in second.stderr, second.stderr
        assert json.loads(hub.files(REPO)["lease.json"])["pid"] == first.pid  # the running session keeps the run
    finally:
        out = stop(first, signal.SIGTERM)
    assert first.returncode == 0, out
