"""Executing a notebook as Jupyter would, headless: shared by the notebook tests.

``run_notebook`` writes the given values into the notebook's ``parameters`` cell (as
``fintts kaggle push`` does), runs every cell top to bottom in a fresh ipykernel with
nbclient, and returns the executed notebook; a cell that raises fails the test with the
cell's error. The kernel inherits this process's environment (``PYTHONPATH`` included),
minus the variables that would make fintts believe it runs on Kaggle.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient

from fintts.kaggle.parameters import load, with_parameters

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
