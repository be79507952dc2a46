"""Executing a notebook as Jupyter would, headless: shared by the notebook tests.

``run_notebook`` writes the given values into the notebook's ``parameters`` cell (as
``fintts kaggle push`` does), runs every cell top to bottom in a fresh ipykernel with
nbclient, and returns the executed notebook; a cell that raises fails the test with the
cell's error. The kernel inherits this process's environment (``PYTHONPATH`` included),
minus the variables that would make fintts believe it runs on Kaggle.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient

from fintts.kaggle.parameters import load, with_parameters
from fintts.train.run import checkpoint

ROOT = Path(__file__).resolve().parents[1]
NOT_KAGGLE = ("KAGGLE_KERNEL_RUN_TYPE", "KAGGLE_URL_BASE")


def run_notebook(path: Path, *, cwd: Path, parameters: Mapping[str, Any] = {}, timeout: float = 600,
                 on_cell: Callable[[str, int], None] | None = None) -> Any:
    """``on_cell(cell_source, kernel_pid)``: told as each cell starts (a test signals the kernel there, as Kaggle does)."""
    notebook = nbformat.from_dict(with_parameters(load(path), parameters) if parameters else load(path))
    saved = {name: os.environ.pop(name) for name in NOT_KAGGLE if name in os.environ}
    client = NotebookClient(notebook, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(cwd)}})
    if on_cell is not None:
        client.on_cell_execute = lambda cell, cell_index: on_cell(cell.source, client.km.provisioner.pid)
    try:
        client.execute()
    finally:
        os.environ.update(saved)
    return notebook


def text_output(notebook: Any) -> str:
    """Everything the cells printed (streams and plain-text results), in order."""
    parts = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                parts.append(output["text"])
            elif "data" in output and "text/plain" in output["data"]:
                parts.append(output["data"]["text/plain"])
    return "".join(parts)


def output_types(notebook: Any) -> set[str]:
    """The MIME types of the cells' rich outputs (``image/png``, ``text/html`` of audio players...)."""
    return {kind for cell in notebook.cells for output in cell.get("outputs", []) for kind in output.get("data", {})}


@contextlib.contextmanager
def stopped_at_a_checkpoint(store: Path, after: int, below: float = math.inf) -> Iterator[Callable[[str, int], None]]:
    """An ``on_cell`` hook that, once the training cell starts, SIGTERMs the kernel when ``store``'s newest checkpoint is
    past step ``after`` (and before ``below``), as Kaggle ends a session at its limit: the kernel's ``launch`` passes
    it to the training, which saves and ends paused. A session so ended has the same steps on a busy machine as on an
    idle one, where a budget of seconds may buy none. The watch ends with the block."""
    done = threading.Event()

    def watch(kernel: int) -> None:
        while not done.wait(0.05):
            latest = checkpoint.read_latest(store)
            if latest and after < checkpoint.step_of(latest) < below:
                os.kill(kernel, signal.SIGTERM)
                return

    def on_cell(source: str, kernel: int) -> None:
        if "launch(" in source:
            threading.Thread(target=watch, args=(kernel,), daemon=True).start()

    try:
        yield on_cell
    finally:
        done.set()
