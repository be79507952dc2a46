"""How many commits and history rewrites a training session makes on the Hub, projected to a 12-hour session.

The Hub's guidance is that a repo degrades after a few thousand commits, and every history
rewrite (``permanently_delete_lfs_files(rewrite_history=True)``, which frees deleted
checkpoints' storage) gives each later commit a new id under a reader's feet. This runs the
real :class:`~fintts.train.stores.hub.HubStore` against the local Hub stand-in on a clock where
an hour lasts ``--hour`` seconds, with a config's Hub settings (``push_every``,
``checkpoint_every``, ``keep_last``) and the store's defaults (lease timeout, rewrite spacing)
scaled the same way: a checkpoint published every ``checkpoint_every``, the session's final
push at its end, the lease taken and released. It counts the commits and rewrites the stand-in
saw, by kind, and projects them to a month of sessions.

    python benchmarks/hub_commits.py [configs/mms-fin.yaml] [--hours 12] [--hour 2.0] [--json out.json]
"""

from __future__ import annotations

import argparse
import collections
import inspect
import json
import tempfile
import time
from pathlib import Path

from fintts.train.config import load_config
from fintts.train.run import checkpoint
from fintts.train.stores.hub import HubStore
from fintts.train.stores.hub import store as hub_store
from fintts_stand_ins import HubServer

TOKEN = "hf_benchmark_token"
REPO = "bench/commits"
#: Kaggle's GPU quota, 30 hours a week, as 12-hour sessions in a 30-day month.
SESSIONS_PER_MONTH = 30 * 30 / 7 / 12


def run(config: Path, hours: float, hour: float) -> dict[str, object]:
    train = load_config(config).train
    scale = hour / 3600.0
    options = {"push_every": train.push_every * scale}
    accepted = inspect.signature(HubStore).parameters
    if "rewrite_every" in accepted:  # the store's own default, on the same clock
        options["rewrite_every"] = hub_store.REWRITE_EVERY * scale
        options["lease_timeout"] = max(hub_store.MIN_LEASE_TIMEOUT, 2 * train.push_every) * scale
    else:  # a store from before these settings (a baseline): its defaults, scaled
        options["lease_timeout"] = 900.0 * scale
    with tempfile.TemporaryDirectory(prefix="fintts-bench-") as tmp, HubServer(Path(tmp) / "hub", token=TOKEN) as hub:
        store = HubStore(REPO, root=Path(tmp) / "run", endpoint=hub.endpoint, token=TOKEN, **options)
        store.acquire("bench-session")
        end = time.monotonic() + hours * hour
        step = 0
        while time.monotonic() + train.checkpoint_every * scale < end:
            time.sleep(train.checkpoint_every * scale)
            step += 100
            name = checkpoint.name_for_step(step)
            checkpoint.save(store.root, name, lambda folder: (folder / "model.safetensors").write_bytes(step.to_bytes(4, "big") * 2048))
            store.prune(train.keep_last)
            store.publish(name)
        time.sleep(max(0.0, end - time.monotonic()))
        step += 100
        name = checkpoint.name_for_step(step)
        checkpoint.save(store.root, name, lambda folder: (folder / "model.safetensors").write_bytes(step.to_bytes(4, "big") * 2048))
        store.publish(name, final=True)
        if not store.wait(timeout=120):
            raise SystemExit(store.pending())
        store.release()
        store.close()
        kinds = collections.Counter(_kind(c["summary"]) for c in hub.landed(REPO)[1:])  # [0]: the repo's creation
        rewrites = hub.rewrites(REPO)
    commits = sum(kinds.values())
    return {
        "config": str(config), "hours": hours, "seconds_per_hour": hour, "checkpoints": step // 100,
        "commits": commits, "by_kind": dict(kinds), "rewrites": rewrites,
        "per_12h_session": {"commits": round(commits * 12 / hours, 1), "rewrites": round(rewrites * 12 / hours, 1)},
        "per_month": {"sessions": round(SESSIONS_PER_MONTH, 1), "commits": round(commits * 12 / hours * SESSIONS_PER_MONTH),
                      "rewrites": round(rewrites * 12 / hours * SESSIONS_PER_MONTH)},
    }


def _kind(summary: str) -> str:
    for kind in ("heartbeat", "lease", "release"):
        if summary.startswith(kind):
            return kind
    return "checkpoint push"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", type=Path, nargs="?", default=Path("configs/mms-fin.yaml"))
    parser.add_argument("--hours", type=float, default=12.0, help="the session's length in (scaled) hours")
    parser.add_argument("--hour", type=float, default=2.0, help="seconds one hour of the session lasts here")
    parser.add_argument("--json", type=Path, help="also write the result here")
    args = parser.parse_args()
    result = run(args.config, args.hours, args.hour)
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
