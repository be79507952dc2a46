"""Checkpoint stores: a local folder (default) or a Hugging Face Hub repo."""

from __future__ import annotations

from pathlib import Path

from fintts.train.stores.base import LeaseConflict, Store, StoreError
from fintts.train.stores.local import LocalStore

__all__ = ["LeaseConflict", "LocalStore", "Store", "StoreError", "open_store"]


def open_store(location: str | Path, **hub_options) -> Store:
    """``hf://user/name`` opens the Hub store (with a local mirror), anything else a folder."""
    text = str(location)
    if text.startswith("hf://"):
        from fintts.train.stores.hub import HubStore

        return HubStore(text[len("hf://"):], **hub_options)
    return LocalStore(text)
