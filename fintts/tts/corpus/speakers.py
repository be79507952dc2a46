"""Which speaker has the most usable material: ``fintts speakers`` and ``speaker: best``.

A multi-speaker corpus is fine-tuned on all its voices first, then one voice is adapted
on its own (a LoRA phase). The voice worth adapting is the one with the most usable
audio, so the analysis counts, per speaker, only the clips :func:`~fintts.tts.corpus.check_corpus`
keeps — bad clips (unreadable, too short or long, silent, unsayable transcript) are
excluded and counted apart.

``best`` is decided by usable seconds, then by usable clips, then by the name in sorted
order: the same corpus always gives the same speaker, whatever order its files are
listed in. The trainer records the pick when a phase starts, so a later session that
finds more clips does not switch speakers in the middle of a run.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from typing import Any

from fintts.tts.corpus import CheckReport

#: The config value (``speaker: best``) that asks for :attr:`SpeakerAnalysis.best`.
BEST = "best"


@dataclasses.dataclass(frozen=True)
class SpeakerSummary:
    """One speaker's usable material; ``bad`` clips are not counted in the others."""

    name: str
    clips: int
    seconds: float
    bad: int
    sample_rates: dict[int, int]

    @property
    def minutes(self) -> float:
        return self.seconds / 60

    @property
    def mean_seconds(self) -> float:
        return self.seconds / self.clips if self.clips else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "clips": self.clips, "minutes": round(self.minutes, 3), "bad": self.bad,
            "mean_seconds": round(self.mean_seconds, 3), "sample_rates": {str(r): n for r, n in sorted(self.sample_rates.items())},
        }


@dataclasses.dataclass(frozen=True)
class SpeakerAnalysis:
    """Every speaker of a corpus (by name), the best one, and the problems no speaker's clip owns."""

    root: str
    speakers: list[SpeakerSummary]
    best: str | None
    #: problems of lines or files that never became a clip (a missing audio file, a malformed line).
    other_problems: int

    def to_json(self) -> dict[str, Any]:
        return {"speakers": [s.to_json() for s in self.speakers], "best": self.best, "other_problems": self.other_problems}

    def format_text(self) -> str:
        width = max([7, *(len(s.name) for s in self.speakers)])
        lines = [
            f"Speakers of {self.root}: {len(self.speakers)}; best: {self.best or '(none has a usable clip)'} (most usable minutes)",
            f"  {'speaker':<{width}}  {'clips':>6}  {'minutes':>8}  {'bad':>5}  {'mean s':>6}  sample rates",
        ]
        for s in self.speakers:
            rates = ", ".join(f"{rate} Hz ×{n}" for rate, n in sorted(s.sample_rates.items())) or "-"
            mark = "*" if s.name == self.best else " "
            lines.append(f"{mark} {s.name:<{width}}  {s.clips:>6}  {s.minutes:>8.2f}  {s.bad:>5}  {s.mean_seconds:>6.2f}  {rates}")
        if self.other_problems:
            lines.append(f"{self.other_problems} other problem(s) in lines or files that are no clip: `fintts check` lists them")
        lines.append("Train one voice with speaker=NAME (speaker=best picks the starred one).")
        return "\n".join(lines)


def analyse_speakers(report: CheckReport, among: Sequence[str] = ()) -> SpeakerAnalysis:
    """Per-speaker usable clips, minutes, bad clips and sample rates of a checked corpus.

    ``among`` limits the analysis (and so ``best``) to those speakers (empty: all).
    """
    keep = set(among)
    names = sorted({i.speaker for i in [*report.items, *report.rejected] if not keep or i.speaker in keep})
    bad = Counter(i.speaker for i in report.rejected)
    summaries = []
    for name in names:
        own = [i for i in report.items if i.speaker == name]
        summaries.append(SpeakerSummary(
            name=name, clips=len(own), seconds=sum(report.durations[i.id] for i in own), bad=bad[name],
            sample_rates=dict(Counter(report.rates[i.id] for i in own)),
        ))
    usable = [s for s in summaries if s.clips]
    best = min(usable, key=lambda s: (-s.seconds, -s.clips, s.name)).name if usable else None
    clips = {i.audio for i in report.rejected}
    return SpeakerAnalysis(str(report.root), summaries, best, sum(1 for p in report.problems if p.path not in clips))
