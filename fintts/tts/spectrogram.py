"""The spectrograms VITS trains on, through ``torch.stft`` (torchaudio is not used: see :mod:`fintts.tts.audio`).

They reproduce the reference VITS / HiFi-GAN ``mel_processing`` code that MMS-TTS was
trained with, because the pretrained posterior encoder and the mel loss only make sense on
exactly those features: reflect-pad by ``(n_fft - hop) / 2`` on each side,
``stft(center=False)`` with a Hann window, magnitude ``sqrt(re² + im² + 1e-6)``, a Slaney
mel filter bank (librosa's default, which VITS used), and ``log(clamp(x, min=1e-5))``. With
that padding a clip of ``T`` samples gives exactly ``T // hop_length`` frames, so
``frames * hop_length`` samples of audio line up with the frames the decoder upsamples.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch
from torch.nn import functional as F


@dataclasses.dataclass(frozen=True)
class SpectrogramConfig:
    """STFT and mel settings; ``f_max=None`` means half the sample rate."""

    sample_rate: int
    n_fft: int
    hop_length: int
    win_length: int
    n_mels: int
    f_min: float = 0.0
    f_max: float | None = None

    def __post_init__(self) -> None:
        if not 0 < self.hop_length <= self.n_fft or not 0 < self.win_length <= self.n_fft:
            raise ValueError(f"need 0 < hop_length, win_length <= n_fft; got {self}")
        if (self.n_fft - self.hop_length) % 2:
            raise ValueError(
                f"n_fft - hop_length must be even so that padding is symmetric and frames = samples // hop; got {self}"
            )

    @property
    def n_freqs(self) -> int:
        """Linear-spectrogram bins, ``n_fft // 2 + 1`` (``VitsConfig.spectrogram_bins``)."""
        return self.n_fft // 2 + 1

    @classmethod
    def from_vits_config(cls, config: Any) -> SpectrogramConfig:
        """Settings matching a transformers ``VitsConfig``.

        ``VitsConfig`` stores ``spectrogram_bins`` (``n_fft // 2 + 1``) and the decoder's
        ``upsample_rates``, whose product is the number of samples per frame, i.e. the
        hop length. VITS and MMS use a window as long as the FFT, 80 mel bands and the
        full band (``f_min`` 0, no ``f_max``) — the ``ljs_base`` settings MMS was trained
        with; for MMS (``spectrogram_bins`` 513, rates 8·8·2·2) that is n_fft 1024,
        hop 256 at 16 kHz.
        """
        n_fft = (config.spectrogram_bins - 1) * 2
        return cls(
            sample_rate=config.sampling_rate,
            n_fft=n_fft,
            hop_length=math.prod(config.upsample_rates),
            win_length=n_fft,
            n_mels=80,
        )


class Spectrogram:
    """Computes spectrograms for one config, caching windows and filter banks per device.

    Keep one instance where spectrograms are computed repeatedly (a training step);
    the module-level functions build a fresh one per call.
    """

    def __init__(self, config: SpectrogramConfig) -> None:
        self.config = config
        self._windows: dict[torch.device, torch.Tensor] = {}
        self._mel_banks: dict[torch.device, torch.Tensor] = {}

    def linear(self, wav: torch.Tensor) -> torch.Tensor:
        """Magnitude spectrogram ``[..., n_fft//2+1, samples//hop]`` of ``[T]`` or ``[B, T]``."""
        cfg = self.config
        with torch.autocast(device_type=wav.device.type, enabled=False):
            batch = wav.float().reshape(-1, wav.shape[-1])
            pad = (cfg.n_fft - cfg.hop_length) // 2
            if batch.shape[-1] <= pad:
                raise ValueError(
                    f"audio of {batch.shape[-1]} samples is too short for a spectrogram with n_fft {cfg.n_fft} "
                    f"and hop {cfg.hop_length}; it needs more than {pad} samples"
                )
            padded = F.pad(batch.unsqueeze(1), (pad, pad), mode="reflect").squeeze(1)
            stft = torch.stft(
                padded,
                cfg.n_fft,
                hop_length=cfg.hop_length,
                win_length=cfg.win_length,
                window=self._window(wav.device),
                center=False,
                normalized=False,
                onesided=True,
                return_complex=True,
            )
            magnitude = torch.sqrt(stft.real.pow(2) + stft.imag.pow(2) + 1e-6)
        return magnitude.reshape(*wav.shape[:-1], *magnitude.shape[-2:])

    def spec_to_mel(self, spec: torch.Tensor) -> torch.Tensor:
        """Log-mel ``[..., n_mels, frames]`` from a linear spectrogram."""
        with torch.autocast(device_type=spec.device.type, enabled=False):
            mel = torch.matmul(self._mel_bank(spec.device), spec.float())
            return torch.log(torch.clamp(mel, min=1e-5))

    def mel(self, wav: torch.Tensor) -> torch.Tensor:
        """Log-mel spectrogram ``[..., n_mels, samples//hop]`` of ``[T]`` or ``[B, T]``."""
        return self.spec_to_mel(self.linear(wav))

    def _window(self, device: torch.device) -> torch.Tensor:
        if device not in self._windows:
            self._windows[device] = torch.hann_window(self.config.win_length, dtype=torch.float32, device=device)
        return self._windows[device]

    def _mel_bank(self, device: torch.device) -> torch.Tensor:
        if device not in self._mel_banks:
            from transformers.audio_utils import mel_filter_bank  # transformers: 0.7 s to import; only mel needs it

            cfg = self.config
            bank = mel_filter_bank(
                num_frequency_bins=cfg.n_freqs,
                num_mel_filters=cfg.n_mels,
                min_frequency=cfg.f_min,
                max_frequency=cfg.f_max if cfg.f_max is not None else cfg.sample_rate / 2,
                sampling_rate=cfg.sample_rate,
                norm="slaney",
                mel_scale="slaney",
            )
            self._mel_banks[device] = torch.from_numpy(bank.T.copy()).to(device=device, dtype=torch.float32)
        return self._mel_banks[device]


def linear_spectrogram(wav: torch.Tensor, config: SpectrogramConfig) -> torch.Tensor:
    """One-off :meth:`Spectrogram.linear`."""
    return Spectrogram(config).linear(wav)


def mel_spectrogram(wav: torch.Tensor, config: SpectrogramConfig) -> torch.Tensor:
    """One-off :meth:`Spectrogram.mel`."""
    return Spectrogram(config).mel(wav)


def spec_to_mel(spec: torch.Tensor, config: SpectrogramConfig) -> torch.Tensor:
    """One-off :meth:`Spectrogram.spec_to_mel`."""
    return Spectrogram(config).spec_to_mel(spec)
