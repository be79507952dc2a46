"""The parts of Chatterbox that stay frozen while T3 trains: the speech tokenizer and the speaker encoder.

T3 learns from speech tokens (S3Tokenizer, CosyVoice's v2: 6561 codes, 25 per second of 16 kHz
audio) and is conditioned on a speaker embedding (the VoiceEncoder's 256 numbers, unit length).
Both are made once per clip into the token cache (:mod:`fintts.tts.chatterbox.cache`), so a
session trains with neither in memory.

:class:`ReleasedParts` are the real ones, run through the ``chatterbox`` package (chatterbox-light
or chatterbox-tts) from a folder holding the release's ``s3gen.pt`` and ``ve.pt``: that package
needs torchaudio and librosa, which fintts keeps out of what it imports (Kaggle's image has a
matching torch and torchaudio; a CPU-only torch beside the registry's torchaudio fails to load it),
so it is imported only here and only when a run names a release. :class:`RandomParts` stand in
for them with fixed random projections of the audio (``weights: random``): a tiny run on a CPU,
the tests and the GPU check exercise everything around them without the release.

S3Gen also turns speech tokens into 24 kHz audio: the validation's samples (:meth:`ReleasedParts.waveform`; the
stand-in's :meth:`RandomParts.waveform` is a tone per token, so the whole path runs on a CPU without the release).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from pathlib import Path

import torch
from torch import Tensor

from fintts.errors import ConfigError

SAMPLE_RATE = 16_000
TOKENS_PER_SECOND = 25
SPEECH_CODES = 6561
SPEAKER_SIZE = 256
#: S3Gen's output rate (upstream's ``S3GEN_SR``)
DECODER_RATE = 24_000
#: the release's frozen files, copied into an exported folder beside the trained T3
FROZEN_FILES = ("ve.pt", "s3gen.pt")


class RandomParts:
    """Deterministic stand-ins: each 40 ms frame's log band energies through a fixed random projection (argmax: its token;
    averaged and normalised: the speaker embedding). Not speech tokens; they only have the real ones' shapes and rates."""

    fingerprint = "random-parts-v1"

    def __init__(self, codes: int = SPEECH_CODES, speaker_size: int = SPEAKER_SIZE, bands: int = 32):
        generator = torch.Generator().manual_seed(0)
        self.bands = bands
        self.token_projection = torch.randn(bands, codes, generator=generator)
        self.speaker_projection = torch.randn(bands, speaker_size, generator=generator)

    def _frames(self, wav: Tensor) -> Tensor:
        hop = SAMPLE_RATE // TOKENS_PER_SECOND
        frames = wav[: len(wav) // hop * hop].view(-1, hop)
        power = torch.fft.rfft(frames).abs().square()
        bands = torch.stack([band.sum(-1) for band in power.tensor_split(self.bands, dim=-1)], dim=-1)
        return torch.log(bands + 1e-6)

    def speech_tokens(self, wav: Tensor) -> Tensor:
        return (self._frames(wav) @ self.token_projection).argmax(-1)

    def speaker_embedding(self, wav: Tensor) -> Tensor:
        embedding = (self._frames(wav) @ self.speaker_projection).mean(0)
        return embedding / embedding.norm()

    def decoder_conditioning(self, wav24k: Tensor) -> dict[str, Tensor]:
        """The stand-in decoder needs no reference."""
        return {}

    @contextlib.contextmanager
    def on(self, device: torch.device) -> Iterator[RandomParts]:
        """As :meth:`ReleasedParts.on`; the stand-in runs on the CPU wherever T3 is."""
        yield self

    def waveform(self, tokens: Tensor, reference: dict[str, Tensor]) -> Tensor:
        """The random-weights stand-in for S3Gen, not speech: 40 ms of a tone per speech token (its pitch from the
        token's id), at S3Gen's rate, so a ``weights: random`` run's validation writes samples the way a release's does."""
        hop = DECODER_RATE // TOKENS_PER_SECOND
        pitch = 100.0 + (tokens.cpu() % 80).float() * 10.0
        return 0.3 * torch.sin(2 * torch.pi * pitch[:, None] * torch.arange(hop)[None] / DECODER_RATE).flatten()


class ReleasedParts:
    """Chatterbox's S3Tokenizer (inside ``s3gen.pt``) and VoiceEncoder (``ve.pt``), through the ``chatterbox`` package."""

    def __init__(self, folder: Path, device: torch.device):
        try:  # chatterbox-light and chatterbox-tts install the same import name
            from chatterbox.models.s3gen import S3Gen
            from chatterbox.models.voice_encoder import VoiceEncoder
        except ImportError as err:
            raise ConfigError(f"weights: {folder} is a Chatterbox release, whose speech tokenizer and speaker encoder run "
                             f"through the chatterbox package ({err}); pip install chatterbox-light (fintts[chatterbox]) where torch "
                             "and torchaudio match (Kaggle's image), or use weights: random for a dry run") from err
        self.folder, self.device = Path(folder), device
        self.s3gen = S3Gen()
        self.s3gen.load_state_dict(torch.load(self.folder / "s3gen.pt", map_location="cpu", weights_only=True))
        self.s3gen.to(device).eval()
        self.ve = VoiceEncoder()
        self.ve.load_state_dict(torch.load(self.folder / "ve.pt", map_location="cpu", weights_only=True))
        self.ve.to(device).eval()
        self.fingerprint = files_fingerprint(self.folder, FROZEN_FILES)

    @torch.inference_mode()
    def speech_tokens(self, wav: Tensor) -> Tensor:
        tokens, _ = self.s3gen.tokenizer.forward([wav.numpy()])  # as upstream's prepare_conditionals calls it
        return tokens.reshape(-1).cpu()

    @torch.inference_mode()
    def speaker_embedding(self, wav: Tensor) -> Tensor:
        embeds = self.ve.embeds_from_wavs([wav.numpy()], sample_rate=SAMPLE_RATE)
        return torch.from_numpy(embeds).mean(0).float()

    @torch.inference_mode()
    def decoder_conditioning(self, wav24k: Tensor) -> dict[str, Tensor]:
        """S3Gen's reference (``Conditionals.gen``) for a clip at 24 kHz, its first 10 s as upstream takes."""
        reference = self.s3gen.embed_ref(wav24k[: 10 * 24_000].numpy(), 24_000, device=self.device)
        return {key: value.cpu() if torch.is_tensor(value) else value for key, value in reference.items()}

    @contextlib.contextmanager
    def on(self, device: torch.device) -> Iterator[ReleasedParts]:
        """S3Gen on ``device`` for a block (a validation's samples), back where it was after: its gigabyte is not held on
        the GPU beside training between validations."""
        home = self.device
        self.s3gen.to(device)
        self.device = device
        try:
            yield self
        finally:
            self.s3gen.to(home)
            self.device = home

    @torch.inference_mode()
    def waveform(self, tokens: Tensor, reference: dict[str, Tensor]) -> Tensor:
        """24 kHz audio of speech tokens in the voice of ``reference`` (:meth:`decoder_conditioning`), as upstream's
        ``ChatterboxMultilingualTTS.generate`` calls S3Gen (resemble-ai/chatterbox, src/chatterbox/mtl_tts.py:
        ``self.s3gen.inference(speech_tokens=..., ref_dict=self.conds.gen)``, the ids S3Gen lacks, >= 6561, dropped first)."""
        gen = {key: value.to(self.device) if torch.is_tensor(value) else value for key, value in reference.items()}
        wav, _ = self.s3gen.inference(speech_tokens=tokens.to(self.device), ref_dict=gen)
        return wav.squeeze(0).float().cpu()


def files_fingerprint(folder: Path, names: tuple[str, ...] | list[str]) -> str:
    """sha256 over the named files' bytes (a gigabyte hashes in a few seconds, once per session)."""
    digest = hashlib.sha256()
    for name in names:
        digest.update(name.encode())
        with open(folder / name, "rb") as file:
            while block := file.read(1 << 22):
                digest.update(block)
    return digest.hexdigest()
