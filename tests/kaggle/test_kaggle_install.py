"""The training notebook's install cell, run in a fresh virtual environment against a read-only folder of wheels."""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import stat
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from fintts.kaggle.parameters import load
from fintts.kaggle.wheels import SOURCES
from notebook_helpers import ROOT

NOTEBOOK = ROOT / "notebooks" / "kaggle_train.ipynb"
VERSION = "0.1.0.post999"  # not the version installed here, so the cell has something to install


def install_cell(**parameters: str) -> str:
    """The notebook's install cell after its parameters cell (whose names it reads), ``parameters`` set as a push sets them."""
    code = [c for c in load(NOTEBOOK)["cells"] if c["cell_type"] == "code"]
    defaults = [c for c in code if "parameters" in c.get("metadata", {}).get("tags", [])]
    cells = [c for c in code if "pip" in "".join(c["source"])]
    assert len(cells) == 1 and len(defaults) == 1
    given = "".join(f"{name} = {value!r}\n" for name, value in parameters.items())
    return "".join(defaults[0]["source"]) + "\n" + given + "".join(cells[0]["source"])


def dataset_wheel(tmp_path, *, dependency: str = "") -> Path:
    """The read-only wheels dataset with a wheel of this checkout under :data:`VERSION`, as `fintts kaggle wheels` builds it.

    ``dependency``: one more requirement of the wheel, which the dataset does not hold.
    """
    source = tmp_path / "source"
    source.mkdir()
    for name in SOURCES:
        copy = shutil.copytree if (ROOT / name).is_dir() else shutil.copy2
        copy(ROOT / name, source / name)
    pyproject = source / "pyproject.toml"
    text = re.sub(r'(?m)^version = ".*"$', f'version = "{VERSION}"', pyproject.read_text())
    if dependency:
        text = text.replace("dependencies = [\n", f'dependencies = [\n    "{dependency}",\n', 1)
    pyproject.write_text(text)
    wheels = tmp_path / "input" / "fintts-wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels), str(source)],
                   check=True)
    (wheels / "demo.yaml").write_text("task: vits\n")
    for path in [wheels, *wheels.iterdir()]:  # Kaggle mounts inputs read-only
        path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    return wheels


def kaggle_like_python(tmp_path) -> str:
    """A new environment that sees this machine's packages (torch...) through a path file, but not fintts."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    own = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True).stdout.strip()
    # a path file adds the directory but runs none of its own path files, so the editable fintts stays out of sight
    (venv / own.split(str(venv) + "/")[1] / "system.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def built_wheel(folder: Path, filename: str, files: dict[str, str]) -> None:
    """A minimal wheel ``filename`` in ``folder`` holding ``files`` (what anyone can publish on an index)."""
    name, version = filename.split("-")[:2]
    info = f"{name}-{version}.dist-info"
    files = {**files, f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{path},,\n" for path in [*files, f"{info}/RECORD"])
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(folder / filename, "w") as archive:
        for path, text in {**files, f"{info}/RECORD": record}.items():
            archive.writestr(path, text)


def simple_index(root: Path, wheels: dict[str, Path]) -> str:
    """A PEP 503 index in ``root`` offering each project's one wheel; its ``file://`` URL."""
    for project, wheel in wheels.items():
        (root / project).mkdir(parents=True)
        (root / project / "index.html").write_text(f'<html><body><a href="{wheel.as_uri()}">{wheel.name}</a></body></html>\n')
    return root.as_uri() + "/"


@pytest.mark.slow
def test_the_install_cell_installs_from_a_read_only_folder_without_the_index_and_then_does_nothing(tmp_path):
    wheels = dataset_wheel(tmp_path)
    python = kaggle_like_python(tmp_path)
    venv = tmp_path / "venv"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_FIND_LINKS", "PIP_INDEX_URL")}
    env["PIP_NO_INDEX"] = "1"  # no network either way: the cell must manage with the folder
    script = f"{install_cell(WHEELS=str(wheels), CONFIG='demo.yaml')}\nprint('config', config)\n"

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


