"""A VITS run's settings (``task:`` in a config), in a module of their own.

Kept apart from :mod:`fintts.tts.vits.task` so that what reads the settings without training
(the corpus selection, the held-out scoring) imports them and not the task that imports it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fintts.train.config import ConfigError, free_setting
from fintts.tts.corpus import FORMATS
from fintts.tts.corpus.model import NAMED_FIELDS, option_problems
from fintts.tts.vits.card import check_license
from fintts.tts.vits.generator import check_blocks
from fintts.tts.vits.init import check_model_settings
from fintts.tts.vits.lora import LoraSettings
from fintts.tts.vits.losses import LossWeights
from fintts.tts.vits.mms_discriminator import AUTO
from fintts.tts.vits.mms_discriminator import check_setting as check_discriminator_setting

#: sentence punctuation the front end otherwise turns into word breaks
#: The generator's name among the task's models: its checkpoint file (``model.safetensors``: run/checkpoint.weights_file) is named
#: as a voice folder's weights (voice_format.WEIGHTS_FILE), so ``init`` takes a checkpoint or a voice folder alike.
GENERATOR = "model"
PUNCTUATION_MARKS = ".,;:!?"

DEFAULT_SENTENCES = [
    "Hyvää huomenta, tänään on kaunis päivä.",
    "Kello on 7.30 ja juna lähtee laiturilta kolme.",
    "Suomen kieli on kaunis ja vanha kieli.",
]


@dataclasses.dataclass
class VitsTaskConfig:
    #: the corpus folder (any layout ``fintts check`` knows), or ``demo`` for the embedded one. Not part of the
    #: run's settings fingerprint: the corpus is compared by its clips (``data_fingerprint``), so it may move.
    data: str = free_setting("demo")
    #: force a corpus layout (ljspeech, ljspeech-speaker, pairs, speakers, css10, commonvoice, audiofolder, kaldi,
    #: hub); empty: detect. ``data: hf://datasets/USER/NAME`` is a Hub dataset, downloaded into the run's cache.
    format: str = ""
    #: Common Voice's table (validated by default), an audiofolder's or Hub dataset's split (train by default).
    #: Like ``data``, not fingerprinted as a setting: the clips it selects are (``data_fingerprint``).
    split: str = free_setting("")
    #: columns of an audiofolder CSV or a Hub dataset, when not the usual names (transcription|text|sentence,
    #: speaker_id|speaker, audio); empty: the usual ones.
    text_column: str = free_setting("")
    speaker_column: str = free_setting("")
    audio_column: str = free_setting("")
    #: the model's speakers (empty: all of the corpus's); each gets a speaker embedding.
    speakers: list[str] = dataclasses.field(default_factory=list)
    #: train and validate on this one of them only (its clips, its held-out set); ``best``: the one with the
    #: most usable minutes (``fintts speakers``), recorded when the run (or its phase) starts. The model keeps
    #: every speaker's embedding, so a phase on one speaker adapts that voice of a shared multi-speaker base.
    #: Empty: all of ``speakers``.
    speaker: str = ""
    #: ``facebook/mms-tts-fin`` (or a Hub id in the local cache), a save_pretrained folder, a fintts
    #: run or checkpoint folder, or ``scratch``.
    init: str = "facebook/mms-tts-fin"
    #: VitsConfig fields: the whole architecture for ``scratch``, shape-neutral ones otherwise.
    model: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: where the discriminator starts: ``auto`` fetches MMS's own for an MMS ``init`` (facebook/mms-tts: full_models/
    #: LANG/D_100000.pth, once per run; fresh for any other init, and with a warning when it cannot be had), a file
    #: (an original ``D_*.pth`` or converted ``.safetensors``), or empty: fresh. An ``init`` checkpoint's own
    #: discriminator wins over ``auto`` and empty (see :mod:`fintts.tts.vits.mms_discriminator`).
    discriminator: str = AUTO
    #: DiscriminatorConfig fields (the defaults are VITS/MMS's sizes; smaller for CPU demos).
    discriminator_config: dict[str, Any] = dataclasses.field(default_factory=dict)
    lr: float = 2e-4
    betas: list[float] = dataclasses.field(default_factory=lambda: [0.8, 0.99])
    eps: float = 1e-9
    weight_decay: float = 0.01
    #: clip each group's gradient norm (0: off). Guards fp16 fine-tunes against rare spikes.
    clip_grad_norm: float = 0.0
    #: with ``init: scratch``, punctuation that gets a token of its own (e.g. ``",.!?"``) instead of
    #: becoming a word break: speakers (and espeak-ng) pause there, and a model that never sees the
    #: mark cannot learn where the pauses go. A pretrained init must already have these characters.
    punctuation_tokens: str = ""
    #: frames decoded per item per step (VITS: 32, i.e. 8192 samples at hop 256).
    segment_frames: int = 32
    loss: LossWeights = dataclasses.field(default_factory=LossWeights)
    #: the step at which the GAN starts: before it the generator learns from the mel, KL and duration
    #: terms alone and the discriminator is neither run nor trained (Parallel WaveGAN starts its
    #: discriminator late the same way, Yamamoto et al. 2020). From scratch, while the text-to-sound
    #: alignment forms, such steps are cheaper and the voice per step about the same (configs/demo.yaml
    #: gives the measurement); 0: VITS, a GAN from step 1.
    #: Counted in the generator optimizer's updates, which a run in phases starts afresh in each phase:
    #: a later phase that should train as a GAN from its start sets ``gan_start_step: 0`` (configs/demo-lora.yaml).
    gan_start_step: int = 0
    min_seconds: float = 0.5
    max_seconds: float = 20.0
    #: clips held out of training for validation per speaker, when the corpus has no heldout.csv: this many,
    #: but never more than a tenth of the speaker's clips (at least 2, none for a speaker of 4 clips or fewer).
    #: Why 24: ``val/identified`` is a share of hits, whose noise is at most 0.5/sqrt(n): ±0.10 at 24 clips
    #: (±0.35 at 2, a coin flip), so a change of 0.2-0.3 between validations is the voice, not the draw; the
    #: mean MCD's noise falls with sqrt(n) too (2.4x less than 4 clips, 3.5x less than 2), enough that early
    #: stopping follows the voice. 24 clips of 5-8 s are 2-3 minutes, 2% of a two-hour corpus (~1,200 clips).
    #: Scoring them (each against up to 8 recordings: fintts.tts.vits.heldout.CANDIDATES) took 13 s of CPU for
    #: 24 clips of 5-8 s on a shared, loaded 2-core machine, besides synthesising them.
    heldout_per_speaker: int = 24
    #: gradient checkpointing: blocks (text_encoder, posterior_encoder, flow, decoder) whose activations
    #: are recomputed in the backward pass instead of kept: less memory, same gradients, slower steps.
    checkpointing: list[str] = free_setting(default_factory=list, speed=True)
    eval_sentences: list[str] = free_setting(default_factory=lambda: list(DEFAULT_SENTENCES))
    #: how many speakers say the eval sentences, and how many held-out clips are scored
    #: (``val/mcd``, and ``val/identified``: each clip's text told apart from the others of its speaker).
    eval_speakers: int = free_setting(2)
    #: 24: every held-out clip of one speaker (see ``heldout_per_speaker``), spread round-robin over several.
    mcd_items: int = free_setting(24)
    #: a LoRA adapter on the generator (``r`` > 0; see :mod:`fintts.tts.vits.lora`): the generator is frozen
    #: but for the adapter, the discriminator trains in full. The adapter is one voice's: with several speakers
    #: set ``speaker``. Checkpoints and ``model/adapters/<speaker>/`` keep it in peft's layout.
    lora: LoraSettings = dataclasses.field(default_factory=LoraSettings)
    #: write model.onnx and model.int8.onnx with each exported voice, so a laptop without torch can
    #: speak it. They take 5-10 s for the demo voice and 25-75 s for an MMS-sized one on a shared
    #: 2-core CPU, made in the background while training goes on (see fintts.train.session.background_export).
    export_onnx: bool = free_setting(True)
    #: the voice's licence on its cards (an SPDX-style id the Hub knows, e.g. apache-2.0, cc-by-4.0, mit); empty:
    #: apache-2.0. A voice fine-tuned from MMS inherits cc-by-nc-4.0, whatever this says (another value is refused).
    license: str = free_setting("")

    def __post_init__(self) -> None:
        check_blocks(self.checkpointing)  # a typo fails when the config loads, not after the corpus check
        check_discriminator_setting(self.discriminator)
        check_model_settings(self.model)
        check_license(self.init, self.license)
        if self.format and self.format not in FORMATS:
            raise ConfigError(f"format: {self.format!r} is not a corpus layout; use one of {', '.join(FORMATS)} (or leave it empty)")
        problems = option_problems({field: getattr(self, field) for field in NAMED_FIELDS})
        if problems:
            raise ConfigError("; ".join(problems))
