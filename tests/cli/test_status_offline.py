"""``fintts status --hub-repo`` where the Hub cannot be reached: said once, as what it is."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from kaggle_helpers import checkout_first

#: every test here starts a process (a fintts command): not the unit tier
pytestmark = pytest.mark.process


def test_status_of_a_hub_run_offline_says_it_could_not_read_the_hub_and_not_that_nothing_was_trained(tmp_path):
    with socket.socket() as probe:  # a port nothing listens on: the Hub, offline
        probe.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{probe.getsockname()[1]}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")} | {
        "HF_ENDPOINT": endpoint, "HF_HOME": str(tmp_path / "hf"), "HF_TOKEN": "hf_offline", "PYTHONPATH": checkout_first()}
    result = subprocess.run([sys.executable, "-m", "fintts", "status", "--hub-repo", "alice/my-voice"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 4, result.stderr
    assert "Traceback" not in result.stderr
    assert "nothing has been trained" not in result.stderr + result.stdout
    error = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and "could not read the run's status" in error[0], result.stderr
