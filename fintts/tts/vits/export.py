"""The voice folder a run exports: transformers files, tokenizer, speakers, card and ONNX graphs.

``model/`` is what a laptop pulls. Beside ``model.safetensors``/``config.json`` (so plain
transformers and ``pipeline("text-to-speech")`` load it) and the tokenizer files it holds
two ONNX graphs of :class:`~fintts.tts.vits.inference.VitsSynthesizer`, so a laptop with
no torch can speak:

* ``model.onnx``: float32, weight norm folded; the same numbers as the torch model given
  the same noise (to float32 rounding; the tests hold it to that).
* ``model.int8.onnx``: the same graph with HiFi-GAN's residual blocks in int8 but those of
  its last upsampling stage: their convolutions (weights per channel, activations per tensor
  with ranges calibrated on Finnish sentences through this very voice) and their leaky ReLUs,
  so that a block runs from one int8 convolution to the next without converting back to
  float32 in between; onnxruntime runs it with the CPU's integer dot-product instructions.
  Where the time goes and what each choice cost is measured by benchmarks/voice_profile.py,
  int8_variants.py and voice_rtf.py (benchmarks/README.md, "The laptop voice"): the residual
  blocks are 86% of the float32 graph's time on an MMS-sized voice; the last stage's blocks
  work at the full sample rate right before the output, and in int8 their rounding was most
  of the difference from float32, so they stay float32; the leaky ReLUs in int8 win back most
  of the time that costs (an MMS-sized voice: signal-to-difference from float32 54 → 61 dB,
  MCD 0.29 → 0.14 dB, 5% slower on a quiet 2-core machine than every block's convolutions
  in int8). Everything else stays float32: the text encoder and the duration predictor are
  cheap and their rounding (``ceil``) would turn small errors into other timing; quantising
  the flow as well gave no more speed, and the decoder's first and last layers as well took
  the demo voice's held-out MCD from +0.23 dB to +0.61 dB over float32.

Exporting needs torch, ``onnx`` and onnxruntime; it takes seconds for the demo voice and
tens of seconds for an MMS-sized one (see the README's table).
"""

from __future__ import annotations

import copy
import json
import logging
import os
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import torch
from transformers import VitsConfig, VitsModel

from fintts.train.run.layout import CARD
from fintts.tts.onnx_backend import INPUTS, OUTPUTS
from fintts.tts.text import FinnishText
from fintts.tts.vits.base_voice import no_progress_bars
from fintts.tts.vits.inference import VitsSynthesizer, fold_weight_norm, load_saved
from fintts.tts.vits.piper import export_piper_folder
from fintts.tts.voice_format import FRAMES_PER_TOKEN, ONNX_FILE, ONNX_INT8_FILE, SPEAKERS_FILE

#: Sentences whose activations set the int8 ranges: statements, a question, an
#: exclamation, numbers and a date, long and short.
CALIBRATION_SENTENCES = (
    "Hyvää huomenta, tänään on kaunis päivä.",
    "Kello on 7.30 ja juna lähtee laiturilta kolme.",
    "Onko tämä se talo, jonka ostit viime vuonna?",
    "Ei!",
    "Suomen kieli on kaunis ja vanha kieli, jota puhuu noin viisi miljoonaa ihmistä.",
    "Kokous pidetään 22.11.2026 kello 14.15 Helsingissä.",
)
#: What runs in int8 inside the quantised parts (:func:`quantized_parts`).
QUANTIZED_OPS = ("Conv", "LeakyRelu")
_OPSET = 17


