"""fintts: fine-tune a Finnish VITS voice across quota-limited GPU sessions, and speak with it on a laptop.

Two layers: :mod:`fintts.train` is a model-agnostic session trainer (clock, loop,
checkpoints, stores); :mod:`fintts.tts` is the Finnish TTS task that plugs into it
through :class:`fintts.train.task.Task`.

The voice's one entry point is :func:`load_voice` (``import fintts;
fintts.load_voice("voices/mine").save("Hyvää huomenta!", "huomenta.wav")``). It is looked
up on first use (PEP 562), so importing fintts, or its trainer, loads no task code; and the
voice imports neither torch nor the trainer: a laptop with the light install speaks
through onnxruntime.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fintts.tts.family import Voice
    from fintts.tts.voice import load_voice

from fintts.version import __version__

__all__ = ["Voice", "__version__", "load_voice"]


def __getattr__(name: str) -> Any:
    if name == "load_voice":
        from fintts.tts.voice import load_voice  # on first use, so that `import fintts` loads no task code

        return load_voice
    if name == "Voice":
        from fintts.tts.family import Voice  # on first use, as above

        return Voice
    raise AttributeError(f"module 'fintts' has no attribute {name!r}")
