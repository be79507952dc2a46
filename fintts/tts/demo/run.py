"""``fintts demo``: the whole story on a CPU in a few minutes.

Trains ``configs/demo.yaml`` (a small VITS from scratch on the embedded espeak-ng corpus)
in two real sessions — each a separate ``fintts train`` process with a time budget, so the
first pauses with a checkpoint and the second resumes from it exactly as a Kaggle session
would — then has the best voice say a sentence into a wav file.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from fintts.tts.audio import save_wav
from fintts.tts.voice import Voice

DEFAULT_CONFIG = Path(__file__).resolve().parents[3] / "configs" / "demo.yaml"


def run_demo(
    *,
    store: Path = Path("runs/demo"),
    budget: str = "4m",
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
    voice = Voice.load(store / "model")
    wav = voice.synthesize(sentence, voice.speakers[0] if voice.speakers else None)
    save_wav(out, wav, voice.sample_rate)
    print(f"== the demo voice says {sentence!r} in {out} ({len(wav) / voice.sample_rate:.1f} s); "
          f"listen to it, and to the samples in {store}/checkpoints/*/samples")
    return out
