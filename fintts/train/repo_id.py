"""What names a Hugging Face Hub repo: checked by the config, the Kaggle settings and the Hub store alike.

A module of its own, importing nothing: the config checks ``hub_repo`` without importing the
stores (whose package imports the config to build a store from it).
"""

from __future__ import annotations

import re

_REPO_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def repo_id_problem(repo_id: str) -> str | None:
    """Why ``repo_id`` cannot name a Hub repo (``None`` if it can), for the caller's own error."""
    parts = repo_id.split("/")
    if len(parts) == 2 and all(_REPO_PART.fullmatch(p) for p in parts):
        return None
    return f"{repo_id!r} is not a Hub repo id; write USER/NAME (e.g. alice/my-model)"
