"""The ``HF_TOKEN`` secret: checked first in a session, and asked for by the laptop when it is missing.

A session that keeps its run on the Hub needs a write token, and on Kaggle it comes from a
secret attached to the notebook — which can only be attached in the notebook's editor, so
only once the notebook exists. Two things keep a missing secret from costing more than a
minute of one session:

- the training notebook calls :func:`require_token` right after its install cell, before the
  corpus is read or anything trains: without a token it prints :data:`MISSING` with what to do
  and raises, so Kaggle ends the session at once;
- ``fintts kaggle run`` looks for :data:`MISSING` in the log of a session that failed, and then
  stops (no second session) with :func:`attach_hint`: where the editor is and what to click.

A notebook fintts has never pushed is first saved without running (Quick Save), so that it
exists for the secret to be attached before any session starts (:mod:`.sessions`).
"""

from __future__ import annotations

from fintts.kaggle.kernel import editor_url
from fintts.train.stores.hub.auth import SECRET_NAME, find_token
from fintts.train.stores.hub.errors import HubAuthError

#: The line a session prints when it has no token; the laptop finds it in the session's log.
MISSING = f"fintts: no Hugging Face token in this session: the Kaggle secret {SECRET_NAME} is not attached to this notebook"


class MissingSecret(RuntimeError):
    """The session keeps its run on the Hub and has no token to do so (raised to stop Run All)."""


def require_token(repo: str) -> None:
    """Raise :class:`MissingSecret` (after printing :data:`MISSING`) when ``repo`` is set and no token is found.

    Only the presence of a token is checked here, in well under a second and without the network;
    a token the Hub refuses (revoked, read-only) is reported by the session's first request to it.
    """
    if not repo:
        print(f"no REPO: this session keeps the run in its own output, and needs no {SECRET_NAME}")
        return
    try:
        find_token()
    except HubAuthError:
        print(MISSING, flush=True)
        raise MissingSecret(
            f"{MISSING}. In this notebook's editor: Add-ons → Secrets → Add Secret, label {SECRET_NAME}, value a write token "
            "from https://huggingface.co/settings/tokens, and tick it for this notebook; then run the notebook again "
            "(or fintts kaggle run on your laptop)"
        ) from None
    print(f"{SECRET_NAME} found: the run is kept in hf://{repo}")


def attach_hint(kernel: str) -> str:
    """What to do on kaggle.com so that ``kernel``'s sessions have the token."""
    return (f"open {editor_url(kernel)} (the notebook's editor), then Add-ons → Secrets → Add Secret: label {SECRET_NAME}, "
            "value a Hugging Face write token (https://huggingface.co/settings/tokens); tick it for this notebook, and stop "
            "the editor's session (an open editor keeps a session of its own, on the GPU quota when its GPU is on)")
