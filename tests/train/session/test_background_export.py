"""The slow part of an export (a voice's ONNX graphs) made in the background: training goes on meanwhile, ``model/``
never holds files derived from other weights than its own (here, on the Hub, after a kill), and the final voice
has them. The stand-in task's ``slow-export`` fault makes that part slow and records what it was made from."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import resource
import signal
import time
from pathlib import Path

import pytest

from fintts.train.run import checkpoint
from fintts.train.session.background_export import BackgroundExport
from fintts_stand_ins.faulty import _derive_observed, _derive_slowly
from hub_helpers import REPO
from trainer_helpers import FAULTY, ROOT, cli, export_processes, in_process, start_cli, stop, write_config

#: every test here starts a process (a fintts command, a server's session, espeak-ng or ffmpeg): not the unit tier
pytestmark = pytest.mark.process

SLOW = dict(task=FAULTY, adversarial=False, fault="slow-export", eval_every=4, checkpoint_every_steps=4, step_delay=0.02)


def consistent(files: dict[str, bytes]) -> bool:
    """Was ``derived.json`` made from the ``model.safetensors`` beside it? (``False`` when it is missing.)"""
    if "derived.json" not in files:
        return False
    return json.loads(files["derived.json"])["model.safetensors"] == hashlib.sha256(files["model.safetensors"]).hexdigest()


def local_model(store) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in (store / "model").iterdir()}


def session(store) -> dict:
    return json.loads((store / "status.json").read_text())["sessions"][-1]


def test_training_goes_on_while_the_export_is_made_and_the_final_voice_has_it(tmp_path):
    config = write_config(tmp_path, **SLOW, max_steps=32, fault_seconds=2.0)
    store = tmp_path / "store"
    result = in_process("train", str(config), "--store", str(store), "--no-progress", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    bests = [line for line in result.stdout.splitlines() if "(best" in line]
    assert len(bests) >= 4  # eight validations, each (at least at first) a new best whose export takes 2 s
    phases = session(store)["phases"]
    assert phases["validation"] < 2.0, phases  # no validation waited for an export
    assert consistent(local_model(store))  # the final voice's slow part, of its own weights
    assert not list(store.glob(".model-*")), list(store.glob(".model-*"))
    saved = json.loads((checkpoint.latest_complete(store, log=lambda _: None) / "state.json").read_text())
    assert saved["export_pending"] is False  # nothing left for the next session to make


@pytest.mark.slow
def test_every_model_folder_pushed_to_the_hub_is_of_one_export(tmp_path, hub_env):
    hub = hub_env
    config = write_config(tmp_path, **SLOW, max_steps=40, fault_seconds=0.6, checkpoint_every=0)
    result = cli("train", str(config), "--hub-repo", REPO, "--store", str(tmp_path / "store"), "--push-every", "0",
                 "--no-progress", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    with_model, complete = 0, 0
    # each commit as it landed: the store's storage tidy-up frees replaced weights, which rewrites history (old commits
    # then lack model.safetensors, as on the Hub), so a commit is judged by the sha256 it carried, not by today's files
    for commit in hub.landed(REPO):
        model = {path.removeprefix("model/"): sha for path, sha in commit["tree"].items() if path.startswith("model/")}
        if not model:
            continue
        with_model += 1
        assert "model.safetensors" in model, commit["summary"]  # never a voice without its weights
        if "derived.json" in model:
            complete += 1
            made_from = json.loads(hub.blob(REPO, model["derived.json"]))["model.safetensors"]
            assert made_from == model["model.safetensors"], commit["summary"]  # never the slow part of other weights
    assert with_model >= 2 and complete >= 1
    final = {path.removeprefix("model/"): data for path, data in hub.files(REPO).items() if path.startswith("model/")}
    assert consistent(final)  # the final voice on the Hub has its slow part


@pytest.mark.slow
def test_a_session_killed_mid_export_leaves_a_consistent_model_and_the_next_one_completes_it(tmp_path):
    config = write_config(tmp_path, **SLOW, max_steps=100_000, fault_seconds=120.0)
    store = tmp_path / "store"
    process = start_cli("train", str(config), "--store", str(store), "--no-progress", cwd=tmp_path)
    deadline = time.time() + 120
    # an export under way and a checkpoint to resume from (the first best is exported before that step's save ends)
    while not (list(store.glob(".model-later-*/")) and checkpoint.read_latest(store)) and time.time() < deadline:
        assert process.poll() is None, process.stdout.read()
        time.sleep(0.05)
    time.sleep(0.5)  # training goes on, the export does not end
    stop(process, signal.SIGKILL)
    assert export_processes(store, wait=5.0) == []  # the export's own process died with its session
    model = local_model(store)
    assert "model.safetensors" in model and "derived.json" not in model  # the quick part, nothing half-made

    killed_at = checkpoint.step_of(checkpoint.read_latest(store))
    config = write_config(tmp_path, **{**SLOW, "eval_every": 0}, max_steps=killed_at + 8, fault_seconds=0.5)  # no new best
    resumed = in_process("train", str(config), "--store", str(store), "--no-progress", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert not list(store.glob(".model-*")), list(store.glob(".model-*"))  # the killed session's copy is gone
    assert consistent(local_model(store))


@pytest.mark.slow
def test_two_processes_agree_while_the_main_one_finishes_the_export_before_its_final_save(tmp_path):
    config = write_config(tmp_path, **SLOW, max_steps=16, fault_seconds=3.0, fault_rank=0)
    store = tmp_path / "store"
    result = in_process("train", str(config), "--store", str(store), "--num-processes", "2", "--no-progress", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads((store / "status.json").read_text())["state"] == "finished"
    assert consistent(local_model(store))
    assert len(json.loads((checkpoint.latest_complete(store, log=lambda _: None) / "state.json").read_text())["rng"]) == 2


@pytest.mark.slow
def test_an_export_too_slow_for_the_budget_is_left_for_the_next_session_and_the_session_ends_in_time(tmp_path):
    config = write_config(tmp_path, **SLOW, max_steps=100_000, fault_seconds=600.0)
    store = tmp_path / "store"
    started = time.time()
    result = cli("train", str(config), "--store", str(store), "--budget", "20s", "--no-progress", cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert time.time() - started < 30
    assert export_processes(store, wait=0) == []  # ended by the session, not left to finish or to be killed at exit
    status = json.loads((store / "status.json").read_text())
    assert status["state"] in ("paused", "finished") and "was not finished in this session" in result.stdout + result.stderr
    model = local_model(store)
    assert "model.safetensors" in model and "derived.json" not in model

    config = write_config(tmp_path, **{**SLOW, "eval_every": 0}, max_steps=status["step"] + 4, fault_seconds=0.2)
    resumed = in_process("train", str(config), "--store", str(store), "--no-progress", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert consistent(local_model(store))


@pytest.mark.slow
def test_a_signal_ends_the_session_without_waiting_for_the_export(tmp_path):
    config = write_config(tmp_path, **SLOW, max_steps=100_000, fault_seconds=120.0)
    store = tmp_path / "store"
    process = start_cli("train", str(config), "--store", str(store), "--no-progress", cwd=tmp_path)
    deadline = time.time() + 120
    while not list(store.glob(".model-later-*")) and time.time() < deadline:
        assert process.poll() is None, process.stdout.read()
        time.sleep(0.05)
    started = time.time()
    out = stop(process, signal.SIGTERM)
    assert process.returncode == 0, out
    assert export_processes(store, wait=0) == []
    assert time.time() - started < 20, out  # not the export's 120 s
    assert "was not finished in this session" in out
    model = local_model(store)
    assert "model.safetensors" in model and "derived.json" not in model
    saved = json.loads((checkpoint.latest_complete(store, log=lambda _: None) / "state.json").read_text())
    assert saved["export_pending"] is True and saved["step"] == json.loads((store / "status.json").read_text())["step"]


def test_a_newer_best_ends_the_export_of_the_older_one_at_once_and_its_own_is_kept(tmp_path):
    final = tmp_path / "model"
    final.mkdir()
    (final / "model.safetensors").write_bytes(b"weights of step 4")
    warnings: list[str] = []
    exports = BackgroundExport(final, warnings.append)
    try:
        exports.exported(functools.partial(_derive_slowly, 60.0), step=4)
        older = str(tmp_path / ".model-later-1")
        started = time.time() + 10  # a process just started may not show its command line yet (it is mid-exec)
        while not export_processes(older) and time.time() < started:
            time.sleep(0.05)
        assert export_processes(older), "the export of step 4 should be running"
        # a newer best: its quick part replaces the weights (as a new file: the running copy holds hard links), then
        # its slow part is handed over
        fresh = final / ".new"
        fresh.write_bytes(b"weights of step 8")
        os.replace(fresh, final / "model.safetensors")
        exports.exported(functools.partial(_derive_slowly, 0.2), step=8)
        assert export_processes(older, wait=3.0) == []  # not left to finish a stale export
        assert exports.settle(deadline=time.time() + 60) is not None
    finally:
        exports.close()
    assert consistent(local_model(tmp_path)) and warnings == []
    assert json.loads((final / "derived.json").read_text())["model.safetensors"] == hashlib.sha256(b"weights of step 8").hexdigest()


def hub_model(hub) -> dict[str, bytes]:
    return {path.removeprefix("model/"): data for path, data in hub.files(REPO).items() if path.startswith("model/")}


def hub_state(hub) -> dict:
    files = hub.files(REPO)
    latest = files["latest"].decode().strip()
    return json.loads(files[f"checkpoints/{latest}/state.json"])


@pytest.mark.slow
@pytest.mark.parametrize("processes", [1, 2])
def test_a_pending_export_is_made_on_a_fresh_disk_after_a_hub_resume(tmp_path, hub_env, processes):
    """A Kaggle session always starts on an empty disk: the Hub's model/ (a validated best's export) is fetched and its
    slow part made (with two processes, the other waits off the device meanwhile); the flag is cleared only once the
    Hub's model/ has it."""
    hub = hub_env
    config = write_config(tmp_path, **SLOW, max_steps=100_000, fault_seconds=120.0)
    first = tmp_path / "first"
    hub_args = ("--hub-repo", REPO, "--push-every", "0", "--no-progress")
    process = start_cli("train", str(config), "--store", str(first), *hub_args, cwd=tmp_path)
    deadline = time.time() + 120
    while not (list(first.glob(".model-later-*/")) and checkpoint.read_latest(first)) and time.time() < deadline:
        assert process.poll() is None, process.stdout.read()
        time.sleep(0.05)
    out = stop(process, signal.SIGTERM)
    assert process.returncode == 0, out
    left = hub_state(hub)
    assert left["export_pending"] is True and left["best_step"] is not None, left
    assert "model.safetensors" in hub_model(hub) and "derived.json" not in hub_model(hub)

    # the next session: another disk, no new best (eval_every 0), a quick slow part
    config = write_config(tmp_path, **{**SLOW, "eval_every": 0}, max_steps=left["step"] + 8, fault_seconds=0.5)
    second = tmp_path / "second"
    result = cli("train", str(config), "--store", str(second), "--num-processes", str(processes), *hub_args, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(hub.files(REPO)["status.json"])["state"] == "finished"
    assert consistent(hub_model(hub)), sorted(hub_model(hub))  # the slow part of the best's own weights, on the Hub
    assert hub_model(hub)["model.safetensors"] == left_weights(hub, left)
    assert hub_state(hub)["export_pending"] is False
    assert not list(second.glob(".model-*")), list(second.glob(".model-*"))


def left_weights(hub, state: dict) -> bytes:
    """The best's weights as the first session's last push left them on the Hub (model/ only moves forward)."""
    for commit in reversed(hub.landed(REPO)):
        sha = commit["tree"].get("model/model.safetensors")
        if sha and f"checkpoints/{checkpoint.name_for_step(state['step'])}/state.json" in commit["tree"]:
            return hub.blob(REPO, sha)
    raise AssertionError("no push of the first session's last checkpoint carried model/")


def start_export(tmp_path, seconds: float, warnings: list[str], monkeypatch):
    """model/ with its quick part, and the slow part handed over (:func:`_derive_observed`, which says what it holds)."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(str(ROOT / path) for path in ("", "tests/stand_ins")))  # this checkout's
    final = tmp_path / "model"
    final.mkdir()
    (final / "model.safetensors").write_bytes(b"weights of step 4")
    exports = BackgroundExport(final, warnings.append)
    record = tmp_path / "observed.json"
    exports.exported(functools.partial(_derive_observed, str(record), seconds), step=4)
    return exports, record


def observed(record, timeout: float = 60.0, hurry=lambda: None) -> dict:
    """What the export's process said it holds; ``hurry`` is called while waiting (a test whose subject is not the
    export's priority gives it the session's, as the final save does, or a busy machine starves it at nice 19)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            return json.loads(record.read_text())
        except (OSError, ValueError):
            hurry()
            time.sleep(0.05)
    logs = {log.name: log.read_text(errors="replace") for log in record.parent.glob(".model-later-*.log")}
    raise AssertionError(f"the export's process never said what it holds: {logs}")


