"""A session's output on Kaggle: its run folder fetched from a version's ``/kaggle/working``, its newest checkpoint pushed.

When a session's final push does not reach the Hub, its newest checkpoint is only on its disk, and the next session
would resume from the Hub's older one. Kaggle keeps a completed version's ``/kaggle/working`` as that version's output
(its Output tab; ``kaggle kernels output``), and a session's run folder is there (``STORE`` is relative to the
notebook's working folder, ``runs/<repo name>`` by default). So ``fintts kaggle run`` fetches that folder from the
version's output itself — kaggle 2.2.5 ``KaggleApi.kernels_output``: ``ListKernelSessionOutput`` for the version, a
page of file names relative to ``/kaggle/working`` at a time, each file then downloaded from its ``url`` with a plain
``requests.get`` whose status is checked (kaggle-cli PR #1176) — and pushes it as ``fintts push --store`` would
(:func:`fintts.train.stores.hub.transfer.push`: the newest complete checkpoint, verified, with the run's lease taken
for the push, never moving the Hub's ``latest`` backwards).
"""

from __future__ import annotations

import functools
import re
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

from fintts.errors import StoreError
from fintts.kaggle.client import KaggleError, calling
from fintts.kaggle.hub_run import HubRun, read_run, status_of
from fintts.kaggle.kernels import ATTEMPTS, BACKOFF, REQUEST_TIMEOUT
from fintts.train.run import checkpoint as ckpt
from fintts.train.run.layout import CHECKPOINTS
from fintts.train.stores.hub.transfer import push

#: Where a Kaggle session's output (``/kaggle/working``) is, on Kaggle; ``kaggle kernels output`` downloads it as is.
KAGGLE_OUTPUT = "/kaggle/working/"


def push_from_output(api: Any, ref: str, folder: str, repo: str, *, not_older_than: str | None) -> str:
    """Push the newest complete checkpoint of run folder ``folder`` (the session's path) in ``ref``'s output to ``repo``.

    ``ref``: ``owner/slug/N`` (a version) or ``owner/slug`` (its latest). ``not_older_than``: the checkpoint the run
    is known to have reached; an output whose newest is older has nothing to give. Returns the name of the checkpoint
    pushed; :class:`~fintts.errors.StoreError` (Kaggle's or the Hub's) saying why nothing was.
    """
    places = places_in_output(folder)
    with tempfile.TemporaryDirectory(prefix="fintts-output-") as tmp:
        # the run's folder only, not the whole output
        pattern = "^(?:" + "|".join(re.escape(place) for place in places) + ")/" if "" not in places else None
        fetch = functools.partial(api.kernels_output, ref, tmp, file_pattern=pattern, force=True, quiet=True)
        calling(f"download the output of {ref}", fetch, attempts=ATTEMPTS, backoff=BACKOFF)
        relative = next((place for place in places if (Path(tmp) / place / CHECKPOINTS).is_dir()), places[0])
        store = Path(tmp) / relative
        newest = ckpt.latest_complete(store, lambda _: None) if (store / CHECKPOINTS).is_dir() else None
        if newest is None:
            raise KaggleError(f"the output of {ref} holds no complete checkpoint in {relative or '.'}/ (Kaggle keeps a "
                              "version's output once the version completes)")
        if ckpt.is_checkpoint_name(not_older_than) and ckpt.step_of(newest.name) < ckpt.step_of(not_older_than):
            raise KaggleError(f"the newest complete checkpoint in the output of {ref} is {newest.name}, older than "
                              f"{not_older_than}")
        push(store, repo)
        return newest.name


def places_in_output(folder: str) -> list[str]:
    """Where run folder ``folder`` (the session's path) may be in a version's output, relative to it, likeliest first.

    Under ``/kaggle/working`` (a Kaggle session's working folder, and ``STORE`` is relative to it) the output holds it at
    its path below that folder. Kaggle's other folders (``/kaggle/tmp``, ``/kaggle/input``) are never in the output.
    A folder elsewhere is a session whose working folder was not ``/kaggle/working`` (a notebook run outside Kaggle's
    layout, as the tests' sessions are): the output is that working folder, of which the path says nothing, so the
    run folder is looked for at each tail of its path, the longest first (``runs/<repo name>`` for the default).
    """
    if folder.startswith(KAGGLE_OUTPUT):
        return [folder[len(KAGGLE_OUTPUT):].strip("/")]
    parts = PurePosixPath(folder).parts
    if not PurePosixPath(folder).is_absolute() or parts[1:2] == ("kaggle",):
        raise KaggleError(f"{folder} is not under {KAGGLE_OUTPUT}, which is all a version's output holds")
    return ["/".join(parts[start:]) for start in range(1, len(parts))]


def push_from_output_of(api: Any, kernel: str, version: int, run: HubRun | None, repo: str, *, say: Any,
                        timeout: float = REQUEST_TIMEOUT) -> HubRun | None:
    """The run after its newest checkpoint was pushed from ``version``'s output (0: the kernel's latest version's).

    ``None`` when nothing could be, and ``say`` says why: the chain then stops as it would without the output, saying
    how to push the checkpoint by hand. What the Hub lacks is named by ``run``'s status: the checkpoint it calls
    newest (:meth:`HubRun.unpushed`), or the one it names at all; the output must hold that one or newer.
    """
    if run is None:
        return None
    ref = f"{kernel}/{version}" if version else kernel
    named = run.unpushed() or PurePosixPath(str(status_of(run).get("latest_checkpoint") or "")).name
    newest = max((n for n in (named, run.latest) if ckpt.is_checkpoint_name(n)), key=ckpt.step_of, default=None)
    try:
        name = push_from_output(api, ref, run.local_folder()[1], repo, not_older_than=newest)
    except StoreError as err:
        say(f"the newest checkpoint is not on the Hub, and could not be pushed from the output of {ref}: {err}")
        return None
    say(f"the newest checkpoint was not on the Hub: pushed {name} (step {ckpt.step_of(name)}) from the output of {ref} on "
        f"Kaggle, where the session left it, to hf://{repo}")
    return read_run(repo, timeout)
