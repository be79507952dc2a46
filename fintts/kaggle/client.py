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
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from typing import Any, TypeVar

from fintts.errors import StoreError

_T = TypeVar("_T")

NO_CREDENTIALS = (
    "No Kaggle credentials. Create an API token at https://www.kaggle.com/settings (API > Create New Token) and either "
    "save kaggle.json as ~/.kaggle/kaggle.json (chmod 600), or set KAGGLE_USERNAME and KAGGLE_KEY, "
    "or set KAGGLE_API_TOKEN"
)


class KaggleError(StoreError):
    """Kaggle refused or could not be reached; the message says what happened and what to do.

    ``status``: the HTTP status Kaggle answered with, when it answered.
    """

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


def connect() -> Any:
    """An authenticated ``kaggle.api.kaggle_api_extended.KaggleApi``, or :class:`KaggleError`."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            from kaggle.api.kaggle_api_extended import KaggleApi  # [train] only; it reads the credentials when imported
        except ImportError as err:
            raise KaggleError(f"the kaggle package cannot be imported ({err}); pip install kaggle six") from None
        api = KaggleApi()
        try:
            api.authenticate()
        except SystemExit:
            raise KaggleError(NO_CREDENTIALS) from None
    return api


def user_of(api: Any) -> str:
    """The Kaggle user the credentials belong to (the owner of the kernels and datasets fintts pushes)."""
    user = api.get_config_value("username")
    if not user:
        raise KaggleError(NO_CREDENTIALS)
    return user


def calling(what: str, call: Callable[[], _T]) -> _T:
    """``call()``, with the client's HTTP and validation errors as a :class:`KaggleError` naming ``what``."""
    import requests  # comes with kaggle ([train]), which connect() has imported by now

    try:
        with contextlib.redirect_stdout(io.StringIO()):  # the client prints progress and hints of its own
            return call()
    except requests.HTTPError as err:
        status = err.response.status_code if err.response is not None else "?"
        hint = {401: "check the Kaggle credentials", 403: "these credentials may not do that",
                404: "check the name (user/slug)"}.get(status, "")
        raise KaggleError(f"Kaggle refused to {what} ({status}: {err}){'; ' + hint if hint else ''}",
                          status if isinstance(status, int) else None) from None
    except requests.RequestException as err:
        raise KaggleError(f"could not reach Kaggle to {what} ({type(err).__name__}); check the network") from None
    except ValueError as err:  # the client's own checks of names and metadata
        raise KaggleError(f"cannot {what}: {err}") from None
