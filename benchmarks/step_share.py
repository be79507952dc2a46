"""The share of a session's wall time spent in optimizer steps: measured on the MMS-sized stand-in, projected to 12 hours.

    python benchmarks/step_share.py OUT [--device cpu|cuda] [--steps N] [--validations V] [--config YAML] [--set KEY=VALUE ...]

trains one session of ``configs/mms-fin.yaml`` on the stand-ins of ``benchmarks/stand_ins.py``
(written to ``OUT`` once, then reused) in ``OUT/run-<device>`` (emptied first) and reads what
the session recorded about itself: seconds per phase (:data:`fintts.train.run.state.PHASES`:
start-up, steps, validations with the quick part of each new best's export, checkpoints, the final save,
which waits for the newest best's ONNX graphs, made in the background).

A session long enough to validate at the config's cadence (``eval_every: 250``) takes hours on
a CPU, so the measured session validates every ``steps / validations`` steps instead, and the
12-hour figure is a projection from its costs, not a measurement:

    T = fixed + n * step + (n / eval_every) * validation + (T / checkpoint_every) * checkpoint

solved for ``n``, the steps of a ``--session-hours`` session, with ``fixed`` the session's
start-up and final save, ``step`` the mean step, ``validation`` the mean validation (each of
them a new best in a run that keeps improving, so each with the voice's export), and
``checkpoint`` the final save's cost standing in for each periodic one. The share is
``n * step / T``. The projection holds for the device it was measured on: a GPU shortens the
steps far more than the validations' CPU-bound parts (ONNX export, MCD), so only a run on the
GPU (``--device cuda``, the config's own batch and cadence) says what a Kaggle session does. It
trains in this one process (``fintts.train.train``) on the first GPU: the phases of one of a
two-GPU session's processes, without the second GPU's share of the batch.

On the CPU the defaults keep it to a few minutes: batch 4 (one micro-batch), 4 steps, 2
validations, 24 clips. ``--config`` trains another config (``benchmarks/gpu_check.py --dry-run``: a
toy-sized one) and ``--set`` adds overrides after the script's own (``precision=fp16``: a T4's
precision on a GPU whose ``auto`` is bf16). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import torch

from fintts.train import train
from fintts.train.config import load_config, parse_duration

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stand_ins import make_corpus, make_init

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "mms-fin.yaml"
FIXED_PHASES = ("before", "models", "data", "resume", "final")


def project(phases: dict[str, float], steps: int, validations: int, *, eval_every: int, checkpoint_every: float,
            hours: float) -> dict[str, float]:
    """The steps and the share of time in them of a ``hours`` session with these costs (see the module doc)."""
    step = phases.get("steps", 0.0) / steps
    validation = phases.get("validation", 0.0) / max(1, validations)
    checkpoint = phases.get("final", 0.0)
    fixed = sum(phases.get(name, 0.0) for name in FIXED_PHASES)
    total = hours * 3600
    working = total - fixed - (total / checkpoint_every) * checkpoint
    n = working / (step + validation / eval_every)
    return {
        "seconds_per_step": step, "seconds_per_validation": validation, "seconds_per_checkpoint": checkpoint,
        "fixed_seconds": fixed, "steps": n, "share_in_steps": n * step / total,
        "share_in_validations": n / eval_every * validation / total,
        "share_in_checkpoints": total / checkpoint_every * checkpoint / total, "share_fixed": fixed / total,
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, help="steps of the measured session (cpu: 4, cuda: 500)")
    parser.add_argument("--validations", type=int, help="validations in it (cpu: 2, cuda: steps / eval_every)")
    parser.add_argument("--batch", type=int, help="batch_size (cpu: 4 in one micro-batch; cuda: the config's)")
    parser.add_argument("--clips", type=int, help="stand-in corpus size when OUT has none (cpu: 24, cuda: 200)")
    parser.add_argument("--session-hours", type=float, default=12.0)
    parser.add_argument("--config", type=Path, default=CONFIG, help="the config to train (default configs/mms-fin.yaml)")
    parser.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
                        help="an override after the script's own, e.g. precision=fp16 (repeatable)")
    args = parser.parse_args(argv)
    cpu = args.device == "cpu"
    config = load_config(args.config)
    eval_every = config.train.eval_every
    steps = args.steps or (4 if cpu else 2 * eval_every)
    validations = args.validations or (2 if cpu else steps // eval_every)
    if not (args.out / "corpus").is_dir():
        make_corpus(args.out / "corpus", args.clips or (24 if cpu else 200), 6.0, 22050)
    if not (args.out / "mms-sized").is_dir():
        make_init(args.out / "mms-sized")
    store = args.out / f"run-{args.device}"
    shutil.rmtree(store, ignore_errors=True)
    overrides = [
        f"data={args.out / 'corpus'}", f"init={args.out / 'mms-sized'}", f"store={store}", "hub_repo=",
        f"max_steps={steps}", f"eval_every={steps // validations}", "budget=none", "patience=0",
    ]
    if cpu:
        batch = args.batch or 4
        overrides += [f"batch_size={batch}", f"micro_batch_size={batch}", "precision=fp32"]
    elif args.batch:
        overrides += [f"batch_size={args.batch}"]
    overrides += args.settings
    started = time.time()
    summary = train(config, overrides=overrides, progress=False, log=lambda message: print(message, file=sys.stderr))
    wall = time.time() - started
    status = json.loads((store / "status.json").read_text())
    session = status["sessions"][-1]
    phases = session["phases"]
    result = {
        "device": session["devices"], "precision": session["precision"], "batch_size": status["data"]["batch_size"],
        "steps": summary.steps, "validations": validations, "wall_seconds": wall, "phases": phases,
        "measured_share_in_steps": phases.get("steps", 0.0) / wall,
        "projection": {
            "session_hours": args.session_hours, "eval_every": eval_every, "checkpoint_every": config.train.checkpoint_every,
            **project(phases, summary.steps, validations, eval_every=eval_every,
                      checkpoint_every=parse_duration(config.train.checkpoint_every), hours=args.session_hours),
        },
        "threads": torch.get_num_threads(),
    }
    print(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
