"""``configs/chatterbox-fi.yaml`` as shipped, a chain of Kaggle sessions: ``fintts kaggle run`` to a finished run.

The laptop is the real ``fintts kaggle run`` in a process of its own against the local Kaggle and Hub, as in
:mod:`test_session_chain` (whose helpers this uses); what the person sets from outside is all that differs from the
shipped file: T3 from tiny random weights (``weights: random`` and ``model:``, tests/tts/chatterbox/chatterbox_helpers.py:
the release is on the Hub, out of reach here), the corpus (``--corpus``, which replaces the file's ``data``) and the
chain's length (``max_steps``, with a validation and a periodic checkpoint every :data:`STEPS` steps; the shipped 3000-step
phase ``fi`` is the whole chain, so the LoRA phase ``voice`` never starts).

Each Kaggle session runs the pushed notebook, every cell, on a disk of its own *and an image of its own*: a fresh
environment that sees this machine's packages (torch, transformers...) but neither fintts nor the ``chatterbox``
package, as Kaggle's image has neither (test_kaggle_install.py ``kaggle_like_python``). So the install cell really
installs: ``pip install fintts-….whl[train,chatterbox]`` from the wheels dataset, offline (``PIP_NO_INDEX``: the dataset
must be enough), and the session trains with the fintts it installed, not this checkout. The dataset holds this checkout's
wheel and a stand-in ``chatterbox-light`` 1.0.2 wheel without dependencies: the real one's (torchaudio, diffusers,
s3tokenizer, einops, pyloudnorm) are not on this machine, and the registry's torchaudio is a CUDA build whose extension
does not load beside a CPU torch (Kaggle's image has torch and torchaudio as a pair); a run on ``weights: random`` never
imports the package (tests/tts/chatterbox/test_chatterbox_light.py runs upstream's real code, in a venv of its own).

Kaggle ends each session at its first periodic checkpoint (SIGTERM to the kernel, as :mod:`test_session_chain` does), so
every session holds one validation; the third trains to ``max_steps``. What is asserted is what the person sees: each
session's notebook output, the Hub's files as each session ends, status.json. Then the laptop, on a disk of its own, pulls
the voice: the folder the last session exported, whole, and speaks it. A voice of random weights has no S3Gen, so
``fintts say`` speaks it as the validations' samples were made (its T3, then a tone per speech token) and says that it
is no speech; a release-based folder speaking through upstream's classes is test_chatterbox_light.py's (real-size
parts: too large to train through three sessions on a CPU).
"""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import pytest
import soundfile as sf
import yaml
from test_kaggle_cli import REPO, USER, local_kaggle, run
from test_kaggle_install import VERSION, built_wheel, dataset_wheel, kaggle_like_python
from test_kaggle_setup import make_corpus
from test_session_chain import as_uploaded, hub_step

from fintts.kaggle.secret import TOKEN_SLUG
from fintts.train.machine.platform import START_VARIABLE
from fintts.train.run import checkpoint
from fintts.tts.chatterbox.cache import SHARD_CLIPS
from hub_helpers import TOKEN, latest_on_hub
from kaggle_helpers import run_pushed_notebook
from notebook_helpers import ROOT, stopped_at_a_checkpoint
from trainer_helpers import KAGGLE_MARK
from tts.chatterbox.chatterbox_helpers import TINY_MODEL

CONFIG = ROOT / "configs" / "chatterbox-fi.yaml"
#: Steps between validations and periodic checkpoints: a session ends at its first periodic checkpoint (a step or so
#: later, where the signal lands), which must come before the next one for the chain to have SESSIONS sessions.
STEPS = 4
SESSIONS = 3
MAX_STEPS = SESSIONS * STEPS
CORPUS = "alice/my-voice"
#: one speaker's clips: two held out (heldout_per_speaker), ten to train on (batch_size: 8 as shipped)
CLIPS = 12


