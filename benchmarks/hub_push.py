"""How fast the Hub store pushes, and how long ``publish()`` stalls the trainer.

Runs the real store and ``huggingface_hub`` client against the local
:class:`~fintts_stand_ins.HubServer` (127.0.0.1, files sent base64 in the commit), so the
throughput is the store's and client's own overhead, not the network's: on the real Hub
large files go through Xet and the link is the limit. What it does show faithfully is the
training stall per checkpoint: ``publish()`` must cost no more than writing the
checkpoint locally (``checkpoint.save``), whatever the upload takes.

    python benchmarks/hub_push.py [--sizes 10 50 200] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from fintts.train.run import checkpoint
from fintts.train.stores.hub import HubStore
from fintts_stand_ins import HubServer

TOKEN = "hf_benchmark_token"
MB = 1 << 20


def measure(server: HubServer, root: Path, step: int, size_mb: int) -> dict[str, float]:
    store = HubStore(f"bench/push-{size_mb}mb", root=root, endpoint=server.endpoint, token=TOKEN, push_every=0)
    model = root / "model"
    model.mkdir(parents=True, exist_ok=True)
    (model / "model.safetensors").write_bytes(os.urandom(max(1, size_mb // 10) * MB))
    name = checkpoint.name_for_step(step)
    started = time.perf_counter()
    checkpoint.save(root, name, lambda folder: (folder / "state.safetensors").write_bytes(os.urandom(size_mb * MB)))
    saved = time.perf_counter() - started
    started = time.perf_counter()
    store.publish(name, final=True)
    blocked = time.perf_counter() - started
    if not store.wait(timeout=600):
        raise SystemExit(store.pending())
    seconds = store.transfer_seconds()[-1]
    store.close()
    pushed_mb = size_mb + max(1, size_mb // 10)
    return {
        "checkpoint_mb": size_mb, "pushed_mb": pushed_mb, "save_s": saved, "publish_blocks_s": blocked,
        "push_s": seconds, "mb_per_s": pushed_mb / seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 50, 200], help="checkpoint sizes in MB")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="fintts-bench-") as tmp, HubServer(Path(tmp) / "hub", token=TOKEN) as server:
        for step, size in enumerate(args.sizes, 1):
            rows.append(measure(server, Path(tmp) / f"run-{size}", step, size))
    print(f"{'checkpoint':>10} {'pushed':>8} {'save()':>9} {'publish() blocks':>17} {'push':>8} {'throughput':>11}")
    for row in rows:
        print(
            f"{row['checkpoint_mb']:>8} MB {row['pushed_mb']:>5} MB {row['save_s']:>8.3f}s"
            f" {row['publish_blocks_s'] * 1000:>15.2f}ms {row['push_s']:>7.2f}s {row['mb_per_s']:>7.1f} MB/s"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
