"""Which stretch of speech is which sentence of the script: aligned by how long each sentence takes to say.

The person read a script; the recordings are stretches of speech between pauses. A sentence's
length in time is estimated from its text (:func:`units`, times a speaking rate fitted on the
recordings themselves), and the two sequences are aligned in order by dynamic programming, as
an edit distance is: a sentence may take several stretches (a breath inside it), a stretch may
match no sentence (a cough, a retake, words not in the script), a sentence may be missing (not
read), and several sentences read without a pause between them are recognised as such. A match
counts only when its length is within :data:`TOLERANCE` of the estimate. Nothing is forced:
two sentences are never put in one clip to make counts agree, and every sentence that did not
line up is returned with what was found in its place, so the person can be told which.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence

import numpy as np

#: how far a stretch's length may stray from its sentence's estimate (a factor either way, both lengths plus
#: :data:`SLACK`): one reader's slow and fast sentences differ by well under this (espeak-ng's by 7%), a sentence and
#: one with its neighbour's half by more
TOLERANCE = 1.4
#: seconds added to both lengths before they are compared: a short sentence (*Kyllä.*) is 20% longer or shorter by
#: how the reader breathes, not by what was said
SLACK = 0.5
#: the cost of each second of pause inside a sentence's stretches: a breath (0.3-0.6 s) is cheaper than leaving the
#: sentence out, the pause between two sentences (0.5-1.2 s, and two of them) costs more than a real match can gain
PAUSE_PER_SECOND = 0.6
#: the cost of a sentence not found, and of a second of speech matched to no sentence (both in units of log-ratio)
MISSING = 0.5
UNMATCHED_PER_SECOND = 0.3
#: the extra cost of taking several sentences as read without a pause between them (so that lining each up alone wins
#: whenever it fits)
RUN_TOGETHER = 0.15
#: the most stretches one sentence may take, and the most sentences taken as read together
MOST_STRETCHES = 6
MOST_SENTENCES = 6
#: the first guesses of the speaking rate, as factors of all speech over all text
RATE_GUESSES = (0.7, 0.85, 1.0, 1.2, 1.4)
_PUNCTUATION_INSIDE = re.compile(r"[,;:–—-](?=\s)")


def units(sentence: str) -> float:
    """How long ``sentence`` takes to say, in letters: a digit is read as about four letters' worth (*seitsemän*),
    and a comma, colon or dash inside is a short pause of about three."""
    letters = sum(ch.isalpha() for ch in sentence)
    digits = sum(ch.isdigit() for ch in sentence)
    return max(1.0, letters + 4 * digits + 3 * len(_PUNCTUATION_INSIDE.findall(sentence)))


@dataclasses.dataclass(frozen=True)
class Stretch:
    """A stretch of speech between pauses: its recording (an index) and its start and end in seconds."""

    recording: int
    start: float
    end: float


@dataclasses.dataclass(frozen=True)
class Step:
    """One step of the alignment: ``sentences`` (indices) with ``stretches`` (indices), or either side empty."""

    sentences: tuple[int, ...]
    stretches: tuple[int, ...]

    @property
    def matched(self) -> bool:
        return len(self.sentences) == 1 and bool(self.stretches)


def align(sentences: Sequence[str], stretches: Sequence[Stretch]) -> list[Step]:
    """The alignment, in order: every sentence and every stretch in exactly one step.

    The speaking rate starts as all speech over all text (times each of :data:`RATE_GUESSES`) and
    is fitted again on the matches until they stop changing: a script with sentences not read, or
    recordings with extra speech, bias the first guess. The cheapest of those alignments is taken.
    """
    size = np.array([units(s) for s in sentences])
    guess = sum(s.end - s.start for s in stretches) / max(float(size.sum()), 1.0)
    best: tuple[float, list[Step]] = (np.inf, [])
    for rate in (guess * f for f in RATE_GUESSES):
        steps: list[Step] = []
        for _ in range(4):
            cost, again = _aligned(size * rate, stretches)
            if again == steps:
                break
            steps = again
            matched = [s for s in steps if s.matched]
            if not matched:
                break
            said = sum(stretches[s.stretches[-1]].end - stretches[s.stretches[0]].start for s in matched)
            rate = said / float(sum(size[s.sentences[0]] for s in matched))
        best = min(best, (cost, steps), key=lambda b: b[0])
    return best[1]


def _aligned(expected: np.ndarray, stretches: Sequence[Stretch]) -> tuple[float, list[Step]]:
    """The cheapest monotonic alignment of sentences taking ``expected`` seconds with ``stretches``.

    ``cost[i, j]``: the first ``i`` sentences and the first ``j`` stretches aligned. A step takes
    ``p`` sentences and ``k`` stretches of one recording, ``|log((length + SLACK) / (estimate + SLACK))|``, plus
    :data:`PAUSE_PER_SECOND` of the pauses inside (plus
    :data:`RUN_TOGETHER` when ``p > 1``, and then only one stretch: sentences with no pause between them) and only
    within :data:`TOLERANCE`; a sentence alone costs
    :data:`MISSING`, a stretch alone its seconds' :data:`UNMATCHED_PER_SECOND`. Rows are computed a
    whole row at a time (skipping stretches is a running minimum) and only the last few are kept: memory
    is two bytes a cell for the way back (1,000 sentences and stretches: 2 MB).
    """
    n, m = len(expected), len(stretches)
    start = np.array([s.start for s in stretches])
    end = np.array([s.end for s in stretches])
    rec = np.array([s.recording for s in stretches])
    skip = np.concatenate(([0.0], np.cumsum(UNMATCHED_PER_SECOND * np.minimum(end - start, 1.0) + 0.02)))
    #: lengths[k - 1][j]: stretches j-k+1..j as one (seconds), NaN across recordings or before the first;
    #: pauses[k - 1][j]: the cost of the pauses inside them
    lengths, pauses = [], []
    for k in range(1, MOST_STRETCHES + 1):
        first = np.arange(m) - k + 1
        ok = first >= 0
        ok[ok] &= rec[first[ok]] == rec[ok]
        lengths.append(np.where(ok, end - start[np.maximum(first, 0)], np.nan) + SLACK)
        speech = np.convolve(end - start, np.ones(k))[:m]  # [j]: stretches j-k+1..j
        pauses.append(PAUSE_PER_SECOND * (lengths[-1] - SLACK - speech))
    total = np.concatenate(([0.0], np.cumsum(expected)))
    limit = math.log(TOLERANCE)
    rows = [skip]  # the last MOST_SENTENCES rows of cost: all a step reaches back to
    #: (p, k) of the step ending at (i, j); (0, 0): sentence i missing; (-1, -1): stretch j matched to nothing
    choice = np.zeros((n + 1, m + 1, 2), dtype=np.int8)
    choice[0, 1:] = -1
    for i in range(1, n + 1):
        row = rows[-1] + MISSING
        how = choice[i]
        for p in range(1, min(MOST_SENTENCES, i) + 1):
            estimate = total[i] - total[i - p]
            for k in range(1, min(MOST_STRETCHES if p == 1 else 1, m) + 1):
                with np.errstate(invalid="ignore", divide="ignore"):
                    off = np.abs(np.log(lengths[k - 1][k - 1:] / (estimate + SLACK)))
                extra = pauses[k - 1][k - 1:] + (RUN_TOGETHER if p > 1 else 0.0)
                step = np.where(off <= limit, off + extra, np.inf) + rows[-p][: m - k + 1]
                better = step < row[k:]
                row[k:][better] = step[better]
                how[k:][better] = (p, k)
        cost = skip + np.minimum.accumulate(row - skip)
        how[cost < row - 1e-9] = -1
        rows = [*rows[-MOST_SENTENCES + 1:], cost]
    steps: list[Step] = []
    i, j = n, m
    while i or j:
        p, k = (int(x) for x in choice[i, j])
        if p < 0:
            steps.append(Step((), (j - 1,)))
            j -= 1
        elif p == 0:
            steps.append(Step((i - 1,), ()))
            i -= 1
        else:
            steps.append(Step(tuple(range(i - p, i)), tuple(range(j - k, j))))
            i, j = i - p, j - k
    return float(rows[-1][m]), steps[::-1]
