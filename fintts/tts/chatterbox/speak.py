"""Speaking an exported Chatterbox folder: through upstream's own classes, where they are installed.

What speaks it today is the ``chatterbox`` package (chatterbox-light, which ``fintts[chatterbox]``
installs, or upstream's master; both take ``from_local(..., t3_model=FILE)``, which the folder's
T3 file needs. chatterbox-tts 0.1.7, the registry's, takes no ``t3_model``: it is named with what
to install instead). ``ChatterboxMultilingualTTS.from_local`` reads the folder :mod:`fintts.tts.chatterbox.export`
writes, and its ``generate`` turns text into 24 kHz audio with T3, S3Gen and the built-in voice
(``conds.pt``) or a reference clip's. That package needs torch with a matching torchaudio (Kaggle's
image has the pair; the registry's torchaudio does not load beside a CPU-only torch 2.13), so
fintts imports it only here, when a person asks for such a voice. There is no ONNX path for this
family yet: the laptop's light install cannot speak it. A dry run's folder (``weights: random``) has no S3Gen and is
spoken by fintts's own T3 and the stand-in decoder's tones instead (:mod:`fintts.tts.chatterbox.dry_voice`).

The text goes through our Finnish normaliser first (numbers, dates, units read out); upstream's
``generate`` then applies its own punctuation clean-up, lower case, NFKD and the ``[fi]`` tag, as
:class:`fintts.tts.chatterbox.text.ChatterboxText` does in training.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from fintts.tts.chatterbox.release import RANDOM
from fintts.tts.chatterbox.text import finnish_normaliser
from fintts.tts.streamed_voice import StreamedVoice
from fintts.tts.voice_format import VoiceError

#: what fintts writes beside the release's files (T3's sizes, the reference clip); marks a folder as this family's
DESCRIPTION_FILE = "chatterbox.json"


class ChatterboxVoice(StreamedVoice):
    """A Chatterbox voice as ``fintts say`` speaks it: the whole text at once, through upstream's ``generate``."""

    backend_name = "chatterbox"

    def __init__(self, tts: Any, reference: str | None = None):
        self.tts, self.reference = tts, reference

    @property
    def sample_rate(self) -> int:
        return self.tts.sr

    def stream(self, text: str, *, speaker: str | int | None = None,
               warn: Callable[[str], None] | None = None) -> Iterator[np.ndarray]:
        spoken = finnish_normaliser().normalize(text)
        yield self.tts.generate(spoken, language_id="fi", audio_prompt_path=self.reference).squeeze(0).cpu().numpy()


def load_chatterbox_voice(folder: Path, speaker: str | int | None = None, *, reference: str | None = None,
                          device: str = "cpu", **_options: Any) -> ChatterboxVoice:
    """Open the Chatterbox voice in ``folder`` (its built-in voice ``conds.pt``, or ``reference``'s clip).

    VITS's options (backend, int8, speed, noise, seed) mean nothing to T3 and are left unused.
    """
    description = json.loads((folder / DESCRIPTION_FILE).read_text(encoding="utf-8"))
    if description.get("weights") == RANDOM:  # a dry run's: fintts's T3 and the stand-in decoder's tones
        from fintts.tts.chatterbox.dry_voice import load_dry_run_voice

        return load_dry_run_voice(folder, description)
    missing = [name for name in ("ve.pt", "s3gen.pt") if not (folder / name).is_file()]
    if missing:
        raise VoiceError(f"{folder} has no {', '.join(missing)}: a voice trained from the release has them beside its T3 "
                         "(copy them from ResembleAI/chatterbox); a dry run's folder exported before fintts named its "
                         f"weights needs \"weights\": \"{RANDOM}\" in its {DESCRIPTION_FILE}")
    try:  # chatterbox-light and chatterbox-tts install this import name; torchaudio comes with them
        from chatterbox.mtl_tts import ChatterboxMultilingualTTS
    except ImportError as err:
        raise VoiceError(f"{folder} is a Chatterbox voice, which speaks through the chatterbox package ({err}): "
                         "pip install chatterbox-light (fintts[chatterbox]) where torch and torchaudio match "
                         "(Kaggle's image does)") from None
    if "t3_model" not in inspect.signature(ChatterboxMultilingualTTS.from_local).parameters:
        raise VoiceError(f"{folder}'s T3 is {description['t3_file']}, which {installed_chatterbox()}'s from_local cannot "
                         "load (it takes no t3_model): pip uninstall chatterbox-tts, then pip install chatterbox-light "
                         "(fintts[chatterbox]) or upstream's master")
    return ChatterboxVoice(ChatterboxMultilingualTTS.from_local(folder, device, t3_model=description["t3_file"]), reference)


def installed_chatterbox() -> str:
    """The distribution and version that installed the ``chatterbox`` import name (two publish it), for an error."""
    names = importlib.metadata.packages_distributions().get("chatterbox", [])
    return f"{names[0]} {importlib.metadata.version(names[0])}" if names else "the installed chatterbox package"