def test_the_export_process_holds_no_credential_and_is_the_first_to_go(tmp_path, monkeypatch):
    login = tmp_path / "hf-home"
    login.mkdir()
    (login / "token").write_text("hf_cachedLoginOfThePerson")  # `hf auth login`'s file
    secrets = {"HF_TOKEN": "hf_fromTheEnvironment", "KAGGLE_API_TOKEN": "KGAT_x", "KAGGLE_USER_SECRETS_TOKEN": "secrets",
               "KAGGLE_KEY": "k", "KAGGLE_USERNAME": "me", "HUGGING_FACE_HUB_TOKEN": "hf_old", "AWS_SECRET_ACCESS_KEY": "a"}
    launch = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    for name, value in {**secrets, **launch, "HF_HOME": str(login), "TOKENIZERS_PARALLELISM": "false"}.items():
        monkeypatch.setenv(name, value)
    warnings: list[str] = []
    exports, record = start_export(tmp_path, 0.2, warnings, monkeypatch)
    try:
        assert exports.settle(deadline=time.time() + 120) is not None  # the final save's wait: it hurries the child
        facts = observed(record)
    finally:
        exports.close()
    env = facts["env"]
    assert not set(secrets) & set(env) and not set(launch) & set(env), sorted(env)
    assert env["TOKENIZERS_PARALLELISM"] == "false"  # a setting, not a credential: kept
    assert facts["token"] is None  # neither the variable nor the cached login is within its reach
    assert facts["oom_score_adj"] == "1000"  # the OOM killer takes it before any training process
    assert facts["threads"] == facts["interop_threads"] == max(1, len(os.sched_getaffinity(0)) // 4)
    temp = facts["temp_file"]
    assert temp.startswith(str(tmp_path)) and not os.path.exists(temp)  # its own temporary folder, removed with it
    assert consistent(local_model(tmp_path)) and warnings == []
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".model")]


