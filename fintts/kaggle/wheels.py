"""The ``fintts-wheels`` dataset: what a Kaggle session installs fintts from.

Kaggle mounts a notebook's datasets read-only, and ``pip install <source folder>`` writes
into the folder it builds (setuptools' ``build/`` and ``*.egg-info``), so a session installs
a *wheel*: ``pip install --no-index --find-links /kaggle/input/fintts-wheels <the wheel's path>[train]``
reads the folder and writes nothing into it (the notebook's install cell). The wheel is named
by its path, never as ``fintts==V``: when the cell falls back to the index for a dependency the
dataset lacks, a package named fintts published there by anyone is never a candidate (the
session holds ``HF_TOKEN``). The dataset holds:

- ``fintts-<version>-py3-none-any.whl``, built from this checkout;
- fintts's ``configs/*.yaml``, so the notebook names a config by its file name;
- with ``--offline``, for sessions without the internet: a wheel of every package
  ``fintts[train,chatterbox]`` needs (and what they need) — the chatterbox extra too, as the
  dataset serves every config and the notebook installs it for ``task: chatterbox`` — **except
  torch, torchaudio and torch's CUDA libraries** (``triton``, ``nvidia-*``, ``cuda-*``) —
  Kaggle's image always has torch and torchaudio, built for its GPUs, and a second torch would
  be gigabytes. Versions are resolved on this machine and downloaded for
  Kaggle's Python (:data:`KAGGLE_PYTHON`, ``--python-version``) and Linux (manylinux up to
  glibc 2.35, x86-64); packages published only as source are built into wheels here. pip
  then installs from the folder what the image lacks and keeps what it has.

``fintts kaggle wheels`` builds the folder and uploads it as a private dataset (a new
dataset the first time, a new version after that); ``--dry-run --out DIR`` only builds.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fintts.kaggle.client import KaggleError, calling, connect
from fintts.kaggle.kernel import KAGGLE_PYTHON, PROJECT, WHEELS_SLUG
from fintts.kaggle.visibility import private_or_absent
from fintts.train.config import SHIPPED_CONFIGS, ConfigError

#: Kaggle's image is Ubuntu 22.04 (glibc 2.35) on x86-64: manylinux wheels up to 2.35 run there.
KAGGLE_GLIBC_MINOR = 35
#: Packages never shipped: Kaggle's image has torch, built for its CUDA, and these come with it; torchaudio (which
#: chatterbox-light asks for) too: Kaggle/docker-python's Dockerfile.tmpl keeps the Colab base image's torch packages
#: and its tests/test_torchaudio.py loads audio with it. A torchaudio from the registry would want another torch.
IMAGE_HAS = re.compile(r"^(torch|torchaudio|triton|nvidia-.*|cuda-.*)$")
#: What the dataset's dependency wheels are resolved for: training, and Chatterbox's package (docs/chatterbox.md)
EXTRAS = "train,chatterbox"
METADATA = "dataset-metadata.json"
#: What a wheel of fintts is built from (copied, so the checkout is not written into).
SOURCES = ("pyproject.toml", "setup.py", "README.md", "fintts")


def _pip(*args: str) -> None:
    result = subprocess.run([sys.executable, "-m", "pip", *args, "--disable-pip-version-check"], capture_output=True, text=True)
    if result.returncode != 0:
        raise KaggleError(f"pip {args[0]} failed:\n{(result.stderr or result.stdout)[-3000:]}")


def build(out: Path, *, offline: bool = False, python: str = KAGGLE_PYTHON, log: Callable[[str], None] = print) -> Path:
    """Build the dataset's files into ``out`` (which must be new or empty); return the fintts wheel."""
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"{out} is not empty: the dataset must hold one fintts wheel, so build into a new folder")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="fintts-wheel-") as tmp:
        for name in SOURCES:
            source, target = PROJECT / name, Path(tmp) / name
            if source.is_dir():
                shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                shutil.copy2(source, target)
        _pip("wheel", "--no-deps", "--no-build-isolation", "--quiet", "--wheel-dir", str(out), tmp)
    wheel = fintts_wheel(out)
    for config in sorted(SHIPPED_CONFIGS.glob("*.yaml")):
        shutil.copy2(config, out / config.name)
    log(f"built {wheel.name} and copied {len(list(SHIPPED_CONFIGS.glob('*.yaml')))} configs into {out}")
    if offline:
        _dependency_wheels(wheel, out, python, log)
    return wheel


