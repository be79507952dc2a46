"""Reading a base voice from the Hugging Face Hub the way a person wants to be told about it.

``transformers`` loads ``facebook/mms-tts-fin`` through ``huggingface_hub``, whose downloads retry
a refused connection five times with backoff (``huggingface_hub/utils/_http.py``, ``_http_backoff_base``:
"Retrying in 1s [Retry 1/5]" … 8 s, ~25 s per file, config and weights each) and then fail with a
traceback. Before any of that, one quick request (``get_hf_file_metadata``, which retries nothing
by default: ``retry_on_errors=False`` in ``huggingface_hub/file_download.py``) says whether the Hub
answers, so an offline or unreachable session gets one line saying what is missing and how to get
it, at once. A voice already in the cache is read from there without asking the Hub at all.

``transformers`` also draws a "Loading weights" bar when it loads a model and a "Writing model shards"
bar when it saves one (``transformers/core_model_loading.py``, ``transformers/modeling_utils.py``, both
through ``transformers.utils.logging.tqdm``): fintts reports its own progress, so :func:`no_progress_bars`
switches them off around its loads and saves.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from huggingface_hub import constants, get_hf_file_metadata, hf_hub_url
from huggingface_hub.utils import are_progress_bars_disabled, enable_progress_bars
from transformers.utils import logging as transformers_logging

from fintts.errors import ConfigError


class BaseVoiceUnavailable(ConfigError, OSError):
    """The base voice is neither a folder, nor in the cache, nor downloadable now (an ``OSError`` too, as
    ``from_pretrained``'s own failure to find a model is)."""


def offline() -> bool:
    """``HF_HUB_OFFLINE``, read now as well as when huggingface_hub was imported (a notebook may set it later)."""
    return constants.is_offline_mode() or os.environ.get("HF_HUB_OFFLINE", "").upper() in {"1", "ON", "YES", "TRUE"}


def why_not_downloadable(repo_id: str) -> str | None:
    """``None`` when the Hub answers for ``repo_id``'s ``config.json``; else why not, in a few words."""
    if offline():
        return "the session is offline (HF_HUB_OFFLINE is set)"
    endpoint = os.environ.get("HF_ENDPOINT") or None  # read now: huggingface_hub read it once, at import
    try:
        get_hf_file_metadata(hf_hub_url(repo_id, "config.json", endpoint=endpoint), timeout=20, endpoint=endpoint)
    except Exception as err:  # httpx's connection errors and the Hub's HTTP errors alike
        status = getattr(getattr(err, "response", None), "status_code", None)
        if status in (401, 403, 404):
            return f"the Hub has no model {repo_id!r} that this token can read (HTTP {status})"
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return f"{endpoint or constants.ENDPOINT} could not be reached ({first})"
    return None


def unavailable(init: str, why: str) -> BaseVoiceUnavailable:
    """The one line a person reads: what is missing, why, and the command that gets it."""
    folder = init.rstrip("/").split("/")[-1]
    return BaseVoiceUnavailable(
        f"init: the base voice {init!r} is not on this machine and cannot be downloaded now: {why}. "
        f"Download it once where there is network: `hf download {init} --local-dir {folder}` "
        f"(on Kaggle: attach that folder as a dataset), then set `init: PATH` to that folder (init=PATH on the command line)."
    )


@contextlib.contextmanager
def no_progress_bars() -> Iterator[None]:
    """transformers' (and huggingface_hub's) progress bars off for the block, as they were after it."""
    had_bars, hub_had_bars = transformers_logging.is_progress_bar_enabled(), not are_progress_bars_disabled()
    transformers_logging.disable_progress_bar()  # huggingface_hub's too
    try:
        yield
    finally:
        if had_bars:
            transformers_logging.enable_progress_bar()
        elif hub_had_bars:
            enable_progress_bars()
