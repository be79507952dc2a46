"""``lease.json``: which session writes a Hub run, so two sessions never interleave checkpoints.

The writer commits its lease when it starts, refreshes it with heartbeat commits while it
trains and deletes it when it ends. Another session refuses to start while the lease is
fresh (younger than its ``timeout``), takes over a stale one (its writer died without
releasing), and takes any one with ``--force``.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

LEASE = "lease.json"


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
    def parse(cls, data: bytes | None) -> "Lease | None":
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

    def age(self, now: float | None = None) -> float:
        return (time.time() if now is None else now) - self.heartbeat_unix

    def fresh(self, now: float | None = None) -> bool:
        return self.age(now) < self.timeout

    def conflict_message(self, url: str, now: float | None = None) -> str:
        age = self.age(now)
        return (
            f"{url} is being trained by session {self.session} on {self.host} since {self.acquired} "
            f"(last heartbeat {duration(age)} ago). If that session is still running, let it finish or stop it. "
            f"If it died, its lease expires in {duration(self.timeout - age)}, or take over now with --force."
        )


def iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 60} min {seconds % 60} s" if seconds >= 60 else f"{seconds} s"
