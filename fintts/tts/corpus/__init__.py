"""Reading speech corpora in the layouts their sources publish, and checking them before training.

One module per layout (:mod:`~fintts.tts.corpus.ljspeech`, :mod:`~fintts.tts.corpus.pairs`,
:mod:`~fintts.tts.corpus.css10`, :mod:`~fintts.tts.corpus.commonvoice`,
:mod:`~fintts.tts.corpus.audiofolder`, :mod:`~fintts.tts.corpus.kaldi`,
:mod:`~fintts.tts.corpus.hub`), the row checks the tables share in :mod:`~fintts.tts.corpus.rows`,
detection in :mod:`~fintts.tts.corpus.layouts`, the checks in :mod:`~fintts.tts.corpus.check`, and which
files of a folder the check used (all that an upload of it may carry) in :mod:`~fintts.tts.corpus.used`.

Names from a corpus are checked before they are used as parts of paths: a speaker name
becomes part of file names (the samples ``samples/<n>-<speaker>.wav`` of each checkpoint),
so one with a path separator, a leading dot or a control character is a problem for its
line (or folder), as is a clip path that would reach outside the corpus (``..``, a leading ``/``).
"""

from fintts.tts.corpus.check import CheckReport, SpeakerStats, check_corpus
from fintts.tts.corpus.layouts import FORMATS, detect_format, is_hub, read_corpus
from fintts.tts.corpus.ljspeech import METADATA, read_table
from fintts.tts.corpus.model import HUB_PREFIX, Corpus, CorpusError, Item, Problem, ReadOptions, speaker_name_problem

__all__ = [
    "FORMATS", "HUB_PREFIX", "METADATA", "CheckReport", "Corpus", "CorpusError", "Item", "Problem", "ReadOptions",
    "SpeakerStats", "check_corpus", "detect_format", "is_hub", "read_corpus", "read_table", "speaker_name_problem",
]
