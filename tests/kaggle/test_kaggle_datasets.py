"""What fintts uploads to Kaggle goes only to a private dataset, and the token that goes is the one the person meant.

Against the local Kaggle and Hub (:mod:`test_kaggle_cli`'s fixtures) with the real ``kaggle`` and
``huggingface_hub`` clients: ``fintts kaggle token`` as a process (its exit codes, its lines, stdin), the
corpus and wheels uploads in this process through the library (they need no corpus check nor a wheel build).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from test_kaggle_cli import REPO, USER, local_kaggle

from fintts.kaggle import corpus, wheels
from fintts.kaggle.client import KaggleError, connect
from fintts.kaggle.secret import store_token
from fintts.kaggle.visibility import PublicDataset
from hub_helpers import TOKEN

TOKEN_DATASET = f"{USER}/fintts-token"
#: the laptop's full-access login, which the Hub here does not know: a token that is not the one meant
LAPTOP_TOKEN = "hf_laptopLogin" + "X" * 24


@pytest.fixture(params=["before", "2026"])
def kaggle_env(hub_env, tmp_path, request):
    """The local Kaggle (in each era: an absent dataset is a 404, then a 403) and Hub, and a laptop's env for them."""
    yield from local_kaggle(hub_env, tmp_path, notebook_exists=False, era=request.param)


@pytest.fixture
def api(kaggle_env, monkeypatch):
    """The real ``kaggle`` client in this process, pointed at the local Kaggle."""
    kaggle, _, _ = kaggle_env
    for name, value in kaggle.env().items():
        monkeypatch.setenv(name, value)
    return connect()


def token_command(env, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fintts", "kaggle", "token", *args], env=env, input=stdin, cwd=env["TMPDIR"],
                          capture_output=True, text=True, timeout=120)


def wheels_folder(folder, ref: str):
    """What ``fintts kaggle wheels`` stages for ``ref``: a fintts wheel and the metadata (no build: upload reads no more)."""
    folder.mkdir()
    (folder / "fintts-0.0.0-py3-none-any.whl").write_bytes(b"stand-in")
    (folder / wheels.METADATA).write_text(json.dumps(wheels.dataset_metadata(*ref.split("/"))))
    return folder


@pytest.mark.process
def test_kaggle_token_names_the_token_it_stores_and_what_a_leak_would_reach(kaggle_env):
    kaggle, env, _ = kaggle_env
    stored = token_command(env | {"HF_TOKEN": TOKEN})
    assert stored.returncode == 0, stored.stdout + stored.stderr
    # the Hub's word for it: its name and role, where it came from, and the token recommended instead
    assert 'the token "fintts-tests" (from $HF_TOKEN), a write token' in stored.stdout
    assert "fine-grained token that may write that repo only" in stored.stdout and "--token-stdin" in stored.stdout
    assert TOKEN not in stored.stdout + stored.stderr
    assert kaggle.datasets[TOKEN_DATASET] == [{"token": f"{TOKEN}\n".encode()}] and TOKEN_DATASET not in kaggle.public


@pytest.mark.process
def test_kaggle_token_refuses_a_read_token(kaggle_env, hub_env):
    kaggle, env, _ = kaggle_env
    hub_env.read_token()
    refused = token_command(env | {"HF_TOKEN": TOKEN})
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert 'the token "fintts-tests" (from $HF_TOKEN), a read token' in refused.stderr
    assert "could not push the run" in refused.stderr and "Nothing was stored" in refused.stderr
    assert TOKEN_DATASET not in kaggle.datasets and kaggle.calls["StartBlobUpload"] == 0


@pytest.mark.process
def test_kaggle_token_takes_the_token_meant_from_stdin_and_says_whether_it_may_write_the_run(kaggle_env, hub_env):
    kaggle, env, _ = kaggle_env
    hub_env.scope_token([REPO])  # a fine-grained token that may write the run's repo only
    laptop = env | {"HF_TOKEN": LAPTOP_TOKEN}  # the login found without being asked: not the one that goes up
    unknown = token_command(laptop)  # a token the Hub does not accept is not stored, and not shown
    assert unknown.returncode == 4 and "could not ask the Hub which token came from $HF_TOKEN" in unknown.stderr, unknown.stderr
    assert LAPTOP_TOKEN not in unknown.stdout + unknown.stderr and TOKEN_DATASET not in kaggle.datasets
    stored = token_command(laptop, "--token-stdin", "--hub-repo", REPO, stdin=f"{TOKEN}\n")
    assert stored.returncode == 0, stored.stdout + stored.stderr
    assert f'the token "fintts-tests" (from stdin), a fine-grained token that may write {REPO}' in stored.stdout
    assert f"It may write the run's repo, {REPO}" in stored.stdout
    assert kaggle.datasets[TOKEN_DATASET] == [{"token": f"{TOKEN}\n".encode()}]
    assert TOKEN not in stored.stdout + stored.stderr and LAPTOP_TOKEN not in stored.stdout + stored.stderr

    other = token_command(laptop, "--token-stdin", "--hub-repo", f"{USER}/another-voice", stdin=TOKEN)
    assert other.returncode == 2 and f"may write {REPO}, not {USER}/another-voice" in other.stderr, other.stdout + other.stderr
    assert len(kaggle.datasets[TOKEN_DATASET]) == 1 and kaggle.calls["StartBlobUpload"] == 1
    nothing = token_command(laptop, "--token-stdin", stdin="\n")
    assert nothing.returncode == 2 and "no token came on stdin" in nothing.stderr


