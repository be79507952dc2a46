"""A trained voice on a laptop, whatever its family: :func:`load_voice` finds the folder and hands it to its family.

A voice is an exported ``model/`` folder, a fintts run folder (its ``model/``), or a Hub repo
``user/name`` (downloaded once, then read from the local cache: :mod:`fintts.tts.hub_voice`). Which
family's it is, its files say (:mod:`fintts.tts.families`); that family's face opens it
(VITS: :mod:`fintts.tts.vits.voice`, through onnxruntime without torch). This module names no family.
"""

from __future__ import annotations

from pathlib import Path

from fintts.tts.families import voice_in
from fintts.tts.family import Family, Voice
from fintts.tts.hub_voice import download_voice
from fintts.tts.voice_format import VOICE_DIR, VoiceError


def load_voice(path_or_repo: str | Path, speaker: str | int | None = None, **options) -> Voice:
    """Open a voice: an exported ``model/`` folder, a fintts run folder, or a Hub repo ``user/name``.

    ``speaker``: a voice of several speakers' (name or number; default its first). ``options`` are the family's
    (a VITS voice: ``backend`` onnx|torch, ``int8``, ``speed``, ``noise``, ``noise_duration``, ``seed``, ``threads``:
    :func:`fintts.tts.vits.voice.load_vits_voice`).
    """
    folder, family = find_voice(path_or_repo)
    return family.operation("load_voice")(folder, speaker, **options)


def voice_folder(path_or_repo: str | Path) -> Path:
    """The voice's own folder: the path itself, its ``model/``, or a Hub repo's ``model/``."""
    return find_voice(path_or_repo)[0]


def find_voice(path_or_repo: str | Path) -> tuple[Path, Family]:
    """The voice's folder and its family (see :func:`load_voice` for what ``path_or_repo`` may be)."""
    path = Path(path_or_repo).expanduser()
    if (found := voice_in(path)) is not None:
        return found
    if path.exists():
        raise VoiceError(f"{path} is not a voice: no voice files in it or in {path / VOICE_DIR} "
                         "(give the run folder, its model/ folder, or a Hub repo user/name)")
    if _looks_like_repo(str(path_or_repo)):
        try:
            folder = download_voice(str(path_or_repo))
        except VoiceError as err:  # a mistyped folder looks like a repo id too: say both
            raise VoiceError(f"there is no folder {path_or_repo} here, and as a Hub repo: {err}") from None
        if (found := voice_in(folder)) is None or found[0] != folder:
            raise VoiceError(f"{path_or_repo}'s model/ is not a voice of any installed family")
        return found
    raise VoiceError(f"{path} does not exist (give a voice folder, a run folder, or a Hub repo user/name)")


def _looks_like_repo(name: str) -> bool:
    parts = name.split("/")
    return len(parts) == 2 and all(parts) and not name.startswith((".", "~"))
