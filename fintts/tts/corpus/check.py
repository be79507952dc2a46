"""Checking a corpus before training: every clip read and judged, problems named, the rest kept.

A GPU session is too scarce to spend discovering a broken clip, so every clip is read
and judged here first, on a laptop. Nothing here raises for a bad clip or line: each
becomes a :class:`Problem` naming the file and what to do, and the rest is kept.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from fintts.tts.audio import AudioError, header_seconds, read_audio
from fintts.tts.corpus.layouts import read_corpus
from fintts.tts.corpus.model import Item, Problem, ReadOptions
from fintts.tts.text import FinnishText


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
    in ``problems``, beside those of lines and files that never became a clip). ``tables``
    are the files the clips were listed in (:attr:`~fintts.tts.corpus.model.Corpus.tables`) and
    ``options`` what the layout was read with: with the good items, which files of the folder the
    check used, and how a copy of them reads (:mod:`~fintts.tts.corpus.used`).
    """

    root: Path
    format: str
    sample_rate: int
    items: list[Item]
    problems: list[Problem]
    durations: dict[str, float]
    rates: dict[str, int]
    rejected: list[Item] = dataclasses.field(default_factory=list)
    looked_for: str = ""
    tables: list[Path] = dataclasses.field(default_factory=list)
    options: ReadOptions = dataclasses.field(default_factory=ReadOptions)

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
            f"Format: {self.format} — {self.looked_for}" if self.looked_for else f"Format: {self.format}",
            f"Corpus {self.root}",
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

    def to_json(self) -> dict[str, Any]:
        """What :meth:`format_text` says, for a notebook or a script (``fintts check --json``)."""
        return {
            "format": self.format,
            "looked_for": self.looked_for,
            "root": str(self.root),
            "clips": len(self.items),
            "hours": round(self.hours, 4),
            "sample_rate": self.sample_rate,
            "speakers": [{"name": name, "clips": s.clips, "hours": round(s.hours, 4)} for name, s in self.speakers.items()],
            "sample_rates": {str(rate): count for rate, count in sorted(self.sample_rates.items())},
            "rejected": len(self.rejected),
            "problems": [{"path": str(p.path), "reason": p.reason} for p in self.problems],
        }

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
    source: str | Path,
    *,
    format: str | None = None,
    options: ReadOptions | None = None,
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
    either way. ``source`` is a folder or a Hub address (``hf://datasets/USER/NAME``);
    ``options`` what its layout cannot tell (:class:`ReadOptions`).
    """
    options = options or ReadOptions()
    corpus = read_corpus(source, format, options)
    text = text or FinnishText.default()
    problems = list(corpus.problems)
    good: list[Item] = []
    rejected: list[Item] = []
    durations: dict[str, float] = {}
    rates: dict[str, int] = {}
    for item in tqdm(corpus.items, desc="checking clips", unit="clip", disable=not progress):
        found = _transcript_problems(item, text)
        told = header_seconds(item.audio, item.span)
        if told is not None and told > max_seconds:  # refused by its header: never decoded whole (see header_seconds)
            problems += _about(item, [Problem(item.audio, f"too long: {told:.1f} s > {max_seconds} s (by its header); split it at a "
                                                          "pause or remove it"), *found])
            rejected.append(item)
            continue
        try:
            samples, rate = read_audio(item.audio, item.span)
        except AudioError as error:
            problems += _about(item, [Problem(item.audio, error.reason), *found])
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
            problems += _about(item, found)
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
        looked_for=corpus.looked_for,
        tables=corpus.tables,
        options=options,
    )


def _about(item: Item, problems: list[Problem]) -> list[Problem]:
    """Problems of a clip, naming the stretch of its recording when it is one (a whole file names itself)."""
    if item.span is None:
        return problems
    where = f"segment {item.id}: "
    return [Problem(p.path, where + p.reason) for p in problems]


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
