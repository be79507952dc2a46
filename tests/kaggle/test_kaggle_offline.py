"""The Kaggle commands on a laptop that is offline or has no credentials: one line each, no traceback.

The real ``kaggle`` client is pointed (``KAGGLE_API_ENVIRONMENT=LOCALHOST`` and a proxy, as
:meth:`fintts_stand_ins.kaggle_server.KaggleServer.env` does) at a port of this machine where nothing listens: what a
laptop without network meets.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from kaggle_helpers import checkout_first

#: every test here starts a process (a fintts command): not the unit tier
pytestmark = pytest.mark.process


def closed_port() -> int:
    """A port of 127.0.0.1 nothing listens on (bound, then let go)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def laptop_env(home: Path, **extra: str) -> dict[str, str]:
    """This process's environment without any Kaggle or Hugging Face credentials, with ``home`` as HOME."""
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KAGGLE_", "HF_")) and k.lower() not in ("http_proxy", "https_proxy")}
    return env | {"HOME": str(home), "HF_HOME": str(home / "hf"), "PYTHONPATH": checkout_first(), **extra}


def offline_env(home: Path) -> dict[str, str]:
    """An API token (as a person exports it) and no network to ask Kaggle about it."""
    proxy = f"http://127.0.0.1:{closed_port()}"
    return laptop_env(home, KAGGLE_API_TOKEN="KGAT_0123456789abcdef", KAGGLE_API_ENVIRONMENT="LOCALHOST",
                      HTTP_PROXY=proxy, http_proxy=proxy, NO_PROXY="", no_proxy="")


def fintts(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fintts", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=300)


def test_with_an_api_token_and_no_network_kaggle_corpus_ends_in_one_line(tmp_path):
    result = fintts("kaggle", "corpus", str(tmp_path), "--corpus", "alice/my-voice", env=offline_env(tmp_path / "home"), cwd=tmp_path)
    assert result.returncode == 4, result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "could not reach Kaggle" in result.stderr and "check the network" in result.stderr


def test_with_an_api_token_and_no_network_push_dry_run_stages_the_folder(tmp_path):
    staged = tmp_path / "staged"
    result = fintts("kaggle", "push", "--dry-run", "--out", str(staged), "--corpus", "alice/my-voice",
                    env=offline_env(tmp_path / "home"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads((staged / "kernel-metadata.json").read_text())["id"].startswith("YOUR-KAGGLE-NAME/")
    assert "Kaggle could not be reached" in result.stdout and "put your Kaggle name in its place" in result.stdout


def test_wheels_dry_run_builds_the_folder_without_credentials(tmp_path):
    out = tmp_path / "wheels"
    result = fintts("kaggle", "wheels", "--dry-run", "--out", str(out), env=laptop_env(tmp_path / "home"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert len(list(out.glob("fintts-*.whl"))) == 1 and (out / "mms-fin.yaml").is_file()
    assert json.loads((out / "dataset-metadata.json").read_text())["id"] == "YOUR-KAGGLE-NAME/fintts-wheels"
    assert "no Kaggle credentials here" in result.stdout


def test_kaggle_token_without_a_token_on_a_laptop_says_how_to_make_one_there(tmp_path):
    """Not a notebook's advice (Add-ons → Secrets): the command runs on the laptop, and keeps the token from there."""
    result = fintts("kaggle", "token", env=laptop_env(tmp_path / "home"), cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Secrets" not in result.stderr and "huggingface.co/settings/tokens" in result.stderr
    assert "--token-stdin" in result.stderr
