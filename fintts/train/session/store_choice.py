"""Which store a session opens: the local folder, or the Hub store with that folder as its mirror.

The choice is above both stores, so it lives here and not in :mod:`fintts.train.stores`: the Hub
store is built on the local one (:class:`~fintts.train.stores.local.LocalStore` is its mirror, and
:class:`~fintts.train.stores.base.Store` what both are), so the stores' own files cannot import
``stores.hub`` without the two folders importing each other (tests/test_layers.py). ``fintts status``
and ``fintts push`` open a store too; this module loads neither torch nor the rest of the session.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fintts.train.config import TrainConfig
from fintts.train.stores.base import Store
from fintts.train.stores.local import LocalStore


def open_store(local_dir: str | Path, *, hub_repo: str = "", **hub_options: Any) -> Store:
    """The run in ``local_dir``; with ``hub_repo`` (``user/name``) the Hub store, ``local_dir`` being its mirror."""
    if hub_repo:
        from fintts.train.stores.hub import HubStore  # imports torch (the trainer's state); a local store needs none

        return HubStore(hub_repo, root=local_dir, **hub_options)
    return LocalStore(local_dir)


def store_for(cfg: TrainConfig, *, read_only: bool = False) -> Store:
    """The store a run's config describes; ``read_only``: to look at it (no token needed for a public Hub repo)."""
    if not cfg.hub_repo:
        return open_store(cfg.local_dir())
    return open_store(
        cfg.local_dir(), hub_repo=cfg.hub_repo,
        push_every=cfg.push_every or 0.0, storage_cap_gb=cfg.storage_cap_gb or None, allow_public=cfg.hub_public,
        storage_limit_gb=cfg.storage_limit_gb or None,
        request_timeout=cfg.hub_timeout, **({"read_only": True} if read_only else {}),
    )
