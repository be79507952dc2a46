"""notebooks/kaggle_train.ipynb executed top to bottom as a Kaggle session would run it: twice, and where it must stop."""

from __future__ import annotations

import json

import nbformat
import pytest
import yaml
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from fintts.kaggle.parameters import load, with_parameters
from fintts.kaggle.secret import MISSING
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


def run_until_it_stops(cwd, parameters):
    """The training notebook run top to bottom until a cell raises, as Run All does: the notebook and the error."""
    notebook = nbformat.from_dict(with_parameters(load(NOTEBOOK), parameters))
    with pytest.raises(CellExecutionError) as raised:
        NotebookClient(notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(cwd)}}).execute()
    return notebook, raised.value


def executed(notebook, text: str) -> bool:
    """Whether the code cell whose source holds ``text`` ran."""
    return next(c for c in notebook.cells if c.cell_type == "code" and text in c.source).execution_count is not None


def test_without_the_hf_token_the_notebook_stops_before_the_corpus_or_training(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # no saved login either
    notebook, error = run_until_it_stops(tmp_path, {"CONFIG": "demo.yaml", "REPO": "alice/my-voice"})
    assert error.ename == "MissingSecret" and "Add-ons → Secrets" in error.evalue
    assert MISSING in text_output(notebook)
    assert not executed(notebook, "fintts check") and not executed(notebook, "launch(")


def test_a_corpus_without_a_usable_clip_stops_the_notebook_at_the_check(tmp_path):
    corpus = tmp_path / "my-voice"
    (corpus / "wavs").mkdir(parents=True)  # the transcripts, and none of the clips (an upload that dropped wavs/)
    (corpus / "metadata.csv").write_text("a_0001|Hyvää huomenta.\na_0002|Kello on seitsemän.\n", encoding="utf-8")
    notebook, error = run_until_it_stops(tmp_path, {"CONFIG": str(ROOT / "configs" / "demo.yaml"), "DATA": str(corpus)})
    assert error.ename == "RuntimeError" and f"no usable clip in {corpus}" in error.evalue
    assert "a_0001" in text_output(notebook)  # fintts check's own report of each clip
    assert not executed(notebook, "launch(") and not (tmp_path / "runs").exists()
