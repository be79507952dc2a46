"""Fixtures the Hub store's tests share."""

from __future__ import annotations

import pytest
from huggingface_hub import constants

from fintts_stand_ins import HubServer
from hub_helpers import TOKEN


@pytest.fixture
def xet_hub(tmp_path, monkeypatch):
    """A Xet-backed Hub stand-in, with the real hf_xet used for large files (its brief retries are set for the whole
    process in tests/conftest.py: hf_xet reads them once)."""
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", False)
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    with HubServer(tmp_path / "hub", token=TOKEN, xet=True) as server:
        yield server
