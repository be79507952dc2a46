"""The Chatterbox family's face (``fintts.families`` entry point ``chatterbox``): what the command line and ``say`` ask of it.

Its voice speaks through upstream's ``chatterbox`` package (:mod:`fintts.tts.chatterbox.speak`); the
folder the task exports is already what that package reads, so there is nothing to export, and no
publish, held-out eval or adapter merge yet: those commands say so.
"""

from __future__ import annotations

from pathlib import Path

from fintts.tts.chatterbox.speak import DESCRIPTION_FILE, load_chatterbox_voice
from fintts.tts.family import Family


def owns(folder: Path) -> bool:
    """A folder with ``chatterbox.json``, which fintts writes beside the release's files."""
    return (folder / DESCRIPTION_FILE).is_file()


#: what upstream's ``from_local`` reads with ``torch.load(weights_only=True)``: ``ve.pt`` and ``s3gen.pt`` itself, ``conds.pt``
#: (the built-in voice) through ``Conditionals.load`` (resemble-ai/chatterbox src/chatterbox/mtl_tts.py; chatterbox-light
#: 1.0.2 the same): without them a pulled voice cannot speak
PICKLED_PARTS = ("conds.pt", "ve.pt", "s3gen.pt")

FAMILY = Family(name="chatterbox", task="chatterbox", owns=owns, load_voice=load_chatterbox_voice,
                weights_only_files=PICKLED_PARTS)
