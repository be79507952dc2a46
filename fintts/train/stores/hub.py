"""The Hugging Face Hub store (``--store hf://user/name``): a run that outlives every Kaggle session.

The trainer writes checkpoints into a local mirror (``root``) exactly as with a folder
store; this store makes them durable in a Hub model repo that has the same layout, so a
later session on an empty disk resumes from it and a laptop pulls the voice from it.

**One commit per pushed checkpoint.** A single background thread per store pushes; every
push is one atomic Hub commit with the checkpoint's files, the new ``latest``,
``status.json``, the generated model card ``README.md``, ``model/``, ``samples/``,
``loss.png`` and ``tb/`` (when present), the lease heartbeat, ``pushes.json`` and the
deletion of checkpoints pruned since the last push. The Hub therefore never shows a
``latest`` naming a half-uploaded checkpoint: a commit lands whole or not at all.
Commits name their parent (``parent_commit``), so a concurrent writer makes ours fail
instead of interleaving.

**Schedule.** :meth:`HubStore.publish` returns at once. A *full* push is due for the first
checkpoint of the session, then at most every ``push_every`` seconds, and always for
``final=True``; publishes in between are skipped (the trainer keeps them locally, and the
next due push takes the state of that moment). Between full pushes a small *heartbeat*
commit (lease, ``status.json``, card) is made when nothing was committed for
``lease_timeout / 3`` seconds, so the Hub page stays current and the lease fresh.

**Catch-up, newest first.** While a due push fails (Hub down, 5xx, 429), the worker retries
with capped exponential backoff plus jitter, honouring ``Retry-After``; training goes on.
Each retry pushes the newest due checkpoint, so after an outage one commit catches up and
the checkpoints in between are skipped, except those :meth:`HubStore.prune` was told to
protect (the best one), which ride along in the same commit.

**Local copies.** :meth:`HubStore.prune` never deletes the checkpoint being uploaded nor
the newest one waiting to be; any other checkpoint it removes is either on the Hub or
superseded by a newer one that will be pushed instead.

**Bounded storage.** Pruned checkpoints are deleted on the Hub in the next full push, and
LFS objects no longer referenced at the head are then freed for good
(``permanently_delete_lfs_files``, which rewrites history) so deleted checkpoints stop
counting towards the repo's storage. :meth:`HubStore.describe` reports the repo size and a
warning is logged when the next push would cross ``storage_cap_gb``.

**Lease.** ``lease.json`` in the repo names the session that writes the run, its host and
its last heartbeat. :meth:`HubStore.acquire` refuses (:class:`LeaseConflict`) while another
session's lease is fresh, takes over one without a heartbeat for its timeout, and
``force=True`` takes it regardless. A session whose lease was taken stops pushing and says
so in :meth:`HubStore.pending`.

The local folder ``root/.hub/`` is this store's own (snapshots waiting for upload,
downloads in progress); nothing in it is pushed.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import random
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable, TypeVar

from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi
from huggingface_hub.errors import (
    HfHubHTTPError,
    LocalEntryNotFoundError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
)

from fintts.train import checkpoint as ckpt
from fintts.train.stores import model_card
from fintts.train.stores.base import MODEL_DIR, STATUS, LeaseConflict, Store, StoreError
from fintts.train.stores.hub_auth import HubAuthError, find_token, scrub

log = logging.getLogger(__name__)

LEASE = "lease.json"
PUSHES = "pushes.json"
CARD = "README.md"
LOCAL_DIR = ".hub"
#: Pushed with every full push. ``model/`` is mirrored (files gone locally are deleted on
#: the Hub); ``samples/`` and ``tb/`` only gain files, because a session on a fresh disk
#: has only its own and must not delete the earlier sessions'.
MIRRORED_DIRS = (MODEL_DIR,)
ADDED_DIRS = ("samples", "tb")
EXTRA_FILES = ("loss.png", STATUS)
#: LFS objects are only ever freed under these prefixes; anything else in the repo is the person's.
MANAGED_PREFIXES = (ckpt.CHECKPOINTS + "/", MODEL_DIR + "/", "samples/", "tb/", "loss.png")
RECENT_PUSHES = 10
#: How long release() waits for an upload still holding the repo before leaving the lease to expire.
RELEASE_WAIT = 30.0
_RETRY_STATUSES = {408, 429, 500, 502, 503, 504}
_NETWORK_MODULES = {"httpx", "httpx2", "httpcore", "requests", "urllib3"}
_T = TypeVar("_T")


class HubRepoError(StoreError):
    """The repo does not exist (or the token cannot see it), or the Hub refused the request."""


class HubUnavailable(StoreError):
    """The Hub could not be reached after retrying; local checkpoints are untouched."""


class _Failure(Exception):
    """A classified, token-free account of why a Hub operation failed."""

    _ERRORS: dict[str, type[StoreError]] = {
        "auth": HubAuthError, "repo": HubRepoError, "lease": LeaseConflict, "unreachable": HubUnavailable,
    }

    def __init__(self, message: str, kind: str, retry_after: float | None = None):
        super().__init__(message)
        self.message, self.kind, self.retry_after = message, kind, retry_after

    @property
    def transient(self) -> bool:
        """Worth retrying: the network, an overloaded Hub, a moved branch or a local file race."""
        return self.kind in ("unreachable", "moved", "local")

    def error(self) -> StoreError:
        return self._ERRORS.get(self.kind, StoreError)(self.message)


#: Why a session refuses to start without the Hub, and what to do instead.
UNREACHABLE_ADVICE = (
    ". The run's newest checkpoint and its writer's lease live on the Hub, so a session cannot safely start"
    " without it (it would fork the run). Check the network (on Kaggle: Settings > Internet on) and HF_ENDPOINT,"
    " then run again; or train with --store PATH alone and `fintts push --store PATH --hub-repo USER/NAME` later."
)


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


@dataclasses.dataclass
class _Target:
    """A checkpoint due for a full push, with the mutable files as they were when it was published."""

    name: str
    snapshot: Path
    final: bool


class _Remote:
    """The few Hub calls the store makes, on one ``HfApi`` holding the token."""

    def __init__(self, repo_id: str, endpoint: str | None, token: str | bool, timeout: float):
        self.repo_id = repo_id
        self.timeout = timeout
        self.api = HfApi(endpoint=endpoint, token=token, library_name="fintts")
        self.endpoint = self.api.endpoint

    def ensure_repo(self, private: bool) -> None:
        self.api.create_repo(self.repo_id, private=private, exist_ok=True)

    def head(self) -> str:
        """The commit ``main`` points at. One request without client-side retries: fails fast when the Hub is down."""
        sha = self.api.model_info(self.repo_id, timeout=self.timeout).sha
        if not sha:
            raise _Failure(f"the Hub did not say which commit {self.repo_id} is at", "unreachable")
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
        return self.api.create_commit(
            self.repo_id, operations, commit_message=message, parent_commit=parent, num_threads=2
        )

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


class HubStore(Store):
    """A run kept in the Hub model repo ``repo_id`` (``user/name``), mirrored in ``root``.

    ``root``: the local mirror the trainer writes to (default ``./runs/<name>``).
    ``endpoint``: the Hub (default ``$HF_ENDPOINT`` or huggingface.co). ``token``: see
    :func:`~fintts.train.stores.hub_auth.find_token`. ``private``: visibility of a repo this
    store creates. ``push_every``: seconds between full pushes (``0``: every publish).
    ``lease_timeout``: seconds without a heartbeat after which a lease may be taken over.
    ``storage_cap_gb``: warn before the repo outgrows this. ``host``: how the lease names
    this machine (e.g. ``"kaggle 2xT4"``; default the hostname). ``backoff``: retry waits.
    ``sync_attempts``: tries of the calls that block the caller (acquire, resume, release).
    ``request_timeout``: seconds for the probing requests.
    """

    def __init__(
        self,
        repo_id: str,
        *,
        root: str | Path | None = None,
        endpoint: str | None = None,
        token: str | None = None,
        private: bool = True,
        push_every: float = 3600.0,
        lease_timeout: float = 900.0,
        storage_cap_gb: float | None = None,
        host: str | None = None,
        backoff: Backoff = Backoff(),
        sync_attempts: int = 5,
        request_timeout: float = 60.0,
    ):
        parts = repo_id.split("/")
        if len(parts) != 2 or not all(parts):
            raise StoreError(f"hf://{repo_id}: a Hub store is named hf://USER/NAME (e.g. hf://alice/finnish-voice)")
        if push_every < 0 or lease_timeout <= 0:
            raise StoreError("push_every must be >= 0 and lease_timeout > 0 seconds")
        self.repo_id = repo_id
        self.root = Path(root if root is not None else Path("runs") / parts[1]).expanduser().resolve()
        self.private = private
        self.push_every = push_every
        self.lease_timeout = lease_timeout
        self.storage_cap_gb = storage_cap_gb
        self.host = host or _default_host()
        self.backoff = backoff
        self.sync_attempts = max(1, sync_attempts)
        self._token = find_token(token)
        self._remote = _Remote(repo_id, endpoint, self._token, request_timeout)
        self._cond = threading.Condition()
        self._commit_lock = threading.Lock()
        self._worker: threading.Thread | None = None
        self._stopping = False
        self._session: str | None = None
        self._acquired: str | None = None
        self._lease_held = False
        self._head: str | None = None  # the last head this store committed or verified its lease at
        self._target: _Target | None = None
        self._inflight: _Target | None = None
        self._retry_at = 0.0
        self._fatal: str | None = None
        self._last_error: str | None = None
        self._published: str | None = None
        self._last_full_request: float | None = None
        self._last_commit = time.monotonic()
        self._on_hub: set[str] = set()
        self._keep_last: int | None = None
        self._repo_ready = False
        self._protect: set[str] = set()
        self._snapshots = 0
        self._used_storage: int | None = None
        self._last_commit_url: str | None = None
        self._pushes: list[dict[str, Any]] = _read_json(self.root / PUSHES, [])
        self._hub_latest: str | None = None

    @property
    def url(self) -> str:
        return f"hf://{self.repo_id}"

    # -- lease ----------------------------------------------------------------------------

    def acquire(self, session_id: str, *, force: bool = False) -> None:
        """Create the repo if needed and write this session's lease, or raise :class:`LeaseConflict`."""
        self._sync("create the Hub repo", lambda: self._remote.ensure_repo(self.private))
        self._repo_ready = True
        outbox = self.root / LOCAL_DIR / "outbox"
        for leftover in outbox.iterdir() if outbox.is_dir() else ():  # snapshots of a previous writer process
            if not leftover.name.startswith(f"{os.getpid()}-"):
                shutil.rmtree(leftover, ignore_errors=True)

        def take() -> Any:
            head = self._remote.head()
            holder = _parse_json(self._remote.read(LEASE, head)) or {}
            if holder.get("session") not in (None, session_id):
                age = time.time() - float(holder.get("heartbeat_unix", 0))
                if age < float(holder.get("timeout", self.lease_timeout)) and not force:
                    raise LeaseConflict(self._conflict_message(holder, age))
                log.warning(
                    "%s: taking over the lease of session %s on %s (last heartbeat %s ago%s)",
                    self.url, holder.get("session"), holder.get("host"), _duration(age), ", forced" if force else "",
                )
            self._session = session_id
            self._acquired = holder.get("acquired") if holder.get("session") == session_id else None
            self._acquired = self._acquired or _iso(time.time())
            lease = CommitOperationAdd(LEASE, self._lease_bytes())
            return self._remote.commit([lease], f"lease: session {session_id} on {self.host}", parent=head)

        with self._commit_lock:
            info = self._sync("take the lease", take)
            self._head = info.oid
        with self._cond:
            self._lease_held, self._last_commit = True, time.monotonic()
            self._ensure_worker()

    def release(self) -> None:
        """Delete the lease and push the final ``status.json`` and card (a small commit)."""
        with self._cond:
            if not self._lease_held:
                return
            self._lease_held = False  # no more heartbeats
        if not self._commit_lock.acquire(timeout=RELEASE_WAIT):
            log.warning(
                "%s: an upload is still running; the lease stays and expires in %s", self.url, _duration(self.lease_timeout)
            )
            return
        try:
            def commit() -> None:
                head = self._check_lease(self._remote.head())
                operations = [CommitOperationDelete(LEASE)] + self._small_files()
                info = self._remote.commit(operations, f"release: session {self._session} ended", parent=head)
                self._head = info.oid

            self._sync("release the lease", commit)
        except StoreError as err:
            log.warning("%s: could not release the lease (%s); it expires in %s", self.url, err, _duration(self.lease_timeout))
        finally:
            self._commit_lock.release()

    def _conflict_message(self, holder: dict[str, Any], age: float) -> str:
        timeout = float(holder.get("timeout", self.lease_timeout))
        return (
            f"{self.url} is being trained by session {holder.get('session')} on {holder.get('host')} "
            f"since {holder.get('acquired')} (last heartbeat {_duration(age)} ago). If that session is still "
            f"running, let it finish or stop it. If it died, its lease expires in {_duration(timeout - age)}, "
            "or take over now with --force."
        )

    def _lease_bytes(self) -> bytes:
        now = time.time()
        lease = {
            "session": self._session,
            "host": self.host,
            "pid": os.getpid(),
            "acquired": self._acquired,
            "heartbeat": _iso(now),
            "heartbeat_unix": now,
            "timeout": self.lease_timeout,
        }
        return json.dumps(lease, indent=1).encode()

    def _check_lease(self, head: str) -> str:
        """``head``, after making sure the lease is still ours if the branch moved since we last looked."""
        if self._session is None or head == self._head:
            return head
        holder = _parse_json(self._remote.read(LEASE, head)) or {}
        if holder.get("session") != self._session:
            raise _Failure(
                f"session {holder.get('session') or '(none)'} on {holder.get('host') or '?'} took over {self.url}; "
                "this session stopped pushing",
                "lease",
            )
        self._head = head
        return head

    # -- resume ---------------------------------------------------------------------------

    def resume_point(self, log: Callable[[str], None] = print) -> Path | None:
        """The newest complete checkpoint, downloading it from the Hub when the Hub's is newer than the local one.

        Downloads only ``latest``'s folder (falling back to older checkpoints on the Hub
        when one fails its manifest), ``status.json`` and ``pushes.json``.
        """
        local = ckpt.latest_complete(self.root, log)
        try:
            head = self._sync("look up the run on the Hub", self._remote.head)
        except HubRepoError:
            return local  # no repo yet: a new run (acquire creates it)
        except HubUnavailable as err:
            if local is None:
                raise HubUnavailable(f"{err}. Nothing to resume from locally either; retry when the Hub is reachable.") from None
            log(f"warning: {err}; resuming from the local {local.name}, which may be older than the Hub's")
            return local
        files = self._sync("list the run on the Hub", lambda: self._remote.files(head))
        names = _checkpoint_names(files)
        with self._cond:
            self._on_hub = set(names)
        pointed = (self._sync("read latest", lambda: self._remote.read(ckpt.LATEST, head)) or b"").decode().strip()
        self._hub_latest = pointed or None
        candidates = sorted(names, key=ckpt.step_of, reverse=True)
        if pointed in candidates:
            candidates.remove(pointed)
            candidates.insert(0, pointed)
        if local is not None and (not candidates or ckpt.step_of(local.name) >= ckpt.step_of(candidates[0])):
            return local
        for name in candidates:
            if local is not None and ckpt.step_of(name) <= ckpt.step_of(local.name):
                break
            folder = self._fetch_checkpoint(name, head, files, log)
            if folder is not None:
                for extra in (STATUS, PUSHES):
                    if extra in files:
                        self._sync(f"download {extra}", lambda extra=extra: self._remote.download([extra], head, self.root))
                self._pushes = _read_json(self.root / PUSHES, [])
                return folder
        if local is None and candidates:
            raise StoreError(
                f"{self.url} has checkpoints ({', '.join(candidates)}) but none matches its manifest. "
                "Inspect the repo, or start a new run in another repo."
            )
        return local

    def _fetch_checkpoint(self, name: str, head: str, files: dict[str, Any], log: Callable[[str], None]) -> Path | None:
        prefix = f"{ckpt.CHECKPOINTS}/{name}/"
        incoming = self.root / LOCAL_DIR / "incoming"
        shutil.rmtree(incoming, ignore_errors=True)
        log(f"downloading {name} from {self.url}")
        self._sync(f"download {name}", lambda: self._remote.download([p for p in files if p.startswith(prefix)], head, incoming))
        fetched = incoming / ckpt.CHECKPOINTS / name
        try:
            ckpt.verify(fetched)
        except ckpt.CheckpointError as err:
            log(f"warning: {name} on {self.url} is unusable ({err}); trying an older checkpoint")
            shutil.rmtree(incoming, ignore_errors=True)
            return None
        final = self.root / ckpt.CHECKPOINTS / name
        final.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(final, ignore_errors=True)
        os.replace(fetched, final)
        shutil.rmtree(incoming, ignore_errors=True)
        ckpt.write_atomic(self.root / ckpt.LATEST, (name + "\n").encode())
        return final

    # -- publishing -------------------------------------------------------------------

    def publish(self, name: str, *, final: bool = False) -> None:
        """Queue checkpoint ``name`` for a full push if one is due (see the module doc); never blocks on the network."""
        folder = self.root / ckpt.CHECKPOINTS / name
        if not (folder / ckpt.MANIFEST).is_file():
            raise StoreError(f"publish({name!r}): {folder} is not a complete checkpoint (save it with checkpoint.save first)")
        now = time.monotonic()
        with self._cond:
            self._published = name
            due = (
                final
                or self._target is not None
                or self._last_full_request is None
                or now - self._last_full_request >= self.push_every
            )
            if not due:
                return
            previous = self._target
            self._target = _Target(name, self._snapshot(), final or bool(previous and previous.final))
            self._last_full_request = now
            if previous is not None and previous is not self._inflight:
                shutil.rmtree(previous.snapshot, ignore_errors=True)
            self._ensure_worker()
            self._cond.notify_all()

    def _snapshot(self) -> Path:
        """Copy the files the trainer rewrites (``model/`` by hard link) so a push sends one consistent state."""
        self._snapshots += 1
        dest = self.root / LOCAL_DIR / "outbox" / f"{os.getpid()}-{self._snapshots:06d}"
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        for rel in _extra_files(self.root):
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                if rel.startswith(MODEL_DIR + "/"):
                    os.link(self.root / rel, target)
                else:
                    shutil.copyfile(self.root / rel, target)
            except OSError:
                shutil.copyfile(self.root / rel, target)
        return dest

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every due push is on the Hub; ``False`` on timeout or when pushing stopped for good."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while (self._target is not None or self._inflight is not None) and self._fatal is None:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return self._fatal is None

    def pending(self) -> str | None:
        """A loud message when the newest published checkpoint is not on the Hub, naming where it is and how to push it."""
        with self._cond:
            newest = self._published
            if newest is None or newest in self._on_hub:
                return None
            reason = self._fatal or self._last_error or "its upload had not finished"
        bar = "!" * 78
        return "\n".join(
            [
                bar,
                f"!!! Checkpoint {newest} is NOT on the Hub ({self.url}): {reason}.",
                f"!!! It is safe on this machine in {self.root / ckpt.CHECKPOINTS / newest}",
                "!!! Push it before this machine goes away (e.g. from a Kaggle notebook cell):",
                f"!!!     fintts push --store {self.root} --hub-repo {self.repo_id}",
                bar,
            ]
        )

    def prune(self, keep_last: int, protect: Iterable[str] = ()) -> list[str]:
        """Delete local checkpoints beyond the newest ``keep_last`` and ``protect``; return their names.

        Keeps the checkpoint being uploaded and the one waiting to be (any other unpushed
        one is superseded by it). The same rule is applied to the Hub's checkpoints at the
        next full push: the newest ``keep_last`` there, plus ``protect``, stay.
        """
        protect = set(protect)
        with self._cond:
            self._keep_last, self._protect = keep_last, protect
            busy = {t.name for t in (self._target, self._inflight) if t is not None}
            names = ckpt.list_names(self.root)
            keep = set(names[-keep_last:] if keep_last > 0 else []) | protect | busy
            pointed = ckpt.read_latest(self.root)
            if pointed:
                keep.add(pointed)
            removed = [n for n in names if n not in keep]
            for name in removed:
                shutil.rmtree(self.root / ckpt.CHECKPOINTS / name, ignore_errors=True)
        base = self.root / ckpt.CHECKPOINTS
        for stale in base.glob(".partial-*") if base.is_dir() else ():
            shutil.rmtree(stale, ignore_errors=True)
        return removed

    def read_status(self) -> dict[str, Any] | None:
        """The writer's own ``status.json``; for anyone else (``fintts status``) the Hub's, falling back to the mirror's."""
        if not self._lease_held:
            try:
                status = _parse_json(self._remote.read(STATUS, self._remote.head()))
                if status is not None:
                    return status
            except Exception as err:  # a status display must work offline: use the local mirror
                log.warning("%s: showing the local status (%s)", self.url, self._failure(err).message)
        return super().read_status()

    def transfer_seconds(self) -> list[float]:
        """Seconds of this run's recent full pushes (kept in ``pushes.json``, so a new session starts informed)."""
        with self._cond:
            return [float(p["seconds"]) for p in self._pushes[-RECENT_PUSHES:]]

    def describe(self) -> dict[str, Any]:
        facts: dict[str, Any] = {
            "store": self.url, "repo": self.repo_id, "endpoint": self._remote.endpoint, "local": str(self.root),
        }
        try:
            self._used_storage = self._remote.used_storage()
        except Exception as err:  # describe is for a status display: report, don't fail
            facts["error"] = self._failure(err).message
        if self._used_storage is not None:
            facts["used_storage_bytes"] = self._used_storage
        if self.storage_cap_gb is not None:
            facts["storage_cap_gb"] = self.storage_cap_gb
        with self._cond:
            if self._pushes:
                facts["last_push"] = dict(self._pushes[-1])
            facts["pending"] = self._published is not None and self._published not in self._on_hub
        return facts

    def close(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            worker = self._worker
        if worker is not None:
            worker.join(timeout=5)

    # -- the worker -------------------------------------------------------------------

    def _ensure_worker(self) -> None:
        if self._worker is None or not self._worker.is_alive():
            self._stopping = False
            self._worker = threading.Thread(target=self._run, name=f"hub-push-{self.repo_id}", daemon=True)
            self._worker.start()

    def _run(self) -> None:
        failures = 0
        while True:
            with self._cond:
                job = self._next_job()
                while job is None and not self._stopping:
                    self._cond.wait(self._sleep_for())
                    job = self._next_job()
                if self._stopping:
                    return
                if isinstance(job, _Target):
                    self._inflight = job
            try:
                if isinstance(job, _Target):
                    self._push_full(job)
                else:
                    self._push_heartbeat()
            except Exception as err:
                failure = self._failure(err)
                failures += 1
                with self._cond:
                    self._last_error = failure.message
                    if failure.transient:
                        delay = self.backoff.delay(failures, failure.retry_after)
                        self._retry_at = time.monotonic() + delay
                        (log.warning if failures == 1 else log.info)(
                            "%s: push failed (%s); checkpoints stay local, retrying in %.1fs", self.url, failure.message, delay
                        )
                    else:
                        self._fatal = failure.message
                        log.error("%s: pushing stopped: %s", self.url, failure.message)
            else:
                failures = 0
                with self._cond:
                    self._last_error = None
                    self._retry_at = 0.0
            finally:
                with self._cond:
                    self._inflight = None
                    if isinstance(job, _Target) and job is not self._target:
                        shutil.rmtree(job.snapshot, ignore_errors=True)  # pushed, or replaced by a newer target
                    self._cond.notify_all()

    def _next_job(self) -> _Target | str | None:
        now = time.monotonic()
        if self._fatal is not None or now < self._retry_at:
            return None
        if self._target is not None:
            return self._target
        if self._lease_held and now - self._last_commit >= self.lease_timeout / 3:
            return "heartbeat"
        return None

    def _sleep_for(self) -> float | None:
        now = time.monotonic()
        wakes = []
        if self._retry_at > now:
            wakes.append(self._retry_at - now)
        if self._lease_held and self._fatal is None:
            wakes.append(self._last_commit + self.lease_timeout / 3 - now)
        return max(0.01, min(wakes)) if wakes else None

    def _push_full(self, target: _Target) -> None:
        if not (self.root / ckpt.CHECKPOINTS / target.name / ckpt.MANIFEST).is_file():
            # Deleted by hand after publish: pushing latest without its folder would break the run on the Hub.
            log.error("%s: %s disappeared from %s before its push; skipping it", self.url, target.name, self.root)
            with self._cond:
                if self._target is target:
                    self._target = None
            return
        started = time.monotonic()
        with self._commit_lock:
            if not self._repo_ready:
                self._remote.ensure_repo(self.private)
                self._repo_ready = True
            head = self._check_lease(self._remote.head())
            files = self._remote.files(head)
            on_hub = _checkpoint_names(files)
            operations, size, deleted, added = self._full_operations(target, files, on_hub)
            info = self._remote.commit(operations, f"{target.name}" + (" (end of session)" if target.final else ""), parent=head)
            self._head = info.oid
        seconds = time.monotonic() - started
        with self._cond:
            self._on_hub = (on_hub - deleted) | added
            self._hub_latest = target.name
            if self._target is target:
                self._target = None
            self._inflight = None  # durable now: wait() need not sit through the storage tidy-up below
            self._cond.notify_all()
            self._last_commit = time.monotonic()
            self._last_commit_url = info.commit_url
            record = {"checkpoint": target.name, "seconds": round(seconds, 3), "bytes": size, "at": _iso(time.time())}
            self._pushes = (self._pushes + [record])[-RECENT_PUSHES:]
            pushes = list(self._pushes)
        ckpt.write_atomic(self.root / PUSHES, json.dumps(pushes, indent=1).encode())
        log.info("%s: pushed %s (%.1f MB in %.1fs)", self.url, target.name, size / 1e6, seconds)
        self._tidy_storage(size)

    def _full_operations(
        self, target: _Target, files: dict[str, Any], on_hub: set[str]
    ) -> tuple[list[Any], int, set[str], set[str]]:
        """The commit for ``target``: its files, deletions, the extras; and its size, deleted and added checkpoints."""
        with self._cond:
            protect, keep_last = set(self._protect), self._keep_last
        added = {target.name} | {
            n for n in protect - on_hub if (self.root / ckpt.CHECKPOINTS / n / ckpt.MANIFEST).is_file()
        }
        deleted: set[str] = set()
        if keep_last is not None:
            after = sorted(on_hub | added, key=ckpt.step_of)
            deleted = (set(after[:-keep_last] if keep_last > 0 else after) & on_hub) - protect - {target.name}
        deletions: list[Any] = [CommitOperationDelete(f"{ckpt.CHECKPOINTS}/{n}/", is_folder=True) for n in sorted(deleted)]
        additions: list[Any] = []
        size = 0
        for name in sorted(added, key=ckpt.step_of):
            folder = self.root / ckpt.CHECKPOINTS / name
            for path in sorted(p for p in folder.rglob("*") if p.is_file()):
                additions.append(CommitOperationAdd(f"{ckpt.CHECKPOINTS}/{name}/{path.relative_to(folder).as_posix()}", path))
                size += path.stat().st_size
        snapshot_files = _extra_files(target.snapshot)
        for rel in snapshot_files:
            additions.append(CommitOperationAdd(rel, target.snapshot / rel))
            size += (target.snapshot / rel).stat().st_size
        for mirrored in MIRRORED_DIRS:
            ours = {rel for rel in snapshot_files if rel.startswith(mirrored + "/")}
            if ours:
                deletions += [CommitOperationDelete(p) for p in sorted(files) if p.startswith(mirrored + "/") and p not in ours]
        additions += [
            CommitOperationAdd(ckpt.LATEST, f"{target.name}\n".encode()),
            self._card(_read_json(target.snapshot / STATUS, None), target.name),
        ] + self._bookkeeping()
        return deletions + additions, size, deleted, added

    def _push_heartbeat(self) -> None:
        with self._commit_lock:
            head = self._check_lease(self._remote.head())
            info = self._remote.commit(self._small_files(), "heartbeat", parent=head)
            self._head = info.oid
        with self._cond:
            self._last_commit = time.monotonic()

    def _small_files(self) -> list[Any]:
        """``status.json`` and the card as they are now, with the lease and ``pushes.json``."""
        status = _read_json(self.root / STATUS, None)
        operations = [self._card(status, self._hub_latest)] + self._bookkeeping()
        if status is not None:
            operations.append(CommitOperationAdd(STATUS, (self.root / STATUS).read_bytes()))
        return operations

    def _card(self, status: dict[str, Any] | None, latest: str | None) -> Any:
        plot = f"{ckpt.CHECKPOINTS}/{latest}/loss.png" if latest else None
        shown = plot if plot and (self.root / plot).is_file() else None
        return CommitOperationAdd(CARD, model_card.render(self.repo_id, status, loss_plot=shown).encode())

    def _bookkeeping(self) -> list[Any]:
        with self._cond:
            pushes, lease_held = list(self._pushes), self._lease_held
        operations = [CommitOperationAdd(PUSHES, json.dumps(pushes, indent=1).encode())] if pushes else []
        if lease_held:
            operations.append(CommitOperationAdd(LEASE, self._lease_bytes()))
        return operations

    def _tidy_storage(self, last_push_bytes: int) -> None:
        """Free LFS objects of deleted files and warn before the storage cap; failures only warn (next push retries)."""
        try:
            with self._commit_lock:
                freed = self._remote.free_unreferenced(self._head or "main")
            if freed:
                log.info("%s: freed %.1f MB of deleted checkpoints", self.url, freed / 1e6)
            self._used_storage = self._remote.used_storage()
        except Exception as err:
            log.warning(
                "%s: could not free old checkpoints' storage (%s); will retry after the next push",
                self.url, self._failure(err).message,
            )
            return
        if self.storage_cap_gb is not None and self._used_storage is not None:
            cap = self.storage_cap_gb * 1e9
            if self._used_storage + last_push_bytes > cap:
                log.warning(
                    "%s uses %.2f GB; the next push (~%.2f GB) would exceed storage_cap_gb=%.2f. "
                    "Keep fewer checkpoints (keep_last) or raise the cap.",
                    self.url, self._used_storage / 1e9, last_push_bytes / 1e9, self.storage_cap_gb,
                )

    # -- errors and retries -------------------------------------------------------------

    def _failure(self, err: BaseException) -> _Failure:
        return _classify(err, self._token, self._remote.endpoint, self.repo_id)

    def _sync(self, what: str, call: Callable[[], _T]) -> _T:
        """Run ``call`` on the caller's thread, retrying transient failures ``sync_attempts`` times."""
        for attempt in range(1, self.sync_attempts + 1):
            try:
                return call()
            except StoreError:
                raise
            except Exception as err:
                failure = self._failure(err)
                if not failure.transient or attempt == self.sync_attempts:
                    advice = UNREACHABLE_ADVICE if failure.kind == "unreachable" else ""
                    raise _Failure(f"could not {what}: {failure.message}{advice}", failure.kind).error() from None
                time.sleep(self.backoff.delay(attempt, failure.retry_after))
        raise AssertionError("unreachable")

    def push_now(self) -> str:
        """Push the newest complete local checkpoint synchronously (retrying); return the commit URL."""
        latest = ckpt.latest_complete(self.root, lambda message: log.warning("%s", message))
        if latest is None:
            raise StoreError(f"{self.root} has no complete checkpoint to push")
        with self._cond:
            self._published = latest.name
            target = _Target(latest.name, self._snapshot(), final=True)
        try:
            self._sync(f"push {latest.name}", lambda: self._push_full(target))
        finally:
            shutil.rmtree(target.snapshot, ignore_errors=True)
        return self._last_commit_url or ""

    def remote_latest(self) -> str | None:
        """The checkpoint the Hub's ``latest`` names (``None`` for an empty run)."""
        head = self._sync("look up the run on the Hub", self._remote.head)
        pointed = self._sync("read latest", lambda: self._remote.read(ckpt.LATEST, head))
        return (pointed or b"").decode().strip() or None


# -- the CLI's helpers ------------------------------------------------------------------


def push(store_root: str | Path, repo_id: str, *, force: bool = False, session_id: str | None = None, **options: Any) -> str:
    """``fintts push``: upload the newest complete checkpoint of ``store_root`` (with ``model/`` and status) now.

    Takes the run's lease for the duration (``force`` as in :meth:`HubStore.acquire`) and
    refuses to move the Hub's ``latest`` backwards unless ``force``. Returns the commit URL.
    """
    store = HubStore(repo_id, root=store_root, push_every=0, **options)
    try:
        local = ckpt.latest_complete(store.root, lambda message: log.warning("%s", message))
        if local is None:
            raise StoreError(f"{store.root} has no complete checkpoint to push (is --store the run's folder?)")
        store.acquire(session_id or f"push-{socket.gethostname()}-{os.getpid()}", force=force)
        hub_latest = store.remote_latest()
        if hub_latest and ckpt.step_of(hub_latest) > ckpt.step_of(local.name) and not force:
            raise StoreError(
                f"{store.url} already has {hub_latest}, newer than {local.name} in {store.root}; "
                "pushing would move latest backwards. Pass --force if that is what you want."
            )
        return store.push_now()
    finally:
        store.release()
        store.close()


def pull(
    repo_id: str,
    out_dir: str | Path,
    *,
    checkpoint: str = "model",
    full: bool = False,
    endpoint: str | None = None,
    token: str | None = None,
    request_timeout: float = 60.0,
) -> Path:
    """``fintts pull``: download from the Hub run ``repo_id`` into ``out_dir``; return what was fetched.

    ``checkpoint``: ``"model"`` (default: only the laptop-ready ``model/`` folder),
    ``"latest"``, ``"best"`` (the checkpoint holding ``status.json``'s best) or ``"step-N"``; a
    checkpoint comes with ``latest`` and ``status.json`` and is verified, so ``out_dir``
    can be used as ``--store`` to continue training. ``full``: the whole run (every
    checkpoint, ``model/``, status, card). Works without a token for public repos.
    """
    out = Path(out_dir).expanduser().resolve()
    try:
        resolved_token: str | bool = find_token(token)
    except HubAuthError:
        resolved_token = False  # public repos need none; a private one then fails with a clear message
    remote = _Remote(repo_id, endpoint, resolved_token, request_timeout)
    secret = resolved_token if isinstance(resolved_token, str) else None
    try:
        head = remote.head()
        files = remote.files(head)
        if full:
            remote.download([p for p in files if p not in (".gitattributes", LEASE)], head, out)
            return out
        if checkpoint == MODEL_DIR:
            wanted = [p for p in files if p.startswith(MODEL_DIR + "/")]
            if not wanted:
                raise StoreError(f"hf://{repo_id} has no {MODEL_DIR}/ yet; pull a checkpoint instead (--checkpoint latest)")
            remote.download(wanted, head, out)
            return out / MODEL_DIR
        name = _resolve_checkpoint(remote, head, checkpoint, _checkpoint_names(files), repo_id)
        prefix = f"{ckpt.CHECKPOINTS}/{name}/"
        wanted = [p for p in files if p.startswith(prefix)]
        if not wanted:
            present = ", ".join(sorted(_checkpoint_names(files), key=ckpt.step_of)) or "none"
            raise StoreError(f"hf://{repo_id} has no checkpoint {name}; it has {present}")
        remote.download(wanted + [p for p in (STATUS,) if p in files], head, out)
        folder = out / ckpt.CHECKPOINTS / name
        ckpt.verify(folder)
        ckpt.write_atomic(out / ckpt.LATEST, (name + "\n").encode())
        return folder
    except (StoreError, ckpt.CheckpointError):
        raise
    except Exception as err:
        raise _classify(err, secret, remote.endpoint, repo_id).error() from None


def _resolve_checkpoint(remote: _Remote, head: str, wanted: str, on_hub: set[str], repo_id: str) -> str:
    """``latest``, ``best`` or ``step-N`` → a checkpoint name (not yet checked to exist)."""
    if wanted == "latest":
        text = remote.read(ckpt.LATEST, head)
        if not text:
            raise StoreError(f"hf://{repo_id} has no latest checkpoint yet")
        return text.decode().strip()
    if wanted == "best":
        best = (_parse_json(remote.read(STATUS, head)) or {}).get("best") or {}
        if best.get("checkpoint"):
            return best["checkpoint"]
        # The trainer keeps the first checkpoint saved at or after the best validation.
        holders = sorted((n for n in on_hub if ckpt.step_of(n) >= int(best.get("step", -1))), key=ckpt.step_of)
        if best.get("step") is None or not holders:
            raise StoreError(f"hf://{repo_id} has no checkpoint of a best validation yet; use --checkpoint latest")
        return holders[0]
    number = wanted.removeprefix("step-")
    if number.isdigit():
        return ckpt.name_for_step(int(number))
    raise StoreError(f"--checkpoint {wanted!r}: use model, latest, best or step-N")


# -- helpers ------------------------------------------------------------------------------


def _classify(err: BaseException, token: str | None, endpoint: str, repo_id: str) -> _Failure:
    """Turn a client error into a :class:`_Failure` whose message has no token and says what to do."""
    if isinstance(err, _Failure):
        return err
    if isinstance(err, StoreError):
        return _Failure(scrub(str(err), token), "other")
    if isinstance(err, HfHubHTTPError) and getattr(err, "response", None) is not None:
        status = err.response.status_code
        detail = scrub((getattr(err, "server_message", None) or str(err).splitlines()[0]).strip(), token)
        if status in (409, 412):
            return _Failure(f"the repo changed while committing ({status})", "moved")
        if status in _RETRY_STATUSES:
            retry_after = err.response.headers.get("Retry-After", "").strip()
            return _Failure(f"the Hub answered {status}", "unreachable", float(retry_after) if retry_after.isdigit() else None)
        if status == 401:
            return _Failure(
                f"the Hub rejected the token (401: {detail}). Create a write token at https://huggingface.co/settings/tokens "
                "and set it as HF_TOKEN (on Kaggle: the secret HF_TOKEN)",
                "auth",
            )
        if status == 403:
            return _Failure(f"the token may not write to {repo_id} (403: {detail}); it needs the write role", "auth")
        if isinstance(err, RepositoryNotFoundError) or (status == 404 and not isinstance(err, RemoteEntryNotFoundError)):
            return _Failure(
                f"repo {repo_id} not found at {endpoint}, or the token cannot see it. Check the name (user/name) and the token",
                "repo",
            )
        return _Failure(f"the Hub refused the request ({status}: {detail})", "other")
    if isinstance(err, LocalEntryNotFoundError) or any(c.__module__.split(".")[0] in _NETWORK_MODULES for c in type(err).__mro__):
        return _Failure(f"cannot reach {endpoint} ({type(err).__name__})", "unreachable")
    if isinstance(err, OSError):
        return _Failure(f"local file problem: {scrub(str(err), token)}", "local")
    return _Failure(f"{type(err).__name__}: {scrub(str(err), token)}", "other")


def _checkpoint_names(files: Iterable[str]) -> set[str]:
    names = set()
    for path in files:
        parts = path.split("/")
        if len(parts) >= 3 and parts[0] == ckpt.CHECKPOINTS:
            try:
                ckpt.step_of(parts[1])
            except ckpt.CheckpointError:
                continue
            names.add(parts[1])
    return names


def _extra_files(folder: Path) -> list[str]:
    """Relative paths of what a full push carries besides checkpoints: model/, samples/, tb/, loss.png, status.json."""
    found = [name for name in EXTRA_FILES if (folder / name).is_file()]
    for directory in MIRRORED_DIRS + ADDED_DIRS:
        base = folder / directory
        if base.is_dir():
            found += sorted(p.relative_to(folder).as_posix() for p in base.rglob("*") if p.is_file())
    return found


def _read_json(path: Path, default: Any) -> Any:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return default


def _parse_json(data: bytes | None) -> dict[str, Any] | None:
    try:
        value = json.loads(data) if data else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _default_host() -> str:
    kind = "kaggle" if os.environ.get("KAGGLE_KERNEL_RUN_TYPE") else "host"
    return f"{kind} {socket.gethostname()}"


def _iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 60} min {seconds % 60} s" if seconds >= 60 else f"{seconds} s"
