"""Fixtures shared by the test modules: a local Hugging Face Hub and the token it accepts."""

from __future__ import annotations

import os

# One thread for torch (OpenMP, MKL) in the tests and in every process they start, set before anything imports torch:
# the suite runs on 2 shared cores, three tests at a time (pytest -n 3), and a thread pool wider than the free cores
# spin-waits. One test's 40 tiny VITS steps took 141 s with torch's default 2 threads beside another busy process,
# 10 s with 1 (tests/tts/vits/test_vits_training.py -k overfitting, 2026-11-26). What a session does with its
# threads (the launcher gives each process its share) is unchanged: a test that sets OMP_NUM_THREADS still wins.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import pytest  # noqa: E402

from fintts_stand_ins import HubServer  # noqa: E402
from hub_helpers import TOKEN  # noqa: E402


@pytest.fixture
def hub(tmp_path):
    """A Hub stand-in on 127.0.0.1 that accepts :data:`TOKEN`."""
    with HubServer(tmp_path / "hub", token=TOKEN) as server:
        yield server


@pytest.fixture
def hub_env(hub, monkeypatch):
    """:func:`hub`, with the environment a ``fintts`` process reads it from (endpoint and token)."""
    monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    return hub
