"""The Hugging Face token of a Kaggle session: the ``HF_TOKEN`` secret, or the private dataset ``<you>/fintts-token``.

A session that keeps its run on the Hub needs a write token. Kaggle's way is a secret
attached to the notebook in its editor; but ``ApiSaveKernelRequest`` has no field for
secrets, Kaggle declined to add one (kaggle-cli #582; PR #944 closed unmerged), and users
who push notebooks through the API report that each pushed version loses the binding.
Nothing confirms that it survives, so fintts builds for both:

- ``fintts kaggle token`` (:func:`store_token`) keeps the token as a *private dataset*
  ``<you>/fintts-token`` (one file, ``token``), which every push attaches when it exists
  (:func:`token_dataset`) and the notebook reads when no secret was passed. A dataset is
  readable by whoever you share it with, and by any notebook of yours: a fine-grained
  token that may write to this run's repo only limits what a leak could do
  (:mod:`.hub_token` says which token goes up, and refuses one that cannot push). A
  ``fintts-token`` that is public is refused, never written into nor attached
  (:mod:`.visibility`), and a new token deletes the dataset's older versions, so that
  no earlier token stays readable there.
- the notebook's first cell, before any install, finds the token (secret, then dataset)
  or prints :data:`MISSING` and stops the session within seconds; it keeps the token out of the
  kernel's environment until the training (:func:`fintts.kaggle.notebook.token_for_training`);
- ``fintts kaggle run`` finds :data:`MISSING` in a session's log and stops with
  :func:`missing_verdict`, which tells "never attached" from "attached, but Kaggle did not
  pass it to this version" by whether an earlier version of the notebook had it
  (:data:`FOUND` in its log).

The token is never printed, logged or written anywhere but that dataset (a temporary
folder for the upload, deleted at once).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from fintts.kaggle.client import KaggleError, calling, user_of
from fintts.kaggle.kernel import editor_url
from fintts.kaggle.visibility import private_or_absent
from fintts.train.stores.hub.auth import SECRET_NAME

#: The line a session prints when it has no token (the notebook's first cell); the laptop finds it in the log.
MISSING = "fintts: no Hugging Face token in this session"
#: The line a session prints when it found one (never the token itself).
FOUND = "fintts: the Hugging Face token came from"
#: The private dataset that keeps the token, under the pushing user.
TOKEN_SLUG = "fintts-token"
#: How many earlier versions' logs are read to learn whether the secret ever reached a session.
LOOK_BACK = 3


def attach_hint(kernel: str) -> str:
    """What to do so that ``kernel``'s sessions have the token: ``fintts kaggle token``, or the secret in the editor."""
    return (f"on your laptop run fintts kaggle token (it keeps your Hugging Face write token as your private dataset "
            f"{TOKEN_SLUG}, which every push attaches); or open {editor_url(kernel)} (the notebook's editor), then "
            f"Add-ons → Secrets → Add Secret: label {SECRET_NAME}, value a Hugging Face write token "
            "(https://huggingface.co/settings/tokens), ticked for this notebook, and stop the editor's session (an open "
            "editor keeps a session of its own, on the GPU quota when its GPU is on)")


def token_dataset(api: Any) -> str:
    """``<you>/fintts-token`` when it exists (a push attaches it), else ``""``; a public one is refused (:mod:`.visibility`).

    A public one is not attached either: a session would use a token that anyone could have read.
    """
    ref = f"{user_of(api)}/{TOKEN_SLUG}"
    risk = ("anyone can read a Hugging Face token in it, so fintts neither writes one there nor has a session read one from "
            "it; revoke every token it held at https://huggingface.co/settings/tokens")
    return ref if private_or_absent(api, ref, risk=risk, instead="delete it there (fintts kaggle token then creates it private)") else ""


def store_token(api: Any, token: str) -> str:
    """Upload ``token`` as the private dataset ``<you>/fintts-token``; its ref.

    When the dataset exists the token goes up as a new version that deletes the older ones
    (``dataset_create_version(delete_old_versions=True)``, ``kaggle datasets version -d``: "Delete old versions
    of this dataset", kaggle 2.2.5 ``cli.py``; the client sends it as ``deleteOldVersions``), so no token that
    was replaced stays readable in an earlier version.
    """
    ref = f"{user_of(api)}/{TOKEN_SLUG}"
    exists = bool(token_dataset(api))
    with tempfile.TemporaryDirectory(prefix="fintts-token-") as tmp:
        folder = Path(tmp)
        (folder / "token").write_text(token.strip() + "\n", encoding="utf-8")
        (folder / "token").chmod(0o600)
        metadata = {"title": TOKEN_SLUG, "id": ref, "licenses": [{"name": "other"}]}
        (folder / "dataset-metadata.json").write_text(json.dumps(metadata), encoding="utf-8")
        if exists:
            result = calling(f"add a version to {ref}", lambda: api.dataset_create_version(
                tmp, "fintts kaggle token", quiet=True, delete_old_versions=True))
        else:
            result = calling(f"create {ref}", lambda: api.dataset_create_new(tmp, public=False, quiet=True))
    if result is None or getattr(result, "error", None):
        raise KaggleError(f"Kaggle did not take {ref}: {getattr(result, 'error', 'no answer')}")
    return ref