def niceness(pid: int) -> set[int]:
    """The niceness of each of ``pid``'s threads (Linux keeps one per thread: field 19 of its stat)."""
    nice = set()
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            nice.add(int(Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()[16]))
    return nice


@pytest.mark.skipif(os.geteuid() != 0 and resource.getrlimit(resource.RLIMIT_NICE)[0] < 20,
                    reason="this user may not lower a niceness: the wait says so instead")
def test_the_final_save_waits_for_the_export_at_the_sessions_own_priority(tmp_path, monkeypatch):
    """While training goes on the export gives way (nice 19); once the session only waits for it, it runs at the
    session's own niceness, so other work on the machine (a laptop in use, a busy machine) does not starve the final
    save: at 19 beside four CPU-bound processes at 0 it got ~0.4 % of this 2-core machine and the session waited on."""
    warnings: list[str] = []
    exports, _ = start_export(tmp_path, 3.0, warnings, monkeypatch)
    try:
        (pid,) = [int(line.split()[0]) for line in _export_pids(tmp_path)]
        deadline = time.time() + 120
        while niceness(pid) != {19} and time.time() < deadline:  # it lowers its own first thing, once it has started
            time.sleep(0.05)
        assert niceness(pid) == {19}
        waiting: list[set[int]] = []
        assert exports.settle(deadline=time.time() + 60, say=lambda line: waiting.append(niceness(pid))) is not None
    finally:
        exports.close()
    assert waiting and waiting[0] == {os.getpriority(os.PRIO_PROCESS, 0)}, waiting
    assert consistent(local_model(tmp_path)) and warnings == []


