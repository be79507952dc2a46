"""The checks every table of clips makes of its rows: one order, one wording, whichever source wrote the table.

LJSpeech's ``metadata.csv``, CSS10's ``transcript.txt``, Common Voice's ``.tsv`` and an
audiofolder's ``metadata.csv`` differ in how a row is split, not in what makes a row usable.
A row is refused for the first thing wrong with it, in the order a person fixes them: a path
or speaker's name that cannot be used, a clip listed twice, missing audio, an empty
transcript. A refusal is a :class:`~fintts.tts.corpus.model.Problem` naming the table's line,
and skips that row only, as a corrupt clip is skipped.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from fintts.tts.corpus.model import Item, Problem


@dataclasses.dataclass
class TableRows:
    """Rows of one table becoming ``items``, what is wrong with them ``problems``.

    ``text_name`` is how the table calls its transcript (Common Voice's ``sentence``, an
    audiofolder's column), so a problem uses the word the person sees in the file.
    """

    table: Path
    items: list[Item]
    problems: list[Problem]
    text_name: str = "transcript"
    _seen: dict[str, int] = dataclasses.field(default_factory=dict)

    def refuse(self, number: int, reason: str) -> None:
        """Skip line ``number`` of the table, for ``reason``."""
        self.problems.append(Problem(self.table, f"line {number}: {reason}"))

    def add(
        self, number: int, *, listed: str, clip_id: str, audio: Path | None, text: str, speaker: str,
        unusable: str | None = None, looked_for: str = "",
    ) -> None:
        """Line ``number`` as an item, unless something is wrong with it.

        ``listed``: the clip as the table names it; a second row whose ``clip_id`` is taken is a duplicate
        (``a.mp3`` and ``a.wav`` are one clip: ids are unique in a corpus).
        ``unusable``: why its path or speaker cannot be used, as the reader found (``None``: nothing).
        ``audio``: the file the row names, which may not exist (``None``: the reader found none
        where it looked, which ``looked_for`` says; the problem then names the table).
        """
        if unusable:
            return self.refuse(number, unusable)
        if clip_id in self._seen:
            return self.refuse(number, f"{listed} already listed on line {self._seen[clip_id]}")
        self._seen[clip_id] = number
        where = f"{self.table.name} line {number}"
        if audio is None or not audio.is_file():
            missing = f"audio not found for {where}{looked_for}; add the file or remove the line"
            self.problems.append(Problem(audio or self.table, missing))
        elif not text:
            self.problems.append(Problem(audio, f"empty {self.text_name} ({where}); write it or remove the line"))
        else:
            self.items.append(Item(id=clip_id, audio=audio, text=text, speaker=speaker))
