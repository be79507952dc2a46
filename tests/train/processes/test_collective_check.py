"""The check of the process group's backend before training: real processes on gloo, a peer that never joins, a broken transport."""

from __future__ import annotations

import json
import time

import pytest

from fintts.train.processes.collective_check import HANG_RANK, check_collectives
from trainer_helpers import in_process, write_config

#: every test here starts a process (a fintts command, a server's session, espeak-ng or ffmpeg): not the unit tier
pytestmark = pytest.mark.process

WAYS_OUT = ("NCCL_P2P_DISABLE=1", "NCCL_IB_DISABLE=1", "NCCL_DEBUG=INFO", "--num-processes 1")


def test_env_gpus_checks_two_gloo_processes_on_a_cpu(tmp_path):
    started = time.time()
    result = in_process("env", "--gpus", "--no-hub", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    check = json.loads(result.stdout)["collectives"]
    assert check["ok"] and check["backend"] == "gloo" and check["processes"] == 2
    assert check["seconds"] < 60 and time.time() - started < 60
    text = in_process("env", "--gpus", "--no-hub", cwd=tmp_path).stdout
    assert "collective gloo across 2 processes (one all-reduce and a barrier): passed in" in text


def test_a_peer_that_never_joins_fails_the_check_within_its_deadline(monkeypatch):
    monkeypatch.setenv(HANG_RANK, "1")
    started = time.time()
    check = check_collectives(2, cuda=False, deadline=10)
    assert not check.ok and time.time() - started < 15
    assert "process(es) 0, 1 did not finish within 10 s" in check.message  # rank 0 waits for rank 1 in the group
    assert all(way in check.message for way in WAYS_OUT)


def test_the_launcher_starts_no_training_process_when_the_backend_fails(tmp_path, monkeypatch):
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "no-such-interface0")  # gloo cannot open its transport
    config = write_config(tmp_path, max_steps=4)
    started = time.time()
    result = in_process("train", str(config), "--store", "store", "--num-processes", "2", "--no-progress", cwd=tmp_path)
    assert result.returncode == 1 and time.time() - started < 60
    assert "the check of gloo across 2 processes (one all-reduce and a barrier) failed" in result.stderr
    assert "Unable to find address for: no-such-interface0" in result.stderr
    assert all(way in result.stderr for way in WAYS_OUT)
    assert not (tmp_path / "store" / "logs").exists(), "no training process should have started"


def test_env_gpus_fails_with_the_ways_out_when_the_transport_does_not_open(tmp_path, monkeypatch):
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "no-such-interface0")
    result = in_process("env", "--gpus", "--no-hub", cwd=tmp_path)
    assert result.returncode == 1
    assert "collective the check of gloo across 2 processes (one all-reduce and a barrier) failed" in result.stdout
    assert all(way in result.stdout for way in WAYS_OUT)
