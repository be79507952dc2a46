"""The Hub repo's ``README.md``, rebuilt from ``status.json`` on every push.

A person opening the repo page should see at a glance what this voice is, how far the
run got and how to get it onto a laptop, without opening JSON. Everything comes from the
trainer's ``status.json`` so the card never disagrees with the run. Keys read (all
optional): ``state``, ``step``, ``max_steps``, ``updated`` (unix time), ``monitor`` and
``best`` (``{"value", "step"}``), ``evals`` (``[{"step", "val/mcd", ...}]``), ``about`` (the
task's facts: ``init`` or ``base_model``, ``hours``, ``clips``, ``speakers``...) and
``sessions`` (``[{"id", "host", "devices", "started", "ended", "start_step", "end_step",
"reason"}]``, times in unix seconds).
"""

from __future__ import annotations

import time
from typing import Any

import yaml

MCD = "val/mcd"


def render(repo_id: str, status: dict[str, Any] | None, *, loss_plot: str | None = None) -> str:
    """The card for ``repo_id``; ``loss_plot`` is the repo path of a training-curve image to show."""
    status = status or {}
    about = status.get("about") or {}
    base_model = status.get("base_model") or about.get("base_model") or about.get("init")
    meta: dict[str, Any] = {
        "language": ["fi"], "pipeline_tag": "text-to-speech", "tags": ["text-to-speech", "vits", "finnish", "fintts"],
    }
    if isinstance(base_model, str) and "/" in base_model:
        meta["base_model"] = base_model
    lines = [
        "---",
        yaml.safe_dump(meta, sort_keys=False, allow_unicode=True).strip(),
        "---",
        "",
        f"# {repo_id.split('/')[-1]}: a Finnish text-to-speech voice",
        "",
        "Fine-tuned with [fintts](https://pypi.org/project/fintts/) over several GPU sessions. "
        "This repo is both the voice (`model/`) and the training run (checkpoints, `status.json`).",
        "",
        f"- **Run:** {status.get('state', 'unknown')} at step {status.get('step', '?')}"
        + (f" of {status['max_steps']}" if status.get("max_steps") else "")
        + (f" (updated {_when(status['updated'])})" if status.get("updated") else ""),
        f"- **Base model:** {base_model or 'unknown'}",
    ]
    best, monitor = status.get("best") or {}, status.get("monitor")
    if best.get("value") is not None:
        lines.append(f"- **Best:** {monitor or 'monitored metric'} {_number(best['value'])} at step {best.get('step', '?')}")
    mcd = best.get("value") if monitor == MCD else next((e[MCD] for e in reversed(status.get("evals") or []) if MCD in e), None)
    if mcd is not None:
        lines.append(f"- **Mel cepstral distortion (MCD, dB, lower is better):** {_number(mcd)}")
    for key, value in about.items():
        if key not in ("init", "base_model") and value not in (None, "", []):
            shown = len(value) if isinstance(value, list) else _number(value)
            lines.append(f"- **{key.replace('_', ' ').capitalize()}:** {shown}")
    if loss_plot:
        lines += ["", f"![training curves]({loss_plot})"]
    sessions = status.get("sessions") or []
    if sessions:
        lines += ["", "## Sessions", "", "| # | session | machine | started | ended | steps | ended because |"]
        lines.append("|---|---|---|---|---|---|---|")
        for number, s in enumerate(sessions, 1):
            machine = " ".join(str(s[k]) for k in ("host", "devices") if s.get(k))
            steps = f"{s.get('start_step', '?')} → {s.get('end_step', '?')}"
            cells = [s.get("id", ""), machine, _when(s.get("started")), _when(s.get("ended")), steps, s.get("reason", "")]
            lines.append(f"| {number} | " + " | ".join(str(c) for c in cells) + " |")
    lines += [
        "",
        "## How to use",
        "",
        "Download only the laptop-ready voice (`model/`):",
        "",
        "```bash",
        "pip install fintts",
        f"fintts pull {repo_id} --out my-voice",
        "```",
        "",
        "or with `huggingface_hub`:",
        "",
        "```python",
        "from huggingface_hub import snapshot_download",
        f'path = snapshot_download("{repo_id}", allow_patterns=["model/*"])',
        "```",
        "",
        f"Continue training on another machine: `fintts train CONFIG.yaml --hub-repo {repo_id}` (resumes from `latest`).",
        "",
    ]
    return "\n".join(lines)


def _number(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def _when(seconds: Any) -> str:
    if not isinstance(seconds, (int, float)):
        return str(seconds or "")
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(seconds))
