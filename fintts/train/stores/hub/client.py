"""The few Hub calls fintts makes, on one ``HfApi`` holding the token, and how they are retried.

Everything that reaches the Hub — the store during training, ``fintts push``, ``fintts pull``,
``fintts status`` — goes through a :class:`HubClient` made by :meth:`HubClient.connect`, so
the endpoint, the token and the error messages are the same whichever command a person ran.

**Every request is bounded.** ``huggingface_hub`` sends most requests (commits and tree
listings among them) with no timeout, so a Hub that accepts a connection and then stalls
would hold a call forever, and a session's end with it. Each call of a :class:`HubClient`
therefore runs with a bound on every HTTP request it makes: ``timeout`` seconds, and never
past the client's ``deadline`` (the session's end, from its clock); once the deadline has
passed a request is not sent at all (:class:`~.errors.HubDeadline`). ``huggingface_hub``
offers no per-call timeout for these requests, so the bound is put on its shared HTTP client
as a request hook that reads it from a context variable: it applies only inside a
:class:`HubClient` call and leaves every other user of that client (model downloads) alone.
Requests made on worker threads that ``huggingface_hub`` starts itself (several LFS files
at once) and ``hf_xet``'s own transfers do not see that bound, and a slow upload that keeps
trickling never trips a per-request one: :meth:`HubClient.upload` therefore sends a
commit's large files *before* the commit, on a thread of its own, and gives up on them
after an overall deadline (:class:`~.errors.HubUnavailable`, retried like any outage).
"""

from __future__ import annotations

import contextvars
import dataclasses
import json
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any, TypeVar

from huggingface_hub import CommitOperationAdd, HfApi
from huggingface_hub.errors import HfHubHTTPError, RemoteEntryNotFoundError
from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

from fintts.errors import StoreError
from fintts.train.retry import Backoff
from fintts.train.run import checkpoint as ckpt
from fintts.train.run.layout import LOSS_PLOT, MODEL_DIR, SAMPLES_DIR, TENSORBOARD_DIR
from fintts.train.stores.hub.auth import find_token
from fintts.train.stores.hub.errors import HubAuthError, HubDeadline, HubError, HubUnavailable, classify
from fintts.train.stores.hub.plan import Plan, plan_of

log = logging.getLogger(__name__)

#: LFS objects are only ever freed under these prefixes; anything else in the repo is the person's.
MANAGED_PREFIXES = (*(folder + "/" for folder in (ckpt.CHECKPOINTS, MODEL_DIR, SAMPLES_DIR, TENSORBOARD_DIR)), LOSS_PLOT)
#: Why a session refuses to start without the Hub, and what to do instead.
UNREACHABLE_ADVICE = (
    ". The run's newest checkpoint and its writer's lease live on the Hub, so a session cannot safely start"
    " without it (it would fork the run). Check the network (on Kaggle: Settings > Internet on) and HF_ENDPOINT,"
    " then run again; or train with --store PATH alone and `fintts push --store PATH --hub-repo USER/NAME` later."
)
_T = TypeVar("_T")
#: (seconds per request, deadline as ``time.time()`` or ``None``) while a HubClient call runs in this context.
_REQUEST_BOUND: contextvars.ContextVar[tuple[float, float | None] | None] = contextvars.ContextVar("fintts_hub_bound", default=None)


def _bound_request(request: Any) -> None:
    """Request hook: give the request the bound of the HubClient call it belongs to, or refuse it past the deadline."""
    bound = _REQUEST_BOUND.get()
    if bound is None:
        return
    seconds, deadline = bound
    if deadline is not None:
        left = deadline - time.time()
        if left <= 0:
            raise HubDeadline("the session's end has come; no more Hub requests are sent")
        seconds = min(seconds, left)
    request.extensions = {**request.extensions, "timeout": dict.fromkeys(("connect", "read", "write", "pool"), seconds)}


def _install_bound_hook() -> None:
    session = get_session()  # huggingface_hub's shared client; it may have been recreated since the last call
    hooks = session.event_hooks
    if _bound_request not in hooks["request"]:
        session.event_hooks = {**hooks, "request": [*hooks["request"], _bound_request]}


@dataclasses.dataclass(frozen=True)
class RepoHead:
    """Where ``main`` is and when it got there, with the Hub's time now: all three by the Hub's clock."""

    sha: str
    committed: float | None
    now: float | None

    @property
    def age(self) -> float | None:
        """Seconds since the newest commit, by the Hub's clock alone (``None`` if the Hub did not say)."""
        return None if self.committed is None or self.now is None else max(0.0, self.now - self.committed)


