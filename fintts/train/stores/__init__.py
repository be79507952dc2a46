"""Checkpoint stores: a local folder (default), kept on a Hugging Face Hub repo too when one is named (:mod:`.hub`).

Which of them a session opens is :mod:`fintts.train.session.store_choice`'s: the Hub store is built on
the local one, so these files do not import :mod:`.hub` (the two folders would import each other).
"""

from __future__ import annotations

from fintts.errors import LeaseConflict, StoreError
from fintts.train.stores.base import Store
from fintts.train.stores.local import LocalStore

__all__ = ["LeaseConflict", "LocalStore", "Store", "StoreError"]
