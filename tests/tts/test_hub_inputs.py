"""A private Hub input read by a process without the token: at the commit the fetching process resolved, from the cache.

Each side runs in a process of its own, as a session's processes do (huggingface_hub reads the local Hub's address
once, at import): the first with the token fetches and hands on its pin, as ``fetch_first`` does between a session's
processes; the second has no token (the environment the launcher gives it) and is handed that pin.
"""

from __future__ import annotations

import json
import os

import pytest
from huggingface_hub import HfApi

from fintts.train.processes.hub_token import without_hub_token
from hub_helpers import TOKEN
from trainer_helpers import run_python

#: every test here starts a process (a fintts command, a server's session, espeak-ng or ffmpeg): not the unit tier
pytestmark = pytest.mark.process

MODEL = "fintts-tester/private-release"
DATASET = "fintts-tester/private-corpus"

#: Both processes' program: with ``handed.json`` (the pins the other announced) beside it, it is the one without the token.
READ = """
import json
from pathlib import Path
from fintts.tts.hub_inputs import repo_files, snapshot

handed = json.loads(Path("handed.json").read_text()) if Path("handed.json").exists() else None
pins = {}

def fetch_first(name, fetch):
    if handed is not None:
        return handed[name]  # what the fetching process announced
    pins[name] = fetch()
    return pins[name]

folder = snapshot("%(model)s", allow_patterns=["*.json"], fetch_first=fetch_first)
commit, files = repo_files("%(dataset)s", repo_type="dataset", revision=None, fetch_first=fetch_first,
                           choose=lambda every: [name for name in every if name.endswith(".parquet")])
print(json.dumps({"pins": pins, "folder": str(folder), "config": (folder / "config.json").read_text(),
                  "weights": (folder / "model.bin").exists(), "commit": commit, "data": [p.read_text() for p in files]}))
"""


def test_a_process_without_the_token_reads_what_the_other_fetched_at_its_commit(hub_env, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    api = HfApi(endpoint=hub_env.endpoint, token=TOKEN)
    api.create_repo(MODEL, private=True)
    api.upload_file(path_or_fileobj=b'{"v": 1}', path_in_repo="config.json", repo_id=MODEL)
    api.upload_file(path_or_fileobj=b"weights", path_in_repo="model.bin", repo_id=MODEL)  # not asked for
    api.create_repo(DATASET, repo_type="dataset", private=True)
    api.upload_file(path_or_fileobj=b"rows 1", path_in_repo="data/train-0.parquet", repo_id=DATASET, repo_type="dataset")
    program = READ % {"model": MODEL, "dataset": DATASET}
    fetched = run_python(program, cwd=tmp_path)
    assert fetched.returncode == 0, fetched.stderr
    first = json.loads(fetched.stdout)
    assert (first["config"], first["data"], first["weights"]) == ('{"v": 1}', ["rows 1"], False)
    # both inputs move on after the fetch: the other process still reads what the first one read
    api.upload_file(path_or_fileobj=b'{"v": 2}', path_in_repo="config.json", repo_id=MODEL)
    api.upload_file(path_or_fileobj=b"rows 2", path_in_repo="data/train-0.parquet", repo_id=DATASET, repo_type="dataset")
    seen = len(hub_env.requests)
    reader = without_hub_token(os.environ, tmp_path / "nowhere" / "token")  # as the launcher starts the other processes
    for name in set(os.environ) - set(reader):
        monkeypatch.delenv(name)
    monkeypatch.setenv("HF_TOKEN_PATH", reader["HF_TOKEN_PATH"])
    (tmp_path / "handed.json").write_text(json.dumps(first["pins"]))
    read = run_python(program, cwd=tmp_path)
    assert read.returncode == 0, read.stderr
    second = json.loads(read.stdout)
    assert (second["folder"], second["config"], second["commit"], second["data"]) == \
        (first["folder"], '{"v": 1}', first["commit"], ["rows 1"])
    assert hub_env.requests[seen:] == []  # from the cache alone: not one request, with or without the token
