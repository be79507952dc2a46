"""Old import paths kept working after names move to a module of their own.

A module whose names moved sets ``__getattr__ = moved_to("new.module", names, __name__)``: Python
calls it only for a name the module no longer has (PEP 562), so the new module, and what it
imports, is imported only by code that still uses the old path. Imports nothing of ours.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from typing import Any


def moved_to(new: str, names: Iterable[str], old: str) -> Callable[[str], Any]:
    """The ``__getattr__`` for module ``old`` whose ``names`` now live in module ``new``."""
    moved = frozenset(names)

    def __getattr__(name: str) -> Any:
        if name in moved:
            return getattr(importlib.import_module(new), name)
        raise AttributeError(f"module {old!r} has no attribute {name!r}")

    return __getattr__
