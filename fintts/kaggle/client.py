"""The one place fintts creates the ``kaggle`` client, and the errors it turns into ours.

``import kaggle`` is not harmless: the package authenticates at import time, and with no
credentials prints a page of help to stdout (with ``KAGGLE_API_TOKEN`` set it even asks the
network). So the client is imported only by the commands that talk to Kaggle, with that
output swallowed, and authenticated here with a message that says what to do. Credentials
come from where the ``kaggle`` command line looks: ``KAGGLE_USERNAME``/``KAGGLE_KEY``,
``~/.kaggle/kaggle.json``, ``KAGGLE_API_TOKEN`` or ``~/.kaggle/access_token``; fintts never
prints or writes them.

Where the client sends its requests is the client's own business: ``KAGGLE_API_ENVIRONMENT``
and the usual proxy variables are honoured as the ``kaggle`` command honours them, which is
how :class:`fintts_stand_ins.KaggleServer` stands in for Kaggle in tests.

A chain of sessions outlives an OAuth login's access token (12 hours), and the client refreshes
one only when it authenticates (below, :func:`reauthenticate`): so the client :func:`connect`
returns authenticates again, once, when Kaggle answers a call with a 401, and sends it again.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import io
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from fintts.errors import StoreError
from fintts.train.retry import Backoff

_T = TypeVar("_T")

NO_CREDENTIALS = (
    "No Kaggle credentials. At https://www.kaggle.com/settings → API: Generate New Token, then save it as "
    "~/.kaggle/access_token (chmod 600) or set KAGGLE_API_TOKEN; or, with a legacy key (kaggle.json), save it as "
    "~/.kaggle/kaggle.json (chmod 600), or set KAGGLE_USERNAME and KAGGLE_KEY; or log in with kaggle auth login"
)


#: Kaggle's answers worth asking again: a time-out, too many requests, its own and its gateways' failures.
TRANSIENT = frozenset({408, 429, 500, 502, 503, 504})
#: How kaggle ≥ 2.2.5 words a 401/403 of a kernel's status or log (``KaggleApi.kernels_status``, ``kernels_logs``).
DENIED = "Permission 'kernels.get' was denied"
#: What to do about each refusal. 401: the credentials were refused even after authenticating again (:class:`Reauthenticating`
#: refreshes an OAuth login's access token on a 401, so what is left is a key or token expired on kaggle.com, or a
#: login whose refresh token was revoked). 409 on a push: the notebook's editor holds a session of its own (Kaggle
#: refuses a new version then).
HINTS = {
    401: "Kaggle did not accept the credentials, even read again and with an OAuth login's access token refreshed: the "
         "API token or key was expired on kaggle.com, or the login was revoked. Authenticate again (kaggle auth login), "
         "or make a new API token (kaggle.com/settings → API → Generate New Token, saved as ~/.kaggle/access_token or set "
         "as KAGGLE_API_TOKEN); then run the same command: it picks the run up",
    403: "these credentials may not do that (Kaggle also answers 403 for a name it does not know)",
    404: "check the name (user/slug)",
    409: "the notebook's editor has a session running: stop the notebook's session in the editor (the power button, or "
         "kaggle.com → Your Work → the notebook → Stop session), then run this again",
}
#: Only these mean Kaggle did not act on the request, so a push (not idempotent) is sent again on them alone.
NOT_ACTED_ON = frozenset({429})


class KaggleError(StoreError):
    """Kaggle refused or could not be reached; the message says what happened and what to do.

    ``status``: the HTTP status Kaggle answered with, when it answered. ``transient``: asking
    again later may work. ``retry_after``: the seconds Kaggle asked to wait, when it did.
    """

    def __init__(self, message: str, status: int | None = None, *, transient: bool = False, retry_after: float | None = None):
        super().__init__(message)
        self.status = status
        self.transient = transient
        self.retry_after = retry_after


class KaggleUnreachable(KaggleError):
    """Kaggle could not be asked whose the credentials are (no network): they were not refused, only not checked."""


class NoKaggleCredentials(KaggleError):
    """No Kaggle credentials on this machine (the message says where to put them)."""

    def __init__(self) -> None:
        super().__init__(NO_CREDENTIALS)


#: The oldest ``kaggle`` client fintts works with: ``kernels_push(no_run=True)`` (Quick Save, kaggle-cli PR #1185,
#: 2.2.5), ``quota_view`` (2.2.1), ``kernels_logs`` (2.0.2), ``kernels_status`` of ``owner/slug/N``. It needs Python
#: ≥ 3.11; on 3.10 pip resolves ``kaggle`` to 1.7.4.5, which has none of these and raises OSError at import with a
#: new-style API token (kaggle-cli #886).
MIN_KAGGLE = (2, 2, 5)
TOO_OLD = ("fintts kaggle needs the kaggle client {want} or newer, and this Python has {have}: pip install -U 'kaggle>={want}' "
           "(it needs Python 3.11 or newer{python})")


def _client_problem() -> str | None:
    """Why the installed ``kaggle`` client will not do (too old, or absent), before it is imported; ``None``: it will."""
    want = ".".join(map(str, MIN_KAGGLE))
    python = "" if sys.version_info >= (3, 11) else f"; this is Python {sys.version_info[0]}.{sys.version_info[1]}"
    try:
        have = importlib.metadata.version("kaggle")
    except importlib.metadata.PackageNotFoundError:
        return TOO_OLD.format(want=want, have="none", python=python)
    numbers = tuple(int(part) if part.isdigit() else 0 for part in have.split(".")[:3])
    return TOO_OLD.format(want=want, have=f"kaggle {have}", python=python) if numbers < MIN_KAGGLE else None


def connect() -> Any:
    """An authenticated ``kaggle.api.kaggle_api_extended.KaggleApi`` (:class:`Reauthenticating`), or :class:`KaggleError`."""
    problem = _client_problem()
    if problem:
        raise KaggleError(problem)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            from kaggle.api.kaggle_api_extended import KaggleApi  # [train] only; it reads the credentials when imported
        except ImportError as err:
            raise KaggleError(f"the kaggle package cannot be imported ({err}); pip install -U kaggle six") from None
        api = KaggleApi()
    _authenticate(api)
    return Reauthenticating(api)


#: Kaggle could not be asked whose the API token is (no network, a proxy that refuses): the credentials may be fine.
UNREACHABLE = ("could not reach Kaggle to ask whose the API token is ({error}): check the network (and any proxy), "
               "then run this again")
#: A credential Kaggle refused: told apart from none at all, which :class:`NoKaggleCredentials` says where to put.
REFUSED_TOKEN = "Kaggle says the API token in {source} is not active (IntrospectToken). "


def _authenticate(api: Any) -> None:
    """``api.authenticate()``, its output swallowed; :class:`KaggleError` when no credentials are left to use.

    kaggle 2.2.5 ``KaggleApi.authenticate`` tries an API token (``KAGGLE_API_TOKEN``, ``~/.kaggle/access_token``: asked
    of ``IntrospectToken`` first, and passed over when Kaggle says it is not active), a legacy key, then an OAuth login
    (``~/.kaggle/credentials.json``, refreshed there when expired), and ends the process (``exit(1)``) when none is left.
    """
    import requests  # comes with kaggle ([train]), imported by now
    from kagglesdk import get_access_token_from_env  # comes with kaggle, imported by now; where the client finds a token

    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            api.authenticate()
    except SystemExit:
        token, source = get_access_token_from_env()
        if token:
            raise KaggleError(REFUSED_TOKEN.format(source=source) + HINTS[401], 401) from None
        raise NoKaggleCredentials() from None
    except requests.HTTPError as err:  # _introspect_token passes a 401 on (it turns only 400/403/404 into "not active")
        if err.response is None or err.response.status_code != 401:
            raise
        raise KaggleError(f"Kaggle refused the credentials when asked who they are (401); {HINTS[401]}", 401) from None
    except requests.RequestException as err:
        # kaggle 2.2.5 KaggleApi._authenticate_with_access_token asks IntrospectToken who an API token
        # (KAGGLE_API_TOKEN, ~/.kaggle/access_token) belongs to, and _introspect_token catches only HTTPError: with no
        # network the client's ConnectionError (a ProxyError behind a proxy) comes out of authenticate()
        raise KaggleUnreachable(UNREACHABLE.format(error=type(err).__name__), transient=True) from None


def reauthenticate(api: Any) -> None:
    """Authenticate ``api`` (the client's ``KaggleApi``) again after Kaggle answered a call with a 401.

    Reading the credentials again picks up a new login, key or token, and an OAuth access token the client knows has
    expired: kagglesdk 0.1.38 refreshes one only inside ``authenticate`` (``KaggleApi._authenticate_with_oauth_creds``
    → ``KaggleCredentials.get_access_token``), and only once its copy is 30 minutes past its expiry
    (``access_token_has_expired``). Until then ``authenticate`` hands back the very token Kaggle refused, so that one is
    refreshed here as the client would refresh it (``KaggleCredentials.refresh_access_token``: ``GenerateAccessToken``
    for the refresh token, sent, as ``authenticate`` sends it, without the refused token, and saved to
    ``~/.kaggle/credentials.json``), and read again. :class:`KaggleError` (401) when that fails.
    """
    import requests  # comes with kaggle ([train]), imported by now
    from kagglesdk import KaggleCredentials  # comes with kaggle, imported by now: the client's own refresh

    refused = api.config_values.get(api.CONFIG_NAME_TOKEN)
    _authenticate(api)
    # kaggle 2.2.5 records how it authenticated as str(AuthMethod.OAUTH), the enum's name
    if api.config_values.get(api.CONFIG_NAME_AUTH_METHOD) != "OAUTH" or api.config_values.get(api.CONFIG_NAME_TOKEN) != refused:
        return
    try:
        with contextlib.redirect_stdout(io.StringIO()), api.build_kaggle_client_with_params(args=api.args) as client:
            credentials = KaggleCredentials.load(client)
            if credentials is None:
                raise NoKaggleCredentials()
            credentials.refresh_access_token()
    except requests.HTTPError as err:
        status = err.response.status_code if err.response is not None else None
        raise KaggleError(f"Kaggle refused to refresh the OAuth login ({status}: {err}); {HINTS[401]}", status,
                          transient=status in TRANSIENT) from None
    except requests.RequestException as err:
        raise KaggleError(f"could not reach Kaggle to refresh the OAuth login ({type(err).__name__}); check the network",
                          transient=True) from None
    _authenticate(api)


def refusal_status(err: BaseException) -> int | None:
    """The HTTP status of a refusal the client raised: its ``HTTPError``'s, or that under its own words for a refusal.

    kaggle 2.2.5 ``KaggleApi.kernels_status``, ``kernels_logs`` and ``kernels_output`` turn a 401 or 403 into
    ``ValueError("Cannot access kernel … Permission 'kernels.get' was denied …")``, raised inside ``except HTTPError``
    without ``from``: the ``HTTPError`` (and its status) is the ``ValueError``'s ``__context__``.
    """
    import requests  # comes with kaggle ([train]), imported by now

    if isinstance(err, ValueError) and DENIED in str(err):
        err = err.__context__ or err
    if isinstance(err, requests.HTTPError) and err.response is not None:
        return err.response.status_code
    return None


class Reauthenticating:
    """The client's ``KaggleApi``, whose calls that Kaggle answers with a 401 are sent again once, after
    :func:`reauthenticate`; everything else is the client's as it is.

    Sending a call again is safe though a push is not idempotent: a 401 is answered before anything is done. Once
    :func:`reauthenticate` has refreshed the login, the calls after it use the new token (the client reads it from its
    configuration at each call: ``KaggleApi.build_kaggle_client``). A 401 again after that is the caller's to report.
    """

    def __init__(self, api: Any):
        self._api = api

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._api, name)
        if name.startswith("_") or not callable(value):
            return value

        @functools.wraps(value)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return value(*args, **kwargs)
            except Exception as err:
                if refusal_status(err) != 401:
                    raise
            reauthenticate(self._api)
            return getattr(self._api, name)(*args, **kwargs)

        return call


def user_of(api: Any) -> str:
    """The Kaggle user the credentials belong to (the owner of the kernels and datasets fintts pushes)."""
    user = api.get_config_value("username")
    if not user:
        raise NoKaggleCredentials()
    return user


def calling(what: str, call: Callable[[], _T], *, attempts: int = 1, backoff: Backoff = Backoff(),
            retry_on: frozenset[int] = TRANSIENT, timeout: float | None = None) -> _T:
    """``call()``, with the client's HTTP and validation errors as a :class:`KaggleError` naming ``what``.

    Up to ``attempts`` tries: an answer whose status is in ``retry_on``, a time-out or a lost
    connection (when ``retry_on`` is :data:`TRANSIENT`) is tried again after ``backoff``'s wait,
    or Kaggle's ``Retry-After`` when longer; the last failure is raised, saying how many tries.
    ``timeout``: seconds one try may take, for calls that only read (the client sends its
    requests without a time-out, so a stalled answer would hang the caller for good); the
    abandoned try finishes, or not, on a daemon thread.
    """
    for attempt in range(1, attempts + 1):
        try:
            return _call_once(what, call if timeout is None else lambda: _within(timeout, call))
        except KaggleError as err:
            # no answer at all (a time-out, a lost connection) may have been acted on: asked again only by reads
            again = err.status in retry_on if err.status is not None else err.transient and retry_on == TRANSIENT
            if not again or attempt == attempts:
                if attempt > 1:
                    raise KaggleError(f"{err} (tried {attempt} times)", err.status, transient=err.transient) from None
                raise
            time.sleep(backoff.delay(attempt, err.retry_after))
    raise AssertionError("unreachable")


def _call_once(what: str, call: Callable[[], _T]) -> _T:
    import requests  # comes with kaggle ([train]), which connect() has imported by now

    try:
        with contextlib.redirect_stdout(io.StringIO()):  # the client prints progress and hints of its own
            return call()
    except requests.HTTPError as err:
        status = err.response.status_code if err.response is not None else "?"
        hint = HINTS.get(status, "")
        retry_after = _seconds(err.response.headers.get("Retry-After")) if err.response is not None else None
        raise KaggleError(f"Kaggle refused to {what} ({status}: {err}){'; ' + hint if hint else ''}",
                          status if isinstance(status, int) else None, transient=status in TRANSIENT,
                          retry_after=retry_after) from None
    except (requests.RequestException, TimeoutError) as err:  # time-outs and lost connections
        raise KaggleError(f"could not reach Kaggle to {what} ({type(err).__name__}); check the network", transient=True) from None
    except ValueError as err:  # the client's own checks of names and metadata, and its words for a refusal
        # kaggle 2.2.5 kernels_status/kernels_logs turn Kaggle's 401/403 into this ValueError (kaggle-cli PR #951):
        # kept as a 403, so callers can tell "refused" (which may mean "absent", kaggle-cli #548) from a bad name
        denied = DENIED in str(err)
        raise KaggleError(f"cannot {what}: {err}", 403 if denied else None) from None


def _within(seconds: float, call: Callable[[], _T]) -> _T:
    """``call()``, or :class:`TimeoutError` when it has not returned after ``seconds``."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as err:  # handed to the caller's thread
            outcome["error"] = err

    worker = threading.Thread(target=run, name="kaggle-call", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise TimeoutError(f"no answer in {seconds:g} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _seconds(value: str | None) -> float | None:
    """A ``Retry-After`` in seconds (Kaggle sends seconds; a date is not worth parsing for a bounded wait)."""
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None