def as_a_person_sets_it(folder: Path) -> Path:
    """The shipped config with what is set from outside (the module's docstring), as the person's own file."""
    config = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))
    config |= {"weights": "random", "model": TINY_MODEL, "max_steps": MAX_STEPS, "eval_every": STEPS,
               "checkpoint_every_steps": STEPS}
    path = folder / "chatterbox-fi.yaml"
    path.write_text(yaml.safe_dump(config, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return path


def wheels_dataset(folder: Path) -> dict[str, bytes]:
    """``fintts-wheels`` as uploaded: this checkout's wheel (as ``fintts kaggle wheels`` builds it) and the stand-in
    ``chatterbox-light`` (the module's docstring says why)."""
    folder.mkdir()
    wheels = dataset_wheel(folder)
    built_wheel(folder / "stand-in", "chatterbox_light-1.0.2-py3-none-any.whl",
                {"chatterbox/__init__.py": '"""A stand-in for chatterbox-light 1.0.2, installed by the notebook."""\n'})
    return {path.name: path.read_bytes() for path in [*wheels.iterdir(), *(folder / "stand-in").iterdir()]}


def kaggle_session(kaggle, hub, tmp_path: Path, ended: dict[int, dict]):
    """Each pushed version run as its session, on a fresh disk and image, ended by Kaggle at its first periodic
    checkpoint. ``ended[version]``: its log, status.json, image and the Hub's files as it ended, and ``resumed``, the
    step of the Hub's latest as it began."""

    def session(push, version):
        folder, image = tmp_path / f"session-v{version}", tmp_path / f"image-v{version}"
        store = folder / "runs" / REPO.split("/")[1]
        image.mkdir()
        python = Path(kaggle_like_python(image))
        resumed = hub_step(hub)
        on_kaggle = {KAGGLE_MARK: "Batch", START_VARIABLE: repr(time.time()), "PIP_NO_INDEX": "1"}
        with stopped_at_a_checkpoint(store, resumed, MAX_STEPS) as on_cell:  # then its final push
            ok, log = run_pushed_notebook(kaggle, push, version, folder, env=on_kaggle, on_cell=on_cell, timeout=600,
                                          python=python)
        (tmp_path / f"session-v{version}.log").write_text(log)  # the notebook's output, kept for whoever reads a failure
        status = json.loads((store / "status.json").read_text()) if (store / "status.json").is_file() else {}
        ended[version] = {"log": log, "status": status, "resumed": resumed, "image": image / "venv",
                          "hub": hub.files(REPO)}
        return ok, log

    return session


def sound(data: bytes) -> bool:
    """Whether a wav holds audio that is not silence."""
    audio, _ = sf.read(io.BytesIO(data))
    return len(audio) > 0 and float(abs(audio).max()) > 1e-3


@pytest.mark.slow  # three notebook sessions that install fintts and train, then pull: a few minutes of CPU
@pytest.mark.process
def test_the_shipped_chatterbox_config_runs_as_a_chain_of_kaggle_sessions_that_install_it_and_carry_its_tokens(
        hub_env, tmp_path):
    ended: dict[int, dict] = {}
    for kaggle, env, sessions in local_kaggle(hub_env, tmp_path, notebook_exists=True, era="2026"):
        sessions.start = kaggle_session(kaggle, hub_env, tmp_path, ended)
        kaggle.add_dataset(f"{USER}/fintts-wheels", wheels_dataset(tmp_path / "wheels"))  # `fintts kaggle wheels`
        kaggle.add_dataset(CORPUS, as_uploaded(make_corpus(tmp_path / "my-voice", CLIPS)))  # `fintts kaggle corpus`
        kaggle.add_dataset(f"{USER}/{TOKEN_SLUG}", {"token": f"{TOKEN}\n".encode()})  # `fintts kaggle token`
        config = as_a_person_sets_it(tmp_path)
        chain = run("-m", "fintts", "kaggle", "run", "--corpus", CORPUS, "--hub-repo", REPO, "--config", str(config),
                    "--poll", "0.1", env=env, cwd=tmp_path, timeout=1200)
        out = chain.stdout
        (tmp_path / "laptop.log").write_text(out + chain.stderr)  # what the person saw, for whoever reads a failure
        logs = {version: ended[version]["log"] for version in ended}
        assert chain.returncode == 0, out + chain.stderr + "\n".join(logs.values())
        assert "the run is finished" in out

        # every session installed fintts with the chatterbox extra into its own image, offline, and trained with it
        assert sorted(ended) == list(range(1, SESSIONS + 1)) == list(range(1, len(kaggle.pushes) + 1)), out
        for session in ended.values():
            assert f"installed fintts {VERSION} from " in session["log"], session["log"][-3000:]
            assert "with the chatterbox package" in session["log"]
            installed = {path.name for path in session["image"].glob("lib/python*/site-packages/*.dist-info")}
            assert {f"fintts-{VERSION}.dist-info", "chatterbox_light-1.0.2.dist-info"} <= installed, installed

        # one run across the sessions, each from where the one before ended, the last to max_steps
        statuses = [ended[version]["status"] for version in sorted(ended)]
        steps = [(status["sessions"][-1]["start_step"], status["step"]) for status in statuses]
        assert [ended[version]["resumed"] for version in sorted(ended)] == [start for start, _ in steps], steps
        assert steps[0][0] == 0 and steps[-1][1] == MAX_STEPS, steps
        assert all(end == start for (_, end), (start, _) in zip(steps, steps[1:])), steps
        assert [status["state"] for status in statuses] == ["paused"] * (SESSIONS - 1) + ["finished"], steps
        assert {record["host"] for record in statuses[-1]["sessions"]} == {"kaggle"}

        # the first session made every clip's speech tokens; the next ones fetched them from the Hub and made none
        first, *later = (ended[version]["log"] for version in sorted(ended))
        assert f"token cache: making {CLIPS} of {CLIPS} clips' speech tokens" in first, first[-3000:]
        for log in later:
            assert "token cache: making" not in log, log[-3000:]
            shards = -(-CLIPS // SHARD_CLIPS)  # the first session's entries, in shards of SHARD_CLIPS clips
            assert f"downloading {shards} file(s) of cache/carried/ from " in log, log[-3000:]

        # each session validated once, and its samples were on the Hub as it ended: what each should say, and sound
        validations = list(range(STEPS, MAX_STEPS + 1, STEPS))
        assert [e["step"] for e in statuses[-1]["evals"]] == validations
        for (start, end), version in zip(steps, sorted(ended)):
            (step,) = [step for step in validations if start < step <= end]
            prefix = f"{checkpoint.CHECKPOINTS}/{checkpoint.name_for_step(step)}/samples/"
            samples = {path[len(prefix):]: data for path, data in ended[version]["hub"].items() if path.startswith(prefix)}
            assert sorted(samples) == ["0-my-voice.txt", "0-my-voice.wav", "1-my-voice.txt", "1-my-voice.wav"], (
                version, sorted(ended[version]["hub"]))
            assert all(sound(data) for name, data in samples.items() if name.endswith(".wav"))
        final = json.loads(hub_env.files(REPO)["status.json"])
        assert final["state"] == "finished" and final["step"] == MAX_STEPS
        assert latest_on_hub(hub_env, REPO) == checkpoint.name_for_step(MAX_STEPS)

        # the laptop, on a fresh disk: the voice pulled from the Hub is the folder the last session exported, whole (its
        # built-in voice conds.pt too, a pickle that upstream reads with weights_only=True), and fintts say speaks it: a
        # voice of random weights in tones, saying so (tests/tts/chatterbox/test_chatterbox_light.py: a release's speech)
        laptop = {**env, "HOME": str(tmp_path / "laptop"), "HF_HOME": str(tmp_path / "laptop" / "hf")}
        pulled = run("-m", "fintts", "pull", REPO, "--out", "voice", env=laptop, cwd=tmp_path, timeout=300)
        assert pulled.returncode == 0, pulled.stdout + pulled.stderr
        voice, exported = tmp_path / "voice" / "model", tmp_path / f"session-v{SESSIONS}" / "runs" / REPO.split("/")[1] / "model"
        assert {path.name: path.read_bytes() for path in voice.iterdir()} == {
            path.name: path.read_bytes() for path in exported.iterdir()}
        assert {"t3_mtl23ls_v2.safetensors", "grapheme_mtl_merged_expanded_v1.json", "conds.pt", "chatterbox.json",
                "README.md"} <= {path.name for path in voice.iterdir()}
        said = run("-m", "fintts", "say", "Hyvää huomenta", "--voice", str(voice), "-o", "huomenta.wav", env=laptop,
                   cwd=tmp_path, timeout=300)
        assert said.returncode == 0 and "not speech" in said.stderr, said.stdout + said.stderr
        audio, rate = sf.read(tmp_path / "huomenta.wav")
        assert rate == 24_000 and len(audio) >= 960 and abs(audio).max() > 0.2
