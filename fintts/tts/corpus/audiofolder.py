"""Hugging Face's ``audiofolder``: ``metadata.csv`` with a ``file_name`` column, what ``datasets`` reads.

Comma separated with a header, quoted where a field holds a comma (Python's ``csv``).
The transcript is the first of ``transcription``, ``text``, ``sentence`` the header has (or the
column a person names); the speaker the ``speaker_id`` or ``speaker`` column when there is
one, else one speaker named after the corpus folder. ``file_name`` is relative to the
metadata's folder. A dataset split into folders (``train/metadata.csv``…) is read one split at a
time: ``train`` unless another is named.
"""

from __future__ import annotations

import csv
from pathlib import Path

from fintts.tts.corpus.files import first_line
from fintts.tts.corpus.model import CorpusError, Item, Problem, relative_path_problem, speaker_name_problem

METADATA = "metadata.csv"
FILE_COLUMN = "file_name"
TEXT_COLUMNS = ("transcription", "text", "sentence")
SPEAKER_COLUMNS = ("speaker_id", "speaker")
DEFAULT_SPLIT = "train"


def is_audiofolder(folder: Path) -> bool:
    """``folder/metadata.csv`` has a header with ``file_name``."""
    metadata = folder / METADATA
    return metadata.is_file() and FILE_COLUMN in next(csv.reader([first_line(metadata)]), [])


def split_folders(folder: Path) -> list[Path]:
    """Subfolders that are audiofolders of their own (a dataset's splits)."""
    return sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".") and is_audiofolder(p))


def column(header: list[str], named: str, usual: tuple[str, ...], what: str, metadata: Path) -> str | None:
    """The column ``named`` (which must exist) or the first usual one the header has."""
    if named:
        if named not in header:
            raise CorpusError(f"{metadata}: no {what} column {named!r}; the header has {', '.join(header)}")
        return named
    return next((c for c in usual if c in header), None)


def read_audiofolder(
    root: Path, split: str, text_column: str, speaker_column: str, items: list[Item], problems: list[Problem]
) -> Path:
    """Rows of the (split's) metadata.csv as items; returns the metadata file read."""
    folder = root
    if not is_audiofolder(root):
        folder = root / (split or DEFAULT_SPLIT)
        if not is_audiofolder(folder):
            splits = ", ".join(p.name for p in split_folders(root)) or "none"
            raise CorpusError(f"audiofolder: neither {root / METADATA} nor {folder / METADATA} has a file_name column "
                              f"(splits found: {splits})")
    metadata = folder / METADATA
    with open(metadata, encoding="utf-8-sig", newline="") as handle:
        reader = csv.DictReader(handle)
        header = list(reader.fieldnames or [])
        text = column(header, text_column, TEXT_COLUMNS, "text", metadata)
        if text is None:
            raise CorpusError(f"{metadata}: no transcript column; expected one of {', '.join(TEXT_COLUMNS)} "
                              f"(the header has {', '.join(header)}), or name it with text_column")
        speaker_key = column(header, speaker_column, SPEAKER_COLUMNS, "speaker", metadata)
        seen: dict[str, int] = {}
        for row in reader:
            number = reader.line_num
            rel = (row.get(FILE_COLUMN) or "").strip()
            if None in row or any(v is None for v in row.values()):
                problems.append(Problem(metadata, f"line {number}: expected {len(header)} fields ({', '.join(header)}); "
                                                  "quote a field that holds a comma"))
                continue
            problem = relative_path_problem(rel, FILE_COLUMN, f"{folder.name}/") if rel else "empty file_name"
            speaker = (row[speaker_key] or "").strip() if speaker_key else root.name
            problem = problem or speaker_name_problem(speaker)
            if problem:
                problems.append(Problem(metadata, f"line {number}: {problem}"))
                continue
            if rel in seen:
                problems.append(Problem(metadata, f"line {number}: {rel} already listed on line {seen[rel]}"))
                continue
            seen[rel] = number
            audio = folder / rel
            if not audio.is_file():
                problems.append(Problem(audio, f"audio not found for {METADATA} line {number}; add the file or remove the row"))
                continue
            transcript = " ".join((row[text] or "").split())
            if not transcript:
                problems.append(Problem(audio, f"empty {text} ({METADATA} line {number}); write it or remove the row"))
                continue
            clip_id = Path(rel).with_suffix("").as_posix()
            items.append(Item(id=clip_id, audio=audio, text=transcript, speaker=speaker))
    return metadata
