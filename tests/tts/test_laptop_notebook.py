"""notebooks/laptop_voice.ipynb on its first Run All, as a person runs it: from notebooks/ of a checkout, installing fintts.

The notebook runs in a kernel of its own virtual environment (with the system's packages, so
that pip finds fintts's dependencies installed and only fintts itself is new), in the
notebooks/ folder of a copy of this checkout, with the parameters cell as shipped except for
the voice's repo and where the files go. Its install cell must find the checkout and install
it there; the voice's repo is private and the token comes from ``HF_TOKEN`` (the prompt for a
typed token cannot run headless).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import nbformat
import pytest
import soundfile as sf
from nbclient import NotebookClient
from test_voice import tiny_voice, upload_voice

from fintts.kaggle.parameters import load, with_parameters
from hub_helpers import TOKEN
from notebook_helpers import ROOT

#: What a checkout holds that the notebook needs: fintts's sources and the notebook.
CHECKOUT = ("pyproject.toml", "setup.py", "README.md", "fintts", "notebooks/laptop_voice.ipynb")


@pytest.mark.slow  # a virtual environment and a pip install of fintts: about a minute
def test_the_laptop_notebook_works_on_its_first_run_all_from_a_checkout(tmp_path, hub_env, monkeypatch):
    checkout = tmp_path / "fintts"
    for name in CHECKOUT:
        source, target = ROOT / name, checkout / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(source, target)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    python = venv / "bin" / "python"
    kernels = tmp_path / "jupyter" / "kernels" / "laptop"
    kernels.mkdir(parents=True)
    (kernels / "kernel.json").write_text(json.dumps({
        "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"], "display_name": "laptop", "language": "python",
    }))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.delenv("PYTHONPATH", raising=False)  # the kernel imports the fintts its install cell installed
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    upload_voice(hub_env, tiny_voice(tmp_path / "trained", ["solo"]))

    out, voice = tmp_path / "huomenta.wav", tmp_path / "voices" / "mine"
    settings = {"REPO": "alice/voice", "VOICE": str(voice), "OUT": str(out)}  # SOURCE and INSTALL as shipped
    notebook = nbformat.reads(json.dumps(with_parameters(load(checkout / "notebooks" / "laptop_voice.ipynb"), settings)), as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name="laptop", resources={"metadata": {"path": str(checkout / "notebooks")}}).execute()

    assert sf.info(out).duration > 0.1 and (voice / "model" / "model.onnx").is_file()
    where = subprocess.run([str(python), "-c", "import fintts; print(fintts.__file__)"], cwd=tmp_path, capture_output=True, text=True,
                           check=True)
    assert where.stdout.startswith(str(venv))  # installed from the checkout by the notebook, not the test's own fintts
    outputs = json.dumps([cell.get("outputs", []) for cell in notebook.cells])
    assert "data:audio/x-wav;base64" in outputs and TOKEN not in outputs
