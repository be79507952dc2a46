"""Which parts of the laptop voice to run in int8: graphs quantised other ways, their speed and their distance from float32.

    python benchmarks/int8_variants.py --voice DIR --rounds 6     # DIR: an exported voice (model.onnx)

Each variant is ``model.onnx`` of the voice quantised as the export quantises it (static QDQ,
weights int8 per channel, activations uint8 per tensor calibrated on the export's sentences,
:func:`fintts.tts.vits.export.graph_feeds`), with other operators and nodes; the graphs are
written to ``DIR/variants/`` (one already there is used as it is: quantising an MMS-sized voice
takes a minute or two). Then each is timed on benchmarks/voice_rtf.py's sentence, interleaved in
rotating order over ``--rounds`` rounds (medians and minima of the real-time factor, the load
before and after), and its output compared with the float32 graph's on ``--sentences`` texts of
the demo corpus's held-out clips, same noise: signal-to-difference (the float32 output's energy
over that of the difference), MCD and the noise floor (:mod:`fintts.tts.eval`). The variants:

* ``blocks``: the convolutions of all HiFi-GAN residual blocks (the export before issue 57);
* ``blocks+relu``: and their leaky ReLUs, so int8 runs from one convolution to the next;
* ``blocks+relu+add``: and the residual additions;
* ``early``: the convolutions of the blocks of every upsampling stage but the last;
* ``early+relu``: and their leaky ReLUs (what the export makes now);
* ``early+relu+last conv1``: and the first convolution of each of the last stage's dilation pairs;
* ``early+relu+upsamplers``: and the transposed convolutions of every stage but the last.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
from transformers import VitsConfig

from fintts.tts.corpus.data_names import DEMO_CORPUS
from fintts.tts.corpus.selection import read_heldout_files
from fintts.tts.eval import mel_cepstral_distortion, noise_floor_db
from fintts.tts.onnx_backend import cpu_cores
from fintts.tts.text import FinnishText
from fintts.tts.vits.export import CALIBRATION_SENTENCES, graph_feeds
from voice_rtf import SENTENCE, loadavg


def variants(config: VitsConfig) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """name -> (operator types, node-name prefixes) to quantise."""
    kernels, stages = len(config.resblock_kernel_sizes), len(config.upsample_rates)
    every = tuple(f"/decoder/resblocks.{b}/" for b in range(kernels * stages))
    early = every[: kernels * (stages - 1)]
    last_first = tuple(f"/decoder/resblocks.{b}/convs1." for b in range(kernels * (stages - 1), kernels * stages))
    upsamplers = tuple(f"/decoder/upsampler.{s}/" for s in range(stages - 1))
    return {
        "blocks": (("Conv",), every),
        "blocks+relu": (("Conv", "LeakyRelu"), every),
        "blocks+relu+add": (("Conv", "LeakyRelu", "Add"), every),
        "early": (("Conv",), early),
        "early+relu": (("Conv", "LeakyRelu"), early),
        "early+relu+last conv1": (("Conv", "LeakyRelu"), early + last_first),
        "early+relu+upsamplers": (("Conv", "LeakyRelu", "ConvTranspose"), early + upsamplers),
    }


def quantize(graph: Path, out: Path, feeds: list[dict[str, np.ndarray]], ops: tuple[str, ...], prefixes: tuple[str, ...]) -> None:
    model = onnx.load(str(graph), load_external_data=False).graph
    nodes = [node.name for node in model.node if node.op_type in ops and node.name.startswith(prefixes)]
    inputs = {node.name for node in model.input}

    class Sentences(CalibrationDataReader):
        def __init__(self) -> None:
            self.pending = ({k: v for k, v in feed.items() if k in inputs} for feed in feeds)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.pending, None)

    logging.getLogger().setLevel(logging.ERROR)  # onnxruntime.quantization's advice on the root logger
    quantize_static(str(graph), str(out), Sentences(), quant_format=QuantFormat.QDQ, op_types_to_quantize=list(ops),
                    nodes_to_quantize=nodes, per_channel=True, activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)


class Graph:
    """One graph in a session opened as :class:`~fintts.tts.onnx_backend.OnnxBackend` opens it."""

    def __init__(self, path: Path):
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads, options.inter_op_num_threads, options.log_severity_level = cpu_cores(), 1, 3
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.inputs = {i.name for i in self.session.get_inputs()}

    def __call__(self, feed: dict[str, np.ndarray]) -> np.ndarray:
        return self.session.run(None, {k: v for k, v in feed.items() if k in self.inputs})[0][0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--voice", type=Path, required=True, help="an exported voice folder (model.onnx)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--sentences", type=int, default=20, help="held-out texts to compare on")
    args = parser.parse_args()

    config, text = VitsConfig.from_pretrained(args.voice), FinnishText.from_folder(args.voice)
    (args.voice / "variants").mkdir(exist_ok=True)
    calibration = list(graph_feeds(config, text, CALIBRATION_SENTENCES))
    paths = {"float32": args.voice / "model.onnx"}
    for name, (ops, prefixes) in variants(config).items():
        paths[name] = args.voice / "variants" / f"{name.replace('+', '_').replace(' ', '_')}.onnx"
        if not paths[name].is_file():
            print(f"quantising {name} ...", flush=True)
            quantize(paths["float32"], paths[name], calibration, ops, prefixes)
    graphs = {name: Graph(path) for name, path in paths.items()}

    timed = next(graph_feeds(config, text, [SENTENCE]))
    speech = len(graphs["float32"](timed)) / config.sampling_rate
    for graph in graphs.values():
        graph(timed)  # warm-up
    rtf: dict[str, list[float]] = {name: [] for name in graphs}
    names, before = list(graphs), loadavg()
    for r in range(args.rounds):
        for name in names[r % len(names):] + names[: r % len(names)]:
            started = time.perf_counter()
            graphs[name](timed)
            rtf[name].append((time.perf_counter() - started) / speech)
    after = loadavg()

    texts = [item.text for item in read_heldout_files(DEMO_CORPUS)][: args.sentences]
    feeds = list(graph_feeds(config, text, texts))
    reference = [graphs["float32"](feed) for feed in feeds]
    rate = config.sampling_rate
    print(f"\n{args.voice}; {cpu_cores()} cores; load {before} before, {after} after timing; {args.rounds} interleaved rounds; "
          f"against float32 on {len(texts)} held-out texts, same noise (means)")
    print(f"{'':<24} {'RTF median':>10} {'min':>6} {'signal/diff dB':>15} {'MCD dB':>7} {'floor dB':>9}")
    for name, graph in graphs.items():
        said = [graph(feed) for feed in feeds]
        difference = np.mean([10 * np.log10(np.sum(a**2) / max(np.sum((a - b) ** 2), 1e-30)) for a, b in zip(reference, said)])
        mcd = np.mean([mel_cepstral_distortion(a, b, rate) for a, b in zip(reference, said)])
        floor = np.mean([noise_floor_db(b, rate) for b in said])
        print(f"{name:<24} {statistics.median(rtf[name]):>10.3f} {min(rtf[name]):>6.3f} {difference:>15.1f} {mcd:>7.3f} {floor:>9.1f}")


if __name__ == "__main__":
    main()
