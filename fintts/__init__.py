"""fintts: fine-tune a Finnish VITS voice across quota-limited GPU sessions.

Two layers: :mod:`fintts.train` is a model-agnostic session trainer (clock, loop,
checkpoints, stores); :mod:`fintts.tts` is the Finnish TTS task that plugs into it
through :class:`fintts.train.task.Task`.
"""

__version__ = "0.1.0"
