"""The command line as one language: a config the same ways everywhere, --data, --version, a closed pipe, reads without a write token."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys

import pytest
from huggingface_hub import HfApi

from fintts.cli import EXIT_OK, EXIT_STORE, EXIT_USAGE, main
from fintts_stand_ins import HubServer
from fintts_stand_ins.kaggle_server import KaggleServer
from hub_helpers import TOKEN
from trainer_helpers import ROOT
from vits_helpers import TRAINING_ONLY, tiny_config

#: each command that reads a config, with what it needs besides to get as far as reading it
READS_A_CONFIG = {
    "train": ["--no-progress"],
    "bench": [],
    "plan": ["--step-seconds", "1"],
    "eval": ["--model", "voice"],
    "demo": ["--no-progress"],
    "kaggle run": ["--hub-repo", "alice/voice"],
}


@pytest.mark.parametrize("spelling", ["CONFIG", "--config CONFIG"])
@pytest.mark.parametrize("command", READS_A_CONFIG)
def test_every_command_that_reads_a_config_takes_it_either_way(command, spelling, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    named = ["no-such.yaml"] if spelling == "CONFIG" else ["--config", "no-such.yaml"]
    assert main([*command.split(), *named, *READS_A_CONFIG[command]]) == EXIT_USAGE
    assert "no-such.yaml" in capsys.readouterr().err  # the config named was the one read (and it is not there)


@pytest.mark.slow
def test_train_takes_data_and_the_config_as_docs_write_it(tmp_path, monkeypatch):
    """``fintts train --config mine.yaml --data DIR key=value``: the config's own data is replaced, the override applied."""
    monkeypatch.chdir(tmp_path)
    config = tiny_config(tmp_path, data="no/such/corpus", **TRAINING_ONLY)
    store = tmp_path / "run"
    argv = ["train", "--config", str(config), "--data", "demo", "max_steps=1", "--store", str(store), "--no-progress"]
    assert main(argv) == EXIT_OK
    status = json.loads((store / "status.json").read_text())
    assert status["state"] == "finished" and status["step"] == 1


@pytest.mark.parametrize("argv, says", [
    (["train", "a.yaml", "--config", "b.yaml"], "two configs: a.yaml and --config b.yaml"),
    (["bench", "a.yaml", "data=here", "--data", "there"], "--data there and data=here disagree"),
    (["plan", "--data", "corpus"], "the config is missing: fintts plan CONFIG (or --config CONFIG)"),
    (["kaggle", "push", "mine.yaml", "max_steps=9"], "fintts kaggle push takes no key=value settings (max_steps=9)"),
    (["status", "--store", "runs/x", "max_steps=9"], "unrecognized arguments: max_steps=9"),
])
def test_config_arguments_that_contradict_or_miss_are_usage_errors(argv, says, capsys):
    with pytest.raises(SystemExit) as exit:
        main(argv)
    assert exit.value.code == EXIT_USAGE and says in capsys.readouterr().err


def test_the_same_file_named_both_ways_is_one_config(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["plan", "no-such.yaml", "--config", "./no-such.yaml", "--step-seconds", "1"]) == EXIT_USAGE
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.process
def test_version_is_the_installed_packages():
    result = _fintts("--version", env=_env(), cwd=ROOT)
    assert result.returncode == 0 and result.stdout.strip() == f"fintts {importlib.metadata.version('fintts')}"


@pytest.mark.process
def test_a_reader_that_stops_early_ends_the_command_quietly(tmp_path):
    """``fintts check DIR | head -1`` on a listing far longer than a pipe holds: no traceback, exit 141 as `seq | head` gives."""
    corpus = tmp_path / "corpus"
    (corpus / "wavs").mkdir(parents=True)
    lines = [f"clip{i:05d}|Tämä on lause numero {i}.|Tämä on lause numero {i}." for i in range(2000)]  # ~300 kB of problems: 5x a pipe
    (corpus / "metadata.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    command = f'set -o pipefail; "{sys.executable}" -m fintts check "{corpus}" --no-progress | head -1'
    result = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=120, env=_env(), cwd=tmp_path)
    assert result.stdout.startswith("Format: ljspeech")
    assert "Traceback" not in result.stderr and "BrokenPipeError" not in result.stderr, result.stderr
    assert result.returncode == 141


