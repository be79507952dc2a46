"""A Hub that stalls, refuses, is edited by hand or shared, and signals at a session's edges, against the
local Hub stand-in with its fault switches and real ``fintts train`` processes."""

from __future__ import annotations

import json
import logging
import queue
import signal
import subprocess
import threading
import time

import pytest
from huggingface_hub import HfApi

from fintts.train import Trainer
from fintts.train.config import load_config
from fintts.train.run import checkpoint
from fintts.train.stores import LeaseConflict, StoreError
from fintts.train.stores.hub import pull, push
from hub_helpers import REPO, TOKEN, export_model, latest_on_hub, make_store, save
from trainer_helpers import cli, start_cli, stop, wait_for_step, write_config

#: A checkpoint push's commit is larger than this; the lease's and the heartbeats' are smaller.
BIG_COMMIT = 30_000
#: Seconds an interpreter may take to tear down after its last Python line (torch's finalisers, a loaded machine).
TEARDOWN = 8


class Lines:
    """A process's output, read on a thread: what was said, and when."""

    def __init__(self, process: subprocess.Popen):
        self.process, self.lines = process, queue.Queue()
        self.text: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.put((time.monotonic(), line))
        self.lines.put((time.monotonic(), None))

    def wait_for(self, text: str, timeout: float) -> float:
        """When the first line containing ``text`` arrived."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                at, line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            self.text.append(line)
            if text in line:
                return at
        raise AssertionError(f"{text!r} not said within {timeout}s:\n{''.join(self.text)[-3000:]}")

    def rest(self, timeout: float) -> str:
        self.process.wait(timeout=timeout)
        while True:
            at, line = self.lines.get(timeout=10)
            if line is None:
                return "".join(self.text)
            self.text.append(line)


# ---------------------------------------------------------------- a stalled Hub and the session's limit


@pytest.mark.slow
def test_a_stalled_hub_never_holds_a_session_past_its_limit(hub_env, tmp_path):
    hub = hub_env
    hub.stall(None, path="/commit/", after_bytes=BIG_COMMIT, times=100_000)  # every checkpoint push hangs for ever
    config = write_config(tmp_path, max_steps=1_000_000, step_delay=0.02, eval_every=0, checkpoint_every_steps=20)
    store = tmp_path / "kaggle"
    budget = 40
    started = time.monotonic()
    process = start_cli(
        "train", str(config), "--hub-repo", REPO, "--store", str(store), "--push-every", "0", "--budget", f"{budget}s",
        "--no-progress", cwd=tmp_path,
    )
    said = Lines(process)
    try:
        warned = said.wait_for("NOT on the Hub", timeout=budget + 60) - started
        out = said.rest(timeout=60)
    finally:
        process.kill()
    ended = time.monotonic() - started
    # What must happen before the limit (Kaggle kills the container there) is the session's own work: the
    # summary saying where the checkpoint is, then the lease's release. The interpreter's teardown after it
    # (no Python left to run: ~2-3 s on a loaded 2-core machine) loses nothing if it is cut.
    assert warned < budget, f"the summary came at {warned:.1f}s of a {budget}s session"
    assert ended < budget + TEARDOWN, f"the process ended at {ended:.1f}s"
    assert process.returncode == 1, out
    assert f"fintts push --store {store} --hub-repo {REPO}" in out
    latest = checkpoint.read_latest(store)
    checkpoint.verify(store / "checkpoints" / latest)  # resumable from this disk
    assert "latest" not in hub.files(REPO)


@pytest.mark.slow
def test_a_hub_stalled_at_the_start_fails_the_session_within_its_limit(hub_env, tmp_path):
    hub_env.stall(None, path="/api/repos/create", times=1000)
    config = write_config(tmp_path, max_steps=10)
    started = time.monotonic()
    result = cli(
        "train", str(config), "--hub-repo", REPO, "--store", str(tmp_path / "kaggle"), "--budget", "20s",
        "--no-progress", cwd=tmp_path, timeout=120,
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 4, result.stderr
    assert "could not create the Hub repo" in result.stderr and "did not answer in time" in result.stderr
    assert elapsed < 20 + TEARDOWN, f"gave up after {elapsed:.1f}s of 20s"  # (TEARDOWN: see the test above)


# ---------------------------------------------------------------- pushes the Hub refuses


def test_a_refused_push_is_retried_with_the_next_checkpoint_and_warned_each_time(hub, tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    store = make_store(hub, tmp_path / "run")
    hub.fail(422, times=2, path="/commit/")
    store.publish(save(store.root, 1), final=True)
    assert not store.wait(timeout=30)  # the checkpoint waited for was refused: no point waiting on
    assert "422" in store.pending() and "fintts push" in store.pending()
    store.publish(save(store.root, 2), final=True)  # the next checkpoint: refused once more, then taken
    deadline = time.monotonic() + 30
    while not store.wait(timeout=1) and time.monotonic() < deadline:
        time.sleep(0.1)  # a wait returns at each refusal; the worker keeps trying
    assert latest_on_hub(hub) == "step-00000002"
    refusals = [r for r in caplog.records if r.levelno == logging.WARNING and "refused" in r.getMessage()]
    assert len(refusals) == 2, [r.getMessage() for r in caplog.records]
    store.close()


# ---------------------------------------------------------------- the best checkpoint on a fresh disk


@pytest.mark.slow
def test_a_session_on_a_fresh_disk_keeps_the_best_checkpoint_on_the_hub(hub, tmp_path):
    # The loss falls, and the monitor asks for the highest: the first validation (step 4) stays the best.
    config = write_config(tmp_path, max_steps=8, eval_every=4, checkpoint_every_steps=4, keep_last=1, monitor="max:val/loss")

    def session(disk: str, **settings):
        trainer = Trainer(load_config(config, settings), store=make_store(hub, tmp_path / disk), progress=False, log=lambda m: None)
        return trainer.run()

    session("kaggle-1")
    assert {"checkpoints/step-00000004/MANIFEST.json", "checkpoints/step-00000008/MANIFEST.json"} <= set(hub.files(REPO))
    summary = session("kaggle-2", max_steps=16)  # a fresh disk: only step-00000008 comes down
    assert summary.best["step"] == 4
    files = hub.files(REPO)
    assert "checkpoints/step-00000004/MANIFEST.json" in files and latest_on_hub(hub) == "step-00000016"
    assert json.loads(files["status.json"])["best"]["checkpoint"] == "step-00000004"
    best = pull(REPO, tmp_path / "laptop", checkpoint="best", endpoint=hub.endpoint, token=TOKEN)
    assert best.name == "step-00000004"


# ---------------------------------------------------------------- names and links from outside


def test_a_symbolic_link_never_carries_a_file_to_the_hub(hub, tmp_path):
    secret = tmp_path / "token.txt"
    secret.write_bytes(b"hf_secret_that_must_stay_here")
    store = make_store(hub, tmp_path / "run")
    name = save(store.root, 1)
    (store.root / "checkpoints" / name / "notes.txt").symlink_to(secret)  # added after the manifest
    export_model(store.root, 1)
    (store.root / "model" / "tokenizer.json").symlink_to(secret)
    store.publish(name, final=True)
    assert store.wait(timeout=30)
    store.close()
    files = hub.files(REPO)
    assert f"checkpoints/{name}/generator.safetensors" in files
    assert not any(secret.read_bytes() in data for data in files.values())


def test_pull_refuses_a_latest_or_best_that_is_not_a_checkpoint_name(hub, tmp_path):
    source = tmp_path / "run"
    save(source, 1)
    push(source, REPO, endpoint=hub.endpoint, token=TOKEN)
    api = HfApi(endpoint=hub.endpoint, token=TOKEN)
    planted = tmp_path / "planted"
    checkpoint.save(planted, "step-00000009", lambda folder: (folder / "state.json").write_text("{}"))
    api.upload_folder(folder_path=planted / "checkpoints" / "step-00000009", path_in_repo="checkpoints/mine", repo_id=REPO)
    api.upload_file(path_or_fileobj=b"mine\n", path_in_repo="latest", repo_id=REPO)  # edited by hand
    with pytest.raises(StoreError, match="names 'mine', which is not a checkpoint name"):
        pull(REPO, tmp_path / "out", checkpoint="latest", endpoint=hub.endpoint, token=TOKEN)
    status = {"state": "paused", "best": {"value": 1.0, "step": 1, "checkpoint": "../../../elsewhere"}}
    api.upload_file(path_or_fileobj=json.dumps(status).encode(), path_in_repo="status.json", repo_id=REPO)
    with pytest.raises(StoreError, match="not a checkpoint name"):
        pull(REPO, tmp_path / "out", checkpoint="best", endpoint=hub.endpoint, token=TOKEN)
    assert not (tmp_path / "out" / "latest").exists()


# ---------------------------------------------------------------- the lease


def write_lease(api: HfApi, *, heartbeat_unix: float, timeout: float) -> None:
    """A lease as another machine commits it, its heartbeat read from that machine's clock."""
    lease = {"session": "session-elsewhere", "host": "kaggle", "pid": 1, "acquired": "2030-01-01T00:00:00Z",
             "heartbeat_unix": heartbeat_unix, "timeout": timeout}
    api.upload_file(path_or_fileobj=json.dumps(lease).encode(), path_in_repo="lease.json", repo_id=REPO)


