"""A Kaldi data directory: ``wav.scp``, ``text``, ``utt2spk`` and, optionally, ``segments``.

``wav.scp`` lines are ``<recording> <path>``; a path is absolute, or relative to the data
directory or to the recipe folder two levels up (where Kaldi's scripts run, ``data/train/``
being below it). Entries that are commands (``sox … - |``, ``ffmpeg … |``) or archive offsets
(``foo.ark:123``) are named as problems and skipped: fintts never runs a command found in a
corpus file (a corpus is data from elsewhere; a pipe in it would run anything with the user's
rights). Run such a command yourself into a file and put that file's path in ``wav.scp``.

With ``segments`` (``<utterance> <recording> <start> <end>``, seconds) each utterance is that
stretch of its recording, read without cutting a file; without it an utterance is its whole
recording (same id). ``text`` (``<utterance> <transcript>``) says which utterances there are;
``utt2spk`` gives each its speaker (without it, one speaker named after the folder).
"""

from __future__ import annotations

from pathlib import Path

from fintts.tts.corpus.files import numbered_lines
from fintts.tts.corpus.model import Item, Problem, speaker_name_problem

WAV_SCP, TEXT, UTT2SPK, SEGMENTS = "wav.scp", "text", "utt2spk", "segments"


def is_kaldi(folder: Path) -> bool:
    return (folder / WAV_SCP).is_file() and (folder / TEXT).is_file()


def _table(path: Path, problems: list[Problem], fields: int) -> dict[str, tuple[int, list[str]]]:
    """``{key: (line number, rest)}`` of a Kaldi table; ``fields`` counts the rest (0: one free-text field)."""
    entries: dict[str, tuple[int, list[str]]] = {}
    for number, line in numbered_lines(path, problems):
        if not line.strip():
            continue
        key, *rest = line.split(maxsplit=1)  # Kaldi separates fields by any whitespace
        values = [rest[0].strip() if rest else ""] if fields == 0 else (rest[0].split() if rest else [])
        if fields and len(values) != fields:
            problems.append(Problem(path, f"line {number}: expected {fields + 1} fields, found {len(values) + 1}"))
            continue
        if key in entries:
            problems.append(Problem(path, f"line {number}: {key} already listed on line {entries[key][0]}"))
            continue
        entries[key] = (number, values)
    return entries


def _recording(folder: Path, entry: str) -> tuple[Path | None, str | None]:
    """The file a wav.scp entry names, or why it is not one fintts reads."""
    if entry.endswith("|") or entry.startswith("|"):
        return None, ("is a command; fintts does not run commands from corpus files: run it yourself with its "
                      "output to a .wav file and put that file's path here")
    if entry.endswith("-") or (":" in Path(entry).name and not Path(entry).exists()):
        return None, "is a pipe or an archive offset, not a file; write the audio to a .wav file and put its path here"
    path = Path(entry).expanduser()
    candidates = [path] if path.is_absolute() else [folder / path, folder.parent / path, folder.parent.parent / path]
    found = next((c for c in candidates if c.is_file()), None)
    if found is None:
        looked = ", ".join(str(c) for c in candidates)
        return None, f"audio not found (looked for {looked}); fix the path or remove the line"
    return found, None


def read_kaldi(folder: Path, items: list[Item], problems: list[Problem]) -> list[Path]:
    """The data directory's utterances as items; returns the tables read (``wav.scp``, ``text``, and those of the others it has)."""
    recordings: dict[str, Path] = {}
    skipped: set[str] = set()  # named once in wav.scp, not again for each utterance
    scp = folder / WAV_SCP
    for recording, (number, (entry,)) in _table(scp, problems, 0).items():
        path, problem = _recording(folder, entry)
        if problem:
            problems.append(Problem(scp, f"line {number}: {recording} {problem}"))
            skipped.add(recording)
        else:
            recordings[recording] = path
    texts = _table(folder / TEXT, problems, 0)
    speakers = _table(folder / UTT2SPK, problems, 1) if (folder / UTT2SPK).is_file() else None
    segments = _table(folder / SEGMENTS, problems, 3) if (folder / SEGMENTS).is_file() else None
    for utterance, (number, (transcript,)) in texts.items():
        where = f"{TEXT} line {number}"
        span = None
        recording = utterance
        if segments is not None:
            if utterance not in segments:
                problems.append(Problem(folder / SEGMENTS, f"no segment for {utterance} ({where}); add one or remove the line"))
                continue
            seg_number, (recording, start, end) = segments[utterance]
            try:
                span = (float(start), float(end))
            except ValueError:
                problems.append(Problem(folder / SEGMENTS, f"line {seg_number}: start and end must be seconds, found {start} {end}"))
                continue
            if not 0 <= span[0] < span[1]:
                problems.append(Problem(folder / SEGMENTS, f"line {seg_number}: {utterance} starts at {start} s and ends at {end} s; "
                                                           "the end must come after the start"))
                continue
        if recording not in recordings:
            if recording not in skipped:
                problems.append(Problem(scp, f"no recording {recording} for {utterance} ({where}); add it or remove the line"))
            continue
        speaker = folder.name
        if speakers is not None:
            if utterance not in speakers:
                problems.append(Problem(folder / UTT2SPK, f"no speaker for {utterance} ({where}); add a line"))
                continue
            speaker = speakers[utterance][1][0]
        problem = speaker_name_problem(speaker)
        if problem:
            problems.append(Problem(folder / UTT2SPK, f"{utterance}: {problem}"))
            continue
        if not transcript:
            problems.append(Problem(folder / TEXT, f"line {number}: empty transcript for {utterance}"))
            continue
        items.append(Item(id=utterance, audio=recordings[recording], text=transcript, speaker=speaker, span=span))
    return [scp, folder / TEXT] + [folder / name for name, table in ((UTT2SPK, speakers), (SEGMENTS, segments)) if table is not None]
