"""Content-addressed cache of resampled audio and linear spectrograms.

Decoding, resampling and STFT of every clip costs more than a training step on a small
corpus, and a Kaggle session is short, so the features are computed once and kept in a
folder that can be copied between machines and sessions. An entry is named by the
SHA-256 of the audio file's bytes inside a folder named by a hash of the
:class:`~fintts.tts.spectrogram.SpectrogramConfig`: an edited clip gets a new entry, and
features made with other STFT settings are never mistaken for these. Paths play no part
in the key, so a corpus may move.

Layout: ``<root>/stft-<config hash>/config.json`` (the settings, for people) and
``<root>/stft-<config hash>/<audio sha256>.safetensors`` holding ``wav`` ``[T]`` and
``spec`` ``[n_fft//2+1, T//hop]``. Entries are written to a temporary file and renamed,
so an interrupted session never leaves a half-written entry; an unreadable entry is
recomputed.

**A cache that cannot be written never stops training.** When a write fails (a full disk,
a read-only folder), the features just computed are used as they are and the cache stops
writing for the rest of the session, with one warning for all the data loader's worker
processes together (they share the flag); features are then computed again each epoch.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import multiprocessing
import os
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from fintts.train.run.checkpoint import sha256_file
from fintts.tts.audio import Span, load_audio
from fintts.tts.spectrogram import Spectrogram, SpectrogramConfig

#: Bumped when what is stored changes meaning, so old caches are not reused.
_FORMAT_VERSION = 1


@dataclasses.dataclass(frozen=True)
class Features:
    """One clip's waveform ``[T]`` at the config's rate and its linear spectrogram."""

    wav: torch.Tensor
    spec: torch.Tensor


def config_hash(config: SpectrogramConfig) -> str:
    """Short stable hash of the settings (and cache format) features depend on."""
    settings = {"format": _FORMAT_VERSION, **dataclasses.asdict(config)}
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


class FeatureCache:
    """Serves :class:`Features` for audio files, computing each at most once per config.

    ``hits`` and ``misses`` count lookups served from disk and computed, for logs.
    Unreadable audio raises :class:`~fintts.tts.audio.AudioError` as from ``load_audio``.
    """

    def __init__(self, root: Path, cfg: SpectrogramConfig) -> None:
        self.root = Path(root)
        self.cfg = cfg
        self.folder = self.root / f"stft-{config_hash(cfg)}"
        self.hits = 0
        self.misses = 0
        self._spectrogram = Spectrogram(cfg)
        # a long recording cut into many segments is hashed once (while its size and mtime stay the same)
        self._digests: dict[tuple[Path, int, int], str] = {}
        # shared with the data loader's workers (inherited when they start), so one of them warns for all
        self._write_failed = multiprocessing.Value("b", 0)

    def get(self, audio_path: Path, span: Span | None = None) -> Features:
        """Features of ``audio_path`` (its ``span`` only, when given), from the cache when its bytes were seen before."""
        return self.lookup(audio_path, span)[1]

    def entry(self, audio_path: Path, span: Span | None = None) -> Path:
        """Where the features of ``audio_path`` (or of its ``span``) are kept (whether or not they are there yet).

        Hashing the audio is the whole cost; a training loop that reads the same clips every
        epoch keeps the entry and reads it with :meth:`load`, which computes it the first time.
        """
        stat = Path(audio_path).stat()
        key = (Path(audio_path), stat.st_size, stat.st_mtime_ns)
        if key not in self._digests:
            self._digests[key] = sha256_file(audio_path)
        digest = self._digests[key]
        if span is not None:
            digest = hashlib.sha256(f"{digest}@{span[0]!r}-{span[1]!r}".encode()).hexdigest()
        return self.folder / f"{digest}.safetensors"

    def lookup(self, audio_path: Path, span: Span | None = None) -> tuple[Path, Features]:
        """The cache entry of ``audio_path`` (or its ``span``; computed if missing) and its features."""
        entry = self.entry(audio_path, span)
        cached = self._load(entry)
        if cached is not None:
            self.hits += 1
            return entry, cached
        wav = load_audio(audio_path, self.cfg.sample_rate, span)
        features = Features(wav=wav, spec=self._spectrogram.linear(wav).contiguous())
        self._store(entry, features)
        self.misses += 1
        return entry, features

    def load(self, entry: Path, audio_path: Path, span: Span | None = None) -> Features:
        """Features of an entry :meth:`lookup` returned; recomputed from ``audio_path`` if it is gone or damaged."""
        cached = self._load(entry)
        if cached is not None:
            self.hits += 1
            return cached
        return self.get(audio_path, span)

    def _load(self, entry: Path) -> Features | None:
        if not entry.is_file():
            return None
        try:
            tensors = load_file(str(entry))
            return Features(wav=tensors["wav"], spec=tensors["spec"])
        except (SafetensorError, KeyError, OSError):
            return None

    def _store(self, entry: Path, features: Features) -> None:
        """Keep ``features`` in the cache if it can be written; a failure is warned once and never raised."""
        if self._write_failed.value:
            return
        try:
            self._write(entry, features)
        except (OSError, SafetensorError) as err:  # safetensors reports a full disk as its own error
            with self._write_failed.get_lock():
                first = not self._write_failed.value
                self._write_failed.value = 1
            if first:
                warnings.warn(
                    f"the feature cache in {self.folder} cannot be written ({err}); training goes on with the features "
                    "computed in memory, computing them again each epoch. Free space there to keep them.",
                    RuntimeWarning, stacklevel=2,
                )

    def _write(self, entry: Path, features: Features) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        description = self.folder / "config.json"
        if not description.exists():
            self._write_atomically(
                description,
                lambda tmp: Path(tmp).write_text(json.dumps(dataclasses.asdict(self.cfg), indent=2) + "\n"),
            )
        self._write_atomically(entry, lambda tmp: save_file({"wav": features.wav, "spec": features.spec}, tmp))

    def _write_atomically(self, target: Path, write: Callable[[str], object]) -> None:
        handle, tmp = tempfile.mkstemp(dir=self.folder, prefix=f".{target.name}.", suffix=".tmp")
        os.close(handle)
        try:
            write(tmp)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
