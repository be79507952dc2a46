"""``fintts kaggle push/run/status/wheels`` with the real ``kaggle`` client, against a local Kaggle and Hub."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import os
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from huggingface_hub import CommitOperationAdd, HfApi
from huggingface_hub.errors import HfHubHTTPError

from fintts.errors import LeaseConflict
from fintts.kaggle.kernel import KAGGLE_PYTHON
from fintts.kaggle.parameters import load, read_parameters
from fintts.train.config import parse_duration
from fintts.train.retry import Backoff
from fintts.train.run.layout import LEASE
from fintts.train.stores.hub.lease import Lease, iso
from fintts_stand_ins.kaggle_server import KaggleServer
from hub_helpers import TOKEN, export_model, make_store, save
from kaggle_helpers import checkout_first
from notebook_helpers import ROOT

USER, REPO = "alice", "alice/my-voice-run"
KERNEL = "alice/fintts-alice-my-voice-run"  # the kernel of REPO: one per Hub repo


def run(*args: str, env: dict[str, str], cwd, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@dataclasses.dataclass
class Sessions:
    """What the local Kaggle's sessions do, in push order: push a run's status (and checkpoint) to the Hub, end ok or not, log."""

    script: list[tuple[dict | None, bool, str]] = dataclasses.field(default_factory=list)
    seconds: float = 0.0  # how long each runs
    gate: threading.Event | None = None  # when set, each waits for it first
    #: each session takes the run's lease first, as `fintts train` does (refused: it fails with the trainer's message)
    leases: bool = False
    #: versions that die holding the lease (a crash: Kaggle ends the kernel, nothing releases it)
    crashes: set[int] = dataclasses.field(default_factory=set)
    #: seconds Kaggle's clock runs ahead of this machine's (behind: negative), as the crashed kernels' leases say
    kaggle_clock: float = 0.0
    #: versions whose checkpoint push the Hub refuses, so that only status.json lands (as a release pushes it)
    refused: set[int] = dataclasses.field(default_factory=set)
    #: sessions save and push through a real HubStore, as `fintts train` does (a refused one: its final push gets a 413)
    stores: bool = False
    ran: int = 0  # sessions that got past `start` so far: the next one plays script[ran]
    #: what the notebook's first cells do with (push, version): ``(ok, log)`` ends the session there; the log so far (or
    #: ``None``) goes on to the script
    start: Callable[[dict, int], tuple[bool, str] | str | None] | None = None
    #: each session that trains runs to its BUDGET (12 h without one), which the local Kaggle's weekly quota counts
    count_budget: bool = False


def push_run(hub: HfApi, status: dict, repo: str = REPO) -> None:
    """What a session's full push commits: its checkpoint, model/, latest and the status (one commit)."""
    name = os.path.basename(status.get("latest_checkpoint") or "")
    files = {"status.json": json.dumps(status).encode()}
    if name:
        files |= {f"checkpoints/{name}/MANIFEST.json": b"{}", "model/config.json": json.dumps({"step": status["step"]}).encode(),
                  "latest": f"{name}\n".encode()}
    hub.create_commit(repo, [CommitOperationAdd(path, data) for path, data in files.items()], commit_message=f"push {name}")


def store_session(hub_env, root, status_: dict, *, refused: bool) -> None:
    """What `fintts train` leaves on the Hub: resume, save the status's checkpoint, push it as the final push, release.

    A refused final push (413: the file is too large, a storage quota) leaves the checkpoint on the session's disk while
    the release's small commit still lands the status (saying ``saved.local_only``); the next try would come after 30 s.
    """
    slow = Backoff(base=30.0, cap=30.0, jitter=0.0, retry_after_cap=30.0)
    store = make_store(hub_env, root, REPO, host="kaggle", backoff=slow)
    store.acquire(root.name)
    store.resume_point(log=lambda _: None)
    name = save(store.root, status_["step"])
    export_model(store.root, status_["step"])
    (store.root / "status.json").write_text(json.dumps({**status_, "latest_checkpoint": str(store.root / "checkpoints" / name)}))
    if refused:
        hub_env.fail(413, path=r"/commit/", method="POST")
    store.publish(name, final=True)
    assert store.wait(timeout=30) is not refused
    store.release()
    store.close()


@pytest.fixture
def kaggle_env(hub_env, tmp_path):
    """A local Kaggle whose sessions follow a :class:`Sessions` script, and the env of a laptop using it and the Hub.

    REPO's notebook exists on it already: the first day is done (test_kaggle_setup.py plays it).
    """
    yield from local_kaggle(hub_env, tmp_path, notebook_exists=True)


@pytest.fixture(params=["before", "2026"])
def era_kaggle_env(hub_env, tmp_path, request):
    """:func:`kaggle_env`, Kaggle answering as it did before 2026 and as it does since (403s, versions' stale states)."""
    yield from local_kaggle(hub_env, tmp_path, notebook_exists=True, era=request.param)