@pytest.mark.slow
def test_the_install_cell_installs_the_datasets_wheel_when_the_index_offers_another_fintts_of_that_version(tmp_path):
    # the dataset lacks a dependency, so the cell falls back to the index, which also offers a fintts of the same
    # version (with a build number, which pip prefers): the session must still get the dataset's own wheel
    wheels = dataset_wheel(tmp_path, dependency="fintts-index-only-dep")
    offered = tmp_path / "offered"
    built_wheel(offered, "fintts_index_only_dep-1.0-py3-none-any.whl", {"fintts_index_only_dep.py": ""})
    built_wheel(offered, f"fintts-{VERSION}-1-py3-none-any.whl", {"fintts/__init__.py": "IMPOSTOR = True\n"})
    index = simple_index(tmp_path / "simple", {"fintts-index-only-dep": offered / "fintts_index_only_dep-1.0-py3-none-any.whl",
                                               "fintts": offered / f"fintts-{VERSION}-1-py3-none-any.whl"})
    python = kaggle_like_python(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_FIND_LINKS", "PIP_NO_INDEX")}
    env["PIP_INDEX_URL"] = index
    script = f"{install_cell(WHEELS=str(wheels), CONFIG='demo.yaml')}\n"
    result = subprocess.run([python, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    probe = ("import fintts, importlib.util as u; "
             "print(hasattr(fintts, 'IMPOSTOR'), hasattr(fintts, 'load_voice'), bool(u.find_spec('fintts_index_only_dep')))")
    found = subprocess.run([python, "-c", probe], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert found.stdout.split() == ["False", "True", "True"], found.stdout + found.stderr  # the dataset's fintts, the index's dependency


def stand_in_pip(folder: Path) -> Path:
    """A ``pip`` module that installs nothing and writes the arguments it was run with to ``folder/asked``, one a line."""
    (folder / "pip").mkdir(parents=True)
    (folder / "pip" / "__init__.py").write_text("")
    asked = folder / "asked"
    (folder / "pip" / "__main__.py").write_text(f"import sys\nopen({str(asked)!r}, 'a').write('\\n'.join(sys.argv[1:]) + '\\n')\n")
    return asked


@pytest.mark.process
@pytest.mark.parametrize(("config", "extras"), [("chatterbox-fi.yaml", "[train,chatterbox]"), ("mms-fin.yaml", "[train]")])
def test_the_install_cell_installs_the_chatterbox_extra_for_a_chatterbox_config_only(tmp_path, config, extras):
    # the dataset as `fintts kaggle wheels` lays it out: the wheel (pip is a stand-in here, so its name is enough) and
    # the shipped configs; the cell reads the config's task before fintts is there to read it
    wheels = tmp_path / "input" / "fintts-wheels"
    wheels.mkdir(parents=True)
    (wheels / f"fintts-{VERSION}-py3-none-any.whl").write_bytes(b"")
    shutil.copy2(ROOT / "configs" / config, wheels / config)
    asked = stand_in_pip(tmp_path / "stand_ins")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "stand_ins")}
    script = install_cell(WHEELS=str(wheels), CONFIG=config, INPUT=str(tmp_path / "input"))
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{wheels / f'fintts-{VERSION}-py3-none-any.whl'}{extras}" in asked.read_text().splitlines()


@pytest.mark.process
def test_the_install_cell_adds_the_chatterbox_extra_to_an_installed_fintts_that_lacks_it(tmp_path):
    # the dataset's fintts is the one installed (a session run again), but the chatterbox package is not there
    installed = importlib.metadata.version("fintts")
    wheels = tmp_path / "input" / "fintts-wheels"
    wheels.mkdir(parents=True)
    (wheels / f"fintts-{installed}-py3-none-any.whl").write_bytes(b"")
    asked = stand_in_pip(tmp_path / "stand_ins")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "stand_ins")}
    for config, extras in (("task: vits\n", None), ("task: chatterbox\n", "[train,chatterbox]")):
        script = install_cell(WHEELS=str(wheels), CONFIG="run.yaml", CONFIG_YAML=config, INPUT=str(tmp_path / "input"))
        result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
        assert result.returncode == 0, result.stdout + result.stderr
        lines = asked.read_text().splitlines() if asked.exists() else []
        if extras is None:
            assert lines == [] and f"fintts {installed} is installed" in result.stdout
        else:
            assert f"{wheels / f'fintts-{installed}-py3-none-any.whl'}{extras}" in lines
