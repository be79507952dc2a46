"""What Kaggle says of a kernel and of the datasets a push attaches, read through the ``kaggle`` client.

Since 2026 Kaggle answers a kernel or dataset it will not confirm with 401/403 rather than 404
(kaggle-cli PR #951; Kaggle staff in kaggle-cli #548: a 403 can mean "not found"), and kaggle
2.2.5's ``kernels_status``/``kernels_logs`` raise a ``ValueError`` for it. So existence is asked
of a call meant for it (:func:`kernel_exists`), never read from a session's status, and a
session is followed by its version (:func:`kernel_state` with ``version``). The tests' local
Kaggle answers both ways (``KaggleServer(era=...)``).
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

from fintts.kaggle.client import KaggleError, calling, user_of
from fintts.kaggle.clock import SYSTEM_CLOCK, Clock
from fintts.kaggle.kernel import WHEELS_SLUG, KernelSettings
from fintts.kaggle.secret import FOUND, LOOK_BACK, attach_hint
from fintts.train.retry import Backoff
from fintts.train.stores.hub.auth import SECRET_NAME

#: Kaggle's kernel states that end a session.
ENDED = {"COMPLETE", "ERROR", "CANCEL_ACKNOWLEDGED"}
#: Not a state of Kaggle's: what ``fintts kaggle run`` calls a session whose state still says RUNNING past Kaggle's
#: session limit and :data:`PAST_LIMIT_MARGIN` (:func:`fintts.kaggle.sessions.follow`): it counts as ended, and failed.
PAST_LIMIT = "PAST_LIMIT"
#: How long past Kaggle's 12-hour limit (``KAGGLE_SESSION_LIMIT``; Kaggle's notebook documentation, "Technical
#: specifications") a state of RUNNING is still believed: the limit counts from the container's start, which this
#: machine sees only at its next look (``--poll``), on a clock that may be minutes off Kaggle's, and after the limit
#: Kaggle still saves the version's output (quota.MARGIN keeps 20 minutes for all of that around a session). An hour
#: covers these with room to spare; no session runs in it, so a chain whose Kaggle never reports an end loses an hour.
PAST_LIMIT_MARGIN = 3600.0
LOG_TAIL = 30
#: Tries of one call to Kaggle or the Hub; with :data:`BACKOFF` about a minute of waiting (more when told to wait).
ATTEMPTS = 6
BACKOFF = Backoff(base=2.0, cap=30.0, jitter=0.5, retry_after_cap=300.0)
#: Seconds one look at Kaggle or the Hub may take before it counts as a time-out (and is tried again).
REQUEST_TIMEOUT = 60.0
#: Terminal control sequences (colours, cursor moves, titles) that a notebook's log carries.
TERMINAL_CODES = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
#: How long a push waits for its datasets to be ready: Kaggle processes a new version for a while after its upload, and
#: a session pushed meanwhile is refused it (``invalidDatasetSources``), its GPU time spent on nothing (issue 41, item 6).
READY_WAIT = 900.0
READY_POLL = 15.0
#: What makes each dataset a push attaches, for a message about one that is missing.
MAKES = {"wheels": "fintts kaggle wheels", "corpus": "fintts kaggle corpus", "token_dataset": "fintts kaggle token"}
#: Kaggle's state of a kernel that exists but has never run (saved without running).
NEVER_RUN = "NEW_SCRIPT"


#: Kaggle's answers for a kernel it will not show: 404 before 2026, 401/403 since (kaggle-cli PR #951; Kaggle staff in
#: kaggle-cli #548: a 403 can mean "not found"). Neither says whether the kernel exists: :func:`kernel_exists` does.
REFUSED = frozenset({403, 404})


def kernel_state(api: Any, kernel: str, timeout: float = REQUEST_TIMEOUT, version: int = 0) -> tuple[str, str] | None:
    """Kaggle's state of ``kernel``'s ``version`` (0: the latest) and its failure message; ``None`` if it was never pushed.

    Whether it exists is not read from the status (a 403 or 404 there says nothing either way since 2026): a refused
    status is followed by :func:`kernel_exists`; a kernel that exists and shows no status has never run
    (:data:`NEVER_RUN`; what Kaggle answers for a Quick-Saved notebook is not documented: NEW_SCRIPT, 404 or 403).
    """
    # kaggle 2.2.5 sends `owner/slug/N` as versionLabel "vN" (KaggleApi._kernel_version_label: the API takes v<N>)
    ref = f"{kernel}/{version}" if version else kernel
    try:
        response = calling(f"read the status of {ref}", lambda: api.kernels_status(ref), attempts=ATTEMPTS, backoff=BACKOFF,
                           timeout=timeout)
    except KaggleError as err:
        if err.status not in REFUSED:
            raise
        return (NEVER_RUN, "") if kernel_exists(api, kernel, timeout) else None
    return response.status.name, response.failure_message or ""


def kernel_exists(api: Any, kernel: str, timeout: float = REQUEST_TIMEOUT) -> bool:
    """Whether ``kernel`` (``owner/slug``) exists: the owner's kernels searched by slug, then by title, for this exact ref.

    ``kernels_list(user=, search=)`` is what ``kaggle kernels list --user U --search S`` sends; Kaggle's search is
    over titles and its matching is not documented, and whether a private kernel is listed by user is not either,
    hence three asks (the first that lists it ends the look-up; a kernel that exists costs one). A 401 here (expired credentials) is
    raised with what to do, which a status refused as "denied" cannot say (the client words 401 and 403 alike).
    """
    owner, slug_ = kernel.split("/")[:2]
    # by user, then among "mine" (the caller's own, private ones included: the client's --mine, group "profile")
    asks = [{"user": owner, "search": slug_}, {"user": owner, "search": _title_of(slug_)}, {"mine": True, "search": slug_}]
    for ask in asks:
        found = calling(f"look up {kernel}", functools.partial(api.kernels_list, page_size=100, **ask),
                        attempts=ATTEMPTS, backoff=BACKOFF, timeout=timeout) or []
        if any(_ref(getattr(entry, "ref", "")) == kernel.lower() for entry in found):
            return True
    return False


def _ref(ref: str) -> str:
    """``owner/slug`` of a kernel's ``ref`` as the API gives it (``owner/slug``, or ``/code/owner/slug`` from a push)."""
    return ref.lower().removeprefix("/").removeprefix("code/")


