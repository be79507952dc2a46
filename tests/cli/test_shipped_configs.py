"""fintts's own configs are found by name from any folder, as the README's commands write them."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from fintts.errors import ConfigError
from fintts.train.config import SHIPPED_CONFIGS, load_config
from kaggle_helpers import checkout_first


@pytest.mark.parametrize("name", ["configs/mms-fin.yaml", "mms-fin.yaml", "mms-fin"])
@pytest.mark.process
def test_plan_finds_a_shipped_config_by_name_outside_the_checkout(tmp_path, name):
    env = os.environ | {"PYTHONPATH": checkout_first()}
    result = subprocess.run([sys.executable, "-m", "fintts", "plan", name, "--samples", "1200", "--step-seconds", "0.5"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "total steps        5000" in result.stdout  # mms-fin.yaml's max_steps


def test_a_file_of_that_name_where_the_person_is_wins(tmp_path, monkeypatch):
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "demo.yaml").write_text((SHIPPED_CONFIGS / "demo.yaml").read_text() + "max_steps: 77\n")
    monkeypatch.chdir(tmp_path)
    assert load_config("configs/demo.yaml").train.max_steps == 77
    assert load_config("demo").train.max_steps == 10000  # no ./demo: the shipped one


def test_a_config_that_is_nowhere_names_the_shipped_ones(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="does not exist; fintts's own are found by name from any folder: .*mms-fin"):
        load_config("configs/my-voice.yaml")


@pytest.mark.process
def test_kaggle_push_names_a_shipped_config_by_its_file_name_whatever_the_spelling(tmp_path):
    """The notebook finds a shipped config in the wheels dataset by its file's name: ``configs/mms-fin.yaml`` given
    outside the checkout is sent as ``mms-fin.yaml``, not refused, and not copied in as a file of the person's own."""
    from fintts.kaggle.parameters import load, read_parameters

    env = {k: v for k, v in os.environ.items() if not k.startswith("KAGGLE_")} | {"HOME": str(tmp_path), "PYTHONPATH": checkout_first()}
    staged = tmp_path / "staged"
    result = subprocess.run([sys.executable, "-m", "fintts", "kaggle", "push", "--dry-run", "--out", str(staged), "--config",
                             "configs/mms-fin.yaml", "--corpus", "alice/my-voice"], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    parameters = read_parameters(load(staged / "kaggle_train.ipynb"))
    assert (parameters["CONFIG"], parameters["CONFIG_YAML"]) == ("mms-fin.yaml", "")
