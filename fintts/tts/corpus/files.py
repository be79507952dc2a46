"""Finding audio and transcripts in folders, and reading a corpus's text files as people save them."""

from __future__ import annotations

from pathlib import Path

from fintts.tts.audio import AUDIO_EXTENSIONS
from fintts.tts.corpus.model import Problem

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


def read_lines(path: Path, problems: list[Problem]) -> list[str] | None:
    """The file's lines (a UTF-8 BOM dropped), or ``None`` with a problem saying to save it as UTF-8."""
    try:
        return path.read_text(encoding="utf-8-sig").splitlines()
    except UnicodeDecodeError as error:
        problems.append(Problem(path, f"is not UTF-8 text ({error}); save it as UTF-8"))
        return None


def first_line(path: Path) -> str:
    """The first non-empty line ('' when there is none or the file is not UTF-8 text)."""
    try:
        with open(path, encoding="utf-8-sig") as handle:
            return next((line.rstrip("\r\n") for line in handle if line.strip()), "")
    except (UnicodeDecodeError, OSError):
        return ""


def find_audio(folder: Path, name: str) -> Path | None:
    """``folder/name`` when it is an audio file, else ``folder/name`` with one of the audio extensions."""
    named = folder / name
    if named.suffix.lower() in AUDIO_EXTENSIONS and named.is_file():
        return named
    return next((c for c in (folder / f"{name}{e}" for e in AUDIO_EXTENSIONS) if c.is_file()), None)
