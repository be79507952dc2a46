"""Two training processes (gloo on the CPU, as Kaggle's two T4s) that must agree on everything: faults in
one of them, a main process held back, a stalled final push, a process that never exits — raised for real."""

from __future__ import annotations

import json
import time

import pytest

from fintts.train.run import checkpoint
from hub_helpers import REPO
from trainer_helpers import BIG_COMMIT, FAULTY, TEARDOWN, status_of, train_cli, write_config

#: every test here starts a process (a fintts command, a server's session, espeak-ng or ffmpeg): not the unit tier
pytestmark = pytest.mark.process


def rng_streams(folder):
    return len(json.loads((folder / "state.json").read_text())["rng"])


@pytest.mark.slow
def test_time_based_saves_are_taken_by_both_processes_while_the_main_one_is_held_back(tmp_path):
    # the main process spends 0.5 s on the run's status at the start and in every save (≈ 8 steps), so its own
    # clock says a checkpoint is due later than the other process's does
    config = write_config(
        tmp_path, task=FAULTY, max_steps=100_000, step_delay=0.02, eval_every=0, checkpoint_every="2s",
        checkpoint_every_steps=0, keep_last=100, fault="slow-status", fault_rank=0, fault_seconds=0.5,
    )
    store = tmp_path / "store"
    started = time.time()
    # the budget counts from the launcher's start (the collective check and both processes' start-up included): 60 s,
    # as three tests at a time on 2 cores can take 20 s and more to start two torch processes (clean-clone runs of
    # 2026-11-27 kept 2 saves of a 30 s budget, and once of a 40 s one: steps 20 and 29, the first save the only timed one)
    budget = 60
    result = train_cli(config, store, "--budget", f"{budget}s", timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert time.time() - started < budget + 5
    status = status_of(store)
    assert (status["state"], status["reason"]) == ("paused", "deadline")
    saved = sorted((store / "checkpoints").glob("step-*"))
    assert len(saved) >= 3, [p.name for p in saved]  # every 2 s over ~15 s of training, and the final one
    for folder in saved:
        checkpoint.verify(folder)
        assert rng_streams(folder) == 2, folder.name  # both processes took part in every save


@pytest.mark.slow
def test_out_of_memory_in_the_second_process_stops_both_with_the_step_before_it_saved_once(tmp_path):
    config = write_config(
        tmp_path, task=FAULTY, adversarial=False, max_steps=100, eval_every=0, checkpoint_every_steps=5,
        fault="oom", fault_at=7, fault_rank=1,
    )
    store = tmp_path / "store"
    result = train_cli(config, store)
    assert result.returncode == 1, result.stdout + result.stderr  # as with one process: the session failed, its step saved
    assert "training failed" not in result.stderr  # both processes ended the session together, neither crashed
    status = status_of(store)
    assert (status["state"], status["reason"], status["step"]) == ("failed", "out_of_memory", 6)
    assert checkpoint.read_latest(store) == "step-00000006"
    assert [p.name for p in sorted((store / "checkpoints").glob("step-*"))] == ["step-00000005", "step-00000006"]
    assert rng_streams(store / "checkpoints" / "step-00000006") == 2
    advice = "out of memory in process 1 at step 7 (CUDA out of memory. Tried to allocate 2.00 GiB"
    assert result.stdout.count(advice) == 2, result.stdout  # said once when stopping, once in the summary
    assert "micro_batch_size=4" in result.stdout
    assert result.stdout.count("fintts session summary") == 1


def test_an_error_in_the_second_process_validation_ends_the_run_as_failed_within_seconds(tmp_path):
    config = write_config(
        tmp_path, task=FAULTY, max_steps=400, step_delay=0.02, eval_every=4, checkpoint_every_steps=0,
        fault="eval-error", fault_at=2, fault_rank=1,
    )
    store = tmp_path / "store"
    started = time.time()
    result = train_cli(config, store)
    assert result.returncode == 1, result.stdout + result.stderr
    assert time.time() - started < 60  # the whole run: set-up, 8 steps, and the end (400 steps take far longer)
    status = status_of(store)
    assert status["state"] == "failed" and status["step"] == 8
    assert status["reason"] == "process 1: ValueError: validation broke at step 8 (raised by the test task)"
    assert status["sessions"][-1]["reason"] == "error in process 1"
    assert "process 1: " in result.stderr and "validation broke at step 8" in result.stderr  # its exit code, or gloo's abort at exit


@pytest.mark.slow
def test_a_final_push_stalled_past_the_process_group_timeout_still_ends_the_session_in_budget(hub_env, tmp_path):
    hub = hub_env
    hub.stall(None, path="/commit/", after_bytes=BIG_COMMIT, times=100_000)  # every checkpoint push hangs for ever
    config = write_config(tmp_path, max_steps=12, eval_every=0, checkpoint_every_steps=4, collective_timeout="3s")
    store = tmp_path / "kaggle"
    budget = 40
    started = time.monotonic()
    result = train_cli(config, store, "--hub-repo", REPO, "--push-every", "0", "--budget", f"{budget}s", timeout=budget + 60)
    ended = time.monotonic() - started
    assert ended < budget + TEARDOWN, f"the session ended at {ended:.1f}s"
    assert result.returncode == 1, result.stdout + result.stderr  # finished, but its checkpoint is not on the Hub
    assert "training failed" not in result.stderr  # the other process waited for the push off the device, and lived
    assert "fintts session summary" in result.stdout
    assert f"fintts push --store {store} --hub-repo {REPO}" in result.stdout
    status = status_of(store)
    assert (status["state"], status["step"]) == ("finished", 12)
    checkpoint.verify(store / "checkpoints" / "step-00000012")


def test_a_process_that_outlives_a_finished_session_is_ended_after_the_grace_period(tmp_path):
    config = write_config(tmp_path, task=FAULTY, max_steps=8, eval_every=0, fault="linger", fault_rank=1, exit_grace="3s")
    store = tmp_path / "store"
    started = time.time()
    result = train_cli(config, store, timeout=90)
    assert result.returncode == 0, result.stdout + result.stderr
    assert time.time() - started < 60
    assert "process 1 was still running 3 s after the first process ended the session; ended it" in result.stdout
    assert status_of(store)["state"] == "finished"
