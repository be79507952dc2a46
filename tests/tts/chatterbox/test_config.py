"""configs/chatterbox-fi.yaml as shipped, through the CLI, with what a machine without the release sets from outside:
random weights at a tiny size, the demo corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from chatterbox_helpers import TINY_MODEL

from fintts.train.config import ConfigError
from fintts.train.task import TaskContext
from fintts.tts.chatterbox.frozen import FROZEN_FILES
from fintts.tts.chatterbox.settings import RELEASE_T3, RELEASE_T3_V3, ChatterboxTaskConfig
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
    first = cli("train", str(CONFIG), *outside, "--max-steps", "2", "--store", str(store), "--no-progress", cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    second = cli("train", str(CONFIG), *outside, "--budget", "25s", "--store", str(store), "--no-progress", cwd=tmp_path)
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
