"""The slow part of ``model/``'s export that an earlier session left unmade, made by this one on whatever disk it has.

A checkpoint records ``export_pending`` when ``model/`` lacked its slow part (a voice's ONNX graphs)
as it was saved. The next session makes it, and on Kaggle that session starts on an empty disk: a
Hub resume downloads the checkpoint, not ``model/``. So what the slow part is made from is got
back first: while no validation has found a best, ``model/`` is the export of the newest weights,
which the session has just resumed, and the quick export is made again from them; otherwise it is
the best's export, which only the Hub still holds, and ``model/`` is downloaded. When neither can
be had, the flag stays set (:meth:`BackgroundExport.unmade`): it is cleared only once the files exist.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fintts.errors import StoreError
from fintts.train.retry import Backoff
from fintts.train.run.layout import MODEL_DIR
from fintts.train.session import exporting
from fintts.train.session.facts import SessionFacts
from fintts.train.session.session import Session

#: Tries of each Hub request of the download (the client's retry loop; never past the session's end).
HUB_ATTEMPTS = 3


def make_pending(session: Session) -> None:
    """Start the slow part the resumed checkpoint says ``model/`` lacks (main process), fetching ``model/`` first when
    this disk has none."""
    facts, state, exports = session.facts, session.state, session.exports
    final = facts.store.root / MODEL_DIR
    if exporting.slow_part(session) is None or final.is_dir():
        exporting.export_later(session)
        return
    if state.best_step is None:  # model/ is the export of the weights just resumed: make it again from them
        exporting.export(session)
        if not final.is_dir():
            exports.unmade(state.step, f"{final} could not be made again from the resumed weights")
        return
    why = fetch_model(facts, final)
    if why is not None:
        exports.unmade(state.step, why)
        return
    exporting.export_later(session)


def fetch_model(facts: SessionFacts, final: Path) -> str | None:
    """Download the Hub's ``model/`` into ``final`` (absent here); why it could not be, or ``None``.

    Through :class:`~fintts.train.stores.hub.HubClient`, whose every request is bounded and whose retries end
    before training must stop. The download lands in a dot-folder beside ``final`` that
    :class:`BackgroundExport` removes at the next start, so a session killed mid-way leaves no part of it.
    """
    store = facts.store
    if not store.hub_repo:
        return f"this disk has no {MODEL_DIR}/ to make it from, and the run is not on the Hub"
    from fintts.train.stores.hub import HubClient  # lazy: the Hub's client imports what a local run never needs

    staging = final.with_name(f".{final.name}-later-fetch")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        client = HubClient.connect(store.hub_repo, timeout=facts.config.train.hub_timeout)
        client.deadline = facts.clock.deadline  # the time training must stop by

        def retrying(what: str, call: Callable[[], Any]) -> Any:
            return client.retrying(what, call, attempts=HUB_ATTEMPTS, backoff=Backoff())

        head = retrying("look up the run on the Hub", client.head)
        wanted = [path for path in retrying("list the run on the Hub", lambda: client.files(head)) if path.startswith(MODEL_DIR + "/")]
        if not wanted:
            return f"{store.url} has no {MODEL_DIR}/ to make it from"
        facts.log(f"downloading {MODEL_DIR}/ from {store.url} to make the slow part of its export that an earlier session left")
        retrying(f"download {MODEL_DIR}/", lambda: client.download(wanted, head, staging))
        os.replace(staging / MODEL_DIR, final)
    except (StoreError, OSError) as err:
        return f"could not download {MODEL_DIR}/ from {store.url}: {err}"
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return None
