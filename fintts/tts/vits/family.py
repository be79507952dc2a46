"""The VITS family's face (``fintts.families`` entry point ``vits``): what the command line and ``say`` ask of it.

Loaded whenever a voice is looked up, on a laptop without torch too: each operation imports the
module that does it when it runs (export, publish, eval and merge need torch).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from fintts.tts.family import Family, Scores
from fintts.tts.vits.voice import load_vits_voice
from fintts.tts.voice_format import ONNX_FILE, PIPER_FILE, installed, is_vits_voice

log = logging.getLogger(__name__)


def owns(folder: Path) -> bool:
    """A folder with a ``config.json`` (transformers' layout); a non-VITS one is refused with its model type when it opens."""
    return (folder / "config.json").is_file()


def export(folder: Path, *, piper: bool = False, out: Path | None = None, int8: bool = True) -> list[Path]:
    """``fintts export``: the ONNX graphs (with the Piper voice) into the folder, or a Piper voice alone."""
    if piper:
        from fintts.tts.vits.piper import export_piper_folder  # needs torch, which the base install leaves out

        return export_piper_folder(folder, out)
    from fintts.tts.vits.export import export_folder  # needs torch, as above

    return export_folder(folder, int8=int8)


def publish(store: str | Path, hub_repo: str, **options: Any) -> Any:
    """``fintts publish``: :func:`fintts.tts.vits.publish.publish`."""
    from fintts.tts.vits.publish import publish as publish_voice  # needs torch and the Hub's client

    return publish_voice(store, hub_repo, **options)


def evaluate(model_dir: Path, settings: Any) -> Scores:
    """``fintts eval``: MCD, identification and noise floor of the voice in ``model_dir`` on the run's held-out clips."""
    from fintts.tts.vits.heldout import evaluate_voice, scores_text  # needs torch (the torch backend) and scipy

    result = evaluate_voice(model_dir, settings)
    return Scores(result, scores_text(result))


def merge(folder: Path, out: Path, speaker: str | None, *, onnx: bool = True) -> tuple[str, list[str]]:
    """``fintts merge``: the adapter of ``speaker`` folded into the base, a voice of its own."""
    from fintts.tts.vits.lora import merge_folder  # needs torch and peft

    return merge_folder(folder, out, speaker, onnx=onnx)


def pulled(folder: Path, repo_id: str) -> None:
    """A voice ``fintts pull`` downloaded: its ONNX graphs, or its Piper voice, made here when the run shipped none.

    A voice exported by an older fintts (or with ``export_onnx: false``) has no ONNX graph; with torch
    installed it is exported on this machine, without torch the voice still speaks once torch is there,
    and the message says so.
    """
    if not is_vits_voice(folder):
        return
    if not (folder / ONNX_FILE).is_file():
        if installed("torch") and installed("onnx"):
            from fintts.tts.vits.export import export_folder  # needs torch, which the base install leaves out

            export_folder(folder)
        else:
            log.warning(f"{repo_id} has no {ONNX_FILE} and this machine has no torch to make one: "
                        f"pip install 'fintts[torch]' and run `fintts export --onnx --voice {folder}`")
    elif not (folder / PIPER_FILE).is_file():  # exported before fintts made Piper voices
        if installed("torch") and installed("onnx"):
            from fintts.tts.vits.piper import export_piper_folder  # needs torch, as above

            export_piper_folder(folder)
        else:
            log.warning(f"{repo_id} has no Piper voice ({PIPER_FILE}) and this machine has no torch to make one: "
                        f"pip install 'fintts[torch]' and run `fintts export --piper --voice {folder}`")


FAMILY = Family(name="vits", task="vits", owns=owns, load_voice=load_vits_voice, export=export, publish=publish,
                evaluate=evaluate, merge=merge, pulled=pulled)
