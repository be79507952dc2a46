"""An existing public repo is refused unless the person asked for a public one: one rule for a training run and ``fintts publish``.

Asking for a private repo does not make an existing one private: ``create_repo(private=True,
exist_ok=True)`` answers the Hub's 409 for a repo that exists by passing over it, visibility
unchanged (huggingface_hub 2.4, ``hf_api.py``, ``HfApi.create_repo``: ``if exist_ok and
err.response.status_code == 409: pass``). So whatever goes to an existing repo would go out for
anyone to download unless its visibility is looked up first; a public one is refused, not reused
(``DESIGN.md``: nothing private leaves without being asked).
"""

from __future__ import annotations

from fintts.errors import StoreError


def refuse_public(repo_id: str, *, is_private: bool, goes: str, allow: str, endpoint: str = "https://huggingface.co") -> None:
    """Raise :class:`StoreError` when ``repo_id`` is public; the caller skips this when the person asked for public.

    ``goes``: what would be pushed there, for the message (``a training run pushes its checkpoints…``);
    ``allow``: how the person asks for a public repo (a config setting, a flag).
    """
    if is_private:
        return
    raise StoreError(f"{repo_id} is public: {goes} there for anyone to download. Make it private "
                     f"({endpoint}/{repo_id}/settings), or {allow}")
