"""The Hugging Face Hub store: a run that outlives every Kaggle session.

The trainer writes checkpoints into a local mirror (``root``) as with a folder store; this store
makes them durable in a Hub model repo of the same layout, so that a later session on an empty disk
resumes from it and a laptop pulls the voice from it. The Hub is slow, rate-limited, shared and may
stall, while the session's end is hard: so every pushed checkpoint is one commit that lands whole,
uploads never hold the repo, every request is bounded by the session's end, and what could not be
pushed stays on this disk with the command that pushes it. The policy — commits, pruning, history
rewrites, the ``saved`` block, the lease, one run per folder — is in docs/sessions-and-stores.md
("Stores and checkpoints").
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from fintts.errors import StoreError
from fintts.train.machine.platform import KAGGLE_SESSION_LIMIT, host_name
from fintts.train.repo_id import repo_id_problem
from fintts.train.retry import Backoff
from fintts.train.run import checkpoint as ckpt
from fintts.train.run.layout import CARD, HUB_BINDING, HUB_DIR, PUSHES, STATUS
from fintts.train.stores.base import Store
from fintts.train.stores.hub import resume
from fintts.train.stores.hub.client import HubClient, checkpoint_names, json_object
from fintts.train.stores.hub.commits import Commits, Outbox
from fintts.train.stores.hub.errors import HubAuthError, HubRefused, HubStorageFull
from fintts.train.stores.hub.lease import LeaseHolder
from fintts.train.stores.hub.ledger import Ledger
from fintts.train.stores.hub.plan import FREE_GB, UNKNOWN, Plan, judge
from fintts.train.stores.hub.publisher import Publisher, Target
from fintts.train.stores.hub.visibility import refuse_public
from fintts.train.stores.local import LocalStore

log = logging.getLogger(__name__)

#: How long a failing session without a time limit waits at most for its newest checkpoint's push.
SECURE_WAIT = 600.0
#: The shortest default lease timeout (seconds).
MIN_LEASE_TIMEOUT = 900.0
#: Seconds between a session's history rewrites that free deleted checkpoints' storage (after its final push, its release
#: always makes one).
#: Over half a 12-hour session with an hour to spare: one timed rewrite, then the final one. At 6 h the second timed
#: rewrite fell on the hourly push grid's 12th hour, and a push a moment late made a third (seen under load).
REWRITE_EVERY = 7 * 3600.0


class HubStore(Store):
    """A run kept in the Hub model repo ``repo_id`` (``user/name``), mirrored in ``root``.

    ``root``: the local mirror the trainer writes to. ``endpoint``: the Hub (default
    ``$HF_ENDPOINT`` or huggingface.co). ``token``: see
    :func:`~fintts.train.stores.hub.auth.find_token`. ``private``: visibility of a repo this
    store creates. ``push_every``: seconds between full pushes (``0``: every publish).
    ``lease_timeout``: seconds without a heartbeat after which a lease may be taken over (default:
    twice ``push_every``, at least 15 minutes: heartbeats, every third of it, then fall between
    hourly pushes at most once, so a 12-hour session makes about 26 commits, not 146; a Kaggle
    session that died has its lease released by ``fintts kaggle`` once Kaggle says it ended).
    ``rewrite_every``: seconds between history rewrites that free storage (see above).
    ``storage_cap_gb``: warn before the repo outgrows this. ``host``: how the lease names
    this machine (default: :func:`~fintts.train.machine.platform.host_name`). ``backoff``: retry waits.
    ``sync_attempts``: tries of the calls that block the caller (acquire, resume, release).
    ``request_timeout``: seconds any one HTTP request may take. ``upload_timeout``: seconds one
    push's upload of its large files may take overall (never past the session's end).
    ``allow_public``: train into a repo that is public (refused otherwise: checkpoints, samples of
    the speaker and corpus text would go out publicly). ``storage_limit_gb``: the account's private
    storage as the person knows it (``None``: as its plan on the Hub says, see :mod:`.plan`); a session
    that could not save within it is refused at its start where that is sure, warned about otherwise.
    ``read_only``: for a reader (``fintts status``), which needs no token for a public repo and
    only a read token for a private one; a writer's missing token is an error at once.

    Its rooms: :class:`~.lease.LeaseHolder` (the lease and the branch head, behind the commit
    lock), :class:`~.ledger.Ledger` (what the Hub holds, behind the lock shared with the
    publisher's thread), :class:`~.commits.Commits` and :class:`~.commits.Outbox` (what commits
    carry), :mod:`.resume`, and the :class:`~.publisher.Publisher` (its push and heartbeat threads).
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
        lease_timeout: float | None = None,
        rewrite_every: float = REWRITE_EVERY,
        storage_cap_gb: float | None = None,
        host: str | None = None,
        backoff: Backoff = Backoff(),
        sync_attempts: int = 5,
        request_timeout: float = 60.0,
        upload_timeout: float = 1800.0,
        read_only: bool = False,
        allow_public: bool = False,
        storage_limit_gb: float | None = None,
    ):
        problem = repo_id_problem(repo_id)
        if problem:
            raise StoreError(f"hub_repo: {problem}")
        if lease_timeout is None:
            lease_timeout = max(MIN_LEASE_TIMEOUT, 2 * push_every)
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
        self.rewrite_every = rewrite_every
        self.allow_public = allow_public
        self._told_no_freeing = False
        self.storage_limit_gb = storage_limit_gb
        self._last_rewrite = time.monotonic()  # a session's first rewrite waits rewrite_every too (or its final push)
        self._rewrite_at_release = False  # a final push landed: its rewrite comes after the release (see release())
        self._client = HubClient.connect(repo_id, endpoint=endpoint, token=token, timeout=request_timeout, anonymous_ok=read_only)
        self._folder_lock = LocalStore(self.root)  # the same one-process-per-folder lock as a local run's
        self._ledger = Ledger(self.root / PUSHES)
        self._holder = LeaseHolder(self._client, host=self.host, minimum=lease_timeout, push_seconds=self._ledger.push_seconds)
        self._commits = Commits(self.root, host=self.host, client=self._client, ledger=self._ledger, holder=self._holder)
        self._outbox = Outbox(self.root, self._client.url)
        self._publisher = Publisher(
            push=self._push_full, heartbeat=self._push_heartbeat, after_push=self._tidy_storage,
            classify=self._client.failure, push_every=push_every, heartbeat_every=lease_timeout / 3,
            backoff=backoff, label=self.url,
        )
        self._repo_ready = False
        self._used_storage: int | None = None

    @property
    def url(self) -> str:
        return self._client.url

    def _retrying(self, what: str, call: Callable[[], Any]) -> Any:
        return self._client.retrying(what, call, attempts=self.sync_attempts, backoff=self.backoff)

    def set_deadline(self, deadline: float | None) -> None:
        self._client.deadline = deadline
        self._holder.session_seconds = None if deadline is None else max(0.0, deadline - time.time())

    def problem(self) -> str | None:
        return self._publisher.fatal or self._publisher.last_error or self._commits.cards.problem()

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
        record = self.root / HUB_DIR / HUB_BINDING
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
        self._check_visibility()
        self._check_storage()
        self._outbox.clear_others()  # snapshots of a previous writer process
        self._holder.take(session_id, force, self._retrying)
        self._publisher.heartbeats(True)

    def _check_visibility(self) -> None:
        """Refuse a public repo unless asked (:mod:`.visibility`: ``create_repo(private=True)`` leaves an existing repo as it is)."""
        if self.allow_public or self.private is False:
            return
        refuse_public(self.repo_id, is_private=self._retrying("look up the repo's visibility", self._client.is_private),
                      goes="a training run pushes its checkpoints, samples of the speaker's voice and the corpus text",
                      allow="allow it with hub_public: true in the config (or hub_public=true after the config on the command line)",
                      endpoint=self._client.endpoint)

    def _check_storage(self) -> None:
        """Refuse a session that could not save within the account's private storage, now rather than at hour 11.

        Whether the Hub frees deleted files' storage at once is not ours to know (its docs allow a
        lag), so the check is on what the Hub reports now, plus room for two pushes of this run. The
        limit is the person's ``storage_limit_gb`` when set, else the plan ``whoami`` says, asked only
        when the run would not fit in the smallest plan's; only a sure limit refuses (see :mod:`.plan`).
        """
        if not self.private:
            return
        try:
            used = self._client.account_storage() or 0
        except Exception as err:  # the check is a courtesy: a listing that fails must not stop a session
            log.warning("%s: could not check the account's storage (%s)", self.url, self._client.failure(err))
            return
        needed = 2 * max([int(p.get("bytes", 0)) for p in self._ledger.pushes()] or [0])
        if self.storage_limit_gb:  # the person's number: sure
            if used + needed <= self.storage_limit_gb * 1e9:
                return
            refuse, why = True, f"storage_limit_gb is {self.storage_limit_gb:g} GB"
        elif used + needed <= FREE_GB * 1e9:
            return  # within every plan's storage: no need to ask whoami
        else:
            verdict = judge(self._account_plan(), used, needed)
            if verdict is None:
                return
            refuse, why = verdict
        state = (f"the private repos of {self.repo_id.split('/')[0]} use {used / 1e9:.1f} GB and this run's next pushes "
                 f"need ~{needed / 1e9:.1f} GB more: {why}")
        if refuse:
            raise HubStorageFull(
                f"{state}, and the Hub refuses uploads past the limit (403 'Private repository storage limit reached'). "
                "Free space (delete old repos or checkpoints: https://huggingface.co/settings/storage) or upgrade, then "
                "start the session again; if the account has more, say how much with storage_limit_gb (GB) in the config"
            )
        log.warning("%s: %s. The session goes on; set storage_limit_gb (GB) in the config to have it checked", self.url, state)

    def _account_plan(self) -> Plan:
        """The account's plan as the Hub says it; unknown when ``whoami`` fails (it must not stop a session)."""
        try:
            return self._client.account_plan()
        except Exception as err:
            log.info("%s: could not read the account's plan (%s)", self.url, self._client.failure(err))
            return UNKNOWN

    def release(self, timeout: float | None = None) -> None:
        """Delete the lease and push the final ``status.json`` and card (a small commit), then free the storage of
        checkpoints deleted from the Hub when a final push asked for it; all within ``timeout`` seconds.

        A commit still holding the repo is waited for at most :data:`~.lease.RELEASE_WAIT` (and
        ``timeout``); then the lease is left to expire, which the warning says.

        The release comes first, then the rewrite: a history rewrite may take the Hub long and holds the
        commit lock meanwhile, and one made before the release kept it out (the session still ended, leaving
        ``status.json`` saying ``running`` and its lease keeping the next session out until it timed out,
        2 h with the shipped config). After the release it only costs this session's time, bounded by
        ``timeout`` like every request here, and deletes nothing once another session holds the run
        (:meth:`~.lease.LeaseHolder.free_unreferenced`); storage it did not free is freed by a later rewrite.
        """
        end = None if timeout is None else time.time() + max(0.0, timeout)
        if end is not None:
            self._client.deadline = end if self._client.deadline is None else min(self._client.deadline, end)
        try:
            if self._release_lease(timeout) and self._rewrite_at_release:
                self._rewrite_at_release = False
                self._free_storage(None if end is None else end - time.time())
        finally:
            self._folder_lock.release()

    def _release_lease(self, timeout: float | None) -> bool:
        """Give the lease back (see :meth:`release`); whether the release's commit landed."""
        if self._holder.lease is None:
            return False
        self._publisher.heartbeats(False)
        return self._holder.release(
            timeout, lambda head: self._commits.small(head, with_lease=False, with_card=True), self._retrying
        )

    def notes(self) -> list[str]:
        """The lease's ceiling, when it cut the timeout this run's slow pushes asked for."""
        return self._holder.notes()

    # -- resume ---------------------------------------------------------------------------

    def resume_point(self, log: Callable[[str], None] = print) -> Path | None:
        """The newest complete checkpoint, downloading it from the Hub when the Hub's is newer than the local one.

        Downloads only ``latest``'s folder (falling back to older checkpoints on the Hub
        when one fails its manifest), ``status.json`` and ``pushes.json``, and ``model/`` when
        this disk has an older one (see :func:`~.resume.fetch_model`).
        """
        return resume.newest_checkpoint(self.root, self._client, self._ledger, self._retrying, log)

    # -- publishing -------------------------------------------------------------------

    def push_due(self) -> bool:
        return self._publisher.due()

    def publish(self, name: str, *, final: bool = False) -> None:
        """Queue checkpoint ``name`` for a full push if one is due (see :mod:`.publisher`); never blocks on the network."""
        folder = self.root / ckpt.CHECKPOINTS / name
        if not (folder / ckpt.MANIFEST).is_file():
            raise StoreError(f"publish({name!r}): {folder} is not a complete checkpoint (save it with checkpoint.save first)")
        self._publisher.publish(name, self._outbox.snapshot, final=final)

    def wait(self, timeout: float | None = None, interrupted: Callable[[], bool] = lambda: False) -> bool:
        """Block until every due push is on the Hub; ``False`` on timeout, interruption, a refusal or a lost lease."""
        return self._publisher.wait(timeout, interrupted)

    def pending(self) -> str | None:
        """A loud message when the newest published checkpoint is not on the Hub, naming where it is and how to push it."""
        newest = self._publisher.published
        if newest is None or newest in self._ledger.on_hub():
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
        _, hub = self._ledger.hub_latest()
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
        self._ledger.keep(keep_last, protect)
        return ckpt.prune(self.root, keep_last, protect | self._publisher.busy())

    def checkpoint_names(self) -> list[str]:
        """This disk's checkpoints and those the Hub had when the run was looked up, oldest first."""
        return sorted(set(super().checkpoint_names()) | self._ledger.on_hub(), key=ckpt.step_of)

    def read_status(self) -> dict[str, Any] | None:
        """The writer's own ``status.json``; for anyone else (``fintts status``) the Hub's, falling back to the mirror's."""
        if self._holder.lease is None:
            try:
                status = self._client.retrying(  # read again from the new head if a history rewrite took the old one
                    "read the run's status", lambda: json_object(self._client.read(STATUS, self._client.head())),
                    attempts=2, backoff=self.backoff,
                )
                if status is not None:
                    return status
            except Exception as err:  # a status display must work offline: use the local mirror
                failure, local = self._client.failure(err), super().read_status()
                if local is None:  # said once, as what it is: not "nothing was trained there", which no one knows
                    raise StoreError(f"{self.url}: {failure} ({self.root} holds no copy of the run's status to show "
                                     "instead)") from None
                log.warning("%s: showing the local status (%s)", self.url, failure)
                return local
        return super().read_status()

    def transfer_seconds(self) -> list[float]:
        """Seconds of this run's recent full pushes (kept in ``pushes.json``, so a new session starts informed)."""
        return self._ledger.push_seconds()

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
        pushes = self._ledger.pushes()
        if pushes:
            facts["last_push"] = dict(pushes[-1])
        facts["pending"] = published is not None and published not in self._ledger.on_hub()
        return facts

    def close(self, timeout: float | None = None) -> None:
        self._publisher.close(5.0 if timeout is None else timeout)

    # -- commits (on the publisher's threads) -----------------------------------------------

    def _push_full(self, target: Target) -> None:
        if not (self.root / ckpt.CHECKPOINTS / target.name / ckpt.MANIFEST).is_file():
            # Deleted by hand after publish: pushing latest without its folder would break the run on the Hub.
            log.error("%s: %s disappeared from %s before its push; skipping it", self.url, target.name, self.root)
            return
        started = time.monotonic()
        if not self._repo_ready:
            self._client.ensure_repo(self.private)
            self._repo_ready = True
        head = self._holder.checked_head()
        files = self._client.files(head)
        on_hub = checkpoint_names(files)
        operations, size, deleted, added, card = self._commits.full(target, files, on_hub)
        self._client.upload(operations, self.upload_timeout)  # the bulk of the push, holding no lock
        # only this session commits while it holds the lease (its heartbeats meanwhile touch no checkpoint)
        try:
            info = self._holder.commit(lambda head: operations, f"{target.name}" + (" (end of session)" if target.final else ""))
        except Exception as err:
            failure = self._client.failure(err)
            if card is not None and isinstance(failure, HubRefused) and CARD in str(failure):
                self._commits.cards.refused(card, str(failure))  # the retry goes without it
            raise
        if card is not None:
            self._commits.cards.sent(card)
        seconds = time.monotonic() - started
        self._ledger.pushed(target.name, (on_hub - deleted) | added, seconds, size, info.commit_url)
        if target.final:  # before a waiter hears that it landed: its release makes the rewrite (see release())
            self._rewrite_at_release = True
        log.info("%s: pushed %s (%.1f MB in %.1fs)", self.url, target.name, size / 1e6, seconds)

    def _push_heartbeat(self) -> None:
        self._holder.commit(lambda head: self._commits.small(head, with_lease=True, with_card=False), "heartbeat")

    def _rewrite_due(self) -> bool:
        """Free storage now (a history rewrite) during the session? Every ``rewrite_every``, or near the storage cap."""
        if time.monotonic() - self._last_rewrite >= self.rewrite_every:
            return True
        if self.storage_cap_gb is None or self._used_storage is None:
            return False
        return self._used_storage + 2 * self._ledger.last_push_bytes() > self.storage_cap_gb * 1e9

    def _tidy_storage(self, target: Target | None = None) -> None:
        """Free LFS objects of deleted files when due (see the module) and warn before the storage cap; failures only
        warn (a later push retries). ``target``: the push just made (``None``: a push by hand, which counts as final).
        A final push's rewrite waits for the release (see :meth:`release`)."""
        final = target is None or target.final
        if not final and self._rewrite_due() and not self._free_storage():
            return
        try:
            self._used_storage = self._client.used_storage()
        except Exception as err:
            log.warning("%s: could not look up the repo's storage (%s)", self.url, self._client.failure(err))
            return
        if self.storage_cap_gb is not None and self._used_storage is not None:
            cap = self.storage_cap_gb * 1e9
            last_push_bytes = self._ledger.last_push_bytes()
            if self._used_storage + last_push_bytes > cap:
                log.warning(
                    "%s uses %.2f GB; the next push (~%.2f GB) would exceed storage_cap_gb=%.2f. "
                    "Keep fewer checkpoints (keep_last) or raise the cap.",
                    self.url, self._used_storage / 1e9, last_push_bytes / 1e9, self.storage_cap_gb,
                )

    def _free_storage(self, patience: float | None = None) -> bool:
        """A history rewrite that frees LFS objects of deleted files (see the module), waiting at most ``patience``
        seconds for a commit being made; ``False`` when it failed (it only warns: a later push, or the next session's,
        tries again)."""
        try:
            freed = self._holder.free_unreferenced(patience)
        except Exception as err:
            failure = self._client.failure(err)
            if isinstance(failure, HubAuthError):  # e.g. a fine-grained token that may write files but not delete LFS objects
                if not self._told_no_freeing:
                    self._told_no_freeing = True
                    per_push, hours = self._ledger.last_push_bytes(), KAGGLE_SESSION_LIMIT / 3600
                    log.warning(
                        "%s: the token may not free deleted checkpoints' storage (%s): the repo's storage grows by every "
                        "push (~%.2f GB each, ~%.0f GB over a %g-hour Kaggle session of hourly pushes) until a write token frees "
                        "it (`fintts push` with one, or delete the repo's old LFS files in its settings)",
                        self.url, failure, per_push / 1e9, hours * per_push / 1e9, hours,
                    )
            else:
                log.warning("%s: could not free old checkpoints' storage (%s); a later push tries again", self.url, failure)
            return False
        self._last_rewrite = time.monotonic()
        if freed:
            log.info("%s: freed %.1f MB of deleted checkpoints", self.url, freed / 1e6)
        return True

    # -- synchronous pushes (fintts push) -------------------------------------------------------

    def push_now(self) -> str:
        """Push the newest complete local checkpoint synchronously (retrying); return the commit URL."""
        latest = ckpt.latest_complete(self.root, lambda message: log.warning("%s", message))
        if latest is None:
            raise StoreError(f"{self.root} has no complete checkpoint to push")
        self._publisher.published = latest.name
        target = Target(latest.name, self._outbox.snapshot(), final=True)
        try:
            self._retrying(f"push {latest.name}", lambda: self._push_full(target))
        finally:
            target.discard()
        self._tidy_storage()
        return self._ledger.last_commit_url() or ""

    def remote_latest(self) -> str | None:
        """The checkpoint the Hub's ``latest`` names (``None`` for an empty run)."""
        return resume.remote_latest(self._client, self._retrying)


def _read_json(path: Path, default: Any) -> Any:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return default
