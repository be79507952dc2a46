"""Real-time factor of the laptop voice against plain transformers, in one run; and what int8 costs in quality.

    python benchmarks/voice_rtf.py --rounds 5
    python benchmarks/voice_rtf.py --rounds 5 --quality-voice runs/demo/model --json out.json
    python benchmarks/voice_rtf.py --voice DIR --graph "old int8=DIR/old.int8.onnx"   # an exported voice, another graph

The voice is MMS-sized: transformers' ``VitsConfig`` defaults are the architecture of
``facebook/mms-tts-fin`` (hidden 192, 6 text-encoder layers, HiFi-GAN 512→ with rates
8·8·2·2), with the vocabulary of fintts's Finnish front end; random weights (timing does
not depend on them; the sentence's audio length does, and is printed). It is exported the
way a run exports its voice (``save_voice``: transformers files, ``model.onnx``,
``model.int8.onnx``, timed), then one ~100-character sentence is said by:

* ``transformers eager``: ``VitsModel.from_pretrained(folder)`` called under
  ``torch.no_grad()``, as plain transformers users do (the baseline);
* ``fintts torch``, ``fintts onnx fp32``, ``fintts onnx int8`` (the default):
  ``load_voice(folder, backend=..., int8=...).synthesize(text)``, front end included;
* ``fintts onnx int8, no spin``: the default with onnxruntime's threads sleeping instead of
  spinning between operators (a session setting ``load_voice`` does not make).

``--voice DIR`` times an exported voice instead (no export), and each ``--graph LABEL=FILE``
adds a contender: the voice with that graph in place of ``model.int8.onnx`` (a graph made by
other code from the same weights: a baseline).

Real-time factor = seconds of compute / seconds of speech (lower is faster). The machine
may be shared, so the contenders run interleaved, in a rotating order, ``--rounds`` times;
medians and minima are reported with the load average before and after, and the speed-up
over eager is the ratio of the medians. Then, for each ONNX contender, in rotating order:

* *first audio*: from ``voice.stream(text)`` on three sentences to its first chunk (the
  first sentence and its pause; ``fintts say`` writes each chunk as it comes), beside the
  time for all three; in-process, so without the interpreter's start and the imports
  (benchmarks/voice_startup.py measures those);
* *quality*: each graph's output against the float32 graph's, same seed, on the texts of
  the demo corpus's held-out clips, one sentence at a time: MCD (:func:`fintts.tts.eval.
  mel_cepstral_distortion`), signal-to-difference (the float32 output's energy over that of
  the difference; the outputs have the same length: durations are float32 in every graph)
  and the noise floor (:func:`fintts.tts.eval.noise_floor_db`), with two seeds of the float32
  graph for scale. With random weights the voice says noise, not speech: the MCD shows how
  far the graph's arithmetic moves the output, not what a listener would hear (``--quality-voice``).

``--quality-voice DIR`` (a trained voice on the demo corpus, e.g. ``runs/demo/model``):
exports its ONNX graphs into a copy and scores the float32 graph and the int8 graph on
the demo's held-out clips (MCD against the recordings, same noise), plus MCD between the
two outputs and, for scale, between two seeds of the float32 voice.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
import torch
from transformers import VitsConfig, VitsModel, VitsTokenizer

from fintts.tts.corpus.data_names import DEMO_CORPUS
from fintts.tts.corpus.selection import read_heldout_files
from fintts.tts.eval import mel_cepstral_distortion, noise_floor_db
from fintts.tts.onnx_backend import cpu_cores
from fintts.tts.text import FinnishText
from fintts.tts.vits.export import export_onnx, save_voice
from fintts.tts.vits.heldout import score_heldout
from fintts.tts.vits.init import vits_initialisation
from fintts.tts.voice import load_voice
from fintts.tts.voice_format import ONNX_INT8_FILE

SENTENCE = "Suomen kieli on kaunis ja vanha kieli, jota puhuu noin viisi miljoonaa ihmistä Suomessa ja muualla."
#: benchmarks/voice_startup.py's three sentences
THREE = ("Hyvää huomenta! Tänään on 22.11.2026, ja kello on 7.30. "
         "Juna lähtee laiturilta kolme, ja matka kestää noin kaksi tuntia.")


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3]) if Path("/proc/loadavg").exists() else "n/a"


def build_voice(folder: Path) -> tuple[dict, int]:
    """An MMS-sized random voice exported like a run's; returns the export timings and the parameter count."""
    text = FinnishText.default()
    torch.manual_seed(0)
    vits = vits_initialisation(VitsModel(VitsConfig(vocab_size=text.vocab_size)))
    timings = {}
    started = time.perf_counter()
    save_voice(vits, folder, text, [], onnx=False)
    timings["transformers files"] = time.perf_counter() - started
    started = time.perf_counter()
    export_onnx(vits, folder, text, int8=False)
    timings["model.onnx"] = time.perf_counter() - started
    started = time.perf_counter()
    export_onnx(vits, folder, text, int8=True)
    timings["model.onnx + model.int8.onnx"] = time.perf_counter() - started
    return timings, sum(p.numel() for p in vits.parameters())


