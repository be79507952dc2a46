"""The Hugging Face Hub store: a run that outlives every Kaggle session.

The trainer writes checkpoints into a local mirror (``root``) exactly as with a folder
store; this store makes them durable in a Hub model repo that has the same layout, so a
later session on an empty disk resumes from it and a laptop pulls the model from it.

**One commit per pushed checkpoint.** Every full push is one atomic Hub commit with the
checkpoint's files, the new ``latest``, ``status.json``, the run's card ``README.md``,
``model/``, ``loss.png``, ``samples/`` and ``tb/`` (when present), the lease heartbeat,
``pushes.json`` and the deletion of checkpoints pruned since the last push. The Hub
therefore never shows a ``latest`` naming a half-uploaded checkpoint: a commit lands whole
or not at all. Commits name their parent (``parent_commit``), so a concurrent writer makes
ours fail instead of interleaving. When pushes happen is the :class:`Publisher`'s business.

**Local copies.** :meth:`HubStore.prune` never deletes the checkpoint being uploaded nor
the newest one waiting to be; any other checkpoint it removes is either on the Hub or
superseded by a newer one that will be pushed instead. The same keep-last rule, with the
protected (best) checkpoints, is applied on the Hub at the next full push; a protected
checkpoint not yet on the Hub rides along in that commit.

**Bounded storage.** LFS objects no longer referenced at the head are freed for good after
each push (``permanently_delete_lfs_files``, which rewrites history), so deleted checkpoints
stop counting towards the repo's storage. :meth:`HubStore.describe` reports the repo size and
a warning is logged when the next push would cross ``storage_cap_gb``.

**Where the newest checkpoint is.** Every ``status.json`` this store commits carries a
``saved`` block: the Hub's ``latest`` after that commit (``hub``), the newest checkpoint on
the writer's disk (``local``, with ``host`` and ``folder``) and ``local_only`` when the
disk's is newer. A status whose ``step`` is past ``saved.hub`` so never claims more than the
Hub holds. A failing session calls :meth:`HubStore.secure_newest` to push its newest
verified checkpoint in the time it has left.

**Lease.** See :mod:`fintts.train.stores.hub.lease`. A session whose lease was taken stops
pushing and says so in :meth:`HubStore.pending`.

**Uploads never hold the repo.** A full push first uploads the checkpoint's large files
(LFS or xet, outside any lock) within ``upload_timeout`` seconds overall, then makes its
commit, which then carries only small files; the commit lock is held for that commit
alone. Heartbeats (on their own thread, see :mod:`.publisher`) so keep the lease fresh
while a checkpoint uploads, and a stalled upload is given up and retried, not waited on.

**Bounded by the session.** :meth:`HubStore.set_deadline` gives every request and retry of
this store the session's end as a deadline (see :mod:`.client`); :meth:`HubStore.release`
and :meth:`HubStore.close` take a timeout, so a stalled Hub cannot hold a session past its
limit: the checkpoint then stays on this disk and :meth:`HubStore.pending` says how to push it.

**Only regular files leave this machine.** A checkpoint's files are the ones its manifest
lists; symbolic links in ``model/``, ``samples/`` or ``tb/`` are skipped with a warning, never
followed (a link could point at a token).

**One run per folder.** ``root`` mirrors one repo: :meth:`HubStore.acquire` records it in
``root/.hub/repo.json`` the first time and refuses another repo later, naming both (a
second voice trained into the first one's folder would resume, and push, the first one's
checkpoints). It also takes the folder's session lock, as a
:class:`~fintts.train.stores.local.LocalStore` does, before the Hub's lease: two processes
on one machine never share a folder, ``--force`` or not.

The local folder ``root/.hub/`` is this store's own (snapshots waiting for upload,
downloads in progress, the repo it mirrors); nothing in it is pushed.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from huggingface_hub import CommitOperationAdd, CommitOperationDelete

from fintts.errors import LeaseConflict, StoreError
from fintts.train import checkpoint as ckpt
from fintts.train.card import CARD, LOSS_PLOT
from fintts.train.platform import host_name
from fintts.train.repo_id import repo_id_problem
from fintts.train.stores.base import MODEL_DIR, STATUS, Store
from fintts.train.stores.hub.client import Backoff, HubClient, checkpoint_names, json_object
from fintts.train.stores.hub.errors import HubRepoError, HubUnavailable, LeaseLost
from fintts.train.stores.hub.lease import LEASE, LONG_PUSH_FACTOR, MAX_LEASE_SHARE, MAX_LEASE_TIMEOUT, Lease, duration, iso
from fintts.train.stores.hub.publisher import Publisher, Target, read_pushes
from fintts.train.stores.local import LocalStore

log = logging.getLogger(__name__)

PUSHES = "pushes.json"
LOCAL_DIR = ".hub"
#: In ``LOCAL_DIR``: the repo this folder mirrors.
BINDING = "repo.json"
#: Pushed with every full push. ``model/`` is mirrored (files gone locally are deleted on
#: the Hub); ``samples/`` and ``tb/`` only gain files, because a session on a fresh disk
#: has only its own and must not delete the earlier sessions'.
MIRRORED_DIRS = (MODEL_DIR,)
ADDED_DIRS = ("samples", "tb")
EXTRA_FILES = (LOSS_PLOT, STATUS, CARD)
RECENT_PUSHES = 10
#: How long release() waits at most for an upload still holding the repo before leaving the lease to expire.
RELEASE_WAIT = 30.0
#: How long a failing session without a time limit waits at most for its newest checkpoint's push.
SECURE_WAIT = 600.0


class HubStore(Store):
    """A run kept in the Hub model repo ``repo_id`` (``user/name``), mirrored in ``root``.

    ``root``: the local mirror the trainer writes to. ``endpoint``: the Hub (default
    ``$HF_ENDPOINT`` or huggingface.co). ``token``: see
    :func:`~fintts.train.stores.hub.auth.find_token`. ``private``: visibility of a repo this
    store creates. ``push_every``: seconds between full pushes (``0``: every publish).
    ``lease_timeout``: seconds without a heartbeat after which a lease may be taken over.
    ``storage_cap_gb``: warn before the repo outgrows this. ``host``: how the lease names
    this machine (default: :func:`~fintts.train.platform.host_name`). ``backoff``: retry waits.
    ``sync_attempts``: tries of the calls that block the caller (acquire, resume, release).
    ``request_timeout``: seconds any one HTTP request may take. ``upload_timeout``: seconds one
    push's upload of its large files may take overall (never past the session's end).
    ``read_only``: for a reader (``fintts status``), which needs no token for a public repo and
    only a read token for a private one; a writer's missing token is an error at once.
    """

    def __init__(
        self,
        repo_id: str,
        *,
        root: str | Path,
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
        upload_timeout: float = 1800.0,
        read_only: bool = False,
    ):
        problem = repo_id_problem(repo_id)
        if problem:
            raise StoreError(f"hub_repo: {problem}")
        if push_every < 0 or lease_timeout <= 0:
            raise StoreError("push_every must be >= 0 and lease_timeout > 0 seconds")
        self.repo_id = self.hub_repo = repo_id
        self.root = Path(root).expanduser().resolve()
        self.private = private
        self.lease_timeout = lease_timeout
        self.storage_cap_gb = storage_cap_gb
        self.host = host or host_name()
        self.backoff = backoff
        self.sync_attempts = max(1, sync_attempts)
        self.upload_timeout = upload_timeout
        self._client = HubClient.connect(repo_id, endpoint=endpoint, token=token, timeout=request_timeout, anonymous_ok=read_only)
        self._folder_lock = LocalStore(self.root)  # the same one-process-per-folder lock as a local run's
        self._publisher = Publisher(
            push=self._push_full, heartbeat=self._push_heartbeat, after_push=self._tidy_storage,
            classify=self._client.failure, push_every=push_every, heartbeat_every=lease_timeout / 3,
            backoff=backoff, label=self.url,
        )
        #: guards the branch head: one commit at a time, each made on the head it checked its lease at.
        self._commit_lock = threading.Lock()
        self._head: str | None = None
        self._lease: Lease | None = None  # ours, while we hold the run
        self._session_seconds: float | None = None  # the session's length as set_deadline saw it
        self._hub_latest: str | None = None  # what the Hub's latest names, once _hub_latest_known
        self._hub_latest_known = False
        self._repo_ready = False
        self._lock = threading.Lock()  # guards the fields below, shared with the publisher's thread
        self._on_hub: set[str] = set()
        self._keep_last: int | None = None
        self._protect: set[str] = set()
        self._snapshots = 0
        self._used_storage: int | None = None
        self._last_push_bytes = 0
        self._last_commit_url: str | None = None
        self._pushes: list[dict[str, Any]] = read_pushes(self.root / PUSHES)

    @property
    def url(self) -> str:
        return self._client.url

    def _retrying(self, what: str, call: Callable[[], Any]) -> Any:
        return self._client.retrying(what, call, attempts=self.sync_attempts, backoff=self.backoff)

    def set_deadline(self, deadline: float | None) -> None:
        self._client.deadline = deadline
        self._session_seconds = None if deadline is None else max(0.0, deadline - time.time())

    def problem(self) -> str | None:
        return self._publisher.fatal or self._publisher.last_error

    # -- lease ----------------------------------------------------------------------------

    def acquire(self, session_id: str, *, force: bool = False) -> None:
        """Lock the local folder, check it mirrors this repo, create the repo if needed and commit this session's
        lease; or raise :class:`StoreError` (another repo's folder) or :class:`LeaseConflict`."""
        self._folder_lock.acquire(session_id)  # --force takes a dead session's lease, never a running process's folder
        try:
            self._bind()
            self._take_lease(session_id, force)
        except BaseException:
            self._folder_lock.release()
            raise

    def _bind(self) -> None:
        """Record that ``root`` mirrors this repo, or refuse a folder that mirrors another."""
        record = self.root / LOCAL_DIR / BINDING
        data = _read_json(record, {})
        bound = data.get("repo") if isinstance(data, dict) else None
        if bound and bound != self.repo_id:
            name = self.repo_id.rpartition("/")[2]
            raise StoreError(
                f"{self.root} mirrors the Hub repo {bound}, not {self.repo_id}: one local folder keeps one run, and this "
                f"one would resume (and push) {bound}'s checkpoints. Train {self.repo_id} in its own folder: leave out "
                f"--store (the default is runs/{name}) or give a new one; to continue {bound}, use --hub-repo {bound}."
            )
        if not bound:
            record.parent.mkdir(parents=True, exist_ok=True)
            ckpt.write_atomic(record, json.dumps({"repo": self.repo_id}, indent=1).encode())

    def _take_lease(self, session_id: str, force: bool) -> None:
        self._retrying("create the Hub repo", lambda: self._client.ensure_repo(self.private))
        self._repo_ready = True
        outbox = self.root / LOCAL_DIR / "outbox"
        for leftover in outbox.iterdir() if outbox.is_dir() else ():  # snapshots of a previous writer process
            if not leftover.name.startswith(f"{os.getpid()}-"):
                shutil.rmtree(leftover, ignore_errors=True)

        def take() -> Any:
            head = self._client.head_state()
            holder = Lease.parse(self._client.read(LEASE, head.sha))
            if holder is not None and holder.session != session_id:
                if not holder.stale(head.age) and not force:
                    raise LeaseConflict(holder.conflict_message(self.url, head.age))
                log.warning(
                    "%s: taking over the lease of session %s on %s (no commit for %s by the Hub's clock%s)",
                    self.url, holder.session, holder.host, "?" if head.age is None else duration(head.age),
                    ", forced" if force else "",
                )
            acquired = holder.acquired if holder is not None and holder.session == session_id else iso(time.time())
            lease = Lease(session_id, self.host, os.getpid(), acquired, time.time(), self._lease_timeout())
            info = self._client.commit(
                [CommitOperationAdd(LEASE, lease.to_bytes())], f"lease: session {session_id} on {self.host}", parent=head.sha
            )
            return info, lease

        with self._commit_lock:
            info, self._lease = self._retrying("take the lease", take)
            self._head = info.oid
        self._publisher.heartbeats(True)

    def release(self, timeout: float | None = None) -> None:
        """Delete the lease and push the final ``status.json`` and card (a small commit), within ``timeout`` seconds.

        An upload still holding the repo is waited for at most :data:`RELEASE_WAIT` (and
        ``timeout``); then the lease is left to expire, which the warning says.
        """
        try:
            self._release_lease(timeout)
        finally:
            self._folder_lock.release()

    def _release_lease(self, timeout: float | None) -> None:
        if self._lease is None:
            return
        self._publisher.heartbeats(False)
        if timeout is not None:
            end = time.time() + max(0.0, timeout)
            self._client.deadline = end if self._client.deadline is None else min(self._client.deadline, end)
        patience = RELEASE_WAIT if timeout is None else max(0.0, min(RELEASE_WAIT, timeout))
        expires = duration(self._lease.timeout)
        if not self._commit_lock.acquire(timeout=patience):
            log.warning("%s: an upload is still running; the lease stays and expires in %s", self.url, expires)
            return
        try:
            def commit() -> None:
                head = self._check_lease(self._client.head())
                operations = [CommitOperationDelete(LEASE)] + self._small_files(head, with_lease=False)
                info = self._client.commit(operations, f"release: session {self._lease.session} ended", parent=head)
                self._head = info.oid

            self._retrying("release the lease", commit)
        except StoreError as err:
            log.warning("%s: could not release the lease (%s); it expires in %s", self.url, err, expires)
        finally:
            self._lease = None
            self._commit_lock.release()

    def _lease_timeout(self) -> float:
        """The lease's timeout: ``lease_timeout``, longer when this run's pushes are slow.

        No heartbeat can land while a full push is committing, so a lease must outlast the
        longest push or a live session would look dead to others during a slow upload; but
        never more than the ceiling (a share of the session, see :mod:`.lease`), which
        :meth:`notes` reports when it cuts.
        """
        return max(self.lease_timeout, min(self._wanted_lease_timeout(), self._lease_ceiling()))

    def _wanted_lease_timeout(self) -> float:
        return max([self.lease_timeout] + [LONG_PUSH_FACTOR * s for s in self.transfer_seconds()])

    def _lease_ceiling(self) -> float:
        return MAX_LEASE_TIMEOUT if self._session_seconds is None else MAX_LEASE_SHARE * self._session_seconds

    def notes(self) -> list[str]:
        """The lease's ceiling, when it cut the timeout this run's slow pushes asked for."""
        wanted, used = self._wanted_lease_timeout(), self._lease_timeout()
        if wanted <= used:
            return []
        return [
            f"the lease on {self.url} times out after {duration(used)} (at most {MAX_LEASE_SHARE:.0%} of the session), "
            f"not {LONG_PUSH_FACTOR:g} × this run's slowest recent push ({duration(wanted)}): if this session dies, the next "
            f"one may take the run over {duration(used)} after its last commit"
        ]

    def _check_lease(self, head: str) -> str:
        """``head``, after making sure the lease is still ours if the branch moved since we last looked."""
        if self._lease is None or head == self._head:
            return head
        holder = Lease.parse(self._client.read(LEASE, head))
        if holder is None or holder.session != self._lease.session:
            raise LeaseLost(
                f"session {holder.session if holder else '(none)'} on {holder.host if holder else '?'} took over "
                f"{self.url}; this session stopped pushing"
            )
        self._head = head
        return head

    # -- resume ---------------------------------------------------------------------------

    def resume_point(self, log: Callable[[str], None] = print) -> Path | None:
        """The newest complete checkpoint, downloading it from the Hub when the Hub's is newer than the local one.

        Downloads only ``latest``'s folder (falling back to older checkpoints on the Hub
        when one fails its manifest), ``status.json`` and ``pushes.json``, and ``model/`` when
        this disk has an older one (see :meth:`_fetch_model`).
        """
        local = ckpt.latest_complete(self.root, log)
        try:
            head = self._retrying("look up the run on the Hub", self._client.head)
            files = self._retrying("list the run on the Hub", lambda: self._client.files(head))
            pointed = (self._retrying("read latest", lambda: self._client.read(ckpt.LATEST, head)) or b"").decode(errors="replace").strip()
        except HubRepoError:
            return local  # no repo yet: a new run (acquire creates it)
        except HubUnavailable as err:
            if local is None:
                raise HubUnavailable(f"{err}. Nothing to resume from locally either; retry when the Hub is reachable.") from None
            log(f"warning: {err}; resuming from the local {local.name}, which may be older than the Hub's")
            return local
        names = checkpoint_names(files)
        with self._lock:
            self._on_hub = set(names)
            self._hub_latest = pointed if ckpt.is_checkpoint_name(pointed) and pointed in names else None
            self._hub_latest_known = True
        candidates = ckpt.resume_order(names, pointed or None)
        if local is not None and (not candidates or ckpt.step_of(local.name) >= ckpt.step_of(candidates[0])):
            return local
        for name in candidates:
            if local is not None and ckpt.step_of(name) <= ckpt.step_of(local.name):
                break
            folder = self._fetch_checkpoint(name, head, files, log)
            if folder is not None:
                self._fetch_model(head, files, log)
                for extra in (STATUS, PUSHES):
                    if extra in files:
                        self._retrying(f"download {extra}", lambda extra=extra: self._client.download([extra], head, self.root))
                with self._lock:
                    self._pushes = read_pushes(self.root / PUSHES)
                return folder
        if local is None and candidates:
            raise StoreError(
                f"{self.url} has checkpoints ({', '.join(candidates)}) but none matches its manifest. "
                "Inspect the repo, or start a new run in another repo."
            )
        return local

    def _fetch_model(self, head: str, files: dict[str, Any], log: Callable[[str], None]) -> None:
        """Replace a local ``model/`` with the Hub's: it belongs to an older checkpoint than the one just fetched.

        ``model/`` on the Hub only moves forward: a local one left from an earlier session on
        this disk would otherwise be mirrored over the Hub's newer one at the next push. When
        the download fails, the local one is still removed (the Hub's stays as it is). A disk
        without one (a fresh Kaggle session) downloads nothing: its pushes leave the Hub's
        ``model/`` alone until the trainer exports a newer one.
        """
        if not (self.root / MODEL_DIR).exists():
            return
        wanted = [p for p in files if p.startswith(MODEL_DIR + "/")]
        incoming, stale = self.root / LOCAL_DIR / "incoming-model", self.root / LOCAL_DIR / "stale-model"
        for leftover in (incoming, stale):
            shutil.rmtree(leftover, ignore_errors=True)
        try:
            if wanted:
                log(f"downloading {MODEL_DIR}/ from {self.url}")
                self._retrying(f"download {MODEL_DIR}/", lambda: self._client.download(wanted, head, incoming))
        except StoreError as err:
            log(f"warning: {err}; the local {MODEL_DIR}/ (older than the checkpoint resumed from) is removed, the Hub's stays")
            wanted = []
        final = self.root / MODEL_DIR
        if final.exists():
            os.replace(final, stale)
        if wanted:
            os.replace(incoming / MODEL_DIR, final)
        for leftover in (incoming, stale):
            shutil.rmtree(leftover, ignore_errors=True)

    def _fetch_checkpoint(self, name: str, head: str, files: dict[str, Any], log: Callable[[str], None]) -> Path | None:
        prefix = f"{ckpt.CHECKPOINTS}/{name}/"
        incoming = self.root / LOCAL_DIR / "incoming"
        shutil.rmtree(incoming, ignore_errors=True)
        log(f"downloading {name} from {self.url}")
        self._retrying(f"download {name}", lambda: self._client.download([p for p in files if p.startswith(prefix)], head, incoming))
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

    def push_due(self) -> bool:
        return self._publisher.due()

    def publish(self, name: str, *, final: bool = False) -> None:
        """Queue checkpoint ``name`` for a full push if one is due (see :mod:`.publisher`); never blocks on the network."""
        folder = self.root / ckpt.CHECKPOINTS / name
        if not (folder / ckpt.MANIFEST).is_file():
            raise StoreError(f"publish({name!r}): {folder} is not a complete checkpoint (save it with checkpoint.save first)")
        self._publisher.publish(name, self._snapshot, final=final)

    def _snapshot(self) -> Path | None:
        """Copy the files the trainer rewrites (``model/`` by hard link) so a push sends one consistent state.

        On a full disk the copy fails: the push then carries the checkpoint and ``latest``
        without them (``None``), rather than not happening, and the next push brings them.
        """
        self._snapshots += 1
        dest = self.root / LOCAL_DIR / "outbox" / f"{os.getpid()}-{self._snapshots:06d}"
        try:
            shutil.rmtree(dest, ignore_errors=True)
            dest.mkdir(parents=True)
            for rel in _extra_files(self.root):
                target = dest / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                try:
                    if not rel.startswith(MODEL_DIR + "/"):
                        raise OSError("copied, not linked")
                    os.link(self.root / rel, target)
                except OSError:
                    shutil.copyfile(self.root / rel, target)
        except OSError as err:
            shutil.rmtree(dest, ignore_errors=True)
            log.warning("%s: could not copy status, card and model/ for the push (%s); pushing the checkpoint without them", self.url, err)
            return None
        return dest

    def wait(self, timeout: float | None = None, interrupted: Callable[[], bool] = lambda: False) -> bool:
        """Block until every due push is on the Hub; ``False`` on timeout, interruption, a refusal or a lost lease."""
        return self._publisher.wait(timeout, interrupted)

    def pending(self) -> str | None:
        """A loud message when the newest published checkpoint is not on the Hub, naming where it is and how to push it."""
        newest = self._publisher.published
        with self._lock:
            if newest is None or newest in self._on_hub:
                return None
        reason = self._publisher.fatal or self._publisher.last_error or "its upload had not finished"
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

    def secure_newest(self, deadline: float | None, interrupted: Callable[[], bool] = lambda: False) -> str:
        """Push the newest verified local checkpoint if the Hub's ``latest`` is older, waiting until ``deadline``
        (``None``: at most :data:`SECURE_WAIT`) or ``interrupted()``; say which step is safe where."""
        newest = ckpt.latest_complete(self.root, lambda message: log.warning("%s", message))
        with self._lock:
            hub = self._hub_latest
        if newest is None:
            return f"no complete checkpoint in {self.root}; the newest on {self.url} is {hub or 'none'}"
        if hub is not None and ckpt.step_of(hub) >= ckpt.step_of(newest.name):
            return f"{hub} is the newest checkpoint, and it is on {self.url}"
        if self._publisher.fatal is None:
            if newest.name not in self._publisher.busy():
                self.publish(newest.name, final=True)  # (a verified checkpoint: publish has nothing to refuse)
            log.warning("%s: pushing %s, the newest checkpoint, before this failed session ends (Ctrl-C stops waiting)",
                        self.url, newest.name)
            wait = SECURE_WAIT if deadline is None else deadline - time.time()
            if self.wait(timeout=max(0.0, wait), interrupted=interrupted):
                return f"{newest.name} is on {self.url} (pushed after the failure)"
        return self.pending() or f"{newest.name} is only on this disk: {newest}"

    def prune(self, keep_last: int, protect: Iterable[str] = ()) -> list[str]:
        """Delete local checkpoints beyond the newest ``keep_last`` and ``protect``, never one being pushed.

        The checkpoint being uploaded and the one waiting to be stay; any other unpushed one
        is superseded by them. The same rule is applied to the Hub's checkpoints at the next
        full push.
        """
        protect = set(protect)
        with self._lock:
            self._keep_last, self._protect = keep_last, protect
        return ckpt.prune(self.root, keep_last, protect | self._publisher.busy())

    def checkpoint_names(self) -> list[str]:
        """This disk's checkpoints and those the Hub had when the run was looked up, oldest first."""
        with self._lock:
            on_hub = set(self._on_hub)
        return sorted(set(super().checkpoint_names()) | on_hub, key=ckpt.step_of)

    def read_status(self) -> dict[str, Any] | None:
        """The writer's own ``status.json``; for anyone else (``fintts status``) the Hub's, falling back to the mirror's."""
        if self._lease is None:
            try:
                status = json_object(self._client.read(STATUS, self._client.head()))
                if status is not None:
                    return status
            except Exception as err:  # a status display must work offline: use the local mirror
                log.warning("%s: showing the local status (%s)", self.url, self._client.failure(err))
        return super().read_status()

    def transfer_seconds(self) -> list[float]:
        """Seconds of this run's recent full pushes (kept in ``pushes.json``, so a new session starts informed)."""
        with self._lock:
            return [float(p["seconds"]) for p in self._pushes[-RECENT_PUSHES:]]

    def describe(self) -> dict[str, Any]:
        facts: dict[str, Any] = {
            "store": self.url, "repo": self.repo_id, "endpoint": self._client.endpoint, "local": str(self.root),
        }
        try:
            self._used_storage = self._client.used_storage()
        except Exception as err:  # describe is for a status display: report, don't fail
            facts["error"] = str(self._client.failure(err))
        if self._used_storage is not None:
            facts["used_storage_bytes"] = self._used_storage
        if self.storage_cap_gb is not None:
            facts["storage_cap_gb"] = self.storage_cap_gb
        published = self._publisher.published
        with self._lock:
            if self._pushes:
                facts["last_push"] = dict(self._pushes[-1])
            facts["pending"] = published is not None and published not in self._on_hub
        return facts

    def close(self, timeout: float | None = None) -> None:
        self._publisher.close(5.0 if timeout is None else timeout)

    # -- commits (on the publisher's thread) ------------------------------------------------

    def _push_full(self, target: Target) -> None:
        if not (self.root / ckpt.CHECKPOINTS / target.name / ckpt.MANIFEST).is_file():
            # Deleted by hand after publish: pushing latest without its folder would break the run on the Hub.
            log.error("%s: %s disappeared from %s before its push; skipping it", self.url, target.name, self.root)
            return
        started = time.monotonic()
        if not self._repo_ready:
            self._client.ensure_repo(self.private)
            self._repo_ready = True
        with self._commit_lock:
            head = self._check_lease(self._client.head())
        files = self._client.files(head)
        on_hub = checkpoint_names(files)
        operations, size, deleted, added = self._full_operations(target, files, on_hub)
        self._client.upload(operations, self.upload_timeout)  # the bulk of the push, holding no lock
        with self._commit_lock:
            # only this session commits while it holds the lease (its heartbeats meanwhile touch no checkpoint)
            head = self._check_lease(self._client.head())
            info = self._client.commit(operations, f"{target.name}" + (" (end of session)" if target.final else ""), parent=head)
            self._head = info.oid
        seconds = time.monotonic() - started
        with self._lock:
            self._on_hub = (on_hub - deleted) | added
            self._hub_latest, self._hub_latest_known = target.name, True
            self._last_commit_url = info.commit_url
            self._last_push_bytes = size
            record = {"checkpoint": target.name, "seconds": round(seconds, 3), "bytes": size, "at": iso(time.time())}
            self._pushes = (self._pushes + [record])[-RECENT_PUSHES:]
            pushes = list(self._pushes)
        ckpt.write_atomic(self.root / PUSHES, json.dumps(pushes, indent=1).encode())
        log.info("%s: pushed %s (%.1f MB in %.1fs)", self.url, target.name, size / 1e6, seconds)

    def _full_operations(
        self, target: Target, files: dict[str, Any], on_hub: set[str]
    ) -> tuple[list[Any], int, set[str], set[str]]:
        """The commit for ``target``: its files, deletions, the extras; and its size, deleted and added checkpoints."""
        with self._lock:
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
            prefix = f"{ckpt.CHECKPOINTS}/{name}/"
            rels = sorted([*ckpt.read_manifest(folder), ckpt.MANIFEST])  # what the manifest vouches for, nothing else
            # a checkpoint pushed again (saved again at the same step) replaces its folder: files it no longer has go
            deletions += [CommitOperationDelete(p) for p in sorted(files) if p.startswith(prefix) and p[len(prefix):] not in rels]
            for rel in rels:
                additions.append(CommitOperationAdd(prefix + rel, folder / rel))
                size += (folder / rel).stat().st_size
        snapshot_files = _extra_files(target.snapshot)
        for rel in snapshot_files:
            source = target.snapshot / rel
            content = self._status_for_hub(source.read_bytes(), target.name, target.name) if rel == STATUS else source
            additions.append(CommitOperationAdd(rel, content))
            size += source.stat().st_size
        for mirrored in MIRRORED_DIRS:
            ours = {rel for rel in snapshot_files if rel.startswith(mirrored + "/")}
            if ours:
                deletions += [CommitOperationDelete(p) for p in sorted(files) if p.startswith(mirrored + "/") and p not in ours]
        additions += [CommitOperationAdd(ckpt.LATEST, f"{target.name}\n".encode())] + self._bookkeeping(with_lease=True)
        return deletions + additions, size, deleted, added

    def _push_heartbeat(self) -> None:
        with self._commit_lock:
            head = self._check_lease(self._client.head())
            info = self._client.commit(self._small_files(head, with_lease=True), "heartbeat", parent=head)
            self._head = info.oid

    def _small_files(self, head: str, *, with_lease: bool) -> list[Any]:
        """``status.json`` (saying where the newest checkpoint is) and the card as they are now, with ``pushes.json``
        (and the refreshed lease), for a commit on ``head``."""
        operations = []
        if (self.root / STATUS).is_file():
            if not self._hub_latest_known:
                name = (self._client.read(ckpt.LATEST, head) or b"").decode(errors="replace").strip()
                self._hub_latest, self._hub_latest_known = (name if ckpt.is_checkpoint_name(name) else None), True
            local = ckpt.read_latest(self.root)
            operations.append(CommitOperationAdd(STATUS, self._status_for_hub((self.root / STATUS).read_bytes(), self._hub_latest, local)))
        if (self.root / CARD).is_file():
            operations.append(CommitOperationAdd(CARD, (self.root / CARD).read_bytes()))
        return operations + self._bookkeeping(with_lease=with_lease)

    def _status_for_hub(self, data: bytes, hub: str | None, local: str | None) -> bytes:
        """``status.json`` with its ``saved`` block: which checkpoint the Hub holds, which only this disk (see the module)."""
        try:
            status = json.loads(data)
        except ValueError:
            return data
        if not isinstance(status, dict):
            return data
        local = local if ckpt.is_checkpoint_name(local) else None
        local_only = local is not None and (hub is None or ckpt.step_of(local) > ckpt.step_of(hub))
        saved: dict[str, Any] = {"hub": hub, "local": local, "local_only": local_only, "host": self.host, "folder": str(self.root)}
        step = status.get("step")
        if local_only or (isinstance(step, int) and step > (-1 if hub is None else ckpt.step_of(hub))):
            saved["note"] = (
                f"step {step} was reached; the newest checkpoint on the Hub is {hub or 'none yet'}"
                + (f"; {local} is only on {self.host} in {self.root}" if local_only else "")
            )
        return json.dumps({**status, "saved": saved}, indent=1, sort_keys=True).encode()

    def _bookkeeping(self, *, with_lease: bool) -> list[Any]:
        with self._lock:
            pushes = list(self._pushes)
        operations = [CommitOperationAdd(PUSHES, json.dumps(pushes, indent=1).encode())] if pushes else []
        lease = self._lease
        if with_lease and lease is not None:
            self._lease = lease = Lease(lease.session, lease.host, lease.pid, lease.acquired, time.time(), self._lease_timeout())
            operations.append(CommitOperationAdd(LEASE, lease.to_bytes()))
        return operations

    def _tidy_storage(self) -> None:
        """Free LFS objects of deleted files and warn before the storage cap; failures only warn (next push retries)."""
        try:
            with self._commit_lock:
                freed = self._client.free_unreferenced(self._head or "main")
            if freed:
                log.info("%s: freed %.1f MB of deleted checkpoints", self.url, freed / 1e6)
            self._used_storage = self._client.used_storage()
        except Exception as err:
            log.warning("%s: could not free old checkpoints' storage (%s); will retry after the next push",
                        self.url, self._client.failure(err))
            return
        if self.storage_cap_gb is not None and self._used_storage is not None:
            cap = self.storage_cap_gb * 1e9
            if self._used_storage + self._last_push_bytes > cap:
                log.warning(
                    "%s uses %.2f GB; the next push (~%.2f GB) would exceed storage_cap_gb=%.2f. "
                    "Keep fewer checkpoints (keep_last) or raise the cap.",
                    self.url, self._used_storage / 1e9, self._last_push_bytes / 1e9, self.storage_cap_gb,
                )

    # -- synchronous pushes (fintts push) -------------------------------------------------------

    def push_now(self) -> str:
        """Push the newest complete local checkpoint synchronously (retrying); return the commit URL."""
        latest = ckpt.latest_complete(self.root, lambda message: log.warning("%s", message))
        if latest is None:
            raise StoreError(f"{self.root} has no complete checkpoint to push")
        self._publisher.published = latest.name
        target = Target(latest.name, self._snapshot(), final=True)
        try:
            self._retrying(f"push {latest.name}", lambda: self._push_full(target))
        finally:
            target.discard()
        self._tidy_storage()
        return self._last_commit_url or ""

    def remote_latest(self) -> str | None:
        """The checkpoint the Hub's ``latest`` names (``None`` for an empty run)."""
        head = self._retrying("look up the run on the Hub", self._client.head)
        pointed = self._retrying("read latest", lambda: self._client.read(ckpt.LATEST, head))
        name = (pointed or b"").decode(errors="replace").strip() or None
        if name is not None and not ckpt.is_checkpoint_name(name):
            log.warning("%s: its latest names %r, which is not a checkpoint name; ignoring it", self.url, name)
            return None
        return name


def _extra_files(folder: Path | None) -> list[str]:
    """Relative paths of what a full push carries besides checkpoints: model/, samples/, tb/, the plot, status, card.

    Regular files only: a symbolic link is skipped with a warning, never followed.
    """
    if folder is None:
        return []
    found = []
    for rel in EXTRA_FILES + MIRRORED_DIRS + ADDED_DIRS:
        path = folder / rel
        if path.is_symlink():
            log.warning("%s is a symbolic link; it is not pushed", path)
        elif path.is_file():
            found.append(rel)
        elif path.is_dir():
            try:
                found += [p.relative_to(folder).as_posix() for p in ckpt.regular_files(path)]
            except ckpt.CheckpointError as err:
                log.warning("%s; %s/ is not pushed this time", err, rel)
    return found


def _read_json(path: Path, default: Any) -> Any:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return default

