"""A trained VITS voice on a laptop: Finnish text in, audio out, on the CPU.

:func:`load_vits_voice` opens the ``model/`` folder fintts exports (transformers
``save_pretrained`` layout, tokenizer files, ``speakers.json`` and the ONNX graphs); finding it
(a run folder, a Hub repo) is :func:`fintts.tts.voice.load_voice`'s, for every family. The
same folder also works with plain ``transformers.VitsModel`` and
``pipeline("text-to-speech")``; fintts adds the Finnish front end (numbers, dates,
abbreviations) and speaks long text sentence by sentence.

Two backends run the network. ``onnx`` (onnxruntime; no torch anywhere) is the laptop
default; ``torch`` runs the transformers model. This module imports neither: onnxruntime
is imported when an ONNX voice opens, torch only for a torch voice, so ``import fintts``
and an ONNX voice stay light. File names and :class:`VoiceError` live in
:mod:`fintts.tts.voice_format`, shared with the download, the backends and the exporters.

Randomness: VITS samples durations and the latent prior. The noise is drawn here, with
numpy, and handed to the backend, so a ``seed`` makes a voice repeat itself and gives the
same speech on both backends. Each sentence draws from its own generator split off the
call's, so a sentence sounds the same whatever the sentences around it are.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

import numpy as np

from fintts.tts.onnx_backend import OnnxBackend
from fintts.tts.streamed_voice import StreamedVoice
from fintts.tts.text import FinnishText, split_sentences
from fintts.tts.voice_format import (
    ADAPTERS_DIR,
    BACKENDS,
    FRAMES_PER_TOKEN,
    ONNX_FILE,
    ONNX_INT8_FILE,
    SPEAKERS_FILE,
    VoiceError,
    installed,
)

log = logging.getLogger(__name__)

#: Silence after a chunk, in seconds at speed 1, by what ended it (see :class:`~fintts.tts.text.Chunk`).
PAUSES = {"sentence": 0.4, "paragraph": 0.8, "clause": 0.2, "end": 0.0}


@dataclasses.dataclass(frozen=True)
class VoiceConfig:
    """What a voice needs from ``config.json`` (a ``VitsConfig``), read without transformers."""

    sampling_rate: int
    num_speakers: int
    flow_size: int
    noise_scale: float
    noise_scale_duration: float
    speaking_rate: float

    @classmethod
    def from_dict(cls, config: dict) -> VoiceConfig:
        defaults = {"num_speakers": 1, "noise_scale": 0.667, "noise_scale_duration": 0.8, "speaking_rate": 1.0}
        values = {**defaults, **{f.name: config[f.name] for f in dataclasses.fields(cls) if f.name in config}}
        missing = [f.name for f in dataclasses.fields(cls) if f.name not in values]
        if missing:
            raise VoiceError(f"config.json lacks {', '.join(missing)}: not a VITS voice")
        return cls(**values)

    @classmethod
    def read(cls, folder: Path) -> VoiceConfig:
        try:
            config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        except ValueError as err:
            raise VoiceError(f"{folder / 'config.json'} is not valid JSON ({err}); export or pull the voice again") from None
        if config.get("model_type") not in (None, "vits"):
            raise VoiceError(f"{folder} holds a {config['model_type']!r} model, not a VITS voice")
        return cls.from_dict(config)


class Backend(Protocol):
    """Runs the network for one chunk: ids and scaled noise in, ``(waveform, frames)`` out."""

    name: str

    def __call__(
        self, ids: np.ndarray, duration_noise: np.ndarray, prior_noise: np.ndarray, length_scale: float, speaker: int | None
    ) -> tuple[np.ndarray, int]: ...


class VitsVoice(StreamedVoice):
    """Says Finnish text: :meth:`synthesize`, :meth:`save`, :meth:`stream`.

    ``speaker`` (name or index) is the default of a multi-speaker voice (else its first);
    ``speed`` the speaking rate (1 = the voice's own; 1.25 is a quarter faster, pauses
    too); ``noise`` and ``noise_duration`` VITS's sampling temperatures of the sound and
    of the rhythm (default: the voice's config, 0.667 and 0.8 for MMS); ``seed`` makes
    every call with the same text give the same audio (``None``: new each call).
    """

    def __init__(
        self, backend: Backend, config: VoiceConfig, text: FinnishText, speakers: list[str] | None = None, *,
        speaker: str | int | None = None, speed: float | None = None, noise: float | None = None,
        noise_duration: float | None = None, seed: int | None = None,
    ):
        self.backend, self.config, self.text = backend, config, text
        self.speakers = list(speakers or [])
        self.speed = config.speaking_rate if speed is None else float(speed)
        if not self.speed > 0:
            raise VoiceError(f"speed must be above 0 (1 is the voice's own pace), not {speed}")
        self.noise = config.noise_scale if noise is None else float(noise)
        self.noise_duration = config.noise_scale_duration if noise_duration is None else float(noise_duration)
        self.seed = seed
        self.speaker = self._speaker_row(speaker)

    @property
    def sample_rate(self) -> int:
        return self.config.sampling_rate

    @property
    def backend_name(self) -> str:
        return self.backend.name

    def speaker_index(self, speaker: str | int | None) -> int | None:
        """The embedding row of ``speaker`` (a name from ``speakers.json`` or an index; ``None``: the voice's default)."""
        return self.speaker if speaker is None else self._speaker_row(speaker)

    def _speaker_row(self, speaker: str | int | None) -> int | None:
        if self.config.num_speakers <= 1:
            if speaker not in (None, 0, "0", *self.speakers[:1]):
                raise VoiceError(f"this voice has one speaker; leave out speaker={speaker!r}")
            return None
        if speaker is None:
            return 0
        if isinstance(speaker, int) or str(speaker).isdigit():
            index = int(speaker)
        elif speaker in self.speakers:
            index = self.speakers.index(speaker)
        else:
            raise VoiceError(f"unknown speaker {speaker!r}; this voice has: {', '.join(self.speakers) or 'numbered speakers'}")
        if not 0 <= index < self.config.num_speakers:
            raise VoiceError(f"speaker {index} is out of range (0..{self.config.num_speakers - 1})")
        return index

    def unknown_chars(self, text: str) -> set[str]:
        """Characters of ``text`` this voice cannot say (they are left out)."""
        return self.text.unknown_chars(text)

    def stream(self, text: str, *, speaker: str | int | None = None,
               warn: Callable[[str], None] | None = log.warning) -> Iterator[np.ndarray]:
        """Float32 audio one chunk at a time: each sentence followed by its pause.

        Sentences are synthesised only as the iteration asks for them, so the first
        audio is ready after one sentence and memory does not grow with the text.
        Characters the voice cannot say are reported once, through ``warn``.
        """
        chunks = split_sentences(text)
        unknown = self.unknown_chars(text)
        if unknown and warn is not None:
            warn(f"left out characters this voice cannot say: {', '.join(repr(c) for c in sorted(unknown))}")
        spoken = [(chunk, self.text.encode(chunk.text) if self.text.normalize(chunk.text) else []) for chunk in chunks]
        if not any(ids for _, ids in spoken):
            raise VoiceError(f"nothing to say: {text[:80]!r} has no words this voice can say")
        index = self.speaker_index(speaker)
        generators = np.random.default_rng(self.seed).spawn(len(spoken))
        for (chunk, ids), rng in zip(spoken, generators):
            audio = self._say(ids, index, rng) if ids else np.zeros(0, np.float32)
            pause = np.zeros(round(PAUSES[chunk.boundary] / self.speed * self.sample_rate), np.float32)
            yield np.concatenate([audio, pause])

    def _say(self, ids: list[int], speaker: int | None, rng: np.random.Generator) -> np.ndarray:
        length_scale = 1.0 / self.speed
        duration_noise = rng.standard_normal((1, 2, len(ids)), dtype=np.float32) * np.float32(self.noise_duration)
        # drawn frame by frame: the first columns are the same however many are drawn
        prior = rng.standard_normal((math.ceil(len(ids) * FRAMES_PER_TOKEN * length_scale) + 16, self.config.flow_size), dtype=np.float32)
        ids_array = np.asarray(ids, dtype=np.int64)
        while True:
            prior_noise = np.ascontiguousarray(prior.T[None]) * np.float32(self.noise)
            waveform, frames = self.backend(ids_array, duration_noise, prior_noise, length_scale, speaker)
            if frames <= len(prior):
                return np.clip(waveform, -1.0, 1.0).astype(np.float32, copy=False)
            more = rng.standard_normal((frames - len(prior), self.config.flow_size), dtype=np.float32)
            prior = np.concatenate([prior, more])


def load_vits_voice(
    folder: Path, speaker: str | int | None = None, *, backend: str | None = None, int8: bool | None = None,
    speed: float | None = None, noise: float | None = None, noise_duration: float | None = None, seed: int | None = None,
    threads: int | None = None,
) -> VitsVoice:
    """Open the VITS voice in ``folder`` (what :func:`fintts.tts.voice.load_voice` found for it).

    ``backend``: ``"onnx"`` (onnxruntime; the default when the voice has ``model.onnx``
    and onnxruntime is installed) or ``"torch"`` (needs ``pip install fintts[torch]``).
    ``int8``: with ONNX, use ``model.int8.onnx`` (the default when the voice has it) or the
    float32 ``model.onnx``. ``threads``: CPU threads for onnxruntime (default: every core
    this process may use). The other settings are :class:`VitsVoice`'s.

    A ``speaker`` with an adapter in the folder (``adapters/<speaker>/``, a run's LoRA
    phase) speaks with the base and that adapter on it, on the torch backend (the ONNX
    graphs are the base's; ``fintts merge`` makes the adapted voice a folder of its own).
    """
    config = VoiceConfig.read(folder)
    text = FinnishText.from_folder(folder)
    speakers = json.loads((folder / SPEAKERS_FILE).read_text(encoding="utf-8")) if (folder / SPEAKERS_FILE).is_file() else []
    adapter = folder / ADAPTERS_DIR / str(speaker) if speaker is not None else None
    if adapter is not None and (adapter / "adapter_config.json").is_file():
        if backend == "onnx":
            raise VoiceError(f"{speaker!r} is a LoRA adapter ({adapter}), which only backend torch puts on the base; "
                             f"or run `fintts merge {folder} --speaker {speaker} --out DIR` and speak DIR with ONNX")
        engine = _backend(folder, "torch", None, threads, adapter)
    else:
        engine = _backend(folder, backend, int8, threads)
    return VitsVoice(engine, config, text, speakers, speaker=speaker, speed=speed, noise=noise, noise_duration=noise_duration, seed=seed)



def _backend(folder: Path, backend: str | None, int8: bool | None, threads: int | None, adapter: Path | None = None) -> Backend:
    if backend not in (None, *BACKENDS):
        raise VoiceError(f"backend {backend!r}: use one of {', '.join(BACKENDS)}")
    graph = folder / ONNX_INT8_FILE if int8 is not False and (folder / ONNX_INT8_FILE).is_file() else folder / ONNX_FILE
    if int8 and not (folder / ONNX_INT8_FILE).is_file():
        raise VoiceError(f"{folder} has no {ONNX_INT8_FILE}; export it with `fintts export --onnx --voice {folder}`")
    if backend is None:
        backend = "onnx" if graph.is_file() and installed("onnxruntime") else "torch"
    if backend == "onnx":
        if not graph.is_file():
            raise VoiceError(f"{folder} has no {ONNX_FILE}; make it with `fintts export --onnx --voice {folder}` "
                             "(needs fintts[torch]) or speak with backend torch")
        if not installed("onnxruntime"):
            raise VoiceError("onnxruntime is not installed: pip install onnxruntime (or use backend torch)")
        return OnnxBackend(graph, threads=threads)
    if not (installed("torch") and installed("transformers")):
        reason = "backend torch needs torch" if graph.is_file() else f"{folder} has no {ONNX_FILE} and this needs torch"
        raise VoiceError(f"{reason}, which the base install leaves out: pip install 'fintts[torch]'"
                         + ("" if graph.is_file() else ", or export the voice's ONNX graphs where torch is"))
    from fintts.tts.vits.torch_backend import TorchBackend  # needs torch, which the base install leaves out

    return TorchBackend.load(folder, adapter)
