"""The Kaggle notebook's cells that do more than call the API: the corpus check, the token's hand-over, the last cell.

**The Hugging Face token** is a write credential, needed only by the process that pushes. The
notebook's first cell takes it (from ``HF_TOKEN``, the Kaggle secret or the token dataset) into a
variable and out of the kernel's environment, with Kaggle's key to the notebook's secrets
(``KAGGLE_USER_SECRETS_TOKEN``), so no child process inherits either: not ``pip install`` (which
may run code from the package index), not ``fintts check``. The training cell hands it on for the
training alone (:func:`token_for_training`).

**The corpus check** runs ``fintts check`` on the config's corpus in a child process (the
notebook's own process stays free of decoded audio before training starts). The command is an
argument list, never shell text: the config may come from someone else, and the kernel holds the
token, so a value such as ``text_column: 'text; touch …'`` or ``data: $(…)`` must reach
``fintts check`` as the string it is. (Column and split names are also refused at config load
unless they are names, :func:`fintts.tts.corpus.model.option_problems`.)

**The last cell**: what this session did, and what to do next.

A saved Kaggle version is read later, often on a phone: the summary, the loss curves and
the newest validation samples as audio players are what a person checks before deciding
whether to run another session. They come from the session's latest checkpoint, which holds
the newest validation's samples and the loss plot (:mod:`fintts.train.run.checkpoint`).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from fintts.kaggle.inputs import INPUT, relocate
from fintts.train.report.summary import SessionSummary
from fintts.train.run.checkpoint import is_checkpoint_name
from fintts.train.run.layout import LOSS_PLOT, SAMPLES_DIR

HUB = "hf://"
#: The task settings that say how to read the corpus, passed on to ``fintts check`` as its options.
LAYOUT_SETTINGS = ("format", "split", "text_column", "speaker_column", "audio_column")


def check_arguments(task: Any) -> list[str]:
    """``fintts check``'s arguments for ``task``'s corpus: options first, then ``--`` and the corpus, each one argument."""
    options = [f"--{key.replace('_', '-')}={getattr(task, key)}" for key in LAYOUT_SETTINGS if getattr(task, key, "")]
    return ["check", "--no-progress", *options, "--", str(task.data)]


#: The task settings that may name a path under ``/kaggle/input`` (the corpus, a copy of the MMS voice, its discriminator).
INPUT_SETTINGS = ("data", "init", "discriminator")


def input_overrides(config: str | Path, data: str = "", root: str = INPUT) -> list[str]:
    """The session's overrides of ``config``: ``data`` when given, and each path setting moved to the layout mounted.

    Kaggle mounts a dataset at ``/kaggle/input/datasets/<owner>/<slug>`` since 2026, at ``/kaggle/input/<slug>`` before
    (:mod:`fintts.kaggle.inputs`): a config's ``data``, ``init`` or ``discriminator`` written for one is read under the other.
    """
    from fintts.train.config import load_config  # the notebook's install cell has run by now

    overrides = [f"data={data}"] if data else []
    task = load_config(config, list(overrides)).task
    for key in INPUT_SETTINGS:
        value = getattr(task, key, None)
        if isinstance(value, (str, Path)) and str(value) and relocate(str(value), root) != str(value):
            overrides = [o for o in overrides if not o.startswith(f"{key}=")] + [f"{key}={relocate(str(value), root)}"]
    return overrides


def check_corpus(config: str | Path, overrides: Sequence[str] = (), token: str = "") -> int:
    """Run ``fintts check`` on the corpus of ``config`` (with ``overrides``) and print its report; its exit status.

    ``token`` (the session's Hugging Face token) goes to the check only for a corpus on the Hub (``hf://datasets/…``),
    which a private dataset needs to be read at all; a corpus on the disk is checked without it.
    """
    from fintts.train.config import load_config  # the notebook's install cell has run by now

    task = load_config(config, list(overrides)).task
    command = [sys.executable, "-m", "fintts", *check_arguments(task)]
    env = {**os.environ, "HF_TOKEN": token} if token and str(task.data).startswith(HUB) else None
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                          env=env) as process:
        for line in process.stdout:  # as it comes: a notebook shows a child's output only when printed here
            print(line, end="")
    return process.returncode


@contextlib.contextmanager
def token_for_training(token: str) -> Iterator[None]:
    """``HF_TOKEN`` in this process's environment while the ``with`` block trains, and out of it again after.

    The training finds it there (:func:`fintts.train.stores.hub.auth.find_token`): this process itself with one GPU
    or none, else the launcher (:mod:`fintts.train.session.launcher`) passes it on to its processes. The cells after
    the training (the session's summary) run without it, as those before it did.
    """
    previous = os.environ.get("HF_TOKEN")
    if token:
        os.environ["HF_TOKEN"] = token
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("HF_TOKEN", None)
        else:
            os.environ["HF_TOKEN"] = previous


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


def newest_samples(latest: Path) -> list[Path]:
    """The samples of the newest checkpoint beside ``latest`` (``latest``'s own first) that has any.

    A checkpoint carries samples only when a validation ran since the one before it, and a session near its end skips
    a validation that would eat the final push's reserve: the person still hears the voice as it last was.
    """
    kept = sorted(folder for folder in latest.parent.iterdir() if folder.is_dir() and is_checkpoint_name(folder.name))
    for folder in [latest, *reversed([folder for folder in kept if folder != latest])]:
        found = sorted(folder.glob(f"{SAMPLES_DIR}/**/*.wav"))
        if found:
            return found
    return []


def show_session(summary: SessionSummary) -> None:
    """Print the summary, show the loss plot and the newest samples, and say what to do next (in a notebook)."""
    from IPython.display import Audio, Image, display  # there only in a notebook

    print(summary.format())
    folder = Path(summary.latest_checkpoint) if summary.latest_checkpoint else None
    if folder is not None and (folder / LOSS_PLOT).is_file():
        display(Image(filename=str(folder / LOSS_PLOT)))
    samples = newest_samples(folder) if folder is not None else []
    for wav in samples:
        print(wav.relative_to(folder.parent))
        display(Audio(filename=str(wav)))
    if not samples:
        print("no validation samples yet: they come with the first validation (eval_every steps)")
    print(next_steps(summary))
