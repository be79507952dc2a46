"""A local Hugging Face Hub that the real ``huggingface_hub`` client can talk to.

Tests of the Hub store must not mock the client: the interesting bugs live in how
``HfApi`` and the server actually talk (which call retries by itself, which headers a
download needs, what a half-sent commit leaves behind). So this is a small HTTP server
on 127.0.0.1 speaking just enough of the Hub API for ``create_repo``, ``repo_info``,
``preupload``/``create_commit``, ``list_repo_tree``, ``hf_hub_download``,
``list_lfs_files`` and ``permanently_delete_lfs_files``.

What it models, because the store depends on it:

* **Atomic commits.** The NDJSON payload is read to the end and every blob stored before
  the branch moves; a payload cut short (client killed, connection dropped) changes
  nothing. ``parentCommit`` is honoured (412 when the branch moved), as on the Hub.
* **Storage that outlives deletion.** Every blob referenced by any commit in the history
  counts towards ``usedStorage``; files of at least ``lfs_threshold`` bytes are "LFS
  objects" that only :meth:`permanently_delete_lfs_files` (which rewrites history, so
  commit ids change) frees.
* **Regular uploads, or LFS ones.** ``preupload`` answers ``uploadMode: "regular"`` for
  every file, so the client sends file contents base64 in the commit, unless
  ``lfs_uploads`` is on: then files of at least ``lfs_threshold`` bytes are ``"lfs"`` and
  the client uploads them before the commit through the LFS batch API (basic transfer: one
  ``PUT /lfs-upload/...`` per file), as large files reach the real Hub. No response
  carries ``X-Xet-*`` headers or ``xetHash``: a client with ``hf_xet`` installed needs
  ``HF_HUB_DISABLE_XET`` for LFS uploads here. Downloads are plain GETs.
* **Xet storage that fails** (``xet=True``). A real repo is Xet-backed: ``repo_info`` says
  ``xetEnabled``, and ``huggingface_hub`` (2.4, ``_commit_api._upload_files``) sends every
  ``"lfs"`` file through ``hf_xet`` whenever it is installed: ``hf_xet`` fetches a CAS token from
  ``/api/models/{repo}/xet-write-token/{rev}`` (JSON ``accessToken``/``exp``/``casUrl``, and the
  ``X-Xet-*`` headers ``utils/_xet.py`` reads) and then talks to that CAS itself. This stand-in's
  CAS is ``{endpoint}/cas``; it stores nothing (it speaks no xorb or shard format), so it only
  fails: :meth:`fail_xet` makes the next preuploads answer ``"lfs"`` for large files and the CAS
  answer a status (or drop the connection), and the REAL ``hf_xet`` raises what it raises
  (measured with hf_xet 1.8: ``ConnectionError("Server error: … (503 Service Unavailable) …")``
  for a 5xx, ``ConnectionError("Network error: … (403 Forbidden) …")`` for a 401/403,
  ``ConnectionError("Network error: Request middleware error …")`` for a dropped connection).
  Outside an outage large files go inline, as on a repo without Xet.
* **Card metadata validated on every commit.** A commit carrying ``README.md`` whose YAML front
  matter the Hub does not accept is refused whole (400 "Invalid metadata in README.md"), and
  ``/api/validate-yaml`` answers 400 with the same reasons. The rules here are a few of the
  Hub's: ``license`` from its list, ``base_model`` a repo id (never a local path), ``model-index``
  entries with ``name`` and ``results``; :meth:`refuse_card_field` adds one, as the Hub's rules
  tighten over time.

* **Quotas, tokens and namespaces.** ``storage_limit`` (bytes): a commit that would take the
  namespace's private repos past it is refused ``403 Private repository storage limit reached``
  (huggingface_hub #3048/#3049); ``GET /api/models?author=`` lists the namespace's repos with their
  ``usedStorage``. :meth:`fail` can add the ``RateLimit`` header (``"api";r=0;t=N``, the Hub's
  signal) with or without ``Retry-After``. :meth:`scope_token` makes the token a fine-grained one
  that may write only to some repos and may not create any (403 on ``create_repo``); :meth:`read_token`
  a read one (403 on every write). ``/api/whoami-v2`` says which, as the Hub does (see :meth:`_api_whoami`),
  with the token's name, :attr:`token_name`.
  ``owners_only=True`` refuses, as the Hub does, creating or writing a repo outside the user's
  namespace (off by default: many tests name repos under other users). :meth:`occupy` adds a
  repo that says it holds N bytes (an account's other runs) without storing them.
* **The account's plan, as ``whoami`` says it.** ``/api/whoami-v2`` answers the user's ``isPro``
  and ``orgs``, each org with a ``plan`` (huggingface_hub 2.4, ``hf_api.py``: ``User.is_pro`` from
  ``isPro``, ``Organization.plan`` "e.g. enterprise, team"; huggingface.js ``who-am-i.ts`` marks an
  org's ``plan`` deprecated, so it may be absent): :meth:`set_plan` answers either way, and leaves
  ``isPro`` out for an answer that does not say.
* **A gateway's error page.** ``fail(..., gateway=True)`` answers as a load balancer in front of the
  Hub does when the Hub behind it is down (502/504, huggingface_hub #2375, #2860): an HTML page,
  ``Content-Type: text/html``, no ``X-Error-*`` headers and no JSON. ``HfApi._validate_yaml`` reads
  such a page with ``response.json()`` before the status and raises ``JSONDecodeError``.

Fault switches for tests: :meth:`fail` (status N for the next k requests, optionally with
``Retry-After``, or as a gateway's HTML page; only those whose body holds a pattern, e.g. one
commit's summary), :meth:`stall` (hold requests, optionally after part of the body),
:meth:`hold_rewrites` (a history rewrite that takes long),
:meth:`stop`/:meth:`start` (refuse connections on the same port) and ``token=`` (401
without the right bearer token). :attr:`requests` is the request log, with the
``Authorization`` header replaced by whether it was right.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import http.server
import json
import os
import re
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

INVALID_CREDENTIALS = "Invalid credentials in Authorization header"
GITATTRIBUTES = b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n*.bin filter=lfs diff=lfs merge=lfs -text\n"
_LOGGED_BODY = 4096
#: Some of the licence ids the Hub's card validator accepts (https://huggingface.co/docs/hub/repositories-licenses).
LICENSES = {
    "apache-2.0", "mit", "openrail", "bigscience-openrail-m", "creativeml-openrail-m", "cc0-1.0", "cc-by-4.0",
    "cc-by-sa-4.0", "cc-by-nc-4.0", "cc-by-nc-sa-4.0", "cc-by-nc-nd-4.0", "gpl-3.0", "lgpl-3.0", "bsd-3-clause", "other",
}
_REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")
_CHUNK = 1 << 20
# dataset repos share the model routes (one namespace of names): enough for a corpus on the Hub
_REPO = r"/api/(?:models|datasets)/(?P<ns>[^/]+)/(?P<name>[^/]+)"
_RESOLVE = r"/(?:datasets/)?(?P<ns>[^/]+)/(?P<name>[^/]+)/resolve/(?P<rev>[^/]+)/(?P<path>.+)"
_ROUTES: list[tuple[str, re.Pattern[str], str]] = [
    ("GET", re.compile(r"/api/whoami-v2"), "whoami"),
    ("POST", re.compile(r"/api/validate-yaml"), "validate_yaml"),
    ("POST", re.compile(r"/api/repos/create"), "create_repo"),
    ("GET", re.compile(r"/api/(?P<kind>models|datasets)"), "list_repos"),
    ("GET", re.compile(_REPO), "repo_info"),
    ("GET", re.compile(_REPO + r"/revision/(?P<rev>[^/]+)"), "repo_info"),
    ("POST", re.compile(_REPO + r"/preupload/(?P<rev>[^/]+)"), "preupload"),
    ("POST", re.compile(_REPO + r"/commit/(?P<rev>[^/]+)"), "commit"),
    ("GET", re.compile(_REPO + r"/xet-(?P<kind>read|write)-token/(?P<rev>[^/]+)"), "xet_token"),
    ("GET", re.compile(_REPO + r"/tree/(?P<rev>[^/]+)(?:/(?P<path>.*))?"), "tree"),
    ("GET", re.compile(_REPO + r"/lfs-files"), "lfs_files"),
    ("POST", re.compile(_REPO + r"/lfs-files/batch"), "lfs_delete"),
    ("POST", re.compile(r"/(?P<ns>[^/]+)/(?P<name>[^/]+)\.git/info/lfs/objects/batch"), "lfs_batch"),
    ("PUT", re.compile(r"/lfs-upload/(?P<ns>[^/]+)/(?P<name>[^/]+)/(?P<oid>[0-9a-f]{64})"), "lfs_upload"),
    ("GET", re.compile(_RESOLVE), "resolve"),
    ("HEAD", re.compile(_RESOLVE), "resolve"),
]


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())


def _git_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class _HttpError(Exception):
    """An API error answered as the Hub does: status, ``X-Error-Code`` and a JSON ``error``."""

    def __init__(self, status: int, message: str, code: str | None = None, headers: dict[str, str] | None = None, **fields: Any):
        super().__init__(message)
        self.status, self.message, self.code, self.headers, self.fields = status, message, code, headers or {}, fields


class _Aborted(Exception):
    """The client went away (or the server stopped) before the request was complete."""


@dataclasses.dataclass
class LoggedRequest:
    """One request as the server saw it; ``status`` is ``None`` when it was aborted."""

    method: str
    path: str
    auth: str  # "ok", "missing", "invalid" or "not-required"
    headers: dict[str, str]
    body: bytes = b""
    status: int | None = None


@dataclasses.dataclass
class _Fault:
    kind: str  # "fail" or "stall"
    pattern: re.Pattern[str] | None
    method: str | None
    remaining: int
    status: int = 500
    retry_after: int | None = None
    ratelimit: int | None = None
    seconds: float | None = 0.0
    after_bytes: int = 0
    gateway: bool = False
    body: re.Pattern[bytes] | None = None  # a failure only: the request's body must hold this (in its first 4 KiB)

    def matches(self, method: str, path: str, body: bytes = b"") -> bool:
        return (
            self.remaining > 0
            and (self.method is None or self.method == method)
            and (self.pattern is None or self.pattern.search(path) is not None)
            and (self.body is None or self.body.search(body) is not None)
        )


class _Repo:
    """One model repo: a linear history of commits (path → blob sha256) and the blobs."""

    def __init__(self, folder: Path, state: dict[str, Any]):
        self.folder = folder
        self.state = state

    @classmethod
    def create(cls, folder: Path, repo_id: str, private: bool, kind: str = "model") -> _Repo:
        (folder / "objects").mkdir(parents=True, exist_ok=True)
        state = {"id": repo_id, "type": kind, "private": private, "created": _now(), "history": [], "commits": {}, "blobs": {}}
        repo = cls(folder, state)
        sha = repo.store_blob(GITATTRIBUTES)
        blob = (len(GITATTRIBUTES), _git_sha1(GITATTRIBUTES), ".gitattributes")
        repo.add_commit({".gitattributes": sha}, "initial commit", {sha: blob}, lfs_threshold=1 << 62)
        return repo

    @classmethod
    def load(cls, folder: Path) -> _Repo:
        return cls(folder, json.loads((folder / "state.json").read_text()))

    def save(self) -> None:
        tmp = self.folder / "state.json.tmp"
        tmp.write_text(json.dumps(self.state))
        os.replace(tmp, self.folder / "state.json")

    @property
    def head(self) -> str:
        return self.state["history"][-1]

    def resolve(self, rev: str) -> str:
        if rev == "main":
            return self.head
        if rev in self.state["commits"]:
            return rev
        raise _HttpError(404, f"Invalid rev id: {rev}", "RevisionNotFound")

    def tree(self, rev: str = "main") -> dict[str, str]:
        return self.state["commits"][self.resolve(rev)]["tree"]

    def blob_path(self, sha: str) -> Path:
        return self.folder / "objects" / sha

    def store_blob(self, data: bytes) -> str:
        sha = hashlib.sha256(data).hexdigest()
        path = self.blob_path(sha)
        if not path.exists():
            tmp = path.with_name(f"{sha}.{threading.get_ident()}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)
        return sha

    def add_commit(
        self, tree: dict[str, str], summary: str, new_blobs: dict[str, tuple[int, str, str]], lfs_threshold: int
    ) -> str:
        """Append a commit of ``tree``; ``new_blobs`` maps sha256 → (size, git sha1, first path) of blobs it brings."""
        for sha, (size, git, path) in new_blobs.items():
            self.state["blobs"].setdefault(
                sha, {"size": size, "git": git, "lfs": size >= lfs_threshold, "filename": path, "pushedAt": _now()}
            )
        parent = self.state["history"][-1] if self.state["history"] else None
        commit = {"parent": parent, "summary": summary, "time": _now(), "tree": tree}
        oid = self._oid(commit, len(self.state["history"]))
        self.state["commits"][oid] = commit
        self.state["history"].append(oid)
        # each commit's tree as it landed: freeing LFS objects rewrites history (as on the Hub), this record stays
        self.state.setdefault("landed", []).append({"summary": summary, "tree": dict(tree)})
        self.save()
        return oid

    @staticmethod
    def _oid(commit: dict[str, Any], index: int) -> str:
        text = json.dumps([index, commit["parent"], sorted(commit["tree"].items()), commit["summary"], commit["time"]])
        return hashlib.sha1(text.encode()).hexdigest()

    def referenced(self) -> set[str]:
        return {sha for commit in self.state["commits"].values() for sha in commit["tree"].values()}

    def used_storage(self) -> int:
        return self.state.get("occupied", 0) + sum(self.state["blobs"][sha]["size"] for sha in self.referenced())

    def lfs_objects(self) -> list[dict[str, Any]]:
        referenced = self.referenced()
        return [
            {
                "fileOid": sha, "oid": sha, "filename": meta["filename"], "size": meta["size"],
                "pushedAt": meta["pushedAt"], "ref": "refs/heads/main",
            }
            for sha, meta in sorted(self.state["blobs"].items())
            if meta["lfs"] and sha in referenced
        ]

    def delete_lfs(self, shas: set[str]) -> None:
        """Drop LFS objects and rewrite every commit that referenced them (new commit ids)."""
        history, commits, parent = [], {}, None
        for index, old in enumerate(self.state["history"]):
            commit = dict(self.state["commits"][old])
            commit["tree"] = {p: s for p, s in commit["tree"].items() if s not in shas}
            commit["parent"] = parent
            parent = self._oid(commit, index)
            commits[parent] = commit
            history.append(parent)
        self.state["history"], self.state["commits"] = history, commits
        self.state["rewrites"] = self.state.get("rewrites", 0) + 1
        for sha in shas:
            if self.state["blobs"].get(sha, {}).get("lfs"):
                del self.state["blobs"][sha]
                self.blob_path(sha).unlink(missing_ok=True)
        self.save()


class _HTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], hub: HubServer):
        self.hub = hub
        self.connections: set[socket.socket] = set()
        super().__init__(address, _Handler)

    def process_request(self, request, client_address):  # type: ignore[override]
        with self.hub._lock:
            self.connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request):  # type: ignore[override]
        with self.hub._lock:
            self.connections.discard(request)
        super().shutdown_request(request)


class HubServer:
    """A Hub on ``127.0.0.1`` keeping its repos under ``root``; use as a context manager.

    ``token``: when set, every API and download request needs ``Authorization: Bearer
    <token>`` (401 otherwise). ``lfs_threshold``: files at least this big count as LFS
    objects. ``page_size``: entries per page of tree and LFS listings (``Link`` header).
    """

    def __init__(
        self,
        root: str | Path,
        *,
        token: str | None = None,
        user: str = "fintts-tester",
        lfs_threshold: int = 1024,
        page_size: int = 1000,
        port: int = 0,
        lfs_uploads: bool = False,
        xet: bool = False,
        storage_limit: int | None = None,
        owners_only: bool = False,
    ):
        self.root = Path(root)
        self.token = token
        self.user = user
        self.lfs_threshold = lfs_threshold
        #: files of at least ``lfs_threshold`` bytes are uploaded through the LFS batch API before their commit.
        self.lfs_uploads = lfs_uploads
        #: repos say they are Xet-backed (see the module); :meth:`fail_xet` sends large files to the failing CAS.
        self.xet = xet
        self._xet_outage: list[int] = [0, 503]  # preuploads left that go to the CAS, and the CAS's answer
        self._card_rules: dict[str, str] = {}  # metadata field -> why the Hub now refuses it
        #: bytes the namespace's private repos may hold (``None``: no limit).
        self.storage_limit = storage_limit
        self.owners_only = owners_only
        self._scope: tuple[set[str], bool] | None = None  # a fine-grained token: (repos it may write, may create)
        self._plan: tuple[bool | None, dict[str, str | None]] = (False, {})  # whoami's isPro, and its orgs' plans
        self._read_only = False  # a read token: it writes nothing
        #: the name the person gave the token on huggingface.co (whoami's ``displayName``)
        self.token_name = "fintts-tests"
        self.page_size = page_size
        self.port = port
        self._lock = threading.RLock()
        self._faults: list[_Fault] = []
        self._log: list[LoggedRequest] = []
        self._stall_event = threading.Event()
        self._stalled = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._repos: dict[str, _Repo] = {}
        for state in sorted((self.root / "repos").glob("*/*/state.json")):
            repo = _Repo.load(state.parent)
            self._repos[repo.state["id"]] = repo

    # -- lifecycle --------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> HubServer:
        """Listen (again, on the same port after :meth:`stop`)."""
        if self._httpd is not None:
            return self
        self._stall_event.clear()
        self._httpd = _HTTPServer(("127.0.0.1", self.port), self)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Refuse connections: close the listening socket and drop open connections and stalls."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stall_event.set()
        httpd.shutdown()
        httpd.server_close()
        with self._lock:
            open_connections = list(httpd.connections)
        for conn in open_connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=5)

    @property
    def running(self) -> bool:
        return self._httpd is not None

    def __enter__(self) -> HubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- fault switches -----------------------------------------------------------------

    def fail(
        self, status: int, *, times: int = 1, path: str | None = None, method: str | None = None, retry_after: int | None = None,
        ratelimit: int | None = None, gateway: bool = False, body: str | None = None,
    ) -> None:
        """Answer the next ``times`` requests matching ``path`` (a regex) and ``method`` with ``status``; ``retry_after``
        and ``ratelimit`` (seconds until the quota resets, as the ``RateLimit`` header's ``t=``) add those headers;
        ``gateway``: as a load balancer's HTML error page, not the Hub's JSON (see the module). ``body``: only requests
        whose body holds this regex in its first 4 KiB, where a commit's NDJSON payload begins with its header (its
        ``summary``: huggingface_hub 2.4 ``_commit_api._prepare_commit_payload``), so that one commit is picked out of
        several in flight (a final push's, ``(end of session)``, not a periodic push's), as no path or order does."""
        pattern = re.compile(path) if path else None
        wanted = re.compile(body.encode()) if body else None
        with self._lock:
            self._faults.append(_Fault("fail", pattern, method, times, status=status, retry_after=retry_after,
                                       ratelimit=ratelimit, gateway=gateway, body=wanted))

    def set_plan(self, *, pro: bool | None = False, orgs: dict[str, str | None] | None = None) -> None:
        """What ``whoami`` says of the account: ``pro`` as ``isPro`` (``None``: left out), and ``orgs`` (name → ``plan``,
        ``None``: an org whose answer has no ``plan``)."""
        with self._lock:
            self._plan = (pro, dict(orgs or {}))

    def occupy(self, repo_id: str, nbytes: int, *, private: bool = True) -> None:
        """A repo (created if needed) that counts ``nbytes`` more in its ``usedStorage`` than it holds: another run's
        checkpoints, without writing them."""
        with self._lock:
            if repo_id not in self._repos:
                ns, name = repo_id.split("/")
                self._repos[repo_id] = _Repo.create(self.root / "repos" / ns / name, repo_id, private)
            repo = self._repos[repo_id]
            repo.state["occupied"] = repo.state.get("occupied", 0) + nbytes
            repo.save()

    def scope_token(self, repos: list[str], *, may_create: bool = False) -> None:
        """Make the token a fine-grained one that may write only to ``repos`` (and create repos only if ``may_create``)."""
        with self._lock:
            self._scope = (set(repos), may_create)

    def read_token(self) -> None:
        """Make the token a read one: whoami says role ``read``, and every write or new repo is refused (403)."""
        with self._lock:
            self._read_only = True

    def stall(
        self, seconds: float | None, *, times: int = 1, path: str | None = None, method: str | None = None, after_bytes: int = 0
    ) -> None:
        """Hold matching requests for ``seconds`` (``None``: a stall that never ends by itself), after reading
        ``after_bytes`` of the body, or until :meth:`release` or :meth:`stop`."""
        with self._lock:
            self._stall_event.clear()
            self._stalled.clear()
            pattern = re.compile(path) if path else None
            self._faults.append(_Fault("stall", pattern, method, times, seconds=seconds, after_bytes=after_bytes))

    def hold_rewrites(self, seconds: float | None = None, *, times: int = 1) -> None:
        """Hold the next ``times`` history rewrites for ``seconds`` (``None``: until :meth:`release` or :meth:`stop`),
        then make them: a rewrite the Hub takes long over. ``permanently_delete_lfs_files(rewrite_history=True)`` is one
        POST to ``lfs-files/batch`` per 1000 objects, answered once the history is rewritten (``hf_api.py``, 2.4); how
        long the Hub takes is its own (a repo's history, its load), so tests play a long one. A client that gives up
        meanwhile does not stop it: the rewrite is made when the hold ends, as a request the Hub already took."""
        self.stall(seconds, times=times, path=r"/lfs-files/batch$", method="POST")

    def wait_stalled(self, timeout: float) -> bool:
        """Block until a request is being held by :meth:`stall`."""
        return self._stalled.wait(timeout)

    def release(self) -> None:
        """End every stall now (held requests then continue)."""
        self._stall_event.set()

    def fail_xet(self, status: int = 503, *, times: int = 1) -> None:
        """The next ``times`` preuploads send large files through Xet, whose CAS answers ``status`` to every request
        (``0``: drops the connection); needs ``xet=True``."""
        with self._lock:
            self._xet_outage = [times, status]

    def refuse_card_field(self, field: str, reason: str = "is no longer accepted") -> None:
        """From now on a card whose metadata has ``field`` is refused (a rule the Hub tightened)."""
        with self._lock:
            self._card_rules[field] = reason

    def card_problems(self, content: str) -> list[str]:
        """Why the Hub would refuse a ``README.md`` of ``content`` (empty: it accepts it)."""
        import yaml

        if not content.startswith("---"):
            return []
        try:
            meta = yaml.safe_load(content.split("\n---", 1)[0][3:]) or {}
        except yaml.YAMLError as err:
            return [f"the YAML front matter does not parse: {err}"]
        if not isinstance(meta, dict):
            return ["the YAML front matter is not a mapping"]
        problems = []
        licence = meta.get("license")
        if licence is not None and licence not in LICENSES:
            problems.append(f'"license" must be one of the Hub\'s licence ids, not {licence!r}')
        bases = meta.get("base_model")
        for base in bases if isinstance(bases, list) else [bases] if bases is not None else []:
            if not isinstance(base, str) or not _REPO_ID.fullmatch(base) or ".." in base:
                problems.append(f'"base_model" must be a model id on the Hub (user/name), not {base!r}')
        for entry in meta.get("model-index") or []:
            if not isinstance(entry, dict) or "name" not in entry or not isinstance(entry.get("results"), list):
                problems.append('"model-index" entries need a "name" and a list of "results"')
        with self._lock:
            problems += [f'"{field}" {reason}' for field, reason in self._card_rules.items() if field in meta]
        return problems

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()
            self._xet_outage = [0, 503]

    @property
    def requests(self) -> list[LoggedRequest]:
        with self._lock:
            return list(self._log)

    # -- inspection (what a test asserts on) ----------------------------------------

    def _repo(self, repo_id: str) -> _Repo:
        try:
            return self._repos[repo_id]
        except KeyError:
            raise _HttpError(404, "Repository not found", "RepoNotFound") from None

    def repos(self) -> list[str]:
        """The ids of the repos made so far."""
        with self._lock:
            return sorted(self._repos)

    def head(self, repo_id: str) -> str:
        with self._lock:
            return self._repo(repo_id).head

    def files(self, repo_id: str, revision: str = "main") -> dict[str, bytes]:
        """Every file of ``revision`` with its content."""
        with self._lock:
            repo = self._repo(repo_id)
            tree = dict(repo.tree(revision))
        return {path: repo.blob_path(sha).read_bytes() for path, sha in tree.items()}

    def landed(self, repo_id: str) -> list[dict[str, Any]]:
        """Every commit's ``summary`` and ``tree`` (path → sha256) as it landed, oldest first, whatever
        :meth:`permanently_delete_lfs_files` later rewrote (then a file's content may be gone: :meth:`blob`)."""
        with self._lock:
            return [dict(item, tree=dict(item["tree"])) for item in self._repo(repo_id).state.get("landed", [])]

    def blob(self, repo_id: str, sha: str) -> bytes | None:
        """A blob's content, or ``None`` once freed."""
        with self._lock:
            path = self._repo(repo_id).blob_path(sha)
        try:
            return path.read_bytes()
        except FileNotFoundError:
            return None

    def commits(self, repo_id: str) -> list[dict[str, Any]]:
        """The history of ``main``, oldest first: ``oid``, ``summary``, ``time``, ``paths``."""
        with self._lock:
            repo = self._repo(repo_id)
            commits = repo.state["commits"]
            return [
                {"oid": oid, "summary": commits[oid]["summary"], "paths": sorted(commits[oid]["tree"])}
                for oid in repo.state["history"]
            ]

    def rewrites(self, repo_id: str) -> int:
        """How many times :meth:`permanently_delete_lfs_files` rewrote the repo's history."""
        with self._lock:
            return self._repo(repo_id).state.get("rewrites", 0)

    def used_storage(self, repo_id: str) -> int:
        with self._lock:
            return self._repo(repo_id).used_storage()

    # -- request handling -------------------------------------------------------------

    def _take_fault(self, kind: str, method: str, path: str, body: bytes = b"") -> _Fault | None:
        """The first ``kind`` fault (``stall``: before the body is read; ``fail``: after, ``body`` its first bytes) this
        request meets, counted off."""
        with self._lock:
            fault = next((f for f in self._faults if f.kind == kind and f.matches(method, path, body)), None)
            if fault is not None:
                fault.remaining -= 1
            self._faults = [f for f in self._faults if f.remaining > 0]
        return fault

    def _hold(self, fault: _Fault) -> None:
        self._stalled.set()
        self._stall_event.wait(fault.seconds)
        if not self.running:
            raise _Aborted("server stopped during a stall")

    def _check_auth(self, header: str | None) -> str:
        if self.token is None:
            return "not-required"
        if header is None:
            return "missing"
        return "ok" if header == f"Bearer {self.token}" else "invalid"

    def _record(self, entry: LoggedRequest) -> None:
        with self._lock:
            self._log.append(entry)

    def _dispatch(self, method: str, url: str, body: BinaryIO, headers: Any = None) -> tuple[int, dict[str, str], bytes | Path]:
        parts = urlsplit(url)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        for route_method, pattern, name in _ROUTES:
            match = pattern.fullmatch(parts.path)
            if match and route_method == method:
                args = {k: unquote(v) if v is not None else None for k, v in match.groupdict().items()}
                return getattr(self, f"_api_{name}")(body=body, query=query, url=parts, method=method, headers=headers, **args)
        raise _HttpError(404, f"no route for {method} {parts.path}")

    # -- API ----------------------------------------------------------------------------

    def _api_whoami(self, **_: Any):
        """The token's owner and ``auth.accessToken``: its ``displayName`` and ``role`` (``read``, ``write``, ``fineGrained``).

        huggingface_hub 2.4 ``_login._validate_and_save_token`` reads both (a login is stored under its ``displayName`` and
        its ``role`` logged as the permission). A fine-grained token's ``fineGrained`` lists, per entity (a repo
        ``owner/name``, or a user's namespace), its permissions (``repo.write``: may write it) in ``scoped``, and
        account-wide ones in ``global``: the Hub does not document it (huggingface.js ``who-am-i.ts`` types only
        ``displayName`` and ``role``); this is the shape the clients that read it agree on. The user's ``isPro`` and its
        orgs' ``plan`` as :meth:`set_plan` says (the account's storage plan).
        """
        with self._lock:
            access: dict[str, Any] = {"displayName": self.token_name, "role": "read" if self._read_only else "write"}
            if self._scope is not None:
                repos, may_create = self._scope
                writes = ["repo.content.read", "repo.write"]
                scoped = [{"entity": {"type": "model", "name": repo}, "permissions": writes} for repo in sorted(repos)]
                if may_create:  # creating a repo takes write on the namespace
                    scoped.append({"entity": {"type": "user", "name": self.user}, "permissions": writes})
                access |= {"role": "fineGrained", "fineGrained": {"canReadGatedRepos": False, "global": [], "scoped": scoped}}
            pro, plans = self._plan
        auth = {"type": "access_token", "accessToken": access}
        orgs = [{"type": "org", "name": name, **({"plan": plan} if plan is not None else {})} for name, plan in plans.items()]
        answer = {"type": "user", "name": self.user, "fullname": self.user, "orgs": orgs, "auth": auth}
        return _json(200, answer if pro is None else {**answer, "isPro": pro})

    def _api_validate_yaml(self, body: BinaryIO, headers: Any, **_: Any):
        """JSON ``errors``/``warnings`` (what ``HfApi._validate_yaml`` reads before every commit carrying README.md),
        or the reasons as text when asked for (``RepoCard.validate``'s ``Accept: text/plain``)."""
        problems = self.card_problems(json.loads(body.read() or b"{}").get("content", ""))
        if not problems:
            return _json(200, {"errors": [], "warnings": []})
        if "text/plain" in (headers.get("Accept") or ""):
            return 400, {"Content-Type": "text/plain", "X-Error-Code": "BadRequest"}, "\n".join(problems).encode()
        return _json(400, {"errors": [{"message": p} for p in problems], "warnings": []}, {"X-Error-Code": "BadRequest"})

    def _api_create_repo(self, body: BinaryIO, **_: Any):
        payload = json.loads(body.read() or b"{}")
        if payload.get("type", "model") not in ("model", "dataset"):
            raise _HttpError(400, "this test server only hosts model and dataset repos")
        repo_id = f"{payload.get('organization') or self.user}/{payload['name']}"
        namespace = repo_id.split("/")[0]
        with self._lock:
            if self._read_only or self._scope is not None and not self._scope[1] or self.owners_only and namespace != self.user:
                raise _HttpError(403, f'You don\'t have the rights to create a model under the namespace "{namespace}"')
            if repo_id in self._repos:
                raise _HttpError(409, "You already created this model repo", url=f"{self.endpoint}/{repo_id}")
            private = payload.get("visibility", "private" if payload.get("private") else "public") == "private"
            ns, name = repo_id.split("/")
            self._repos[repo_id] = _Repo.create(self.root / "repos" / ns / name, repo_id, private, payload.get("type", "model"))
        return _json(200, {"url": f"{self.endpoint}/{repo_id}", "name": repo_id, "id": repo_id})

    def _api_list_repos(self, kind: str, query: dict[str, str], **_: Any):
        """The repos of one kind (``/api/models`` or ``/api/datasets``), each listed once across the two."""
        author = query.get("author")
        with self._lock:
            items = [
                {"id": rid, "private": repo.state["private"], "usedStorage": repo.used_storage()}
                for rid, repo in sorted(self._repos.items())
                if (author is None or rid.split("/")[0] == author) and repo.state.get("type", "model") + "s" == kind
            ]
        return _json(200, items)

    def _may_write(self, repo_id: str) -> None:
        """Refuse a write the token may not make (a scoped token's other repos; another user's namespace)."""
        with self._lock:
            scoped_out = self._read_only or self._scope is not None and repo_id not in self._scope[0]
        if scoped_out or self.owners_only and repo_id.split("/")[0] != self.user:
            raise _HttpError(403, f"You don't have write access to {repo_id}")

    def _check_storage_limit(self, repo: _Repo, new_blobs: dict[str, tuple[int, str, str]]) -> None:
        if self.storage_limit is None or not repo.state["private"]:
            return
        namespace = repo.state["id"].split("/")[0]
        used = sum(r.used_storage() for rid, r in self._repos.items() if rid.split("/")[0] == namespace and r.state["private"])
        fresh = sum(size for sha, (size, _, _) in new_blobs.items() if sha not in repo.state["blobs"])
        if used + fresh > self.storage_limit:
            raise _HttpError(403, "Private repository storage limit reached", "StorageLimitReached")

    def _api_repo_info(self, ns: str, name: str, rev: str = "main", **_: Any):
        with self._lock:
            repo = self._repo(f"{ns}/{name}")
            oid = repo.resolve(rev)
            tree = repo.state["commits"][oid]["tree"]
            info = {
                "id": repo.state["id"],
                "author": ns,
                "sha": oid,
                "private": repo.state["private"],
                "createdAt": repo.state["created"],
                "lastModified": repo.state["commits"][oid]["time"],
                "siblings": [{"rfilename": path} for path in sorted(tree)],
                "usedStorage": repo.used_storage(),
                "xetEnabled": self.xet,
                "tags": [],
            }
        return _json(200, info)

    def _api_preupload(self, ns: str, name: str, rev: str, body: BinaryIO, **_: Any):
        payload = json.loads(body.read())
        self._may_write(f"{ns}/{name}")
        with self._lock:
            repo = self._repo(f"{ns}/{name}")
            tree = repo.tree(rev)
            blobs = repo.state["blobs"]
            to_cas = self.xet and self._xet_outage[0] > 0
            if to_cas:
                self._xet_outage[0] -= 1
            files = [
                {
                    "path": f["path"],
                    "uploadMode": "lfs" if (self.lfs_uploads or to_cas) and int(f.get("size", 0)) >= self.lfs_threshold else "regular",
                    "shouldIgnore": False,
                    "oid": blobs[tree[f["path"]]]["git"] if f["path"] in tree else None,
                }
                for f in payload["files"]
            ]
            head = repo.head
        return _json(200, {"files": files, "commitOid": head})

    def _api_xet_token(self, ns: str, name: str, kind: str, **_: Any):
        """A CAS token for the repo, as JSON (what ``hf_xet`` reads) and as the ``X-Xet-*`` headers (``huggingface_hub``)."""
        with self._lock:
            self._repo(f"{ns}/{name}")
        if not self.xet:
            raise _HttpError(400, "this repo is not Xet-backed")
        cas, expires = f"{self.endpoint}/cas", int(time.time()) + 3600
        headers = {"X-Xet-Cas-Url": cas, "X-Xet-Access-Token": f"xet-{kind}-token", "X-Xet-Token-Expiration": str(expires)}
        return _json(200, {"accessToken": f"xet-{kind}-token", "exp": expires, "casUrl": cas}, headers)

    def _api_lfs_batch(self, ns: str, name: str, body: BinaryIO, **_: Any):
        payload = json.loads(body.read())
        if payload.get("operation") != "upload" or "basic" not in payload.get("transfers", ["basic"]):
            raise _HttpError(400, "this test server only takes basic LFS uploads")
        with self._lock:
            blobs = self._repo(f"{ns}/{name}").state["blobs"]
            objects = []
            for item in payload["objects"]:
                entry = {"oid": item["oid"], "size": int(item["size"]), "authenticated": True}
                if item["oid"] not in blobs:
                    entry["actions"] = {"upload": {"href": f"{self.endpoint}/lfs-upload/{ns}/{name}/{item['oid']}"}}
                objects.append(entry)
        return _json(200, {"transfer": "basic", "objects": objects, "hash_algo": "sha256"})

    def _api_lfs_upload(self, ns: str, name: str, oid: str, body: BinaryIO, **_: Any):
        data = body.read()
        if hashlib.sha256(data).hexdigest() != oid:
            raise _HttpError(400, f"the uploaded content does not match its oid {oid}")
        with self._lock:
            repo = self._repo(f"{ns}/{name}")
            repo.store_blob(data)
            blob = {"size": len(data), "git": _git_sha1(data), "lfs": True, "filename": "", "pushedAt": _now()}
            repo.state["blobs"].setdefault(oid, blob)
            repo.save()
        return 200, {}, b""

    def _api_commit(self, ns: str, name: str, rev: str, body: BinaryIO, **_: Any):
        if rev != "main":
            raise _HttpError(400, "this test server only commits to main")
        repo_id = f"{ns}/{name}"
        with self._lock:
            repo = self._repo(repo_id)
        self._may_write(repo_id)
        header: dict[str, Any] = {}
        operations: list[tuple[str, str, str | None]] = []
        new_blobs: dict[str, tuple[int, str, str]] = {}
        for raw in body:
            if not raw.strip():
                continue
            item = json.loads(raw)
            key, value = item["key"], item["value"]
            if key == "header":
                header = value
                continue
            path = value["path"]
            if path.startswith("/") or ".." in path.split("/"):
                raise _HttpError(400, f"invalid path {path!r}")
            if key == "file":
                data = base64.b64decode(value["content"]) if value.get("encoding") == "base64" else value["content"].encode()
                problems = self.card_problems(data.decode("utf-8", errors="replace")) if path == "README.md" else []
                if problems:
                    raise _HttpError(400, "Invalid metadata in README.md. " + "; ".join(problems), "BadRequest")
                sha = repo.store_blob(data)
                new_blobs[sha] = (len(data), _git_sha1(data), path)
                operations.append(("add", path, sha))
            elif key == "lfsFile":
                operations.append(("add", path, value["oid"]))
            elif key in ("deletedFile", "deletedFolder"):
                operations.append((key, path, None))
            else:
                raise _HttpError(400, f"unknown commit operation {key!r}")
        with self._lock:
            parent = header.get("parentCommit")
            if parent is not None and not repo.head.startswith(parent):
                raise _HttpError(412, "A commit has happened since. Please refresh and try again.")
            self._check_storage_limit(repo, new_blobs)
            tree = dict(repo.tree())
            for kind, path, sha in operations:
                if kind == "add":
                    if sha not in repo.state["blobs"] and sha not in new_blobs:
                        raise _HttpError(400, f"LFS object {sha} of {path} was never uploaded")
                    if sha in repo.state["blobs"] and not repo.state["blobs"][sha]["filename"]:
                        repo.state["blobs"][sha]["filename"] = path  # uploaded through the LFS API: named by its first commit
                    tree[path] = sha  # type: ignore[assignment]
                elif kind == "deletedFile":
                    if tree.pop(path, None) is None:
                        raise _HttpError(404, f"A file with this name doesn't exist: {path}", "EntryNotFound")
                else:
                    prefix = path.rstrip("/") + "/"
                    doomed = [p for p in tree if p.startswith(prefix)]
                    if not doomed:
                        raise _HttpError(404, f"A folder with this name doesn't exist: {path}", "EntryNotFound")
                    for p in doomed:
                        del tree[p]
            oid = repo.add_commit(tree, header.get("summary") or "commit", new_blobs, self.lfs_threshold)
        url = f"{self.endpoint}/{repo_id}/commit/{oid}"
        return _json(200, {"success": True, "commitOid": oid, "commitUrl": url, "hookOutput": ""})

    def _api_tree(self, ns: str, name: str, rev: str, path: str | None, query: dict[str, str], url: Any, **_: Any):
        recursive = query.get("recursive", "false").lower() in ("true", "1")
        prefix = (path or "").strip("/")
        with self._lock:
            repo = self._repo(f"{ns}/{name}")
            tree = dict(repo.tree(rev))
            blobs = repo.state["blobs"]
        base = prefix + "/" if prefix else ""
        entries: dict[str, dict[str, Any]] = {}
        for file_path, sha in tree.items():
            if not file_path.startswith(base):
                continue
            rest = file_path[len(base):].split("/")
            depth = len(rest) if recursive else 1
            for i in range(1, min(depth, len(rest) - 1) + 1):
                folder = base + "/".join(rest[:i])
                folder_oid = hashlib.sha1(folder.encode()).hexdigest()
                entries.setdefault(folder, {"type": "directory", "oid": folder_oid, "path": folder})
            if recursive or len(rest) == 1:
                meta = blobs[sha]
                entry = {"type": "file", "oid": meta["git"], "size": meta["size"], "path": file_path}
                if meta["lfs"]:
                    entry["lfs"] = {"oid": sha, "size": meta["size"], "pointerSize": 134}
                entries[file_path] = entry
        if prefix and not entries:
            raise _HttpError(404, f"{prefix} does not exist on main", "EntryNotFound")
        return self._page([entries[k] for k in sorted(entries)], query, url)

    def _api_lfs_files(self, ns: str, name: str, query: dict[str, str], url: Any, **_: Any):
        with self._lock:
            items = self._repo(f"{ns}/{name}").lfs_objects()
        return self._page(items, query, url)

    def _api_lfs_delete(self, ns: str, name: str, body: BinaryIO, **_: Any):
        payload = json.loads(body.read())
        self._may_write(f"{ns}/{name}")
        shas = set(payload["deletions"]["sha"])
        with self._lock:
            self._repo(f"{ns}/{name}").delete_lfs(shas)
        return _json(200, {})

    def _api_resolve(self, ns: str, name: str, rev: str, path: str, method: str, **_: Any):
        with self._lock:
            repo = self._repo(f"{ns}/{name}")
            oid = repo.resolve(rev)
            sha = repo.state["commits"][oid]["tree"].get(path)
            if sha is None:
                raise _HttpError(404, f"Entry not found: {path}", "EntryNotFound", {"X-Repo-Commit": oid})
            meta = repo.state["blobs"][sha]
        etag = sha if meta["lfs"] else meta["git"]
        headers = {"X-Repo-Commit": oid, "ETag": f'"{etag}"', "Content-Type": "application/octet-stream"}
        if meta["lfs"]:
            headers.update({"X-Linked-Etag": f'"{sha}"', "X-Linked-Size": str(meta["size"])})
        return 200, headers, repo.blob_path(sha)

    def _page(self, items: list[dict[str, Any]], query: dict[str, str], url: Any):
        start = int(query.get("cursor", "0"))
        headers = {}
        if start + self.page_size < len(items):
            next_query = dict(query, cursor=str(start + self.page_size))
            headers["Link"] = f'<{self.endpoint}{url.path}?{urlencode(next_query)}>; rel="next"'
        return _json(200, items[start:start + self.page_size], headers)


def _json(status: int, obj: Any, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    return status, {"Content-Type": "application/json", **(headers or {})}, json.dumps(obj).encode()


def _gateway_page(status: int) -> tuple[int, dict[str, str], bytes]:
    """A load balancer's error page (as nginx or an AWS load balancer writes one): HTML, none of the Hub's headers."""
    title = f"{status} {http.HTTPStatus(status).phrase}"
    page = f"<html>\r\n<head><title>{title}</title></head>\r\n<body>\r\n<center><h1>{title}</h1></center>\r\n</body>\r\n</html>\r\n"
    return status, {"Content-Type": "text/html"}, page.encode()


class _Body:
    """The request body as a file, read from the socket up front (spooled to disk)."""

    def __init__(self, handler: _Handler, length: int, stall: _Fault | None, hub: HubServer):
        self.file = tempfile.SpooledTemporaryFile(max_size=8 * _CHUNK)
        self.excerpt = b""
        remaining, done = length, 0
        if stall is not None and stall.after_bytes == 0:
            hub._hold(stall)
        while remaining > 0:
            want = min(_CHUNK, remaining)
            if stall is not None and stall.after_bytes and done < stall.after_bytes:
                want = min(want, stall.after_bytes - done)
            chunk = handler.rfile.read(want)
            if not chunk:
                raise _Aborted(f"body ended after {done} of {length} bytes")
            if len(self.excerpt) < _LOGGED_BODY:
                self.excerpt += chunk[: _LOGGED_BODY - len(self.excerpt)]
            self.file.write(chunk)
            done += len(chunk)
            remaining -= len(chunk)
            if stall is not None and stall.after_bytes and done == stall.after_bytes:
                hub._hold(stall)
        self.file.seek(0)

    def read(self, size: int = -1) -> bytes:
        return self.file.read(size)

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.file)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence stderr
        pass

    def do_GET(self) -> None:
        self._handle("GET")

    def do_HEAD(self) -> None:
        self._handle("HEAD")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def _handle(self, method: str) -> None:
        hub = self.server.hub
        headers = {k: v for k, v in self.headers.items() if k.lower() != "authorization"}
        entry = LoggedRequest(method, self.path, hub._check_auth(self.headers.get("Authorization")), headers)
        try:
            stall = hub._take_fault("stall", method, urlsplit(self.path).path)
            body = _Body(self, int(self.headers.get("Content-Length") or 0), stall, hub)
            entry.body = body.excerpt
            fail = hub._take_fault("fail", method, urlsplit(self.path).path, body.excerpt)
            if self.path.startswith("/cas/"):  # the Xet CAS: authorised by its own token, and failing (see fail_xet)
                status_now = hub._xet_outage[1]
                if status_now == 0:
                    raise _Aborted("the CAS dropped the connection")
                raise _HttpError(status_now, f"CAS storage answered {status_now}")
            if fail is not None and fail.gateway:
                status, out_headers, payload = _gateway_page(fail.status)
            elif fail is not None:
                extra = {"Retry-After": str(fail.retry_after)} if fail.retry_after is not None else {}
                if fail.ratelimit is not None:
                    extra |= {"RateLimit": f'"api";r=0;t={fail.ratelimit}', "RateLimit-Policy": '"fixed window";"api";q=128;w=3600'}
                raise _HttpError(fail.status, f"injected failure {fail.status}", headers=extra)
            # an LFS upload URL is pre-signed, as the real storage's are: it needs no token
            elif entry.auth in ("missing", "invalid") and not self.path.startswith(("/api/validate-yaml", "/lfs-upload/")):
                raise _HttpError(401, INVALID_CREDENTIALS)
            else:
                status, out_headers, payload = hub._dispatch(method, self.path, body, self.headers)
        except _Aborted:
            self.close_connection = True
            hub._record(entry)
            return
        except _HttpError as err:
            status, out_headers, payload = _json(err.status, {"error": err.message, **err.fields}, err.headers)
            out_headers["X-Error-Message"] = err.message
            if err.code:
                out_headers["X-Error-Code"] = err.code
        except Exception as err:  # a bug in the stand-in must look like a server error, not hang the client
            status, out_headers, payload = _json(500, {"error": f"{type(err).__name__}: {err}"})
        entry.status = status
        hub._record(entry)
        try:
            self._respond(method, status, out_headers, payload)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _respond(self, method: str, status: int, headers: dict[str, str], payload: bytes | Path) -> None:
        size = payload.stat().st_size if isinstance(payload, Path) else len(payload)
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(size))
        self.end_headers()
        if method == "HEAD":
            return
        if isinstance(payload, Path):
            with open(payload, "rb") as handle:
                for block in iter(lambda: handle.read(_CHUNK), b""):
                    self.wfile.write(block)
        else:
            self.wfile.write(payload)
