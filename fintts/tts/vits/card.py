"""What a Finnish VITS voice says about itself on a card; :mod:`fintts.train.report.card` writes the cards.

One set of facts for three places, each with its own usage text (``where``):

* ``run``: the run's page (:meth:`VitsTask.card`), the voice in the run's ``model/``;
* ``folder``: the ``README.md`` of an exported voice folder (``model/`` itself, :meth:`VitsTask.export`);
* ``repo``: a voice published at the root of a Hub repo of its own (``fintts publish``).

The facts come from the run's ``status.json`` (its ``about``: the corpus's hours and speakers,
the base model, the licence; its validations: the quality figures), so a card made long after
training (a publish from a laptop) says what the run measured.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fintts.train.task import Card

MCD = "val/mcd"
#: The licence of Meta's MMS-TTS weights, which a voice fine-tuned from them inherits.
MMS_LICENSE = "cc-by-nc-4.0"
#: A voice trained from scratch, or from a base whose licence is not known here: the project's own.
DEFAULT_LICENSE = "apache-2.0"
WHERE = ("run", "folder", "repo")


def is_mms(init: str) -> bool:
    """Starts from Meta's MMS-TTS weights, whose CC BY-NC 4.0 licence the voice inherits."""
    return "mms-tts" in init


def voice_license(init: str, configured: str = "") -> str:
    """The licence of a voice fine-tuned from ``init``: MMS's when it is MMS-derived (the base imposes it), else the config's
    ``license:``, else Apache-2.0. A config that names another licence for an MMS-derived voice is refused where it loads."""
    if is_mms(init):
        return MMS_LICENSE
    return configured or DEFAULT_LICENSE


def check_license(init: str, configured: str) -> None:
    if configured and is_mms(init) and configured != MMS_LICENSE:
        raise ValueError(f"license: {configured!r} — a voice fine-tuned from {init} inherits the MMS weights' licence, "
                         f"{MMS_LICENSE} (non-commercial); remove license: or set it to {MMS_LICENSE}")


def run_card(status: Mapping[str, Any], init: str, *, where: str = "run", repo: str | None = None, step: int | None = None,
             sample_rate: int | None = None, piper: str | None = None) -> Card:
    """The card of a voice fine-tuned from ``init`` (a Hub id, a folder, or ``scratch``) in the run ``status`` describes.

    ``repo``: the Hub repo (the run's for ``run``, the published voice's for ``repo``). ``step``: the quality
    figures of that step's validation (a published checkpoint), else those of the best one. ``piper``: the
    file name of a Piper voice (``NAME.onnx``, with ``NAME.onnx.json``) beside the voice.
    """
    if where not in WHERE:
        raise ValueError(f"where: {where!r} is not one of {', '.join(WHERE)}")
    about = status.get("about") or {}
    licence = about.get("license") or voice_license(init)
    metadata: dict[str, Any] = {
        "language": ["fi"], "license": licence, "library_name": "transformers", "pipeline_tag": "text-to-speech",
        "tags": ["text-to-speech", "vits", "finnish", "fintts"],
    }
    if "/" in init and not Path(init).expanduser().exists():  # a Hub id (a folder says nothing to the Hub)
        metadata["base_model"] = init
    facts = [f"**Base model:** {init}"]
    figures, at = _quality(status, step)
    results = []
    if figures.get(MCD) is not None:
        facts.append(f"**Mel cepstral distortion (MCD, dB, lower is better):** {figures[MCD]:.3f}"
                     + (f" (held-out clips, step {at})" if at is not None else ""))
        results.append({"metric_type": "mcd", "metric_name": "Mel cepstral distortion (dB)", "metric_value": round(figures[MCD], 3),
                        "dataset_type": str(about.get("data") or "custom"), "dataset_name": str(about.get("data") or "custom"),
                        "dataset_split": "held-out"})
    if figures.get("val/identified") is not None:
        facts.append(f"**Held-out sentences told apart by their recordings:** {100 * figures['val/identified']:.0f}%")
    if figures.get("val/floor_db") is not None and figures.get("val/floor_db_ref") is not None:
        facts.append(f"**Noise floor (dB below the loudest moments, higher is cleaner):** {figures['val/floor_db']:.1f} "
                     f"(the recordings: {figures['val/floor_db_ref']:.1f})")
    for key in ("hours", "clips", "speakers", "heldout_clips"):
        value = about.get(key)
        if value not in (None, "", []):
            shown = _shown(value)
            facts.append(f"**{key.replace('_', ' ').capitalize()}:** {shown}")
    if sample_rate:
        facts.append(f"**Sampling rate:** {sample_rate} Hz")
    if licence == MMS_LICENSE:
        facts.append("**Licence:** the base weights are Meta's MMS-TTS, CC BY-NC 4.0: this voice is for non-commercial use only.")
    speakers = about.get("speakers") or []
    hours = about.get("hours")
    origin = "trained from scratch with fintts" if init == "scratch" else f"fine-tuned with fintts from `{init}`"
    summary = (f"A Finnish text-to-speech voice (VITS), {origin}"
               + (f" on {hours:.2f} h of speech" if isinstance(hours, (int, float)) else "")
               + (f" by {len(speakers)} speaker{'s' if len(speakers) != 1 else ''}" if speakers else "") + ".")
    usage = {"run": _run_usage, "folder": _folder_usage, "repo": _repo_usage}[where](repo, speakers, piper)
    return Card(title="a Finnish text-to-speech voice", metadata=metadata, facts=facts, usage=usage, summary=summary,
                results=results)


