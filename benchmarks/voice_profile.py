"""Where the laptop voice's time goes: onnxruntime's per-node profile of its graphs, summed by part and by operator.

    python benchmarks/voice_profile.py --runs 4                       # an MMS-sized random voice, exported as a run does
    python benchmarks/voice_profile.py --voice DIR --graph other.onnx  # a voice folder, and any other graph of it

The voice is benchmarks/voice_rtf.py's (MMS-sized, random weights: the time depends on the sizes,
not on the weights), or ``--voice DIR``; each of ``model.onnx``, ``model.int8.onnx`` and the
``--graph`` files in it is opened as ``load_voice`` opens it (all graph optimisations, threads =
cores) with onnxruntime's profiler on, says voice_rtf.py's sentence once to warm up and ``--runs``
times more, and the profile's kernel times are summed per run and grouped by where the node sits
in the network (node-name prefix: text encoder, duration predictor, flow, HiFi-GAN's first layer,
upsamplers, residual blocks per upsampling stage, last layer; "glue" is the rest: the expansion to
frames, and the layout changes and conversions onnxruntime inserts) and by operator type. The
profile counts the kernels only; the wall-clock of the runs (which adds the time between them) is
printed beside it.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
from transformers import VitsConfig

from fintts.tts.onnx_backend import cpu_cores
from fintts.tts.text import FinnishText
from fintts.tts.vits.export import graph_feeds
from voice_rtf import SENTENCE, build_voice, loadavg

KERNEL = "_kernel_time"


def part(node: str, blocks_per_stage: int) -> str:
    """The part of the network a node of the exported graph belongs to, from its name."""
    found = re.match(r"/(text_encoder|duration_predictor|flow|decoder/(?:conv_pre|conv_post|upsampler\.\d+|resblocks\.(\d+)))/", node)
    if found is None:
        return "glue"
    if found.group(2) is not None:
        return f"decoder/resblocks, stage {int(found.group(2)) // blocks_per_stage}"
    return re.sub(r"upsampler\.\d+", "upsamplers", found.group(1))


def profile(graph: Path, feed: dict[str, np.ndarray], runs: int, blocks_per_stage: int, sample_rate: int, out: Path) -> dict:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads, options.inter_op_num_threads = cpu_cores(), 1
    options.log_severity_level = 3
    session = ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
    feed = {i.name: feed[i.name] for i in session.get_inputs()}
    waveform = session.run(None, feed)[0]  # warm-up, before the profiler starts
    options.enable_profiling, options.profile_file_prefix = True, str(out / graph.stem)
    session = ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
    session.run(None, feed)
    walls = []
    for _ in range(runs):
        started = time.perf_counter()
        session.run(None, feed)
        walls.append(time.perf_counter() - started)
    events = [e for e in json.loads(Path(session.end_profiling()).read_text()) if e.get("cat") == "Node" and e["name"].endswith(KERNEL)]
    by_part, by_op = collections.Counter(), collections.Counter()
    for event in events:
        seconds = event["dur"] / 1e6 / (runs + 1)  # the profiled warm-up run is the (runs + 1)th
        by_part[part(event["name"][: -len(KERNEL)], blocks_per_stage)] += seconds
        by_op[event["args"]["op_name"]] += seconds
    speech = waveform.shape[-1] / sample_rate
    return {"speech_seconds": speech, "wall_rtf_median": float(np.median(walls)) / speech, "wall_rtf_min": min(walls) / speech,
            "kernel_seconds": sum(by_part.values()), "parts": dict(by_part.most_common()), "ops": dict(by_op.most_common())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--voice", type=Path, help="a voice folder (default: an MMS-sized random voice, exported here)")
    parser.add_argument("--graph", action="append", default=[], help="another graph file in the voice folder to profile")
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        folder = args.voice or Path(tmp) / "mms"
        if args.voice is None:
            print(f"exporting an MMS-sized voice (load {loadavg()}) ...", flush=True)
            build_voice(folder)
        config = VitsConfig.from_pretrained(folder)
        feed = next(graph_feeds(config, FinnishText.from_folder(folder), [SENTENCE]))
        before = loadavg()
        result = {name: profile(folder / name, feed, args.runs, len(config.resblock_kernel_sizes), config.sampling_rate, Path(tmp))
                  for name in ["model.onnx", "model.int8.onnx", *args.graph]}
        after = loadavg()
    print(f"\n{cpu_cores()} cores, load {before} before, {after} after; {args.runs} profiled runs each, per run:")
    for name, row in result.items():
        total = row["kernel_seconds"]
        print(f"\n{name}: RTF {row['wall_rtf_median']:.3f} (median wall-clock; min {row['wall_rtf_min']:.3f}), "
              f"kernels {total:.3f} s for {row['speech_seconds']:.2f} s of speech")
        for key, seconds in row["parts"].items():
            print(f"  {key:<34} {seconds:7.3f} s {100 * seconds / total:5.1f} %")
        print("  by operator: " + ", ".join(f"{op} {100 * s / total:.1f} %" for op, s in list(row["ops"].items())[:10]))
    if args.json:
        args.json.write_text(json.dumps({"loadavg_before": before, "loadavg_after": after, "graphs": result}, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
