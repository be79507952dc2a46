"""A local Kaggle that the real ``kaggle`` client talks to: kernels pushed, run, followed.

``fintts kaggle push/run/status/wheels`` must be tested with the client they ship with,
not a mock of it: what it validates before sending, how it serialises requests and parses
answers, and how it uploads files are part of what is being tested. The client talks JSON
over HTTP (``POST /api/v1/<service>/<method>``) to an endpoint it picks from
``KAGGLE_API_ENVIRONMENT``; with ``LOCALHOST`` that is ``http://localhost``, and this server
receives those requests as the HTTP proxy named by ``HTTP_PROXY`` (``NO_PROXY`` keeps
``127.0.0.1``, where a :class:`~fintts_stand_ins.HubServer` listens, out of it). :meth:`env`
returns those variables and credentials; a process started with them is the real client
pointed here, exactly as the ``kaggle`` command line would be.

What it speaks, and models:

* **Kernels.** ``SaveKernel`` records the push (:attr:`pushes`: the request as sent) as a new
  version and starts a *session*: ``session(push, version)`` runs in a thread — the test's
  stand-in for Kaggle executing the notebook, e.g. writing the run's ``status.json`` to the
  Hub — and returns ``(ok, log)``. ``GetKernelSessionStatus`` answers ``QUEUED`` until the
  session starts, ``RUNNING`` while it runs, then ``COMPLETE`` or ``ERROR``;
  ``ListKernelSessionOutput`` returns the log as Kaggle does (JSON lines of
  ``stream_name``/``time``/``data``). Like Kaggle, a push whose slug is not its title's is
  refused. A push with ``kernelExecutionType: QUICK_SAVE`` (the client's ``no_run``, the web
  UI's Quick Save) saves a version and runs nothing: a kernel that never ran is ``NEW_SCRIPT``.
  :meth:`create_kernel` makes a kernel exist as a quick save would, without a push;
  :meth:`attach_secret` binds a secret as the editor does, and :meth:`secrets` says what a
  version's session was passed.
* **GPU quota.** ``GetAcceleratorQuotaStatistics`` reports :attr:`used_hours` (hours this
  week's quota counted before, or besides, the sessions run here; tests may raise it from a
  session to stand for its length) plus the session hours run here as ``timeUsed``,
  :attr:`reserved_hours` as ``timeReserved``, against ``quota_hours``.
* **Datasets.** ``GetDatasetStatus``, ``GetDataset``, ``StartBlobUpload`` with the file ``PUT`` to
  the URL it returns, ``CreateDataset`` and ``CreateDatasetVersion``; :attr:`datasets` holds every
  version's files as uploaded (a folder sent with ``dir_mode="zip"`` is one ``NAME.zip``), and
  :meth:`mount` writes a version out as a session sees it under its input folder, where the
  era mounts it (Kaggle unpacks each uploaded zip into a folder of its name). **Who can see a
  dataset** (:attr:`public`): ``CreateDataset`` makes it public unless the request says
  ``isPrivate`` (kagglesdk 0.1.38 ``ApiCreateDatasetRequest``; the client sends it for
  ``dataset_create_new(public=False)`` and, serialising without default values, leaves a ``false``
  out); ``CreateDatasetVersion`` never changes it (``ApiCreateDatasetVersionRequestBody`` has no
  such field); ``GetDataset`` answers it as ``ApiDataset.isPrivate``, left out when false as
  kagglesdk's ``to_json`` leaves a default out (its ``from_dict`` reads an absent and a ``false``
  one alike). A version sent with ``deleteOldVersions`` (``dataset_create_version(...,
  delete_old_versions=True)``, ``kaggle datasets version -d``) leaves it the dataset's only one.
* **Credentials**, the three kinds the client sends (kaggle 2.2.5 ``KaggleApi.authenticate``
  tries them in this order, and :meth:`env` sets up each): a new-style **API token**
  (``KAGGLE_API_TOKEN``, sent as ``Authorization: Bearer``; ``authenticate`` first asks
  ``security.OAuthService/IntrospectToken`` whether it is active), a legacy **key** (HTTP basic
  auth with ``user``/``key``), and an **OAuth login** (``kaggle auth login``): a refresh token in
  ``~/.kaggle/credentials.json`` beside a short-lived access token, sent as a Bearer. An access
  token lasts :attr:`access_token_seconds` (12 hours: what kagglesdk 0.1.38 asks for,
  ``KaggleCredentials.DEFAULT_ACCESS_TOKEN_EXPIRATION``) and a new one comes from
  ``users.AccountService/GenerateAccessToken`` for the refresh token, which the client calls only
  inside ``authenticate`` (``_authenticate_with_oauth_creds`` → ``KaggleCredentials.get_access_token``)
  and only once its copy is 30 minutes past its expiry (``access_token_has_expired``). Anything
  else is a 401. Switches: :meth:`expire_access_tokens` ends every access token issued so far
  (their 12 hours are over, while the client may still take its copy for valid), and
  :meth:`revoke` refuses every credential the account had (a key or token expired on
  kaggle.com, a login whose refresh token was revoked): a 401 that no refresh cures.

**Two eras**, switched per test with ``era=``; where Kaggle's behaviour changed, or where
reports disagree with what it used to do, each answer below cites its source:

* ``era="before"`` (the default: Kaggle as the client's tests and fintts's first tests saw it):
  an unknown kernel or dataset is a 404; a dataset is mounted at ``/kaggle/input/<slug>``; a
  secret attached in the editor stays bound to every later version; a kernel saved but never
  run answers ``NEW_SCRIPT``.
* ``era="2026"``: an unknown kernel or dataset is a **403** (Kaggle/kaggle-cli PR #951: the API
  answers 401/403 for a slug it will not confirm, and ``KaggleApi.kernels_status`` turns that
  into ``ValueError("Cannot access kernel … Permission 'kernels.get' was denied")``; Kaggle staff
  in kaggle-cli #548: a 403 can mean "not found"); a kernel only ever quick-saved answers its
  status with the same 403 (undocumented: the harshest of NEW_SCRIPT/404/403); datasets are
  mounted at ``/kaggle/input/datasets/<owner>/<slug>`` (diagnostic kernels of 2026-06 and
  2026-09: ``os.listdir('/kaggle/input') == ['datasets']``); **every push drops the secret's
  binding** (``ApiSaveKernelRequest`` has no field for secrets; kaggle-cli #582, PR #944 closed
  unmerged; users driving notebooks through the API report each pushed version loses it); and
  right after a push the kernel's status (asked without a version) is still the previous
  version's for :attr:`stale_reads` reads.

In both eras: ``ListKernels`` finds a user's kernels by ``search`` (what ``kaggle kernels list
--user U --search S`` sends); a status asked for ``owner/slug/N`` (``versionLabel: vN``, the
client's ``_kernel_version_label``) is that version's; a dataset is still processing for
:attr:`processing_reads` status reads after each upload, and a push naming a dataset that is
absent or still processing gets it back in ``invalidDatasetSources`` (the client prints "not
valid dataset sources"); a dataset version whose top level holds more than :data:`MAX_FLAT_FILES`
files is refused (reported in issue 41; zip them).

Fault switches for tests: :meth:`fail` answers the next calls of a method with an HTTP
status (optionally with ``Retry-After``), :meth:`drop` closes their connections unanswered,
:meth:`stall` answers them only after a delay; :meth:`expire_access_tokens` and :meth:`revoke`
(above); :meth:`stay_running` keeps versions' state ``RUNNING`` for good, whatever their sessions
did; :meth:`dataset_state` puts a dataset's newest version in another state (``FAILED``,
``DELETED``: kagglesdk's ``DatabundleVersionStatus``); :attr:`calls` counts every API call by
method, faulted ones included.

**Output.** Kaggle keeps a completed version's ``/kaggle/working`` as its output (the version's
Output tab; ``kaggle kernels output``): :meth:`keep_output` gives a version the files of a folder
as that output, listed by ``ListKernelSessionOutput`` (``files``: ``fileName`` relative to
``/kaggle/working``, subfolders included, kaggle-cli #173; paged by ``pageSize``/``pageToken``, as
the client asks since kaggle-cli #664) once the version is ``COMPLETE``, each file downloaded with
a plain ``GET`` of its ``url`` (kaggle 2.2.5 ``KaggleApi.kernels_output``: ``requests.get``, no
credentials, status checked as of kaggle-cli PR #1176).
"""

