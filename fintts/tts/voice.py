"""A trained voice: Finnish text in, audio out, on a laptop's CPU.

Loads the ``model/`` folder fintts exports (transformers ``save_pretrained`` layout plus
the tokenizer files and ``speakers.json``), so the same folder also works with plain
``transformers.VitsModel`` and ``pipeline("text-to-speech")``. fintts adds the Finnish
front end (numbers, dates, abbreviations) that the bare tokenizer lacks.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import torch
from transformers import VitsModel, VitsTokenizer

from fintts.tts.text import FinnishText

SPEAKERS_FILE = "speakers.json"


class Voice:
    def __init__(self, model: VitsModel, text: FinnishText, speakers: list[str] | None = None):
        self.model = model
        self.text = text
        self.speakers = speakers or []

    @classmethod
    def load(cls, folder: str | Path, *, device: str = "cpu") -> "Voice":
        folder = Path(folder)
        if not (folder / "config.json").is_file():
            raise FileNotFoundError(f"{folder} is not an exported voice (no config.json); use the run's model/ folder")
        model = VitsModel.from_pretrained(folder).to(device).eval()
        text = FinnishText.from_tokenizer(VitsTokenizer.from_pretrained(folder))
        speakers = json.loads((folder / SPEAKERS_FILE).read_text()) if (folder / SPEAKERS_FILE).is_file() else []
        return cls(model, text, speakers)

    @property
    def sample_rate(self) -> int:
        return self.model.config.sampling_rate

    def speaker_index(self, speaker: str | int | None) -> int | None:
        if self.model.config.num_speakers <= 1:
            return None
        if speaker is None:
            return 0
        if isinstance(speaker, int) or str(speaker).isdigit():
            index = int(speaker)
        elif speaker in self.speakers:
            index = self.speakers.index(speaker)
        else:
            raise ValueError(f"unknown speaker {speaker!r}; this voice has: {', '.join(self.speakers) or 'numbered speakers'}")
        if not 0 <= index < self.model.config.num_speakers:
            raise ValueError(f"speaker {index} is out of range (0..{self.model.config.num_speakers - 1})")
        return index

    @torch.no_grad()
    def synthesize(self, text: str, speaker: str | int | None = None, *, warn: Callable[[str], None] | None = print) -> torch.Tensor:
        """Mono float audio at :attr:`sample_rate` (noise as configured: a fixed seed makes it repeatable)."""
        ids = self.text.encode(text, warn=warn)
        if not ids:
            raise ValueError(f"nothing to say: {text!r} has no characters this voice knows")
        device = next(self.model.parameters()).device
        input_ids = torch.tensor([ids], device=device)
        output = self.model(input_ids=input_ids, speaker_id=self.speaker_index(speaker))
        return output.waveform[0].float().cpu()
