"""Kill, signal and budget a real ``fintts train`` process, then resume and compare."""

from __future__ import annotations

import json
import signal
import time

import pytest

from fintts.train.run import checkpoint
from trainer_helpers import assert_bit_identical, cli, final_weights, in_process, start_cli, stop, wait_for_step, write_config

#: every test here starts a process (a fintts command, a server's session, espeak-ng or ffmpeg): not the unit tier
pytestmark = pytest.mark.process

SLOW_STEPS = {"step_delay": 0.03, "checkpoint_every_steps": 4, "max_steps": 40}


@pytest.fixture(scope="session")
def reference(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cli-reference")
    config = write_config(folder, **SLOW_STEPS)
    result = in_process("train", str(config), "--store", str(folder / "store"), "--no-progress", cwd=folder)
    assert result.returncode == 0, result.stderr
    return config, final_weights(folder / "store")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.parametrize("after_step", [4, 21])
def test_signal_stops_at_the_end_of_a_step_and_resume_is_exact(reference, tmp_path, sig, after_step):
    config, expected = reference
    store = tmp_path / "store"
    process = start_cli("train", str(config), "--store", str(store), "--no-progress", cwd=tmp_path)
    wait_for_step(store, after_step, process)
    out = stop(process, sig)
    assert process.returncode == 0, out
    assert f"asked to stop ({sig.name})" in out or f"interrupted ({sig.name})" in out
    status = json.loads((store / "status.json").read_text())
    assert status["state"] == "paused" and status["step"] >= after_step
    assert checkpoint.read_latest(store) == checkpoint.name_for_step(status["step"])
    result = in_process("train", str(config), "--store", str(store), "--no-progress", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert_bit_identical(final_weights(store), expected)


@pytest.mark.parametrize("after_step", [4, 16, 28])
def test_sigkill_then_restart_from_the_last_checkpoint_is_exact(reference, tmp_path, after_step):
    config, expected = reference
    store = tmp_path / "store"
    process = start_cli("train", str(config), "--store", str(store), "--no-progress", cwd=tmp_path)
    wait_for_step(store, after_step, process)
    time.sleep(0.05)
    stop(process, signal.SIGKILL)
    assert process.returncode == -signal.SIGKILL
    result = in_process("train", str(config), "--store", str(store), "--no-progress", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "resuming run" in result.stdout
    assert_bit_identical(final_weights(store), expected)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_signals_while_a_checkpoint_is_being_written_never_leave_a_broken_latest(tmp_path, sig):
    """A large model saved after every step: the signal lands while files are being written."""
    config = write_config(tmp_path, params=3_000_000, checkpoint_every_steps=1, keep_last=2, max_steps=10_000, eval_every=0)
    store = tmp_path / "store"
    for delay in (0.0, 0.13, 0.29):
        process = start_cli("train", str(config), "--store", str(store), "--no-progress", cwd=tmp_path)
        wait_for_step(store, checkpoint.step_of(checkpoint.read_latest(store) or "step-00000000") + 2, process)
        time.sleep(delay)
        out = stop(process, sig)
        if sig == signal.SIGTERM:
            assert process.returncode == 0, out
        pointed = checkpoint.read_latest(store)
        checkpoint.verify(store / "checkpoints" / pointed)  # raises if latest names anything incomplete
    result = in_process("status", "--store", str(store), "--json", cwd=tmp_path)
    assert result.returncode == 0 and json.loads(result.stdout)["step"] > 0


def test_drift_and_bad_settings_exit_with_their_codes(tmp_path):
    config = write_config(tmp_path, max_steps=3)
    store = str(tmp_path / "store")
    assert in_process("train", str(config), "--store", store, "--no-progress", cwd=tmp_path).returncode == 0
    drift = cli("train", str(config), "seed=99", "--store", store, cwd=tmp_path)
    assert drift.returncode == 3 and "seed: 11 -> 99" in drift.stderr and "--allow-config-change" in drift.stderr
    typo = cli("train", str(config), "--store", store, "sead=99", cwd=tmp_path)
    assert typo.returncode == 2 and "unknown setting sead" in typo.stderr and "seed" in typo.stderr
    for option, value, message in [("--budget", "11 hours", "budget: '11 hours' is not a duration"),
                                   ("--hub-repo", "alice", "hub_repo: 'alice' is not a Hub repo id"),
                                   ("--max-steps", "many", "max_steps: expected int")]:
        refused = cli("train", str(config), "--store", store, option, value, cwd=tmp_path)  # refused before any training
        assert refused.returncode == 2 and message in refused.stderr, refused.stderr
    missing = in_process("status", "--store", str(tmp_path / "nothing"), cwd=tmp_path)
    assert missing.returncode == 4 and "nothing has been trained" in missing.stderr


@pytest.mark.slow
def test_a_60_second_budget_exits_in_time_and_the_next_session_continues(tmp_path):
    config = write_config(tmp_path, max_steps=1_000_000, step_delay=0.02, eval_every=50, checkpoint_every="20s")
    store = tmp_path / "store"
    started = time.time()
    first = cli("train", str(config), "--store", str(store), "--budget", "60s", "--no-progress", cwd=tmp_path, timeout=120)
    elapsed = time.time() - started
    assert first.returncode == 0, first.stderr
    assert elapsed < 60, f"session took {elapsed:.1f}s"
    assert "time budget is used up" in first.stdout
    status = json.loads(in_process("status", "--store", str(store), "--json", cwd=tmp_path).stdout)
    assert status["state"] == "paused" and status["step"] > 100
    assert {"state", "step", "epoch", "latest_checkpoint", "sessions"} <= set(status)
    checkpoint.verify(store / "checkpoints" / checkpoint.read_latest(store))
    second = cli("train", str(config), "--store", str(store), "--budget", "20s", "--no-progress", cwd=tmp_path, timeout=60)
    assert second.returncode == 0, second.stderr
    assert f"from step-{status['step']:08d}" in second.stdout
    after = json.loads(in_process("status", "--store", str(store), "--json", cwd=tmp_path).stdout)
    assert after["step"] > status["step"] and len(after["sessions"]) == 2


def test_a_session_is_gone_at_once_after_its_last_line(tmp_path):
    """The summary's last line is the end the session planned: Python's module-by-module exit after it took 1.3 s (2.9-3.7 s
    under load), past a 60 s budget (fintts.process_exit). The exit handlers still run: the files are whole."""
    config = write_config(tmp_path, max_steps=3)
    process = start_cli("train", str(config), "--store", str(tmp_path / "store"), "--no-progress", cwd=tmp_path)
    last = time.time()
    for _ in process.stdout:
        last = time.time()
    process.wait(timeout=60)
    gone = time.time() - last
    assert process.returncode == 0
    assert gone < 1.0, f"the process ended {gone:.2f} s after its last line"
    checkpoint.verify(tmp_path / "store" / "checkpoints" / checkpoint.read_latest(tmp_path / "store"))
