"""A pushed training notebook run as the local Kaggle runs a session of it: shared by the Kaggle tests.

:func:`run_pushed_notebook` is what a :class:`~fintts_stand_ins.kaggle_server.KaggleServer` session does
with the notebook ``fintts kaggle push`` sent: each pushed dataset is mounted where the era mounts it, under
an input folder of the session's own (the notebook's ``INPUT``), the session gets the secrets Kaggle passes
to that version, and the cells run headless in a fresh kernel whose working folder is the session's (its
``/kaggle/working``), with a Hugging Face cache of its own: every session starts on an empty disk, as on
Kaggle. The kernel inherits this process's environment minus the Kaggle client's variables and the
laptop's ``HF_TOKEN`` (the token comes from the secret or the token dataset, as on Kaggle). Its Python is
this one, which sees this checkout's fintts, or a session's own image (``python``: an environment
without fintts, into which the notebook's install cell installs the dataset's wheel, as on Kaggle).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import nbformat
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from fintts_stand_ins.kaggle_server import SECRETS_VARIABLE, secrets_module
from hub_helpers import TOKEN
from notebook_helpers import NOT_KAGGLE, ROOT, text_output

#: ``on_cell(cell_source, kernel_pid)``: called as each cell starts, in the thread that runs the notebook.
CellHook = Callable[[str, int], None]


def run_pushed_notebook(kaggle: Any, push: dict, version: int, folder: Path, *, last: str | None = None,
                        env: Mapping[str, str] = {}, on_cell: CellHook | None = None,
                        timeout: float = 180, python: Path | None = None) -> tuple[bool, str]:
    """Run the notebook of ``push`` (``version`` of its kernel) as its session, in ``folder``; ``(ok, log)``.

    ``last``: run the cells up to the first whose source holds this text (``None``: all of them, to the summary).
    ``env``: variables the session has besides (what the machine it runs on sets). ``on_cell``: told when each
    cell starts, with the kernel's process id (a test signals it there, as Kaggle does at a session's end).
    ``python``: the kernel's interpreter, the session's image (:func:`image_kernel`); this checkout is then not on its
    path, so what the cells import is what the install cell installed. A cell that raises ends the session: not ok,
    its log the notebook's output and the error.
    """
    for ref in push["datasetDataSources"]:
        kaggle.mount(ref, folder / "input")
    secrets = {label: TOKEN for label in kaggle.secrets(push["slug"], version)}
    notebook = nbformat.reads(push["text"], as_version=4)
    if last is not None:
        notebook.cells = notebook.cells[: next(i for i, cell in enumerate(notebook.cells) if last in cell.source) + 1]
    parameters = next(cell for cell in notebook.cells if "parameters" in cell.metadata.get("tags", []))
    parameters.source += f"\nINPUT = {str(folder / 'input')!r}  # the test's /kaggle/input"
    session_env = {k: v for k, v in os.environ.items() if k != "HF_TOKEN" and k not in NOT_KAGGLE and not k.startswith("KAGGLE_")}
    module = str(secrets_module(folder / "image", secrets))
    session_env |= {"HF_HOME": str(folder / "hf"), SECRETS_VARIABLE: "the session's key to its secrets",
                    "PYTHONPATH": module if python else os.pathsep.join([module, checkout_first()]), **env}
    kernel = {"km": image_kernel(python, folder / "image")} if python else {"kernel_name": "python3"}
    client = NotebookClient(notebook, timeout=timeout, resources={"metadata": {"path": str(folder)}}, **kernel)
    if on_cell is not None:
        client.on_cell_execute = lambda cell, cell_index: on_cell(cell.source, client.km.provisioner.pid)
    try:
        client.execute(env=session_env)
    except CellExecutionError as err:
        return False, text_output(notebook) + str(err)
    return True, text_output(notebook)


def image_kernel(python: Path, folder: Path) -> KernelManager:
    """A kernel manager whose kernel runs ``python`` (ipykernel as this environment's ``python3`` kernel runs it)."""
    spec = folder / "kernels" / "image"
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(json.dumps({"argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                                                  "display_name": "the session's image", "language": "python"}))
    return KernelManager(kernel_name="image", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(spec.parent)]))


def checkout_first() -> str:
    """PYTHONPATH for a `python -m fintts` process that runs this checkout (not whichever fintts pip installed)."""
    return os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
