"""What the processes of one run (one per GPU) agree on, and how a failure reaches them all.

Every stop decision is a vote: each process brings its own flags (a signal it received,
its clock running out) and a sum over all of them decides, so all processes stop after
the same step and meet the same collectives on the way out (the final checkpoint).

An exception is the one stop that cannot be voted on: the process that raised leaves the
others waiting in their next collective. With gloo (the CPU backend) that collective fails
at once with "Connection closed by peer"; with NCCL the waiting process learns of it
from the process-group watchdog (and the launcher, :mod:`fintts.train.launcher`, ends
what is left after a grace period). Either way the main process, which writes the run's
status, would only know that a connection closed. So before it exits, a failing process
posts its error in the process group's key-value store — the rendezvous store every
process of the run already shares, served by the main process — and the main process
reads what its peers posted when it fails in turn, so the status says
``process 1: ValueError: ...`` instead of the symptom.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

_KEY = "fintts/failure/{rank}"


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
