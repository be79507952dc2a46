"""Every shipped config loads and validates; notebooks are valid notebooks using the public API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fintts.cli import main
from fintts.errors import ConfigError
from fintts.train.config import load_config

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("path", sorted((ROOT / "configs").glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_configs_validate(path):
    config = load_config(path)
    assert config.train.task in ("vits", "chatterbox") and config.train.batch_size > 0


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks").glob("*.ipynb")), ids=lambda p: p.name)
def test_notebooks_are_thin_shells_over_the_public_api(path):
    notebook = json.loads(path.read_text())
    code = "".join("".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code")
    assert "fintts" in code
    assert "_" + "prepare" not in code and "Trainer(" not in code  # public entry points only
    shell = [line for line in code.splitlines() if line.lstrip().startswith(("!", "%sx", "%system"))]
    assert not shell, f"{path.name} runs shell text (built from a config, it would run someone else's commands): {shell}"


@pytest.mark.parametrize(
    ("setting", "value"),
    [("text_column", "text; touch /tmp/PWNED #"), ("speaker_column", "$(id)"), ("audio_column", "a`b`"), ("split", "train --x"),
     ("split", "../validated"), ("text_column", " text"), ("format", "ljspeech; id")],
)
def test_a_corpus_setting_that_is_not_a_name_is_refused_at_load_naming_it(setting, value):
    with pytest.raises(ConfigError) as refused:
        load_config(ROOT / "configs" / "demo.yaml", {setting: value})
    assert f"{setting}: {value!r}" in str(refused.value)


def test_usual_column_and_split_names_load():
    names = {"text_column": "normalized text", "speaker_column": "client_id", "audio_column": "audio.path", "split": "test.clean"}
    task = load_config(ROOT / "configs" / "demo.yaml", names).task
    assert (task.text_column, task.split) == ("normalized text", "test.clean")


def test_fintts_check_refuses_a_column_that_is_not_a_name(capsys):
    assert main(["check", "demo", "--text-column", "text; id"]) == 2
    assert "text_column: 'text; id' is not a column's name" in capsys.readouterr().err