#: What the wheels dataset holds for these tests: a wheel named as this checkout's fintts (the notebook's install cell
#: then installs nothing) and the configs (`fintts kaggle wheels` itself is tested once: it builds for minutes).
WHEELS = {f"fintts-{importlib.metadata.version('fintts')}-py3-none-any.whl": b"stand-in",
          "demo.yaml": (ROOT / "configs" / "demo.yaml").read_bytes()}


def local_kaggle(hub_env, tmp_path, *, notebook_exists: bool, era: str = "before"):
    """What :func:`kaggle_env` yields; ``notebook_exists=False``: an account that has never pushed a fintts notebook.

    ``era``: how the local Kaggle answers (:class:`KaggleServer`: ``"before"`` or ``"2026"``).
    """
    sessions = Sessions()
    hub = HfApi(endpoint=hub_env.endpoint, token=TOKEN)

    def session(push, version):
        if sessions.gate is not None:
            sessions.gate.wait(60)
        time.sleep(sessions.seconds)
        begun = sessions.start(push, version) if sessions.start is not None else None
        if isinstance(begun, tuple):
            return begun
        if sessions.count_budget:
            budget = read_parameters(json.loads(push["text"]))["BUDGET"]
            server.used_hours += (parse_duration(budget) if budget else 12 * 3600) / 3600
        sessions.ran += 1
        write_status, ok, log = sessions.script[sessions.ran - 1]
        repo = read_parameters(json.loads(push["text"]))["REPO"] or REPO  # the pushed voice's run
        hub.create_repo(repo, private=True, exist_ok=True)
        store = None
        if version in sessions.crashes:  # took the lease as a trainer on Kaggle does, then died
            now = time.time() + sessions.kaggle_clock
            lease = Lease(f"kernel-v{version}", "kaggle", 1, iso(now), now, 900.0)
            hub.upload_file(path_or_fileobj=lease.to_bytes(), path_in_repo=LEASE, repo_id=REPO)
        elif sessions.leases:
            store = make_store(hub_env, tmp_path / f"session-{version}", REPO, host="kaggle")
            try:
                store.acquire(f"kernel-v{version}")
            except LeaseConflict as err:
                return False, f"error: {err}\n"
        if write_status is not None and sessions.stores:
            store_session(hub_env, tmp_path / f"session-{version}", write_status, refused=version in sessions.refused)
        elif write_status is not None:
            if version in sessions.refused:
                hub_env.fail(403, path=r"/commit/", method="POST")
                with pytest.raises(HfHubHTTPError):
                    push_run(hub, write_status)
                hub.upload_file(path_or_fileobj=json.dumps(write_status).encode(), path_in_repo="status.json", repo_id=REPO)
            else:
                push_run(hub, write_status, repo)
        if store is not None:
            store.release()
        return ok, (begun or "") + log

    with KaggleServer(user=USER, session=session, era=era) as kaggle:
        server = kaggle
        kaggle.add_dataset(f"{USER}/fintts-wheels", WHEELS)  # `fintts kaggle wheels` ran (a push names it; Kaggle checks it)
        if notebook_exists:
            kaggle.create_kernel(KERNEL)
            kaggle.add_dataset(f"{USER}/my-voice")  # and `fintts kaggle corpus`
        env = {**os.environ, **kaggle.env(), "HOME": str(tmp_path / "home"), "TMPDIR": str(tmp_path), "PYTHONPATH": checkout_first()}
        env.pop("KAGGLE_KERNEL_RUN_TYPE", None)
        yield kaggle, env, sessions


def status(state: str, step: int, sessions: int, *, reason: str = "deadline", best: float = 4.0) -> dict:
    """A run's status.json as a session leaves it (the keys fintts kaggle run reads)."""
    return {
        "state": state, "reason": reason, "step": step, "max_steps": 300, "monitor": "val/mcd",
        "best": {"value": best, "step": step, "checkpoint": f"step-{step:08d}"},
        "latest_checkpoint": f"/kaggle/working/runs/my-voice-run/checkpoints/step-{step:08d}" if step else None,
        "sessions": [{"start_step": 0, "end_step": step}] * sessions,
    }


