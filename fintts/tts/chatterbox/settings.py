"""A Chatterbox run's settings (``task: chatterbox`` in a config)."""

from __future__ import annotations

import dataclasses
from typing import Any

from fintts.train.config import ConfigError, free_setting
from fintts.tts.chatterbox.release import RANDOM, RELEASE_REPO, RELEASE_T3, RELEASE_T3_V3, T3_VERSIONS
from fintts.tts.corpus.settings import CorpusSettings
from fintts.tts.lora_settings import LoraSettings

#: the Llama's projections, the usual LoRA targets for a transformer (names under the T3 module)
DEFAULT_TARGETS = (r"tfmr\.layers\.\d+\.(self_attn\.(q_proj|k_proj|v_proj|o_proj)|mlp\.(gate_proj|up_proj|down_proj))",)


@dataclasses.dataclass
class ChatterboxLora(LoraSettings):
    """``lora:`` in a Chatterbox config: the shared fields (:class:`~fintts.tts.lora_settings.LoraSettings`), on T3's Linear layers."""

    alpha: float = 32.0
    #: regular expressions matching whole module names of T3 (Linear layers)
    targets: list[str] = dataclasses.field(default_factory=lambda: list(DEFAULT_TARGETS))


@dataclasses.dataclass
class ChatterboxTaskConfig(CorpusSettings):
    """A Chatterbox run's settings: the corpus's (:class:`~fintts.tts.corpus.settings.CorpusSettings`, the same keys in
    every family, with longer clips kept and fewer held out) and T3's below."""

    #: where T3 and the frozen parts come from: a folder holding the release's files, a Hub repo with them
    #: (ResembleAI/chatterbox, downloaded once into the Hugging Face cache), or ``random``
    weights: str = RELEASE_REPO
    #: T3's file in ``weights`` (upstream's from_local takes v2 by default; t3_mtl23ls_v3.safetensors, or ``v3``, is the
    #: newer one), also the exported T3's name (fintts say hands it to from_local)
    t3_file: str = RELEASE_T3
    #: T3Settings fields (sizes), with ``weights: random`` only: a release's sizes are its own
    model: dict[str, Any] = dataclasses.field(default_factory=dict)
    lr: float = 5e-5
    betas: list[float] = dataclasses.field(default_factory=lambda: [0.9, 0.999])
    eps: float = 1e-8
    weight_decay: float = 0.01
    clip_grad_norm: float = 1.0
    #: the text head's next-id cross-entropy, added to the speech tokens' with this weight, as upstream's ``T3.loss``
    #: returns both and its training scripts sum them (1.0); 0 learns from the speech tokens alone, the text head frozen
    text_loss_weight: float = 1.0
    #: the "exaggeration" T3 is conditioned on while training (upstream's generate defaults to 0.5)
    emotion_adv: float = 0.5
    #: clips whose speech tokens exceed this are left out (memory grows with the sequence; 30 s = 750 tokens)
    max_speech_tokens: int = 750
    max_seconds: float = 30.0
    heldout_per_speaker: int = 2
    #: recompute each Llama layer in the backward pass: less memory (a full T3 on a T4), same gradients, slower steps
    checkpointing: bool = free_setting(False, speed=True)
    #: with checkpointing off, a micro-batch over this many positions (items × its longest [conditioning | text |
    #: speech]) still recomputes its layers: memory bounded by positions, not items (0: never; benchmarks/chatterbox_memory.py)
    checkpoint_over_positions: int = free_setting(0, speed=True)
    #: held-out clips scored for ``val/loss`` each validation
    val_items: int = free_setting(16)
    #: held-out clips spoken at each validation (T3 greedily, then S3Gen, in the voice of their speaker's conditioning
    #: clip) into the checkpoint's samples/, TensorBoard and the Hub; 0: none (and no ``val/length_ratio``)
    samples: int = free_setting(2)
    lora: ChatterboxLora = dataclasses.field(default_factory=ChatterboxLora)
    #: the clip whose speaker embedding and speech prompt become the exported voice's conds.pt (its id; empty: the
    #: trained speaker's longest clip of at most 10 s)
    reference_clip: str = free_setting("")

    def __post_init__(self) -> None:
        self.t3_file = T3_VERSIONS.get(self.t3_file, self.t3_file)
        if not self.t3_file.endswith(".safetensors") or "/" in self.t3_file:
            raise ConfigError(f"t3_file: {self.t3_file!r} is not a .safetensors file in weights; use {RELEASE_T3} or "
                              f"{RELEASE_T3_V3} (or v2, v3)")
        if self.model and self.weights != RANDOM:
            raise ConfigError(f"model: sizes are set with weights: {RANDOM} only; {self.weights!r} has its own (remove model:)")
        if self.text_loss_weight < 0:
            raise ConfigError(f"text_loss_weight: must be 0 (the speech tokens' loss alone) or positive, not {self.text_loss_weight}")
        if self.max_speech_tokens <= 0:
            raise ConfigError(f"max_speech_tokens: must be positive, not {self.max_speech_tokens}")
        if self.samples < 0:
            raise ConfigError(f"samples: must be 0 (none) or the number of held-out clips to speak, not {self.samples}")
        if self.checkpoint_over_positions < 0:
            raise ConfigError(f"checkpoint_over_positions: must be 0 (never) or positive, not {self.checkpoint_over_positions}")
        super().__post_init__()

    @classmethod
    def check_phases(cls, configs: list[ChatterboxTaskConfig]) -> None:
        """Refuse a run whose adapter phase is not its last (called with each phase's settings when a config loads)."""
        for index, before in enumerate(configs[:-1], 1):
            if before.lora.r:
                raise ConfigError(f"phases[{index}] follows an adapter phase; a run ends with its adapter phase (start "
                                  "another run from the checkpoint that ended the full phase for another speaker)")
