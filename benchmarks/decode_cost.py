"""What decoding and resampling 48 kHz mp3 (Common Voice's clips) costs, per hour of audio, on one core.

    python benchmarks/decode_cost.py --clips 120 --seconds 4 [--rate 16000] [--json out.json]

Builds ``--clips`` Common-Voice-like clips (espeak-ng Finnish, resampled to 48 kHz and encoded
by ffmpeg with LAME at 64 kbit/s, mono) in a temporary folder, then times, over every clip:

* ``decode``: :func:`fintts.tts.audio.read_audio` (soundfile → libsndfile → mpg123), which
  ``fintts check`` runs on every clip;
* ``resample``: 48 kHz → ``--rate`` with ``scipy.signal.resample_poly``, the rest of
  :func:`fintts.tts.audio.load_audio`, which computing a clip's features runs once per run;
* ``header``: :func:`fintts.tts.audio.resampled_length`, what a session reads per clip to
  order clips by length.

Each figure is the best of ``--repeats`` passes (the machine is shared), scaled to one hour of
audio. The same clips as 16-bit WAV give the decode cost without mp3 for comparison.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import soundfile as sf
from scipy.signal import resample_poly

from fintts.tts.audio import read_audio, resampled_length

SENTENCES = [
    "Hyvää huomenta, tänään sataa lunta ja tuulee kovasti.",
    "Juna lähtee laiturilta kolme kello kahdeksan.",
    "Suomen kieli on kaunis ja vanha kieli.",
    "Kirjasto aukeaa yhdeksältä ja sulkeutuu illalla.",
]


def make_clips(folder: Path, clips: int, seconds: float) -> tuple[list[Path], list[Path]]:
    """``clips`` mp3s at 48 kHz and the same audio as 48 kHz WAVs, each about ``seconds`` long."""
    mp3s, wavs = [], []
    for n in range(clips):
        spoken = subprocess.run(["espeak-ng", "-v", "fi", "--stdout", SENTENCES[n % len(SENTENCES)]],
                                check=True, capture_output=True).stdout
        samples, rate = sf.read(io.BytesIO(spoken), dtype="float32")
        samples = np.resize(samples, int(seconds * rate))  # repeat to the clip length
        high = resample_poly(samples, 48000, rate).astype(np.float32)
        wav = folder / f"clip{n:04d}.wav"
        sf.write(wav, high, 48000, subtype="PCM_16")
        mp3 = wav.with_suffix(".mp3")
        subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-i", str(wav), "-c:a", "libmp3lame", "-b:a", "64k", str(mp3)],
                       check=True)
        wavs.append(wav)
        mp3s.append(mp3)
    return mp3s, wavs


def best_of(repeats: int, work) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clips", type=int, default=120)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--rate", type=int, default=16000, help="the model's rate (MMS: 16000)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fintts-decode-") as tmp:
        mp3s, wavs = make_clips(Path(tmp), args.clips, args.seconds)
        decoded = [read_audio(p)[0] for p in mp3s]
        hours = sum(len(d) for d in decoded) / 48000 / 3600
        divisor = math.gcd(48000, args.rate)
        up, down = args.rate // divisor, 48000 // divisor
        figures = {
            "decode mp3": best_of(args.repeats, lambda: [read_audio(p) for p in mp3s]),
            "decode wav": best_of(args.repeats, lambda: [read_audio(p) for p in wavs]),
            "resample": best_of(args.repeats, lambda: [resample_poly(d, up, down) for d in decoded]),
            "header": best_of(args.repeats, lambda: [resampled_length(p, args.rate) for p in mp3s]),
        }
    per_hour = {name: seconds / hours for name, seconds in figures.items()}
    print(f"{args.clips} clips, {hours * 60:.2f} min of 48 kHz mono audio; seconds per hour of audio (one core):")
    for name, seconds in per_hour.items():
        print(f"  {name:<11} {seconds:8.1f} s/h   ({3600 / seconds:7.0f}× real time)")
    total = per_hour["decode mp3"] + per_hour["resample"]
    print(f"  decode mp3 + resample to {args.rate} Hz: {total:.1f} s per hour of audio")
    if args.json:
        Path(args.json).write_text(json.dumps({"hours": hours, "seconds_per_hour": per_hour}, indent=1) + "\n")


if __name__ == "__main__":
    main()
