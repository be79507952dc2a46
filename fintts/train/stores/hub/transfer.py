"""``fintts push`` and ``fintts pull``: moving a run between this machine and its Hub repo by hand.

``push`` is for the rare session whose final push did not land (the summary says so and
prints the command); ``pull`` brings the exported model to a laptop, or a checkpoint (or
the whole run) to continue training elsewhere.
"""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path
from typing import Any

from fintts.errors import StoreError
from fintts.train.run import checkpoint as ckpt
from fintts.train.run.layout import LEASE, LOSS_PLOT, MODEL_DIR, SAMPLES_DIR, STATUS, TENSORBOARD_DIR
from fintts.train.stores.hub.client import HubClient, checkpoint_names, json_object
from fintts.train.stores.hub.errors import HubError, HubMoved
from fintts.train.stores.hub.resume import REREADS
from fintts.train.stores.hub.store import HubStore

log = logging.getLogger(__name__)


def push(store_root: str | Path, repo_id: str, *, force: bool = False, session_id: str | None = None, **options: Any) -> str:
    """Upload the newest complete checkpoint of ``store_root`` (with ``model/``, status and card) now.

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
    checkpoint: str = MODEL_DIR,
    full: bool = False,
    endpoint: str | None = None,
    token: str | None = None,
    request_timeout: float = 60.0,
    samples: bool = False,
) -> Path:
    """Download from the Hub run ``repo_id`` into ``out_dir``; return what was fetched.

    ``samples``: only what says how the run is going, no weights (megabytes, while the run
    goes on): the checkpoint's ``samples/`` (``latest`` unless ``checkpoint`` names one),
    ``tb/`` (TensorBoard's curves and audio), ``loss.png`` and ``status.json``, as of the
    run's newest push; returns the samples' folder.

    ``checkpoint``: ``"model"`` (default: only the exported ``model/`` folder), ``"latest"``,
    ``"best"`` (the checkpoint ``status.json`` names as holding the best weights) or
    ``"step-N"``; a checkpoint comes with ``latest`` and ``status.json`` and is verified, so
    ``out_dir`` can be used as ``--store`` to continue training. ``full``: the whole run
    (every checkpoint, ``model/``, status, card). Works without a token for public repos.
    """
    out = Path(out_dir).expanduser().resolve()
    client = HubClient.connect(repo_id, endpoint=endpoint, token=token, timeout=request_timeout, anonymous_ok=True)
    for attempt in range(1, REREADS + 1):
        try:
            return _pull(client, out, checkpoint, full, samples)
        except HubMoved:
            if attempt == REREADS:
                raise
            log.warning("%s: its history was rewritten while pulling; pulling again from the new head", client.url)
        except HubError as err:  # a dropped connection mid-download: what is already on disk is fetched again, whole
            if not err.transient or attempt == REREADS:
                raise
            log.warning("%s: %s; pulling again (try %d of %d)", client.url, err, attempt + 1, REREADS)
    raise AssertionError("unreachable")


def _pull(client: HubClient, out: Path, checkpoint: str, full: bool, samples: bool) -> Path:
    try:
        head = client.head()
        files = client.files(head)
        if full:
            client.download([p for p in files if p not in (".gitattributes", LEASE)], head, out)
            return out
        if checkpoint == MODEL_DIR and not samples:
            wanted = [p for p in files if p.startswith(MODEL_DIR + "/")]
            if not wanted:
                raise StoreError(f"{client.url} has no {MODEL_DIR}/ yet; pull a checkpoint instead (--checkpoint latest)")
            client.download(wanted, head, out)
            return out / MODEL_DIR
        name = _resolve_checkpoint(client, head, "latest" if samples and checkpoint == MODEL_DIR else checkpoint)
        prefix = f"{ckpt.CHECKPOINTS}/{name}/"
        wanted = [p for p in files if p.startswith(prefix)]
        if not wanted:
            present = ", ".join(sorted(checkpoint_names(files), key=ckpt.step_of)) or "none"
            raise StoreError(f"{client.url} has no checkpoint {name}; it has {present}")
        if samples:
            heard = [p for p in wanted if p.startswith(f"{prefix}{SAMPLES_DIR}/")]
            if not heard:
                raise StoreError(f"{client.url}: checkpoint {name} has no samples yet (none is made before the run's first "
                                 "validation, every eval_every steps)")
            client.download(heard + [p for p in files if p.startswith(TENSORBOARD_DIR + "/") or p in (LOSS_PLOT, STATUS)], head, out)
            return out / prefix / SAMPLES_DIR
        client.download(wanted + [p for p in (STATUS,) if p in files], head, out)
        folder = out / ckpt.CHECKPOINTS / name
        ckpt.verify(folder)
        ckpt.write_atomic(out / ckpt.LATEST, (name + "\n").encode())
        return folder
    except (StoreError, ckpt.CheckpointError):
        raise
    except Exception as err:
        raise client.failure(err) from None


def _resolve_checkpoint(client: HubClient, head: str, wanted: str) -> str:
    """``latest``, ``best`` or ``step-N`` → a checkpoint name (not yet checked to exist).

    The names ``latest`` and ``status.json`` give come from the repo, which anyone with write
    access may edit: one that is not a checkpoint name is refused, never used as a path.
    """
    if wanted == "latest":
        text = client.read(ckpt.LATEST, head)
        if not text:
            raise StoreError(f"{client.url} has no latest checkpoint yet")
        return _checked_name(client, text.decode(errors="replace").strip(), f"its {ckpt.LATEST}")
    if wanted == "best":
        best = (json_object(client.read(STATUS, head)) or {}).get("best") or {}
        if not isinstance(best, dict) or not best.get("checkpoint"):
            raise StoreError(f"{client.url} has no checkpoint of a best validation yet; use --checkpoint latest")
        return _checked_name(client, best["checkpoint"], f"best.checkpoint in its {STATUS}")
    number = wanted.removeprefix("step-")
    if number.isdigit():
        return ckpt.name_for_step(int(number))
    raise StoreError(f"--checkpoint {wanted!r}: use model, latest, best or step-N")



def _checked_name(client: HubClient, name: object, where: str) -> str:
    if not ckpt.is_checkpoint_name(name):
        raise StoreError(
            f"{where} on {client.url} names {name!r}, which is not a checkpoint name (step-NNNNNNNN); "
            "the repo was edited by hand. Pull a checkpoint by its step (--checkpoint step-N)."
        )
    return str(name)