@pytest.mark.process
def test_status_of_a_public_hub_run_needs_no_token_and_a_private_one_says_which(tmp_path):
    with HubServer(tmp_path / "hub") as hub:  # no token required: a public repo
        api = HfApi(endpoint=hub.endpoint, token=TOKEN)
        api.create_repo("alice/voice")
        status = {"state": "paused", "step": 7, "max_steps": 10, "sessions": []}
        api.upload_file(path_or_fileobj=json.dumps(status).encode(), path_in_repo="status.json", repo_id="alice/voice")
        env = _env(HF_ENDPOINT=hub.endpoint, HF_HOME=str(tmp_path / "no-login"))
        shown = _fintts("status", "--hub-repo", "alice/voice", "--json", env=env, cwd=tmp_path)
        assert shown.returncode == EXIT_OK, shown.stderr
        assert json.loads(shown.stdout)["step"] == 7
        with KaggleServer(user="alice") as kaggle:  # the laptop's view of a Kaggle run reads the Hub the same way
            on_kaggle = _fintts("kaggle", "status", "--hub-repo", "alice/voice", env=env | kaggle.env() | {"HOME": str(tmp_path)},
                                cwd=tmp_path)
        assert on_kaggle.returncode == EXIT_OK, on_kaggle.stderr
        assert "run        hf://alice/voice: paused at step 7 of 10" in on_kaggle.stdout
        hub.token = TOKEN  # now private: a reader without a token is told what to do, not to create a write token
        refused = _fintts("status", "--hub-repo", "alice/voice", "--store", str(tmp_path / "elsewhere"), env=env, cwd=tmp_path)
        assert refused.returncode == EXIT_STORE
        assert "cannot be read without a token" in refused.stderr and "a read token is enough" in refused.stderr


@pytest.mark.process
def test_a_hub_read_that_fails_for_a_moment_says_that_it_retries(tmp_path):
    """``fintts kaggle status`` retries a Hub answering 500 (its wait would otherwise look like a hung command)."""
    with HubServer(tmp_path / "hub") as hub, KaggleServer(user="alice") as kaggle:
        api = HfApi(endpoint=hub.endpoint, token=TOKEN)
        api.create_repo("alice/voice")
        status = {"state": "paused", "step": 7, "max_steps": 10, "sessions": []}
        api.upload_file(path_or_fileobj=json.dumps(status).encode(), path_in_repo="status.json", repo_id="alice/voice")
        hub.fail(500, times=1, path="/revision/main")
        env = _env(HF_ENDPOINT=hub.endpoint, HF_HOME=str(tmp_path / "no-login")) | kaggle.env() | {"HOME": str(tmp_path)}
        shown = _fintts("kaggle", "status", "--hub-repo", "alice/voice", env=env, cwd=tmp_path)
    assert shown.returncode == EXIT_OK, shown.stderr
    said = [line for line in (shown.stdout + shown.stderr).splitlines() if "retrying in" in line]
    assert len(said) == 1 and said[0].startswith("could not read alice/voice's status") and "(try 2 of " in said[0], said


def _env(**extra: str) -> dict[str, str]:
    """A ``python -m fintts`` of this checkout, with no Hub token from anywhere."""
    env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "KAGGLE_KERNEL_RUN_TYPE")}
    paths = [str(ROOT), str(ROOT / "tests" / "stand_ins"), str(ROOT / "tests"), env.get("PYTHONPATH")]
    return env | {"PYTHONPATH": os.pathsep.join(filter(None, paths)), **extra}


def _fintts(*args: str, env: dict[str, str], cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fintts", *args], capture_output=True, text=True, timeout=120, env=env, cwd=cwd)


def test_every_option_of_every_command_says_what_it_is_for():
    import argparse

    from fintts.cli import build_parser

    def bare(parser: argparse.ArgumentParser, path: str) -> list[str]:
        found = []
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found += bare(sub, f"{path} {name}")
            elif not action.help and action.dest != "help":
                found.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
        return found

    assert bare(build_parser(), "fintts") == []
