"""What can go wrong talking to the Hub, as exceptions that say whether trying again can help.

Every client error is turned into one of these by :func:`classify`, with a message that
has no token in it and says what to do. ``transient`` errors (the network, an overloaded
Hub, a branch that moved under a commit, a local file race) are retried with backoff;
the others need a person (a bad token, a missing repo, a refused request, a lease taken
by another session).

**Narrowly permanent.** Only an answer that a retry of the same request cannot change is a
refusal: the Hub's own 4xx (a rejected token, no permission, a missing repo, an invalid card, a
full quota, a bad request), and a local file that cannot be read. Everything else is passing
and retried until the session's deadline: any 5xx, 408/425/429, an answer that is not the
JSON the client expected (a gateway's HTML error page: ``HfApi._validate_yaml`` reads
``response.json()`` before the status, so a 502 page before a commit carrying ``README.md``
surfaces as ``JSONDecodeError``), and any exception of a type this module does not know. A
refusal taken for an outage costs retries until the deadline; an outage taken for a refusal
cost a run its final push (issue 53).

**Classified by where the error came from**, not by its Python type alone: ``hf_xet`` (the
Xet storage every large file of a real repo goes through, see :func:`_from_xet`) raises the
same builtin types as a local file (``ConnectionError`` and ``XetAuthenticationError`` are
``OSError`` subclasses), and older ``hf_xet`` a bare ``RuntimeError``.
"""

from __future__ import annotations

import json
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

#: The 4xx that say "not now" rather than "no": a request timeout, too early, too many requests. Every other 4xx is a
#: refusal; every 5xx (a gateway's 502/504 among them) is passing.
_NOT_NOW = {408, 425, 429}
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


class HubUnexpected(HubError):
    """A failure of a kind this module does not know; tried again, because only a known refusal needs a person."""

    transient = True


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
        if not _refusal(status):
            wait = _retry_after(err.response.headers)
            return HubUnavailable(
                f"the Hub answered {status}{_gateway_note(err.response)}" + (f"; it asks to wait {wait:.0f} s" if wait else ""),
                retry_after=wait,
            )
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
    if isinstance(err, json.JSONDecodeError):
        # HfApi._validate_yaml (huggingface_hub 2.4, hf_api.py) calls response.json() before hf_raise_for_status: a
        # gateway's HTML 502 page at /api/validate-yaml, before every commit carrying README.md, raises this
        return HubUnavailable("the Hub's answer could not be read (not JSON: a gateway's error page, or a cut-off answer)")
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
    return HubUnexpected(f"unexpected {type(err).__name__}: {scrub(str(err), token)[:300]}; it is tried again")


def _refusal(status: int) -> bool:
    """Is ``status`` an answer that a retry of the same request cannot change (a 4xx that is not "not now")?"""
    return 400 <= status < 500 and status not in _NOT_NOW


def _gateway_note(response: Any) -> str:
    """What to call an error page that is not the Hub's JSON: a proxy's or load balancer's HTML (502, 504)."""
    return " (an HTML page: a gateway's, not the Hub's own answer)" if "html" in response.headers.get("Content-Type", "") else ""


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
    """An error from Xet storage, by the HTTP status in its message: 401/403 the token's refusal, 404 "no such thing",
    another 4xx a refused request (all need a person); a 5xx, 408/429 or a network error passes.

    hf_xet 1.8 says "Network error: Request error: HTTP status client error (404 Not Found), domain: …" for a CAS's
    4xx after its own retries (measured against the tests' stand-in): a 404 on an upload means the CAS does not know
    the repo's storage (the repo deleted or renamed meanwhile), a 400 that it will not take the request; sending the
    same again cannot change either. A 404 on hf_xet's dedup lookup (``/v1/chunks``) is routine and never raised.
    """
    detail = scrub(str(err), token)[:300]
    found = _XET_STATUS.search(detail)
    status = int(found.group(1)) if found else None
    if isinstance(err, PermissionError) or status in (401, 403):
        return HubAuthError(
            f"the Hub's Xet storage refused to store {repo_id}'s files ({detail}): the token may not write to this repo "
            "(it needs the write role, or a fine-grained token with write access to it), or the account's storage is full"
        )
    if status == 404:
        return HubRefused(
            f"the Hub's Xet storage does not know what was asked for {repo_id} ({detail}): the repo may have been deleted or "
            "renamed meanwhile; check it exists at its name"
        )
    if status is not None and _refusal(status):
        return HubRefused(f"the Hub's Xet storage refused the request for {repo_id} ({detail})")
    return HubUnavailable(f"the Hub's Xet storage failed ({type(err).__name__}: {detail}); it is tried again")
