"""Where a long recording is silent: its energy track, read a block at a time, and the stretches of speech between pauses.

Pauses are found by frame energy with numpy and soundfile alone (no VAD model, no torchaudio):
the recording's own levels set the threshold, so a quiet home microphone and a loud studio one
cut the same. A frame is ``round(rate × 10 ms)`` samples, and every time is counted in samples
of the recording's own rate (``frame × hop / rate`` seconds): at 22,050 Hz a frame is 220
samples, 9.98 ms, and counting it as 10 ms put the cuts 2.7 s late after 20 minutes (issue 56).

The speech level is the 95th percentile of the frames' energy, the room's the 10th; a frame is
silent below ``floor + max(6 dB, 30% of (speech - floor))`` unless ``threshold_db`` names an
absolute level. A pause is at least ``min_pause`` seconds of silent frames: the gap between
sentences when reading aloud is 0.4-1 s, a comma's 0.1-0.3 s, so 0.35 s separates sentences and
keeps clauses together.

The recording is read ``BLOCK_FRAMES`` frames at a time, so memory holds one block and the energy
track (4 bytes per 10 ms: 1.4 MB an hour), never the recording: an hour of 48 kHz stereo is 1.4 GB
as float32.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import soundfile as sf

from fintts.errors import UsageError
from fintts.tts.audio import AudioError

#: the length of the energy track's frame, seconds (rounded to whole samples of the recording's rate)
FRAME = 0.01
#: frames read at a time: 30 s (2.9 MB of 48 kHz stereo float32)
BLOCK_FRAMES = 3000
#: the shortest silence a stretch longer than ``max_seconds`` may be cut at: a Finnish double consonant's closure
#: (``kk`` in *kukka*) is silent for up to ~0.2 s inside a word, and a cut there would split the word
CUT_PAUSE = 0.25
#: a recording whose loudest frames are less than this above its quietest holds no speech (silence, or hiss alone)
MIN_RANGE_DB = 10.0


@dataclasses.dataclass(frozen=True)
class SplitSettings:
    """How recordings are cut (see this module's and :mod:`fintts.tts.corpus.prepare`'s docstrings for the defaults)."""

    min_pause: float = 0.35
    keep_silence: float = 0.2
    min_seconds: float = 1.0
    max_seconds: float = 15.0
    #: an absolute silence level in dBFS; None: from the recording's own levels
    threshold_db: float | None = None

    def __post_init__(self) -> None:
        if not 0 < self.min_seconds < self.max_seconds:
            raise UsageError(f"--min-seconds {self.min_seconds:g} must be above 0 and below --max-seconds {self.max_seconds:g}")
        if self.min_pause <= 0 or self.keep_silence < 0:
            raise UsageError("--min-pause must be above 0 and --keep-silence at least 0")


@dataclasses.dataclass(frozen=True)
class Speech:
    """One recording's speech: ``spans`` of frames between pauses, and which frames are silent.

    ``why`` says, when there are no spans, what the recording holds instead.
    """

    path: Path
    rate: int
    hop: int
    samples: int
    silent: np.ndarray
    spans: list[tuple[int, int]]
    why: str = ""

    def seconds(self, frame: int) -> float:
        return frame * self.hop / self.rate

    def frames(self, seconds: float) -> int:
        return round(seconds * self.rate / self.hop)

    def duration(self, span: tuple[int, int]) -> float:
        return self.seconds(span[1] - span[0])


def _frame_db(mono: np.ndarray, hop: int) -> np.ndarray:
    """Power of each ``hop`` samples about their own mean, in dBFS (-120 for digital silence): a microphone's DC
    offset would otherwise lift the silence as much as the speech."""
    power = mono[: len(mono) // hop * hop].reshape(-1, hop).var(axis=1, dtype=np.float64)
    return (10 * np.log10(np.maximum(power, 1e-12))).astype(np.float32)


def energy_track(path: Path) -> tuple[np.ndarray, int, int, int]:
    """``(dB per frame, rate, hop, samples read)`` of the recording at ``path``, read a block at a time;
    :class:`AudioError` when it is not audio soundfile can read."""
    try:
        with sf.SoundFile(str(path)) as audio:
            rate = int(audio.samplerate)
            hop = max(1, round(FRAME * rate))
            parts, rest, count = [], np.zeros(0, dtype=np.float32), 0
            for block in audio.blocks(blocksize=hop * BLOCK_FRAMES, dtype="float32", always_2d=True):
                mono = np.concatenate([rest, block.mean(axis=1)]) if len(rest) else block.mean(axis=1)
                whole = len(mono) // hop * hop
                parts.append(_frame_db(mono[:whole], hop))
                rest, count = mono[whole:], count + len(block)
    except Exception as err:  # soundfile raises LibsndfileError, RuntimeError, TypeError... for what is not audio
        raise AudioError(path, f"cannot be read as audio ({err}); convert it to WAV or FLAC (e.g. ffmpeg -i IN OUT.wav)") from None
    return (np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)), rate, hop, count


def quiet_runs(silent: np.ndarray, min_frames: int) -> list[tuple[int, int]]:
    """``(first, end)`` frame ranges of at least ``min_frames`` silent frames."""
    edges = np.diff(np.concatenate(([0], silent.astype(np.int8), [0])))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    return [(int(s), int(e)) for s, e in zip(starts, ends) if e - s >= min_frames]


def find_speech(path: Path, settings: SplitSettings) -> Speech:
    """The stretches of speech in the recording at ``path``, between pauses of at least ``min_pause``."""
    db, rate, hop, samples = energy_track(path)
    empty = dict(path=path, rate=rate, hop=hop, samples=samples, silent=np.ones(len(db), dtype=bool), spans=[])
    if not len(db):
        return Speech(**empty, why="holds no samples")
    if settings.threshold_db is not None:
        threshold = settings.threshold_db
    else:
        floor, speech, loudest = np.percentile(db, [10, 95, 99.9])
        if loudest - floor < MIN_RANGE_DB:
            level = ("digital silence" if loudest <= -119
                     else f"its loudest 10 ms are {loudest:.0f} dBFS, {loudest - floor:.0f} dB above its quietest")
            return Speech(**empty, why=f"silent: no speech found ({level})")
        threshold = float(floor + max(6.0, 0.3 * (speech - floor)))
    silent = db < threshold
    voiced = np.flatnonzero(~silent)
    if not len(voiced):
        return Speech(**empty, why=f"silent: nothing above --threshold-db {threshold:g}")
    min_frames = max(1, round(settings.min_pause * rate / hop))
    pauses = [(s, e) for s, e in quiet_runs(silent, min_frames) if s > voiced[0] and e <= voiced[-1]]
    bounds = [int(voiced[0])] + [b for s, e in pauses for b in (s, e)] + [int(voiced[-1]) + 1]
    return Speech(path, rate, hop, samples, silent, list(zip(bounds[::2], bounds[1::2])))


def clip_frames(speech: Speech, span: tuple[int, int], keep_silence: float) -> tuple[int, int]:
    """``span`` widened by up to ``keep_silence`` of the pause at each end, at most half of the pause where other
    speech lies beyond it (VITS learns the start and end of speech from the silence; the neighbour keeps its half)."""
    keep = speech.frames(keep_silence)
    start, end = span
    before = [e for s, e in speech.spans if e <= start]
    after = [s for s, e in speech.spans if s >= end]
    lead = min(keep, (start - before[-1]) // 2 if before else start)
    tail = min(keep, (after[0] - end) // 2 if after else len(speech.silent) - end)
    return start - lead, end + tail


def unscripted_spans(speech: Speech, settings: SplitSettings) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Clips' spans without a script, and the stretches left out: longer than ``max_seconds`` with no pause of
    :data:`CUT_PAUSE` to cut at.

    A stretch shorter than ``min_seconds`` joins the neighbour across the shorter pause; one longer than
    ``max_seconds`` is cut at its longest pause of at least :data:`CUT_PAUSE`, again while needed; never inside a word.
    """
    spans = _joined_short(speech.spans, speech.frames(settings.min_seconds))
    kept: list[tuple[int, int]] = []
    too_long: list[tuple[int, int]] = []
    cut = max(1, speech.frames(min(CUT_PAUSE, settings.min_pause)))
    for span in spans:
        for piece in _cut_long(span, speech.silent, speech.frames(settings.max_seconds), cut):
            (kept if piece[1] - piece[0] <= speech.frames(settings.max_seconds) else too_long).append(piece)
    return kept, too_long