def test_a_lease_is_judged_by_the_hubs_clock_not_by_the_writers(hub, tmp_path):
    api = HfApi(endpoint=hub.endpoint, token=TOKEN)
    api.create_repo(REPO, private=True)
    write_lease(api, heartbeat_unix=time.time() - 7200, timeout=60)  # alive, on a machine whose clock is 2 h behind
    with pytest.raises(LeaseConflict, match="session-elsewhere"):
        make_store(hub, tmp_path / "a").acquire("session-mine")
    write_lease(api, heartbeat_unix=time.time() + 7200, timeout=2)  # dead, on a machine whose clock was 2 h ahead
    time.sleep(3.2)
    store = make_store(hub, tmp_path / "b")
    store.acquire("session-mine")
    assert json.loads(hub.files(REPO)["lease.json"])["session"] == "session-mine"
    store.close()


def test_a_push_slower_than_the_lease_does_not_let_another_session_take_it(hub, tmp_path):
    writer = make_store(hub, tmp_path / "writer", lease_timeout=2)
    writer.acquire("session-writer")
    hub.stall(2.5, path="/commit/", after_bytes=BIG_COMMIT, times=1000)
    writer.publish(save(writer.root, 1, size=64_000))  # this run's pushes take 2.5 s...
    assert writer.wait(timeout=30)
    hub.clear_faults()
    time.sleep(1.0)  # ...which the next heartbeats' lease says: timeout >= 3 x 2.5 s
    hub.stall(None, path="/commit/", after_bytes=BIG_COMMIT, times=1000)
    writer.publish(save(writer.root, 2, size=64_000))
    assert hub.wait_stalled(timeout=30)
    time.sleep(3.5)  # no commit for longer than lease_timeout=2: the push is still going
    with pytest.raises(LeaseConflict, match="session-writer"):
        make_store(hub, tmp_path / "other").acquire("session-other")
    hub.clear_faults()
    hub.release()
    writer.close(timeout=1)


