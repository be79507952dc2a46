"""notebooks/kaggle_train.ipynb executed top to bottom, twice, as a Kaggle session would run it."""

from __future__ import annotations

import json

import pytest
import yaml

from fintts.tts.demo import CORPUS as DEMO_CORPUS
from notebook_helpers import ROOT, output_types, run_notebook, text_output

NOTEBOOK = ROOT / "notebooks" / "kaggle_train.ipynb"


@pytest.mark.slow
def test_the_training_notebook_runs_a_session_and_the_next_run_resumes_it(tmp_path):
    # the demo config, validating after every step (4 held-out clips) so the last cell has samples to play
    demo = yaml.safe_load((ROOT / "configs" / "demo.yaml").read_text())
    (tmp_path / "demo.yaml").write_text(yaml.safe_dump({**demo, "eval_every": 1, "mcd_items": 4}))
    parameters = {"CONFIG": str(tmp_path / "demo.yaml"), "DATA": str(DEMO_CORPUS), "STORE": "runs/demo", "BUDGET": "20s"}

    first = text_output(run_notebook(NOTEBOOK, cwd=tmp_path, parameters=parameters))
    assert "is installed" in first  # the install cell found this fintts and installed nothing
    assert "Good clips: 204" in first  # fintts check
    assert "starting run 'demo'" in first and "fintts session summary" in first
    status = json.loads((tmp_path / "runs/demo/status.json").read_text())
    assert status["state"] == "paused" and status["step"] > 0

    # the next session carries the config's text itself, as `fintts kaggle push --config PATH` stages it
    text = (tmp_path / "demo.yaml").read_text()
    (tmp_path / "demo.yaml").unlink()
    carried = {**parameters, "CONFIG": "demo.yaml", "CONFIG_YAML": text}
    second = run_notebook(NOTEBOOK, cwd=tmp_path, parameters=carried)
    out = text_output(second)
    assert f"resuming run 'demo' from step-{status['step']:08d}" in out
    after = json.loads((tmp_path / "runs/demo/status.json").read_text())
    assert after["step"] > status["step"] and len(after["sessions"]) == 2
    shown = output_types(second)
    assert "image/png" in shown and "text/html" in shown  # the loss plot and the samples' audio players
    assert "Run this notebook again" in out and f"continues from step {after['step']}" in out