def with_graph(folder: Path, graph: Path, into: Path) -> Path:
    """A copy of the voice ``folder`` (hard links) whose ``model.int8.onnx`` is ``graph``."""
    into.mkdir(parents=True)
    for file in folder.iterdir():
        if file.is_file() and file.name != ONNX_INT8_FILE:
            os.link(file, into / file.name)
    os.link(graph, into / ONNX_INT8_FILE)
    return into


def onnx_voices(folder: Path, graphs: dict[str, Path], seed: int) -> dict:
    """The ONNX contenders: name -> voice."""
    voices = {"fintts onnx fp32": load_voice(folder, backend="onnx", int8=False, seed=seed),
              "fintts onnx int8": load_voice(folder, backend="onnx", int8=True, seed=seed)}
    voices.update({label: load_voice(copy, backend="onnx", int8=True, seed=seed) for label, copy in graphs.items()})
    voices["fintts onnx int8, no spin"] = no_spinning(load_voice(folder, backend="onnx", int8=True, seed=seed), folder)
    return voices


def no_spinning(voice, folder: Path):
    """``voice`` with its session opened again as :class:`~fintts.tts.onnx_backend.OnnxBackend` opens it, but with
    threads that sleep instead of spinning while they wait for work (``session.intra_op.allow_spinning``): a spinning
    thread keeps a core busy, which on a shared machine is a core taken from the others."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads, options.inter_op_num_threads = cpu_cores(), 1
    options.execution_mode, options.log_severity_level = ort.ExecutionMode.ORT_SEQUENTIAL, 3
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    voice.backend.session = ort.InferenceSession(str(folder / ONNX_INT8_FILE), options, providers=["CPUExecutionProvider"])
    return voice


def contenders(folder: Path, graphs: dict[str, Path], seed: int):
    """name -> a call returning (compute seconds, speech seconds)."""
    model = VitsModel.from_pretrained(folder).eval()
    ids = VitsTokenizer.from_pretrained(folder)(FinnishText.from_folder(folder).normalize(SENTENCE), return_tensors="pt").input_ids

    def eager():
        started = time.perf_counter()
        with torch.no_grad():
            waveform = model(ids).waveform
        return time.perf_counter() - started, waveform.shape[-1] / model.config.sampling_rate

    def timed(voice):
        def run():
            started = time.perf_counter()
            waveform, rate = voice.synthesize(SENTENCE)
            return time.perf_counter() - started, len(waveform) / rate
        return run

    return {"transformers eager": eager, "fintts torch": timed(load_voice(folder, backend="torch", seed=seed)),
            **{name: timed(voice) for name, voice in onnx_voices(folder, graphs, seed).items()}}


def first_audio(voices: dict, rounds: int) -> dict:
    """Per ONNX voice: seconds to the first chunk of :data:`THREE` and to the last, medians over ``rounds``."""
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in voices}
    names = list(voices)
    for r in range(rounds):
        for name in names[r % len(names):] + names[: r % len(names)]:
            started = time.perf_counter()
            chunks = voices[name].stream(THREE)
            next(chunks)
            first = time.perf_counter() - started
            for _ in chunks:
                pass
            times[name].append((first, time.perf_counter() - started))
    return {name: {"first_median": statistics.median(t[0] for t in v), "all_median": statistics.median(t[1] for t in v)}
            for name, v in times.items()}


def fidelity(folder: Path, voices: dict, seed: int) -> dict:
    """Each ONNX voice's output against the float32 graph's on the demo's held-out texts (see the module docstring)."""
    texts = [item.text for item in read_heldout_files(DEMO_CORPUS)]
    reference = voices["fintts onnx fp32"]
    said = {name: [voice.synthesize(text, warn=None)[0] for text in texts] for name, voice in voices.items()}
    other_seed = load_voice(folder, backend="onnx", int8=False, seed=seed + 1)
    said["fp32, another seed"] = [other_seed.synthesize(text, warn=None)[0] for text in texts]
    rate, ours = reference.sample_rate, said["fintts onnx fp32"]
    rows = {}
    for name, outputs in said.items():
        same = all(a.shape == b.shape for a, b in zip(ours, outputs))
        rows[name] = {
            "mcd_vs_fp32": float(np.mean([mel_cepstral_distortion(a, b, rate) for a, b in zip(ours, outputs)])),
            "signal_to_difference_db": float(np.mean([10 * np.log10(np.sum(a**2) / max(np.sum((a - b) ** 2), 1e-30))
                                                      for a, b in zip(ours, outputs)])) if same else None,
            "noise_floor_db": float(np.mean([noise_floor_db(b, rate) for b in outputs])),
        }
    return {"sentences": len(texts), "rows": rows}


