"""Which Hugging Face token ``fintts kaggle token`` keeps on Kaggle, and what it may do, as the Hub says; never its value.

Found without being named (``$HF_TOKEN``, else the login of ``hf auth login``), the token is often the laptop's
full-access one, and a Kaggle dataset is readable by every notebook of yours and by whoever you share it with. So before
it goes up the person is told which token it is and what a leak would reach, by ``/api/whoami-v2``
(``HfApi.whoami``), whose ``auth.accessToken`` holds:

- ``displayName``: the name the person gave the token (huggingface_hub 2.4 ``_login._validate_and_save_token`` stores a
  login under it; an OAuth login has none);
- ``role``: ``read``, ``write`` (every repo of the user and of their organisations) or ``fineGrained`` (the same
  function logs it as the token's permission). A read token is refused: a session could not push the run with it;
- for a fine-grained token, ``fineGrained``: per entity, its permissions in ``scoped`` (``{"entity": {"type", "name"},
  "permissions": [...]}``: a repo ``owner/name``, or a user's or organisation's namespace) and account-wide ones in
  ``global``; ``repo.write`` is the right to write. The Hub does not document this part (huggingface.js ``who-am-i.ts``
  types only ``displayName`` and ``role``); it is the shape the clients that read it agree on. When it is there,
  fintts says which repos the token may write, refuses one that may write none (or, with ``--hub-repo``, not the
  run's repo); when it is not, fintts says it cannot tell.

The recommendation is a fine-grained token that may write the run's repo only: a leak then reaches that repo and
nothing else.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from huggingface_hub import HfApi

from fintts.errors import UsageError
from fintts.train.stores.hub.auth import find_token
from fintts.train.stores.hub.errors import HubAuthError, classify

#: The permission of a fine-grained token to write a repo (or every repo of a namespace).
WRITE = "repo.write"
#: How to make the token recommended, and how to hand it over without it landing in the shell's history.
ADVICE = ("create the run's repo first (private), then a fine-grained token that may write that repo only "
          "(https://huggingface.co/settings/tokens → Create new token → Fine-grained → Repositories permissions: Write), "
          "and pass it with fintts kaggle token --token-stdin")


@dataclasses.dataclass(frozen=True)
class HubToken:
    """A token as the Hub describes it: its name, its role and, for a fine-grained one, what it may write."""

    name: str  # "": the Hub gave none (an OAuth login)
    role: str  # "read", "write", "fineGrained"; "": the Hub did not say
    #: a fine-grained token's repos (``owner/name``) and namespaces (``owner``) it may write; ``None``: not said
    writes: tuple[str, ...] | None

    @classmethod
    def from_whoami(cls, answer: dict[str, Any]) -> HubToken:
        access = (answer.get("auth") or {}).get("accessToken") or {}
        fine = access.get("fineGrained")
        writes = None
        if isinstance(fine, dict) and ("scoped" in fine or "global" in fine):
            found = [answer.get("name") or ""] if WRITE in (fine.get("global") or []) else []
            found += [(entry.get("entity") or {}).get("name") or "" for entry in fine.get("scoped") or []
                      if WRITE in (entry.get("permissions") or [])]
            writes = tuple(dict.fromkeys(name for name in found if name))
        return cls(access.get("displayName") or "", access.get("role") or "", writes)

    def may_write(self, repo: str) -> bool | None:
        """Whether a fine-grained token may write ``repo`` (the repo, or its namespace, named); ``None``: not said."""
        if self.writes is None:
            return None
        return any(name.casefold() in (repo.casefold(), repo.split("/")[0].casefold()) for name in self.writes)

    def describe(self, source: str) -> str:
        """Which token this is and what it may write, for the person: never its value."""
        name = f'the token "{self.name}"' if self.name else "a token without a name (an OAuth login)"
        if self.role == "read":
            what = "a read token, which may write nothing"
        elif self.role == "write":
            what = "a write token: it may write every repo of yours and of your organisations"
        elif self.role == "fineGrained" and self.writes is None:
            what = "a fine-grained token (what it may write, the Hub did not say)"
        elif self.role == "fineGrained":
            repos = [name if "/" in name else f"every repo of {name}" for name in self.writes]
            what = f"a fine-grained token that may write {', '.join(repos) or 'no repo'}"
        else:
            what = f"a token whose role the Hub gives as {self.role!r}" if self.role else "a token whose role the Hub did not say"
        return f"{name} ({source}), {what}"


def found_token() -> tuple[str, str]:
    """The token ``find_token`` finds on a laptop, and where from (``$HF_TOKEN``, else the login of ``hf auth login``).

    ``fintts kaggle token`` runs where the person is, not in a notebook: with none found, the advice is the laptop's
    (find_token's own also tells a notebook where its secrets are).
    """
    try:
        token = find_token()
    except HubAuthError:
        raise UsageError(f"no Hugging Face token on this machine (no HF_TOKEN, no hf auth login): {ADVICE}") from None
    return token, "from $HF_TOKEN" if os.environ.get("HF_TOKEN", "").strip() else "from your login, hf auth login"


def whoami(token: str, source: str) -> HubToken:
    """What the Hub says of ``token``; a :class:`~fintts.train.stores.hub.errors.HubError` (no token in it) if it cannot."""
    api = HfApi()
    try:
        return HubToken.from_whoami(api.whoami(token=token))
    except Exception as err:  # the client's HTTP and network errors, said without the token
        raise classify(err, token=token, endpoint=api.endpoint, repo_id="your account").prefixed(
            f"could not ask the Hub which token came {source}", "; nothing was stored") from None


def check(token: HubToken, source: str, repo: str = "") -> str:
    """The line that says which token goes up; :class:`UsageError` for one a session could not push ``repo`` with.

    ``repo``: the run's repo (``--hub-repo``), when the person named it.
    """
    said = token.describe(source)
    if token.role == "read" or token.writes == () or (repo and token.may_write(repo) is False):
        raise UsageError(f"{said}{f', not {repo}' if repo and token.writes else ''}: a session could not push the run with "
                         f"it. Nothing was stored; {ADVICE}")
    if repo and token.may_write(repo):
        return f"going up: {said}. It may write the run's repo, {repo}"
    if token.writes:
        return f"going up: {said}. Check that the run's repo is among them (--hub-repo names it)"
    if token.role == "write":
        return f"going up: {said}. A leak of it would reach them all; better: {ADVICE}"
    return f"going up: {said}. The token recommended: {ADVICE}"