def _joined_short(spans: list[tuple[int, int]], min_frames: int) -> list[tuple[int, int]]:
    """A stretch shorter than ``min_frames`` joins the neighbour across the shorter pause: the half of a sentence
    after a breath joins its first half, not the next sentence."""
    spans = list(spans)
    while len(spans) > 1:
        short = next((n for n, (start, end) in enumerate(spans) if end - start < min_frames), None)
        if short is None:
            break
        before = spans[short][0] - spans[short - 1][1] if short else None
        after = spans[short + 1][0] - spans[short][1] if short + 1 < len(spans) else None
        first = short - 1 if after is None or (before is not None and before <= after) else short
        spans[first: first + 2] = [(spans[first][0], spans[first + 1][1])]
    return spans


def _cut_long(span: tuple[int, int], silent: np.ndarray, max_frames: int, cut_frames: int) -> list[tuple[int, int]]:
    """A stretch longer than ``max_frames`` cut at its longest pause of at least ``cut_frames``, again while needed;
    one without such a pause is returned whole (the caller leaves it out and names it)."""
    start, end = span
    if end - start <= max_frames:
        return [span]
    runs = [(s + start, e + start) for s, e in quiet_runs(silent[start:end], cut_frames) if s > 0 and e < end - start]
    if not runs:
        return [span]
    s, e = max(runs, key=lambda r: r[1] - r[0])
    return _cut_long((start, s), silent, max_frames, cut_frames) + _cut_long((e, end), silent, max_frames, cut_frames)
