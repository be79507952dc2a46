"""The last cell of the Kaggle notebook: what this session did, and what to do next.

A saved Kaggle version is read later, often on a phone: the summary, the loss curves and
the newest validation samples as audio players are what a person checks before deciding
whether to run another session. They come from the session's latest checkpoint, which holds
the newest validation's samples and the loss plot (:mod:`fintts.train.checkpoint`).
"""

from __future__ import annotations

from pathlib import Path

from fintts.train.summary import SessionSummary

HUB = "hf://"


def next_steps(summary: SessionSummary) -> str:
    """What a person does after this session, on Kaggle and on the laptop."""
    repo = summary.store[len(HUB):] if summary.store.startswith(HUB) else ""
    if summary.state == "finished":
        where = f"fintts pull {repo} --out voices/{repo.split('/')[-1]}" if repo else "download model/ from this version's output"
        return f"The run is finished. On your laptop: {where}, then listen to it with notebooks/laptop_voice.ipynb."
    again = (f"Run this notebook again (Save Version → Save & Run All): it continues from step {summary.end_step}. "
             "Or let your laptop chain the sessions: fintts kaggle run (README, Kaggle quick start).")
    if not repo:
        again += (" Without a Hub repo the checkpoint lives only in this version's output: attach that output to the next"
                  " session, or set REPO so the next session finds the run on the Hub.")
    return again


def show_session(summary: SessionSummary) -> None:
    """Print the summary, show the loss plot and the newest samples, and say what to do next (in a notebook)."""
    from IPython.display import Audio, Image, display  # there only in a notebook

    print(summary.format())
    folder = Path(summary.latest_checkpoint) if summary.latest_checkpoint else None
    if folder is not None and (folder / "loss.png").is_file():
        display(Image(filename=str(folder / "loss.png")))
    samples = sorted(folder.glob("samples/**/*.wav")) if folder is not None else []
    for wav in samples:
        print(wav.relative_to(folder))
        display(Audio(filename=str(wav)))
    if not samples:
        print("no validation samples yet: they come with the first validation (eval_every steps)")
    print(next_steps(summary))
