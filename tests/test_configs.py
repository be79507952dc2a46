"""Every shipped config loads and validates; notebooks are valid notebooks using the public API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fintts.train.config import load_config

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("path", sorted((ROOT / "configs").glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_configs_validate(path):
    config = load_config(path)
    assert config.train.task == "vits" and config.train.batch_size > 0


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks").glob("*.ipynb")), ids=lambda p: p.name)
def test_notebooks_are_thin_shells_over_the_public_api(path):
    notebook = json.loads(path.read_text())
    code = "".join("".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code")
    assert "fintts" in code
    assert "_" + "prepare" not in code and "Trainer(" not in code  # public entry points only
