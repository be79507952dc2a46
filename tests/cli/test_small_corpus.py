"""A corpus too small to judge the voice trained on it is said so, with what to do: by check, plan and a session."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

from fintts.train.config import SHIPPED_CONFIGS, load_config
from fintts.train.task import TaskContext
from kaggle_helpers import checkout_first
from trainer_helpers import in_process
from vits_helpers import tiny_config


def corpus(root: Path, clips: int) -> Path:
    """One speaker in LJSpeech's layout, ``clips`` short tones with a line each (a corpus check takes them)."""
    (root / "wavs").mkdir(parents=True)
    t = np.arange(int(0.6 * 16000)) / 16000
    for n in range(clips):
        sf.write(root / "wavs" / f"clip_{n:04d}.wav", (0.3 * np.sin(2 * np.pi * (180 + n) * t)).astype(np.float32), 16000)
    (root / "metadata.csv").write_text("".join(f"clip_{n:04d}|Hyvää huomenta.\n" for n in range(clips)), encoding="utf-8")
    return root


def test_check_says_once_that_39_clips_are_too_few_to_judge_a_voice_and_what_is_enough(tmp_path):
    result = in_process("check", str(corpus(tmp_path / "voice", 39)), "--no-progress", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("too few to judge") == 1 and "record at least 100 clips" in result.stderr


def test_check_of_a_corpus_with_enough_clips_says_nothing_of_it(tmp_path):
    result = in_process("check", str(corpus(tmp_path / "voice", 100)), "--no-progress", cwd=tmp_path)
    assert result.returncode == 0 and "too few" not in result.stderr, result.stderr


def test_plan_tells_the_held_out_clips_apart_from_the_training_items(tmp_path):
    config = tiny_config(tmp_path, data=str(corpus(tmp_path / "voice", 39)), speakers=[])
    result = in_process("plan", str(config), "--step-seconds", "0.5", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "39 clips (36 train + 3 held out) are too few to judge the voice" in result.stderr
    assert "items              36   (training items of the config's data, held-out ones apart)" in result.stdout


@pytest.mark.process
def test_plan_without_a_bench_offline_says_a_step_time_will_do(tmp_path):
    env = os.environ | {"PYTHONPATH": checkout_first(), "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    result = subprocess.run([sys.executable, "-m", "fintts", "plan", str(SHIPPED_CONFIGS / "mms-fin.yaml"), "--data",
                             str(corpus(tmp_path / "voice", 120))], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and "--step-seconds" in result.stderr.splitlines()[-1], result.stderr


def test_a_session_on_a_small_corpus_keeps_the_warning_for_its_summary(tmp_path):
    config = load_config(tiny_config(tmp_path, data=str(corpus(tmp_path / "voice", 39)), speakers=[]))
    warnings: list[str] = []
    context = TaskContext(config.train.seed, torch.device("cpu"), None, tmp_path / "cache", log=lambda _: None, progress=False,
                          warn=warnings.append)
    config.task_class(config.task, context).build_models()
    assert [w for w in warnings if "too few to judge" in w] == [
        "39 clips (36 train + 3 held out) are too few to judge the voice: with 3 held-out clips a validation's "
        "val/identified moves ±0.29 by the draw alone. To judge it, record at least 100 clips of the speaker (about 10 "
        "held out), better 240 (24 held out, ±0.10), or list 10 or more clips in a heldout.csv; until then listen to the "
        "samples rather than trust the figures"]
