"""Long recordings to a corpus: clips cut at the pauses, and a transcript table for the person to fill in.

``fintts prepare`` does the mechanical part of making a corpus from an evening's recordings; the
transcripts stay the person's (a wrong transcript teaches the voice to say the wrong thing, and
only the speaker knows what was said). What it writes is the LJSpeech layout ``fintts check``
and training read (:mod:`fintts.tts.corpus.ljspeech`): ``wavs/<recording>_<nnnn>.wav`` and
``metadata.csv`` with one ``id|text`` line per clip, the text empty until filled in, plus
``clips.tsv`` saying where in which recording each clip came from, for finding it again.

Pauses are found by frame energy with numpy and soundfile alone (no VAD model, no torchaudio):
the recording's own levels set the threshold, so a quiet home microphone and a loud studio one
cut the same. Frames of 10 ms; the speech level is the 95th percentile of their energy, the
room's the 10th; a frame is silent below ``floor + max(6 dB, 30% of (speech - floor))`` unless
``threshold_db`` names an absolute level. A pause is at least ``min_pause`` seconds of silent
frames: the gap between sentences when reading aloud is 0.4-1 s, a comma's 0.1-0.3 s, so 0.35 s
cuts between sentences and keeps clauses together. Each clip is cut in the middle of its pauses
and keeps up to ``keep_silence`` seconds of them at either end (VITS learns the start and end of
speech from them). A stretch shorter than ``min_seconds`` joins the neighbour across the shorter
pause; one longer than ``max_seconds`` is cut again at its longest shorter pause.

With ``script`` (the text that was read, as written) the sentences are filled into the table in
order, after joining breaths inside sentences, when the clips' lengths suit them
(:func:`_match_script`); otherwise the table stays empty and the message says why, since a guess
that drifts by one sentence would mislabel every clip after it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import soundfile as sf

from fintts.errors import UsageError
from fintts.tts.audio import AUDIO_EXTENSIONS
from fintts.tts.corpus.ljspeech import METADATA
from fintts.tts.text import split_sentences

#: frame length of the energy track, seconds
FRAME = 0.01
#: the side table of where each clip came from (tab-separated; not read by ``fintts check``)
CLIPS_TABLE = "clips.tsv"


@dataclasses.dataclass(frozen=True)
class SplitSettings:
    """How recordings are cut (see the module's docstring for the reasoning behind each default)."""

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
class Clip:
    id: str
    source: Path
    start: float
    end: float


@dataclasses.dataclass
class Prepared:
    """What :func:`prepare_corpus` wrote, for the command's message."""

    out: Path
    clips: list[Clip]
    filled: bool
    note: str

    @property
    def seconds(self) -> float:
        return sum(c.end - c.start for c in self.clips)

    def format_text(self) -> str:
        minutes = self.seconds / 60
        lines = [f"{len(self.clips)} clips ({minutes:.1f} min) in {self.out / 'wavs'}; where each came from: {self.out / CLIPS_TABLE}"]
        if self.note:
            lines.append(self.note)
        what = "check each transcript against its clip" if self.filled else "write what is said in each clip after its id"
        lines.append(f"next: {what} in {self.out / METADATA} (id|text, one line a clip), then: fintts check {self.out}")
        return "\n".join(lines)


def energy_db(samples: np.ndarray, rate: int) -> np.ndarray:
    """Power of each ``FRAME`` of mono ``samples`` about its own mean, in dBFS (-120 for digital silence): a
    microphone's DC offset would otherwise lift the silence as much as the speech."""
    hop = max(1, round(FRAME * rate))
    frames = samples[: len(samples) // hop * hop].reshape(-1, hop)
    step = 6000  # a minute of frames at a time: float64 copies of a whole recording would double its memory
    power = np.concatenate([frames[n: n + step].var(axis=1, dtype=np.float64) for n in range(0, len(frames), step)] or [np.zeros(0)])
    return 10 * np.log10(np.maximum(power, 1e-12))


def silence_threshold(db: np.ndarray, settings: SplitSettings) -> float:
    if settings.threshold_db is not None:
        return settings.threshold_db
    floor, speech = np.percentile(db, 10), np.percentile(db, 95)
    return float(floor + max(6.0, 0.3 * (speech - floor)))


def _quiet_runs(silent: np.ndarray, min_frames: int) -> list[tuple[int, int]]:
    """``(first, end)`` frame ranges of at least ``min_frames`` silent frames."""
    edges = np.diff(np.concatenate(([0], silent.astype(np.int8), [0])))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    return [(int(s), int(e)) for s, e in zip(starts, ends) if e - s >= min_frames]


def find_clips(db: np.ndarray, settings: SplitSettings) -> list[tuple[float, float]]:
    """``(start, end)`` seconds of the clips in one recording's energy track ``db``."""
    if not len(db):
        return []
    silent = db < silence_threshold(db, settings)
    keep = round(settings.keep_silence / FRAME)
    voiced = np.flatnonzero(~silent)
    if not len(voiced):
        return []
    pauses = [(s, e) for s, e in _quiet_runs(silent, round(settings.min_pause / FRAME)) if s > voiced[0] and e <= voiced[-1]]
    bounds = [int(voiced[0])] + [b for s, e in pauses for b in (s, e)] + [int(voiced[-1]) + 1]
    spans = list(zip(bounds[::2], bounds[1::2]))  # speech stretches between pauses, in frames
    spans = _joined_short(spans, round(settings.min_seconds / FRAME))
    spans = [piece for span in spans for piece in _cut_long(span, silent, round(settings.max_seconds / FRAME))]
    clips = []
    for n, (start, end) in enumerate(spans):
        before = start - (spans[n - 1][1] if n else 0)  # silence to share with the neighbour: at most half of it
        after = (spans[n + 1][0] if n + 1 < len(spans) else len(db)) - end
        lead = min(keep, before if n == 0 else before // 2)
        tail = min(keep, after if n + 1 == len(spans) else after // 2)
        clips.append(((start - lead) * FRAME, (end + tail) * FRAME))
    return clips


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


def _cut_long(span: tuple[int, int], silent: np.ndarray, max_frames: int) -> list[tuple[int, int]]:
    """A stretch longer than ``max_frames`` cut at its longest pause (however short), again while needed."""
    start, end = span
    if end - start <= max_frames:
        return [span]
    runs = [(s + start, e + start) for s, e in _quiet_runs(silent[start:end], 1) if s > 0 and e < end - start]
    if not runs:
        return [span]  # no pause at all: kept whole; fintts check names it as too long
    s, e = max(runs, key=lambda r: r[1] - r[0])
    return _cut_long((start, s), silent, max_frames) + _cut_long((e, end), silent, max_frames)


def recordings(paths: Sequence[Path]) -> list[Path]:
    """The audio files named, and those in the folders named (sorted, not recursive)."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            inside = sorted(p for p in path.iterdir() if p.suffix.lower() in AUDIO_EXTENSIONS and not p.name.startswith("."))
            if not inside:
                raise UsageError(f"{path} holds no recordings ({', '.join(AUDIO_EXTENSIONS)})")
            found += inside
        elif path.is_file():
            found.append(path)
        else:
            raise FileNotFoundError(f"{path} does not exist: name recordings or a folder of them")
    return found


def _mono(path: Path) -> tuple[np.ndarray, int]:
    """The recording as mono float32, read a minute at a time: an hour of 48 kHz stereo needs 0.7 GB, not 2.8."""
    try:
        with sf.SoundFile(str(path)) as audio:
            rate = int(audio.samplerate)
            mono = np.empty(audio.frames, dtype=np.float32)
            at = 0
            for block in audio.blocks(blocksize=60 * rate, dtype="float32", always_2d=True):
                mono[at: at + len(block)] = block.mean(axis=1)
                at += len(block)
    except (sf.LibsndfileError, RuntimeError) as err:
        raise UsageError(f"{path}: cannot be read as audio ({err}); convert it to WAV or FLAC (e.g. ffmpeg -i IN OUT.wav)") from None
    return mono[:at], rate


def prepare_corpus(sources: Sequence[str | Path], out: str | Path, *, settings: SplitSettings = SplitSettings(),
                   script: str | Path | None = None, force: bool = False,
                   log: Callable[[str], None] = print) -> Prepared:
    """Cut every recording at its pauses into ``out/wavs/`` and write ``out/metadata.csv`` and ``out/clips.tsv``.

    Clips keep the recording's sample rate (training resamples) as 16-bit PCM WAV, mono. An
    ``out`` that already has a ``metadata.csv`` is refused without ``force``: it may hold
    transcripts someone typed. Recordings are read twice (once to find the pauses, once to
    write the clips), so that a script can decide the cuts first (:func:`_match_script`).
    """
    out = Path(out)
    if (out / METADATA).exists() and not force:
        raise UsageError(f"{out / METADATA} exists (it may hold your transcripts): choose another --out, or pass --force to replace it")
    files = recordings([Path(s) for s in sources])
    stems: dict[str, Path] = {}
    for path in files:  # clip ids are <recording>_<nnnn>: two recordings of one name would overwrite each other's clips
        if stems.setdefault(path.stem, path) != path:
            raise UsageError(f"{stems[path.stem]} and {path} have the same name, and clips are named after their recording: "
                             "rename one")
    plan: list[list[tuple[float, float]]] = []
    for path in files:
        samples, rate = _mono(path)
        plan.append([(start, min(end, len(samples) / rate)) for start, end in find_clips(energy_db(samples, rate), settings)])
        log(f"{path.name}: {len(samples) / rate / 60:.1f} min, {len(plan[-1])} clips")
    if not any(plan):
        raise UsageError(f"no speech found in {', '.join(str(f) for f in files)} (all below the silence threshold; try --threshold-db)")
    texts, note = None, ""
    if script:
        plan, texts, note = _match_script(plan, Path(script), settings)
    (out / "wavs").mkdir(parents=True, exist_ok=True)
    clips: list[Clip] = []
    for path, spans in zip(files, plan):
        samples, rate = _mono(path)
        for n, (start, end) in enumerate(spans, start=1):
            clip = Clip(f"{path.stem}_{n:04d}", path, round(start, 2), round(end, 2))
            sf.write(out / "wavs" / f"{clip.id}.wav", samples[round(clip.start * rate): round(clip.end * rate)], rate, subtype="PCM_16")
            clips.append(clip)
    texts = texts or [""] * len(clips)
    (out / METADATA).write_text("".join(f"{c.id}|{t}\n" for c, t in zip(clips, texts)), encoding="utf-8")
    (out / CLIPS_TABLE).write_text(
        "id\trecording\tstart\tend\n" + "".join(f"{c.id}\t{c.source}\t{c.start:.2f}\t{c.end:.2f}\n" for c in clips), encoding="utf-8"
    )
    return Prepared(out, clips, filled=any(texts), note=note)


#: How far one clip's seconds per character of its sentence may stray from the recordings' median before the
#: script is judged not to line up with them: a slow and a fast sentence of one reader differ by well under this.
SPEECH_RATE_SPREAD = 2.5


def _match_script(plan: list[list[tuple[float, float]]], script: Path,
                  settings: SplitSettings) -> tuple[list[list[tuple[float, float]]], list[str] | None, str]:
    """The script's sentences, one a clip in order, and the cuts they fit; or no transcripts, and why.

    More clips than sentences is most often a pause inside a sentence: the clips across the
    shortest pauses are joined (within a recording, never past ``max_seconds``) until the counts
    match, if no more than a tenth of the clips must be. Then every clip's speaking rate
    (seconds per character of its sentence) must lie within :data:`SPEECH_RATE_SPREAD` of the
    median: a sentence missed or read twice would shift every transcript after it, and that
    shows as clips far too long or short for their text. Listening is still the check.
    """
    sentences = [chunk.text for chunk in split_sentences(script.read_text(encoding="utf-8"), max_chars=10**6)]
    count = sum(len(spans) for spans in plan)
    extra = count - len(sentences)
    if 0 < extra <= count // 10:
        plan = [list(spans) for spans in plan]
        for _ in range(extra):
            joins = [(spans[n + 1][0] - spans[n][1], r, n) for r, spans in enumerate(plan) for n in range(len(spans) - 1)
                     if spans[n + 1][1] - spans[n][0] <= settings.max_seconds]
            if not joins:
                break
            _, r, n = min(joins)
            plan[r][n: n + 2] = [(plan[r][n][0], plan[r][n + 1][1])]
    clips = [span for spans in plan for span in spans]
    if len(clips) != len(sentences):
        return plan, None, (f"transcripts left empty: {script} has {len(sentences)} sentences and the recordings {count} clips "
                            "(a sentence missed, read twice, or two read without a pause between them)")
    rates = [max(end - start - 2 * settings.keep_silence, 0.3) / max(len(text), 1) for (start, end), text in zip(clips, sentences)]
    median = float(np.median(rates))
    strays = [n for n, rate in enumerate(rates) if not median / SPEECH_RATE_SPREAD <= rate <= median * SPEECH_RATE_SPREAD]
    if strays:
        return plan, None, (f"transcripts left empty: clip {strays[0] + 1} of {len(clips)} is too long or too short for the "
                            f"sentence {sentences[strays[0]]!r}: {script} and the recordings do not seem to line up there")
    joined = f", {count - len(clips)} pause(s) inside a sentence joined" if count > len(clips) else ""
    return plan, sentences, f"transcripts: the {len(sentences)} sentences of {script}, in order{joined}"
