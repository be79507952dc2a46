"""Finding audio and transcripts in folders, and reading a corpus's text files as people save them.

**Tables are read line by line** (:func:`numbered_lines`, which every table reader uses): a
line that is not UTF-8 (a Latin-1 ``ä`` from an old editor) is a problem naming the file, the
line and the byte, and only that row is skipped, as a corrupt clip is; the rest of the table is
read. A header line that is not UTF-8 leaves nothing to read the rows by: that is an error
naming the file. Line numbers are an editor's: lines end at ``\n``, ``\r\n`` or ``\r``.

**Symbolic links are never followed** (:func:`link_problem`): a corpus comes from elsewhere,
and a link in it could point at any file on this machine (a token, a key) whose bytes would
then be read as a transcript or a clip, and reported or trained on. A linked clip or
transcript is a problem and skipped; a linked table is an error. The corpus folder itself may
be a link: the person named it.
"""

from __future__ import annotations

import codecs
from pathlib import Path

from fintts.tts.audio import AUDIO_EXTENSIONS
from fintts.tts.corpus.model import CorpusError, Problem

TRANSCRIPT_EXTENSIONS = (".lab", ".txt")


def hidden(path: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(root).parts)


def audio_files(folder: Path, recursive: bool) -> list[Path]:
    candidates = folder.rglob("*") if recursive else folder.iterdir()
    return sorted(
        p for p in candidates
        if p.suffix.lower() in AUDIO_EXTENSIONS and p.is_file() and not hidden(p, folder)
    )


def transcript_of(audio: Path) -> Path | None:
    return next((t for t in (audio.with_suffix(e) for e in TRANSCRIPT_EXTENSIONS) if t.is_file()), None)


def has_pairs(folder: Path, recursive: bool) -> bool:
    return any(transcript_of(audio) is not None for audio in audio_files(folder, recursive))


LINK_REASON = ("is a symbolic link; fintts never follows links inside a corpus (one could point at any file on this "
               "machine): put a copy of the file in its place (cp -L), or point data at the folder it links to")


def link_problem(path: Path, root: Path) -> str | None:
    """Why ``path`` is not read: it, or a folder between ``root`` and it, is a symbolic link (``None``: neither).

    A path outside ``root`` (a Kaldi ``wav.scp`` may name one) is judged by the file alone.
    """
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        return LINK_REASON if path.is_symlink() else None
    for depth in range(1, len(parts) + 1):
        step = root.joinpath(*parts[:depth])
        if step.is_symlink():
            return LINK_REASON if step == path else f"is below {step}, which {LINK_REASON}"
    return None


def numbered_lines(path: Path, problems: list[Problem], *, header: bool = False) -> list[tuple[int, str]]:
    """``(line number, text)`` of each line of a UTF-8 text file (a BOM dropped); see the module for what is skipped.

    ``header``: the first non-empty line names the columns, and a file whose header is not
    UTF-8 is a :class:`CorpusError`.
    """
    if path.is_symlink():
        raise CorpusError(f"{path}: {LINK_REASON}")
    data = path.read_bytes()
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
    lines: list[tuple[int, str]] = []
    seen_text = False
    for number, raw in enumerate(data.splitlines(), start=1):  # bytes split at \n, \r\n and \r only
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            what = f"line {number}: {not_utf8(raw, error)}; save {path.name} as UTF-8"
            if header and not seen_text:
                raise CorpusError(f"{path}: {what} (this line is the header: no row can be read without it)") from None
            problems.append(Problem(path, f"{what} (the row is skipped)"))
            seen_text = True
            continue
        seen_text = seen_text or bool(text.strip())
        lines.append((number, text))
    return lines


def not_utf8(raw: bytes, error: UnicodeDecodeError) -> str:
    """Where a line stops being UTF-8, e.g. ``not UTF-8 text (byte 0xe4 at column 12; Latin-1 or Windows-1252?)``."""
    byte = raw[error.start]
    guess = "; Latin-1 or Windows-1252?" if byte >= 0x80 else ""
    return f"not UTF-8 text (byte 0x{byte:02x} at column {error.start + 1}{guess})"


def first_line(path: Path) -> str:
    """The first non-empty line, for telling a layout by its header ('' when there is none or it cannot be read).

    Only that line is decoded (a bad byte in it is replaced): a row further down that is not
    UTF-8 is the reader's problem to name, not a reason to miss the layout.
    """
    try:
        with open(path, "rb") as handle:
            raw = next((line for line in handle if line.strip()), b"")
    except OSError:
        return ""
    if raw.startswith(codecs.BOM_UTF8):
        raw = raw[len(codecs.BOM_UTF8):]
    return raw.decode("utf-8", errors="replace").rstrip("\r\n")


def find_audio(folder: Path, name: str) -> Path | None:
    """``folder/name`` when it is an audio file, else ``folder/name`` with one of the audio extensions."""
    named = folder / name
    if named.suffix.lower() in AUDIO_EXTENSIONS and named.is_file():
        return named
    return next((c for c in (folder / f"{name}{e}" for e in AUDIO_EXTENSIONS) if c.is_file()), None)
