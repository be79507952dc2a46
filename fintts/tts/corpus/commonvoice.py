"""Mozilla Common Voice: ``validated.tsv`` (or another split's table) beside ``clips/*.mp3``.

Each row is ``client_id path sentence_id sentence … up_votes down_votes age gender …``, tab
separated and unquoted (a sentence may hold a quote mark). The speaker is the ``client_id``,
shown shortened to its first hex digits (longer where two would collide); the ``sentence`` is
read as given, and rows are taken as the release sorted them: ``validated.tsv`` holds the clips
the community's votes accepted, so votes are not counted again here. ``invalidated.tsv`` (and
``reported.tsv``) hold the clips the votes rejected: fintts refuses to read them.
"""

from __future__ import annotations

from pathlib import Path

from fintts.tts.corpus.files import first_line, numbered_lines
from fintts.tts.corpus.model import CorpusError, Item, Problem, relative_path_problem, speaker_name_problem
from fintts.tts.corpus.rows import TableRows

DEFAULT_SPLIT = "validated"
FALLBACK_SPLIT = "train"
REFUSED = ("invalidated", "reported")
#: tables a release ships with clip rows (the ``_sentences``/``clip_durations`` tables have none)
TABLES = ("validated", "train", "dev", "test", "other")
CLIPS = "clips"
REQUIRED = ("client_id", "path", "sentence")
SHORT = 8


def tables(folder: Path) -> list[Path]:
    """The split tables in ``folder`` with a Common Voice header."""
    found = []
    for name in TABLES:
        table = folder / f"{name}.tsv"
        if table.is_file() and set(REQUIRED) <= set(first_line(table).split("\t")):
            found.append(table)
    return found


def split_table(folder: Path, split: str) -> Path:
    """The table of ``split`` (default: validated, or train when a copy ships no validated.tsv)."""
    if split in REFUSED:
        raise CorpusError(f"split {split!r}: {split}.tsv holds the clips Common Voice's voters rejected; fintts does not "
                          f"train on them. Use validated (default), train, dev, test or other")
    names = [split] if split else [DEFAULT_SPLIT, FALLBACK_SPLIT]
    table = next((folder / f"{n}.tsv" for n in names if (folder / f"{n}.tsv").is_file()), None)
    if table is None:
        have = ", ".join(sorted(p.stem for p in folder.glob("*.tsv"))) or "none"
        raise CorpusError(f"Common Voice split {' or '.join(names)}: no {names[0]}.tsv in {folder} (tables there: {have}); "
                          "pass split: one of them")
    return table


def short_names(client_ids: set[str]) -> dict[str, str]:
    """Each client_id's shortest prefix (from 8 characters) that no other client_id shares."""
    length = SHORT
    while len({c[:length] for c in client_ids}) < len(client_ids):
        length *= 2
    return {c: c[:length] for c in client_ids}


def read_commonvoice(folder: Path, split: str, items: list[Item], problems: list[Problem]) -> Path:
    """Rows of the split's table as items; returns the table read."""
    table = split_table(folder, split)
    lines = [(number, text) for number, text in numbered_lines(table, problems, header=True) if text.strip()]
    header = lines[0][1].split("\t") if lines else []
    missing = [c for c in REQUIRED if c not in header] if lines else []
    if missing:
        raise CorpusError(f"{table}: no column {', '.join(missing)}; a Common Voice table has client_id, path and sentence")
    # tab separated and unquoted: a row is one line, its fields split at tabs (a missing one is empty)
    rows = [(number, dict(zip(header, text.split("\t"), strict=False))) for number, text in lines[1:]]
    names = short_names({row["client_id"] for _, row in rows if row.get("client_id")})
    clips = TableRows(table, items, problems, text_name="sentence")
    for number, row in rows:
        client, rel, sentence = (row.get(c) or "" for c in REQUIRED)
        if not client or not rel:
            clips.refuse(number, "empty client_id or path")
            continue
        # the speaker's name becomes part of file names (samples, adapters): checked here, not at the first validation
        clips.add(number, listed=rel, clip_id=Path(rel).with_suffix("").as_posix(), audio=folder / CLIPS / rel,
                  text=sentence.strip(), speaker=names[client],
                  unusable=relative_path_problem(rel, "path", f"{CLIPS}/") or speaker_name_problem(names[client]))
    return table
