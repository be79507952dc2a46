"""How long to wait before trying a remote service again: the Hub's client and Kaggle's share it.

One schedule for every retry loop (doubling waits, capped, jittered so that two sessions that failed together do
not retry together; a server's ``Retry-After`` honoured up to a cap), in a module that imports nothing of ours so
that neither side reaches into the other's client for it (tests/test_layers.py keeps it so).
"""

from __future__ import annotations

import dataclasses
import random


@dataclasses.dataclass(frozen=True)
class Backoff:
    """Waits between retries: ``base * 2**n`` capped at ``cap``, times a jitter in ``[1 - jitter, 1]``.

    ``Retry-After`` from the service wins when longer, up to ``retry_after_cap``.
    """

    base: float = 5.0
    cap: float = 300.0
    jitter: float = 0.5
    retry_after_cap: float = 3600.0  # the Hub's commit quota is hourly

    def delay(self, failures: int, retry_after: float | None = None) -> float:
        # the doubling stops once it is past any cap: 2**n of an int grows without bound, and a float times it overflows
        # (OverflowError) after ~1,000 failures, which a loop retrying a long outage at short waits reaches; the thread
        # that pushes died of it in a suite run (test_hub_service.py's outage in the final push)
        doublings = min(max(failures - 1, 0), 62)
        wait = min(self.cap, self.base * 2.0**doublings) * random.uniform(1 - self.jitter, 1)
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.retry_after_cap))
        return wait
