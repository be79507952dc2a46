"""The corpus settings every voice family's config has, and their checks: one dataclass the families' settings extend.

A family's settings (``task:`` in a config) inherit these fields, so the YAML keys are the same in
every family and :func:`fintts.tts.corpus.selection.select_corpus` reads them from any family's
config. A family changes a default by naming the field again (Chatterbox keeps longer clips and
holds fewer out). Like the families' settings, this module imports no torch: a laptop checks a
config before ``fintts kaggle push`` sends it to a session.
"""

from __future__ import annotations

import dataclasses

from fintts.train.config import ConfigError, free_setting
from fintts.tts.corpus.layouts import FORMATS
from fintts.tts.corpus.model import NAMED_FIELDS, option_problems


@dataclasses.dataclass
class CorpusSettings:
    #: the corpus folder (any layout ``fintts check`` knows), or ``demo`` for the embedded one. Not part of the
    #: run's settings fingerprint: the corpus is compared by its clips (``data_fingerprint``), so it may move.
    data: str = free_setting("demo")
    #: force a corpus layout (ljspeech, ljspeech-speaker, pairs, speakers, css10, commonvoice, audiofolder, kaldi,
    #: hub); empty: detect. ``data: hf://datasets/USER/NAME`` is a Hub dataset, downloaded into the run's cache.
    format: str = ""
    #: Common Voice's table (validated by default), an audiofolder's or Hub dataset's split (train by default).
    #: Like ``data``, not fingerprinted as a setting: the clips it selects are (``data_fingerprint``).
    split: str = free_setting("")
    #: columns of an audiofolder CSV or a Hub dataset, when not the usual names (transcription|text|sentence,
    #: speaker_id|speaker, audio); empty: the usual ones.
    text_column: str = free_setting("")
    speaker_column: str = free_setting("")
    audio_column: str = free_setting("")
    #: the model's speakers (empty: all of the corpus's); each gets a speaker embedding.
    speakers: list[str] = dataclasses.field(default_factory=list)
    #: train and validate on this one of them only (its clips, its held-out set); ``best``: the one with the
    #: most usable minutes (``fintts speakers``), recorded when the run (or its phase) starts. The model keeps
    #: every speaker's embedding, so a phase on one speaker adapts that voice of a shared multi-speaker base.
    #: Empty: all of ``speakers``. An adapter phase needs one.
    speaker: str = ""
    min_seconds: float = 0.5
    max_seconds: float = 20.0
    #: clips held out of training for validation per speaker, when the corpus has no heldout.csv: this many,
    #: but never more than a tenth of the speaker's clips (at least 2, none for a speaker of 4 clips or fewer).
    #: Why 24 (VITS's): ``val/identified`` is a share of hits, whose noise is at most 0.5/sqrt(n): ±0.10 at 24 clips
    #: (±0.35 at 2, a coin flip), so a change of 0.2-0.3 between validations is the voice, not the draw; the
    #: mean MCD's noise falls with sqrt(n) too (2.4x less than 4 clips, 3.5x less than 2), enough that early
    #: stopping follows the voice. 24 clips of 5-8 s are 2-3 minutes, 2% of a two-hour corpus (~1,200 clips).
    #: Scoring them (each against up to 8 recordings: fintts.tts.vits.heldout.CANDIDATES) took 13 s of CPU for
    #: 24 clips of 5-8 s on a shared, loaded 2-core machine, besides synthesising them.
    heldout_per_speaker: int = 24

    def __post_init__(self) -> None:
        if self.format and self.format not in FORMATS:
            raise ConfigError(f"format: {self.format!r} is not a corpus layout; use one of {', '.join(FORMATS)} (or leave it empty)")
        problems = option_problems({field: getattr(self, field) for field in NAMED_FIELDS})
        if problems:
            raise ConfigError("; ".join(problems))