def fintts_wheel(folder: Path) -> Path:
    """The one fintts wheel in ``folder`` (the notebook's install cell takes the version from its name)."""
    found = sorted(folder.glob("fintts-*.whl"))
    if len(found) != 1:
        raise ConfigError(f"{folder} must hold exactly one fintts wheel, found {len(found)}: build into a new folder")
    return found[0]


def _dependency_wheels(wheel: Path, out: Path, python: str, log: Callable[[str], None]) -> None:
    """Every package the fintts wheel pulls in, but torch's, as wheels for Kaggle (see the module's docstring)."""
    with tempfile.TemporaryDirectory(prefix="fintts-resolve-") as tmp:
        report = Path(tmp) / "report.json"
        # the training stack and the chatterbox package: one dataset serves every config
        _pip("install", "--dry-run", "--ignore-installed", "--quiet", "--report", str(report), f"{wheel}[{EXTRAS}]")
        resolved = [item["metadata"] for item in json.loads(report.read_text())["install"]]
    wanted = [f"{m['name']}=={m['version']}" for m in resolved if m["name"].lower() != "fintts" and not IMAGE_HAS.match(m["name"].lower())]
    log(f"downloading {len(wanted)} dependency wheels for Python {python} on Kaggle's Linux; torch is Kaggle's own")
    platforms = [f"--platform=manylinux_2_{minor}_x86_64" for minor in range(17, KAGGLE_GLIBC_MINOR + 1)]
    target = ["--only-binary=:all:", *platforms, "--python-version", python, "--implementation", "cp"]
    try:
        _pip("download", "--no-deps", "--quiet", "--dest", str(out), *target, *wanted)
    except KaggleError:  # some package is published as source only: find which, one by one
        for requirement in wanted:
            try:
                _pip("download", "--no-deps", "--quiet", "--dest", str(out), *target, requirement)
            except KaggleError:  # built into a wheel here (pure Python ones work anywhere)
                _pip("wheel", "--no-deps", "--quiet", "--wheel-dir", str(out), requirement)


def dataset_metadata(user: str, slug: str = WHEELS_SLUG) -> dict[str, Any]:
    """``dataset-metadata.json``: a private dataset of the wheels (their licences are their own)."""
    return {"title": "fintts wheels", "id": f"{user}/{slug}", "licenses": [{"name": "other"}],
            "subtitle": "fintts and the wheels a Kaggle session installs it from"}


def prepare(out: Path, *, user: str, offline: bool = False, python: str = KAGGLE_PYTHON,
            log: Callable[[str], None] = print) -> Path:
    """Build the dataset folder, with the ``dataset-metadata.json`` of ``user`` (the credentials' user; a dry run
    without credentials writes a placeholder, so building needs neither credentials nor Kaggle)."""
    build(out, offline=offline, python=python, log=log)
    (out / METADATA).write_text(json.dumps(dataset_metadata(user), indent=2) + "\n")
    return out


def upload(folder: Path, api: Any = None) -> str:
    """Create the private dataset from ``folder``, or add a version to it; returns its ``owner/slug``."""
    api = api or connect()
    ref = json.loads((folder / METADATA).read_text())["id"]
    wheel = fintts_wheel(folder)
    # absent only on a 404/403; a public one is refused (a version added to it would be public too)
    exists = private_or_absent(api, ref, risk="a version fintts adds would be public too",
                               instead="delete it there (fintts kaggle wheels then creates it private)")
    if exists:
        result = calling(f"add a version to {ref}", lambda: api.dataset_create_version(str(folder), wheel.name, quiet=True))
    else:
        result = calling(f"create {ref}", lambda: api.dataset_create_new(str(folder), public=False, quiet=True))
    if result is None or getattr(result, "error", None):
        raise KaggleError(f"Kaggle did not take {ref}: {getattr(result, 'error', 'no answer')}")
    return ref