def _shown(value: Any) -> str:
    if isinstance(value, list):  # speakers: how many, and who when they are few enough to read
        return f"{len(value)} ({', '.join(map(str, value))})" if len(value) <= 8 else str(len(value))
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def _quality(status: Mapping[str, Any], step: int | None) -> tuple[dict[str, Any], int | None]:
    """The validation figures of ``step`` (or of the best validation); the step they were measured at."""
    evals = [e for e in status.get("evals") or [] if isinstance(e, Mapping)]
    best = status.get("best") or {}
    wanted = step if step is not None else best.get("step")
    found = next((e for e in reversed(evals) if e.get("step") == wanted), None) if wanted is not None else None
    if found is not None:
        return dict(found), wanted
    if step is not None:
        return {}, None  # a checkpoint between validations: no figures of its own
    if status.get("monitor") == MCD and best.get("value") is not None:
        return {MCD: best["value"]}, best.get("step")
    latest = next((e for e in reversed(evals) if MCD in e), None)
    return (dict(latest), latest.get("step")) if latest else ({}, None)


FINTTS_NOTE = ("fintts reads numbers, dates, times and abbreviations as words and says long text sentence by sentence; "
               "`model.onnx` and `model.int8.onnx` let it speak through onnxruntime without torch.")


def _run_usage(repo: str | None, speakers: Sequence[str], piper: str | None) -> list[str]:
    return [
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
        "",
        *(["To publish the voice on its own (a repo whose root is the voice, as the Hub's widget wants): "
           f"`fintts publish --store hf://{repo} --hub-repo USER/NAME`."] if repo else []),
    ]


def _folder_usage(repo: str | None, speakers: Sequence[str], piper: str | None) -> list[str]:
    return [
        "With fintts — not on PyPI: install it from its source (`pip install .` in a checkout; the base install needs "
        "no torch). `PATH` is this folder; `fintts pull USER/NAME --out my-voice` downloads it from a fintts Hub run "
        "as `my-voice/model`.",
        "",
        "```bash",
        'fintts say "Hyvää huomenta! Kello on 7.30." --voice PATH -o huomenta.wav',
        "```",
        "",
        "```python",
        "import fintts",
        "",
        'voice = fintts.load_voice("PATH")',
        'waveform, sample_rate = voice.synthesize("Hyvää huomenta! Kello on 7.30.")',
        'voice.save("Tänään on 22.11.2026.", "tanaan.wav")',
        "```",
        "",
        FINTTS_NOTE,
        "",
        "Plain transformers reads only lower-case Finnish without digits:",
        "",
        "```python",
        "from transformers import pipeline",
        'tts = pipeline("text-to-speech", model="PATH")',
        'speech = tts("hyvää huomenta")',
        "```",
    ]


def _repo_usage(repo: str | None, speakers: Sequence[str], piper: str | None) -> list[str]:
    repo = repo or "USER/NAME"
    lines = [
        "With transformers (plain lower-case Finnish without digits: transformers does not read numbers as words):",
        "",
        "```python",
        "from transformers import pipeline",
        "",
        f'tts = pipeline("text-to-speech", model="{repo}")',
        'speech = tts("hyvää huomenta")  # speech["audio"], speech["sampling_rate"]',
        "```",
        "",
    ]
    if len(speakers) > 1:
        lines += [f"The voice has {len(speakers)} speakers ({', '.join(speakers)}, in `speakers.json`); transformers "
                  "takes one by number: `tts(text, forward_params={\"speaker_id\": 1})`.", ""]
    lines += [
        "With fintts (install it from its source; its base install needs no torch), which downloads the voice once:",
        "",
        "```bash",
        f'fintts say "Hyvää huomenta! Kello on 7.30." --hub-repo {repo} -o huomenta.wav',
        "```",
        "",
        "```python",
        "import fintts",
        "",
        f'voice = fintts.load_voice("{repo}")',
        'voice.save("Tänään on 22.11.2026.", "tanaan.wav")',
        "```",
        "",
        FINTTS_NOTE,
        "",
    ]
    if piper:
        lines += [
            f"With Piper (`pip install piper-tts`; Home Assistant and other Piper programs take `{piper}` and `{piper}.json`):",
            "",
            "```bash",
            f"hf download {repo} {piper} {piper}.json --local-dir my-voice",
            f'python -m piper -m my-voice/{piper} -f huomenta.wav -- "Hyvää huomenta."',
            "```",
            "",
        ]
    return lines
