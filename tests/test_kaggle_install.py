"""The training notebook's install cell, run in a fresh virtual environment against a read-only folder of wheels."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import sysconfig

import pytest

from fintts.kaggle.parameters import load
from fintts.kaggle.wheels import SOURCES
from notebook_helpers import ROOT

NOTEBOOK = ROOT / "notebooks" / "kaggle_train.ipynb"
VERSION = "0.1.0.post999"  # not the version installed here, so the cell has something to install


def install_cell() -> str:
    cells = [c for c in load(NOTEBOOK)["cells"] if c["cell_type"] == "code" and "pip" in "".join(c["source"])]
    assert len(cells) == 1
    return "".join(cells[0]["source"])


@pytest.mark.slow
def test_the_install_cell_installs_from_a_read_only_folder_without_the_index_and_then_does_nothing(tmp_path):
    # a wheel of this checkout under another version, as `fintts kaggle wheels` builds it (from a copy)
    source = tmp_path / "source"
    source.mkdir()
    for name in SOURCES:
        copy = shutil.copytree if (ROOT / name).is_dir() else shutil.copy2
        copy(ROOT / name, source / name)
    pyproject = source / "pyproject.toml"
    pyproject.write_text(re.sub(r'(?m)^version = ".*"$', f'version = "{VERSION}"', pyproject.read_text()))
    wheels = tmp_path / "input" / "fintts-wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels), str(source)],
                   check=True)
    (wheels / "demo.yaml").write_text("task: vits\n")
    for path in [wheels, *wheels.iterdir()]:  # Kaggle mounts inputs read-only
        path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    # a new environment that sees this machine's packages (torch...) through a path file, but not fintts
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    own = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True).stdout.strip()
    # a path file adds the directory but runs none of its own path files, so the editable fintts stays out of sight
    (venv / own.split(str(venv) + "/")[1] / "system.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_FIND_LINKS", "PIP_INDEX_URL")}
    env["PIP_NO_INDEX"] = "1"  # no network either way: the cell must manage with the folder
    script = f"WHEELS = {str(wheels)!r}\nCONFIG = 'demo.yaml'\n{install_cell()}\nprint('config', config)\n"

    first = subprocess.run([python, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert first.returncode == 0, first.stdout + first.stderr
    assert f"installed fintts {VERSION} from {wheels}" in first.stdout
    assert f"config {wheels / 'demo.yaml'}" in first.stdout
    where = subprocess.run([python, "-c", "import fintts, importlib.metadata as m; print(m.version('fintts'), fintts.__file__)"],
                           capture_output=True, text=True, env=env, cwd=tmp_path, check=True).stdout.split()
    assert where[0] == VERSION and where[1].startswith(str(venv))
    assert sorted(p.name for p in wheels.iterdir()) == ["demo.yaml", f"fintts-{VERSION}-py3-none-any.whl"]

    again = subprocess.run([python, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert again.returncode == 0 and f"fintts {VERSION} is installed" in again.stdout, again.stderr
