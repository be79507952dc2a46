"""``lease.json``: which session writes a Hub run, so two sessions never interleave checkpoints.

The writer commits its lease when it starts, refreshes it with heartbeat commits while it
trains (every full push refreshes it too) and deletes it when it ends. Another session
refuses to start while the lease is fresh, takes over a stale one (its writer died without
releasing), and takes any one with ``--force``.

**Fresh by the Hub's clock alone.** Comparing the writer's heartbeat time with the reader's
clock would let two machines' clocks decide: a reader whose clock runs an hour ahead would
take a live lease, one whose clock runs behind would never take a dead one. Instead the
lease's age is the time since the repo's newest commit as the Hub tells both (the commit's
date and the ``Date`` of the same answer, :meth:`HubClient.head_state`). While a lease
exists only its holder commits (heartbeats, pushes, its release), so the newest commit is
its newest sign of life; a commit made by hand in the meantime only makes the lease look
younger, which errs on the side of refusing (``--force`` then decides). When the Hub does
not say, the lease counts as fresh. ``heartbeat_unix`` stays in the file, for people.

**Slow pushes.** No heartbeat can land while a full push is committing, so the holder
writes a ``timeout`` of at least :data:`LONG_PUSH_FACTOR` times its longest recent push:
a live session is not taken over in the middle of a slow upload. That timeout has a
ceiling, :data:`MAX_LEASE_SHARE` of the session (:data:`MAX_LEASE_TIMEOUT` without a
session limit): after one stalled push, a dead session's lease must not block the next
sessions for hours. Uploads are bounded too (see :mod:`.store`), so a bounded one fits in it.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

LEASE = "lease.json"
#: A lease's timeout is at least this many times the holder's longest recent push.
LONG_PUSH_FACTOR = 3.0
#: ... but at most this share of the session it is written in,
MAX_LEASE_SHARE = 0.25
#: or this many seconds for a session without a limit.
MAX_LEASE_TIMEOUT = 3 * 3600.0


@dataclasses.dataclass(frozen=True)
class Lease:
    session: str
    host: str
    pid: int
    #: when this session first took the run (ISO 8601, UTC).
    acquired: str
    heartbeat_unix: float
    #: seconds without a heartbeat after which another session may take over.
    timeout: float

    @classmethod
    def parse(cls, data: bytes | None) -> Lease | None:
        """The lease in ``data``; ``None`` when there is none or it is unreadable (nobody holds the run)."""
        try:
            value: Any = json.loads(data) if data else None
            return cls(
                session=str(value["session"]), host=str(value.get("host", "?")), pid=int(value.get("pid", 0)),
                acquired=str(value.get("acquired", "")), heartbeat_unix=float(value.get("heartbeat_unix", 0.0)),
                timeout=float(value["timeout"]),
            )
        except (ValueError, TypeError, KeyError):
            return None

    def to_bytes(self) -> bytes:
        data = dataclasses.asdict(self) | {"heartbeat": iso(self.heartbeat_unix)}
        return json.dumps(data, indent=1).encode()

    def stale(self, age: float | None) -> bool:
        """Has the holder been silent longer than ``timeout``? ``age``: seconds since its last commit, by the Hub's clock."""
        return age is not None and age >= self.timeout

    def conflict_message(self, url: str, age: float | None) -> str:
        silent = "unknown" if age is None else f"{duration(age)} ago"
        expires = f"in {duration(self.timeout - age)}" if age is not None else f"{duration(self.timeout)} after its last commit"
        return (
            f"{url} is being trained by session {self.session} on {self.host} since {self.acquired} "
            f"(last commit {silent}, by the Hub's clock). If that session is still running, let it finish or stop it. "
            f"If it died, its lease expires {expires}, or take over now with --force."
        )


def iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 60} min {seconds % 60} s" if seconds >= 60 else f"{seconds} s"
