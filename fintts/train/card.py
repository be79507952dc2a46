"""The run's page: ``README.md`` beside ``status.json``, which the Hub shows as the repo's card.

A person opening the repo should see at a glance what the model is, how far the run got and
what to do with it, without opening JSON. The trainer renders it from the run's status (so
the page never disagrees with the run) around what the task says about its model
(:meth:`fintts.train.task.Task.card`), and writes it whenever it writes the status; a store
carries it like any other file of the run.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import yaml

from fintts.train.task import Card

CARD = "README.md"
#: The newest checkpoint's loss plot, copied beside the card so the page can show it.
LOSS_PLOT = "loss.png"


def render(status: Mapping[str, Any], card: Card, *, repo: str | None, loss_plot: bool) -> str:
    """The page of the run ``status`` describes; ``repo`` is its Hub repo id (``None``: a local run)."""
    name = repo.split("/")[-1] if repo else status.get("run_name", "run")
    lines = []
    if card.metadata:
        lines += ["---", yaml.safe_dump(dict(card.metadata), sort_keys=False, allow_unicode=True).strip(), "---", ""]
    lines += [
        f"# {name}: {card.title}",
        "",
        "Trained with fintts over as many GPU sessions as it took. "
        + ("This repo is both the model (`model/`) and the training run (checkpoints, `status.json`)." if repo else
           "This folder is both the model (`model/`) and the training run (checkpoints, `status.json`)."),
        "",
        f"- **Run:** {status.get('state', 'unknown')} at step {status.get('step', '?')}"
        + (f" of {status['max_steps']}" if status.get("max_steps") else "")
        + (f" (updated {_when(status['updated'])})" if status.get("updated") else ""),
    ]
    best = status.get("best") or {}
    if best.get("value") is not None:
        lines.append(f"- **Best:** {status.get('monitor') or 'monitored metric'} {_number(best['value'])} at step {best.get('step', '?')}")
    lines += [f"- {fact}" for fact in card.facts]
    if loss_plot:
        lines += ["", f"![training curves]({LOSS_PLOT})"]
    sessions = status.get("sessions") or []
    if sessions:
        lines += ["", "## Sessions", "", "| # | session | machine | started | ended | steps | ended because |"]
        lines.append("|---|---|---|---|---|---|---|")
        for number, s in enumerate(sessions, 1):
            machine = " ".join(str(s[k]) for k in ("host", "devices") if s.get(k))
            steps = f"{s.get('start_step', '?')} → {s.get('end_step', '?')}"
            cells = [s.get("id", ""), machine, _when(s.get("started")), _when(s.get("ended")), steps, s.get("reason", "")]
            lines.append(f"| {number} | " + " | ".join(str(c) for c in cells) + " |")
    lines += ["", "## How to use", ""]
    if repo:
        lines += [
            "Download only the exported model (`model/`), with fintts installed:",
            "",
            "```bash",
            f"fintts pull {repo} --out my-model",
            "```",
            "",
            "or with `huggingface_hub`:",
            "",
            "```python",
            "from huggingface_hub import snapshot_download",
            f'path = snapshot_download("{repo}", allow_patterns=["model/*"])',
            "```",
            "",
        ]
    lines += card.usage + ([""] if card.usage else [])
    where = f"--hub-repo {repo}" if repo else f"--store {status.get('store', 'THIS_FOLDER')}"
    lines += [f"Continue training on any machine: `fintts train CONFIG.yaml {where}` (resumes from `latest`).", ""]
    return "\n".join(lines)


def _number(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def _when(seconds: Any) -> str:
    if not isinstance(seconds, (int, float)):
        return str(seconds or "")
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(seconds))
