"""Reading speech corpora in the layouts people have, and checking them before training.

A GPU session is too scarce to spend discovering a broken clip, so every clip is read
and judged here first, on a laptop. Nothing here raises for a bad clip or line: each
becomes a :class:`Problem` naming the file and what to do, and the rest is kept.

Layouts (``format`` names):

``ljspeech``
    ``metadata.csv`` with ``id|text`` or ``id|text|normalized`` lines (the normalized
    column wins when it is not empty), audio in ``wavs/<id>.wav`` (or ``.flac``,
    ``.ogg``). One speaker, named after the corpus folder.
``ljspeech-speaker``
    ``metadata.csv`` with ``id|speaker|text`` lines, audio in ``wavs/<id>.<ext>`` or
    ``wavs/<speaker>/<id>.<ext>``. Three columns look the same as
    ``id|text|normalized``, so this layout is detected only from a header line
    ``id|speaker|text``; without one, pass ``format="ljspeech-speaker"``. (A header
    ``id|text`` or ``id|text|normalized`` in an LJSpeech file is skipped too.)
``pairs``
    Audio files each with a transcript of the same stem beside them (``a.wav`` +
    ``a.lab`` or ``a.txt``), found recursively (Fish-Speech / Kaggle style). One
    speaker, named after the corpus folder; item ids are paths relative to it.
``speakers``
    A folder whose subfolders are each one speaker's corpus in one of the layouts
    above; the speaker is the subfolder's name (an ``id|speaker|text`` column still
    wins inside its own file). Ids are ``<subfolder>/<id>``.

Names from a corpus are checked before they are used as parts of paths: a speaker name
becomes part of file names (the samples ``samples/<n>-<speaker>.wav`` of each checkpoint),
so one with a path separator, a leading dot or a control character is a problem for its
line (or folder), as is a clip id that would reach outside ``wavs/`` (``..``, a leading ``/``).

Detection (:func:`detect_format`) tries, in order: ``metadata.csv`` in the folder;
subfolders holding corpora while the folder itself holds no audio/transcript pairs
(``speakers``); audio/transcript pairs anywhere below (``pairs``). A single-speaker
``pairs`` corpus split into chapter subfolders therefore reads as ``speakers``; pass
``format="pairs"`` for it.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from fintts.errors import UsageError
from fintts.tts.audio import AUDIO_EXTENSIONS, AudioError, read_audio
from fintts.tts.text import FinnishText

FORMATS = ("ljspeech", "ljspeech-speaker", "pairs", "speakers")
TRANSCRIPT_EXTENSIONS = (".lab", ".txt")
METADATA = "metadata.csv"


class CorpusError(UsageError):
    """The folder is not a corpus fintts can read; the message says what was looked for."""


@dataclasses.dataclass(frozen=True)
class Item:
    """One clip: a corpus-unique id, its audio file, its transcript and its speaker."""

    id: str
    audio: Path
    text: str
    speaker: str


@dataclasses.dataclass(frozen=True)
class Problem:
    """Something wrong with one file (or one line of it), and what to do about it."""

    path: Path
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


@dataclasses.dataclass
class Corpus:
    """What :func:`read_corpus` found: usable-looking items and problems met reading."""

    root: Path
    format: str
    items: list[Item]
    problems: list[Problem]


def detect_format(path: Path) -> str:
    """The layout of the corpus at ``path``, or :class:`CorpusError` saying what was sought."""
    root = _existing_folder(path)
    found = _metadata_layout(root)
    if found is None and _corpus_subfolders(root):
        found = "speakers"
    if found is None and _has_pairs(root, recursive=True):
        found = "pairs"
    if found is None:
        files = [p for p in root.rglob("*") if p.is_file() and not _hidden(p, root)]
        audio = [p for p in files if p.suffix.lower() in AUDIO_EXTENSIONS]
        raise CorpusError(
            f"{root} is not a corpus fintts recognizes. Looked for: {METADATA} (LJSpeech: id|text, "
            f"id|text|normalized or a header id|speaker|text, audio in wavs/); audio files "
            f"({', '.join(AUDIO_EXTENSIONS)}) each with a .lab or .txt transcript of the same name beside it, "
            f"searched recursively; or subfolders, one per speaker, in either layout. Found {len(files)} files, "
            f"{len(audio)} of them audio. Arrange the files in one of these layouts or pass format= one of {FORMATS}."
        )
    return found


def read_corpus(path: Path, format: str | None = None) -> Corpus:
    """Items and problems of the corpus at ``path``; ``format`` overrides detection."""
    root = _existing_folder(path)
    if format is None:
        format = detect_format(root)
    if format not in FORMATS:
        raise CorpusError(f"unknown corpus format {format!r}; use one of {FORMATS}")
    if format in ("ljspeech", "ljspeech-speaker") and not (root / METADATA).is_file():
        raise CorpusError(f"format {format!r} needs {root / METADATA}, which does not exist")
    items: list[Item] = []
    problems: list[Problem] = []
    if format == "speakers":
        subfolders = _corpus_subfolders(root)
        if not subfolders:
            raise CorpusError(f"format 'speakers' needs subfolders of {root} that are corpora; none are")
        for sub, layout in subfolders:
            problem = speaker_name_problem(sub.name)
            if problem:
                problems.append(Problem(sub, f"{problem}; rename the folder"))
                continue
            _read_layout(sub, layout, sub.name, f"{sub.name}/", items, problems)
    else:
        _read_layout(root, format, root.name, "", items, problems)
    return Corpus(root=root, format=format, items=items, problems=problems)


@dataclasses.dataclass
class SpeakerStats:
    """Good clips and seconds of audio of one speaker."""

    clips: int = 0
    seconds: float = 0.0

    @property
    def hours(self) -> float:
        return self.seconds / 3600


@dataclasses.dataclass
class CheckReport:
    """Result of :func:`check_corpus`: the good items and every problem found.

    ``durations`` maps a good item's id to its length in seconds (for length bucketing);
    ``rates`` to its original sample rate; ``sample_rate`` is the rate training resamples
    to. ``rejected`` are the clips that were read but failed a check (their problems are
    in ``problems``, beside those of lines and files that never became a clip).
    """

    root: Path
    format: str
    sample_rate: int
    items: list[Item]
    problems: list[Problem]
    durations: dict[str, float]
    rates: dict[str, int]
    rejected: list[Item] = dataclasses.field(default_factory=list)

    @property
    def sample_rates(self) -> Counter:
        """How many good clips were recorded at each rate."""
        return Counter(self.rates.values())

    @property
    def hours(self) -> float:
        return sum(self.durations.values()) / 3600

    @property
    def speakers(self) -> dict[str, SpeakerStats]:
        stats: dict[str, SpeakerStats] = {}
        for item in self.items:
            entry = stats.setdefault(item.speaker, SpeakerStats())
            entry.clips += 1
            entry.seconds += self.durations[item.id]
        return dict(sorted(stats.items()))

    def duration_seconds(self, item: Item) -> float:
        """Length of a good item's clip in seconds."""
        return self.durations[item.id]

    def format_text(self) -> str:
        """A report for people: totals, speakers, sample rates, durations, problems."""
        lines = [
            f"Corpus {self.root} (format: {self.format})",
            f"Good clips: {len(self.items)}, {self.hours:.2f} h ({self.hours * 60:.1f} min); "
            f"problems: {len(self.problems)}",
            "",
            "Speakers:",
        ]
        speakers = self.speakers
        width = max([7, *(len(name) for name in speakers)])
        lines.append(f"  {'speaker':<{width}}  {'clips':>6}  {'hours':>6}")
        lines += [f"  {name:<{width}}  {s.clips:>6}  {s.hours:>6.2f}" for name, s in speakers.items()]
        if not speakers:
            lines.append("  (none)")
        lines += ["", "Sample rates:"]
        lines += [f"  {rate} Hz: {count} clips" for rate, count in sorted(self.sample_rates.items())]
        upsampled = sum(count for rate, count in self.sample_rates.items() if rate < self.sample_rate)
        if upsampled:
            lines.append(
                f"  {upsampled} clips are below {self.sample_rate} Hz and will be upsampled; "
                "that adds no detail, so prefer originals at a higher rate"
            )
        lines += ["", "Durations of good clips:", *self._histogram(), "", f"Problems ({len(self.problems)}):"]
        lines += [f"  {problem}" for problem in self.problems] or ["  (none)"]
        return "\n".join(lines)

    def _histogram(self, bar_width: int = 40) -> list[str]:
        if not self.durations:
            return ["  (no clips)"]
        longest = max(self.durations.values())
        step = next((s for s in (1, 2, 5, 10, 30, 60) if longest / s <= 12), math.ceil(longest / 12))
        counts = Counter(int(seconds // step) for seconds in self.durations.values())
        top = max(counts.values())
        bins = range(max(counts) + 1)
        labels = [f"{i * step}-{(i + 1) * step} s" for i in bins]
        width = max(len(label) for label in labels)
        rows = []
        for bin_index, label in zip(bins, labels, strict=True):
            count = counts.get(bin_index, 0)
            bar = "#" * max(1 if count else 0, round(bar_width * count / top))
            rows.append(f"  {label:>{width}}  {bar} {count}")
        return rows


def check_corpus(
    path: Path,
    *,
    format: str | None = None,
    text: FinnishText | None = None,
    sample_rate: int = 16000,
    min_seconds: float = 0.5,
    max_seconds: float = 20.0,
    silence_db: float = -50.0,
    progress: bool = True,
) -> CheckReport:
    """Read every clip and transcript of a corpus and sort items into good and problems.

    A clip is a problem when it cannot be read, is shorter than ``min_seconds`` or
    longer than ``max_seconds`` (VITS memory grows with length), or is (nearly) silent
    (RMS below ``silence_db`` dBFS); a transcript when it is empty, has nothing to say
    after normalisation, or needs characters outside ``text``'s vocabulary (default:
    :meth:`FinnishText.default`). One item may collect several problems; it is left out
    either way.
    """
    corpus = read_corpus(path, format)
    text = text or FinnishText.default()
    problems = list(corpus.problems)
    good: list[Item] = []
    rejected: list[Item] = []
    durations: dict[str, float] = {}
    rates: dict[str, int] = {}
    for item in tqdm(corpus.items, desc="checking clips", unit="clip", disable=not progress):
        found = _transcript_problems(item, text)
        try:
            samples, rate = read_audio(item.audio)
        except AudioError as error:
            problems.append(Problem(item.audio, error.reason))
            problems += found
            rejected.append(item)
            continue
        seconds = len(samples) / rate
        if seconds < min_seconds:
            found.append(Problem(item.audio, f"too short: {seconds:.2f} s < {min_seconds} s; remove it or merge it"))
        if seconds > max_seconds:
            found.append(
                Problem(item.audio, f"too long: {seconds:.1f} s > {max_seconds} s; split it at a pause or remove it")
            )
        level = _rms_dbfs(samples)
        if level < silence_db:
            found.append(
                Problem(item.audio, f"(nearly) silent: RMS {level:.1f} dBFS < {silence_db} dBFS; check the recording")
            )
        if found:
            problems += found
            rejected.append(item)
            continue
        good.append(item)
        durations[item.id] = seconds
        rates[item.id] = rate
    return CheckReport(
        root=corpus.root,
        format=corpus.format,
        sample_rate=sample_rate,
        items=good,
        problems=problems,
        durations=durations,
        rates=rates,
        rejected=rejected,
    )


def _transcript_problems(item: Item, text: FinnishText) -> list[Problem]:
    unknown = text.unknown_chars(item.text)
    if unknown:
        names = ", ".join(repr(ch) for ch in sorted(unknown))
        return [
            Problem(
                item.audio,
                f"transcript has characters outside the vocabulary after normalisation: {names}; "
                f"rewrite them in Finnish letters (transcript: {item.text!r})",
            )
        ]
    if not text.normalize(item.text):
        return [Problem(item.audio, f"transcript has nothing to say after normalisation: {item.text!r}")]
    return []


def _rms_dbfs(samples: np.ndarray) -> float:
    rms = float(np.sqrt(np.mean(np.square(samples, dtype=np.float64))))
    return 20 * math.log10(max(rms, 1e-10))


def _existing_folder(path: Path) -> Path:
    root = Path(path).expanduser().resolve()
    if not root.is_dir():
        raise CorpusError(f"{root} is not a folder; pass the folder that holds the corpus")
    return root


def _hidden(path: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(root).parts)


def _metadata_layout(folder: Path) -> str | None:
    """``ljspeech`` or ``ljspeech-speaker`` when ``folder`` has a metadata.csv."""
    metadata = folder / METADATA
    if not metadata.is_file():
        return None
    return "ljspeech-speaker" if _first_line(metadata) == ["id", "speaker", "text"] else "ljspeech"


def _layout(folder: Path) -> str | None:
    """How one speaker's folder is laid out: a metadata layout, ``pairs`` or None."""
    return _metadata_layout(folder) or ("pairs" if _has_pairs(folder, recursive=True) else None)


def _corpus_subfolders(root: Path) -> list[tuple[Path, str]]:
    """(subfolder, layout) of subfolders that are corpora, when ``root`` itself is none."""
    if (root / METADATA).is_file() or _has_pairs(root, recursive=False):
        return []
    subfolders = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    layouts = [(sub, _layout(sub)) for sub in subfolders]
    return [(sub, layout) for sub, layout in layouts if layout is not None]


def _audio_files(folder: Path, recursive: bool) -> list[Path]:
    candidates = folder.rglob("*") if recursive else folder.iterdir()
    return sorted(
        p for p in candidates
        if p.suffix.lower() in AUDIO_EXTENSIONS and p.is_file() and not _hidden(p, folder)
    )


def _transcript_of(audio: Path) -> Path | None:
    return next((t for t in (audio.with_suffix(e) for e in TRANSCRIPT_EXTENSIONS) if t.is_file()), None)


def _has_pairs(folder: Path, recursive: bool) -> bool:
    return any(_transcript_of(audio) is not None for audio in _audio_files(folder, recursive))


def _first_line(metadata: Path) -> list[str]:
    try:
        with open(metadata, encoding="utf-8-sig") as handle:
            for line in handle:
                if line.strip():
                    return [field.strip().lower() for field in line.split("|")]
    except (UnicodeDecodeError, OSError):
        pass
    return []


def speaker_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a speaker's name (``None`` if it can): it becomes part of file names."""
    if not name or name.startswith(".") or "/" in name or "\\" in name or not name.isprintable():
        return (
            f"speaker name {name!r} cannot be used as part of a file name (no / or \\, no leading dot, "
            "no control characters)"
        )
    return None


def _clip_id_problem(clip_id: str) -> str | None:
    parts = clip_id.replace("\\", "/").split("/")
    if clip_id.startswith("/") or "\\" in clip_id or ".." in parts or not clip_id.isprintable():
        return f"id {clip_id!r} must name a file under wavs/ (no .., no leading /, no \\)"
    return None


def _read_layout(
    folder: Path, format: str, speaker: str, id_prefix: str, items: list[Item], problems: list[Problem]
) -> None:
    if format == "pairs":
        _read_pairs(folder, speaker, id_prefix, items, problems)
    else:
        _read_metadata(folder / METADATA, format == "ljspeech-speaker", speaker, id_prefix, items, problems)


def read_table(table: Path, speaker: str, id_prefix: str = "") -> tuple[list[Item], list[Problem]]:
    """Items of an LJSpeech-style ``id|text[|normalized]`` table other than ``metadata.csv``.

    A corpus may ship extra tables beside its metadata (the demo's ``heldout.csv``); they are
    read exactly like ``metadata.csv``, audio in ``wavs/`` beside the table.
    """
    items: list[Item] = []
    problems: list[Problem] = []
    _read_metadata(table, False, speaker, id_prefix, items, problems)
    return items, problems


def _read_metadata(
    metadata: Path, speaker_column: bool, speaker: str, id_prefix: str, items: list[Item], problems: list[Problem]
) -> None:
    folder = metadata.parent
    try:
        lines = metadata.read_text(encoding="utf-8-sig").splitlines()
    except UnicodeDecodeError as error:
        problems.append(Problem(metadata, f"is not UTF-8 text ({error}); save it as UTF-8"))
        return
    expected = "id|speaker|text" if speaker_column else "id|text or id|text|normalized"
    headers = (["id", "speaker", "text"],) if speaker_column else (["id", "text"], ["id", "text", "normalized"])
    field_counts = (3,) if speaker_column else (2, 3)
    seen: dict[str, int] = {}
    first = True
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        fields = [field.strip() for field in line.split("|")]
        if first and [f.lower() for f in fields] in headers:
            first = False
            continue
        first = False
        if len(fields) not in field_counts:
            problems.append(Problem(metadata, f"line {number}: expected {expected}, found {len(fields)} fields"))
            continue
        if speaker_column:
            clip_id, clip_speaker, transcript = fields
        else:
            clip_id, clip_speaker = fields[0], speaker
            transcript = fields[2] if len(fields) == 3 and fields[2] else fields[1]
        if not clip_id or not clip_speaker:
            problems.append(Problem(metadata, f"line {number}: empty id or speaker; expected {expected}"))
            continue
        problem = _clip_id_problem(clip_id) or (speaker_name_problem(clip_speaker) if speaker_column else None)
        if problem:
            problems.append(Problem(metadata, f"line {number}: {problem}"))
            continue
        if clip_id in seen:
            problems.append(Problem(metadata, f"line {number}: id {clip_id!r} already used on line {seen[clip_id]}"))
            continue
        seen[clip_id] = number
        audio = _find_clip(folder / "wavs", clip_id, clip_speaker if speaker_column else None)
        if audio is None:
            problems.append(
                Problem(
                    folder / "wavs" / clip_id,
                    f"audio not found for {metadata.name} line {number}: looked for wavs/{clip_id}"
                    f"{{{','.join(AUDIO_EXTENSIONS)}}}; add the file or remove the line",
                )
            )
            continue
        if not transcript:
            problems.append(Problem(audio, f"empty transcript ({metadata.name} line {number}); write it or remove the line"))
            continue
        items.append(Item(id=id_prefix + clip_id, audio=audio, text=transcript, speaker=clip_speaker))


def _find_clip(wavs: Path, clip_id: str, speaker: str | None) -> Path | None:
    folders = [wavs] if speaker is None else [wavs, wavs / speaker]
    for folder in folders:
        named = folder / clip_id
        if named.suffix.lower() in AUDIO_EXTENSIONS and named.is_file():
            return named
        for extension in AUDIO_EXTENSIONS:
            candidate = folder / f"{clip_id}{extension}"
            if candidate.is_file():
                return candidate
    return None


def _read_pairs(folder: Path, speaker: str, id_prefix: str, items: list[Item], problems: list[Problem]) -> None:
    first_of_stem: dict[Path, Path] = {}
    for audio in _audio_files(folder, recursive=True):
        stem = audio.with_suffix("")
        if stem in first_of_stem:
            problems.append(Problem(audio, f"has the same name as {first_of_stem[stem].name}; keep only one of them"))
            continue
        first_of_stem[stem] = audio
        transcript = _transcript_of(audio)
        if transcript is None:
            problems.append(
                Problem(audio, f"no transcript: expected {stem.name}.lab or {stem.name}.txt beside it")
            )
            continue
        try:
            text = " ".join(transcript.read_text(encoding="utf-8-sig").split())
        except UnicodeDecodeError as error:
            problems.append(Problem(transcript, f"is not UTF-8 text ({error}); save it as UTF-8"))
            continue
        if not text:
            problems.append(Problem(transcript, "empty transcript; write it or remove the clip"))
            continue
        clip_id = stem.relative_to(folder).as_posix()
        items.append(Item(id=id_prefix + clip_id, audio=audio, text=text, speaker=speaker))