from __future__ import annotations

import base64
import collections
import dataclasses
import http.server
import itertools
import json
import re
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, unquote, urlsplit

#: ``session(push, version) -> (ok, log)``: what a pushed version does while Kaggle "runs" it.
Session = Callable[[dict, int], "tuple[bool, str]"]
ERAS = ("before", "2026")
#: Kaggle refuses a dataset version whose folder holds more files than this at its top level (zip them).
MAX_FLAT_FILES = 1000
API = re.compile(r"/api/v1/(?P<service>[\w.]+)/(?P<method>\w+)")
UPLOAD = re.compile(r"/upload/(?P<token>\w+)")
OUTPUT = re.compile(r"/output/(?P<slug>[\w-]+)/(?P<version>\d+)/(?P<name>.+)")
#: The calls whose credentials are in their body: a refresh token to trade, a token to look at (the client sends the
#: first with no ``Authorization`` at all: kagglesdk 0.1.38 ``KaggleCredentials`` uses the client ``authenticate`` built
#: before it had a token).
BODY_CREDENTIALS = frozenset({"GenerateAccessToken", "IntrospectToken"})
#: How long an OAuth access token lasts: what kagglesdk 0.1.38 asks for (``KaggleCredentials.DEFAULT_ACCESS_TOKEN_EXPIRATION``).
ACCESS_TOKEN_SECONDS = 12 * 3600


