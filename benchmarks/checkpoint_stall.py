"""How long does a checkpoint stall training, and how long does resuming take?

For toy models of 10M, 40M and 100M parameters trained with AdamW (so the checkpoint
holds weights + two moments), measure through the real trainer:

* stall: seconds the loop stops for one checkpoint (safetensors + optimizer state +
  manifest + atomic rename), as the trainer itself records it for its reserve;
* resume: seconds from ``Trainer.run()`` to the first training step of a resumed session
  (find + verify the checkpoint, build, load weights and optimizer state, restore RNG);
* fresh: the same for a new run, to show what resuming adds.

    python benchmarks/checkpoint_stall.py                 # CPU, all sizes
    python benchmarks/checkpoint_stall.py --sizes 10M --json out.json

On a GPU machine the trainer picks the GPU (accelerate) and the figures include the
device-to-host copies of the state.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fintts.train import Trainer
from fintts.train.config import load_config  # noqa: E402
from fintts.train.run import checkpoint  # noqa: E402
from fintts.train.run.state import TrainerState  # noqa: E402
from fintts_stand_ins.toy import ToyTask  # noqa: E402


class TimedToyTask(ToyTask):
    """The toy task, noting when its first training step starts."""

    first_step_at: float | None = None

    def step(self, models, batch, group):
        if self.first_step_at is None:
            self.first_step_at = time.perf_counter()
        return super().step(models, batch, group)


def parse_size(text: str) -> int:
    text = text.upper()
    scale = {"K": 1e3, "M": 1e6, "G": 1e9}.get(text[-1], 1)
    return int(float(text.rstrip("KMG")) * scale)


def run(store: Path, params: int, max_steps: int) -> tuple[Trainer, float]:
    config = load_config(None, {
        "task": "checkpoint_stall:TimedToyTask", "params": params, "max_steps": max_steps, "batch_size": 16,
        "checkpoint_every_steps": 1, "eval_every": 0, "num_workers": 0, "keep_last": 2, "dropout": 0.0, "store": str(store),
    })
    trainer = Trainer(config, progress=False, log=lambda _: None)
    called = time.perf_counter()
    trainer.run()
    return trainer, trainer.session.built.task.first_step_at - called


def measure(params: int, steps: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp)
        trainer, fresh = run(store, params, steps)
        stalls = trainer.session.state.durable_seconds[-steps:]
        size = sum(p.stat().st_size for p in (store / "checkpoints" / checkpoint.read_latest(store)).iterdir())
        actual = sum(p.numel() for m in trainer.session.built.raw_models.values() for p in m.parameters())
        _, resume = run(store, params, steps + 1)
        state = TrainerState.from_json((checkpoint.latest_complete(store) / "state.json").read_text())
        assert state.step == steps + 1
    return {
        "params": actual,
        "checkpoint_mb": size / 1e6,
        "stall_s_median": statistics.median(stalls),
        "stall_s_max": max(stalls),
        "resume_to_first_step_s": resume,
        "fresh_to_first_step_s": fresh,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", default=["10M", "40M", "100M"])
    parser.add_argument("--steps", type=int, default=3, help="checkpoints measured per size (one per step)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = {size: measure(parse_size(size), args.steps) for size in args.sizes}
    print(f"{'size':>6} {'params':>12} {'ckpt MB':>8} {'stall s (median/max)':>22} {'resume s':>9} {'fresh s':>8}")
    for size, r in rows.items():
        print(
            f"{size:>6} {r['params']:>12,} {r['checkpoint_mb']:>8.0f} "
            f"{r['stall_s_median']:>13.2f} / {r['stall_s_max']:<6.2f} "
            f"{r['resume_to_first_step_s']:>9.2f} {r['fresh_to_first_step_s']:>8.2f}"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
