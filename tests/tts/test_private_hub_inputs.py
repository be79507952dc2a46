"""Two training processes on the CPU (gloo), as on Kaggle's two T4s, whose inputs are private on the Hub.

Only the first process holds the Hugging Face token (fintts/train/processes/hub_token.py). It fetches the run's Hub
inputs into the cache the processes share; the second reads them from there at the commit the first one resolved,
without the network (fintts/tts/hub_inputs.py). The local Hub answers a request without the token 401, so a process
that read a private input for itself would fail.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from huggingface_hub import HfApi
from transformers import VitsConfig, VitsModel

import corpus_sources as sources
from fintts.train.processes.hub_token import HUB_TOKEN_VARIABLES
from fintts.tts.text import FALLBACK_VOCAB, FinnishText
from hub_helpers import TOKEN
from trainer_helpers import environment_of, start_cli, training_processes
from vits_helpers import TINY_MODEL, TRAINING_ONLY, tiny_config

DATASET = "fintts-tester/private-speech"
VOICE = "fintts-tester/private-voice"


def train_two(config: Path, store: Path, cwd: Path) -> tuple[int, str, dict[str, dict[str, str]]]:
    """``fintts train --num-processes 2``: its exit code, its output, and its training processes' environments by rank."""
    launcher = start_cli("train", str(config), "--store", str(store), "--num-processes", "2", "--no-progress", cwd=cwd)
    environments: dict[str, dict[str, str]] = {}
    while launcher.poll() is None:
        for pid in training_processes(launcher.pid):
            try:
                env = environment_of(pid)
            except OSError:  # it ended meanwhile
                continue
            environments.setdefault(env["RANK"], env)
        time.sleep(0.05)
    out, _ = launcher.communicate(timeout=60)
    return launcher.returncode, out, environments


def assert_only_the_first_holds_the_token(hub, environments: dict[str, dict[str, str]]) -> None:
    assert sorted(environments) == ["0", "1"]
    assert environments["0"]["HF_TOKEN"] == TOKEN
    assert not set(HUB_TOKEN_VARIABLES) & set(environments["1"])
    assert not Path(environments["1"]["HF_TOKEN_PATH"]).exists()
    # every request the local Hub saw carried the token: the second process read the first one's download, asking nothing
    assert [f"{r.method} {r.path}" for r in hub.requests if r.auth != "ok"] == []


@pytest.mark.slow
def test_two_processes_train_on_a_private_hub_dataset_the_first_one_fetches(hub_env, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    parquet = tmp_path / "parquet" / "train.parquet"
    sources.hub_parquet(parquet)
    sources.publish_dataset(hub_env, DATASET, parquet, TOKEN)  # private
    config = tiny_config(tmp_path, data=f"hf://datasets/{DATASET}", speakers=[], max_steps=2, eval_every=0,
                         heldout_per_speaker=1, batch_size=2, **TRAINING_ONLY)
    store = tmp_path / "store"
    code, out, environments = train_two(config, store, tmp_path)
    assert code == 0, out[-3000:]
    assert (store / "checkpoints" / "step-00000002").is_dir()
    assert_only_the_first_holds_the_token(hub_env, environments)


@pytest.mark.slow
def test_two_processes_start_from_a_private_hub_voice_the_first_one_fetches(hub_env, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    voice = tmp_path / "voice"
    text = FinnishText(dict(FALLBACK_VOCAB))
    VitsModel(VitsConfig(**TINY_MODEL, vocab_size=text.vocab_size)).save_pretrained(voice)
    text.save_tokenizer(voice)
    api = HfApi(endpoint=hub_env.endpoint, token=TOKEN)
    api.create_repo(VOICE, private=True)
    api.upload_folder(folder_path=str(voice), repo_id=VOICE)
    config = tiny_config(tmp_path, init=VOICE, model={}, discriminator="", max_steps=2, eval_every=0, batch_size=2,
                         **TRAINING_ONLY)
    store = tmp_path / "store"
    code, out, environments = train_two(config, store, tmp_path)
    assert code == 0, out[-3000:]
    assert (store / "checkpoints" / "step-00000002").is_dir()
    assert_only_the_first_holds_the_token(hub_env, environments)
