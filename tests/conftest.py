"""Fixtures shared by the test modules: a local Hugging Face Hub and the token it accepts."""

from __future__ import annotations

import pytest

from fintts_stand_ins import HubServer
from hub_helpers import TOKEN


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
