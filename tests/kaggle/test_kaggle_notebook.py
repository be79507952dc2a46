"""notebooks/kaggle_train.ipynb executed top to bottom as a Kaggle session would run it: twice, where it must stop,
and its check cell with a shared config."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest
import soundfile as sf
import yaml
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

import corpus_sources as sources
from fintts.kaggle.inputs import relocate
from fintts.kaggle.kernel import KAGGLE_PYTHON
from fintts.kaggle.notebook import check_corpus
from fintts.kaggle.parameters import load, read_parameters, with_parameters
from fintts.kaggle.secret import MISSING
from fintts.tts.corpus.data_names import DEMO_CORPUS
from fintts_stand_ins.kaggle_server import SECRETS_VARIABLE, secrets_module
from hub_helpers import REPO, TOKEN
from notebook_helpers import ROOT, output_types, run_notebook, stopped_at_a_checkpoint, text_output
from vits_helpers import TINY, TRAINING_ONLY

NOTEBOOK = ROOT / "notebooks" / "kaggle_train.ipynb"


@pytest.mark.slow
def test_the_training_notebook_runs_a_session_and_the_next_run_resumes_it(tmp_path):
    # the demo config, validating after every step (4 held-out clips) so the last cell has samples to play, and saving
    # after every step: each session ends (SIGTERM) after its first checkpoint, its budget only a bound
    demo = yaml.safe_load((ROOT / "configs" / "demo.yaml").read_text())
    (tmp_path / "demo.yaml").write_text(yaml.safe_dump({**demo, "eval_every": 1, "mcd_items": 4, "checkpoint_every_steps": 1}))
    store = tmp_path / "runs" / "demo"
    parameters = {"CONFIG": str(tmp_path / "demo.yaml"), "DATA": str(DEMO_CORPUS), "STORE": "runs/demo", "BUDGET": "10m"}

    with stopped_at_a_checkpoint(store, 0) as on_cell:
        first = text_output(run_notebook(NOTEBOOK, cwd=tmp_path, parameters=parameters, on_cell=on_cell))
    assert "is installed" in first  # the install cell found this fintts and installed nothing
    assert "Good clips: 204" in first  # fintts check
    # DATA is a folder where the config says `demo`: a run of its own by name (fintts.train.config.default_run_name),
    # kept in the STORE the notebook was given
    assert "starting run 'demo-corpus'" in first and "fintts session summary" in first
    status = json.loads((tmp_path / "runs/demo/status.json").read_text())
    assert status["state"] == "paused" and status["step"] > 0

    # the next session carries the config's text itself, as `fintts kaggle push --config PATH` stages it
    text = (tmp_path / "demo.yaml").read_text()
    (tmp_path / "demo.yaml").unlink()
    carried = {**parameters, "CONFIG": "demo.yaml", "CONFIG_YAML": text}
    with stopped_at_a_checkpoint(store, status["step"]) as on_cell:
        second = run_notebook(NOTEBOOK, cwd=tmp_path, parameters=carried, on_cell=on_cell)
    out = text_output(second)
    assert f"resuming run 'demo-corpus' from step-{status['step']:08d}" in out
    after = json.loads((tmp_path / "runs/demo/status.json").read_text())
    assert after["step"] > status["step"] and len(after["sessions"]) == 2
    shown = output_types(second)
    assert "image/png" in shown and "text/html" in shown  # the loss plot and the samples' audio players
    assert "Run this notebook again" in out and f"continues from step {after['step']}" in out


#: Run at the start of every Python process of the session (the kernel, pip, fintts check, the training's): one line of
#: what it inherited. A sitecustomize on PYTHONPATH is imported by each (Python's site module).
PROBE = """import json, os
with open({log!r}, "a") as log:
    log.write(json.dumps({{"argv": open("/proc/self/cmdline", "rb").read().decode().split("\\0"),
                          "token": any({token!r} in value for value in os.environ.values()),
                          "secrets": {secrets!r} in os.environ}}) + "\\n")
