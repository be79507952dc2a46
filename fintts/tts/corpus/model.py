"""What every corpus reader returns, the options a person may give it, and the name rules they share.

Imports nothing of fintts's, so each reader module and the checks can use it without a circle.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from fintts.errors import UsageError

#: Where a Hub dataset is named in ``data:``: ``hf://datasets/USER/NAME``.
HUB_PREFIX = "hf://datasets/"


class CorpusError(UsageError):
    """The folder is not a corpus fintts can read; the message says what was looked for."""


@dataclasses.dataclass(frozen=True)
class Item:
    """One clip: a corpus-unique id, its audio file, its transcript and its speaker.

    ``span`` is ``(start, end)`` in seconds when the clip is one stretch of a longer
    recording (a Kaldi ``segments`` line); ``None``: the whole file.
    """

    id: str
    audio: Path
    text: str
    speaker: str
    span: tuple[float, float] | None = None


@dataclasses.dataclass(frozen=True)
class Problem:
    """Something wrong with one file (or one line of it), and what to do about it."""

    path: Path
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


@dataclasses.dataclass
class Corpus:
    """What :func:`~fintts.tts.corpus.read_corpus` found: usable-looking items and problems met reading.

    ``looked_for`` says how the layout was chosen (detected from which file, or forced),
    so a report can show it before anything else.
    """

    root: Path
    format: str
    items: list[Item]
    problems: list[Problem]
    looked_for: str = ""


@dataclasses.dataclass(frozen=True)
class ReadOptions:
    """What a layout cannot tell by itself; every field may stay empty.

    ``split``: Common Voice's table (``validated`` by default; ``train``, ``dev``, ``test``,
    ``other``…; never ``invalidated``) or a Hub dataset's split (``train`` by default).
    ``text_column``/``speaker_column``/``audio_column``: the columns of an ``audiofolder``
    CSV or a Hub dataset, when they are not the usual names. ``cache_dir``: where a Hub
    dataset is downloaded and its audio unpacked (default: the Hugging Face cache).
    """

    split: str = ""
    text_column: str = ""
    speaker_column: str = ""
    audio_column: str = ""
    cache_dir: Path | None = None


def speaker_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a speaker's name (``None`` if it can): it becomes part of file names."""
    if not name or name.startswith(".") or "/" in name or "\\" in name or not name.isprintable():
        return (
            f"speaker name {name!r} cannot be used as part of a file name (no / or \\, no leading dot, "
            "no control characters)"
        )
    return None


def relative_path_problem(rel: str, what: str = "id", under: str = "wavs/") -> str | None:
    """Why ``rel`` cannot name a file under the corpus folder (``None`` if it can)."""
    parts = rel.replace("\\", "/").split("/")
    if rel.startswith("/") or "\\" in rel or ".." in parts or not rel.isprintable():
        return f"{what} {rel!r} must name a file under {under} (no .., no leading /, no \\)"
    return None
