"""What can go wrong talking to the Hub, as exceptions that say whether trying again can help.

Every client error is turned into one of these by :func:`classify`, with a message that
has no token in it and says what to do. ``transient`` errors (the network, an overloaded
Hub, a branch that moved under a commit, a local file race) are retried with backoff;
the others need a person (a bad token, a missing repo, a refused request, a lease taken
by another session).

**Classified by where the error came from**, not by its Python type alone: ``hf_xet`` (the
Xet storage every large file of a real repo goes through, see :func:`_from_xet`) raises the
same builtin types as a local file (``ConnectionError`` and ``XetAuthenticationError`` are
``OSError`` subclasses), and older ``hf_xet`` a bare ``RuntimeError``.
"""

from __future__ import annotations

import re
from types import TracebackType
from typing import Any

from huggingface_hub.errors import (
    HfHubHTTPError,
    LocalEntryNotFoundError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import parse_ratelimit_headers

from fintts.errors import LeaseConflict, StoreError

_RETRY_STATUSES = {408, 429, 500, 502, 503, 504}
_NETWORK_MODULES = {"httpx", "httpx2", "httpcore", "requests", "urllib3"}
_REDACTED = "<token>"
#: ``huggingface_hub``'s functions that hand large files to ``hf_xet`` (2.4: ``_commit_api.py``, ``file_download.py``).
_XET_FRAMES = ("_upload_xet_files", "xet_get")
#: The HTTP status hf_xet puts in its messages: "... HTTP status client error (403 Forbidden), domain: ..." (hf_xet 1.8).
_XET_STATUS = re.compile(r"\((\d{3}) [A-Za-z ]+\)")


def scrub(text: str, token: str | None) -> str:
    """``text`` with every occurrence of ``token`` replaced, for messages built from client errors."""
    if token:
        text = text.replace(token, _REDACTED)
    return text


class HubError(StoreError):
    """A Hub request failed; ``transient`` says whether retrying may succeed, ``retry_after`` when the Hub asked."""

    transient = False

    def __init__(self, message: str, *, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after

    def prefixed(self, context: str, advice: str = "") -> HubError:
        """The same failure, its message saying what was being done and what to do."""
        return type(self)(f"{context}: {self}{advice}", retry_after=self.retry_after)


class HubAuthError(HubError):
    """No usable Hugging Face token, or the Hub rejected it; the message says how to fix it."""


class HubRepoError(HubError):
    """The repo does not exist, or the token cannot see it."""


class HubRefused(HubError):
    """The Hub refused a request for a reason retrying will not change (4xx)."""


class HubStorageFull(HubRefused):
    """The account's storage is full: every upload is refused until a person frees space or upgrades."""


class HubUnavailable(HubError):
    """The Hub could not be reached, or is overloaded (5xx, 429); local checkpoints are untouched."""

    transient = True


class HubDeadline(HubUnavailable):
    """A request was not sent: the session's end (its clock's deadline) has come."""

    transient = False


class HubMoved(HubError):
    """The repo's branch moved while committing (another writer, or our own earlier commit landing late)."""

    transient = True


class HubLocalError(HubError):
    """A local file changed under an upload (e.g. pruned while being read)."""

    transient = True


class HubLocalRefused(HubError):
    """A local file cannot be read (permission, a folder where a file was): a person must fix it."""


class LeaseLost(HubError, LeaseConflict):
    """Another session took the run's lease; this one must stop writing to it."""


def classify(err: BaseException, *, token: str | None, endpoint: str, repo_id: str) -> HubError:
    """Turn a client error into a :class:`HubError` whose message has no token and says what to do."""
    if isinstance(err, HubError):
        return err
    if isinstance(err, StoreError):
        return HubError(scrub(str(err), token))
    if isinstance(err, HfHubHTTPError) and getattr(err, "response", None) is not None:
        status = err.response.status_code
        detail = scrub((getattr(err, "server_message", None) or str(err).splitlines()[0]).strip(), token)
        if status in (409, 412):
            return HubMoved(f"the repo changed while committing ({status})")
        if isinstance(err, RevisionNotFoundError):
            # Freeing old checkpoints' storage (permanently_delete_lfs_files(rewrite_history=True)) gives every commit a
            # new id: a reader holding the old head meets 404 "RevisionNotFound" (utils/_http.py, hf_raise_for_status)
            # for a repo that is there. Read again from the new head, never "repo not found".
            return HubMoved("the commit being read vanished (the repo's history was rewritten meanwhile); read again")
        if status in _RETRY_STATUSES:
            wait = _retry_after(err.response.headers)
            return HubUnavailable(f"the Hub answered {status}" + (f"; it asks to wait {wait:.0f} s" if wait else ""), retry_after=wait)
        if status == 403 and "storage" in detail.lower() and "limit" in detail.lower():
            # "403 Private repository storage limit reached" (huggingface_hub #3048/#3049): the account's quota, not the token
            return HubStorageFull(
                f"the Hub refused to store more in {repo_id}: the account's private storage is full (403: {detail}). Free "
                "space (delete old repos or checkpoints: https://huggingface.co/settings/storage) or upgrade the account; "
                "the checkpoints stay on this disk meanwhile"
            )
        if status == 401 and not token:
            return HubAuthError(
                f"{repo_id} cannot be read without a token (401: {detail}): it is private, or the name is wrong. Create a "
                "token at https://huggingface.co/settings/tokens (a read token is enough to look; training needs a write "
                "token) and set it as HF_TOKEN, or run `hf auth login`"
            )
        if status == 401:
            return HubAuthError(
                f"the Hub rejected the token (401: {detail}). Create a write token at https://huggingface.co/settings/tokens "
                "and set it as HF_TOKEN (on Kaggle: the secret HF_TOKEN)"
            )
        if status == 403:
            return HubAuthError(f"the token may not write to {repo_id} (403: {detail}); it needs the write role")
        if isinstance(err, RepositoryNotFoundError) or (status == 404 and not isinstance(err, RemoteEntryNotFoundError)):
            return HubRepoError(
                f"repo {repo_id} not found at {endpoint}, or the token cannot see it. Check the name (user/name) and the token"
            )
        return HubRefused(f"the Hub refused the request ({status}: {detail})")
    if isinstance(err, ValueError) and "Invalid metadata in README.md" in str(err):
        # HfApi.create_commit validates README.md's metadata itself before committing (hf_api.py, _validate_yaml)
        return HubRefused(f"the Hub refused the card's metadata ({scrub(str(err), token).replace(chr(10), ' ')})")
    if _from_xet(err):
        return _xet_failure(err, token=token, repo_id=repo_id)
    if isinstance(err, (ConnectionError, TimeoutError)):  # builtin ones: not a file's (a socket's, a thread's)
        return HubUnavailable(f"cannot reach the Hub's storage ({type(err).__name__}: {scrub(str(err), token)[:300]})")
    if isinstance(err, LocalEntryNotFoundError) or any(c.__module__.split(".")[0] in _NETWORK_MODULES for c in type(err).__mro__):
        if "Timeout" in type(err).__name__ or isinstance(err.__context__, TimeoutError):
            return HubUnavailable(f"{endpoint} did not answer in time ({type(err).__name__}): the Hub is stalled or the network is")
        return HubUnavailable(f"cannot reach {endpoint} ({type(err).__name__})")
    if isinstance(err, FileNotFoundError):  # pruned while being read: the next push takes the newer checkpoint
        return HubLocalError(f"local file problem: {scrub(str(err), token)}")
    if isinstance(err, OSError) and getattr(err, "filename", None):
        return HubLocalRefused(f"cannot read {err.filename} to upload it ({err.strerror or type(err).__name__}); fix its permissions")
    if isinstance(err, OSError):
        return HubLocalError(f"local file problem: {scrub(str(err), token)}")
    return HubError(f"{type(err).__name__}: {scrub(str(err), token)}")


def _retry_after(headers: Any) -> float | None:
    """How long the Hub asks to wait: the longer of ``Retry-After`` and the ``RateLimit`` header's ``t=``.

    ``RateLimit: "api";r=0;t=55`` is the Hub's documented signal (huggingface_hub 2.4
    ``utils/_http.py``, ``parse_ratelimit_headers``, after the IETF draft); a 429 of the hourly commit
    quota may carry it alone.
    """
    waits = []
    value = (headers.get("Retry-After") or "").strip()
    if value.isdigit():
        waits.append(float(value))
    info = parse_ratelimit_headers(headers)
    if info is not None and info.remaining == 0:
        waits.append(float(info.reset_in_seconds))
    return max(waits) if waits else None


def _from_xet(err: BaseException) -> bool:
    """Did ``err`` come from Xet storage: an ``hf_xet`` type, or raised inside ``huggingface_hub``'s hand-over to it?

    hf_xet 1.8 raises builtin ``ConnectionError`` for CAS answers and network failures and
    ``XetAuthenticationError(PermissionError)`` when its token is refused; older ones raised
    ``RuntimeError("Data processing error: CAS service error …")`` (xet-core #394, #444;
    huggingface_hub #3036). Those types say nothing of the origin, the traceback does.
    """
    if type(err).__module__.split(".")[0] == "hf_xet":
        return True
    if isinstance(err, RuntimeError) and ("CAS service error" in str(err) or "Data processing error" in str(err)):
        return True
    return any(frame.f_code.co_name in _XET_FRAMES for frame in _frames(err.__traceback__))


def _frames(tb: TracebackType | None):
    while tb is not None:
        yield tb.tb_frame
        tb = tb.tb_next


def _xet_failure(err: BaseException, *, token: str | None, repo_id: str) -> HubError:
    """An error from Xet storage: a refused token says so and needs a person; anything else passes (CAS, network)."""
    detail = scrub(str(err), token)[:300]
    found = _XET_STATUS.search(detail)
    status = int(found.group(1)) if found else None
    if isinstance(err, PermissionError) or status in (401, 403):
        return HubAuthError(
            f"the Hub's Xet storage refused to store {repo_id}'s files ({detail}): the token may not write to this repo "
            "(it needs the write role, or a fine-grained token with write access to it), or the account's storage is full"
        )
    return HubUnavailable(f"the Hub's Xet storage failed ({type(err).__name__}: {detail}); it is tried again")
