"""A run's default folder tells runs apart, and a demo session that fails ends the demo in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fintts.train import train
from fintts.train.config import SHIPPED_CONFIGS, load_config
from kaggle_helpers import checkout_first
from trainer_helpers import QUIET, cli, write_config

DEMO = SHIPPED_CONFIGS / "demo.yaml"


@pytest.mark.parametrize(("overrides", "folder"), [
    ([], "runs/demo"),
    (["data=demo"], "runs/demo"),  # the config's own data: the config's own run
    (["data=/home/me/recordings/my-voice/"], "runs/demo-my-voice"),
    (["data=hf://datasets/alice/lukija"], "runs/demo-lukija"),
    (["data=/home/me/my-voice", "run_name=mine"], "runs/mine"),
    (["data=/home/me/my-voice", "store=elsewhere"], "elsewhere"),
])
def test_a_run_on_other_data_than_its_configs_gets_a_folder_of_its_own(overrides, folder):
    """``fintts train configs/demo.yaml --data my-voice`` and ``fintts demo`` no longer share ``runs/demo``."""
    assert load_config(DEMO, overrides).train.local_dir() == Path(folder)


@pytest.mark.process
def test_a_demo_whose_session_fails_ends_in_one_line_with_the_sessions_exit_code(tmp_path):
    env = os.environ | {"PYTHONPATH": checkout_first()}
    result = subprocess.run([sys.executable, "-m", "fintts", "demo", "--store", str(tmp_path / "run"), "max_steps=many"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: demo")]
    assert errors == [errors[-1]] and "demo session 1 of 2 ended with exit code 2" in errors[0], result.stderr


@pytest.mark.slow
def test_a_demo_into_a_folder_that_holds_another_run_says_so_in_one_line(tmp_path):
    """The clash itself: the folder's checkpoint was trained with other settings. The session refuses it (exit 3, its
    own line); the demo adds one line naming the folder and what to do, not a traceback."""
    config, store = write_config(tmp_path, max_steps=2), tmp_path / "runs" / "demo"
    train(config, store=store, **QUIET)
    result = cli("demo", "--config", str(config), "--store", str(store), "seed=12", "--no-progress", cwd=tmp_path)
    assert result.returncode == 3, result.stderr
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: demo session 1 of 2 ended with exit code 3") and f"{store} holds a run of other" in last
    assert "fintts demo --store DIR" in last
