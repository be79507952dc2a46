"""LJSpeech's ``metadata.csv`` (``id|text[|normalized]``), its ``id|speaker|text`` variant, and extra tables.

The normalized column wins when it is not empty: it spells out what was said. Three columns
look the same as ``id|text|normalized``, so ``id|speaker|text`` is detected only from a header
line; without one, pass ``format="ljspeech-speaker"``.
"""

from __future__ import annotations

from pathlib import Path

from fintts.tts.audio import AUDIO_EXTENSIONS
from fintts.tts.corpus.files import find_audio, first_line, numbered_lines
from fintts.tts.corpus.model import Item, Problem, relative_path_problem, speaker_name_problem
from fintts.tts.corpus.rows import TableRows

METADATA = "metadata.csv"
#: A table of clips a VITS run validates on and never trains on (``id|text``, audio in ``wavs/`` beside it), as the demo ships.
HELDOUT = "heldout.csv"
SPEAKER_HEADER = ["id", "speaker", "text"]


def metadata_layout(folder: Path) -> str | None:
    """``ljspeech`` or ``ljspeech-speaker`` when ``folder`` has a pipe-separated metadata.csv."""
    metadata = folder / METADATA
    if not metadata.is_file():
        return None
    fields = [field.strip().lower() for field in first_line(metadata).split("|")]
    return "ljspeech-speaker" if fields == SPEAKER_HEADER else "ljspeech"


def read_table(table: Path, speaker: str, id_prefix: str = "") -> tuple[list[Item], list[Problem]]:
    """Items of an LJSpeech-style ``id|text[|normalized]`` table other than ``metadata.csv``.

    A corpus may ship extra tables beside its metadata (the demo's ``heldout.csv``); they are
    read exactly like ``metadata.csv``, audio in ``wavs/`` beside the table.
    """
    items: list[Item] = []
    problems: list[Problem] = []
    read_metadata(table, False, speaker, id_prefix, items, problems)
    return items, problems


def heldout_tables(root: Path) -> list[Path]:
    """The :data:`HELDOUT` tables anywhere under ``root``: where a VITS session finds its held-out clips, and what an
    upload of the corpus carries for it (:mod:`~fintts.tts.corpus.used`)."""
    return sorted(root.rglob(HELDOUT))


def read_metadata(
    metadata: Path, speaker_column: bool, speaker: str, id_prefix: str, items: list[Item], problems: list[Problem]
) -> None:
    folder = metadata.parent
    lines = numbered_lines(metadata, problems)
    expected = "id|speaker|text" if speaker_column else "id|text or id|text|normalized"
    headers = (SPEAKER_HEADER,) if speaker_column else (["id", "text"], ["id", "text", "normalized"])
    field_counts = (3,) if speaker_column else (2, 3)
    rows = TableRows(metadata, items, problems)
    extensions = ",".join(AUDIO_EXTENSIONS)
    first = True
    for number, line in lines:
        if not line.strip():
            continue
        fields = [field.strip() for field in line.split("|")]
        if first and [f.lower() for f in fields] in headers:
            first = False
            continue
        first = False
        if len(fields) not in field_counts:
            rows.refuse(number, f"expected {expected}, found {len(fields)} fields")
            continue
        if speaker_column:
            clip_id, clip_speaker, transcript = fields
        else:
            clip_id, clip_speaker = fields[0], speaker
            transcript = fields[2] if len(fields) == 3 and fields[2] else fields[1]
        if not clip_id or not clip_speaker:
            rows.refuse(number, f"empty id or speaker; expected {expected}")
            continue
        unusable = relative_path_problem(clip_id) or (speaker_name_problem(clip_speaker) if speaker_column else None)
        wavs = folder / "wavs"
        audio = None if unusable else \
            find_audio(wavs, clip_id) or (find_audio(wavs / clip_speaker, clip_id) if speaker_column else None)
        rows.add(number, listed=clip_id, clip_id=id_prefix + clip_id, audio=audio, text=transcript, speaker=clip_speaker,
                 unusable=unusable, looked_for=f": looked for wavs/{clip_id}{{{extensions}}}")
