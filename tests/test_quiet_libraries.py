"""fintts commands print fintts's lines: the libraries' own progress bars and repeated log lines stay out.

transformers draws "Loading weights" when it loads a model and "Writing model shards" when it saves one;
huggingface_hub logs each warning through its own handler and the root's (twice under the CLI's logging).
Each command runs as a person runs it, a process of its own, and its whole output is read.
"""

from __future__ import annotations

import re

import pytest

from trainer_helpers import cli
from vits_helpers import tiny_config

#: What the libraries print that a fintts command must not show.
LIBRARY_NOISE = re.compile(r"Loading weights|Writing model shards|it/s\]|thrown while requesting|Retrying in")


def assert_quiet(result, command: str) -> None:
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    noise = sorted({line.strip()[:120] for line in output.splitlines() if LIBRARY_NOISE.search(line)})
    assert noise == [], f"fintts {command} showed the libraries' output: {noise}"


@pytest.mark.slow
def test_train_bench_plan_and_say_show_no_library_bars(tmp_path):
    config = str(tiny_config(tmp_path))
    assert_quiet(cli("train", config, "--max-steps", "2", "--store", "run", "--no-progress", cwd=tmp_path, timeout=400), "train")
    assert (tmp_path / "run" / "model" / "config.json").is_file()
    for backend in ("torch", "onnx"):
        said = cli("say", "Hyvää huomenta.", "--voice", "run/model", "-o", f"{backend}.wav", "--backend", backend, cwd=tmp_path)
        assert_quiet(said, f"say --backend {backend}")
    # plan without a kept bench runs one: the first session's export and the timed steps' loads and saves
    assert_quiet(cli("plan", config, "--samples", "200", "--store", "bench", cwd=tmp_path, timeout=600), "plan (and its bench)")
