"""A voice's torch backend: :class:`~fintts.tts.vits.inference.VitsSynthesizer` behind :class:`fintts.tts.vits.voice.Backend`.

Apart from :mod:`.inference` so that the synthesizer, which the LoRA and ONNX exporters
build on, does not have to import them back to put an adapter on a loaded voice.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor
from transformers import VitsModel

from fintts.tts.vits.base_voice import no_progress_bars
from fintts.tts.vits.inference import VitsSynthesizer, fold_weight_norm


class TorchBackend:
    """Runs :class:`VitsSynthesizer` in PyTorch (the model's own device and dtype)."""

    name = "torch"

    def __init__(self, vits: VitsModel):
        self.synthesizer = VitsSynthesizer(vits)
        self.multi_speaker = vits.config.num_speakers > 1

    @classmethod
    def load(cls, folder: str | Path, adapter: Path | None = None) -> TorchBackend:
        """The voice in ``folder`` (``save_pretrained`` layout), weight norm folded, for inference only.

        ``adapter``: a LoRA adapter folder (peft's layout) to put on it, not merged: the
        voice computes what training computed (``fintts merge`` makes a faster, plain copy).
        """
        with no_progress_bars():  # no "Loading weights" bar: fintts says how long the voice took to load
            vits = fold_weight_norm(VitsModel.from_pretrained(folder, use_safetensors=True).eval())  # never a pickle
        if adapter is not None:
            from fintts.tts.vits.lora import load_adapter  # peft comes with [train], not with [torch]

            vits = load_adapter(vits, adapter).get_base_model().eval()
        return cls(vits)

    def __call__(
        self, ids: np.ndarray, duration_noise: np.ndarray, prior_noise: np.ndarray, length_scale: float, speaker: int | None
    ) -> tuple[np.ndarray, int]:
        parameter = next(self.synthesizer.parameters())

        def tensor(array: Any, dtype: torch.dtype) -> Tensor:
            return torch.as_tensor(np.asarray(array)).to(device=parameter.device, dtype=dtype)

        with torch.inference_mode():
            waveform, frames = self.synthesizer(
                tensor(ids[None], torch.long), tensor(duration_noise, parameter.dtype), tensor(prior_noise, parameter.dtype),
                tensor([length_scale], parameter.dtype), tensor([speaker], torch.long) if self.multi_speaker else None,
            )
        return waveform[0].float().cpu().numpy(), int(frames)
