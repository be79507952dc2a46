"""A collective that times out is our exception, also on NCCL: the launched processes get the NCCL error handling that
lets the session's failure path run (no GPU here, and NCCL refuses two ranks on one GPU: gloo runs the same path, under
the same settings; benchmarks/gpu_check.py's ``nccl_failure`` part runs it on NCCL where two GPUs exist)."""

from __future__ import annotations

import time

import pytest

from fintts.train.processes.collective import NCCL_ERROR_HANDLING
from fintts.train.run import checkpoint
from trainer_helpers import FAULTY, environment_of, start_cli, status_of, training_processes, write_config


@pytest.mark.slow
def test_a_hung_peer_fails_the_session_under_the_nccl_settings_the_processes_get(tmp_path):
    # process 1 sleeps for ever in its step 10; the others' next vote waits at most 3 s, then fails the session
    config = write_config(tmp_path, task=FAULTY, max_steps=100_000, eval_every=0, checkpoint_every_steps=4, fault="hang",
                          fault_at=10, fault_rank=1, collective_timeout="3s", exit_grace="3s")
    store = tmp_path / "store"
    process = start_cli("train", str(config), "--store", str(store), "--num-processes", "2", "--no-progress", cwd=tmp_path)
    deadline = time.time() + 90
    while len(training_processes(process.pid)) < 2 and time.time() < deadline:  # after the launcher's collective check
        time.sleep(0.05)
    seen = [environment_of(pid) for pid in training_processes(process.pid)]
    out, _ = process.communicate(timeout=180)
    assert len(seen) == 2, out
    for env in seen:
        assert {name: env.get(name) for name in NCCL_ERROR_HANDLING} == NCCL_ERROR_HANDLING, sorted(env)
    assert process.returncode == 1, out
    status = status_of(store)
    assert status["state"] == "failed" and status["step"] == 9, status
    assert checkpoint.read_latest(store) == "step-00000008"
    assert "step-00000008 is safe in" in out, out
