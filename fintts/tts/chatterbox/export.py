"""A trained T3 as the folder upstream's ``ChatterboxMultilingualTTS.from_local`` reads.

``from_local(ckpt_dir, device)`` (resemble-ai/chatterbox, ``src/chatterbox/mtl_tts.py``) loads
``ve.pt`` and ``s3gen.pt`` with ``torch.load(weights_only=True)``, T3 from
``t3_mtl23ls_v2.safetensors`` with ``load_state_dict`` (strict), the vocabulary from
``grapheme_mtl_merged_expanded_v1.json`` and, when present, the built-in voice from ``conds.pt``
(``{"t3": T3Cond's fields, "gen": S3Gen's reference}``). So the folder holds: T3 with any adapter
folded in (fp32, as released), the frozen parts copied (hard-linked where the disk allows) from the
release, the vocabulary, and conds.pt made from one clip of the trained speaker; beside them
``chatterbox.json`` (what fintts needs to read the folder back: the weights it started from, T3's sizes, the
reference clip) and
the card (``license: mit``: the code and weights are MIT, and so is what is fine-tuned from them).
A run on ``weights: random`` has no frozen parts to copy, and its conds.pt has no decoder part.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from fintts.train.report.card import render_model
from fintts.train.run.layout import CARD
from fintts.train.task import Card
from fintts.tts.chatterbox.cache import ClipTokens
from fintts.tts.chatterbox.frozen import FROZEN_FILES
from fintts.tts.chatterbox.speak import DESCRIPTION_FILE
from fintts.tts.chatterbox.t3 import T3Settings
from fintts.tts.chatterbox.text import VOCAB_FILE, ChatterboxText

CONDS_FILE = "conds.pt"
#: files of the release copied as they are when it has them (Cangjie5_TC.json: upstream's Chinese converter reads it)
_OPTIONAL_FILES = ("Cangjie5_TC.json",)


def write_voice(out_dir: Path, *, weights: Mapping[str, torch.Tensor], settings: T3Settings, text: ChatterboxText,
                weights_from: str, release: Path | None, t3_file: str, reference_id: str, clip: ClipTokens, emotion: float,
                gen: Mapping[str, Any], card: str) -> None:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    save_file({key: value.detach().float().contiguous() for key, value in weights.items()}, str(out_dir / t3_file))
    (out_dir / VOCAB_FILE).write_text(text.json, encoding="utf-8")
    if release is not None:
        for name in (*FROZEN_FILES, *_OPTIONAL_FILES):
            if (release / name).is_file():
                _link_or_copy(release / name, out_dir / name)
    t3_cond = {
        "speaker_emb": clip.speaker.float().view(1, -1), "clap_emb": None,
        "cond_prompt_speech_tokens": clip.speech_tokens[: settings.speech_cond_prompt_len].long().view(1, -1),
        "cond_prompt_speech_emb": None, "emotion_adv": torch.full((1, 1, 1), float(emotion)),
    }
    torch.save({"t3": t3_cond, "gen": dict(gen)}, out_dir / CONDS_FILE)
    description = {"family": "chatterbox-multilingual", "language": "fi", "weights": weights_from, "t3_file": t3_file,
                   "reference_clip": reference_id, "t3": dataclasses.asdict(settings)}
    (out_dir / DESCRIPTION_FILE).write_text(json.dumps(description, indent=2) + "\n", encoding="utf-8")
    (out_dir / CARD).write_text(card, encoding="utf-8")


def _link_or_copy(source: Path, target: Path) -> None:
    """A hard link (the 1 GB s3gen.pt is the same bytes every export), a copy across file systems."""
    target.unlink(missing_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def card_fields(about: Mapping[str, Any], weights: str) -> dict[str, Any]:
    """The card's metadata and words, for the run's page and the exported folder alike."""
    facts = [f"trained on {about.get('hours', 0)} h of {about.get('data')} ({about.get('clips', 0)} clips)",
             f"started from {weights}"]
    if about.get("lora"):
        facts.append(f"LoRA r={about['lora']['r']} for {about['lora']['adapter']}, folded into T3")
    return {
        "metadata": {"license": "mit", "language": ["fi"], "pipeline_tag": "text-to-speech", "library_name": "chatterbox",
                     "tags": ["fintts", "chatterbox", "text-to-speech"], "base_model": "ResembleAI/chatterbox"},
        "summary": ("Chatterbox Multilingual's T3 (text to speech tokens) fine-tuned for Finnish with fintts; S3Gen, the "
                    "voice encoder and the tokenizer are the release's, unchanged. MIT, like the release."),
        "facts": facts,
        "usage": ["```python",
                  "from chatterbox.mtl_tts import ChatterboxMultilingualTTS",
                  "tts = ChatterboxMultilingualTTS.from_local('THIS_FOLDER', device='cpu')",
                  "wav = tts.generate('Hyvää huomenta!', language_id='fi')  # the built-in voice: conds.pt",
                  "wav = tts.generate('Hyvää huomenta!', language_id='fi', audio_prompt_path='other.wav')  # cloned",
                  "```"],
    }


def model_card(about: Mapping[str, Any], weights: str) -> str:
    return render_model(Card(title="Finnish Chatterbox voice", **card_fields(about, weights)), name="Finnish Chatterbox voice (fintts)")