@pytest.mark.process
def test_kaggle_token_refuses_a_public_token_dataset_in_one_line(kaggle_env):
    kaggle, env, _ = kaggle_env
    kaggle.add_dataset(TOKEN_DATASET, {"token": b"hf_earlier\n"}, public=True)  # made public on kaggle.com
    refused = token_command(env | {"HF_TOKEN": TOKEN})
    assert refused.returncode == 2, refused.stdout + refused.stderr
    (line,) = refused.stderr.splitlines()
    assert f"{TOKEN_DATASET} is a public Kaggle dataset" in line and "Make it private" in line and "revoke" in line
    assert kaggle.datasets[TOKEN_DATASET] == [{"token": b"hf_earlier\n"}] and kaggle.calls["StartBlobUpload"] == 0
    # nor is it attached to a session: it would read a token anyone could have read
    push = subprocess.run([sys.executable, "-m", "fintts", "kaggle", "push", "--config", "demo.yaml", "--hub-repo", REPO],
                          env=env, cwd=env["TMPDIR"], capture_output=True, text=True, timeout=120)
    assert push.returncode == 2 and f"{TOKEN_DATASET} is a public Kaggle dataset" in push.stderr, push.stdout + push.stderr
    assert kaggle.pushes == []


def test_a_new_token_deletes_the_datasets_older_versions(kaggle_env, api):
    kaggle, _, _ = kaggle_env
    assert store_token(api, "hf_first") == TOKEN_DATASET
    assert store_token(api, "hf_second") == TOKEN_DATASET
    assert kaggle.datasets[TOKEN_DATASET] == [{"token": b"hf_second\n"}]  # the first token is in no version left
    assert TOKEN_DATASET not in kaggle.public


@pytest.mark.parametrize("what", ["corpus", "wheels"])
def test_a_public_dataset_gets_no_version_of_the_corpus_or_the_wheels(kaggle_env, api, tmp_path, what):
    kaggle, _, _ = kaggle_env
    if what == "corpus":
        ref = f"{USER}/my-voice"
        kaggle.add_dataset(ref, public=True)
        folder = tmp_path / "my-voice"
        folder.mkdir()
        (folder / "metadata.csv").write_text("clip|Hei.\n")
        with pytest.raises(PublicDataset, match=f"{ref} is a public Kaggle dataset: .*publish your voice.*--corpus {USER}/"):
            corpus.upload(folder, ref, api=api, log=lambda _: None)
    else:
        ref = f"{USER}/fintts-wheels"  # the fixture's, made public
        kaggle.public.add(ref)
        with pytest.raises(PublicDataset, match=f"{ref} is a public Kaggle dataset"):
            wheels.upload(wheels_folder(tmp_path / "wheels", ref), api)
    assert len(kaggle.datasets[ref]) == 1 and kaggle.calls["StartBlobUpload"] == 0


def test_wheels_upload_takes_only_a_404_or_403_for_absent(kaggle_env, api, tmp_path):
    kaggle, _, _ = kaggle_env
    ref = f"{USER}/fresh-wheels"
    kaggle.fail(500)  # the look-up fails: not an answer that the dataset is absent
    with pytest.raises(KaggleError, match=f"look up {ref}") as failed:
        wheels.upload(wheels_folder(tmp_path / "wheels", ref), api)
    assert failed.value.status == 500 and ref not in kaggle.datasets and kaggle.calls["StartBlobUpload"] == 0
    assert wheels.upload(wheels_folder(tmp_path / "again", ref), api) == ref  # absent (404; 2026: 403): created private
    assert len(kaggle.datasets[ref]) == 1 and ref not in kaggle.public