"""


def probed_processes(folder: Path) -> Path:
    """A folder for PYTHONPATH holding the probe above and a stand-in ``pip`` (``python -m pip`` finds it first: it
    installs nothing and exits 0, so the install cell goes on); the log the probe writes."""
    log = folder / "processes.jsonl"
    (folder / "pip").mkdir(parents=True)
    (folder / "pip" / "__init__.py").write_text("")
    (folder / "pip" / "__main__.py").write_text("")
    (folder / "sitecustomize.py").write_text(PROBE.format(log=str(log), token=TOKEN, secrets=SECRETS_VARIABLE))
    return log


@pytest.mark.slow
def test_the_token_reaches_the_training_alone_and_its_push_lands(tmp_path, hub, monkeypatch):
    """The secret as Kaggle passes it; pip (a new fintts wheel to install) and fintts check run without the token or
    Kaggle's key to the secrets in their environment, the training pushes to the Hub, and the kernel holds neither
    in its environment after it."""
    log = probed_processes(tmp_path / "probe")
    image = secrets_module(tmp_path / "image", {"HF_TOKEN": TOKEN})  # Kaggle's kaggle_secrets, this notebook's secret
    wheels = tmp_path / "input" / "fintts-wheels"
    wheels.mkdir(parents=True)
    (wheels / "fintts-0.0.1-py3-none-any.whl").write_bytes(b"")  # another version than this one: the cell runs pip
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump({**TINY, "max_steps": 1, "eval_every": 0, **TRAINING_ONLY}))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv(SECRETS_VARIABLE, "the session's key to its secrets")
    monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # no saved login
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(log.parent), str(image), str(ROOT), str(ROOT / "tests" / "stand_ins")]))
    notebook = load(NOTEBOOK)
    notebook["cells"].append({"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "id": "probe",
                              "source": f"print('after training:', sorted({{'HF_TOKEN', {SECRETS_VARIABLE!r}}} & set(os.environ)))"})
    path = tmp_path / "kaggle_train.ipynb"
    path.write_text(json.dumps(notebook))
    parameters = {"CONFIG": str(config), "DATA": str(DEMO_CORPUS), "REPO": REPO, "WHEELS": str(wheels),
                  "INPUT": str(tmp_path / "input")}

    out = text_output(run_notebook(path, cwd=tmp_path, parameters=parameters))
    assert "the Hugging Face token came from the Kaggle secret HF_TOKEN" in out and TOKEN not in out
    assert f"installed fintts 0.0.1 from {wheels}" in out and "Good clips: 204" in out
    assert hub.files(REPO)["latest"].decode().strip() == "step-00000001"  # the training's push, with the token
    started = [json.loads(line) for line in log.read_text().splitlines()]
    children = [p for p in started if "ipykernel_launcher" not in " ".join(p["argv"])]
    assert any(p["argv"][1:3] == ["-m", "pip"] for p in children) and any(p["argv"][1:4] == ["-m", "fintts", "check"]
                                                                          for p in children), started
    assert [p for p in children if p["token"] or p["secrets"]] == []
    assert "after training: []" in out


@pytest.mark.process
def test_the_corpus_check_gets_the_token_only_for_a_corpus_on_the_hub(tmp_path, hub, monkeypatch, capsys):
    """As the notebook's check cell calls it (the token out of the kernel's environment): a corpus on the disk is checked
    without the token, a private Hub dataset with it, which it could not read otherwise."""
    log = probed_processes(tmp_path / "probe")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # no saved login
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(log.parent), str(ROOT)]))
    on_disk = tmp_path / "on-disk.yaml"
    on_disk.write_text(f"task: vits\ndata: '{tiny_ljspeech(tmp_path / 'voice')}'\nformat: ljspeech\nmax_steps: 10\n")
    assert check_corpus(on_disk, token=TOKEN) == 0 and "Good clips: 2" in capsys.readouterr().out
    [checked] = [json.loads(line) for line in log.read_text().splitlines()]
    assert checked["argv"][1:4] == ["-m", "fintts", "check"] and not checked["token"]

    parquet = tmp_path / "train.parquet"
    sources.hub_parquet(parquet)  # 4 clips and a row without audio
    sources.publish_dataset(hub, "fintts-tester/fi-speech", parquet, TOKEN)  # a private dataset
    on_hub = tmp_path / "on-hub.yaml"
    on_hub.write_text("task: vits\ndata: hf://datasets/fintts-tester/fi-speech\nmax_steps: 10\n")
    assert check_corpus(on_hub) != 0 and "cannot download it from the Hub" in capsys.readouterr().out
    assert check_corpus(on_hub, token=TOKEN) == 0 and "Good clips: 4" in capsys.readouterr().out


def check_cells(tmp_path) -> Path:
    """The notebook up to its corpus check (install, check), as a notebook of its own."""
    notebook = load(NOTEBOOK)
    index = 1 + next(i for i, cell in enumerate(notebook["cells"]) if "".join(cell["source"]).startswith("**Check the corpus**"))
    path = tmp_path / "check.ipynb"
    path.write_text(json.dumps({**notebook, "cells": notebook["cells"][: index + 1]}))
    return path


def tiny_ljspeech(folder: Path) -> Path:
    (folder / "wavs").mkdir(parents=True)
    noise = np.random.default_rng(0).uniform(-0.3, 0.3, 16000).astype(np.float32)
    for name in ("a", "b"):
        sf.write(folder / "wavs" / f"{name}.wav", noise, 16000)
    (folder / "metadata.csv").write_text("a|Hyvää huomenta.\nb|Kello on seitsemän.\n", encoding="utf-8")
    return folder


@pytest.mark.slow  # two notebook kernels: about a minute on 2 shared cores
def test_the_check_cell_never_runs_a_shared_configs_values_as_shell_commands(tmp_path):
    # a corpus folder whose name is a command substitution, as `data` of someone else's config
    corpus = tiny_ljspeech(tmp_path / "voice $(touch PWNED-data)")
    config = f"task: vits\ndata: '{corpus}'\nformat: ljspeech\nmax_steps: 10\n"
    parameters = {"CONFIG": "shared.yaml", "CONFIG_YAML": config}
    out = text_output(run_notebook(check_cells(tmp_path), cwd=tmp_path, parameters=parameters, timeout=120))
    assert "Good clips: 2" in out and f"Corpus {corpus}" in out  # the folder, read by its real name
    assert not list(tmp_path.rglob("PWNED*"))
    # a column name that ends one shell command and starts another is refused when the config loads
    config = f"task: vits\ndata: '{corpus}'\ntext_column: 'text; touch {tmp_path}/PWNED-column #'\nmax_steps: 10\n"
    with pytest.raises(CellExecutionError) as refused:
        run_notebook(check_cells(tmp_path), cwd=tmp_path, parameters={**parameters, "CONFIG_YAML": config}, timeout=120)
    assert "text_column: 'text; touch" in str(refused.value) and "is not a column's name" in str(refused.value)
    assert not list(tmp_path.rglob("PWNED*"))


def run_until_it_stops(cwd, parameters):
    """The training notebook run top to bottom until a cell raises, as Run All does: the notebook and the error."""
    notebook = nbformat.from_dict(with_parameters(load(NOTEBOOK), parameters))
    with pytest.raises(CellExecutionError) as raised:
        NotebookClient(notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(cwd)}}).execute()
    return notebook, raised.value


def executed(notebook, text: str) -> bool:
    """Whether the code cell whose source holds ``text`` ran."""
    return next(c for c in notebook.cells if c.cell_type == "code" and text in c.source).execution_count is not None


@pytest.mark.process
def test_without_the_hf_token_the_notebook_stops_before_the_corpus_or_training(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # no saved login either
    notebook, error = run_until_it_stops(tmp_path, {"CONFIG": "demo.yaml", "REPO": "alice/my-voice"})
    assert error.ename == "MissingSecret" and "Add-ons → Secrets" in error.evalue
    assert MISSING in text_output(notebook)
    assert not executed(notebook, "pip") and not executed(notebook, "check_corpus(")  # before any install: seconds
    assert not executed(notebook, "launch(")


@pytest.mark.process
@pytest.mark.parametrize("layout", ["datasets/alice/my-voice", "my-voice"])  # Kaggle's mount since 2026, and before it
def test_the_notebook_finds_the_corpus_dataset_under_either_mount_layout(tmp_path, layout):
    tiny_ljspeech(tmp_path / "input" / layout)
    parameters = {"CONFIG": str(ROOT / "configs" / "demo.yaml"), "CORPUS": "alice/my-voice", "INPUT": str(tmp_path / "input")}
    out = text_output(run_notebook(check_cells(tmp_path), cwd=tmp_path, parameters=parameters, timeout=120))
    assert "Good clips: 2" in out and f"Corpus {tmp_path / 'input' / layout}" in out


@pytest.mark.process
def test_a_configs_own_input_paths_are_read_under_the_layout_kaggle_mounted(tmp_path):
    # a config written for /kaggle/input/<slug> in a session that mounts /kaggle/input/datasets/<owner>/<slug> (2026)
    root = tmp_path / "input"
    tiny_ljspeech(root / "datasets" / "alice" / "my-voice")
    config = f"task: vits\ndata: '{root}/my-voice'\nformat: ljspeech\nmax_steps: 10\n"
    out = text_output(run_notebook(check_cells(tmp_path), cwd=tmp_path, timeout=120,
                                   parameters={"CONFIG": "mine.yaml", "CONFIG_YAML": config, "INPUT": str(root)}))
    assert "Good clips: 2" in out and f"Corpus {root / 'datasets' / 'alice' / 'my-voice'}" in out
    # and the other way round, for a copy of the MMS voice (init) or its discriminator's file
    (root / "mms-tts-fin" / "full_models").mkdir(parents=True)
    assert relocate(f"{root}/datasets/bob/mms-tts-fin/full_models", str(root)) == str(root / "mms-tts-fin" / "full_models")
    assert relocate("facebook/mms-tts-fin", str(root)) == "facebook/mms-tts-fin"  # not a path under the inputs


@pytest.mark.process
def test_a_session_on_another_python_than_the_offline_wheels_stops_before_installing(tmp_path):
    wheels = tmp_path / "input" / "datasets" / "alice" / "fintts-wheels"
    wheels.mkdir(parents=True)
    (wheels / "numpy-2.1.0-cp39-cp39-manylinux_2_17_x86_64.whl").write_bytes(b"")  # built for another Python than this one
    notebook, error = run_until_it_stops(tmp_path, {"CONFIG": "demo.yaml", "INPUT": str(tmp_path / "input")})
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert error.ename == "RuntimeError" and f"fintts kaggle wheels --offline --python-version {here}" in error.evalue
    assert f"the notebook was pushed for Kaggle's Python {KAGGLE_PYTHON}" in text_output(notebook)
    assert not executed(notebook, "pip")
    assert read_parameters(load(NOTEBOOK))["PYTHON"] == KAGGLE_PYTHON  # the notebook's default is fintts's one value


@pytest.mark.process
def test_a_corpus_without_a_usable_clip_stops_the_notebook_at_the_check(tmp_path):
    corpus = tmp_path / "my-voice"
    (corpus / "wavs").mkdir(parents=True)  # the transcripts, and none of the clips (an upload that dropped wavs/)
    (corpus / "metadata.csv").write_text("a_0001|Hyvää huomenta.\na_0002|Kello on seitsemän.\n", encoding="utf-8")
    notebook, error = run_until_it_stops(tmp_path, {"CONFIG": str(ROOT / "configs" / "demo.yaml"), "DATA": str(corpus)})
    assert error.ename == "RuntimeError" and f"no usable clip in {corpus}" in error.evalue
    assert "a_0001" in text_output(notebook)  # fintts check's own report of each clip
    assert not executed(notebook, "launch(") and not (tmp_path / "runs").exists()


def test_the_summary_plays_the_newest_samples_when_the_last_checkpoint_has_none(tmp_path):
    """A session that skipped its last validation (it would have eaten the final push's reserve) still plays the voice
    as the newest validation left it, not "no validation samples yet"."""
    from fintts.kaggle.notebook import newest_samples
    from fintts.train.run.layout import SAMPLES_DIR

    checkpoints = tmp_path / "checkpoints"
    for step, sampled in ((4, True), (8, True), (12, False)):
        folder = checkpoints / f"step-{step:08d}"
        (folder / SAMPLES_DIR).mkdir(parents=True)
        if sampled:
            sf.write(folder / SAMPLES_DIR / "clip.wav", np.zeros(160, dtype=np.float32), 16000)
    (checkpoints / ".step-00000016.tmp" / SAMPLES_DIR).mkdir(parents=True)  # a save under way: not a checkpoint
    sf.write(checkpoints / ".step-00000016.tmp" / SAMPLES_DIR / "clip.wav", np.zeros(160, dtype=np.float32), 16000)
    assert newest_samples(checkpoints / "step-00000012") == [checkpoints / "step-00000008" / SAMPLES_DIR / "clip.wav"]
    assert newest_samples(checkpoints / "step-00000004") == [checkpoints / "step-00000004" / SAMPLES_DIR / "clip.wav"]
