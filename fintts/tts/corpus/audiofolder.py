"""Hugging Face's ``audiofolder``: ``metadata.csv`` (or ``.jsonl``) with a ``file_name`` column, what ``datasets`` reads.

The CSV is comma separated with a header, quoted where a field holds a comma (Python's ``csv``);
the JSON Lines file has one object per line.
The transcript is the first of ``transcription``, ``text``, ``sentence`` the header has (or the
column a person names); the speaker the ``speaker_id`` or ``speaker`` column when there is
one, else one speaker named after the corpus folder. ``file_name`` is relative to the
metadata's folder. A dataset split into folders (``train/metadata.csv``…) is read one split at a
time: ``train`` unless another is named.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from fintts.tts.corpus.files import first_line, numbered_lines
from fintts.tts.corpus.model import CorpusError, Item, Problem, relative_path_problem, speaker_name_problem
from fintts.tts.corpus.rows import TableRows

METADATA = "metadata.csv"
METADATA_JSONL = "metadata.jsonl"
FILE_COLUMN = "file_name"
TEXT_COLUMNS = ("transcription", "text", "sentence")
SPEAKER_COLUMNS = ("speaker_id", "speaker")
DEFAULT_SPLIT = "train"


def metadata_file(folder: Path) -> Path | None:
    """``folder/metadata.csv`` with ``file_name`` in its header, or ``metadata.jsonl`` with it in its first object."""
    csv_file, jsonl = folder / METADATA, folder / METADATA_JSONL
    if csv_file.is_file() and FILE_COLUMN in next(csv.reader([first_line(csv_file)]), []):
        return csv_file
    if jsonl.is_file():
        try:
            first = json.loads(first_line(jsonl) or "{}")
        except json.JSONDecodeError:
            return None
        return jsonl if isinstance(first, dict) and FILE_COLUMN in first else None
    return None


def is_audiofolder(folder: Path) -> bool:
    return metadata_file(folder) is not None


def _rows(metadata: Path, problems: list[Problem]) -> tuple[list[str], list[tuple[int, dict[str, Any]]]]:
    """The columns and ``(line, row)`` pairs of a metadata file; a line that is no row becomes a problem."""
    rows: list[tuple[int, dict[str, Any]]] = []
    lines = numbered_lines(metadata, problems, header=metadata.suffix == ".csv")
    if metadata.suffix == ".csv":
        numbers = [number for number, _ in lines]  # the reader counts the lines it was given; these are the file's
        reader = csv.DictReader(text + "\n" for _, text in lines)
        header = list(reader.fieldnames or [])
        for row in reader:
            line = numbers[reader.line_num - 1]
            if None in row or any(v is None for v in row.values()):
                problems.append(Problem(metadata, f"line {line}: expected {len(header)} fields "
                                                  f"({', '.join(header)}); quote a field that holds a comma"))
            else:
                rows.append((line, row))
        return header, rows
    for number, line in lines:
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            row = error
        if isinstance(row, dict):
            rows.append((number, row))
        else:
            problems.append(Problem(metadata, f"line {number}: not a JSON object ({row})"))
    return list(dict.fromkeys(key for _, row in rows for key in row)), rows


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
            raise CorpusError(f"audiofolder: neither {root / METADATA} (or .jsonl) nor {folder / METADATA} has a "
                              f"file_name column (splits found: {splits})")
    metadata = metadata_file(folder)
    header, rows = _rows(metadata, problems)
    text = column(header, text_column, TEXT_COLUMNS, "text", metadata)
    if text is None:
        raise CorpusError(f"{metadata}: no transcript column; expected one of {', '.join(TEXT_COLUMNS)} "
                          f"(the header has {', '.join(header)}), or name it with text_column")
    speaker_key = column(header, speaker_column, SPEAKER_COLUMNS, "speaker", metadata)
    clips = TableRows(metadata, items, problems, text_name=text)
    for number, row in rows:
        rel = str(row.get(FILE_COLUMN) or "").strip()
        speaker = str(row.get(speaker_key) or "").strip() if speaker_key else root.name
        unusable = relative_path_problem(rel, FILE_COLUMN, f"{folder.name}/") if rel else "empty file_name"
        clips.add(number, listed=rel, clip_id=Path(rel).with_suffix("").as_posix(), audio=folder / rel,
                  text=" ".join(str(row.get(text) or "").split()), speaker=speaker,
                  unusable=unusable or speaker_name_problem(speaker))
    return metadata
