"""What a fresh session spends before its first step, measured by real ``fintts train`` processes.

    python benchmarks/startup.py --clips 200 --seconds 6 --rate 22050 [--json out.json]

Builds a corpus of ``--clips`` synthetic clips (harmonic tones with a syllable-rate envelope,
16-bit WAV at ``--rate``, text at ~15 characters a second) and an MMS-sized voice to start
from (``VitsModel(VitsConfig())`` — transformers' defaults are the MMS-TTS architecture —
saved with ``save_pretrained`` as a downloaded ``facebook/mms-tts-fin`` would be), then runs
``configs/mms-fin.yaml`` for one step in three fresh processes, as sessions meet them:

* ``new run``: an empty run folder, so every clip's features are computed;
* ``local resume``: the same folder again, the feature cache kept;
* ``Hub resume``: the run pushed to a local Hub stand-in (:class:`fintts.testing.HubServer`)
  and resumed into an empty folder, as a Kaggle session finds its disk: the checkpoint is
  downloaded and the features computed again.

Each session's phases (:data:`fintts.train.state.PHASES`) come from its ``status.json``:
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

import numpy as np
import soundfile as sf
import torch
from transformers import VitsConfig, VitsModel

from fintts.testing import HubServer
from fintts.train.stores.base import STATUS
from fintts.tts.corpus import check_corpus
from fintts.tts.text import FinnishText

ROOT = Path(__file__).resolve().parents[1]
WORDS = [word.strip(".,!?;:'\"()") for line in (ROOT / "fintts" / "tts" / "demo" / "sentences.txt").read_text(encoding="utf-8").splitlines()
         if line and not line.startswith("#") for word in line.split()]
TOKEN = "hf_startup_benchmark"
REPO = "bench/startup"


def make_corpus(folder: Path, clips: int, seconds: float, rate: int) -> Path:
    """An LJSpeech-layout corpus of voiced-sounding synthetic clips, ``seconds`` ± 30 % long."""
    rng = np.random.default_rng(0)
    (folder / "wavs").mkdir(parents=True)
    lines = []
    for n in range(clips):
        length = seconds * rng.uniform(0.7, 1.3)
        t = np.arange(int(length * rate)) / rate
        pitch = rng.uniform(100, 220)
        voice = sum(np.sin(2 * np.pi * pitch * k * t) / k for k in range(1, 6))
        envelope = 0.5 + 0.5 * np.sin(2 * np.pi * 4 * t) ** 2
        audio = (0.1 * voice * envelope + 0.003 * rng.standard_normal(t.size)).astype(np.float32)
        sf.write(folder / "wavs" / f"clip{n:05d}.wav", audio, rate, subtype="PCM_16")
        words = rng.choice([w for w in WORDS if w], size=max(2, int(length * 15 / 7)))
        lines.append(f"clip{n:05d}|{' '.join(words)}.")
    (folder / "metadata.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def make_init(folder: Path) -> Path:
    """An MMS-sized voice with random weights, saved as a downloaded checkpoint would be."""
    text = FinnishText.default()
    torch.manual_seed(0)
    VitsModel(VitsConfig(vocab_size=text.vocab_size)).save_pretrained(folder)
    text.save_tokenizer(folder)
    return folder


def session(args: list[str], store: Path, env: dict[str, str]) -> dict[str, float]:
    """Run one ``fintts train`` process and return its session's phases and wall time."""
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "fintts", "train", *args], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - started
    if result.returncode != 0:
        raise RuntimeError(f"fintts train failed ({result.returncode}):\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}")
    phases = json.loads((store / STATUS).read_text())["sessions"][-1]["phases"]
    return {**phases, "process_wall": wall}


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
    finally:
        shutil.rmtree(work, ignore_errors=True)

    result = {
        "clips": args.clips, "mean_seconds": args.seconds, "rate": args.rate, "corpus_hours": report.hours,
        "corpus_check_seconds": check_seconds, "checkpoint_mb": checkpoint_mb, "sessions": phases,
        "torch_threads": torch.get_num_threads(), "loadavg_after": os.getloadavg(),
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
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
