"""What the processes of one run (one per GPU) agree on, and how a failure reaches them all.

Every stop decision is a vote: each process brings its own flags (a signal it received,
its clock running out) and a sum over all of them decides, so all processes stop after
the same step and meet the same collectives on the way out (the final checkpoint).

An exception is the one stop that cannot be voted on: the process that raised leaves the
others waiting in their next collective. With gloo (the CPU backend) that collective fails
at once with "Connection closed by peer"; with NCCL the waiting process learns of it
from the process-group watchdog (and the launcher, :mod:`fintts.train.session.launcher`, ends
what is left after a grace period). Either way the main process, which writes the run's
status, would only know that a connection closed. So before it exits, a failing process
posts its error in the process group's key-value store — the rendezvous store every
process of the run already shares, served by the main process — and the main process
reads what its peers posted when it fails in turn, so the status says
``process 1: ValueError: ...`` instead of the symptom.

No device collective waits on the Hub. While the main process takes the lease, downloads
the checkpoint or the task's inputs (:func:`main_first`), or waits for the final push, the
others wait here, on that same key-value store, for what it announces (:func:`announce`) —
polling, with a deadline from the session's clock, and giving up at once when the main
process posted a failure or its store is gone. A device collective (NCCL) would instead
wait until the process group's watchdog aborts it, whatever the session's schedule.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

#: How NCCL meets a collective that times out, set in every launched process whatever its environment says. torch's
#: default, ``TORCH_NCCL_ASYNC_ERROR_HANDLING=3`` ("tearing down process without aborting NCCL communicator. By default,
#: it is set to 3": docs.pytorch.org torch_nccl_environment_variables; ``ErrorHandlingMode::SkipCleanUp`` in
#: site-packages torch/include/torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp), ends the process from NCCL's watchdog
#: thread, so the session's failure path (the ``failed`` status, the newest checkpoint pushed, the lease given back)
#: never runs; so does torchrun's ``1`` (``TearDown``), which its elastic agent gives every worker (see
#: :func:`fintts.train.session.launcher.launch`). ``TORCH_NCCL_BLOCKING_WAIT=1`` makes the waiting collective itself
#: fail in our thread once the process group's timeout has passed ("Control whether or not wait() is blocking",
#: ProcessGroupNCCL.hpp; "When TORCH_NCCL_BLOCKING_WAIT is set, the process will block and wait for this timeout",
#: torch/distributed/distributed_c10d.py ``_set_pg_timeout``): an exception, which :meth:`Trainer.run` handles like any
#: other. Where an error reaches NCCL's watchdog first, ``2`` (``CleanUpOnly``: "only abort NCCL communicator") ends the
#: collectives and keeps the process, whose next collective then raises. Gloo ignores both (its timeout is an exception
#: already). The ``TORCH_NCCL_`` names win over their old ``NCCL_`` ones (c10d's ``getCvarInt`` reads the list from its
#: end: torch/include/torch/csrc/distributed/c10d/Utils.hpp).
NCCL_ERROR_HANDLING = {"TORCH_NCCL_BLOCKING_WAIT": "1", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "2"}
_KEY = "fintts/failure/{rank}"
_ANNOUNCEMENT = "fintts/announce/{name}"
#: Seconds between two looks at the store while waiting for the main process.
POLL = 0.05


class MainProcessGone(RuntimeError):
    """The main process failed, ended, or said nothing before the deadline while the others waited for it."""


def vote(flags: list[bool], device: torch.device) -> list[bool]:
    """For each flag: did any process raise it? One all-reduce for all of them."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return list(flags)
    counts = torch.tensor([1.0 if f else 0.0 for f in flags], device=device)
    dist.all_reduce(counts)
    return [bool(c > 0) for c in counts.tolist()]


def _store():
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return None
    from torch.distributed.distributed_c10d import _get_default_store  # importable only where dist.is_available()

    return _get_default_store()


def who_raised(flag: bool, rank: int, world: int, device: torch.device) -> list[int]:
    """The processes that raised ``flag``: one all-reduce of one slot per process."""
    if not (dist.is_available() and dist.is_initialized()) or world == 1:
        return [rank] if flag else []
    slots = torch.zeros(world, device=device)
    slots[rank] = 1.0 if flag else 0.0
    dist.all_reduce(slots)
    return [r for r, count in enumerate(slots.tolist()) if count > 0]


