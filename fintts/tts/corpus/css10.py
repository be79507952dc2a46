"""CSS10 (Park & Mulc 2019; Kyubyong/css10): ``transcript.txt`` beside one folder of wavs per book.

Lines are ``book/book_0001.wav|original text|normalized text|duration``. The normalized
column is read (the original when it is empty): it is what the reader actually said, numbers
and abbreviations spelled out in the case the sentence needs, which fintts's own rules can
only guess (``3.`` may be *kolmas*, *kolmannen*, *kolmannessa*…). The duration column is not
trusted: the audio is measured. One speaker, named after the corpus folder.
"""

from __future__ import annotations

from pathlib import Path

from fintts.tts.audio import AUDIO_EXTENSIONS
from fintts.tts.corpus.files import first_line, numbered_lines
from fintts.tts.corpus.model import Item, Problem, relative_path_problem
from fintts.tts.corpus.rows import TableRows

TRANSCRIPT = "transcript.txt"


def looks_like_css10(folder: Path) -> bool:
    """A transcript.txt whose first line is ``<audio path>|<text>|<text>|<seconds>``."""
    transcript = folder / TRANSCRIPT
    if not transcript.is_file():
        return False
    fields = first_line(transcript).split("|")
    return len(fields) == 4 and Path(fields[0].strip()).suffix.lower() in AUDIO_EXTENSIONS


def read_css10(folder: Path, items: list[Item], problems: list[Problem]) -> None:
    transcript = folder / TRANSCRIPT
    rows = TableRows(transcript, items, problems)
    for number, line in numbered_lines(transcript, problems):
        if not line.strip():
            continue
        fields = [field.strip() for field in line.split("|")]
        if len(fields) != 4:
            rows.refuse(number, f"expected path|original|normalized|duration, found {len(fields)} fields")
            continue
        rel, original, normalized, _ = fields
        rows.add(number, listed=rel, clip_id=Path(rel).with_suffix("").as_posix(), audio=folder / rel,
                 text=normalized or original, speaker=folder.name,
                 unusable=relative_path_problem(rel, "path", "the corpus folder"))
