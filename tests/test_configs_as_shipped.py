"""Each config in ``configs/`` run as shipped, through the command line a person types.

Only what a person sets from outside is set here: ``data`` and ``init`` where the config names a
corpus or a voice this machine does not have (``mms-fin.yaml``: a small synthetic corpus and a voice
of the MMS architecture with random weights, ``benchmarks/stand_ins.py``), and the session's budget
or steps. That voice and its discriminator are shrunk (``SMALL_VOICE``, ``SMALL_DISCRIMINATOR``): an
MMS-sized step takes ~10 s on a 2-core CPU, and how a session ends does not depend on the size
(benchmarks/step_share.py and the GPU check run the MMS-sized voice). Nothing is switched off: the
ONNX export, the loss plot and the model card run as they do for the person. The sessions end before
their first validation (a first short Kaggle session, ``fintts plan``'s bench), at their budget, on
resume, and across one and two processes; each must end with the documented exit code, its summary,
no library's bars or log lines, and no process of ours left behind (no thread either: ``train()`` in a
program, tests/tts/vits/test_vits_task.py).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
import soundfile as sf

from fintts.train.run import checkpoint
from trainer_helpers import ROOT, assert_quiet, cli, export_processes

sys.path.insert(0, str(ROOT / "benchmarks"))
from stand_ins import SMALL_DISCRIMINATOR, SMALL_VOICE, make_corpus, make_init  # noqa: E402

CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))
#: The configs whose sessions are started with ``fintts train`` here; ``demo.yaml``'s short sessions are ``fintts demo``'s
#: (each ends at its budget before its first validation, and the second resumes the first), and it trains by steps
#: across one and two processes in the tests at the end.
#: ``chatterbox-fi.yaml`` names the release on the Hub: tests/tts/chatterbox/test_config.py runs it on random weights.
TRAINED_BY_HAND = [config for config in CONFIGS if config.name not in ("demo.yaml", "chatterbox-fi.yaml")]
ABORT = "terminate called"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def stand_ins(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("stand-ins")
    return {"corpus": make_corpus(folder / "corpus", clips=24, seconds=2.0, rate=16000),
            "init": make_init(folder / "mms-shaped", **SMALL_VOICE)}


def outside(config: Path, stand_ins: dict[str, Path]) -> list[str]:
    """What a person sets on the command line for ``config`` on this machine: its corpus and base voice, if not shipped
    (and, for the small stand-in voice, a discriminator of its size)."""
    if config.name == "mms-fin.yaml":
        return ["--data", str(stand_ins["corpus"]), f"init={stand_ins['init']}",
                f"discriminator_config={json.dumps(SMALL_DISCRIMINATOR)}"]
    return []


def assert_ended_whole(result, store: Path) -> dict:
    """Exit 0, the summary said, no abort, no library's bars or log lines, nothing of ours running; returns the status."""
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert_quiet(result, " ".join(result.args[3:5]))
    assert ABORT not in output and "fintts session summary" in output, output[-4000:]
    assert export_processes(store) == []
    status = json.loads((store / "status.json").read_text())
    latest = checkpoint.latest_complete(store, log=lambda _: None)
    assert latest is not None and checkpoint.step_of(latest.name) == status["step"] > 0
    model = {path.name for path in (store / "model").iterdir()}
    assert "model.safetensors" in model and not list(store.glob(".model-*"))
    pending = json.loads((latest / "state.json").read_text())["export_pending"]
    assert pending == ("model.onnx" not in model), (pending, model)  # the graphs, or the next session told to make them
    return status


@pytest.mark.parametrize("config", TRAINED_BY_HAND, ids=lambda p: p.name)
def test_a_session_that_ends_before_its_first_validation_ends_whole_and_the_next_resumes_it_to_its_budget(
        config, stand_ins, tmp_path):
    """The first session ends by its steps before its first validation (``fintts plan``'s bench, a short first session);
    the next resumes it and ends at its budget, as a Kaggle session ends at its limit. Both end whole."""
    store = tmp_path / "store"
    started = time.monotonic()
    first = cli("train", str(config), *outside(config, stand_ins), "--max-steps", "2", "--store", str(store),
                "--no-progress", cwd=tmp_path, timeout=400)
    took = time.monotonic() - started
    status = assert_ended_whole(first, store)
    assert status["evals"] == [] and status["state"] in ("paused", "finished")

    # a budget that buys steps on this machine as it is now: 25 s idle, more on a busy one (what a session took to
    # start, make two steps and save, and as long again); ending at it is what is tested, not the machine's speed
    budget = max(25, round(2 * took))
    resumed = cli("train", "--config", str(config), *outside(config, stand_ins), "--budget", f"{budget}s", "--store",
                  str(store), "--no-progress", cwd=tmp_path, timeout=budget + 200)
    after = assert_ended_whole(resumed, store)
    assert after["sessions"][-1]["start_step"] == status["step"] < after["step"]
    assert after["state"] == "paused" and after["sessions"][-1]["reason"] == "deadline"


def test_two_processes_then_one_as_shipped(tmp_path):
    config, store = ROOT / "configs" / "demo.yaml", tmp_path / "store"
    two = cli("train", str(config), "--max-steps", "2", "--num-processes", "2", "--store", str(store), "--no-progress",
              cwd=tmp_path, timeout=300)
    assert_ended_whole(two, store)
    one = cli("train", str(config), "--max-steps", "4", "--store", str(store), "--no-progress", cwd=tmp_path, timeout=300)
    status = assert_ended_whole(one, store)
    assert [s["devices"] for s in status["sessions"]][0] != status["sessions"][-1]["devices"]


def test_the_demo_with_a_short_budget_ends_both_sessions_whole_and_speaks(tmp_path):
    """``fintts demo --budget 25s``, as a newcomer types it: ``demo.yaml``'s two ``fintts train`` sessions, each ending at
    its budget before its first validation, the second resuming the first; then the wav."""
    store = tmp_path / "demo"
    out = store / "demo.wav"  # the default: beside the run that made it, not in the folder the command ran in
    result = cli("demo", "--budget", "25s", "--store", str(store), "--no-progress", cwd=tmp_path, timeout=400)
    status = assert_ended_whole(result, store)
    assert (result.stdout + result.stderr).count("fintts session summary") == 2
    first, second = status["sessions"]
    assert first["reason"] == second["reason"] == "deadline" and status["state"] == "paused" and status["evals"] == []
    assert second["start_step"] == first["end_step"] > 0
    audio, rate = sf.read(out)
    assert rate == 16000 and len(audio) > rate // 4
    # its last lines: the wav and its noise floor, the steps the two sessions reached, and what comes next
    assert f"the demo voice says 'Hyvää huomenta! Kello on 7.30.' in {out.resolve()}" in result.stdout
    assert "dB quieter than its loudest: 45 dB or more is clean); listen to it\n" in result.stdout  # no samples before a validation
    assert "session 1 paused at step" in result.stdout and "the demo starts session 2 itself" in result.stdout
    assert not (tmp_path / "demo.wav").exists()
    assert f"== {status['step']:,} steps in 2 session(s)" in result.stdout and "no validation ran yet" in result.stdout

