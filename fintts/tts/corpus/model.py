"""What every corpus reader returns, the options a person may give it, and the name rules they share.

Imports nothing of fintts's, so each reader module and the checks can use it without a circle.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fintts.errors import UsageError

#: Where a Hub dataset is named in ``data:``: ``hf://datasets/USER/NAME``.
HUB_PREFIX = "hf://datasets/"
#: A column's name: letters, digits and ``_``, with ``.``, ``-`` and spaces inside (what CSV headers and Hub datasets use).
COLUMN_NAME = re.compile(r"\w(?:[\w .-]{0,198}[\w.-])?")
#: A split's name: Common Voice's tables and the Hub's splits (``train``, ``validated``, ``dev``, ``test.clean``…).
SPLIT_NAME = re.compile(r"\w[\w.-]{0,99}")
#: The :class:`ReadOptions` fields that name a split or a column, and the rule each follows.
NAMED_FIELDS = {"split": SPLIT_NAME, "text_column": COLUMN_NAME, "speaker_column": COLUMN_NAME, "audio_column": COLUMN_NAME}


class CorpusError(UsageError):
    """The folder is not a corpus fintts can read; the message says what was looked for."""


@dataclasses.dataclass(frozen=True)
class Item:
    """One clip: a corpus-unique id, its audio file, its transcript and its speaker.

    ``span`` is ``(start, end)`` in seconds when the clip is one stretch of a longer
    recording (a Kaldi ``segments`` line); ``None``: the whole file. ``transcript`` is the
    clip's own transcript file (a ``pairs`` corpus's ``.lab``/``.txt``), ``None`` when its text
    came from one of the corpus's tables (:attr:`Corpus.tables`): what an upload of the clip
    must carry with it.
    """

    id: str
    audio: Path
    text: str
    speaker: str
    span: tuple[float, float] | None = None
    transcript: Path | None = None


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
    so a report can show it before anything else. ``tables`` are the files the reader read
    the clips from (``metadata.csv``, ``validated.tsv``, ``wav.scp`` and ``text``…; a clip's own
    transcript is its :attr:`Item.transcript`): with the clips, what an upload of the corpus
    must carry for a session to read it alike (:mod:`~fintts.tts.corpus.used`).
    """

    root: Path
    format: str
    items: list[Item]
    problems: list[Problem]
    looked_for: str = ""
    tables: list[Path] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class ReadOptions:
    """What a layout cannot tell by itself; every field may stay empty.

    ``split``: Common Voice's table (``validated`` by default; ``train``, ``dev``, ``test``,
    ``other``…; never ``invalidated``) or a Hub dataset's split (``train`` by default).
    ``text_column``/``speaker_column``/``audio_column``: the columns of an ``audiofolder``
    CSV or a Hub dataset, when they are not the usual names. ``cache_dir``: where a Hub
    dataset is downloaded and its audio unpacked (default: the Hugging Face cache).
    ``fetch_first``: in a session of several processes, how a Hub dataset is downloaded by the
    one holding the token and read from the cache by the others (a task's ``context.fetch_first``,
    see :mod:`fintts.tts.hub_inputs`); ``None``: here.
    """

    split: str = ""
    text_column: str = ""
    speaker_column: str = ""
    audio_column: str = ""
    cache_dir: Path | None = None
    fetch_first: Callable[[str, Callable[[], Any]], Any] | None = dataclasses.field(default=None, compare=False)

    def __post_init__(self) -> None:
        problems = option_problems({name: getattr(self, name) for name in NAMED_FIELDS})
        if problems:
            raise CorpusError("; ".join(problems))


def option_problems(values: dict[str, object]) -> list[str]:
    """What is wrong with a split's or a column's name among ``values`` (field → value; empty values are unset).

    A name is only ever a name: anything else (a quote, ``;``, ``$(``, a path) is refused
    where a config or a command line gives it, so no such value reaches a table, a file name
    or a command built from a shared config.
    """
    problems = []
    for field, value in values.items():
        rule = NAMED_FIELDS[field]
        if value and (not isinstance(value, str) or not rule.fullmatch(value)):
            what = "a split's name (letters, digits, _ . -)" if rule is SPLIT_NAME else \
                "a column's name (letters, digits, _ . - and inner spaces)"
            problems.append(f"{field}: {value!r} is not {what}")
    return problems


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
