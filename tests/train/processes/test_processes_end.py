"""Two training processes (gloo on the CPU) where one dies or hangs, or the first one's teardown hangs: the session
still ends in its time, the first process is not killed while it pushes, and the newest checkpoint is kept."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from fintts.train.run import checkpoint
from fintts.train.session.watchdog import FIRST_COLLECTIVE
from hub_helpers import REPO, latest_on_hub
from trainer_helpers import (
    BIG_COMMIT,
    FAULTY,
    TEARDOWN,
    _env,
    children,
    in_process,
    running,
    start_cli,
    status_of,
    train_cli,
    wait_for_step,
    write_config,
)


@pytest.mark.slow
@pytest.mark.parametrize("fault", [
    {"fault": "eval-error", "fault_at": 2, "eval_every": 4},  # a validation error in process 1 at step 8
    {"fault": "crash", "fault_at": 9, "eval_every": 0},  # process 1 ends without a word in step 9
], ids=["validation-error", "crash"])
def test_the_first_process_is_not_killed_while_it_pushes_the_newest_checkpoint_after_a_peer_failed(hub_env, tmp_path, fault):
    hub = hub_env
    hub.stall(6, path="/commit/", after_bytes=BIG_COMMIT, times=100)  # each checkpoint push takes 6 s
    config = write_config(tmp_path, task=FAULTY, max_steps=400, step_delay=0.05, checkpoint_every_steps=3, fault_rank=1, **fault)
    store = tmp_path / "kaggle"
    # the launcher's grace for the other processes, 3 s here (120 s as shipped), is shorter than the push of step 6
    launcher = ("import sys; import fintts.train.session.launcher as launcher; launcher.PEER_GRACE = 3.0; from fintts.cli import main; "
                "sys.exit(main(sys.argv[1:]))")
    result = subprocess.run(
        [sys.executable, "-c", launcher, "train", str(config), "--store", str(store), "--hub-repo", REPO, "--push-every", "1h",
         "--num-processes", "2", "--no-progress"],
        cwd=tmp_path, capture_output=True, text=True, timeout=180, env=_env(),
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "killed by SIGKILL" not in result.stderr, result.stderr
    assert checkpoint.read_latest(store) == "step-00000006"
    assert latest_on_hub(hub) == "step-00000006", result.stdout + result.stderr  # pushed after the failure
    assert "step-00000006 is on hf://" in result.stdout
    files = hub.files(REPO)
    assert "lease.json" not in files  # handed back
    assert json.loads(files["status.json"])["state"] == "failed"


@pytest.mark.slow
def test_a_hung_process_ends_the_session_in_its_budget_with_the_newest_checkpoint_pushed(hub_env, tmp_path):
    hub = hub_env
    # process 1 sleeps for ever from its step 10; steps 4 (pushed) and 8 (this disk only: push_every 1h) are saved
    config = write_config(tmp_path, task=FAULTY, max_steps=100_000, eval_every=0, checkpoint_every_steps=4, fault="hang",
                          fault_at=10, fault_rank=1, exit_grace="3s")
    store = tmp_path / "kaggle"
    budget = 60  # the launch and set-up of two processes take 15-30 s of it on a loaded 2-core machine
    started = time.monotonic()
    result = train_cli(config, store, "--hub-repo", REPO, "--push-every", "1h", "--budget", f"{budget}s", timeout=budget + 120)
    ended = time.monotonic() - started
    assert ended < budget + 3 + TEARDOWN, f"the session ended at {ended:.1f}s\n" + result.stdout + result.stderr
    assert result.returncode == 1, result.stdout + result.stderr
    assert "the session's end is near and training has not stopped: step 10 began" in result.stdout, result.stdout
    status = status_of(store)
    assert (status["state"], status["step"]) == ("failed", 9)
    assert "SessionOverrun" in status["reason"]
    assert checkpoint.read_latest(store) == "step-00000008"
    assert latest_on_hub(hub) == "step-00000008", result.stdout + result.stderr
    assert "lease.json" not in hub.files(REPO)
    assert "process 1 was still running 3 s after the first process ended the session; ended it" in result.stdout


@pytest.mark.slow
def test_a_teardown_that_hangs_in_the_first_process_still_ends_the_session(tmp_path):
    # process 0 never leaves its process group (a NCCL teardown can hang); the launcher's own grace is longer than its bound
    config = write_config(tmp_path, task=FAULTY, max_steps=8, eval_every=0, fault="linger", fault_rank=0, exit_grace="5m")
    store = tmp_path / "store"
    started = time.monotonic()
    result = train_cli(config, store, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert time.monotonic() - started < 60
    assert "fintts session summary" in result.stdout
    assert "leaving the process group took more than 10 s; this process ends without it" in result.stdout
    assert status_of(store)["state"] == "finished"


@pytest.mark.slow
def test_a_killed_launcher_leaves_no_training_process_behind(tmp_path):
    # a notebook's kernel restarted or killed while two processes train: they must not go on holding the devices
    config = write_config(tmp_path, max_steps=100_000, step_delay=0.02, eval_every=0, checkpoint_every_steps=5)
    store = tmp_path / "store"
    launcher = start_cli("train", str(config), "--store", str(store), "--num-processes", "2", "--no-progress", cwd=tmp_path)
    wait_for_step(store, 5, launcher)
    ranks = children(launcher.pid)
    assert len(ranks) == 2, ranks
    launcher.kill()
    launcher.communicate()
    deadline = time.monotonic() + 10
    while any(running(pid) for pid in ranks) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [pid for pid in ranks if running(pid)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"training processes {left} outlived their launcher by 10 s"
    assert checkpoint.latest_complete(store, log=lambda _: None) is not None  # the next session resumes from it


@pytest.mark.slow
def test_a_process_lost_in_its_first_step_ends_the_session_at_once_not_at_its_budget(tmp_path):
    # process 1 ends in the first step of a resumed session, its connections held open as NCCL's are: the first process
    # would wait in its collective for the whole budget (an hour here); the launcher tells it, and it ends the session
    store = tmp_path / "store"
    first, second, probes = tmp_path / "first", tmp_path / "second", tmp_path / "probes"
    for folder in (first, second, probes):
        folder.mkdir()
    settings = dict(task=FAULTY, max_steps=4, eval_every=0, checkpoint_every_steps=4)
    assert in_process("train", str(write_config(first, **settings)), "--store", str(store), "--num-processes", "1",
                      "--no-progress", cwd=tmp_path).returncode == 0
    config = write_config(second, **settings, fault="vanish", fault_at=1, fault_rank=1, probe_dir=str(probes))
    result = train_cli(config, store, "--budget", "1h", "--max-steps", "1000", timeout=150)
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "stopping: process 1 ended (exit code 1)" in result.stdout, out
    status = status_of(store)
    assert (status["state"], status["step"]) == ("failed", 4), status
    assert status["reason"].startswith("PeerExited: process 1 ended (exit code 1)"), status["reason"]
    assert checkpoint.read_latest(store) == "step-00000004"
    assert "step-00000004 is safe in" in result.stdout, out  # the newest checkpoint, said
    assert "process 1: exit code 1" in result.stderr, out
    # before any step was measured, each process's collectives waited minutes, not the session's hour
    seen = [json.loads((probes / f"rank-{rank}.json").read_text())["collective_timeout"] for rank in (0, 1)]
    assert seen == [FIRST_COLLECTIVE, FIRST_COLLECTIVE]
