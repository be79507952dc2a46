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
    seen: dict[str, int] = {}
    for number, line in numbered_lines(transcript, problems):
        if not line.strip():
            continue
        fields = [field.strip() for field in line.split("|")]
        where = f"{TRANSCRIPT} line {number}"
        if len(fields) != 4:
            problems.append(Problem(transcript, f"line {number}: expected path|original|normalized|duration, "
                                                f"found {len(fields)} fields"))
            continue
        rel, original, normalized, _ = fields
        problem = relative_path_problem(rel, "path", "the corpus folder")
        if problem:
            problems.append(Problem(transcript, f"line {number}: {problem}"))
            continue
        clip_id = Path(rel).with_suffix("").as_posix()
        if clip_id in seen:
            problems.append(Problem(transcript, f"line {number}: {rel} already listed on line {seen[clip_id]}"))
            continue
        seen[clip_id] = number
        audio = folder / rel
        if not audio.is_file():
            problems.append(Problem(audio, f"audio not found for {where}; add the file or remove the line"))
            continue
        text = normalized or original
        if not text:
            problems.append(Problem(audio, f"empty transcript ({where}); write it or remove the line"))
            continue
        items.append(Item(id=clip_id, audio=audio, text=text, speaker=folder.name))
