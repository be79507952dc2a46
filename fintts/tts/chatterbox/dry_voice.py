"""A ``weights: random`` export spoken on the laptop as its validation's samples were: fintts's T3, then the stand-in
decoder's tones.

Such a voice is a dry run's (the tests, the GPU check, a first try of the Kaggle chain before hours go to the release):
it has no S3Gen to turn its speech tokens into speech, and upstream's classes cannot load it (its vocabulary and sizes
are fintts's own). Speaking it anyway, through the code that made training's samples (:meth:`T3.generate`, greedy, then
:meth:`RandomParts.waveform`, a tone per speech token), shows that the path from the Hub to the laptop works: the
folder's T3, vocabulary and built-in voice (``conds.pt``) load and make tokens. Each text says first that what plays is
not speech.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file

from fintts.tts.chatterbox.frozen import DECODER_RATE, RandomParts
from fintts.tts.chatterbox.t3 import T3, T3Settings
from fintts.tts.chatterbox.text import ChatterboxText
from fintts.tts.streamed_voice import StreamedVoice

#: the most speech tokens one text gets: upstream's ``generate`` caps T3 at 1000 (``max_new_tokens=1000`` in
#: chatterbox/mtl_tts.py, chatterbox-light 1.0.2); a random T3 seldom says stop, so the cap is what ends it
MAX_NEW_TOKENS = 1000
#: and at most this many per text id: twice a reading's (Finnish read aloud is ~12-15 characters a second, 25 tokens)
TOKENS_PER_TEXT_ID = 4
NOT_SPEECH = ("this voice was trained with weights: random (a dry run): what plays is a tone per speech token, not "
              "speech; train from the release (weights: ResembleAI/chatterbox) for a voice")


class DryRunVoice(StreamedVoice):
    """The whole text at once: T3's greedy tokens in the built-in voice's conditioning, a 40-ms tone each."""

    backend_name = "fintts-t3 (dry run)"
    sample_rate = DECODER_RATE

    def __init__(self, t3: T3, text: ChatterboxText, conds: dict[str, Any]):
        self.t3, self.text, self.decoder = t3, text, RandomParts()
        with torch.inference_mode():  # once per voice, no graph kept
            self.conditioning = t3.conditioning(conds["speaker_emb"], conds["cond_prompt_speech_tokens"], None,
                                                conds["emotion_adv"])

    @torch.inference_mode()
    def stream(self, text: str, *, speaker: str | int | None = None,
               warn: Callable[[str], None] | None = None) -> Iterator[np.ndarray]:
        if warn is not None:
            warn(NOT_SPEECH)
        s = self.t3.settings
        ids = torch.tensor([s.start_text_token, *self.text.encode(text, warn=warn), s.stop_text_token])
        cap = min(MAX_NEW_TOKENS, s.max_speech_tokens, TOKENS_PER_TEXT_ID * len(ids))
        tokens = self.t3.generate(self.conditioning, ids, cap)
        yield self.decoder.waveform(tokens, {}).numpy()


def load_dry_run_voice(folder: Path, description: dict[str, Any]) -> DryRunVoice:
    """The folder :mod:`fintts.tts.chatterbox.export` wrote for a ``weights: random`` run (``chatterbox.json`` says so)."""
    t3 = T3(T3Settings(**description["t3"]))
    t3.load_state_dict(load_file(str(folder / description["t3_file"])), strict=True)
    conds = torch.load(folder / "conds.pt", map_location="cpu", weights_only=True)["t3"]
    return DryRunVoice(t3.eval(), ChatterboxText.from_folder(folder), conds)
