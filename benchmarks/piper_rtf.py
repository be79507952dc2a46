"""Real-time factor of the Piper voice in Piper (piper-tts) against fintts's own on the same voice, in one run.

    python benchmarks/piper_rtf.py --piper-python .pytest_cache/d/piper-tts-1.8.0/bin/python --rounds 7

``--piper-python``: a Python with ``piper-tts`` installed, in a venv of its own (piper-tts pins
its onnxruntime; tests/tts/vits/test_piper.py makes that one). The voice is MMS-sized with random
weights, as in benchmarks/voice_rtf.py (timing depends on sizes, not weights), exported as a run
exports it: ``model.onnx``, ``model.int8.onnx`` and the Piper voice. One ~100-character sentence
is said, with each engine's default noise, by:

* ``piper``: ``PiperVoice.load(...).synthesize(text)`` in a worker process running piper-tts
  (its own onnxruntime session options), one sentence per request;
* ``fintts onnx int8`` (what ``fintts say`` uses by default) and ``fintts onnx fp32``:
  ``load_voice(folder, ...).synthesize(text)``, front end included.

Real-time factor = seconds of compute / seconds of speech, medians over ``--rounds``
interleaved rounds in a rotating order, with the load average before and after. Also printed:
the largest sample difference between Piper (noise off) and transformers' ``VitsModel`` (noise
off) on the sentence, the exactness the tests hold the tiny voices to, here at MMS size.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import torch
from transformers import VitsConfig, VitsModel

from fintts.tts.text import FinnishText
from fintts.tts.vits.export import export_onnx, save_voice
from fintts.tts.vits.init import vits_initialisation
from fintts.tts.vits.piper import export_piper_folder
from fintts.tts.voice import load_voice
from fintts.tts.voice_format import PIPER_FILE

SENTENCE = "Suomen kieli on kaunis ja vanha kieli, jota puhuu noin viisi miljoonaa ihmistä Suomessa ja muualla."

WORKER = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    from piper import PiperVoice, SynthesisConfig
    voice = PiperVoice.load(sys.argv[1])
    for line in sys.stdin:
        request = json.loads(line)
        config = SynthesisConfig(noise_scale=0.0, noise_w_scale=0.0, normalize_audio=False) if request["exact"] else None
        started = time.perf_counter()
        audio = np.concatenate([c.audio_float_array for c in voice.synthesize(request["text"], config)])
        compute = time.perf_counter() - started
        if request["exact"]:
            np.save(request["exact"], audio)
        print(json.dumps({"compute": compute, "speech": len(audio) / voice.config.sample_rate}), flush=True)
""")


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3]) if Path("/proc/loadavg").exists() else "n/a"


def build_voice(folder: Path) -> dict:
    text = FinnishText.default()
    torch.manual_seed(0)
    vits = vits_initialisation(VitsModel(VitsConfig(vocab_size=text.vocab_size)))
    save_voice(vits, folder, text, [], onnx=False)
    timings = {}
    started = time.perf_counter()
    export_onnx(vits, folder, text)
    timings["model.onnx + model.int8.onnx"] = time.perf_counter() - started
    started = time.perf_counter()
    export_piper_folder(folder)
    timings["Piper voice"] = time.perf_counter() - started
    return timings


class Piper:
    """A piper-tts worker process: one sentence per request."""

    def __init__(self, python: str, model: Path):
        self.process = subprocess.Popen([python, "-c", WORKER, str(model)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def __call__(self, text: str, exact: str = "") -> tuple[float, float]:
        self.process.stdin.write(json.dumps({"text": text, "exact": exact}) + "\n")
        self.process.stdin.flush()
        reply = json.loads(self.process.stdout.readline())
        return reply["compute"], reply["speech"]

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--piper-python", default=".pytest_cache/d/piper-tts-1.8.0/bin/python")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    result: dict = {"cpu_cores": len(os.sched_getaffinity(0)), "sentence": SENTENCE, "rounds": args.rounds}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "mms"
        print(f"exporting an MMS-sized voice (load {loadavg()}) ...", flush=True)
        result["export_seconds"] = build_voice(folder)
        result["file_mb"] = {p.name: round(p.stat().st_size / 2**20, 1) for p in sorted(folder.iterdir()) if p.suffix == ".onnx"}
        piper = Piper(args.piper_python, folder / PIPER_FILE)
        try:
            exact = Path(tmp) / "piper.npy"
            piper(SENTENCE, str(exact))
            vits = VitsModel.from_pretrained(folder).eval()
            vits.noise_scale = vits.noise_scale_duration = 0.0
            with torch.no_grad():
                reference = vits(torch.tensor([FinnishText.from_folder(folder).encode(SENTENCE)])).waveform[0].numpy()
            said = np.load(exact)
            result["piper_vs_transformers"] = {
                "max_abs_difference": float(np.abs(said - reference).max()) if said.shape == reference.shape else "shapes differ",
                "peak": float(np.abs(reference).max()), "samples": int(reference.size)}

            def fintts(int8: bool):
                voice = load_voice(folder, backend="onnx", int8=int8)

                def run() -> tuple[float, float]:
                    started = time.perf_counter()
                    waveform, rate = voice.synthesize(SENTENCE)
                    return time.perf_counter() - started, len(waveform) / rate
                return run

            runs = {"piper (piper-tts 1.8.0)": lambda: piper(SENTENCE), "fintts onnx int8 (fintts say)": fintts(True),
                    "fintts onnx fp32": fintts(False)}
            for run in runs.values():
                run()  # warm-up
            rtf: dict[str, list[float]] = {name: [] for name in runs}
            names, result["loadavg_before"] = list(runs), loadavg()
            for r in range(args.rounds):
                for name in names[r % len(names):] + names[: r % len(names)]:
                    compute, speech = runs[name]()
                    rtf[name].append(compute / speech)
            result["loadavg_after"] = loadavg()
        finally:
            piper.close()
    result["rows"] = {name: {"rtf_median": statistics.median(v), "rtf_all": v} for name, v in rtf.items()}

    print(f"\nMMS-sized VITS, random weights; {len(SENTENCE)} characters; {result['cpu_cores']} cores; load "
          f"{result['loadavg_before']} before, {result['loadavg_after']} after; {args.rounds} interleaved rounds, medians")
    for name, row in result["rows"].items():
        print(f"{name:<32} RTF {row['rtf_median']:.3f}  (rounds {min(row['rtf_all']):.3f}..{max(row['rtf_all']):.3f})")
    print("export: " + ", ".join(f"{k} {v:.1f} s" for k, v in result["export_seconds"].items()))
    print("files: " + ", ".join(f"{k} {v} MB" for k, v in result["file_mb"].items()))
    parity = result["piper_vs_transformers"]
    print(f"Piper vs transformers, noise off: largest sample difference {parity['max_abs_difference']} "
          f"(peak {parity['peak']:.3f}, {parity['samples']} samples)")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