# ---------------------------------------------------------------- signals


@pytest.mark.slow
def test_sigterm_while_a_session_downloads_its_checkpoint_gives_the_lease_back(hub_env, tmp_path):
    hub = hub_env
    config = write_config(tmp_path, max_steps=8, eval_every=0, checkpoint_every_steps=4)
    args = ("train", str(config), "--hub-repo", REPO, "--push-every", "0", "--no-progress")
    first = cli(*args, "--store", str(tmp_path / "kaggle-1"), cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    hub.stall(None, path=r"/resolve/[^/]+/checkpoints/", method="GET", times=1000)
    second = start_cli(*args, "--store", str(tmp_path / "kaggle-2"), "--max-steps", "16", cwd=tmp_path)
    assert hub.wait_stalled(timeout=120)
    signalled = time.monotonic()
    out = stop(second, signal.SIGTERM)
    assert time.monotonic() - signalled < 15
    assert second.returncode == 130 and "stopped by SIGTERM before training began" in out, out
    assert "lease.json" not in hub.files(REPO)
    hub.clear_faults()
    hub.release()
    third = cli(*args, "--store", str(tmp_path / "kaggle-3"), "--max-steps", "12", cwd=tmp_path)
    assert third.returncode == 0, third.stderr  # nothing left behind: no --force, no waiting for a lease to expire


@pytest.mark.process
def test_ctrl_c_during_the_final_wait_keeps_the_session_and_says_how_to_push(hub_env, tmp_path):
    hub = hub_env
    hub.stall(None, path="/commit/", after_bytes=BIG_COMMIT, times=100_000)
    config = write_config(tmp_path, max_steps=12, eval_every=0, checkpoint_every_steps=4)
    store = tmp_path / "kaggle"
    process = start_cli(
        "train", str(config), "--hub-repo", REPO, "--store", str(store), "--push-every", "0", "--no-progress", cwd=tmp_path,
    )
    said = Lines(process)
    try:
        wait_for_step(store, 12, process)  # the final checkpoint is saved: its push hangs, the session waits for it
        time.sleep(1.0)
        interrupted = time.monotonic()
        process.send_signal(signal.SIGINT)
        out = said.rest(timeout=60)
    finally:
        process.kill()
    assert time.monotonic() - interrupted < 15
    assert process.returncode == 1, out  # not failed, but not safe on the Hub either
    assert f"fintts push --store {store} --hub-repo {REPO}" in out and "Ctrl-C stops waiting" in out
    status = json.loads((store / "status.json").read_text())
    assert status["state"] == "finished" and status["step"] == 12
    checkpoint.verify(store / "checkpoints" / "step-00000012")