def save_voice(vits: VitsModel, out_dir: Path, text: FinnishText, speakers: Sequence[str], *, card: str | None = None,
               onnx: bool = True) -> None:
    """Write the voice folder (see the module docstring); ``onnx=False`` leaves the graphs out."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with no_progress_bars():  # fintts says what it wrote; transformers' "Writing model shards" bar would repeat it
        vits.save_pretrained(out_dir)
    text.save_tokenizer(out_dir)
    (out_dir / SPEAKERS_FILE).write_text(json.dumps(list(speakers), ensure_ascii=False), encoding="utf-8")
    if card is not None:
        (out_dir / CARD).write_text(card, encoding="utf-8")
    if onnx:
        export_onnx(vits, out_dir, text)


def export_onnx(vits: VitsModel, out_dir: Path, text: FinnishText, *, int8: bool = True,
                sentences: Sequence[str] = CALIBRATION_SENTENCES, private: bool = False) -> list[Path]:
    """Write ``model.onnx`` (and ``model.int8.onnx``) for ``vits`` into ``out_dir``; returns the files.

    Works on a float32 CPU copy: the caller's model (a training model on a GPU, say)
    keeps its device, dtype and weight-norm parametrizations. The copy is a new model
    loaded with the weights, not a ``deepcopy``: a deep copy shares the parametrized
    layers' classes, and folding the copy's weight norm would strip the original's. Its
    random initialisation draws from a forked generator, so exporting in the middle of
    training leaves the run's random stream (and so a resumed run's bit-identity) alone.
    ``private``: ``vits`` is a float32 CPU model nothing else uses (loaded from a folder), folded
    in place without a copy: no draw from (or restore of) the global generator, which a
    training running in another thread owns.
    """
    if private:
        model = vits.eval()
    else:
        with torch.random.fork_rng(devices=[]):
            model = VitsModel(copy.deepcopy(vits.config)).eval()
        model.load_state_dict({name: tensor.float() for name, tensor in vits.state_dict().items()})
    model = fold_weight_norm(model)
    synthesizer = VitsSynthesizer(model)
    feeds = list(graph_feeds(model.config, text, sentences))
    names = list(INPUTS if model.config.num_speakers > 1 else INPUTS[:-1])
    # New files, renamed into place at the end: a graph already in ``out_dir`` may be a hard link shared with the
    # voice a session serves or pushes (the background export works in a linked copy), never rewritten in place.
    graph, partial = out_dir / ONNX_FILE, out_dir / f".{ONNX_FILE}.partial"
    quantized = out_dir / f".{ONNX_INT8_FILE}.partial"
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation and tracer notes
            torch.onnx.export(
                synthesizer, tuple(torch.from_numpy(feeds[0][name]) for name in names), str(partial),
                input_names=names, output_names=list(OUTPUTS), opset_version=_OPSET, dynamo=False,
                dynamic_axes={"input_ids": {1: "tokens"}, "duration_noise": {2: "tokens"}, "prior_noise": {2: "noise_frames"},
                              "waveform": {1: "samples"}},
            )
        if int8:
            _quantize(partial, quantized, [{k: f[k] for k in names} for f in feeds], quantized_parts(model.config))
        os.replace(partial, graph)
        written = [graph]
        if int8:
            os.replace(quantized, out_dir / ONNX_INT8_FILE)
            written.append(out_dir / ONNX_INT8_FILE)
    finally:  # a failed export leaves the folder as it was
        partial.unlink(missing_ok=True)
        quantized.unlink(missing_ok=True)
    return written


def graph_feeds(config: VitsConfig, text: FinnishText, sentences: Sequence[str]) -> Iterator[dict[str, np.ndarray]]:
    """Graph inputs for ``sentences`` (calibration, and the benchmarks' profiles): noise as the voice draws it, speakers
    in turn, all of :data:`~fintts.tts.onnx_backend.INPUTS` (a graph without ``duration_noise`` takes the others)."""
    rng = np.random.default_rng(0)
    for n, sentence in enumerate(sentences):
        ids = np.asarray([text.encode(sentence)], dtype=np.int64)
        tokens = ids.shape[1]
        yield {
            "input_ids": ids,
            "duration_noise": rng.standard_normal((1, 2, tokens), dtype=np.float32) * np.float32(config.noise_scale_duration),
            "prior_noise": rng.standard_normal((1, config.flow_size, tokens * FRAMES_PER_TOKEN + 16), dtype=np.float32)
            * np.float32(config.noise_scale),
            "length_scale": np.array([1.0], np.float32),
            "speaker_id": np.array([n % max(1, config.num_speakers)], np.int64),
        }


def quantized_parts(config: VitsConfig) -> tuple[str, ...]:
    """Node-name prefixes of the parts ``model.int8.onnx`` runs in int8: HiFi-GAN's residual blocks of every upsampling
    stage but the last (block ``i`` belongs to stage ``i // len(resblock_kernel_sizes)``; see the module docstring)."""
    blocks = len(config.resblock_kernel_sizes) * (len(config.upsample_rates) - 1)
    return tuple(f"/decoder/resblocks.{block}/" for block in range(blocks))


def _quantize(graph: Path, out: Path, feeds: list[dict[str, np.ndarray]], parts: tuple[str, ...]) -> Path:
    import onnx  # and the quantizer: only an ONNX export needs them, not saving a voice
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    model = onnx.load(str(graph), load_external_data=False).graph
    nodes = [node.name for node in model.node if node.op_type in QUANTIZED_OPS and node.name.startswith(parts)]
    inputs = {node.name for node in model.input}  # without duration_noise where durations are deterministic

    class Sentences(CalibrationDataReader):
        def __init__(self) -> None:
            self.pending = ({k: v for k, v in feed.items() if k in inputs} for feed in feeds)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.pending, None)

    quiet = logging.getLogger()
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # onnxruntime.quantization logs advice on the root logger
    try:
        quantize_static(
            str(graph), str(out), Sentences(), quant_format=QuantFormat.QDQ, op_types_to_quantize=list(QUANTIZED_OPS),
            nodes_to_quantize=nodes, per_channel=True, activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
        )
    finally:
        quiet.setLevel(level)
    return out


def export_folder(folder: Path, *, int8: bool = True) -> list[Path]:
    """``fintts export --onnx``, and the trainer's background part of a new best's export: the ONNX graphs of the voice
    already saved in ``folder`` (weights only from safetensors), made without touching torch's global generators, and its
    Piper voice (:data:`~fintts.tts.voice_format.PIPER_FILE`, :mod:`fintts.tts.vits.piper`)."""
    graphs = export_onnx(load_saved(folder), folder, FinnishText.from_folder(folder), int8=int8, private=True)
    return graphs + export_piper_folder(folder)
