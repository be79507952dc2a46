"""``fintts env``: the machine and the Hub as a session will find them."""

from __future__ import annotations

import json

import pytest

from hub_helpers import TOKEN
from trainer_helpers import cli

#: every test here starts a process (a fintts command, a server's session, espeak-ng or ffmpeg): not the unit tier
pytestmark = pytest.mark.process


def test_env_reports_the_cpu_the_disk_and_a_hub_that_accepts_the_token_without_showing_it(hub_env, tmp_path):
    result = cli("env", "--store", str(tmp_path / "runs" / "x"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "platform   local" in out and "no time limit" in out
    assert "GPUs       none: training runs on the CPU" in out
    assert "free of" in out and str(tmp_path / "runs" / "x") in out
    assert "HF token   present (its value is never shown)" in out
    assert f"Hub        {hub_env.endpoint} answers; the token is {hub_env.user}'s" in out
    assert TOKEN not in out + result.stderr


def test_env_says_why_the_hub_cannot_be_used(hub_env, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_" + "x" * 30)
    rejected = cli("env", cwd=tmp_path).stdout
    assert "answers, but: the Hub does not accept the token (401)" in rejected
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens on the discard port
    assert "Hub        does not answer: no answer from http://127.0.0.1:9" in cli("env", cwd=tmp_path).stdout


def test_env_on_kaggle_counts_the_session_from_the_container_start(tmp_path, monkeypatch):
    monkeypatch.setenv("KAGGLE_URL_BASE", "https://www.kaggle.com")
    facts = json.loads(cli("env", "--no-hub", "--json", cwd=tmp_path).stdout)
    assert facts["platform"] == "kaggle" and facts["session"]["clock_from"] == "kaggle container start (PID 1)"
    assert facts["session"]["limit_seconds"] == 12 * 3600 and facts["session"]["left_seconds"] >= 0
    assert "hub" not in facts
