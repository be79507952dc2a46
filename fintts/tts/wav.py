"""16-bit mono WAV out, without torch: what voices write, checkpoints keep and players read.

Samples are converted to int16 once (:func:`pcm16`), and those same integers go to the
file and to a player's pipe, so what is played is what is saved.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf


def pcm16(samples: Any) -> np.ndarray:
    """Float samples (any array-like holding one channel, CPU) as little-endian int16, clipped to [-1, 1]."""
    mono = np.clip(np.asarray(samples, dtype=np.float32).reshape(-1), -1.0, 1.0)
    return np.round(mono * 32767).astype("<i2")


class WavWriter:
    """A WAV file written chunk by chunk, so long speech never has to be held in memory."""

    def __init__(self, target: str | Path | io.BytesIO, sample_rate: int):
        self._file = sf.SoundFile(target if isinstance(target, io.BytesIO) else str(target), "w", sample_rate, 1,
                                  subtype="PCM_16", format="WAV")

    def write(self, samples: Any) -> None:
        """Append float samples, or int16 ones from :func:`pcm16` as they are."""
        self._file.write(samples if isinstance(samples, np.ndarray) and samples.dtype == np.int16 else pcm16(samples))

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> WavWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def save_wav(path: str | Path, samples: Any, sample_rate: int) -> None:
    """Write ``samples`` as a 16-bit PCM WAV file."""
    with WavWriter(path, sample_rate) as wav:
        wav.write(samples)


def wav_bytes(samples: Any, sample_rate: int) -> bytes:
    """The bytes :func:`save_wav` would write, for keeping samples in checkpoints."""
    buffer = io.BytesIO()
    with WavWriter(buffer, sample_rate) as wav:
        wav.write(samples)
    return buffer.getvalue()
