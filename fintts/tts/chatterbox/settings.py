"""A Chatterbox run's settings (``task: chatterbox`` in a config)."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from fintts.train.config import ConfigError, free_setting
from fintts.tts.corpus import FORMATS
from fintts.tts.corpus.model import NAMED_FIELDS, option_problems

#: weights: T3 from random weights at ``model:``'s sizes, with random stand-ins for the frozen parts (tests, dry runs, the GPU check)
RANDOM = "random"
#: the Hub repo that holds the release (MIT): t3_mtl23ls_v2.safetensors, s3gen.pt, ve.pt, the grapheme vocabulary, conds.pt
RELEASE_REPO = "ResembleAI/chatterbox"
RELEASE_T3 = "t3_mtl23ls_v2.safetensors"
#: the Llama's projections, the usual LoRA targets for a transformer (names under the T3 module)
DEFAULT_TARGETS = (r"tfmr\.layers\.\d+\.(self_attn\.(q_proj|k_proj|v_proj|o_proj)|mlp\.(gate_proj|up_proj|down_proj))",)


@dataclasses.dataclass
class ChatterboxLora:
    """``lora:`` in a config: an adapter of rank ``r`` on ``targets`` (0: the whole T3 trains)."""

    r: int = 0
    alpha: float = 32.0
    dropout: float = 0.05
    #: regular expressions matching whole module names of T3 (Linear layers)
    targets: list[str] = dataclasses.field(default_factory=lambda: list(DEFAULT_TARGETS))

    def __post_init__(self) -> None:
        if self.r < 0:
            raise ConfigError(f"lora.r must be 0 (no adapter) or positive, not {self.r}")
        for target in self.targets:
            try:
                re.compile(target)
            except re.error as err:
                raise ConfigError(f"lora.targets: {target!r} is not a regular expression ({err})") from None


@dataclasses.dataclass
class ChatterboxTaskConfig:
    #: the corpus (any layout ``fintts check`` knows) or ``demo``; compared by its clips, not its path
    data: str = free_setting("demo")
    format: str = ""
    split: str = free_setting("")
    text_column: str = free_setting("")
    speaker_column: str = free_setting("")
    audio_column: str = free_setting("")
    speakers: list[str] = dataclasses.field(default_factory=list)
    #: train on this speaker's clips only (``best``: the one with the most usable minutes); an adapter phase needs one
    speaker: str = ""
    #: where T3 and the frozen parts come from: a folder holding the release's files, a Hub repo with them
    #: (ResembleAI/chatterbox, downloaded once into the Hugging Face cache), or ``random``
    weights: str = RELEASE_REPO
    #: T3's file in ``weights`` (upstream's from_local takes v2 by default; t3_mtl23ls_v3.safetensors is the other)
    t3_file: str = RELEASE_T3
    #: T3Settings fields (sizes), with ``weights: random`` only: a release's sizes are its own
    model: dict[str, Any] = dataclasses.field(default_factory=dict)
    lr: float = 5e-5
    betas: list[float] = dataclasses.field(default_factory=lambda: [0.9, 0.999])
    eps: float = 1e-8
    weight_decay: float = 0.01
    clip_grad_norm: float = 1.0
    #: the "exaggeration" T3 is conditioned on while training (upstream's generate defaults to 0.5)
    emotion_adv: float = 0.5
    #: clips whose speech tokens exceed this are left out (memory grows with the sequence; 30 s = 750 tokens)
    max_speech_tokens: int = 750
    min_seconds: float = 0.5
    max_seconds: float = 30.0
    heldout_per_speaker: int = 2
    #: recompute each Llama layer in the backward pass: less memory (a full T3 on a T4), same gradients, slower steps
    checkpointing: bool = free_setting(False, speed=True)
    #: with checkpointing off, a micro-batch over this many positions (items × its longest [conditioning | text |
    #: speech]) still recomputes its layers: memory bounded by positions, not items (0: never; benchmarks/chatterbox_memory.py)
    checkpoint_over_positions: int = free_setting(0, speed=True)
    #: held-out clips scored for ``val/loss`` each validation
    val_items: int = free_setting(16)
    lora: ChatterboxLora = dataclasses.field(default_factory=ChatterboxLora)
    #: the clip whose speaker embedding and speech prompt become the exported voice's conds.pt (its id; empty: the
    #: trained speaker's longest clip of at most 10 s)
    reference_clip: str = free_setting("")

    def __post_init__(self) -> None:
        if self.model and self.weights != RANDOM:
            raise ConfigError(f"model: sizes are set with weights: {RANDOM} only; {self.weights!r} has its own (remove model:)")
        if self.format and self.format not in FORMATS:
            raise ConfigError(f"format: {self.format!r} is not a corpus layout; use one of {', '.join(FORMATS)} (or leave it empty)")
        if self.max_speech_tokens <= 0:
            raise ConfigError(f"max_speech_tokens: must be positive, not {self.max_speech_tokens}")
        if self.checkpoint_over_positions < 0:
            raise ConfigError(f"checkpoint_over_positions: must be 0 (never) or positive, not {self.checkpoint_over_positions}")
        problems = option_problems({field: getattr(self, field) for field in NAMED_FIELDS})
        if problems:
            raise ConfigError("; ".join(problems))

    @classmethod
    def check_phases(cls, configs: list[ChatterboxTaskConfig]) -> None:
        """Refuse a run whose adapter phase is not its last (called with each phase's settings when a config loads)."""
        for index, before in enumerate(configs[:-1], 1):
            if before.lora.r:
                raise ConfigError(f"phases[{index}] follows an adapter phase; a run ends with its adapter phase (start "
                                  "another run from the checkpoint that ended the full phase for another speaker)")