def _title_of(slug_: str) -> str:
    """The words a title of this slug holds (Kaggle searches titles): ``fintts-alice-my-voice`` → ``fintts alice my voice``."""
    return slug_.replace("-", " ")


#: The states of a dataset's newest version that no wait makes ready (kagglesdk 0.1.38 ``DatabundleVersionStatus``,
#: ``FAILED`` and ``DELETED``, which kaggle 2.2.5 ``KaggleApi.dataset_status`` gives as the name in lower case): what it
#: means, and so what to do.
UNUSABLE = {"failed": "Kaggle failed to process its newest version", "deleted": "its newest version was deleted"}


def wait_for_datasets(api: Any, settings: KernelSettings, *, say: Any = None, poll: float = READY_POLL,
                      wait: float = READY_WAIT, clock: Clock = SYSTEM_CLOCK) -> None:
    """Return once every dataset the push attaches is ready; :class:`KaggleError` (nothing pushed) for one absent, unusable or stuck.

    ``KaggleApi.dataset_status`` gives the state of the dataset's newest version (``ready`` once processed); an absent
    dataset is a 404, or since 2026 a 403 (kaggle-cli PR #951, #548); one :data:`UNUSABLE` is refused at once, with what
    makes a new version of it.
    """
    refs = {"wheels": settings.wheels or f"{user_of(api)}/{WHEELS_SLUG}", "corpus": settings.corpus,
            "token_dataset": settings.token_dataset}
    deadline = clock.now() + wait
    for key, ref in refs.items():
        told = False
        while ref:
            try:
                state = str(calling(f"read the status of the dataset {ref}", functools.partial(api.dataset_status, ref),
                                    attempts=ATTEMPTS, backoff=BACKOFF)).lower()
            except KaggleError as err:
                if err.status in (403, 404):
                    raise KaggleError(f"the dataset {ref} does not exist, or these credentials cannot see it: make it with "
                                      f"{MAKES[key]} (or fix the name); no session was pushed") from None
                raise
            if state == "ready":
                break
            if state in UNUSABLE:
                raise KaggleError(f"the dataset {ref} is {state} on Kaggle: {UNUSABLE[state]}, and a session cannot mount it; "
                                  f"upload it again with {MAKES[key]} (a new version), then run this again; no session was pushed")
            if clock.now() > deadline:
                raise KaggleError(f"the dataset {ref} is still {state} after {wait / 60:.0f} minutes (Kaggle processes a new "
                                  "version before a session may mount it); no session was pushed: run this again later")
            if say and not told:
                say(f"waiting for the dataset {ref} to be ready (Kaggle is still processing it: {state})")
                told = True
            clock.sleep(poll)


def log_tail(api: Any, kernel: str, lines: int = LOG_TAIL, timeout: float = REQUEST_TIMEOUT, version: int = 0) -> str:
    """The end of the session's log (``version``'s; 0: the latest), as text (Kaggle keeps it as JSON lines of ``data`` fields)."""
    ref = f"{kernel}/{version}" if version else kernel
    raw = calling(f"read the log of {ref}", lambda: api.kernels_logs(ref), attempts=ATTEMPTS, backoff=BACKOFF, timeout=timeout)
    try:
        text = "".join(entry.get("data", "") for entry in json.loads(raw))
    except (ValueError, AttributeError, TypeError):
        text = raw
    return "\n".join(plain(line) for line in text.rstrip("\n").split("\n")[-lines:])  # not splitlines: it splits at \r


def had_token(api: Any, kernel: str, version: int) -> bool:
    """Whether a session of one of the :data:`LOOK_BACK` versions before ``version`` found the token (its log says so)."""
    for earlier in range(version - 1, max(0, version - 1 - LOOK_BACK), -1):
        try:
            if FOUND in log_tail(api, kernel, lines=10_000, version=earlier):
                return True
        except KaggleError:  # a version without a session (a quick save) has no log
            continue
    return False




def missing_verdict(api: Any, kernel: str, version: int, token_ref: str) -> str:
    """Why the session had no token, and what to do: never attached, or attached but not passed to this version."""
    if token_ref:
        why = (f"the dataset {token_ref} was attached to this version, but the session could not read it: check that it holds "
               "a file named token (run fintts kaggle token again)")
    elif version and had_token(api, kernel, version):
        why = (f"the secret {SECRET_NAME} was attached (an earlier version had it), but Kaggle did not pass it to this pushed "
               "version: a version pushed through the API may lose the secret's binding (kaggle-cli #582)")
    else:
        why = (f"the secret {SECRET_NAME} was never attached to {kernel} (or it was, and Kaggle dropped it when this version "
               "was pushed), and there is no fintts-token dataset")
    return f"{why}. Give it the token: {attach_hint(kernel)}. Then run this command again"


def plain(line: str) -> str:
    """``line`` as a terminal would leave it: no control sequences, and only what the last carriage return left visible."""
    return TERMINAL_CODES.sub("", line).rsplit("\r", 1)[-1]
