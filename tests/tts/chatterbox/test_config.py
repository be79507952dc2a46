"""configs/chatterbox-fi.yaml as shipped, through the CLI, with what a machine without the release sets from outside:
random weights at a tiny size, the demo corpus."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import torch
from chatterbox_helpers import TINY_MODEL

from fintts.train.config import ConfigError
from fintts.train.task import TaskContext
from fintts.tts.chatterbox.frozen import FROZEN_FILES
from fintts.tts.chatterbox.release import RELEASE_T3, RELEASE_T3_V3
from fintts.tts.chatterbox.settings import ChatterboxTaskConfig
from fintts.tts.chatterbox.task import ChatterboxTask
from fintts.tts.chatterbox.text import VOCAB_FILE
from trainer_helpers import cli

#: every test here starts a process (a fintts command, a server's session, espeak-ng or ffmpeg): not the unit tier
pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[3]
CONFIG = ROOT / "configs" / "chatterbox-fi.yaml"


def test_the_shipped_config_trains_and_resumes_to_its_budget_on_random_weights(tmp_path):
    """A first session ends by its steps; the next resumes it and ends at its time budget, as a Kaggle session ends."""
    store = tmp_path / "store"
    outside = ["--data", "demo", "weights=random", f"model={json.dumps(TINY_MODEL)}", "speakers=[espeak_f2, espeak_m3]"]
    started = time.monotonic()
    first = cli("train", str(CONFIG), *outside, "--max-steps", "2", "--store", str(store), "--no-progress", cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    # a budget that buys steps on this machine as it is now: 25 s idle, more on a busy one (what the first session took
    # to start, make two steps and save, and as long again); ending at it is what is tested, not the machine's speed
    budget = max(25, round(2 * (time.monotonic() - started)))
    second = cli("train", str(CONFIG), *outside, "--budget", f"{budget}s", "--store", str(store), "--no-progress",
                 cwd=tmp_path, timeout=budget + 200)
    assert second.returncode == 0, second.stderr[-3000:]
    status = json.loads((store / "status.json").read_text())
    assert [s["start_step"] for s in status["sessions"]] == [0, 2] and status["step"] > 2
    assert status["state"] == "paused" and status["sessions"][-1]["reason"] == "deadline"
    assert (store / "model" / "t3_mtl23ls_v2.safetensors").is_file()


def test_the_releases_v3_t3_is_taken_from_a_folder_by_its_name_or_v3(tmp_path):
    """The release's v3 T3 has v2's layout: naming its file is all it takes (T3 loads it strictly as it does v2)."""
    release = tmp_path / "release"
    release.mkdir()
    for name in (RELEASE_T3_V3, VOCAB_FILE, *FROZEN_FILES):
        (release / name).write_bytes(b"")
    context = TaskContext(seed=0, device=torch.device("cpu"), autocast_dtype=None, cache_dir=tmp_path / "cache")
    for chosen in ("v3", RELEASE_T3_V3):
        config = ChatterboxTaskConfig(weights=str(release), t3_file=chosen)
        assert config.t3_file == RELEASE_T3_V3 and ChatterboxTask(config, context)._release_folder() == release
    with pytest.raises(ConfigError, match=f"lacks {RELEASE_T3}"):
        ChatterboxTask(ChatterboxTaskConfig(weights=str(release)), context)._release_folder()
    with pytest.raises(ConfigError, match="t3_file: 'v4'"):
        ChatterboxTaskConfig(t3_file="v4")


#: A session's look for the release on the Hub, as ``build_models`` makes it (in a process: huggingface_hub reads the
#: local Hub's address at import).
FETCH_RELEASE = """
import json, torch
from pathlib import Path
from fintts.train.task import TaskContext
from fintts.tts.chatterbox.settings import ChatterboxTaskConfig
from fintts.tts.chatterbox.task import ChatterboxTask
context = TaskContext(seed=0, device=torch.device("cpu"), autocast_dtype=None, cache_dir=Path("cache"), resuming=%(resuming)s)
folder = ChatterboxTask(ChatterboxTaskConfig(weights="%(repo)s"), context)._release_folder()
print(json.dumps(sorted(p.name for p in folder.iterdir())))
"""


def test_a_resumed_session_fetches_the_release_without_its_t3(hub_env, tmp_path, monkeypatch):
    """A resumed session's T3 comes from its checkpoint: of the release on the Hub it downloads the frozen parts and the
    vocabulary, not T3 (2.14 GB of the release's 3.2 in every fresh Kaggle container); a first session downloads T3."""
    from huggingface_hub import HfApi

    from hub_helpers import TOKEN
    from trainer_helpers import run_python

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    repo, release = "resemble-stand-in/chatterbox", tmp_path / "release"
    release.mkdir()
    for name in (RELEASE_T3, VOCAB_FILE, *FROZEN_FILES):
        (release / name).write_bytes(name.encode())
    api = HfApi(endpoint=hub_env.endpoint, token=TOKEN)
    api.create_repo(repo)
    api.upload_folder(repo_id=repo, folder_path=release)
    seen = len(hub_env.requests)
    for resuming, has_t3 in ((True, False), (False, True)):
        fetched = run_python(FETCH_RELEASE % {"resuming": resuming, "repo": repo}, cwd=tmp_path)
        assert fetched.returncode == 0, fetched.stderr[-3000:]
        assert (RELEASE_T3 in json.loads(fetched.stdout)) == has_t3 and VOCAB_FILE in fetched.stdout, fetched.stdout
    t3_downloads = [r.path for r in hub_env.requests[seen:] if r.method == "GET" and r.path.endswith("/" + RELEASE_T3)]
    assert len(t3_downloads) == 1, t3_downloads
