"""Where a session's budget counts from off Kaggle: a program's own ``fintts`` command counts its imports, a call of
``fintts.cli.main([...])`` inside a program that has run for a while counts from the call, and a launch of several
processes counts its collective check."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trainer_helpers import FAULTY, _env, environment_of, run_python, status_of, training_processes, write_config

#: every test here starts a process (a fintts command, a server's session, espeak-ng or ffmpeg): not the unit tier
pytestmark = pytest.mark.process


def test_main_called_in_a_program_that_has_run_a_while_counts_the_budget_from_the_call(tmp_path):
    config = write_config(tmp_path, max_steps=100_000, eval_every=0, step_delay=0.02)
    store = tmp_path / "store"
    program = (
        "import time; time.sleep(12)  # a program (a notebook kernel, a test) that has run a while\n"
        "from fintts.cli import main\n"
        f"main(['train', {str(config)!r}, '--store', {str(store)!r}, '--budget', '10s', '--no-progress'])\n"
    )
    result = run_python(program, cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    status = status_of(store)
    assert status["step"] >= 20, (status["step"], result.stdout)  # ~10 s of steps, not a budget spent before the call
    assert "the call to train" in result.stdout, result.stdout


@pytest.mark.slow
def test_a_launch_from_a_program_counts_its_collective_check_into_the_session(tmp_path):
    config = write_config(tmp_path, task=FAULTY, max_steps=12, eval_every=0, step_delay=0.02)
    store = tmp_path / "store"
    called = tmp_path / "called"
    program = (
        "import time; from fintts.train import launch\n"
        f"open({str(called)!r}, 'w').write(repr(time.time()))\n"
        f"launch({str(config)!r}, num_processes=2, progress=False, store={str(store)!r}, budget=300)\n"
    )
    process = start_python(program, tmp_path)
    deadline = time.time() + 90
    while len(training_processes(process.pid)) < 2 and time.time() < deadline:
        time.sleep(0.05)
    starts = {environment_of(pid).get("FINTTS_SESSION_START") for pid in training_processes(process.pid)}
    out, _ = process.communicate(timeout=120)
    assert process.returncode == 0, out
    (start,) = starts
    assert float(start) - float(called.read_text()) < 1.0, out  # not after the check's seconds of start-up
    assert json.loads((store / "status.json").read_text())["state"] == "finished"


def start_python(program: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", program], cwd=cwd, env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
