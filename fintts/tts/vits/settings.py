"""A VITS run's settings (``task:`` in a config) and their checks, in a module that imports no torch.

A config is read where nothing trains: the corpus selection, the held-out scoring, and a laptop
without torch that checks a config before ``fintts kaggle push`` sends it to a session
(``fintts.task_settings`` in pyproject.toml names this dataclass, so loading a config imports
this module and not the task's). What the settings need of the models — the blocks that can be
recomputed, the loss weights, the LoRA targets, the discriminator's sources — is defined here
for that reason, and the modules that train import it from here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from fintts.train.config import ConfigError, free_setting
from fintts.tts.corpus.settings import CorpusSettings
from fintts.tts.lora_settings import LoraSettings
from fintts.tts.vits.card import check_license

if TYPE_CHECKING:  # in annotations only: this module imports no torch (the docstring says why)
    from torch import Tensor

#: The generator's name among the task's models: its checkpoint file (``model.safetensors``: run/checkpoint.weights_file) is named
#: as a voice folder's weights (voice_format.WEIGHTS_FILE), so ``init`` takes a checkpoint or a voice folder alike.
GENERATOR = "model"
#: sentence punctuation the front end otherwise turns into word breaks
PUNCTUATION_MARKS = ".,;:!?"

#: The blocks whose activations :func:`fintts.tts.vits.generator.train_forward` can recompute in the backward pass
#: instead of storing them (gradient checkpointing): less memory for one more forward of each.
CHECKPOINTABLE_BLOCKS = ("text_encoder", "posterior_encoder", "flow", "decoder")
#: ``discriminator: auto``: MMS's own for an MMS init (:mod:`fintts.tts.vits.mms_discriminator`), else a fresh one.
AUTO = "auto"
#: a file a ``discriminator:`` path may name: an original checkpoint, or converted weights
PATH_SUFFIXES = (".pth", ".pt", ".ckpt", ".safetensors")
#: LoRA's default targets (:mod:`fintts.tts.vits.lora` says why these): the text encoder's attention projections, the
#: flow's convolutions, the decoder's.
DEFAULT_TARGETS = (
    r"text_encoder\.encoder\.layers\.\d+\.attention\.(q_proj|k_proj|v_proj|out_proj)",
    r"flow\.flows\.\d+\.(conv_pre|conv_post|wavenet\.(in_layers|res_skip_layers)\.\d+)",
    r"decoder\.(conv_pre|conv_post|resblocks\.\d+\.convs[12]\.\d+)",
)

DEFAULT_SENTENCES = [
    "Hyvää huomenta, tänään on kaunis päivä.",
    "Kello on 7.30 ja juna lähtee laiturilta kolme.",
    "Suomen kieli on kaunis ja vanha kieli.",
]


def check_blocks(blocks: Collection[str]) -> frozenset[str]:
    """``blocks`` as a set, or a ConfigError naming the unknown ones and the valid ones."""
    unknown = sorted(set(blocks) - set(CHECKPOINTABLE_BLOCKS))
    if unknown:
        raise ConfigError(f"checkpointing: unknown block(s) {', '.join(unknown)}; choose from {', '.join(CHECKPOINTABLE_BLOCKS)}")
    return frozenset(blocks)


def check_model_settings(settings: Mapping[str, Any]) -> None:
    """Refuse, when the config loads, VitsConfig fields that training cannot honour.

    LayerDrop skips text-encoder layers at random in each process, so with two GPUs the
    processes' gradients cover different parameters: DDP's all-reduce then fails or waits
    for ever, hours into a session. It is off for training anyway (:mod:`fintts.tts.vits.init`).
    """
    layerdrop = settings.get("layerdrop") or 0.0
    if float(layerdrop) > 0:
        raise ValueError(
            f"model.layerdrop: {layerdrop} is refused: LayerDrop drops text-encoder layers at random in each process, "
            "so with several GPUs (DDP) their gradients cover different parameters and the gradient all-reduce fails "
            "or hangs; MMS was trained without it. Remove model.layerdrop (or set it to 0)"
        )


def check_discriminator_setting(value: str) -> None:
    """Refuse, when the config loads, a ``discriminator`` that is neither ``auto``, empty nor a weights file.

    A path is not checked for existence here: the config is also read where the file is not
    (``fintts plan`` on a laptop for a Kaggle session's ``/kaggle/input/...``).
    """
    if value in ("", AUTO) or value.lower().endswith(PATH_SUFFIXES):
        return
    raise ConfigError(
        f"discriminator: {value!r} is not one of: auto (MMS's own for an MMS init, else a fresh one), \"\" (a fresh one, or "
        f"the init checkpoint's), or a weights file ({', '.join(PATH_SUFFIXES)}: an original D_*.pth or converted safetensors)"
    )


@dataclasses.dataclass(frozen=True)
class LossWeights:
    """How the generator's loss terms add up (VITS eq. 11 with the original's weights; the terms: :mod:`fintts.tts.vits.losses`).

    ``mel`` is the paper's λ_recon = 45; feature matching is weighted 2 because the
    original code multiplies it by 2 inside ``feature_loss`` (here the term itself is
    unscaled and the factor lives here).
    """

    mel: float = 45.0
    kl: float = 1.0
    duration: float = 1.0
    feature_matching: float = 2.0
    adversarial: float = 1.0

    def combine(self, terms: Mapping[str, Tensor]) -> Tensor:
        """Weighted sum of ``terms`` keyed by this dataclass's field names (all must be present)."""
        return sum(getattr(self, field.name) * terms[field.name] for field in dataclasses.fields(self))


@dataclasses.dataclass
class VitsLora(LoraSettings):
    """``lora:`` in a VITS config: the shared fields (:class:`~fintts.tts.lora_settings.LoraSettings`), with VITS's targets."""

    alpha: float = 16.0
    #: regular expressions, each matching whole module names of ``VitsModel``.
    targets: list[str] = dataclasses.field(default_factory=lambda: list(DEFAULT_TARGETS))


@dataclasses.dataclass
class VitsTaskConfig(CorpusSettings):
    """A VITS run's settings: the corpus's (:class:`~fintts.tts.corpus.settings.CorpusSettings`, the same keys in every
    family) and the model's, the optimizer's and the validation's below."""

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
    lora: VitsLora = dataclasses.field(default_factory=VitsLora)
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
        super().__post_init__()

    @classmethod
    def check_phases(cls, configs: list[VitsTaskConfig]) -> None:
        """Refuse a run whose adapter phase is not its last (called with each phase's settings when a config loads)."""
        for index, before in enumerate(configs[:-1], 1):
            if before.lora.r:
                raise ConfigError(f"phases[{index}] follows an adapter phase; a run ends with its adapter phase: to adapt "
                                  "another speaker on the same base, start a run with init: the checkpoint that ended "
                                  "the full phase (it is kept), or merge the adapter (fintts merge) and init from that")