def measure(folder: Path, graphs: dict[str, Path], rounds: int, seed: int) -> dict:
    runs = contenders(folder, graphs, seed)
    for run in runs.values():  # warm-up: first calls allocate and pick kernels
        run()
    rtf: dict[str, list[float]] = {name: [] for name in runs}
    speech: dict[str, float] = {}
    before = loadavg()
    names = list(runs)
    for r in range(rounds):
        for name in names[r % len(names):] + names[: r % len(names)]:
            compute, seconds = runs[name]()
            rtf[name].append(compute / seconds)
            speech[name] = seconds
    after = loadavg()
    eager = statistics.median(rtf["transformers eager"])
    return {
        "loadavg_before": before, "loadavg_after": after, "rounds": rounds,
        "rows": {name: {"rtf_median": statistics.median(v), "rtf_min": min(v), "rtf_all": v, "speech_seconds": speech[name],
                        "speedup_vs_eager": eager / statistics.median(v)} for name, v in rtf.items()},
    }


def parity(folder: Path, seed: int) -> dict:
    """Largest sample difference between torch and the float32 graph given the same noise, and the peak it is relative to."""
    said = [load_voice(folder, backend=b, int8=False, seed=seed).synthesize(SENTENCE)[0] for b in ("torch", "onnx")]
    difference = float(np.abs(said[0] - said[1]).max()) if said[0].shape == said[1].shape else float("inf")
    return {"max_abs_difference": difference, "peak": float(np.abs(said[0]).max())}


