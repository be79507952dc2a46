"""When a corpus is too small for a run's validation to judge the voice trained on it, said once with what to do.

A run validates on clips it holds out of training (``heldout.csv``, else about a tenth of each speaker's clips).
``val/identified`` is a share of hits over them, whose noise is at most 0.5/sqrt(n): ±0.10 at 24 clips (VITS's
``heldout_per_speaker``), ±0.16 at 10, ±0.29 at 3; and a mean MCD over a handful of clips follows which clips they
are more than the voice. Below :data:`JUDGE_HELDOUT` held-out clips the numbers a run prints, early stopping and
the "best" voice follow the draw, so a person training a 39-clip corpus for thousands of epochs is told that, not left
to read the figures as the voice's. The fix is more recordings: :data:`ENOUGH_CLIPS` of a speaker give 10 held out
at a tenth; finetune-hf-vits's MMS recipe (github.com/ylacombe/finetune-hf-vits, README) makes a voice from 80-150.
"""

from __future__ import annotations

import math

#: held-out clips below which a validation cannot tell the voice from the draw (the docstring says why)
JUDGE_HELDOUT = 10
#: clips of one speaker that give :data:`JUDGE_HELDOUT` held out when a tenth is held out
ENOUGH_CLIPS = 100
#: what to do, the same wherever it is said
RECORD_MORE = (f"record at least {ENOUGH_CLIPS} clips of the speaker (about {JUDGE_HELDOUT} held out), better 240 (24 held out, "
          "±0.10), or list 10 or more clips in a heldout.csv; until then listen to the samples rather than trust the figures")


def too_few_to_judge(train: int, heldout: int) -> str | None:
    """The line a run's corpus gets when ``heldout`` clips are too few to judge the voice; ``None`` when enough."""
    if heldout >= JUDGE_HELDOUT:
        return None
    noise = f"a validation's val/identified moves ±{0.5 / math.sqrt(heldout):.2f} by the draw alone" if heldout else "nothing is validated"
    return (f"{train + heldout} clips ({train} train + {heldout} held out) are too few to judge the voice: with {heldout} "
            f"held-out clip{'s' if heldout != 1 else ''} {noise}. To judge it, {RECORD_MORE}")


def too_few_to_check(clips: dict[str, int]) -> str | None:
    """The line ``fintts check`` adds when no speaker of the corpus has clips enough (``clips``: per speaker)."""
    if not clips or max(clips.values()) >= ENOUGH_CLIPS:
        return None
    most = max(clips.values())
    whose = "" if len(clips) == 1 else " of any one speaker"
    return (f"{most} clips{whose} are too few to judge a voice trained on them: a run holds out about a tenth to validate on "
            f"({max(2, most // 10)} here), whose scores then follow the draw more than the voice. To judge it, {RECORD_MORE}")
