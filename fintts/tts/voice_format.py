"""What a voice folder holds, and the error a voice raises: the names every voice module shares.

The loader (:mod:`fintts.tts.voice`), the Hub download (:mod:`fintts.tts.hub_voice`), the two
backends and the exporters all read or write the same folder; its file names live here, in a
module that imports nothing of fintts but its errors, so that none of them has to import another to learn them.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from fintts.errors import UsageError

#: The voice's folder in a run: the trainer's ``MODEL_DIR`` (:mod:`fintts.train.stores.base`), named
#: again because the laptop voice imports nothing of the trainer (tests/tts/test_voice.py checks it).
VOICE_DIR = "model"
#: The voice's weights (transformers' name); a VITS checkpoint's generator file has it too (vits/settings.GENERATOR).
WEIGHTS_FILE = "model.safetensors"
SPEAKERS_FILE = "speakers.json"
#: A voice's LoRA adapters, one folder per speaker in peft's layout: ``adapters/<speaker>/``.
ADAPTERS_DIR = "adapters"
#: The float32 graph, the reference the torch model is tested against.
ONNX_FILE = "model.onnx"
#: The same graph with the decoder's residual-block convolutions in int8 (calibrated at export).
ONNX_INT8_FILE = "model.int8.onnx"
#: The Piper voice (:mod:`fintts.tts.vits.piper`), its config beside it as ``fi_FI-fintts.onnx.json``: Piper's naming
#: (``lang_REGION-name``), which Home Assistant lists a custom voice by.
PIPER_FILE = "fi_FI-fintts.onnx"
BACKENDS = ("onnx", "torch")
#: Prior-noise columns drawn per token before the graph says how many frames it needs
#: (MMS says ~3 frames per token at speed 1); a sentence that needs more is run again.
FRAMES_PER_TOKEN = 6


class VoiceError(UsageError):
    """A voice that cannot be loaded or used as asked; the message says what to do."""


def installed(module: str) -> bool:
    """Whether ``module`` can be imported here, without importing it (the light install lacks torch)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def is_vits_voice(folder: Path) -> bool:
    """Whether ``folder`` holds a VITS ``config.json`` (a trainer's ``model/`` may hold another task's export)."""
    try:
        return json.loads((folder / "config.json").read_text(encoding="utf-8")).get("model_type") == "vits"
    except (OSError, ValueError):
        return False
