"""What every voice offers on top of its family's ``stream``: the whole text as one array, or as a WAV file.

``fintts.load_voice(...).save("Hyvää huomenta!", "huomenta.wav")`` works whatever the voice's family
(docs/laptop.md): a family's voice class extends :class:`StreamedVoice` and writes only ``stream`` and
``sample_rate`` (:class:`fintts.tts.family.Voice`).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np

from fintts.tts.wav import WavWriter

log = logging.getLogger(__name__)


class StreamedVoice:
    """:meth:`synthesize` and :meth:`save` from a subclass's ``stream(text, *, speaker, warn)`` and ``sample_rate``."""

    def synthesize(self, text: str, *, speaker: str | int | None = None,
                   warn: Callable[[str], None] | None = log.warning) -> tuple[np.ndarray, int]:
        """``(waveform, sample_rate)``: 1-D float32 samples in [-1, 1] of the whole text."""
        return np.concatenate(list(self.stream(text, speaker=speaker, warn=warn))), self.sample_rate

    def save(self, text: str, path: str | Path, *, speaker: str | int | None = None,
             warn: Callable[[str], None] | None = log.warning) -> Path:
        """Write the text as a 16-bit mono WAV, chunk by chunk as ``stream`` makes them; returns the path.

        The file is created once the first chunk is ready, so text with nothing to say
        leaves no empty WAV behind.
        """
        chunks = self.stream(text, speaker=speaker, warn=warn)
        first = next(chunks)
        with WavWriter(path, self.sample_rate) as wav:
            for audio in itertools.chain([first], chunks):
                wav.write(audio)
        return Path(path)
