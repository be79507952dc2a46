"""From typing ``fintts say`` to the first audio, as a person meets it: a fresh process each time.

    python benchmarks/voice_startup.py VOICE_DIR --fintts /tmp/light/bin/fintts          # the light (ONNX) install
    python benchmarks/voice_startup.py VOICE_DIR --fintts "python -m fintts" --backend torch

Runs ``fintts say`` on three sentences into a WAV file and watches the file: *first audio*
is when it first holds samples beyond the 44-byte header (the first sentence was written),
*done* is when the process exits. Both include the interpreter's start, the imports and
loading the voice. The load average is printed beside the medians: on a shared machine
these are upper bounds.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

TEXT = ("Hyvää huomenta! Tänään on 22.11.2026, ja kello on 7.30. "
        "Juna lähtee laiturilta kolme, ja matka kestää noin kaksi tuntia.")
WAV_HEADER = 44


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3]) if Path("/proc/loadavg").exists() else "n/a"


def one_run(command: list[str], out: Path) -> tuple[float, float, str]:
    out.unlink(missing_ok=True)
    started = time.perf_counter()
    process = subprocess.Popen([*command, "-o", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = None
    while process.poll() is None:
        if first is None and out.exists() and out.stat().st_size > WAV_HEADER:
            first = time.perf_counter() - started
        time.sleep(0.005)
    done = time.perf_counter() - started
    stdout, stderr = process.communicate()
    if process.returncode != 0:
        raise SystemExit(f"{shlex.join(command)} failed ({process.returncode}): {stderr}")
    return first if first is not None else done, done, stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("voice", type=Path)
    parser.add_argument("--fintts", default="fintts", help='the command that runs fintts (default: fintts; e.g. "python -m fintts")')
    parser.add_argument("--backend", choices=["onnx", "torch"])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    command = [*shlex.split(args.fintts), "say", TEXT, "--voice", str(args.voice), "--seed", "0"]
    if args.backend:
        command += ["--backend", args.backend]
    with tempfile.TemporaryDirectory() as tmp:
        one_run(command, Path(tmp) / "warm.wav")  # the first start also fills the OS file cache
        before = loadavg()
        runs = [one_run(command, Path(tmp) / "say.wav") for _ in range(args.runs)]
        after = loadavg()
    print(runs[-1][2])
    firsts, dones = [r[0] for r in runs], [r[1] for r in runs]
    print(f"{shlex.join(command[:2])} ... ({args.runs} runs, load {before} before, {after} after)")
    print(f"first audio: median {statistics.median(firsts):.2f} s  {[round(f, 2) for f in firsts]}")
    print(f"done:        median {statistics.median(dones):.2f} s  {[round(d, 2) for d in dones]}")


if __name__ == "__main__":
    main()
