"""The few Hub calls fintts makes, on one ``HfApi`` holding the token, and how they are retried.

Everything that reaches the Hub — the store during training, ``fintts push``, ``fintts pull``,
``fintts status`` — goes through a :class:`HubClient` made by :meth:`HubClient.connect`, so
the endpoint, the token and the error messages are the same whichever command a person ran.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterable, TypeVar

from huggingface_hub import HfApi
from huggingface_hub.errors import RemoteEntryNotFoundError

from fintts.train import checkpoint as ckpt
from fintts.train.card import LOSS_PLOT
from fintts.train.stores.base import MODEL_DIR, StoreError
from fintts.train.stores.hub.auth import find_token
from fintts.train.stores.hub.errors import HubAuthError, HubError, HubUnavailable, classify

#: LFS objects are only ever freed under these prefixes; anything else in the repo is the person's.
MANAGED_PREFIXES = (ckpt.CHECKPOINTS + "/", MODEL_DIR + "/", "samples/", "tb/", LOSS_PLOT)
#: Why a session refuses to start without the Hub, and what to do instead.
UNREACHABLE_ADVICE = (
    ". The run's newest checkpoint and its writer's lease live on the Hub, so a session cannot safely start"
    " without it (it would fork the run). Check the network (on Kaggle: Settings > Internet on) and HF_ENDPOINT,"
    " then run again; or train with --store PATH alone and `fintts push --store PATH --hub-repo USER/NAME` later."
)
_T = TypeVar("_T")


@dataclasses.dataclass(frozen=True)
class Backoff:
    """Waits between retries: ``base * 2**n`` capped at ``cap``, times a jitter in ``[1 - jitter, 1]``.

    ``Retry-After`` from the Hub wins when longer, up to ``retry_after_cap``.
    """

    base: float = 5.0
    cap: float = 300.0
    jitter: float = 0.5
    retry_after_cap: float = 900.0

    def delay(self, failures: int, retry_after: float | None = None) -> float:
        wait = min(self.cap, self.base * 2 ** max(failures - 1, 0)) * random.uniform(1 - self.jitter, 1)
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.retry_after_cap))
        return wait


class HubClient:
    """One model repo on one Hub endpoint, with the token kept inside."""

    def __init__(self, repo_id: str, *, endpoint: str | None, token: str | bool, timeout: float):
        self.repo_id = repo_id
        self.timeout = timeout
        self._token = token if isinstance(token, str) else None
        self.api = HfApi(endpoint=endpoint, token=token, library_name="fintts")
        self.endpoint = self.api.endpoint

    @classmethod
    def connect(
        cls, repo_id: str, *, endpoint: str | None = None, token: str | None = None, timeout: float = 60.0,
        anonymous_ok: bool = False,
    ) -> "HubClient":
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

    def retrying(self, what: str, call: Callable[[], _T], *, attempts: int, backoff: Backoff) -> _T:
        """Run ``call`` on the caller's thread, retrying transient failures up to ``attempts`` times."""
        for attempt in range(1, attempts + 1):
            try:
                return call()
            except StoreError as err:
                if not isinstance(err, HubError):
                    raise  # our own verdict (e.g. a lease held by another session), not the Hub's
                failure = err
            except Exception as err:
                failure = self.failure(err)
            if not failure.transient or attempt == attempts:
                advice = UNREACHABLE_ADVICE if isinstance(failure, HubUnavailable) else ""
                raise failure.prefixed(f"could not {what}", advice) from None
            time.sleep(backoff.delay(attempt, failure.retry_after))
        raise AssertionError("unreachable")

    # -- the calls ----------------------------------------------------------------------

    def ensure_repo(self, private: bool) -> None:
        self.api.create_repo(self.repo_id, private=private, exist_ok=True)

    def head(self) -> str:
        """The commit ``main`` points at. One request without client-side retries: fails fast when the Hub is down."""
        sha = self.api.model_info(self.repo_id, timeout=self.timeout).sha
        if not sha:
            raise HubUnavailable(f"the Hub did not say which commit {self.repo_id} is at")
        return sha

    def used_storage(self) -> int | None:
        return getattr(self.api.model_info(self.repo_id, timeout=self.timeout), "used_storage", None)

    def files(self, revision: str) -> dict[str, Any]:
        """Every file at ``revision`` (path → ``RepoFile``)."""
        return {
            entry.path: entry
            for entry in self.api.list_repo_tree(self.repo_id, recursive=True, revision=revision)
            if hasattr(entry, "size")
        }

    def read(self, path: str, revision: str) -> bytes | None:
        """A small file's content at ``revision``; ``None`` if it does not exist there."""
        with tempfile.TemporaryDirectory(prefix="fintts-hub-") as tmp:
            try:
                local = self.api.hf_hub_download(self.repo_id, path, revision=revision, local_dir=tmp)
            except RemoteEntryNotFoundError:
                return None
            return Path(local).read_bytes()

    def download(self, paths: Iterable[str], revision: str, dest: Path) -> None:
        """Fetch ``paths`` at ``revision`` into ``dest`` (same relative layout), each file appearing whole."""
        paths = list(paths)
        dest.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".download-", dir=dest))
        try:
            for path in paths:
                self.api.hf_hub_download(self.repo_id, path, revision=revision, local_dir=staging)
            for path in paths:
                (dest / path).parent.mkdir(parents=True, exist_ok=True)
                os.replace(staging / path, dest / path)
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def commit(self, operations: list[Any], message: str, parent: str) -> Any:
        return self.api.create_commit(self.repo_id, operations, commit_message=message, parent_commit=parent, num_threads=2)

    def free_unreferenced(self, revision: str) -> int:
        """Permanently delete LFS objects under our prefixes that ``revision`` no longer uses; return bytes freed."""
        referenced = {f.lfs.sha256 for f in self.files(revision).values() if getattr(f, "lfs", None)}
        doomed = [
            item
            for item in self.api.list_lfs_files(self.repo_id)
            if item.file_oid not in referenced and item.filename.startswith(MANAGED_PREFIXES)
        ]
        if doomed:
            self.api.permanently_delete_lfs_files(self.repo_id, doomed, rewrite_history=True)
        return sum(item.size for item in doomed)


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
