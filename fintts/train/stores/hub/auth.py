"""Where the Hugging Face token comes from, and keeping it out of everything we write.

A Kaggle notebook has no ``huggingface-cli login``: the token arrives as the ``HF_TOKEN``
environment variable or as a Kaggle *secret* named ``HF_TOKEN``; on a laptop it is the
cached login. The token is a write credential to the person's account, so it must never
reach a log line, an exception message or a file of the run: :func:`~.errors.scrub` is
applied to every message built from a client error.
"""

from __future__ import annotations

import os

from huggingface_hub import get_token

from fintts.train.stores.hub.errors import HubAuthError

SECRET_NAME = "HF_TOKEN"


def find_token(explicit: str | None = None) -> str:
    """The token to use: ``explicit``, else ``$HF_TOKEN``, else the Kaggle secret, else the cached login."""
    for candidate in (explicit, os.environ.get("HF_TOKEN"), _kaggle_secret(), _cached_login()):
        if candidate and candidate.strip():
            return candidate.strip()
    raise HubAuthError(
        "No Hugging Face token found. Create a *write* token at https://huggingface.co/settings/tokens, then either "
        "set the environment variable HF_TOKEN, or on Kaggle add it under Add-ons > Secrets as a secret named "
        f"{SECRET_NAME} (and tick it for this notebook), or run `hf auth login` on your own machine."
    )


def _kaggle_secret() -> str | None:
    # Imported lazily: kaggle_secrets exists only inside Kaggle notebooks.
    try:
        from kaggle_secrets import UserSecretsClient  # type: ignore[import-not-found]
    except ImportError:
        return None
    try:
        return UserSecretsClient().get_secret(SECRET_NAME)
    except Exception:  # secret absent or not attached to this notebook: fall through to the next source
        return None


def _cached_login() -> str | None:
    try:
        return get_token()
    except Exception:  # e.g. a failing OIDC exchange; a missing token is reported by find_token
        return None