def post_note(kind: str, rank: int, message: str) -> None:
    """Leave ``message`` for the main process (e.g. the first line of an out-of-memory error); no-op alone."""
    store = _store()
    if store is not None:
        store.set(f"fintts/{kind}/{rank}", message)


def read_note(kind: str, rank: int) -> str | None:
    """What process ``rank`` left with :func:`post_note` (``None``: nothing, or a single process)."""
    store = _store()
    key = f"fintts/{kind}/{rank}"
    if store is None or not store.check([key]):
        return None
    return store.get(key).decode("utf-8", "replace")


def post_failure(rank: int, message: str) -> None:
    """Tell the other processes why this one is stopping (no-op with a single process)."""
    store = _store()
    if store is None:
        return
    try:
        store.set(_KEY.format(rank=rank), message)
    except Exception:  # the store is served by the main process: it is gone when that one failed first
        pass


def posted_failures(rank: int) -> dict[int, str]:
    """What the *other* processes posted with :func:`post_failure`, by rank."""
    store = _store()
    if store is None:
        return {}
    found = {}
    for other in range(dist.get_world_size()):
        key = _KEY.format(rank=other)
        if other != rank and store.check([key]):
            found[other] = store.get(key).decode("utf-8", "replace")
    return found


def announce(name: str, value: str = "", *, read_by: int = 0, deadline: float | None = None) -> None:
    """The main process says ``name`` is done (with ``value``); the others :func:`await_main` it.

    ``read_by``: wait until that many processes have read it (at most until ``deadline``),
    for a last announcement: the store lives in this process and ends with it.
    """
    store = _store()
    if store is None:
        return
    store.set(_ANNOUNCEMENT.format(name=name), value)
    read = _ANNOUNCEMENT.format(name=name) + "/read"
    while read_by and store.add(read, 0) < read_by and (deadline is None or time.time() < deadline):
        time.sleep(POLL)


def await_main(name: str, deadline: float | None) -> str:
    """Wait, off the device, until the main process announces ``name`` (:func:`announce`); its value.

    Raises :class:`MainProcessGone` at ``deadline`` (``time.time()``; ``None``: no deadline),
    when the main process posted a failure, or when its store no longer answers.
    """
    store = _store()
    if store is None:
        return ""
    key, failure = _ANNOUNCEMENT.format(name=name), _KEY.format(rank=0)
    while True:
        try:
            if store.check([key]):
                value = store.get(key).decode("utf-8", "replace")
                store.add(key + "/read", 1)
                return value
            if store.check([failure]):
                raise MainProcessGone(f"the main process failed ({store.get(failure).decode('utf-8', 'replace')})")
        except MainProcessGone:
            raise
        except Exception as err:  # the store is served by the main process: it is gone
            raise MainProcessGone(f"the main process is gone while this one waited for {name!r} ({err})") from None
        if deadline is not None and time.time() > deadline:
            raise MainProcessGone(f"the main process did not finish {name!r} before the session's end")
        time.sleep(POLL)


def main_first(name: str, fetch: Callable[[], Any], deadline: float | None) -> Any:
    """``fetch()`` in the main process alone; the others wait for it off the device and get what it returned.

    For what only the main process can do, and the others then go on from: it alone holds the
    Hugging Face token (:mod:`~fintts.train.processes.hub_token`), so it fetches a private input
    into the cache the processes share, and its value (JSON: the commit it resolved, say) tells
    the others where to read it. They wait with :func:`await_main` (``deadline``: ``time.time()``;
    ``None``: none): a fetch that raises fails the main process's session, whose failure they read
    there (:class:`MainProcessGone`). ``name`` is announced once: a later fetch needs another.
    Alone, ``fetch()``.
    """
    if _store() is None:
        return fetch()
    if dist.get_rank() == 0:
        value = fetch()
        announce(name, json.dumps(value))
        return value
    return json.loads(await_main(name, deadline))
