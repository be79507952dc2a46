"""What a fresh session spends before its first step, measured by real ``fintts train`` processes.

    python benchmarks/startup.py --clips 200 --seconds 6 --rate 22050 [--json out.json]

Builds a corpus of ``--clips`` synthetic clips at ``--rate`` and an MMS-sized voice to start
from (:mod:`stand_ins`), then runs
``configs/mms-fin.yaml`` for one step in three fresh processes, as sessions meet them:

* ``new run``: an empty run folder, so every clip's features are computed;
* ``local resume``: the same folder again, the feature cache kept;
* ``Hub resume``: the run pushed to a local Hub stand-in (:class:`fintts_stand_ins.HubServer`)
  and resumed into an empty folder, as a Kaggle session finds its disk: the checkpoint is
  downloaded and the features computed again.

Then, since a session computes features as its first epoch reads the clips, how fast the
data loader delivers clips with ``--num-workers`` workers from an empty cache and from a full
one (the task's own dataset and collate, through the Task interface), to set against the
clips per second a training step consumes.

Each session's phases (:data:`fintts.train.run.state.PHASES`) come from its ``status.json``:
``before`` (process start to training: Python, imports, the config), ``models`` (the corpus
check and the model), ``data`` (the training items), ``resume``. The corpus check alone is
timed in this process with :func:`fintts.tts.corpus.check_corpus`; the per-clip figures are
extrapolated to ``--extrapolate`` clips. Installs and the real Hub's network are not here:
the Hub stand-in is on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from fintts.train.config import load_config
from fintts.train.run.layout import STATUS
from fintts.train.task import TaskContext
from fintts.tts.corpus import check_corpus
from fintts_stand_ins import HubServer
from stand_ins import make_corpus, make_init

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "hf_startup_benchmark"
REPO = "bench/startup"


def session(args: list[str], store: Path, env: dict[str, str]) -> dict[str, float]:
    """Run one ``fintts train`` process and return its session's phases and wall time."""
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "fintts", "train", *args], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - started
    if result.returncode != 0:
        raise RuntimeError(f"fintts train failed ({result.returncode}):\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}")
    phases = json.loads((store / STATUS).read_text())["sessions"][-1]["phases"]
    return {**phases, "process_wall": wall}


def loader_rates(config: Path, overrides: list[str], cache: Path, workers: int) -> dict[str, float]:
    """Clips per second the task's data loader delivers with an empty feature cache, then a full one."""
    run = load_config(config, overrides)
    task = run.task_class(run.task, TaskContext(run.train.seed, torch.device("cpu"), None, cache, log=lambda _: None, progress=False))
    task.build_models()
    rates = {}
    for name in ("cold", "warm"):
        data = task.train_data()
        loader = torch.utils.data.DataLoader(data.dataset, batch_size=8, collate_fn=data.collate, num_workers=workers)
        started = time.perf_counter()
        for _ in loader:
            pass
        rates[name] = len(data.dataset) / (time.perf_counter() - started)
    return rates


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clips", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=6.0, help="mean clip length")
    parser.add_argument("--rate", type=int, default=22050, help="the clips' sample rate (training resamples to 16 kHz)")
    parser.add_argument("--extrapolate", type=int, default=2000, help="clips to extrapolate the per-clip costs to")
    parser.add_argument("--num-workers", type=int, default=2, help="data-loader workers (num_workers=)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="fintts-startup-"))
    try:
        corpus = make_corpus(work / "corpus", args.clips, args.seconds, args.rate)
        init = make_init(work / "mms-sized")
        started = time.perf_counter()
        report = check_corpus(corpus, progress=False)
        check_seconds = time.perf_counter() - started
        assert not report.problems, report.problems[:3]
        overrides = [f"data={corpus}", f"init={init}", "batch_size=2", "micro_batch_size=2", "eval_every=0",
                     f"num_workers={args.num_workers}", "--no-progress"]
        config = str(ROOT / "configs" / "mms-fin.yaml")
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.pop("KAGGLE_KERNEL_RUN_TYPE", None)
        local = work / "run"
        phases = {
            "new run": session([config, *overrides, "--store", str(local), "--max-steps", "1"], local, env),
            "local resume": session([config, *overrides, "--store", str(local), "--max-steps", "2"], local, env),
        }
        with HubServer(work / "hub", token=TOKEN) as hub:
            env.update(HF_ENDPOINT=hub.endpoint, HF_TOKEN=TOKEN, HF_HUB_DISABLE_TELEMETRY="1")
            pushed = subprocess.run([sys.executable, "-m", "fintts", "push", "--store", str(local), "--hub-repo", REPO],
                                    capture_output=True, text=True, env=env)
            if pushed.returncode != 0:
                raise RuntimeError(pushed.stderr[-2000:])
            fresh = work / "fresh-disk"
            phases["Hub resume"] = session(
                [config, *overrides, "--store", str(fresh), "--hub-repo", REPO, "--max-steps", "3", "--force"], fresh, env
            )
        checkpoint_mb = sum(p.stat().st_size for p in (local / "checkpoints").rglob("*") if p.is_file()) / 1e6 / 2
        settings = [item for item in overrides if "=" in item and not item.startswith("-")]
        rates = loader_rates(Path(config), settings, work / "loader-cache", args.num_workers)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    result = {
        "clips": args.clips, "mean_seconds": args.seconds, "rate": args.rate, "corpus_hours": report.hours,
        "corpus_check_seconds": check_seconds, "checkpoint_mb": checkpoint_mb, "sessions": phases,
        "loader_clips_per_second": rates, "torch_threads": torch.get_num_threads(), "loadavg_after": os.getloadavg(),
    }
    cold, warm = phases["new run"]["data"], phases["local resume"]["data"]
    result["per_clip_ms"] = {"corpus_check": 1000 * check_seconds / args.clips, "data_cold": 1000 * cold / args.clips,
                             "data_warm": 1000 * warm / args.clips}
    result[f"extrapolated_{args.extrapolate}_clips_seconds"] = {
        key: value * args.extrapolate / 1000 for key, value in result["per_clip_ms"].items()
    }
    names = ("before", "models", "data", "resume")
    print(f"{args.clips} clips of ~{args.seconds:g} s at {args.rate} Hz ({report.hours:.2f} h); checkpoint {checkpoint_mb:.0f} MB")
    print(f"{'session':<14}" + "".join(f"{name:>10}" for name in names) + f"{'to step 1':>11}{'process':>10}")
    for name, p in phases.items():
        print(f"{name:<14}" + "".join(f"{p.get(k, 0.0):>9.1f}s" for k in names)
              + f"{sum(p.get(k, 0.0) for k in names):>10.1f}s{p['process_wall']:>9.1f}s")
    print(f"corpus check alone: {check_seconds:.1f} s ({result['per_clip_ms']['corpus_check']:.1f} ms/clip)")
    for key, seconds in result[f"extrapolated_{args.extrapolate}_clips_seconds"].items():
        print(f"{key} × {args.extrapolate} clips: {seconds:.0f} s")
    print(f"data loader, {args.num_workers} workers: {rates['cold']:.1f} clips/s computing features, "
          f"{rates['warm']:.1f} clips/s from the cache")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