def quality(trained: Path, seed: int) -> dict:
    """MCD of the int8 graph against the float32 one, and both against the demo's held-out recordings."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "voice"
        shutil.copytree(trained, folder)
        export_onnx(VitsModel.from_pretrained(folder), folder, FinnishText.from_folder(folder))
        voices = {name: load_voice(folder, backend="onnx", int8=name == "int8", seed=seed) for name in ("fp32", "int8")}
        other_seed = load_voice(folder, backend="onnx", int8=False, seed=seed + 1)
        items = [i for i in read_heldout_files(DEMO_CORPUS) if i.speaker in voices["fp32"].speakers or not voices["fp32"].speakers]
        result = {name: score_heldout(voice, items).metrics() for name, voice in voices.items()}
        between, seeds = [], []
        for item in items:
            speaker = item.speaker if voices["fp32"].config.num_speakers > 1 else None
            reference, rate = voices["fp32"].synthesize(item.text, speaker=speaker, warn=None)
            between.append(mel_cepstral_distortion(reference, voices["int8"].synthesize(item.text, speaker=speaker, warn=None)[0], rate))
            seeds.append(mel_cepstral_distortion(reference, other_seed.synthesize(item.text, speaker=speaker, warn=None)[0], rate))
    return {"clips": len(items), "vs_recordings": result, "mcd_int8_vs_fp32": float(np.mean(between)),
            "mcd_fp32_seed_vs_seed": float(np.mean(seeds))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quality-voice", type=Path, help="a trained demo voice folder: int8 vs float32 MCD")
    parser.add_argument("--voice", type=Path, help="an exported voice folder to time (default: an MMS-sized one, exported here)")
    parser.add_argument("--graph", action="append", default=[], metavar="LABEL=FILE", help="another int8 graph of the voice")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    result: dict = {"cpu_cores": len(os.sched_getaffinity(0)), "torch_threads": torch.get_num_threads(), "sentence": SENTENCE}
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.voice or Path(tmp) / "mms"
        if args.voice is None:
            print(f"exporting an MMS-sized voice (load {loadavg()}) ...", flush=True)
            result["export_seconds"], _ = build_voice(folder)
        result["parameters"] = sum(p.numel() for p in VitsModel.from_pretrained(folder).parameters())
        graphs = {label: with_graph(folder, Path(file), Path(tmp) / f"graph{n}")
                  for n, (label, _, file) in enumerate(g.partition("=") for g in args.graph)}
        result["file_mb"] = {p.name: round(p.stat().st_size / 2**20, 1) for p in sorted(folder.iterdir())
                             if p.suffix in (".onnx", ".safetensors")}
        result["parity"] = parity(folder, args.seed)
        result.update(measure(folder, graphs, args.rounds, args.seed))
        voices = onnx_voices(folder, graphs, args.seed)
        result["first_audio"] = first_audio(voices, max(3, args.rounds // 2))
        result["fidelity"] = fidelity(folder, voices, args.seed)
        result["loadavg_end"] = loadavg()
    if args.quality_voice:
        result["quality"] = quality(args.quality_voice, args.seed)

    voice = f"{args.voice}" if args.voice else "MMS-sized VITS, random weights"
    print(f"\n{voice}, {result['parameters'] / 1e6:.2f} M parameters; {len(SENTENCE)} characters; "
          f"{result['cpu_cores']} cores; load {result['loadavg_before']} before, {result['loadavg_after']} after; "
          f"{result['rounds']} interleaved rounds, medians")
    print(f"{'':<26} {'RTF':>7} {'min':>7} {'speed-up vs eager':>18} {'speech s':>9}")
    for name, row in result["rows"].items():
        print(f"{name:<26} {row['rtf_median']:>7.3f} {row['rtf_min']:>7.3f} {row['speedup_vs_eager']:>17.2f}x "
              f"{row['speech_seconds']:>9.2f}")
    print(f"first audio of {len(THREE)} characters in three sentences (medians; load at the end {result['loadavg_end']}):")
    for name, row in result["first_audio"].items():
        print(f"  {name:<26} first chunk {row['first_median']:.2f} s, all three {row['all_median']:.2f} s")
    print(f"against the float32 graph's output, same seed, {result['fidelity']['sentences']} held-out texts (means):")
    for name, row in result["fidelity"]["rows"].items():
        difference = "n/a (other lengths)" if row["signal_to_difference_db"] is None else f"{row['signal_to_difference_db']:.1f} dB"
        print(f"  {name:<26} MCD {row['mcd_vs_fp32']:.3f} dB, signal-to-difference {difference}, "
              f"noise floor {row['noise_floor_db']:.1f} dB")
    if "export_seconds" in result:
        print("export: " + ", ".join(f"{k} {v:.1f} s" for k, v in result["export_seconds"].items()))
    print("files: " + ", ".join(f"{k} {v} MB" for k, v in result["file_mb"].items()))
    print(f"torch vs onnx fp32, same noise: largest sample difference {result['parity']['max_abs_difference']:.2e} "
          f"(peak amplitude {result['parity']['peak']:.2e})")
    if "quality" in result:
        q = result["quality"]
        for name, metrics in q["vs_recordings"].items():
            print(f"{name}: held-out MCD {metrics['val/mcd']:.3f} dB, identified {metrics['val/identified']:.2f} ({q['clips']} clips)")
        print(f"MCD int8 vs fp32 output {q['mcd_int8_vs_fp32']:.3f} dB; fp32 seed vs seed {q['mcd_fp32_seed_vs_seed']:.3f} dB")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