@pytest.mark.process
def test_push_dry_run_stages_what_the_kaggle_command_pushes_as_is(kaggle_env, tmp_path):
    kaggle, env, _ = kaggle_env
    staged = tmp_path / "staged"
    result = run("-m", "fintts", "kaggle", "push", "--dry-run", "--out", str(staged), "--corpus", "alice/my-voice",
                 "--hub-repo", REPO, "--budget", "11h30m", env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    metadata = json.loads((staged / "kernel-metadata.json").read_text())
    assert metadata["id"] == KERNEL and metadata["code_file"] == "kaggle_train.ipynb"
    assert (metadata["kernel_type"], metadata["enable_gpu"], metadata["machine_shape"]) == ("notebook", True, "NvidiaTeslaT4")
    assert metadata["is_private"] is True and metadata["enable_internet"] is True
    assert metadata["dataset_sources"] == ["alice/fintts-wheels", "alice/my-voice"]
    assert read_parameters(load(staged / "kaggle_train.ipynb")) == {
        "CONFIG": "mms-fin.yaml", "CONFIG_YAML": "", "CORPUS": "alice/my-voice", "DATA": "", "REPO": REPO, "STORE": "",
        "BUDGET": "11h30m", "WHEELS": "", "TOKEN_DATASET": "", "PYTHON": KAGGLE_PYTHON, "INPUT": "/kaggle/input",
    }  # the corpus by its dataset: the notebook finds it under either of Kaggle's layouts
    assert not kaggle.pushes  # a dry run pushes nothing
    # the kaggle command line itself pushes the staged folder, without a word about the slug
    pushed = run("-m", "kaggle", "kernels", "push", "-p", str(staged), env=env, cwd=tmp_path)
    assert pushed.returncode == 0 and "successfully pushed" in pushed.stdout, pushed.stdout + pushed.stderr
    assert "does not resolve" not in pushed.stdout
    sent = kaggle.pushes[0]
    assert (sent["slug"], sent["machineShape"], sent["enableGpu"], sent["isPrivate"]) == (KERNEL, "NvidiaTeslaT4", True, True)
    assert sent["datasetDataSources"] == ["alice/fintts-wheels", "alice/my-voice"]
    assert TOKEN not in json.dumps(kaggle.pushes) and env["KAGGLE_KEY"] not in (staged / "kernel-metadata.json").read_text()


@pytest.mark.process
def test_push_dry_run_without_credentials_stages_the_folder_with_the_owner_left_to_fill_in(tmp_path):
    """A person looking at what would be pushed, before making a Kaggle token: the folder is staged, the owner's name
    (the one thing only credentials tell) left as a placeholder, and they are told to replace it."""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAGGLE_")} | {"HOME": str(home), "PYTHONPATH": checkout_first()}
    staged = tmp_path / "staged"
    result = run("-m", "fintts", "kaggle", "push", "--dry-run", "--out", str(staged), "--corpus", "alice/my-voice",
                 env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    metadata = json.loads((staged / "kernel-metadata.json").read_text())
    assert metadata["id"] == "YOUR-KAGGLE-NAME/fintts-train-a-finnish-voice"
    assert metadata["dataset_sources"] == ["YOUR-KAGGLE-NAME/fintts-wheels", "alice/my-voice"]
    assert "no Kaggle credentials here" in result.stdout and "put your Kaggle name in its place" in result.stdout
    assert (staged / "kaggle_train.ipynb").is_file()


@pytest.mark.process
def test_push_takes_a_config_file_from_anywhere_into_the_notebook(kaggle_env, tmp_path):
    kaggle, env, _ = kaggle_env
    own = tmp_path / "elsewhere" / "my-voice.yaml"
    own.parent.mkdir()
    text = "task: vits\ndata: /kaggle/input/my-voice\nformat: commonvoice\nsplit: train\nmax_steps: 100\n"
    own.write_text(text, encoding="utf-8")
    staged = tmp_path / "staged"
    result = run("-m", "fintts", "kaggle", "push", "--dry-run", "--out", str(staged), "--config", str(own),
                 "--hub-repo", REPO, env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    parameters = read_parameters(load(staged / "kaggle_train.ipynb"))
    assert (parameters["CONFIG"], parameters["CONFIG_YAML"]) == ("my-voice.yaml", text)
    assert run("-m", "fintts", "kaggle", "push", "--config", str(own), "--hub-repo", REPO, env=env, cwd=tmp_path).returncode == 0
    assert len(kaggle.pushes) == 1
    # a typo in the file, or a path that is nothing, is refused before anything is pushed
    own.write_text("task: vits\nmax_stepz: 100\n", encoding="utf-8")
    typo = run("-m", "fintts", "kaggle", "push", "--config", str(own), "--hub-repo", REPO, env=env, cwd=tmp_path)
    assert typo.returncode == 2 and "max_stepz" in typo.stderr
    missing = run("-m", "fintts", "kaggle", "push", "--config", str(tmp_path / "nope.yaml"), "--hub-repo", REPO, env=env, cwd=tmp_path)
    assert missing.returncode == 2 and "nope.yaml" in missing.stderr and "neither a file" in missing.stderr
    assert len(kaggle.pushes) == 1


@pytest.mark.process
def test_run_pushes_session_after_session_until_the_run_is_finished(era_kaggle_env, tmp_path):
    # 2026: right after each push the kernel's state is still the previous session's COMPLETE for a moment
    kaggle, env, sessions = era_kaggle_env
    sessions.script += [(status("paused", 100, 1, best=4.5), True, "paused\n"), (status("paused", 200, 2, best=3.9), True, "paused\n"),
               (status("finished", 300, 3, reason="max_steps", best=3.2), True, "finished\n")]
    result = run("-m", "fintts", "kaggle", "run", "--corpus", "alice/my-voice", "--hub-repo", REPO, "--poll", "0.1",
                 env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert len(kaggle.pushes) == 3
    out = result.stdout
    assert "session 1: pushed version 1" in out and "session 3: pushed version 3" in out
    rows = [line.split() for line in out.splitlines() if line[:1].isdigit()]
    assert [(r[0], r[1], r[6], r[8]) for r in rows] == [("1", "1", "0", "100"), ("2", "2", "100", "200"), ("3", "3", "200", "300")]
    assert rows[2][-1] == "finished" and "val/mcd" in out and "3.2" in out
    assert f"the run is finished. Pull the voice with: fintts pull {REPO} --out voices/my-voice-run" in out


@pytest.mark.process
def test_run_stops_when_two_sessions_in_a_row_fail_with_the_reason_and_the_log(kaggle_env, tmp_path):
    kaggle, env, sessions = kaggle_env
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    failed = status("failed", 0, 1, reason=oom)
    sessions.script += [(failed, False, f"Traceback (most recent call last):\n{oom}\n")] * 3
    result = run("-m", "fintts", "kaggle", "run", "--corpus", "alice/my-voice", "--hub-repo", REPO, "--poll", "0.1",
                 env=env, cwd=tmp_path)
    assert result.returncode == 1
    assert len(kaggle.pushes) == 2
    out = result.stdout
    assert "stopped: 2 sessions in a row failed" in out and f"the run failed: {oom}" in out
    assert out.rstrip().endswith(oom)  # the end of the last session's log


@pytest.mark.process
def test_run_retries_a_session_that_left_nothing_and_stops_at_max_sessions(kaggle_env, tmp_path):
    kaggle, env, sessions = kaggle_env
    sessions.script += [(None, True, "the notebook ended early\n"), (status("paused", 100, 1), True, "paused\n")]
    result = run("-m", "fintts", "kaggle", "run", "--hub-repo", REPO, "--config", "demo.yaml", "--max-sessions", "2",
                 "--poll", "0.1", env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "session 1 failed: the session left no new checkpoint" in result.stdout
    assert "stopped after 2 session(s) (--max-sessions 2)" in result.stdout
    assert kaggle.pushes[0]["datasetDataSources"] == ["alice/fintts-wheels"]  # the demo needs no corpus dataset


def recorded(hours: list[float]) -> list[dict]:
    """A status.json's ``sessions`` of Kaggle sessions that ran these many hours each."""
    return [{"host": "kaggle", "started": 1e9, "ended": 1e9 + h * 3600, "start_step": 0, "end_step": 100} for h in hours]


@pytest.mark.process
def test_run_counts_the_runs_gpu_hours_across_reruns_and_pushes_no_leftover_too_short(kaggle_env, tmp_path):
    kaggle, env, sessions = kaggle_env
    paused = status("paused", 100, 1) | {"sessions": recorded([11.5])}
    sessions.script += [(paused, True, ""), (status("paused", 200, 2) | {"sessions": recorded([11.5, 11.4])}, True, "")]
    first = kaggle_run(env, tmp_path, "--gpu-hours", "23", "--max-sessions", "1")
    assert first.returncode == 0 and len(kaggle.pushes) == 1, first.stdout + first.stderr
    # run again: the run has used 11.5 h of its 23, so this session's budget is what is left, not 12 h again
    second = kaggle_run(env, tmp_path, "--gpu-hours", "23")
    assert second.returncode == 0, second.stdout + second.stderr
    assert read_parameters(json.loads(kaggle.pushes[1]["text"]))["BUDGET"] == "11h30m"
    # then 0.1 h of the 23 is left: less than a session is worth, so nothing more is pushed
    assert "stopped: 0.10 GPU hours of --gpu-hours are left, less than a session is worth" in second.stdout
    assert len(kaggle.pushes) == 2


@pytest.mark.process
def test_a_budget_over_kaggles_12_hours_runs_to_the_sessions_own_limit(kaggle_env, tmp_path):
    kaggle, env, sessions = kaggle_env
    sessions.script.append((status("paused", 100, 1), True, ""))
    pushed = run("-m", "fintts", "kaggle", "push", "--config", "demo.yaml", "--hub-repo", REPO, "--budget", "12h54m",
                 env=env, cwd=tmp_path)
    assert pushed.returncode == 0, pushed.stdout + pushed.stderr
    assert "not less than Kaggle's 12 h session limit" in pushed.stdout
    assert read_parameters(json.loads(kaggle.pushes[-1]["text"]))["BUDGET"] == ""  # the platform's limit, with its reserve


@pytest.mark.process
def test_run_follows_a_session_already_running_instead_of_pushing_another(kaggle_env, tmp_path):
    kaggle, env, sessions = kaggle_env
    sessions.gate = threading.Event()
    sessions.script.append((status("paused", 100, 1), True, "paused\n"))
    assert run("-m", "fintts", "kaggle", "push", "--config", "demo.yaml", "--hub-repo", REPO, env=env, cwd=tmp_path).returncode == 0
    chain = subprocess.Popen([sys.executable, "-m", "fintts", "kaggle", "run", "--config", "demo.yaml", "--hub-repo", REPO,
                              "--max-sessions", "1", "--poll", "0.1"], cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True)
    first = chain.stdout.readline()
    sessions.gate.set()
    out = first + chain.communicate(timeout=60)[0]
    assert chain.returncode == 0, out
    assert f"{KERNEL} is already running: following it instead of pushing another session" in out
    assert len(kaggle.pushes) == 1 and "stopped after 1 session(s)" in out


@pytest.mark.process
def test_status_shows_the_kernel_the_run_and_the_gpu_quota(era_kaggle_env, tmp_path):
    # 2026: an unknown notebook, and one saved but never run, answer their status with a 403
    kaggle, env, sessions = era_kaggle_env
    before = run("-m", "fintts", "kaggle", "status", "--hub-repo", REPO, env=env, cwd=tmp_path)
    assert f"kernel     {KERNEL}: saved, never run (attach HF_TOKEN first" in before.stdout and "nothing trained yet" in before.stdout
    other = run("-m", "fintts", "kaggle", "status", "--hub-repo", "alice/other-voice", env=env, cwd=tmp_path)
    assert "kernel     alice/fintts-alice-other-voice: never pushed" in other.stdout
    sessions.script.append((status("paused", 100, 1, best=4.25), True, "paused\n"))
    assert run("-m", "fintts", "kaggle", "push", "--config", "demo.yaml", "--hub-repo", REPO, env=env, cwd=tmp_path).returncode == 0
    kaggle.wait_idle()
    after = run("-m", "fintts", "kaggle", "status", "--hub-repo", REPO, env=env, cwd=tmp_path).stdout
    assert f"kernel     {KERNEL}: complete" in after
    assert f"run        hf://{REPO}: paused at step 100 of 300, 1 session(s), best val/mcd 4.25" in after
    assert "GPU quota" in after and "of 30 h this week" in after


@pytest.mark.process
def test_without_credentials_the_kaggle_commands_say_where_they_go(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAGGLE_")} | {"HOME": str(tmp_path), "PYTHONPATH": checkout_first()}
    result = run("-m", "fintts", "kaggle", "status", env=env, cwd=tmp_path)
    assert result.returncode == 4 and "No Kaggle credentials" in result.stderr and "KAGGLE_USERNAME" in result.stderr
    assert "Generate New Token" in result.stderr and "~/.kaggle/access_token" in result.stderr  # the token Kaggle offers now
    assert "Authentication required" not in result.stdout  # the client's own import-time help is not shown


@pytest.mark.process
@pytest.mark.parametrize("version", ["1.7.4.5", "2.2.4"])
def test_an_older_kaggle_client_is_named_with_what_to_install(tmp_path, version):
    # what pip installs on Python 3.10 (1.7.4.5), or one before Quick Save (2.2.5): said before it is imported
    site = tmp_path / "site"
    (site / "kaggle").mkdir(parents=True)
    (site / "kaggle" / "__init__.py").write_text("raise OSError('the 1.7 client and a new-style token')\n")
    (site / f"kaggle-{version}.dist-info").mkdir()
    (site / f"kaggle-{version}.dist-info" / "METADATA").write_text(f"Metadata-Version: 2.1\nName: kaggle\nVersion: {version}\n")
    env = {**os.environ, "HOME": str(tmp_path), "PYTHONPATH": os.pathsep.join([str(site), checkout_first()])}
    result = run("-m", "fintts", "kaggle", "status", env=env, cwd=tmp_path)
    assert result.returncode == 4, result.stdout + result.stderr
    assert f"needs the kaggle client 2.2.5 or newer, and this Python has kaggle {version}" in result.stderr
    assert "pip install -U 'kaggle>=2.2.5'" in result.stderr and "Traceback" not in result.stderr


def test_the_train_extra_asks_for_the_kaggle_client_fintts_uses_where_python_allows_it():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    from packaging.requirements import Requirement

    from fintts.kaggle.client import MIN_KAGGLE

    train = [Requirement(r) for r in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["train"]]
    (kaggle,) = [r for r in train if r.name == "kaggle"]
    assert kaggle.specifier.contains(".".join(map(str, MIN_KAGGLE))) and not kaggle.specifier.contains("2.2.4")
    assert not kaggle.specifier.contains("1.7.4.5")
    # kaggle 2.x needs Python 3.11: on 3.10 pip would pick 1.7.4.5 (kaggle-cli #886), so it is not asked for there
    assert kaggle.marker.evaluate({"python_version": "3.11"}) and not kaggle.marker.evaluate({"python_version": "3.10"})


@pytest.mark.process
def test_wheels_dataset_is_uploaded_with_the_fintts_wheel_and_the_configs(kaggle_env, tmp_path):
    kaggle, env, _ = kaggle_env
    built_before = {*ROOT.glob("*.egg-info"), *ROOT.glob("build")}
    result = run("-m", "fintts", "kaggle", "wheels", env=env, cwd=tmp_path, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    seeded, version = kaggle.datasets["alice/fintts-wheels"]  # the fixture's, then this upload's
    wheel = next(name for name in version if name.startswith("fintts-") and name.endswith(".whl"))
    assert {"mms-fin.yaml", "demo.yaml"} <= set(version)
    (tmp_path / wheel).write_bytes(version[wheel])
    with zipfile.ZipFile(tmp_path / wheel) as archive:
        assert "fintts/train/session/launcher.py" in archive.namelist()
    again = run("-m", "fintts", "kaggle", "wheels", env=env, cwd=tmp_path, timeout=240)
    assert again.returncode == 0 and len(kaggle.datasets["alice/fintts-wheels"]) == 3  # a new version, same dataset
    assert {*ROOT.glob("*.egg-info"), *ROOT.glob("build")} == built_before  # the checkout was not built in


def kaggle_run(env, cwd, *extra: str) -> subprocess.CompletedProcess:
    return run("-m", "fintts", "kaggle", "run", "--config", "demo.yaml", "--hub-repo", REPO, "--poll", "0.1", *extra,
               env=env, cwd=cwd)


@pytest.mark.process
def test_run_takes_over_the_lease_of_a_session_that_kaggle_reports_ended(kaggle_env, tmp_path):
    # the first session dies holding the run's lease (15 minutes' time-out); the next ones take the lease as `fintts train` does
    kaggle, env, sessions = kaggle_env
    sessions.leases, sessions.crashes = True, {1}
    crash = "RuntimeError: CUDA error: an illegal memory access was encountered"
    sessions.script += [(None, False, f"Traceback (most recent call last):\n{crash}\n"), (status("paused", 100, 1), True, "paused\n"),
                        (status("finished", 300, 2, reason="max_steps"), True, "finished\n")]
    result = kaggle_run(env, tmp_path)
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert "session 1 failed: the notebook ended error" in out
    assert ("session 1: the kernel ended (error) and left the lease of session kernel-v1 on hf://alice/my-voice-run: Kaggle says "
            "it is gone, so the lease is released and the next session takes the run over") in out
    assert "is being trained by session" not in out and len(kaggle.pushes) == 3
    assert "the run is finished" in out


@pytest.mark.process
def test_run_releases_the_dead_kernels_lease_though_kaggles_clock_is_half_an_hour_behind(kaggle_env, tmp_path):
    # the lease is judged by what it says (not the one on the Hub before the push), not by this machine's clock against Kaggle's
    kaggle, env, sessions = kaggle_env
    sessions.leases, sessions.crashes, sessions.kaggle_clock = True, {1}, -1800.0
    sessions.script += [(None, False, "RuntimeError: CUDA error\n"), (status("finished", 300, 1, reason="max_steps"), True, "finished\n")]
    result = kaggle_run(env, tmp_path)
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert "session 1: the kernel ended (error) and left the lease of session kernel-v1" in out, out
    assert "is being trained by session" not in out and len(kaggle.pushes) == 2 and "the run is finished" in out


@pytest.mark.process
def test_run_leaves_a_lease_that_was_on_the_hub_before_its_push_though_kaggles_clock_is_ahead(kaggle_env, hub_env, tmp_path):
    # another session holds the run (its clock half an hour ahead of this machine's): it is not the ended kernel's to release
    kaggle, env, sessions = kaggle_env
    sessions.leases = True
    hub = HfApi(endpoint=hub_env.endpoint, token=TOKEN)
    hub.create_repo(REPO, private=True, exist_ok=True)
    ahead = time.time() + 1800
    theirs = Lease("kernel-theirs", "kaggle", 7, iso(ahead), ahead, 900.0).to_bytes()
    hub.upload_file(path_or_fileobj=theirs, path_in_repo=LEASE, repo_id=REPO)
    sessions.script += [(None, False, "")] * 2
    out = kaggle_run(env, tmp_path).stdout
    assert "is being trained by session kernel-theirs" in out and "left the lease" not in out, out
    assert Path(hub.hf_hub_download(REPO, LEASE, cache_dir=tmp_path / "cache")).read_bytes() == theirs


@pytest.mark.process
def test_run_is_not_finished_while_the_hub_lacks_the_checkpoint_its_status_names(kaggle_env, tmp_path):
    kaggle, env, sessions = kaggle_env
    sessions.refused = {2}  # the last session's final push is refused; its release still pushes status.json
    sessions.script += [(status("paused", 200, 1), True, "paused\n"), (status("finished", 300, 2, reason="max_steps"), True, "finished\n")]
    result = kaggle_run(env, tmp_path)
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    assert ("session 2 failed: status.json says finished, but the Hub's latest is step-00000200 while status.json names "
            "step-00000300 (the final push did not land); checkpoints/step-00000300/ (the newest checkpoint) is not on the Hub") in out
    assert "the run is finished" not in out and len(kaggle.pushes) == 2
    again = kaggle_run(env, tmp_path)  # a later `fintts kaggle run` says the same instead of "already finished"
    assert again.returncode == 1 and "says finished, but the Hub's latest is step-00000200" in again.stdout
    assert len(kaggle.pushes) == 2


@pytest.mark.slow  # the backoff's real waits: about 30 s
def test_run_rides_out_transient_kaggle_and_hub_errors(kaggle_env, hub_env, tmp_path):
    kaggle, env, sessions = kaggle_env
    sessions.script += [(status("paused", 100, 1), True, "paused\n"), (status("finished", 300, 2, reason="max_steps"), True, "")]
    hub_env.fail(502, path=r"/revision/main", method="GET", times=2)  # the laptop's first look at the run
    kaggle.fail(429, method="SaveKernel", retry_after=1)  # too many requests: not acted on, sent again
    kaggle.fail(503, method="GetKernelSessionStatus", times=2)
    kaggle.drop(method="GetKernelSessionStatus")  # a connection lost without an answer
    kaggle.stall(30, method="GetKernelSessionStatus")  # an answer that does not come in time
    result = kaggle_run(env, tmp_path, "--request-timeout", "3")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "the run is finished" in result.stdout
    assert len(kaggle.pushes) == 2 and kaggle.calls["SaveKernel"] == 3


@pytest.mark.process
def test_run_prints_only_its_own_lines_and_log_tails_without_terminal_codes(kaggle_env, tmp_path):
    kaggle, env, sessions = kaggle_env
    red = "\x1b[0;31mValueError\x1b[0m: no clips in /kaggle/input/my-voice"
    log = f"\x1b]0;kernel\x07\x1b[1;32mloading\x1b[0m\n 10%\r 50%\r100%\nTraceback (most recent call last):\n{red}\n"
    sessions.script += [(status("failed", 0, 1, reason="ValueError: no clips in /kaggle/input/my-voice"), False, log)] * 2
    result = kaggle_run(env, tmp_path)
    assert result.returncode == 1
    everything = result.stdout + result.stderr
    assert "\x1b" not in everything and "HTTP Request" not in everything, everything
    assert result.stdout.rstrip().endswith("100%\nTraceback (most recent call last):\nValueError: no clips in /kaggle/input/my-voice")
    assert "loading" in result.stdout and "50%" not in result.stdout


@pytest.mark.process
def test_run_stops_when_a_sessions_final_push_did_not_land_and_says_how_to_push_it(kaggle_env, hub_env, tmp_path):
    # session 2's final upload is refused (413) while its release commit lands: the Hub says paused at step 200, latest step 100
    kaggle, env, sessions = kaggle_env
    sessions.stores, sessions.refused = True, {2}
    sessions.script += [(status("paused", 100, 1), True, "paused\n"), (status("paused", 200, 2), True, "paused\n"),
                        (status("paused", 300, 3), True, "paused\n"), (status("finished", 400, 4, reason="max_steps"), True, "")]
    result = kaggle_run(env, tmp_path)
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    folder = tmp_path / "session-2"
    assert (f"session 2 failed: its final push did not land: step-00000200 (step 200) is only on kaggle in {folder}; the Hub's "
            "latest is step-00000100") in out
    assert f"fintts push --store {folder} --hub-repo {REPO}" in out
    assert len(kaggle.pushes) == 2  # no session resumes from step 100 and loses step 200
    again = kaggle_run(env, tmp_path)  # a later chain refuses too, before pushing anything
    assert again.returncode == 1 and "step-00000200 (step 200) is only on kaggle" in again.stdout and len(kaggle.pushes) == 2
    # the printed command puts it on the Hub; the chain then goes on from step 200
    pushed = run("-m", "fintts", "push", "--store", str(folder), "--hub-repo", REPO, env=env, cwd=tmp_path)
    assert pushed.returncode == 0, pushed.stdout + pushed.stderr
    resumed = kaggle_run(env, tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "the run is finished" in resumed.stdout and len(kaggle.pushes) == 4


@pytest.mark.process
def test_run_stops_when_the_status_still_says_running_after_kaggle_ended_the_kernel(kaggle_env, tmp_path):
    # session 2 pushed a checkpoint mid-session (status running at step 150), then its final save never reached the Hub
    kaggle, env, sessions = kaggle_env
    sessions.script += [(status("paused", 100, 1), True, "paused\n"), (status("running", 150, 2), True, "the Hub was down\n"),
                        (status("finished", 300, 3, reason="max_steps"), True, "")]
    result = kaggle_run(env, tmp_path)
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    assert "session 2 failed: its end never reached the Hub: Kaggle ended the kernel (complete) while" in out
    assert f"kaggle kernels output {KERNEL}/2 -p OUT" in out and f"fintts push --store OUT/runs/my-voice-run --hub-repo {REPO}" in out
    assert len(kaggle.pushes) == 2  # no third session resumes from step 150 and loses what session 2 trained after it
    again = kaggle_run(env, tmp_path)  # a later chain says the same before pushing anything
    assert again.returncode == 1 and "its end never reached the Hub" in again.stdout and len(kaggle.pushes) == 2


@pytest.mark.process
def test_run_waits_for_a_dataset_kaggle_is_still_processing_and_pushes_nothing_without_one(kaggle_env, tmp_path):
    kaggle, env, sessions = kaggle_env
    sessions.script += [(status("finished", 300, 1, reason="max_steps"), True, "")]
    missing = kaggle_run(env, tmp_path, "--corpus", "alice/no-such-voice")
    assert missing.returncode == 4 and not kaggle.pushes, missing.stdout + missing.stderr
    assert "the dataset alice/no-such-voice does not exist" in missing.stderr and "fintts kaggle corpus" in missing.stderr
    kaggle.processing_reads = 3
    kaggle.add_dataset("alice/new-voice")
    kaggle._processing["alice/new-voice"] = 3  # just uploaded: still processing for three looks
    waited = kaggle_run(env, tmp_path, "--corpus", "alice/new-voice")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert "waiting for the dataset alice/new-voice to be ready" in waited.stdout and "the run is finished" in waited.stdout
    assert kaggle.pushes[-1]["datasetDataSources"] == ["alice/fintts-wheels", "alice/new-voice"]


@pytest.mark.process
@pytest.mark.parametrize("era", ["before", "2026"])
def test_revoked_credentials_and_a_session_in_the_editor_say_what_to_do(hub_env, tmp_path, era):
    for kaggle, env, _ in local_kaggle(hub_env, tmp_path, notebook_exists=True, era=era):
        kaggle.fail(409, method="SaveKernel")  # the editor's own session is running
        busy = kaggle_run(env, tmp_path)
        assert busy.returncode == 4 and "stop the notebook's session in the editor" in busy.stderr, busy.stdout + busy.stderr
        kaggle.revoke()  # the key expired on kaggle.com: reading it again does not help (test_kaggle_over_weeks.py: the others)
        expired = run("-m", "fintts", "kaggle", "status", "--hub-repo", REPO, env=env, cwd=tmp_path)
        assert expired.returncode == 4 and "401" in expired.stderr and "Authenticate again (kaggle auth login" in expired.stderr
        assert "Permission" not in expired.stderr.split(";")[-1]  # not taken for a kernel it may not see


@pytest.mark.process
def test_the_kaggle_commands_need_no_torch_on_the_laptop(kaggle_env, tmp_path):
    # the README says so: a laptop with fintts, kaggle and six (no torch, no transformers) drives the whole Kaggle path
    kaggle, env, sessions = kaggle_env
    blocked = tmp_path / "no-torch"
    for name in ("torch", "transformers"):
        (blocked / name).mkdir(parents=True)
        (blocked / name / "__init__.py").write_text(f"raise ImportError('{name} is not installed here')\n")
    env = env | {"PYTHONPATH": os.pathsep.join([str(blocked), env["PYTHONPATH"]])}
    sessions.script.append((status("paused", 100, 1), True, ""))
    corpus = tmp_path / "voice"
    (corpus / "wavs").mkdir(parents=True)
    speaker = ROOT / "fintts" / "tts" / "demo" / "corpus" / "espeak_f2"
    lines = (speaker / "metadata.csv").read_text(encoding="utf-8").splitlines()[:2]
    for line in lines:
        (corpus / "wavs" / f"{line.split('|')[0]}.flac").write_bytes((speaker / "wavs" / f"{line.split('|')[0]}.flac").read_bytes())
    (corpus / "metadata.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    own = tmp_path / "my-voice.yaml"  # a config of the person's own is checked on the laptop before it is pushed
    own.write_text("task: vits\ndata: /kaggle/input/my-voice\nmax_steps: 100\nphases:\n- {steps: 50}\n- {}\n", encoding="utf-8")
    for command in (("corpus", str(corpus), "--corpus", "alice/new-voice"),
                    ("run", "--config", "demo.yaml", "--hub-repo", REPO, "--max-sessions", "1", "--poll", "0.1"),
                    ("push", "--config", str(own), "--hub-repo", REPO),
                    ("status", "--hub-repo", REPO)):
        result = run("-m", "fintts", "kaggle", *command, env=env, cwd=tmp_path)
        assert result.returncode == 0, f"{command[0]}: {result.stdout}{result.stderr}"
    assert read_parameters(json.loads(kaggle.pushes[-1]["text"]))["CONFIG_YAML"] == own.read_text(encoding="utf-8")
    # and refused as it would be with torch: a typo, and an adapter phase that is not the run's last
    own.write_text("task: vits\nmax_stepz: 100\n", encoding="utf-8")
    typo = run("-m", "fintts", "kaggle", "push", "--config", str(own), "--hub-repo", REPO, env=env, cwd=tmp_path)
    assert typo.returncode == 2 and "unknown setting max_stepz" in typo.stderr, typo.stdout + typo.stderr
    own.write_text("task: vits\nphases:\n- {steps: 5, settings: {lora: {r: 4}}}\n- {}\n", encoding="utf-8")
    phases = run("-m", "fintts", "kaggle", "push", "--config", str(own), "--hub-repo", REPO, env=env, cwd=tmp_path)
    assert phases.returncode == 2 and "follows an adapter phase" in phases.stderr, phases.stdout + phases.stderr
    assert "is not installed here" not in typo.stderr + phases.stderr
