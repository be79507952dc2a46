"""An exported voice graph run by onnxruntime: speech on a laptop with no torch installed.

The graph is :class:`fintts.tts.vits.inference.VitsSynthesizer` exported by
:mod:`fintts.tts.vits.export`; its inputs and outputs are named here, the one module both
sides import, and only onnxruntime and numpy are needed to run it. onnxruntime applies
its whole-graph optimisations (constant folding, operator fusion, memory planning) when
the session opens, and runs each operator on as many threads as this process has cores.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from fintts.tts.voice_format import VoiceError

INPUTS = ("input_ids", "duration_noise", "prior_noise", "length_scale", "speaker_id")
OUTPUTS = ("waveform", "frames")


def cpu_cores() -> int:
    """Cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


class OnnxBackend:
    """Runs ``model.onnx`` or ``model.int8.onnx`` on the CPU."""

    def __init__(self, graph: Path, *, threads: int | None = None):
        import onnxruntime as ort  # 0.16 s to import: only when a voice opens, not with `import fintts.tts.voice`

        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = threads or cpu_cores()
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.log_severity_level = 3  # errors only: the int8 graph's unused-initializer notes are noise
        try:
            self.session = ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
        except Exception as err:  # onnxruntime raises its own Fail/InvalidGraph/NoSuchFile types
            raise VoiceError(f"{graph} cannot be loaded by onnxruntime ({err}); export it again with "
                             f"`fintts export --onnx --voice {graph.parent}`") from None
        #: a voice with deterministic durations (``use_stochastic_duration_prediction: false``) has no
        #: ``duration_noise`` input: the exporter drops inputs the graph does not use.
        self.inputs = {node.name for node in self.session.get_inputs()}
        self.multi_speaker = "speaker_id" in self.inputs
        self.name = f"onnx ({graph.name})"

    def __call__(
        self, ids: np.ndarray, duration_noise: np.ndarray, prior_noise: np.ndarray, length_scale: float, speaker: int | None
    ) -> tuple[np.ndarray, int]:
        feeds = {
            "input_ids": ids[None].astype(np.int64), "duration_noise": duration_noise.astype(np.float32),
            "prior_noise": prior_noise.astype(np.float32), "length_scale": np.array([length_scale], np.float32),
        }
        if self.multi_speaker:
            feeds["speaker_id"] = np.array([speaker or 0], np.int64)
        waveform, frames = self.session.run(list(OUTPUTS), {k: v for k, v in feeds.items() if k in self.inputs})
        return waveform[0], int(frames)
