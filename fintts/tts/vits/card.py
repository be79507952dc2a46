"""How a Finnish VITS run presents itself on its page (the Hub repo's card): :meth:`VitsTask.card`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fintts.train.task import Card

MCD = "val/mcd"


def is_mms(init: str) -> bool:
    """Starts from Meta's MMS-TTS weights, whose CC BY-NC 4.0 licence the voice inherits."""
    return "mms-tts" in init


def run_card(status: Mapping[str, Any], init: str) -> Card:
    """The card of a run fine-tuned from ``init`` (a Hub id, a folder, or ``scratch``)."""
    about = status.get("about") or {}
    metadata: dict[str, Any] = {
        "language": ["fi"], "pipeline_tag": "text-to-speech", "tags": ["text-to-speech", "vits", "finnish", "fintts"],
        "license": "cc-by-nc-4.0" if is_mms(init) else "apache-2.0",
    }
    hub_id = "/" in init and not Path(init).expanduser().exists()
    if hub_id:
        metadata["base_model"] = init
    facts = [f"**Base model:** {init}"]
    best = status.get("best") or {}
    evals = status.get("evals") or []
    mcd = best.get("value") if status.get("monitor") == MCD else next((e[MCD] for e in reversed(evals) if MCD in e), None)
    if mcd is not None:
        facts.append(f"**Mel cepstral distortion (MCD, dB, lower is better):** {mcd:.3f}")
    for key in ("hours", "clips", "speakers", "heldout_clips"):
        value = about.get(key)
        if value not in (None, "", []):
            shown = len(value) if isinstance(value, list) else (f"{value:.3f}" if isinstance(value, float) else value)
            facts.append(f"**{key.replace('_', ' ').capitalize()}:** {shown}")
    if is_mms(init):
        facts.append("**Licence:** the base weights are Meta's MMS-TTS, CC BY-NC 4.0: this voice is for non-commercial use only.")
    usage = [
        "Speak with it (fintts reads numbers, dates and abbreviations as words; its base install needs no torch):",
        "",
        "```bash",
        'fintts say "Hyvää huomenta! Kello on 7.30." --voice my-model -o huomenta.wav',
        "```",
        "",
        "```python",
        "import fintts",
        'fintts.load_voice("my-model").save("Tänään on 22.11.2026.", "tanaan.wav")',
        "```",
        "",
        "The `model/` folder is also a plain transformers VITS checkpoint:",
        "",
        "```python",
        "from transformers import pipeline",
        'tts = pipeline("text-to-speech", model="my-model/model")  # the folder fintts pull wrote',
        'speech = tts("hyvää huomenta")  # plain lowercase Finnish',
        "```",
    ]
    return Card(title="a Finnish text-to-speech voice", metadata=metadata, facts=facts, usage=usage)
