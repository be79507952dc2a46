"""A run kept on a (local stand-in) Hub: trained, killed, resumed on an empty disk, bit-identical."""

from __future__ import annotations

import json
import shutil
import signal
import time

import pytest

from fintts.train.run import checkpoint
from fintts_stand_ins import HubServer
from hub_helpers import TOKEN
from trainer_helpers import assert_bit_identical, cli, final_weights, in_process, start_cli, stop, write_config

REPO = "alice/finnish-voice"
RUN = {"step_delay": 0.05, "checkpoint_every_steps": 4, "max_steps": 40, "keep_last": 2}


def hub_latest_step(hub: HubServer) -> int:
    try:
        name = hub.files(REPO).get("latest", b"").decode().strip()
    except Exception:  # the repo does not exist yet
        return -1
    return checkpoint.step_of(name) if name else -1


@pytest.mark.slow
def test_killed_run_resumes_from_the_hub_on_an_empty_disk_to_the_same_weights(tmp_path, hub_env):
    hub = hub_env
    config = write_config(tmp_path, **RUN)
    unbroken = in_process("train", str(config), "--store", str(tmp_path / "unbroken"), "--no-progress", cwd=tmp_path)
    assert unbroken.returncode == 0, unbroken.stderr
    expected = final_weights(tmp_path / "unbroken")

    first_disk = tmp_path / "kaggle-session-1"
    process = start_cli(
        "train", str(config), "--hub-repo", REPO, "--store", str(first_disk), "--push-every", "0", "--no-progress",
        cwd=tmp_path,
    )
    deadline = time.time() + 120
    while hub_latest_step(hub) < 12 and time.time() < deadline:
        assert process.poll() is None, process.stdout.read()
        time.sleep(0.05)
    stop(process, signal.SIGKILL)
    killed_at = hub_latest_step(hub)
    assert 12 <= killed_at < 40
    shutil.rmtree(first_disk)  # the session's disk is gone, as on Kaggle

    second_disk = tmp_path / "kaggle-session-2"
    args = ("train", str(config), "--hub-repo", REPO, "--store", str(second_disk), "--push-every", "0", "--no-progress")
    refused = cli(*args, cwd=tmp_path)
    assert refused.returncode == 4 and "--force" in refused.stderr  # the killed session's lease is still fresh
    resumed = cli(*args, "--force", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert f"from {checkpoint.name_for_step(killed_at)}" in resumed.stdout
    assert_bit_identical(final_weights(second_disk), expected)

    assert hub_latest_step(hub) == 40
    status = json.loads(cli("status", "--hub-repo", REPO, "--json", cwd=tmp_path).stdout)
    assert status["state"] == "finished" and status["step"] == 40 and len(status["sessions"]) >= 2
    page = hub.files(REPO)["README.md"].decode()  # the run's page, as the last session left it
    assert "finished at step 40 of 40" in page and f"fintts pull {REPO}" in page and "| 2 | " in page

    laptop = tmp_path / "laptop"
    pulled = cli("pull", REPO, "--out", str(laptop / "voice"), cwd=tmp_path)
    assert pulled.returncode == 0, pulled.stderr
    assert (laptop / "voice" / "model" / "model.safetensors").is_file()
    assert not list((laptop / "voice").rglob("optim.pt"))  # the voice only, no training state
    watched = cli("pull", REPO, "--out", str(laptop / "watch"), "--samples", cwd=tmp_path)  # while a run trains: no weights
    assert watched.returncode == 0, watched.stderr
    assert "tensorboard --logdir" in watched.stdout and list((laptop / "watch" / "tb").glob("events.out.tfevents.*"))
    assert (laptop / "watch" / "checkpoints" / "step-00000040" / "samples" / "val.json").is_file()
    assert not list((laptop / "watch").rglob("*.safetensors")) and (laptop / "watch" / "status.json").is_file()
    full = cli("pull", REPO, "--out", str(laptop / "run"), "--full", cwd=tmp_path)
    assert full.returncode == 0, full.stderr
    assert_bit_identical(final_weights(laptop / "run"), expected)

    for path in list(second_disk.rglob("*")) + list(laptop.rglob("*")):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), f"token leaked into {path}"
    for output in (resumed.stdout, resumed.stderr, refused.stderr, pulled.stdout, watched.stdout):
        assert TOKEN not in output
