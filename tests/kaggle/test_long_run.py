"""Weeks of Kaggle sessions in minutes: ``fintts kaggle run`` chains real training sessions to a finished voice.

The laptop is the real ``python -m fintts kaggle run`` process with the real ``kaggle`` and
``huggingface_hub`` clients, against the local Kaggle and Hub (:mod:`test_kaggle_cli`'s
:func:`~test_kaggle_cli.local_kaggle`). Each Kaggle session runs the pushed notebook itself, every
cell (:func:`kaggle_helpers.run_pushed_notebook`): the token, the install, ``fintts check`` on the
mounted corpus, the training cell's ``launch`` (a tiny VITS from scratch, resumed from the Hub,
pushed back with the token) and the summary, on a disk of its own. The session runs "on Kaggle"
(``KAGGLE_KERNEL_RUN_TYPE``, so its lease and sessions log say ``kaggle``), its container started as
the session began (``FINTTS_SESSION_START``, which stands for ``/proc/1``'s start, the container's, on Kaggle:
:mod:`fintts.train.machine.platform`).

Each session is ended at a planned step, not after a wall-clock budget, so that the chain has the same
sessions on a fast CI machine and on a loaded laptop: the session's first periodic checkpoint
(``checkpoint_every_steps``) stands for its 12th hour, and the local Kaggle then sends the notebook's
kernel SIGTERM, a stop, which the kernel's ``launch`` passes to its training processes. The session
ends as at its deadline (docs/sessions-and-stores.md, "What is voted": ``paused``, with a checkpoint
of this step, pushed). A session that starts within :data:`STEPS` of ``max_steps`` saves no periodic
checkpoint first: it trains to ``max_steps`` and the run is finished. So the chain has :data:`SESSIONS`
sessions that train. Kaggle answers as it does since 2026 (``era="2026"``: a pushed version drops the
secret's binding, so the sessions read the token from the ``fintts-token`` dataset).

:data:`PLAN` says what each session (by its version, the push's order) meets: the place where the
faults of a long run are switched on, one entry each.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import signal
import threading
import time
import zipfile
from pathlib import Path

import nbformat
import pytest
import soundfile as sf
import yaml
from test_kaggle_cli import REPO, USER, local_kaggle, run
from test_kaggle_first_day import make_corpus

from fintts.kaggle.secret import TOKEN_SLUG
from fintts.train.machine.platform import START_VARIABLE
from fintts.train.run import checkpoint
from fintts.train.run.layout import LATEST
from hub_helpers import TOKEN, latest_on_hub
from kaggle_helpers import run_pushed_notebook
from trainer_helpers import KAGGLE_MARK
from vits_helpers import TINY

#: Steps between periodic checkpoints. Kaggle ends a session at its first one; the session stops at the end of the
#: step the signal arrives in (one or two later), which must come before the next one for the chain to have SESSIONS.
STEPS = 6
#: Sessions that train before the run is finished (the issue's "at least 8").
SESSIONS = 8
#: A tiny VITS trained from scratch on the corpus below: a few steps a session, then a voice the laptop can speak.
#: No ONNX graphs in the sessions (each would cost ~10 s of CPU, tests/vits_helpers.py TRAINING_ONLY): the laptop's
#: ``fintts pull`` makes them from model/'s weights, as for any voice exported without them.
CONFIG = {**{key: value for key, value in TINY.items() if key != "speakers"},
          "max_steps": SESSIONS * STEPS, "checkpoint_every_steps": STEPS, "eval_every": STEPS, "eval_speakers": 1,
          "mcd_items": 2, "keep_last": 2, "export_onnx": False}
CORPUS = "alice/my-voice"


@dataclasses.dataclass(frozen=True)
class Plan:
    """What one Kaggle session meets, by its version (the push's order).

    Each fault of a long run (issue 53) is a field here, acted on in :func:`kaggle_session` at one of three places:
    as the session begins (the machine, what the laptop meets at its push), as Kaggle ends it (its final save and
    push follow the signal), and once its notebook has ended (what Kaggle says about it afterwards).
    """

    #: the session's machine has this many devices: the notebook's ``launch`` starts one process per device
    processes: int = 1


#: Session (Kaggle version) → what it meets; a version not named here is a plain session.
PLAN: dict[int, Plan] = {
    3: Plan(processes=2),  # T4 ×2: two processes (gloo on the CPU), one process group
}


def on_machine(push: dict, plan: Plan) -> dict:
    """``push`` as the session's machine runs it: with ``plan.processes`` devices, ``launch`` starts that many processes.

    A CPU has none, so ``launch`` would train in the kernel's process: the stand-in machine's devices are written
    into the training cell's call, as ``launch`` counts Kaggle's two T4s.
    """
    if plan.processes == 1:
        return push
    notebook = nbformat.reads(push["text"], as_version=4)
    cell = next(cell for cell in notebook.cells if "launch(config, " in cell.source)
    cell.source = cell.source.replace("launch(config, ", f"launch(config, num_processes={plan.processes}, ")
    return {**push, "text": nbformat.writes(notebook)}


def hub_step(hub) -> int:
    """The step of the Hub's ``latest`` (0: nothing trained there yet)."""
    try:
        return checkpoint.step_of(latest_on_hub(hub, REPO))
    except Exception:  # no repo yet: the first session creates it
        return 0


def saved_step(store: Path) -> int:
    """The step of the newest complete checkpoint in the session's run folder (-1: none yet)."""
    name = (store / LATEST).read_text().strip() if (store / LATEST).is_file() else ""
    return checkpoint.step_of(name) if checkpoint.is_checkpoint_name(name) else -1


def kaggle_session(kaggle, hub, tmp_path: Path, ended: dict[int, dict]):
    """What the local Kaggle does with each pushed version: the notebook run as :data:`PLAN` says, ended by Kaggle at
    its first periodic checkpoint. ``ended[version]``: the run's status.json on the session's disk at its end, with
    ``resumed``, the step of the Hub's latest when the session began."""

    def session(push, version):  # the session begins
        plan = PLAN.get(version, Plan())
        folder = tmp_path / f"session-v{version}"
        store = folder / "runs" / REPO.split("/")[1]
        resumed = hub_step(hub)
        done = threading.Event()
        watching: list[threading.Thread] = []

        def kaggle_ends_it(kernel: int) -> None:
            """SIGTERM to the kernel (which passes it to its training processes) once the session has saved a
            checkpoint past the one it resumed, and not the run's last; nothing once the training cell has ended."""
            while not done.wait(0.05):
                if resumed < saved_step(store) < CONFIG["max_steps"]:
                    os.kill(kernel, signal.SIGTERM)  # the session's final save and push follow
                    return

        def on_cell(source: str, kernel: int) -> None:
            if watching:  # the cell after the training cell: the session ended by itself
                done.set()
            elif "launch(" in source:
                watching.append(threading.Thread(target=kaggle_ends_it, args=(kernel,), daemon=True))
                watching[0].start()

        # on Kaggle (its lease and the sessions log say so), in a container that started with the session
        on_kaggle = {KAGGLE_MARK: "Batch", START_VARIABLE: repr(time.time())}
        try:
            ok, log = run_pushed_notebook(kaggle, on_machine(push, plan), version, folder, env=on_kaggle, on_cell=on_cell,
                                          timeout=600)
        finally:
            done.set()
        # the notebook has ended: what Kaggle says of the session from here on is the laptop's to read
        if (store / "status.json").is_file():
            ended[version] = {**json.loads((store / "status.json").read_text()), "resumed": resumed}
        return ok, log

    return session


def as_uploaded(folder: Path) -> dict[str, bytes]:
    """A corpus folder as ``fintts kaggle corpus`` uploads it: each file, each folder one zip (``dir_mode="zip"``)."""
    files = {path.name: path.read_bytes() for path in folder.iterdir() if path.is_file()}
    for sub in (path for path in folder.iterdir() if path.is_dir()):
        zipped = io.BytesIO()
        with zipfile.ZipFile(zipped, "w") as archive:
            for path in sorted(sub.rglob("*")):
                archive.write(path, path.relative_to(sub))
        files[f"{sub.name}.zip"] = zipped.getvalue()
    return files


@pytest.mark.slow  # eight notebook sessions that train, one with two processes, then pull and say: minutes of CPU
def test_a_run_of_many_kaggle_sessions_is_finished_with_nothing_trained_lost_and_the_laptop_speaks_it(hub_env, tmp_path):
    ended: dict[int, dict] = {}
    # Kaggle as it answers since 2026: every push drops the secret's binding, so the token comes from its dataset
    for kaggle, env, sessions in local_kaggle(hub_env, tmp_path, notebook_exists=True, era="2026"):
        sessions.start = kaggle_session(kaggle, hub_env, tmp_path, ended)
        kaggle.add_dataset(CORPUS, as_uploaded(make_corpus(tmp_path / "my-voice", 6)))  # `fintts kaggle corpus`
        kaggle.add_dataset(f"{USER}/{TOKEN_SLUG}", {"token": f"{TOKEN}\n".encode()})  # `fintts kaggle token`
        config = tmp_path / "tiny.yaml"
        config.write_text(yaml.safe_dump(CONFIG, allow_unicode=True))
        chain = run("-m", "fintts", "kaggle", "run", "--corpus", CORPUS, "--hub-repo", REPO, "--config", str(config),
                    "--poll", "0.1", env=env, cwd=tmp_path, timeout=1800)
        out = chain.stdout
        assert chain.returncode == 0, out + chain.stderr
        assert "the run is finished" in out

        # every session trained, from the Hub's latest, where the one before it ended, and the last to max_steps
        max_steps = CONFIG["max_steps"]
        assert len(kaggle.pushes) == len(ended) == SESSIONS, out
        statuses = [status for _, status in sorted(ended.items())]
        steps = [(status["sessions"][-1]["start_step"], status["step"]) for status in statuses]
        assert [status["resumed"] for status in statuses] == [start for start, _ in steps], steps
        assert steps[0][0] == 0 and steps[-1][1] == max_steps, steps
        assert all(end == start for (_, end), (start, _) in zip(steps, steps[1:])), steps
        assert all(start < end for start, end in steps), steps
        assert [status["state"] for status in statuses] == ["paused"] * (SESSIONS - 1) + ["finished"]
        assert [status["reason"] for status in statuses] == ["SIGTERM"] * (SESSIONS - 1) + ["max_steps"]
        # the Hub holds the whole run: its latest is the last step, its sessions log every session
        final = json.loads(hub_env.files(REPO)["status.json"])
        assert latest_on_hub(hub_env, REPO) == checkpoint.name_for_step(max_steps)
        assert final["state"] == "finished" and final["step"] == max_steps
        assert [(record["start_step"], record["end_step"]) for record in final["sessions"]] == steps
        assert {record["host"] for record in final["sessions"]} == {"kaggle"}
        assert hub_env.rewrites(REPO) > 0  # the final pushes freed what they pruned: the Hub's history was rewritten
        assert [record["devices"].split("×")[0] for record in final["sessions"]] == [
            str(PLAN.get(version, Plan()).processes) for version in sorted(ended)]
        for number, (start, end) in enumerate(steps, 1):
            assert f"session {number}: pushed version {number} of" in out
            assert f"{start} → {end}" in out  # the chain's own table of its sessions

        # the laptop, on a fresh disk: pull the voice and say something with it
        laptop = {**env, "HOME": str(tmp_path / "laptop"), "HF_HOME": str(tmp_path / "laptop" / "hf")}
        pulled = run("-m", "fintts", "pull", REPO, "--out", "voice", env=laptop, cwd=tmp_path)
        assert pulled.returncode == 0, pulled.stdout + pulled.stderr
        said = run("-m", "fintts", "say", "Hyvää huomenta", "--voice", "voice/model", "-o", "huomenta.wav", env=laptop,
                   cwd=tmp_path)
        assert said.returncode == 0, said.stdout + said.stderr
        audio, rate = sf.read(tmp_path / "huomenta.wav")
        assert rate == CONFIG["model"]["sampling_rate"] and len(audio) > 0
