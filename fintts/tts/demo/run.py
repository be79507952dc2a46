"""``fintts demo``: the whole story on a CPU in half an hour.

Trains ``configs/demo.yaml`` (a small VITS from scratch on the embedded espeak-ng corpus)
in two real sessions — each a separate ``fintts train`` process with a time budget, so the
first pauses with a checkpoint and the second resumes from it exactly as a Kaggle session
would — then has the best voice say a sentence into a wav file.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import soundfile

from fintts.train.stores.base import STATUS
from fintts.tts.voice import load_voice

DEFAULT_CONFIG = Path(__file__).resolve().parents[3] / "configs" / "demo.yaml"
#: Per session. On a 2-core CPU (~0.65 s/step) two of these reach ~2,700 steps; the voice
#: from scratch tells the held-out sentences apart from ~1,200 steps on (README, "What to expect").
DEFAULT_BUDGET = "15m"


def run_demo(
    *,
    store: Path = Path("runs/demo"),
    budget: str = DEFAULT_BUDGET,
    out: Path = Path("demo.wav"),
    config: Path = DEFAULT_CONFIG,
    sentence: str = "Hyvää huomenta! Kello on 7.30.",
    extra: list[str] = (),
) -> Path:
    if not config.is_file():
        raise FileNotFoundError(f"{config} not found: run fintts demo from a checkout of fintts, or pass --config")
    for session in (1, 2):
        print(f"== demo session {session} of 2: fintts train {config} --budget {budget}", flush=True)
        command = [sys.executable, "-m", "fintts", "train", str(config), "--store", str(store), "--budget", budget, *extra]
        result = subprocess.run(command)
        if result.returncode != 0:
            raise RuntimeError(f"demo session {session} failed with exit code {result.returncode}")
    load_voice(store / "model").save(sentence, out)
    print(f"== the demo voice says {sentence!r} in {out} ({soundfile.info(str(out)).duration:.1f} s); "
          f"listen to it, and to the samples in {store}/checkpoints/*/samples")
    print(_progress_line(store))
    return out


def _progress_line(store: Path) -> str:
    """What the validations said, so the wav comes with an objective reading."""
    status = json.loads((store / STATUS).read_text(encoding="utf-8"))
    evals = [e for e in status.get("evals", []) if "val/mcd" in e]
    if not evals:
        return "== no validation ran yet: train longer (fintts demo --budget 20m continues this run)"
    best, last = status["best"], evals[-1]
    line = f"== held-out MCD: best {best['value']:.2f} dB at step {best['step']}, latest {last['val/mcd']:.2f} dB at step {last['step']}"
    if "val/identified" in last:
        line += (f"; {last['val/identified']:.0%} of the held-out sentences were nearest to their own "
                 "recording among their speaker's held-out clips (the demo's 5 per speaker: chance 20%)")
    return line + ". Run fintts demo again to train on from here."