def _slugify(title: str) -> str:
    from slugify import slugify  # the client's own slug rule (python-slugify, a dependency of kaggle)

    return slugify(title)


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _HTTPServer

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def do_GET(self) -> None:
        """A file of a version's output, as ``kernels_output`` fetches it (the ``url`` that ``ListKernelSessionOutput`` gave)."""
        data = self.server.kaggle._output_file(unquote(urlsplit(self.path).path))
        self.send_response(200 if data is not None else 404)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(data or b"")))
        self.end_headers()
        self.wfile.write(data or b"")

    def _handle(self) -> None:
        kaggle = self.server.kaggle
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path = urlsplit(self.path).path  # as a proxy, the request line carries the whole URL
        fault = kaggle._take_fault(match["method"]) if (match := API.fullmatch(path)) else None
        if fault is not None and fault.seconds:
            time.sleep(fault.seconds)
            fault = None  # then answered as usual
        if fault is not None and fault.status is None:  # a connection lost before any answer
            self.close_connection = True
            self.connection.shutdown(2)
            return
        if fault is not None:
            data = json.dumps({"code": fault.status, "message": "injected by KaggleServer.fail"}).encode()
            self.send_response(fault.status)
            if fault.retry_after is not None:
                self.send_header("Retry-After", str(fault.retry_after))
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        if self.command == "PUT" and (match := UPLOAD.fullmatch(path)):
            status, answer = kaggle._upload(match["token"], body)
        elif not kaggle._authorized(self.headers.get("Authorization") or "", match["method"] if match else ""):
            status, answer = 401, {"code": 401, "message": "Unauthenticated"}
        elif match := API.fullmatch(path):
            status, answer = kaggle._call(match["service"], match["method"], json.loads(body or b"{}"))
        else:
            status, answer = 404, {"code": 404, "message": f"no route for {self.command} {path}"}
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _HTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, kaggle: KaggleServer):
        self.kaggle = kaggle
        super().__init__(("127.0.0.1", 0), _Handler)


@dataclasses.dataclass
class _Fault:
    method: str | None  # None: any
    times: int
    status: int | None  # None: drop the connection
    retry_after: int | None = None
    seconds: float = 0.0  # a stall: answer as usual after this long


