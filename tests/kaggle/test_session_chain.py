"""Weeks of Kaggle sessions in minutes: ``fintts kaggle run`` chains real training sessions to a finished voice.

The laptop is the real ``fintts kaggle run`` command in a process of its own with the real ``kaggle`` and
``huggingface_hub`` clients, against the local Kaggle and Hub (:mod:`test_kaggle_cli`'s
:func:`~test_kaggle_cli.local_kaggle`), run by :mod:`fintts_stand_ins.played_time` on a clock that keeps the
system's time except while a session stays running for good (below). Each Kaggle session runs the pushed notebook itself, every
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

:data:`PLAN` says what each session (by its version, the push's order) meets: the faults of a long run
(issue 53), each switched on in one session, and the fix in fintts that each one exercises:

* **An OAuth login whose access token expires** (session 2): the laptop logs in as ``kaggle auth login``
  leaves it, and Kaggle ends its access token's 12 hours as the session begins, while the client's copy still
  looks valid: the next look at the session is a 401, which ``fintts kaggle run`` answers by authenticating
  again once, refreshing the token (fintts/kaggle/client.py, ``Reauthenticating``).
* **A rank lost in a two-process session's first step** (session 3): rank 1 is killed once set-up is done; the
  session ends at once as failed with the checkpoint it resumed from (the step in flight is lost: nothing saved
  is), by the launcher's word to rank 0 (fintts/train/session/launcher.py, watchdog.py ``PeerExited``) or, on
  the CPU, by gloo seeing the closed connection first; the laptop counts it failed and pushes the next session,
  which resumes from the same checkpoint. A process that vanishes without closing its connections, as NCCL may
  leave one, is tests/train/processes/test_processes_end.py's.
* **A gateway's HTML 502 at a final commit** (session 4): the session's ``(end of session)`` commit is answered
  with a load balancer's page; the final push takes it for a passing failure and sends it again
  (fintts/train/stores/hub/errors.py: a 5xx, and a page that is not JSON, are transient).
* **A final history rewrite the Hub holds** (session 5): the rewrite comes after the release, so the status
  and the lease are on the Hub while it is held, and the next session starts without ``--force``
  (fintts/train/stores/hub/store.py ``release``, lease.py ``free_unreferenced``).
* **A state that stays ``running``** (session 6): the notebook ended and pushed, and Kaggle says RUNNING for
  good; the laptop, on a clock that plays that session's wait in half hours (:mod:`fintts_stand_ins.played_time`,
  ``@FILE``), ends it past 12 h and an hour as failed, and goes on (fintts/kaggle/sessions.py ``follow``,
  kernels.py ``PAST_LIMIT``).
* **A final push that is not sent** (session 7): Kaggle kills the session after its final save, while the
  push's upload is held, and keeps its working folder as the version's output; the laptop releases the lease
  the killed session left, pushes the newest checkpoint from the output and goes on from it
  (fintts/kaggle/sessions.py ``release_dead_lease``, ``_problem``'s ``rescued``; fintts/kaggle/output.py, which
  finds the run folder by its path's tail, as the session's working folder here is not ``/kaggle/working``).
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import signal
import threading
import time
import zipfile
from pathlib import Path

import nbformat
import pytest
import soundfile as sf
import yaml
from nbclient.exceptions import DeadKernelError
from test_kaggle_cli import KERNEL, REPO, USER, local_kaggle, run
from test_kaggle_over_weeks import STAND_INS, logged_in
from test_kaggle_setup import make_corpus

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
#: How many times as far as it says a wait of the laptop moves its clock while a session stays running for good:
#: ``--poll 0.1`` is then half an hour of Kaggle's time a look (only then: the sessions that train are real seconds).
WARP = 18000


@dataclasses.dataclass(frozen=True)
class Plan:
    """What one Kaggle session meets, by its version (the push's order).

    Each fault of a long run (issue 53) is a field here, acted on in :func:`kaggle_session` at one of three places:
    as the session begins (A: the machine, what the laptop meets at its push), as Kaggle ends it (B: its final save and
    push follow the signal), and once its notebook has ended (C: what Kaggle says about it afterwards).
    """

    #: the session's machine has this many devices: the notebook's ``launch`` starts one process per device
    processes: int = 1
    #: A: every OAuth access token issued so far expires (the laptop's next look at Kaggle is a 401)
    tokens_expire: bool = False
    #: A two-process session's rank 1 is killed in its first step, once its set-up is done
    loses_rank: bool = False
    #: A: the Hub answers the session's final commit (``(end of session)``) with a gateway's HTML 502, once
    final_commit_502: bool = False
    #: A: the Hub holds the session's final history rewrite, until the session's release is on it
    rewrite_held: bool = False
    #: A, C: Kaggle says RUNNING for good (A); the laptop's waits play half hours from the notebook's end (C)
    stays_running: bool = False
    #: B: Kaggle kills the kernel after its final save, the final push's upload held; its folder is the output (A)
    killed_before_final_push: bool = False


#: Session (Kaggle version) → what it meets; a version not named here is a plain session. A session that counts as
#: failed (6) is never next to another: two in a row stop the chain.
PLAN: dict[int, Plan] = {
    2: Plan(tokens_expire=True),
    3: Plan(processes=2, loses_rank=True),  # T4 ×2: two processes (gloo on the CPU), one process group
    4: Plan(final_commit_502=True),
    5: Plan(rewrite_held=True),
    6: Plan(stays_running=True),
    7: Plan(killed_before_final_push=True),
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


def landed(hub, summary: str) -> int:
    """How many commits whose summary begins with ``summary`` landed on the Hub's run (whatever rewrites did since)."""
    return sum(1 for commit in hub.landed(REPO) if commit["summary"].startswith(summary)) if REPO in hub.repos() else 0


def processes_under(pid: int) -> list[int]:
    """The processes descended from ``pid``, children first (Linux's /proc, as on Kaggle's machines and CI's)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):  # gone meanwhile
            continue
        children.setdefault(parent, []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        under = children.get(todo.pop(), [])
        found += under
        todo += under
    return found


def rank_of(pid: int) -> str | None:
    """The ``RANK`` a training process was started with (``None``: none, or gone)."""
    try:
        variables = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    return next((v.split(b"=", 1)[1].decode() for v in variables if v.startswith(b"RANK=")), None)


def kill(pids: list[int]) -> None:
    """SIGKILL each of ``pids`` that is still there."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def warp(factor_file: Path, factor: float | None) -> None:
    """Set how many times as far a wait moves the laptop's clock (``None``: as far as it says); atomically, as read."""
    if factor is None:
        factor_file.unlink(missing_ok=True)
        return
    part = factor_file.with_suffix(".part")
    part.write_text(repr(factor))
    os.replace(part, factor_file)


def kaggle_session(kaggle, hub, tmp_path: Path, ended: dict[int, dict], seen: dict[str, object]):
    """What the local Kaggle does with each pushed version: the notebook run as :data:`PLAN` says, ended by Kaggle at
    its first periodic checkpoint. ``ended[version]``: the run's status.json on the session's disk at its end, with
    ``resumed``, the step of the Hub's latest when the session began. ``seen``: what the faults did, for the test to
    assert (``polls``: the laptop's looks at the stuck session after its notebook ended; ``held``: the session whose
    final rewrite the Hub held; ``killed``: the session killed before its final push)."""
    warp_file = tmp_path / "warp"

    def session(push, version):  # A: the session begins
        plan = PLAN.get(version, Plan())
        folder = tmp_path / f"session-v{version}"
        store = folder / "runs" / REPO.split("/")[1]
        resumed = hub_step(hub)
        done = threading.Event()
        watching: list[threading.Thread] = []

        def finish_the_rewrite(releases: int) -> None:
            """The Hub finishes the held rewrite once the session's release is on it: it takes long, not for ever."""
            while not done.wait(0.1):
                if hub.wait_stalled(0) and landed(hub, "release:") > releases:
                    seen["held"] = version
                    hub.release()
                    return

        def kaggle_ends_it(kernel: int) -> None:
            """B: SIGTERM to the kernel (which passes it to its training processes) once the session has saved a
            checkpoint past the one it resumed, and not the run's last; nothing once the training cell has ended."""
            while not done.wait(0.05):
                periodic = saved_step(store)
                if not resumed < periodic < CONFIG["max_steps"]:
                    continue
                if plan.killed_before_final_push:  # its status on the Hub says running at its periodic checkpoint...
                    if not landed(hub, checkpoint.name_for_step(periodic)):
                        continue
                    hub.stall(None, path=r"/preupload/", method="POST")  # ...and the final push's upload never goes
                os.kill(kernel, signal.SIGTERM)  # the session's final save and push follow
                if plan.killed_before_final_push:
                    kill_after_the_final_save(kernel, periodic)
                return

        def kill_after_the_final_save(kernel: int, periodic: int) -> None:
            """Kaggle's end, past the signal: the kernel and its processes killed once the final save is on the disk and
            its push has not been sent."""
            while not done.wait(0.05):
                if saved_step(store) > periodic and hub.wait_stalled(0):
                    seen["killed"] = version
                    kill([*processes_under(kernel), kernel])
                    return

        def loses_a_rank(kernel: int) -> None:
            """Rank 1 killed in the first step, once the session's set-up wrote its status (running, this session's
            record in it)."""
            while not done.wait(0.05):
                status = json.loads((store / "status.json").read_text()) if (store / "status.json").is_file() else {}
                if status.get("state") == "running" and status["sessions"][-1]["start_step"] == resumed:
                    kill([pid for pid in processes_under(kernel) if rank_of(pid) == "1"])
                    return

        def on_cell(source: str, kernel: int) -> None:
            if watching:  # the cell after the training cell: the session ended by itself
                done.set()
            elif "launch(" in source:
                watching.extend(threading.Thread(target=watch, args=(kernel,), daemon=True)
                                for watch in [kaggle_ends_it, *([loses_a_rank] if plan.loses_rank else [])])
                for thread in watching:
                    thread.start()

        if "stuck" in seen:  # the session before stayed running: the laptop has given it up, on real time again
            warp(warp_file, None)
            seen["polls"] = kaggle.calls["GetKernelSessionStatus"] - seen.pop("stuck")
        if plan.tokens_expire:
            kaggle.expire_access_tokens()
        if plan.final_commit_502:  # picked by its summary: a periodic push may be in flight as the session is stopped
            hub.fail(502, gateway=True, path=r"/commit/", method="POST", body=r"\(end of session\)")
        if plan.rewrite_held:
            hub.hold_rewrites()
            releases = landed(hub, "release:")
            threading.Thread(target=finish_the_rewrite, args=(releases,), daemon=True).start()
        if plan.stays_running:
            kaggle.stay_running(version)
        if plan.killed_before_final_push:  # Kaggle keeps the session's /kaggle/working as the version's output
            kaggle.keep_output(KERNEL, version, folder)

        # on Kaggle (its lease and the sessions log say so), in a container that started with the session
        on_kaggle = {KAGGLE_MARK: "Batch", START_VARIABLE: repr(time.time())}
        try:
            ok, log = run_pushed_notebook(kaggle, on_machine(push, plan), version, folder, env=on_kaggle, on_cell=on_cell,
                                          timeout=600)
        except DeadKernelError:
            if seen.get("killed") != version:
                raise
            # Kaggle ended it: the version completes with its /kaggle/working kept as its output (how Kaggle reports a
            # session it killed at its limit is not documented; the stand-in serves a completed version's output)
            ok, log = True, "(the session was killed)\n"
        finally:
            done.set()
            if plan.killed_before_final_push:
                hub.release()  # the held upload goes on, to a connection that is gone
        # C: the notebook has ended; what Kaggle says of the session from here on is the laptop's to read
        if plan.stays_running:  # the laptop looks every half hour of Kaggle's time from now on
            seen["stuck"] = kaggle.calls["GetKernelSessionStatus"]
            warp(warp_file, WARP)
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
def test_a_run_of_many_kaggle_sessions_meets_a_long_runs_faults_and_is_finished_with_nothing_trained_lost(hub_env, tmp_path):
    ended: dict[int, dict] = {}
    seen: dict[str, object] = {}
    # Kaggle as it answers since 2026: every push drops the secret's binding, so the token comes from its dataset
    for kaggle, env, sessions in local_kaggle(hub_env, tmp_path, notebook_exists=True, era="2026"):
        sessions.start = kaggle_session(kaggle, hub_env, tmp_path, ended, seen)
        kaggle.add_dataset(CORPUS, as_uploaded(make_corpus(tmp_path / "my-voice", 6)))  # `fintts kaggle corpus`
        kaggle.add_dataset(f"{USER}/{TOKEN_SLUG}", {"token": f"{TOKEN}\n".encode()})  # `fintts kaggle token`
        config = tmp_path / "tiny.yaml"
        config.write_text(yaml.safe_dump(CONFIG, allow_unicode=True))
        # logged in with `kaggle auth login`; on a clock warped while a session stays running (fintts_stand_ins.played_time)
        laptop = logged_in(kaggle, env, "oauth") | {"PYTHONPATH": os.pathsep.join([str(STAND_INS), env["PYTHONPATH"]])}
        chain = run("-m", "fintts_stand_ins.played_time", f"@{tmp_path / 'warp'}", "kaggle", "run", "--corpus", CORPUS,
                    "--hub-repo", REPO, "--config", str(config), "--poll", "0.1", env=laptop, cwd=tmp_path, timeout=1800)
        out = chain.stdout
        assert chain.returncode == 0, out + chain.stderr
        assert "the run is finished" in out

        # every session trained, from the Hub's latest, where the one before it ended, and the last to max_steps
        max_steps = CONFIG["max_steps"]
        assert len(kaggle.pushes) == len(ended) >= SESSIONS, out
        statuses = [status for _, status in sorted(ended.items())]
        steps = [(status["sessions"][-1]["start_step"], status["step"]) for status in statuses]
        assert [status["resumed"] for status in statuses] == [start for start, _ in steps], steps
        assert steps[0][0] == 0 and steps[-1][1] == max_steps, steps
        assert all(end == start for (_, end), (start, _) in zip(steps, steps[1:])), steps  # nothing trained was lost
        lost = [version for version, plan in PLAN.items() if plan.loses_rank]
        # the session that lost a rank ended at the checkpoint it resumed from; every other one trained
        assert [start < end for start, end in steps] == [version not in lost for version in sorted(ended)], steps
        assert sum(start < end for start, end in steps) >= SESSIONS, steps
        killed = seen["killed"]
        plain = ["paused"] * (len(statuses) - 1) + ["finished"]
        # the killed session never wrote its end: its status is the one its final save left, running at its last step
        assert [status["state"] for status in statuses] == [
            "running" if version == killed else "failed" if version in lost else state
            for version, state in zip(sorted(ended), plain)], steps
        assert [status["reason"] for status in statuses if status["state"] in ("paused", "finished")] == [
            "SIGTERM"] * (len(statuses) - 2 - len(lost)) + ["max_steps"]
        # ended by the launcher's word that process 1 is gone, or by gloo, which on the CPU sees a killed peer's closed
        # connection in the same step (NCCL may not: tests/train/processes/test_processes_end.py plays a process that vanishes)
        assert all("process 1 ended" in ended[version]["reason"] or "Connection closed by peer" in ended[version]["reason"]
                   for version in lost), [ended[version]["reason"] for version in lost]
        # the Hub holds the whole run: its latest is the last step, its sessions log every session
        final = json.loads(hub_env.files(REPO)["status.json"])
        assert latest_on_hub(hub_env, REPO) == checkpoint.name_for_step(max_steps)
        assert final["state"] == "finished" and final["step"] == max_steps
        # (a session's record travels in the checkpoints it saves: the one that lost a rank saved none, and left none)
        trained = [version for version in sorted(ended) if version not in lost]
        assert [(record["start_step"], record["end_step"]) for record in final["sessions"]] == [
            step for version, step in zip(sorted(ended), steps) if version in trained]
        assert {record["host"] for record in final["sessions"]} == {"kaggle"}
        assert hub_env.rewrites(REPO) > 0  # the final pushes freed what they pruned: the Hub's history was rewritten
        assert [record["devices"].split("×")[0] for record in final["sessions"]] == [
            str(PLAN.get(version, Plan()).processes) for version in trained]
        assert PLAN[lost[0]].processes == 2 and ended[lost[0]]["sessions"][-1]["devices"].startswith("2×")
        for number, (start, end) in enumerate(steps, 1):
            assert f"session {number}: pushed version {number} of" in out
            assert f"{start} → {end}" in out  # the chain's own table of its sessions

        # what each fault did, and what the laptop did about it
        assert kaggle.calls["GenerateAccessToken"] == 1  # the expired access token refreshed once, then used
        commits_502 = [r for r in hub_env.requests if "/commit/" in r.path and r.status == 502]
        final_4 = f"{checkpoint.name_for_step(ended[4]['step'])} (end of session)".encode()
        assert len(commits_502) == 1 and final_4 in commits_502[0].body  # session 4's final commit, sent again
        assert seen["held"] == 5  # session 5's final rewrite was held past its release; session 6 took the run over
        stuck = [version for version, plan in PLAN.items() if plan.stays_running]
        assert f"session {stuck[0]} failed: Kaggle still said running 13:" in out
        # looked at every half hour of Kaggle's time once its notebook had ended: given up at the 26th look, 13 h in
        assert seen["polls"] in (26, 27), seen
        assert f"session {killed}: the kernel ended (complete) and left the lease of session" in out
        newest = checkpoint.name_for_step(ended[killed]["step"])
        assert (f"session {killed}: the newest checkpoint was not on the Hub: pushed {newest} (step {ended[killed]['step']}) "
                f"from the output of {KERNEL}/{killed} on Kaggle") in out
        assert f"session {lost[0]} failed: " in out
        # the session that lost a rank, and the stuck one (a failed session's log tail follows its line, with its own words)
        assert re.findall(r"^session (\d+) failed: ", out, re.M) == [str(lost[0]), str(stuck[0])]

        # the laptop, on a fresh disk: pull the voice and say something with it
        laptop = {**env, "HOME": str(tmp_path / "laptop"), "HF_HOME": str(tmp_path / "laptop" / "hf")}
        pulled = run("-m", "fintts", "pull", REPO, "--out", "voice", env=laptop, cwd=tmp_path)
        assert pulled.returncode == 0, pulled.stdout + pulled.stderr
        said = run("-m", "fintts", "say", "Hyvää huomenta", "--voice", "voice/model", "-o", "huomenta.wav", env=laptop,
                   cwd=tmp_path)
        assert said.returncode == 0, said.stdout + said.stderr
        audio, rate = sf.read(tmp_path / "huomenta.wav")
        assert rate == CONFIG["model"]["sampling_rate"] and len(audio) > 0