class HubClient:
    """One model repo on one Hub endpoint, with the token kept inside."""

    def __init__(self, repo_id: str, *, endpoint: str | None, token: str | bool, timeout: float):
        self.repo_id = repo_id
        #: seconds any one HTTP request may take.
        self.timeout = timeout
        #: ``time.time()`` after which no request is sent (the session's end); ``None``: no end.
        self.deadline: float | None = None
        self._token = token if isinstance(token, str) else None
        self._token_arg = token
        self.api = HfApi(endpoint=endpoint, token=token, library_name="fintts")
        self.endpoint = self.api.endpoint

    @classmethod
    def connect(
        cls, repo_id: str, *, endpoint: str | None = None, token: str | None = None, timeout: float = 60.0,
        anonymous_ok: bool = False,
    ) -> HubClient:
        """A client for ``repo_id`` with the token from :func:`find_token`; ``anonymous_ok`` allows none (public repos)."""
        try:
            resolved: str | bool = find_token(token)
        except HubAuthError:
            if not anonymous_ok:
                raise
            resolved = False  # a private repo then fails with a clear message
        return cls(repo_id, endpoint=endpoint, token=resolved, timeout=timeout)

    @property
    def url(self) -> str:
        return f"hf://{self.repo_id}"

    def failure(self, err: BaseException) -> HubError:
        """``err`` as a token-free :class:`HubError`."""
        return classify(err, token=self._token, endpoint=self.endpoint, repo_id=self.repo_id)

    def retrying(self, what: str, call: Callable[[], _T], *, attempts: int, backoff: Backoff,
                 on_retry: Callable[[str], None] | None = None) -> _T:
        """Run ``call`` on the caller's thread, retrying transient failures up to ``attempts`` times.

        A wait that would end past the client's ``deadline`` is not started: the failure is raised then.
        Each wait is said first (``on_retry``, by default fintts's log): retries that add up to most of a
        minute offline must not look like a hung command.
        """
        for attempt in range(1, attempts + 1):
            try:
                return call()
            except StoreError as err:
                if not isinstance(err, HubError):
                    raise  # our own verdict (e.g. a lease held by another session), not the Hub's
                failure = err
            except Exception as err:
                failure = self.failure(err)
            delay = backoff.delay(attempt, failure.retry_after)
            out_of_time = self.deadline is not None and time.time() + delay >= self.deadline
            if not failure.transient or attempt == attempts or out_of_time:
                advice = UNREACHABLE_ADVICE if isinstance(failure, HubUnavailable) else ""
                late = " (no time left in this session to retry)" if out_of_time and failure.transient else ""
                raise failure.prefixed(f"could not {what}{late}", advice) from None
            (on_retry or log.info)(f"could not {what} ({failure}); retrying in {delay:.0f} s (try {attempt + 1} of {attempts})")
            time.sleep(delay)
        raise AssertionError("unreachable")

    def _bounded(self, call: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """``call(*args, **kwargs)`` with each of its HTTP requests bounded (see the module's docstring)."""
        _install_bound_hook()
        token = _REQUEST_BOUND.set((self.timeout, self.deadline))
        try:
            return call(*args, **kwargs)
        finally:
            _REQUEST_BOUND.reset(token)

    # -- the calls ----------------------------------------------------------------------

    def ensure_repo(self, private: bool) -> None:
        """Create the repo (``private``) unless it exists; a token that may not create it is told what to do.

        ``create_repo(exist_ok=True)`` answers a 401/403 by looking the repo up and re-raising the
        refusal when it is not there (``hf_api.py``, 2.4): a fine-grained token scoped to one repo may
        write to it but not create it, and no token may create a repo in someone else's namespace.
        """
        try:
            self._bounded(self.api.create_repo, self.repo_id, private=private, exist_ok=True)
        except HfHubHTTPError as err:
            # 401 is the Hub's answer to a token it does not know (classify says "rejected the token"); 403 to a
            # valid token without the right: "You don't have the rights to create a model under the namespace …"
            if err.response is None or err.response.status_code != 403 or not self._token:
                raise
            namespace = self.repo_id.split("/")[0]
            raise HubAuthError(
                f"the token may not create {self.repo_id} ({err.response.status_code}): create the repo first (private, at "
                f"https://huggingface.co/new under {namespace}), or use a token that may create repos in {namespace} "
                "(a write token, or a fine-grained one with that permission)"
            ) from None

    def account_storage(self) -> int | None:
        """Bytes the private model and dataset repos of this repo's namespace use, as far as the token may see them.

        An account's private repos share one quota (see :mod:`.plan`); the Hub has no call for the
        quota's use, so this sums the repos' ``usedStorage``. Spaces are not counted.
        """
        namespace = self.repo_id.split("/")[0]
        total = 0
        for lister in (self.api.list_models, self.api.list_datasets):
            repos = self._bounded(lambda lister=lister: list(lister(author=namespace, expand=["usedStorage", "private"])))
            total += sum(int(getattr(r, "used_storage", 0) or 0) for r in repos if getattr(r, "private", False))
        return total

    def account_plan(self) -> Plan:
        """The plan of this repo's namespace, as ``whoami`` says it (see :mod:`.plan`). One request, not retried:
        ``/api/whoami-v2`` is "heavily rate-limited" (huggingface_hub 2.4 ``HfApi.whoami``'s docstring)."""
        return plan_of(self._bounded(self.api.whoami), self.repo_id.split("/")[0])

    def head(self) -> str:
        """The commit ``main`` points at. One request without client-side retries: fails fast when the Hub is down."""
        return self.head_state().sha

    def head_state(self) -> RepoHead:
        """``main``'s commit, its time and the Hub's time now (the ``Date`` of the same answer), in one request."""
        response = self._bounded(
            get_session().get,
            f"{self.endpoint}/api/models/{self.repo_id}/revision/main",
            headers=build_hf_headers(token=self._token_arg, library_name="fintts"),
        )
        hf_raise_for_status(response)
        info = response.json()
        if not info.get("sha"):
            raise HubUnavailable(f"the Hub did not say which commit {self.repo_id} is at")
        return RepoHead(info["sha"], _timestamp(info.get("lastModified")), _http_date(response.headers.get("Date")))

    def card_problem(self, content: str) -> str | None:
        """What the Hub finds wrong with a card's metadata (``None``: it accepts it), from its own validator.

        The Hub validates ``README.md``'s metadata on every commit that carries it and refuses the
        whole commit when a field does not pass; ``/api/validate-yaml`` is the same check without a
        commit (``huggingface_hub`` 2.4 ``repocard.RepoCard.validate``: 400 and the reasons as text).
        ``create_commit`` asks it too before each commit carrying ``README.md`` (``HfApi._validate_yaml``,
        raising ``ValueError("Invalid metadata in README.md …")``); ``RepoCard.validate`` posts to
        ``constants.ENDPOINT``, not this client's endpoint, hence the request here.
        """
        response = self._bounded(
            get_session().post, f"{self.endpoint}/api/validate-yaml", json={"repoType": "model", "content": content},
            headers=build_hf_headers(token=self._token_arg, library_name="fintts"),
        )
        if response.status_code == 400:  # {"errors": [{"message": …}], "warnings": […]}, as HfApi._validate_yaml reads it
            try:
                errors = [str(e.get("message")) for e in response.json().get("errors", []) if isinstance(e, dict)]
            except (ValueError, AttributeError):
                errors = [response.text.strip()]
            return "; ".join(e for e in errors if e) or "the Hub refused the card's metadata"
        hf_raise_for_status(response)
        return None

    def used_storage(self) -> int | None:
        return getattr(self._bounded(self.api.model_info, self.repo_id), "used_storage", None)

    def is_private(self) -> bool:
        return bool(getattr(self._bounded(self.api.model_info, self.repo_id), "private", False))

    def token_role(self) -> str | None:
        """What the token may do, as the Hub says (``read``, ``write``, ``fineGrained``); ``None`` if it does not say."""
        who = self._bounded(self.api.whoami)
        return ((who.get("auth") or {}).get("accessToken") or {}).get("role")

    def files(self, revision: str) -> dict[str, Any]:
        """Every file at ``revision`` (path → ``RepoFile``); a path that could leave a folder is an error."""
        entries = self._bounded(lambda: list(self.api.list_repo_tree(self.repo_id, recursive=True, revision=revision)))
        return {ckpt.safe_relative_path(e.path, what="Hub path"): e for e in entries if hasattr(e, "size")}

    def read(self, path: str, revision: str) -> bytes | None:
        """A small file's content at ``revision``; ``None`` if it does not exist there."""
        with tempfile.TemporaryDirectory(prefix="fintts-hub-") as tmp:
            try:
                local = self._bounded(self.api.hf_hub_download, self.repo_id, path, revision=revision, local_dir=tmp)
            except RemoteEntryNotFoundError:
                return None
            return Path(local).read_bytes()

    def download(self, paths: Iterable[str], revision: str, dest: Path) -> None:
        """Fetch ``paths`` at ``revision`` into ``dest`` (same relative layout), each file appearing whole."""
        paths = [ckpt.safe_relative_path(p, what="Hub path") for p in paths]
        dest.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".download-", dir=dest))
        try:
            for path in paths:
                self._bounded(self.api.hf_hub_download, self.repo_id, path, revision=revision, local_dir=staging)
            for path in paths:
                (dest / path).parent.mkdir(parents=True, exist_ok=True)
                os.replace(staging / path, dest / path)
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def upload(self, operations: list[Any], seconds: float) -> None:
        """Upload the large files (LFS or xet) among ``operations`` ahead of their commit, within ``seconds`` overall.

        Runs on a daemon thread that is left behind when the time is up (its next request is
        then refused): the caller gets :class:`HubUnavailable` and retries later, the commit
        is not made, and nothing on the Hub changed but unreferenced storage.
        """
        end = time.time() + max(0.0, seconds)
        end = end if self.deadline is None else min(end, self.deadline)
        additions = [op for op in operations if isinstance(op, CommitOperationAdd)]
        outcome: list[BaseException | None] = []

        def send() -> None:
            _install_bound_hook()
            _REQUEST_BOUND.set((self.timeout, end))  # this thread's own context: its requests stop at the end too
            try:
                self.api.preupload_lfs_files(self.repo_id, additions=additions, num_threads=2)
                outcome.append(None)
            except BaseException as err:  # handed to the caller's thread
                outcome.append(err)

        worker = threading.Thread(target=send, name=f"hub-upload-{self.repo_id}", daemon=True)
        worker.start()
        worker.join(max(0.0, end - time.time()))
        if not outcome:
            raise HubUnavailable(
                f"the upload of {len(additions)} file(s) did not finish within {seconds:.0f} s (its overall deadline"
                f"{', the session end' if self.deadline is not None and end == self.deadline else ''}); it is tried again"
            )
        if outcome[0] is not None:
            raise outcome[0]

    def commit(self, operations: list[Any], message: str, parent: str) -> Any:
        return self._bounded(
            self.api.create_commit, self.repo_id, operations, commit_message=message, parent_commit=parent, num_threads=2
        )

    def unreferenced(self, revision: str) -> list[Any]:
        """The repo's LFS objects under our prefixes that ``revision`` does not use (``LFSFileInfo``, for :meth:`delete_lfs`).

        ``list_lfs_files`` lists "all LFS files in a repo" (its docstring, ``hf_api.py``, 2.4), whichever commit
        brought them: a file another writer committed after ``revision`` is among them too, so what ``revision`` alone
        decides is only safe to delete while nobody else writes the run (:meth:`~.lease.LeaseHolder.free_unreferenced`).
        """
        referenced = {f.lfs.sha256 for f in self.files(revision).values() if getattr(f, "lfs", None)}
        return [
            item
            for item in self._bounded(lambda: list(self.api.list_lfs_files(self.repo_id)))
            if item.file_oid not in referenced and item.filename.startswith(MANAGED_PREFIXES)
        ]

    def delete_lfs(self, doomed: list[Any]) -> int:
        """Permanently delete the LFS objects ``doomed``, rewriting the history that references them; return bytes freed.

        ``permanently_delete_lfs_files(rewrite_history=True)`` (``hf_api.py``, 2.4) is one POST to
        ``lfs-files/batch`` per 1000 objects, sent on the shared HTTP client without a timeout of its own: the Hub
        rewrites the history before it answers, which may take long, so the request is bounded like every other.
        """
        self._bounded(self.api.permanently_delete_lfs_files, self.repo_id, doomed, rewrite_history=True)
        return sum(item.size for item in doomed)


def _timestamp(iso: Any) -> float | None:
    try:
        return datetime.fromisoformat(str(iso).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _http_date(value: str | None) -> float | None:
    try:
        return parsedate_to_datetime(value).timestamp() if value else None
    except (TypeError, ValueError):
        return None


def checkpoint_names(paths: Iterable[str]) -> set[str]:
    """The checkpoint folders among a repo's file paths."""
    names = set()
    for path in paths:
        parts = path.split("/")
        if len(parts) >= 3 and parts[0] == ckpt.CHECKPOINTS:
            try:
                ckpt.step_of(parts[1])
            except ckpt.CheckpointError:
                continue
            names.add(parts[1])
    return names


def json_object(data: bytes | None) -> dict[str, Any] | None:
    """A small JSON file read from the Hub, or ``None`` when it is absent or not a JSON object."""
    try:
        value = json.loads(data) if data else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