class KaggleServer:
    """Kaggle on ``127.0.0.1`` for the real client (:meth:`env`); use as a context manager."""

    def __init__(self, *, user: str = "fintts-tester", key: str = "0123456789abcdef" * 2,
                 session: Session | None = None, quota_hours: float = 30.0, era: str = "before"):
        assert era in ERAS, f"era is one of {ERAS}"
        self.user, self.key, self.era = user, key, era
        #: unversioned status reads right after a push that still answer the previous version's state (2026: reported)
        self.stale_reads = 1 if era == "2026" else 0
        #: status reads of a dataset after each upload that answer "still processing"
        self.processing_reads = 0
        #: a secret attached in the editor stays bound to later pushed versions (2026: dropped; reports disagree, so a
        #: test may switch it mid-way)
        self.secrets_survive_push = era != "2026"
        self.session = session or (lambda push, version: (True, "done\n"))
        self.quota_hours = quota_hours
        self.used_hours = 0.0
        self.reserved_hours = 0.0
        #: the seconds sessions run here count against the quota (off when a test counts a session's length in used_hours)
        self.count_session_time = True
        self.pushes: list[dict[str, Any]] = []
        self.datasets: dict[str, list[dict[str, bytes]]] = {}
        #: the datasets anyone may see (every other one is private)
        self.public: set[str] = set()
        self._basic_auth = "Basic " + base64.b64encode(f"{user}:{key}".encode()).decode()
        self._lock = threading.Lock()
        #: slug -> {"versions": [{"status", "log", "secrets"}], "secrets": labels bound now, "stale": reads left}
        self._kernels: dict[str, dict[str, Any]] = {}
        self._processing: dict[str, int] = {}  # dataset ref -> status reads left before it is READY
        self._dataset_states: dict[str, str] = {}  # dataset ref -> the state its newest version is in, when not READY
        #: a new-style API token of the account (``KAGGLE_API_TOKEN``), accepted as a Bearer like an access token
        self.api_token = f"KGAT_{key}"
        #: what ``GenerateAccessToken`` answers as ``expiresIn`` (the client's copy expires that long after it asked)
        self.access_token_seconds = ACCESS_TOKEN_SECONDS
        self._refresh_tokens: set[str] = set()
        self._access_tokens: dict[str, bool] = {}  # OAuth access token -> still valid
        self._revoked = False
        self._running_forever: set[int] = set()  # version numbers whose state stays RUNNING
        self._blobs: dict[str, dict[str, Any]] = {}
        self._session_seconds = 0.0
        self._tokens = itertools.count(1)
        self._httpd: _HTTPServer | None = None
        self._faults: list[_Fault] = []
        self.calls: collections.Counter[str] = collections.Counter()

    # -- lifecycle --------------------------------------------------------------------

    def __enter__(self) -> KaggleServer:
        self._httpd = _HTTPServer(self)
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    @property
    def proxy(self) -> str:
        assert self._httpd is not None, "start the server first (with KaggleServer(...) as kaggle:)"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def env(self, credentials: str = "key", home: Any = None) -> dict[str, str]:
        """The environment that points the real ``kaggle`` client (in a new process) here, with credentials.

        ``credentials``: ``"key"`` (the legacy ``KAGGLE_USERNAME``/``KAGGLE_KEY``), ``"token"`` (``KAGGLE_API_TOKEN``) or
        ``"oauth"``: what ``kaggle auth login`` leaves, ``home``/.kaggle/credentials.json written by the client's own
        ``KaggleCredentials.save``, for a process whose ``HOME`` is ``home`` (the caller sets it, and leaves out any
        ``KAGGLE_*`` credentials of its own: the client would take those first).
        """
        where = {"KAGGLE_API_ENVIRONMENT": "LOCALHOST", "HTTP_PROXY": self.proxy, "http_proxy": self.proxy,
                 "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}
        if credentials == "key":
            return where | {"KAGGLE_USERNAME": self.user, "KAGGLE_KEY": self.key}
        if credentials == "token":
            return where | {"KAGGLE_API_TOKEN": self.api_token}
        assert credentials == "oauth" and home is not None, "credentials is key, token or oauth (with home)"
        self._login(home)
        return where

    def _login(self, home: Any) -> None:
        """What ``kaggle auth login`` leaves in ``home``: a refresh token and a fresh access token, in the client's format."""
        from datetime import datetime, timedelta, timezone
        from pathlib import Path

        from kagglesdk.kaggle_creds import KaggleCredentials  # the client's own writer of credentials.json

        with self._lock:
            refresh, access = f"oauth-refresh-{next(self._tokens)}", f"oauth-access-{next(self._tokens)}"
            self._refresh_tokens.add(refresh)
            self._access_tokens[access] = True
        expires = datetime.now(timezone.utc) + timedelta(seconds=self.access_token_seconds)
        KaggleCredentials(None, refresh_token=refresh, access_token=access, access_token_expiration=expires,  # type: ignore[arg-type]
                          username=self.user, scopes=["resources.admin:*"]).save(str(Path(home) / ".kaggle" / "credentials.json"))

    def _authorized(self, header: str, method: str) -> bool:
        """Whether a request with this ``Authorization`` may call ``method``."""
        if method in BODY_CREDENTIALS:
            return True
        scheme, _, value = header.partition(" ")
        with self._lock:
            if scheme == "Basic":
                return header == self._basic_auth and not self._revoked
            if scheme == "Bearer":
                return (value == self.api_token and not self._revoked) or self._access_tokens.get(value, False)
        return False

    @property
    def sessions_started(self) -> int:
        """How many pushes started a session (quick saves start none)."""
        return sum(1 for push in self.pushes if push.get("kernelExecutionType") != "QUICK_SAVE")

    def create_kernel(self, kernel: str) -> None:
        """Make ``owner/slug`` exist and never run, with no version yet (a notebook made on kaggle.com, not saved)."""
        owner, _, slug = kernel.partition("/")
        assert owner == self.user, f"kernels here belong to {self.user}"
        with self._lock:
            self._kernels.setdefault(slug, {"versions": [], "secrets": set(), "stale": 0, "title": slug})

    def attach_secret(self, kernel: str, label: str = "HF_TOKEN") -> None:
        """What a person does in ``kernel``'s editor: Add-ons → Secrets, ticked for this notebook."""
        with self._lock:
            self._kernels[kernel.partition("/")[2]]["secrets"].add(label)

    def secrets(self, kernel: str, version: int) -> set[str]:
        """The secrets Kaggle passes to ``kernel``'s session of ``version`` (bound when it was pushed)."""
        with self._lock:
            return set(self._kernels[kernel.partition("/")[2]]["versions"][version - 1]["secrets"])

    def input_path(self, ref: str) -> str:
        """Where a session finds dataset ``ref`` under its input folder, in this era (relative to ``/kaggle/input``)."""
        owner, _, slug = ref.partition("/")
        # 2026: /kaggle/input/datasets/<owner>/<slug> (diagnostic kernels of 2026-06 and 2026-09); before: /kaggle/input/<slug>
        return f"datasets/{owner}/{slug}" if self.era == "2026" else slug

    def mount(self, ref: str, input_root: Any, version: int = -1) -> Any:
        """Write dataset ``ref``'s ``version`` (default the newest) under ``input_root`` as a session sees it; its folder.

        ``input_root`` stands for ``/kaggle/input``: the dataset lands where :meth:`input_path` says, each uploaded zip
        unpacked into a folder of its name.
        """
        import io
        import zipfile
        from pathlib import Path

        target = Path(input_root) / self.input_path(ref)
        target.mkdir(parents=True, exist_ok=True)
        for name, data in self.datasets[ref][version].items():
            if name.endswith(".zip"):
                with zipfile.ZipFile(io.BytesIO(data)) as archive:
                    archive.extractall(target / name[: -len(".zip")])
            else:
                (target / name).write_bytes(data)
        return target

    def add_dataset(self, ref: str, files: dict[str, bytes] | None = None, *, public: bool = False) -> None:
        """Make dataset ``ref`` exist with one version of ``files`` (as uploaded), ready to mount; private unless ``public``."""
        with self._lock:
            self.datasets.setdefault(ref, []).append(dict(files or {"README.md": b"stand-in\n"}))
            if public:
                self.public.add(ref)

    def expire_access_tokens(self) -> None:
        """Every OAuth access token issued so far expires (its 12 hours are over): each is a 401 from now on.

        The client's copy in credentials.json still says when it expires: a client whose copy is less than 30 minutes
        past that (kagglesdk 0.1.38 ``access_token_has_expired``; here its copy may even look hours from it) sends it
        again, and does not refresh it when it authenticates. The refresh token still buys a new one.
        """
        with self._lock:
            self._access_tokens = dict.fromkeys(self._access_tokens, False)

    def revoke(self) -> None:
        """Every credential of the account is refused from now on: the key, the API token, the login's refresh token and
        its access tokens (expired on kaggle.com → Settings → API, or ``kaggle auth revoke``): a 401 nothing cures."""
        with self._lock:
            self._revoked = True
            self._refresh_tokens.clear()
            self._access_tokens = dict.fromkeys(self._access_tokens, False)

    def stay_running(self, *versions: int) -> None:
        """The state of these versions (of any kernel) says ``RUNNING`` for good once they start, whatever their sessions
        do: a session whose end Kaggle never reports (its output is not served either: the version never completes)."""
        with self._lock:
            self._running_forever.update(versions)

    def dataset_state(self, ref: str, state: str) -> None:
        """Dataset ``ref``'s newest version is in ``state`` (a ``DatabundleVersionStatus`` name: ``FAILED``, ``DELETED``,
        ``REPROCESSING``...) from now on, as ``GetDatasetStatus`` answers; ``READY`` undoes it."""
        from kagglesdk.datasets.types.dataset_enums import DatabundleVersionStatus  # the states Kaggle's API names

        assert state in DatabundleVersionStatus.__members__, f"{state} is not a DatabundleVersionStatus"
        with self._lock:
            self._dataset_states[ref] = state

    def keep_output(self, kernel: str, version: int, folder: Any) -> None:
        """The files under ``folder`` are ``kernel``'s ``version``'s output (its ``/kaggle/working``), served once the
        version is complete. Read when asked for, so a session may call this before it has written them."""
        from pathlib import Path

        with self._lock:
            self._kernels[kernel.partition("/")[2]]["versions"][version - 1]["output"] = Path(folder)

    def wait_idle(self, timeout: float = 30.0) -> None:
        """Block until no pushed version is still queued or running."""
        deadline = time.time() + timeout
        while any(v["status"] in ("QUEUED", "RUNNING") for k in list(self._kernels.values()) for v in k["versions"]):
            if time.time() > deadline:
                raise TimeoutError("a session is still running")
            time.sleep(0.02)

    # -- fault switches -----------------------------------------------------------------

    def fail(self, status: int, *, method: str | None = None, times: int = 1, retry_after: int | None = None) -> None:
        """Answer the next ``times`` calls of ``method`` (e.g. ``GetKernelSessionStatus``; ``None``: any) with ``status``."""
        with self._lock:
            self._faults.append(_Fault(method, times, status, retry_after))

    def drop(self, *, method: str | None = None, times: int = 1) -> None:
        """Close the connection of the next ``times`` calls of ``method`` without answering."""
        with self._lock:
            self._faults.append(_Fault(method, times, None))

    def stall(self, seconds: float, *, method: str | None = None, times: int = 1) -> None:
        """Answer the next ``times`` calls of ``method`` only after ``seconds``."""
        with self._lock:
            self._faults.append(_Fault(method, times, None, seconds=seconds))

    def _take_fault(self, method: str) -> _Fault | None:
        with self._lock:
            self.calls[method] += 1
            for fault in self._faults:
                if fault.times > 0 and fault.method in (None, method):
                    fault.times -= 1
                    return fault
        return None

    # -- the API ----------------------------------------------------------------------

    def _call(self, service: str, method: str, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        handler = getattr(self, f"_{method}", None)
        if handler is None:
            return 404, {"code": 404, "message": f"{service}/{method} is not modelled by KaggleServer"}
        with self._lock:
            return handler(request)

    def _absent(self, what: str) -> tuple[int, dict[str, Any]]:
        """How Kaggle answers for a kernel or dataset it will not confirm: 404 before, 403 in 2026 (kaggle-cli PR #951, #548)."""
        if self.era == "2026":
            return 403, {"code": 403, "message": f"Permission '{what}' was denied"}
        return 404, {"code": 404, "message": f"{what.split('.')[0][:-1]} not found"}

    def _SaveKernel(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        owner, _, slug = request.get("slug", "").partition("/")
        if owner != self.user:
            return 403, {"code": 403, "message": f"{self.user} may not push kernels of {owner}"}
        if _slugify(request.get("newTitle") or slug) != slug:
            return 409, {"code": 409, "message": f"the title {request.get('newTitle')!r} does not resolve to {slug!r}"}
        self.pushes.append(request)
        kernel = self._kernels.setdefault(slug, {"versions": [], "secrets": set(), "stale": 0})
        kernel["title"] = request.get("newTitle") or slug
        if not self.secrets_survive_push:  # the binding does not survive a push (kaggle-cli #582, PR #944 closed unmerged)
            kernel["secrets"] = set()
        url = f"https://www.kaggle.com/code/{owner}/{slug}"
        invalid = [ref for ref in request.get("datasetDataSources", []) if ref not in self.datasets or self._processing.get(ref)]
        quick = request.get("kernelExecutionType") == "QUICK_SAVE"  # saved, nothing runs
        version = len(kernel["versions"]) + 1
        kernel["versions"].append({"status": "NEW_SCRIPT" if quick else "QUEUED", "log": "", "secrets": set(kernel["secrets"]),
                                   "ran": not quick, "number": version, "output": None})
        if not quick:
            kernel["stale"] = self.stale_reads
            threading.Thread(target=self._run, args=(slug, request, version), daemon=True).start()
        return 200, {"ref": f"/code/{owner}/{slug}", "url": url, "versionNumber": version, "error": "",
                     "invalidDatasetSources": invalid}

    def _run(self, slug: str, push: dict[str, Any], version: int) -> None:
        with self._lock:
            self._kernels[slug]["versions"][version - 1]["status"] = "RUNNING"
        started = time.time()
        try:
            ok, log = self.session(push, version)
        except Exception as err:  # a session that raises is a session that failed
            ok, log = False, f"{type(err).__name__}: {err}\n"
        with self._lock:
            self._session_seconds += (time.time() - started) if self.count_session_time else 0.0
            lines = [{"stream_name": "stdout", "time": 0.0, "data": line} for line in log.splitlines(keepends=True)]
            self._kernels[slug]["versions"][version - 1].update(status="COMPLETE" if ok else "ERROR", log=json.dumps(lines))

    def _version(self, request: dict[str, Any]) -> dict[str, Any] | None:
        """The version a status or log request asks for: ``versionLabel`` ``vN``, else the newest that ran (``None``: none)."""
        kernel = self._kernels.get(request.get("kernelSlug", "")) if request.get("userName") == self.user else None
        if kernel is None:
            return None
        label = request.get("versionLabel")
        if label:
            number = int(label.lstrip("v")) if label.lstrip("v").isdigit() else 0
            return kernel["versions"][number - 1] if 0 < number <= len(kernel["versions"]) else None
        ran = [v for v in kernel["versions"] if v["ran"]]
        if kernel["stale"] and len(ran) > 1:  # reported: the previous session's state for a moment after a push
            kernel["stale"] -= 1
            return ran[-2]
        if ran:
            return ran[-1]
        # saved, never run: NEW_SCRIPT before; in 2026 undocumented (NEW_SCRIPT, 404 or 403): the 403 is modelled
        return None if self.era == "2026" else {"status": "NEW_SCRIPT", "log": ""}

    def _state(self, version: dict[str, Any]) -> str:
        """The state Kaggle reports for ``version``: its own, or RUNNING for good once it started (:meth:`stay_running`)."""
        stuck = version.get("number") in self._running_forever and version["status"] not in ("QUEUED", "NEW_SCRIPT")
        return "RUNNING" if stuck else version["status"]

    def _GetKernelSessionStatus(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        version = self._version(request)
        if version is None:
            return self._absent("kernels.get")
        state = self._state(version)
        message = "the notebook raised an exception" if state == "ERROR" else ""
        return 200, {"status": state, "failureMessage": message}

    def _ListKernelSessionOutput(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """The version's log, and its output's files (a completed version's only) a page at a time."""
        version = self._version(request)
        if version is None:
            return self._absent("kernels.get")
        folder = version.get("output")
        names = sorted(path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file()) \
            if folder is not None and self._state(version) == "COMPLETE" else []
        start = int(request.get("pageToken") or 0)
        end = start + int(request.get("pageSize") or 20)
        slug = request.get("kernelSlug", "")
        files = [{"fileName": name, "url": f"http://localhost/output/{slug}/{version['number']}/{quote(name)}"}
                 for name in names[start:end]]
        return 200, {"files": files, "log": version["log"], "nextPageToken": str(end) if end < len(names) else ""}

    def _output_file(self, path: str) -> bytes | None:
        """The bytes of the output file at ``path`` (``/output/<slug>/<version>/<name>``), ``None`` when there is none."""
        match = OUTPUT.fullmatch(path)
        with self._lock:
            kernel = self._kernels.get(match["slug"]) if match else None
            number = int(match["version"]) if match else 0
            version = kernel["versions"][number - 1] if kernel and 0 < number <= len(kernel["versions"]) else None
            folder = version.get("output") if version and self._state(version) == "COMPLETE" else None
        target = folder / match["name"] if folder is not None and match else None
        if target is None or not target.resolve().is_relative_to(folder.resolve()) or not target.is_file():
            return None
        return target.read_bytes()

    def _ListKernels(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """A user's kernels whose slug or title holds ``search`` (private ones only for their owner)."""
        user, search = request.get("user") or "", (request.get("search") or "").lower()
        found = [{"ref": f"{self.user}/{slug}", "title": kernel.get("title", slug), "author": self.user}
                 for slug, kernel in sorted(self._kernels.items())
                 if user in ("", self.user) and (search in slug or search in kernel.get("title", slug).lower())]
        return 200, {"kernels": found, "nextPageToken": ""}

    def _GetAcceleratorQuotaStatistics(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        used = self.used_hours * 3600 + self._session_seconds
        quota = {"timeUsed": f"{used:.3f}s", "timeReserved": f"{self.reserved_hours * 3600:.3f}s",
                 "totalTimeAllowed": f"{self.quota_hours * 3600:.3f}s"}
        return 200, {"quotaRefreshTime": "2030-01-06T00:00:00.000Z", "gpuQuota": quota}

    def _GetDatasetStatus(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        ref = f"{request.get('ownerSlug')}/{request.get('datasetSlug')}"
        if ref not in self.datasets:
            return self._absent("datasets.get")
        if self._processing.get(ref):
            self._processing[ref] -= 1
            return 200, {"status": "BLOBS_RECEIVED"}
        return 200, {"status": self._dataset_states.get(ref, "READY")}

    def _GenerateAccessToken(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """A new access token for an OAuth login's refresh token (kagglesdk 0.1.38 ``KaggleCredentials.generate_access_token``)."""
        if request.get("refreshToken") not in self._refresh_tokens:
            return 401, {"code": 401, "message": "Unauthenticated: the refresh token is not valid"}
        token = f"oauth-access-{next(self._tokens)}"
        self._access_tokens[token] = True
        return 200, {"token": token, "expiresIn": self.access_token_seconds, "userName": self.user}

    def _IntrospectToken(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """Whether a token is active, and whose: an inactive one is ``active: false`` (RFC 7662, section 2.2; kaggle 2.2.5
        ``KaggleApi._introspect_token`` reads ``active`` and falls back to the other credentials when it is false)."""
        token = request.get("token", "")
        active = (token == self.api_token and not self._revoked) or self._access_tokens.get(token, False)
        return 200, {"active": active, "username": self.user} if active else {"active": False}

    def _GetDataset(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """``ApiDataset``: its ref, title, newest version and ``isPrivate`` (left out when false, as kagglesdk writes it)."""
        ref = f"{request.get('ownerSlug')}/{request.get('datasetSlug')}"
        if ref not in self.datasets:
            return self._absent("datasets.get")
        dataset = {"ref": ref, "title": request.get("datasetSlug"), "currentVersionNumber": len(self.datasets[ref])}
        return 200, dataset if ref in self.public else {**dataset, "isPrivate": True}

    def _StartBlobUpload(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        token = f"blob{next(self._tokens)}"
        self._blobs[token] = {"name": request["name"], "data": None}
        return 200, {"token": token, "createUrl": f"http://localhost/upload/{token}"}

    def _upload(self, token: str, body: bytes) -> tuple[int, dict[str, Any]]:
        with self._lock:
            if token not in self._blobs:
                return 404, {"code": 404, "message": "no such upload"}
            self._blobs[token]["data"] = body
        return 200, {}

    def _new_version(self, ref: str, files: list[dict[str, Any]], *, alone: bool = False) -> dict[str, Any]:
        """Add a version of ``files`` to ``ref``; ``alone``: delete the older ones (``deleteOldVersions``)."""
        blobs = [self._blobs.get(f.get("token", "")) for f in files]
        if any(blob is None or blob["data"] is None for blob in blobs):
            return {"status": "error", "error": "a file was not uploaded"}
        if len(blobs) > MAX_FLAT_FILES:
            return {"status": "error", "error": f"a dataset folder may hold at most {MAX_FLAT_FILES} files at its top level; zip them"}
        versions = self.datasets.setdefault(ref, [])
        if alone:
            versions.clear()
        versions.append({blob["name"]: blob["data"] for blob in blobs})
        self._processing[ref] = self.processing_reads
        return {"ref": ref, "url": f"https://www.kaggle.com/datasets/{ref}", "status": "ok", "error": ""}

    def _CreateDataset(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        ref = f"{request.get('ownerSlug')}/{request.get('slug')}"
        if request.get("ownerSlug") != self.user:
            return 403, {"code": 403, "message": f"{self.user} may not create datasets of {request.get('ownerSlug')}"}
        if ref in self.datasets:
            return 200, {"status": "error", "error": f"{ref} already exists"}
        answer = self._new_version(ref, request.get("files", []))
        if answer["status"] == "ok" and not request.get("isPrivate"):
            self.public.add(ref)
        return 200, answer

    def _CreateDatasetVersion(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        ref = f"{request.get('ownerSlug')}/{request.get('datasetSlug')}"
        if ref not in self.datasets:
            return self._absent("datasets.get")
        body = request.get("body", {})
        return 200, self._new_version(ref, body.get("files", []), alone=bool(body.get("deleteOldVersions")))


#: The variable through which a Kaggle session's processes reach its secrets (a JWT Kaggle sets in the kernel's environment).
SECRETS_VARIABLE = "KAGGLE_USER_SECRETS_TOKEN"


def secrets_module(folder: Any, secrets: dict[str, str]) -> Any:
    """A ``kaggle_secrets`` module in ``folder`` (put it on the session's ``PYTHONPATH``) that passes ``secrets``.

    Kaggle's image has ``kaggle_secrets.UserSecretsClient``; ``get_secret(label)`` of a label not
    attached to the notebook (or not passed to this version) raises its ``BackendError`` ("No user
    secrets exist for kernel id … and label …"), as here. The client reads the session's key to its
    secrets from :data:`SECRETS_VARIABLE` when it is made and raises ``CredentialError`` without one
    (Kaggle/docker-python, patches/kaggle_secrets.py, ``UserSecretsClient.__init__``), as here: a
    process started without that variable reaches no secret.
    """
    from pathlib import Path

    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    (target / "kaggle_secrets.py").write_text(
        f"import os\n\nSECRETS = {secrets!r}\n\n\nclass BackendError(Exception):\n    pass\n\n\n"
        "class CredentialError(Exception):\n    pass\n\n\nclass UserSecretsClient:\n"
        "    def __init__(self):\n"
        f"        if os.getenv({SECRETS_VARIABLE!r}) is None:\n"
        f"            raise CredentialError('A JWT Token is required to use the UserSecretsClient, but none found in "
        f"environment variable {SECRETS_VARIABLE}')\n\n"
        "    def get_secret(self, label):\n        if label not in SECRETS:\n"
        "            raise BackendError(f'No user secrets exist for kernel id 1 and label {label}')\n"
        "        return SECRETS[label]\n", encoding="utf-8")
    return target
