"""Where a session resumes from: the newest complete checkpoint, on this disk or downloaded from the Hub.

A session on an empty disk (a fresh Kaggle one) downloads only ``latest``'s folder (falling
back to older checkpoints on the Hub when one fails its manifest), ``status.json`` and
``pushes.json``, ``model/`` when this disk has an older one, and the task's carried cache
(``cache/carried/``: what the task made once for the run) that this disk lacks. Downloads land in
``root/.hub/`` first and are moved into place whole, so an interrupted one leaves nothing
half-written where the trainer looks.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fintts.errors import StoreError
from fintts.train.run import checkpoint as ckpt
from fintts.train.run.layout import CARRIED_CACHE, HUB_DIR, MODEL_DIR, PUSHES, STATUS
from fintts.train.stores.hub.client import HubClient, checkpoint_names
from fintts.train.stores.hub.errors import HubMoved, HubRepoError, HubUnavailable
from fintts.train.stores.hub.lease import Retrying
from fintts.train.stores.hub.ledger import Ledger

logger = logging.getLogger(__name__)
#: How many times a resume starts over when the commit it was reading vanished (a history rewrite).
REREADS = 3


def newest_checkpoint(root: Path, client: HubClient, ledger: Ledger, retrying: Retrying, log: Callable[[str], None]) -> Path | None:
    """The newest complete checkpoint in ``root``, downloading it from the Hub when the Hub's is newer than the local one.

    What the Hub holds is noted in ``ledger``; ``retrying(what, call)`` runs each request. A
    download that loses its commit to a history rewrite (see :func:`look`) starts over from the new head.
    """
    local = ckpt.latest_complete(root, log)
    for attempt in range(1, REREADS + 1):
        try:
            return _newest_at_head(root, local, client, ledger, retrying, log)
        except HubMoved as err:
            if attempt == REREADS:
                raise
            log(f"{err}; reading the run again from its new head")
    raise AssertionError("unreachable")


def _newest_at_head(
    root: Path, local: Path | None, client: HubClient, ledger: Ledger, retrying: Retrying, log: Callable[[str], None]
) -> Path | None:
    """One reading of the run at the Hub's head: ``local`` (this disk's newest) or a newer checkpoint downloaded."""
    try:
        head, files, pointed = retrying("look up the run on the Hub", lambda: look(client))
    except HubRepoError:
        return local  # no repo yet: a new run (acquire creates it)
    except HubUnavailable as err:
        if local is None:
            raise HubUnavailable(f"{err}. Nothing to resume from locally either; retry when the Hub is reachable.") from None
        log(f"warning: {err}; resuming from the local {local.name}, which may be older than the Hub's")
        return local
    names = checkpoint_names(files)
    ledger.looked_up(names, pointed)
    candidates = ckpt.resume_order(names, pointed or None)
    if local is not None and (not candidates or ckpt.step_of(local.name) >= ckpt.step_of(candidates[0])):
        return local
    for name in candidates:
        if local is not None and ckpt.step_of(name) <= ckpt.step_of(local.name):
            break
        folder = fetch_checkpoint(root, client, name, head, files, retrying, log)
        if folder is not None:
            fetch_model(root, client, head, files, retrying, log)
            fetch_carried(root, client, head, files, retrying, log)
            for extra in (STATUS, PUSHES):
                if extra in files:
                    retrying(f"download {extra}", lambda extra=extra: client.download([extra], head, root))
            ledger.reload_pushes()
            return folder
    if local is None and candidates:
        raise StoreError(
            f"{client.url} has checkpoints ({', '.join(candidates)}) but none matches its manifest. "
            "Inspect the repo, or start a new run in another repo."
        )
    return local


def look(client: HubClient) -> tuple[str, dict[str, Any], str]:
    """The head, its files and what its ``latest`` names, read together: a retry after a history rewrite (which
    makes the head read before it vanish, see :mod:`.errors`) starts again from the new head."""
    head = client.head()
    files = client.files(head)
    pointed = (client.read(ckpt.LATEST, head) or b"").decode(errors="replace").strip() if ckpt.LATEST in files else ""
    return head, files, pointed


def fetch_model(
    root: Path, client: HubClient, head: str, files: dict[str, Any], retrying: Retrying, log: Callable[[str], None]
) -> None:
    """Replace a local ``model/`` with the Hub's: it belongs to an older checkpoint than the one just fetched.

    ``model/`` on the Hub only moves forward: a local one left from an earlier session on
    this disk would otherwise be mirrored over the Hub's newer one at the next push. When
    the download fails, the local one is still removed (the Hub's stays as it is). A disk
    without one (a fresh Kaggle session) downloads nothing: its pushes leave the Hub's
    ``model/`` alone until the trainer exports a newer one.
    """
    if not (root / MODEL_DIR).exists():
        return
    wanted = [p for p in files if p.startswith(MODEL_DIR + "/")]
    incoming, stale = root / HUB_DIR / "incoming-model", root / HUB_DIR / "stale-model"
    for leftover in (incoming, stale):
        shutil.rmtree(leftover, ignore_errors=True)
    try:
        if wanted:
            log(f"downloading {MODEL_DIR}/ from {client.url}")
            retrying(f"download {MODEL_DIR}/", lambda: client.download(wanted, head, incoming))
    except StoreError as err:
        log(f"warning: {err}; the local {MODEL_DIR}/ (older than the checkpoint resumed from) is removed, the Hub's stays")
        wanted = []
    final = root / MODEL_DIR
    if final.exists():
        os.replace(final, stale)
    if wanted:
        os.replace(incoming / MODEL_DIR, final)
    for leftover in (incoming, stale):
        shutil.rmtree(leftover, ignore_errors=True)


def fetch_carried(
    root: Path, client: HubClient, head: str, files: dict[str, Any], retrying: Retrying, log: Callable[[str], None]
) -> None:
    """Download the carried cache's files this disk lacks (see :data:`.commits.CARRIED_DIRS`), before the task is built.

    Each file is moved into place whole; when the download fails the session goes on with what it has (the task
    makes the rest again, as on a first session), and says so.
    """
    wanted = [p for p in files if p.startswith(CARRIED_CACHE + "/") and not (root / p).is_file()]
    if not wanted:
        return
    incoming = root / HUB_DIR / "incoming-carried"
    shutil.rmtree(incoming, ignore_errors=True)
    log(f"downloading {len(wanted)} file(s) of {CARRIED_CACHE}/ from {client.url}")
    try:
        retrying(f"download {CARRIED_CACHE}/", lambda: client.download(wanted, head, incoming))
    except StoreError as err:
        log(f"warning: {err}; the task makes what {CARRIED_CACHE}/ lacks again")
    for path in wanted:
        if (incoming / path).is_file():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            os.replace(incoming / path, root / path)
    shutil.rmtree(incoming, ignore_errors=True)


def fetch_checkpoint(
    root: Path, client: HubClient, name: str, head: str, files: dict[str, Any], retrying: Retrying, log: Callable[[str], None]
) -> Path | None:
    """Download checkpoint ``name`` into ``root`` and point ``latest`` at it; ``None`` when it fails its manifest."""
    prefix = f"{ckpt.CHECKPOINTS}/{name}/"
    incoming = root / HUB_DIR / "incoming"
    shutil.rmtree(incoming, ignore_errors=True)
    log(f"downloading {name} from {client.url}")
    retrying(f"download {name}", lambda: client.download([p for p in files if p.startswith(prefix)], head, incoming))
    fetched = incoming / ckpt.CHECKPOINTS / name
    try:
        ckpt.verify(fetched)
    except ckpt.CheckpointError as err:
        log(f"warning: {name} on {client.url} is unusable ({err}); trying an older checkpoint")
        shutil.rmtree(incoming, ignore_errors=True)
        return None
    final = root / ckpt.CHECKPOINTS / name
    final.parent.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(final, ignore_errors=True)
    os.replace(fetched, final)
    shutil.rmtree(incoming, ignore_errors=True)
    ckpt.write_atomic(root / ckpt.LATEST, (name + "\n").encode())
    return final


def remote_latest(client: HubClient, retrying: Retrying) -> str | None:
    """The checkpoint the Hub's ``latest`` names (``None`` for an empty run)."""
    _, _, pointed = retrying("read latest", lambda: look(client))
    name = pointed or None
    if name is not None and not ckpt.is_checkpoint_name(name):
        logger.warning("%s: its latest names %r, which is not a checkpoint name; ignoring it", client.url, name)
        return None
    return name
