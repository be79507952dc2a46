"""The cards fintts writes, all here: the run's page and the card of a model on its own.

* The run's page (:func:`render`): ``README.md`` beside ``status.json``, which the Hub shows as
  the repo's card. A person opening the repo should see at a glance what the model is, how far
  the run got and what to do with it, without opening JSON. The trainer renders it from the
  run's status (so the page never disagrees with the run) around what the task says about its
  model (:meth:`fintts.train.task.Task.card`), and writes it whenever it writes the status; a
  store carries it like any other file of the run.
* A model's own card (:func:`render_model`): the ``README.md`` of an exported model folder and
  of a published model repo (``fintts publish``), from what the task says about the model alone.

Both put the task's metadata through ``huggingface_hub``'s ``ModelCardData`` and the text through
``ModelCard``, so the front matter is the Hub's own YAML (and ``ModelCard.load`` reads back what
was written) rather than YAML written by hand. This layer knows no model kind: the facts, the
licence and the usage text come from the task's :class:`~fintts.train.task.Card`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from huggingface_hub import EvalResult, ModelCard, ModelCardData

from fintts.train.run.layout import LOSS_PLOT
from fintts.train.task import Card


def render(status: Mapping[str, Any], card: Card, *, repo: str | None, loss_plot: bool) -> str:
    """The page of the run ``status`` describes; ``repo`` is its Hub repo id (``None``: a local run)."""
    name = repo.split("/")[-1] if repo else status.get("run_name", "run")
    lines = [
        f"# {name}: {card.title}",
        "",
        *([card.summary, ""] if card.summary else []),
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
    return _with_metadata(card, name, lines)


def render_model(card: Card, *, name: str, samples: Sequence[tuple[str, str]] = ()) -> str:
    """The card of a model on its own (an exported folder, a published repo); ``name`` heads it (a repo's name).

    ``samples``: (caption, URL) of audio the model made, shown as players. The Hub's widget only
    appears for models an inference provider serves, so a visitor of a person's own repo hears
    nothing unless the card itself carries sound.
    """
    lines = [f"# {name}", ""]
    lines += [card.summary, ""] if card.summary else []
    lines += [f"- {fact}" for fact in card.facts] + ([""] if card.facts else [])
    if samples:
        lines += ["## Samples", ""]
        for caption, url in samples:
            lines += [f"{caption}:", "", f'<audio controls src="{url}"></audio>', ""]
    if card.usage:
        lines += ["## How to use", "", *card.usage, ""]
    return _with_metadata(card, name, lines)


def _with_metadata(card: Card, name: str, lines: list[str]) -> str:
    """``lines`` under the card's front matter, made (and read back, as a check) by ``huggingface_hub``."""
    metadata = dict(card.metadata)
    results = [EvalResult(**{"task_type": metadata.get("pipeline_tag") or "other", **r}) for r in card.results]
    if results:
        metadata.setdefault("model_name", name)
    data = ModelCardData(**metadata, eval_results=results or None)
    body = "\n".join(lines)
    if not data.to_dict():
        return body
    return str(ModelCard(f"---\n{data.to_yaml()}\n---\n\n{body}"))


def _number(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def _when(seconds: Any) -> str:
    if not isinstance(seconds, (int, float)):
        return str(seconds or "")
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(seconds))