def test_an_export_killed_by_the_kernel_is_made_again_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    warnings: list[str] = []
    exports, record = start_export(tmp_path, 60.0, warnings, monkeypatch)
    try:
        facts = observed(record, hurry=exports.hurry)
        record.unlink()
        (pid,) = [int(line.split()[0]) for line in _export_pids(tmp_path)]
        os.kill(pid, signal.SIGKILL)  # as the OOM killer ends it
        deadline = time.time() + 60
        while not record.exists() and time.time() < deadline:
            exports.poll()  # as training does at each step: the kill is seen, the export started again
            exports.hurry()
            time.sleep(0.05)
        again = observed(record, hurry=exports.hurry)
        assert not os.path.exists(facts["temp_file"])  # the killed one's ~150 MB of onnxruntime scratch are gone
        assert exports.pending()
    finally:
        exports.close()  # the session's end before it finished: ended, and left to the next session
    assert not os.path.exists(again["temp_file"])
    assert any("was killed" in warning and "starting it again" in warning for warning in warnings), warnings
    assert exports.pending()  # never cleared while its files do not exist
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".model")]


def _export_pids(folder) -> list[str]:
    deadline = time.time() + 10
    while time.time() < deadline:
        found = []
        for proc in os.listdir("/proc"):
            if proc.isdigit():
                try:
                    line = open(f"/proc/{proc}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
                except OSError:
                    continue
                if "background_export" in line and str(folder) in line:
                    found.append(f"{proc} {line}")
        if found:
            return found
        time.sleep(0.05)
    return []


def test_without_a_session_limit_the_final_save_waits_for_a_hung_export_a_bounded_time_and_says_so(tmp_path):
    config = write_config(tmp_path, **SLOW, max_steps=8, fault_seconds=600.0, export_wait="3s")
    store = tmp_path / "store"
    started = time.time()
    result = cli("train", str(config), "--store", str(store), "--no-progress", cwd=tmp_path, timeout=120)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert time.time() - started < 60, out  # not the export's 600 s
    assert "waiting for the slow part of the export of" in out and "at most 3 s more" in out, out
    assert "was not finished in this session" in out
    assert export_processes(store, wait=0) == []
    saved = json.loads((checkpoint.latest_complete(store, log=lambda _: None) / "state.json").read_text())
    assert saved["export_pending"] is True
