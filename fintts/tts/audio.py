"""Audio in (audio out: :mod:`fintts.tts.wav`; the spectrograms VITS trains on: :mod:`fintts.tts.spectrogram`).

Audio goes through soundfile; torchaudio is deliberately not used (on CPU-only machines it
breaks ``import transformers``). torch is imported only by :func:`load_audio`, which hands
training a tensor: a corpus check (``fintts check``, the notebook's check cell) reads every
clip through here on a laptop and needs none of torch's second of imports.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import soundfile as sf

from fintts.errors import UsageError

if TYPE_CHECKING:
    import torch

#: Extensions soundfile reads that corpora are expected to use (mp3 and Opus need libsndfile >= 1.1,
#: which the soundfile wheels bundle).
AUDIO_EXTENSIONS = (".wav", ".flac", ".ogg", ".opus", ".mp3")
#: Seconds from the start of a recording: a clip that is one stretch of a longer file (a Kaldi ``segments`` line).
Span = tuple[float, float]
_REEXPORT = "re-export it as WAV, FLAC, OGG or MP3, or remove it from the corpus"


class AudioError(UsageError):
    """An audio file that cannot be used; the message names the file and the remedy."""

    def __init__(self, path: Path, reason: str) -> None:
        self.path = Path(path)
        self.reason = reason
        super().__init__(f"{path}: {reason}")


def read_audio(path: Path, span: Span | None = None) -> tuple[np.ndarray, int]:
    """Mono float32 samples at the file's own rate (only ``span``'s when given), or :class:`AudioError`.

    Corpus checks use this directly to see the original sample rate; training code
    wants :func:`load_audio`.
    """
    try:
        with sf.SoundFile(str(path)) as handle:
            rate = handle.samplerate
            if span is not None:
                start, stop = _span_frames(path, span, rate, handle.frames)
                handle.seek(start)
                data = handle.read(stop - start, dtype="float32", always_2d=True)
            else:
                data = handle.read(dtype="float32", always_2d=True)
    except AudioError:
        raise
    except Exception as error:  # soundfile raises several types for unreadable files
        raise AudioError(path, f"cannot be read as audio ({error}); {_REEXPORT}") from error
    if data.shape[0] == 0:
        raise AudioError(path, "contains no samples; re-record or remove it from the corpus")
    mono = data.mean(axis=1)
    if not np.isfinite(mono).all():
        raise AudioError(path, "contains NaN or infinite samples; re-export it from the original recording")
    return mono, int(rate)


def header_seconds(path: Path, span: Span | None = None) -> float | None:
    """The clip's length in seconds as its header says, without decoding it; ``None`` when the header cannot be read.

    A corpus check judges a clip's length from this first: a two-hour 48 kHz stereo
    recording decoded whole only to be refused as too long would take ~5 GB per process.
    """
    if span is not None:
        return max(0.0, span[1] - span[0])
    try:
        info = sf.info(str(path))
    except Exception:  # soundfile raises several types; decoding then names the reason
        return None
    return info.frames / info.samplerate if info.samplerate else None


def _span_frames(path: Path, span: Span, rate: int, frames: int) -> tuple[int, int]:
    start, end = span
    first, stop = round(start * rate), round(end * rate)
    if not 0 <= first < stop:
        raise AudioError(path, f"stretch {start}-{end} s is empty or starts before 0; fix its start and end times")
    if stop > frames + rate // 100:  # Kaldi times are rounded to 10 ms
        raise AudioError(path, f"stretch {start}-{end} s ends after the recording ({frames / rate:.2f} s); fix its times")
    return first, min(stop, frames)


def load_audio(path: Path, sample_rate: int, span: Span | None = None) -> torch.Tensor:
    """1-D float32 tensor in [-1, 1] at ``sample_rate``: channels averaged, resampled (``span``: that stretch only).

    Resampling uses a polyphase filter (``scipy.signal.resample_poly``, Kaiser window),
    which keeps the band edge clean, unlike naive interpolation.
    """
    mono, rate = read_audio(path, span)
    if rate != sample_rate:
        from scipy.signal import resample_poly  # lazy: 0.7 s of imports that a corpus at the model's rate never needs

        divisor = math.gcd(rate, sample_rate)
        mono = resample_poly(mono, sample_rate // divisor, rate // divisor).astype(np.float32)
    import torch  # here, not at the top: see the module's docstring

    return torch.from_numpy(np.ascontiguousarray(np.clip(mono, -1.0, 1.0), dtype=np.float32))


def resampled_length(path: Path, sample_rate: int, span: Span | None = None) -> int:
    """How many samples :func:`load_audio` returns for ``path``, read from its header alone.

    ``resample_poly`` makes ``ceil(n × new / old)`` samples of ``n``; knowing it without
    decoding lets a session order its clips by length before any feature is computed.
    """
    try:
        info = sf.info(str(path))
    except Exception as error:  # soundfile raises several types for unreadable files
        raise AudioError(path, f"cannot be read as audio ({error}); {_REEXPORT}") from error
    frames = info.frames
    if span is not None:
        start, stop = _span_frames(path, span, info.samplerate, info.frames)
        frames = stop - start
    return -(-frames * sample_rate // info.samplerate)

