"""The Hub store against a real HTTP server on 127.0.0.1, through the real ``HfApi``.

Only the Hub is a stand-in (:class:`fintts_stand_ins.HubServer`); the store, the
``huggingface_hub`` client, the network stack and the checkpoint format are the real ones.
Faults (outage, 5xx, 429, stalls, a killed process) are injected at the server.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from huggingface_hub import HfApi, constants

from fintts.train.run import checkpoint
from fintts.train.session.store_choice import open_store
from fintts.train.stores import LeaseConflict, StoreError
from fintts.train.stores.hub import HubAuthError, HubStore, pull, push
from fintts_stand_ins import HubServer
from hub_helpers import FAST, REPO, TOKEN, export_model, latest_on_hub, make_store, save

REPO_ROOT = Path(__file__).resolve().parents[4]


def status(state: str, step: int) -> dict:
    """A status.json as the trainer writes it."""
    return {
        "state": state, "step": step, "monitor": "val/mcd", "best": {"value": 7.25, "step": 100, "checkpoint": "step-00000100"},
        "sessions": [{"id": "session-1", "host": "kaggle", "devices": "2xT4", "started": 1.7e9, "ended": None,
                      "start_step": 0, "end_step": step, "reason": "running"}],
    }


def write_status(root: Path, state: str, step: int) -> None:
    """What the trainer does whenever the run's state changes: status.json and the run's card beside it."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "status.json").write_text(json.dumps(status(state, step)))
    (root / "README.md").write_text(f"# the run's card: {state} at step {step}\n")


def contents(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def committed_checkpoints(hub: HubServer, repo: str = REPO) -> set[str]:
    """Every checkpoint that any commit of the history ever contained."""
    return {path.split("/")[1] for commit in hub.commits(repo) for path in commit["paths"] if path.startswith("checkpoints/")}


def test_round_trip_into_an_empty_root(hub, tmp_path):
    first = make_store(hub, tmp_path / "kaggle-1")
    first.acquire("session-1")
    assert first.resume_point() is None  # a new run
    (first.root / "tb").mkdir(parents=True)
    (first.root / "tb" / "events.out.tfevents.1").write_bytes(b"tensorboard")
    (first.root / "samples").mkdir()
    (first.root / "samples" / "0.wav").write_bytes(b"RIFF")
    (first.root / "loss.png").write_bytes(b"PNG")
    for step in (100, 200):
        name = save(first.root, step)
        export_model(first.root, step)
        write_status(first.root, "running", step)
        first.prune(keep_last=2)
        first.publish(name, final=step == 200)
    assert first.wait(timeout=30)
    assert first.pending() is None
    write_status(first.root, "paused", 200)
    first.release()
    first.close()

    summaries = [c["summary"] for c in hub.commits(REPO)]
    assert [s for s in summaries if s.startswith("step-")] == ["step-00000100", "step-00000200 (end of session)"]
    files = hub.files(REPO)
    assert latest_on_hub(hub) == "step-00000200"
    assert "lease.json" not in files  # released
    assert json.loads(files["status.json"])["state"] == "paused"  # release pushes the final status and card
    assert files["README.md"].decode() == "# the run's card: paused at step 200\n"
    assert {"tb/events.out.tfevents.1", "samples/0.wav", "loss.png", "model/model.safetensors"} <= set(files)
    assert HfApi(endpoint=hub.endpoint, token=TOKEN).model_info(REPO).private
    assert not any("xet" in r.path.lower() or "/info/lfs/" in r.path for r in hub.requests)  # plain commits only

    second = make_store(hub, tmp_path / "kaggle-2")
    folder = second.resume_point(log=lambda message: None)
    assert folder == second.root / "checkpoints" / "step-00000200"
    checkpoint.verify(folder)
    assert contents(folder) == contents(first.root / "checkpoints" / "step-00000200")
    assert second.read_status()["state"] == "paused"
    assert len(second.transfer_seconds()) == 2  # the next session's reserve learns from the last one's pushes
    assert not (second.root / "model").exists()  # resuming downloads only what resuming needs
    second.close()
    assert make_store(hub, tmp_path / "laptop").read_status()["state"] == "paused"  # `fintts status` reads the Hub's


def test_the_carried_cache_is_pushed_once_and_fetched_to_a_fresh_disk_the_rest_of_cache_stays(hub, tmp_path):
    """cache/carried/ holds what a task makes once for the run (files named by their content): a fresh disk gets it."""
    first = make_store(hub, tmp_path / "kaggle-1")
    first.acquire("session-1")
    carried = first.root / "cache" / "carried" / "task"
    carried.mkdir(parents=True)
    (carried / "a.bin").write_bytes(b"made once")
    (first.root / "cache" / "download.bin").write_bytes(b"fetched again where needed")
    first.publish(save(first.root, 100))
    assert first.wait(timeout=30)
    (carried / "a.bin").write_bytes(b"never rewritten, so never sent again")
    (carried / "b.bin").write_bytes(b"made later")
    first.publish(save(first.root, 200), final=True)
    assert first.wait(timeout=30)
    first.release()
    first.close()
    files = hub.files(REPO)
    assert files["cache/carried/task/a.bin"] == b"made once" and files["cache/carried/task/b.bin"] == b"made later"
    assert "cache/download.bin" not in files

    second = make_store(hub, tmp_path / "kaggle-2")
    assert second.resume_point(log=lambda message: None) == second.root / "checkpoints" / "step-00000200"
    assert sorted(p.name for p in (second.root / "cache" / "carried" / "task").iterdir()) == ["a.bin", "b.bin"]
    assert not (second.root / "cache" / "download.bin").exists() and not (second.root / ".hub" / "incoming-carried").exists()
    second.close()


def test_resume_falls_back_when_the_newest_checkpoint_on_the_hub_is_corrupt(hub, tmp_path):
    store = make_store(hub, tmp_path / "writer")
    for step in (1, 2):
        store.publish(save(store.root, step))
        assert store.wait(timeout=30)
    store.close()
    # Someone (or a broken tool) replaced a file of the newest checkpoint on the Hub.
    HfApi(endpoint=hub.endpoint, token=TOKEN).upload_file(
        path_or_fileobj=b"not the weights", path_in_repo="checkpoints/step-00000002/generator.safetensors", repo_id=REPO
    )
    messages: list[str] = []
    resumed = make_store(hub, tmp_path / "empty")
    folder = resumed.resume_point(log=messages.append)
    assert folder is not None and folder.name == "step-00000001"
    assert contents(folder) == contents(store.root / "checkpoints" / "step-00000001")
    assert any("step-00000002" in m and "unusable" in m for m in messages)
    assert checkpoint.read_latest(resumed.root) == "step-00000001"
    assert not (resumed.root / "checkpoints" / "step-00000002").exists()


def test_outage_keeps_training_and_catches_up_newest_first(hub, tmp_path):
    store = make_store(hub, tmp_path / "run")
    store.publish(save(store.root, 1))
    assert store.wait(timeout=30)

    hub.stop()
    for step in (2, 3, 4):
        name = save(store.root, step)
        store.prune(keep_last=1)
        started = time.perf_counter()
        store.publish(name)
        assert time.perf_counter() - started < 0.5  # the trainer never waits for the network
    assert not store.wait(timeout=0.5)
    message = store.pending()
    assert "step-00000004" in message and f"fintts push --store {store.root} --hub-repo {REPO}" in message
    local = checkpoint.list_names(store.root)
    assert "step-00000004" in local  # the one waiting to be pushed is never pruned
    assert "step-00000002" not in local and "step-00000001" not in local  # superseded / already on the Hub

    hub.start()
    assert store.wait(timeout=30)
    assert store.pending() is None
    assert latest_on_hub(hub) == "step-00000004"
    assert committed_checkpoints(hub) == {"step-00000001", "step-00000004"}  # one catch-up commit, newest first
    assert "checkpoints/step-00000001/state.json" not in hub.files(REPO)  # keep_last=1 applies on the Hub too
    store.close()


def test_server_errors_and_rate_limits_are_retried_within_bounds(hub, tmp_path):
    store = make_store(hub, tmp_path / "run")
    hub.fail(500, times=2, path="/commit/")
    hub.fail(429, times=1, path="/commit/", retry_after=1)
    started = time.monotonic()
    store.publish(save(store.root, 1), final=True)
    assert store.wait(timeout=20)
    elapsed = time.monotonic() - started
    assert 1.0 <= elapsed < 10  # Retry-After: 1 honoured, the rest is the small test backoff
    assert [r.status for r in hub.requests if "/commit/" in r.path] == [500, 500, 429, 200]
    assert latest_on_hub(hub) == "step-00000001"
    store.close()


CHILD = textwrap.dedent(
    """
    import os, sys, time
    from fintts.train.run import checkpoint
    from fintts.train.retry import Backoff
    from fintts.train.stores.hub import HubStore

    endpoint, token, root = sys.argv[1:4]
    store = HubStore("fintts-tester/finnish-voice", root=root, endpoint=endpoint, token=token, push_every=0,
                     backoff=Backoff(base=0.05, cap=0.2))

    def write(size):
        return lambda folder: (folder / "generator.safetensors").write_bytes(os.urandom(size))

    checkpoint.save(store.root, "step-00000001", write(1000))
    store.publish("step-00000001")
    assert store.wait(timeout=30)
    print("READY", flush=True)
    sys.stdin.readline()
    checkpoint.save(store.root, "step-00000002", write(24 << 20))
    store.publish("step-00000002")
    time.sleep(120)
    """
)


@pytest.mark.process
def test_a_session_killed_mid_commit_leaves_a_complete_latest(hub, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, hub.endpoint, TOKEN, str(tmp_path / "child")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO_ROOT,
    )
    try:
        assert child.stdout.readline().strip() == "READY", child.stderr.read()
        hub.stall(60, path="/commit/", after_bytes=1 << 20)  # hold the commit after 1 MiB of its ~32 MiB body
        child.stdin.write("go\n")
        child.stdin.flush()
        assert hub.wait_stalled(timeout=60)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
    finally:
        child.kill()
        child.wait()
    hub.release()
    deadline = time.monotonic() + 10
    while not [r for r in hub.requests if "/commit/" in r.path and r.status is None] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [r for r in hub.requests if "/commit/" in r.path and r.status is None], "the cut-off commit was not seen"

    assert latest_on_hub(hub) == "step-00000001"
    assert not any(path.startswith("checkpoints/step-00000002") for path in hub.files(REPO))
    resumed = make_store(hub, tmp_path / "fresh")
    folder = resumed.resume_point(log=lambda message: None)
    assert folder.name == "step-00000001"
    checkpoint.verify(folder)


def test_lease_conflict_and_forced_takeover(hub, tmp_path):
    kaggle = make_store(hub, tmp_path / "kaggle", lease_timeout=60, host="kaggle 2xT4")
    kaggle.acquire("session-kaggle")
    laptop = make_store(hub, tmp_path / "laptop", lease_timeout=60)
    with pytest.raises(LeaseConflict) as conflict:
        laptop.acquire("session-laptop")
    assert "session-kaggle" in str(conflict.value) and "kaggle 2xT4" in str(conflict.value) and "--force" in str(conflict.value)

    laptop.acquire("session-laptop", force=True)
    assert json.loads(hub.files(REPO)["lease.json"])["session"] == "session-laptop"
    # The displaced session notices at its next push and stops instead of overwriting the run.
    kaggle.publish(save(kaggle.root, 5), final=True)
    assert not kaggle.wait(timeout=10)
    assert "took over" in kaggle.pending()
    assert "latest" not in hub.files(REPO)
    laptop.release()
    assert "lease.json" not in hub.files(REPO)
    for store in (kaggle, laptop):
        store.close()


def test_a_stale_lease_is_taken_over_and_heartbeats_keep_a_live_one_fresh(hub, tmp_path, caplog):
    # The lease's age is measured by the Hub's clock, whose Date header counts whole seconds: timeouts of seconds.
    alive = make_store(hub, tmp_path / "alive", lease_timeout=3)
    alive.acquire("session-alive")
    time.sleep(3.5)  # longer than the timeout, but the worker heartbeats every timeout/3
    with pytest.raises(LeaseConflict):
        make_store(hub, tmp_path / "other").acquire("session-other")
    assert any(c["summary"] == "heartbeat" for c in hub.commits(REPO))
    alive.close()  # the session dies: no release, no more heartbeats
    time.sleep(4.2)
    caplog.set_level(logging.WARNING)
    successor = make_store(hub, tmp_path / "successor")
    successor.acquire("session-successor")
    assert json.loads(hub.files(REPO)["lease.json"])["session"] == "session-successor"
    assert any("taking over the lease of session session-alive" in r.getMessage() for r in caplog.records)
    successor.close()


def test_push_schedule_skips_between_full_pushes(hub, tmp_path):
    store = make_store(hub, tmp_path / "run", push_every=3600)
    for step in (1, 2, 3):
        store.publish(save(store.root, step), final=step == 3)
        assert store.wait(timeout=30)
    assert committed_checkpoints(hub) == {"step-00000001", "step-00000003"}  # first of the session, then final
    store.close()


def test_pruned_checkpoints_storage_is_freed(hub, tmp_path, caplog):
    store = make_store(hub, tmp_path / "run", storage_cap_gb=0.0001)
    api = HfApi(endpoint=hub.endpoint, token=TOKEN)
    size = 64 * 1024
    caplog.set_level(logging.WARNING)
    for step in (1, 2, 3):
        name = save(store.root, step, size=size)
        export_model(store.root, step)
        (store.root / "model" / "shard-2.bin").unlink(missing_ok=True)
        if step == 2:
            (store.root / "model" / "shard-2.bin").write_bytes(os.urandom(4096))
        store.prune(keep_last=1)
        store.publish(name)
        assert store.wait(timeout=30)
        if step == 1:
            used_after_first = hub.used_storage(REPO)
    store.close()  # storage is tidied after each push has landed; close() lets the worker finish that
    files = hub.files(REPO)
    assert {p.split("/")[1] for p in files if p.startswith("checkpoints/")} == {"step-00000003"}
    assert "model/shard-2.bin" not in files  # model/ is mirrored: a file gone locally goes on the Hub
    lfs_names = {item.filename for item in api.list_lfs_files(REPO)}
    assert not any(n.startswith(("checkpoints/step-00000001", "checkpoints/step-00000002", "model/shard-2")) for n in lfs_names)
    assert "checkpoints/step-00000003/generator.safetensors" in lfs_names
    assert hub.used_storage(REPO) < used_after_first + size // 2  # three pushes, about one checkpoint stored
    assert store.describe()["used_storage_bytes"] == hub.used_storage(REPO)
    assert any("would exceed storage_cap_gb" in r.getMessage() for r in caplog.records)


def test_pull_model_only_a_checkpoint_or_everything(hub, tmp_path):
    source = tmp_path / "laptop-run"
    for step in (1, 2):
        save(source, step)
        export_model(source, step)
        best = {"value": 6.5, "step": 1, "checkpoint": "step-00000001"}  # the trainer names the checkpoint holding it
        (source / "status.json").write_text(json.dumps({"state": "paused", "step": step, "best": best}))
        (source / "README.md").write_text("# the run's card\n")
        url = push(source, REPO, endpoint=hub.endpoint, token=TOKEN)
        assert url.startswith(hub.endpoint) and latest_on_hub(hub) == checkpoint.name_for_step(step)

    model = pull(REPO, tmp_path / "voice", endpoint=hub.endpoint, token=TOKEN)
    assert model == tmp_path / "voice" / "model"
    assert sorted(contents(tmp_path / "voice")) == ["model/config.json", "model/model.safetensors"]
    assert contents(model) == contents(source / "model")

    best = pull(REPO, tmp_path / "best", checkpoint="best", endpoint=hub.endpoint, token=TOKEN)
    assert best.name == "step-00000001" and contents(best) == contents(source / "checkpoints" / "step-00000001")
    assert checkpoint.read_latest(tmp_path / "best") == "step-00000001"  # usable as --store to continue

    everything = pull(REPO, tmp_path / "all", full=True, endpoint=hub.endpoint, token=TOKEN)
    assert {"latest", "status.json", "README.md", "model/model.safetensors"} <= set(contents(everything))
    assert checkpoint.latest_complete(everything, lambda m: None).name == "step-00000002"

    with pytest.raises(StoreError, match="backwards"):
        older = tmp_path / "older"
        save(older, 1)
        push(older, REPO, endpoint=hub.endpoint, token=TOKEN)


def test_missing_or_rejected_token_says_what_to_do(hub, tmp_path, monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-cached-login"))
    with pytest.raises(HubAuthError, match="HF_TOKEN") as missing:
        open_store(tmp_path / "run", hub_repo=REPO, endpoint=hub.endpoint)
    assert "Kaggle" in str(missing.value)

    with pytest.raises(HubAuthError, match="rejected the token"):
        HubStore(REPO, root=tmp_path / "run", endpoint=hub.endpoint, token="hf_wrong", backoff=FAST).acquire("s")


def test_the_token_never_leaks(hub, tmp_path, caplog, capfd):
    caplog.set_level(logging.DEBUG)
    store = make_store(hub, tmp_path / "run")
    store.acquire("session-1")
    hub.fail(500, times=1, path="/commit/")
    name = save(store.root, 1)
    export_model(store.root, 1)
    write_status(store.root, "running", 1)
    store.publish(name, final=True)
    assert store.wait(timeout=30)
    store.release()
    store.describe()
    store.close()
    make_store(hub, tmp_path / "resumed").resume_point(log=print)
    pull(REPO, tmp_path / "pulled", full=True, endpoint=hub.endpoint, token=TOKEN)
    errors = []
    for wrong in ("hf_wrong_but_similar", TOKEN[:-1]):
        try:
            HubStore(REPO, root=tmp_path / "x", endpoint=hub.endpoint, token=wrong, backoff=FAST).acquire("s")
        except StoreError as err:
            errors.append(f"{err!s} {err!r}")

    assert len(errors) == 2 and not any(TOKEN[:-1] in e for e in errors)
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path
    for request in hub.requests:
        assert TOKEN not in request.path and TOKEN.encode() not in request.body
        assert TOKEN not in json.dumps(request.headers)
    assert {r.auth for r in hub.requests if not r.path.startswith("/api/validate-yaml")} >= {"ok"}
    assert not any(TOKEN in r.getMessage() for r in caplog.records)
    out, err = capfd.readouterr()
    assert TOKEN not in out and TOKEN not in err


def test_pull_samples_brings_what_to_listen_to_and_the_curves_without_weights(hub, tmp_path):
    """``fintts pull --samples`` on the laptop while the run trains: the newest samples, tb/, loss.png, status (issue 45)."""
    source = tmp_path / "laptop-run"
    name = checkpoint.name_for_step(1)

    def write(folder: Path) -> None:  # a checkpoint after a validation, as the trainer writes it: its samples inside
        (folder / "generator.safetensors").write_bytes(b"weights")
        (folder / "samples").mkdir()
        (folder / "samples" / "0-voice.wav").write_bytes(b"RIFF step 1")

    checkpoint.save(source, name, write)
    (source / "tb").mkdir()
    (source / "tb" / "events.out.tfevents.1").write_bytes(b"tensorboard")
    (source / "loss.png").write_bytes(b"PNG")
    (source / "status.json").write_text(json.dumps({"state": "running", "step": 1}))
    push(source, REPO, endpoint=hub.endpoint, token=TOKEN)

    where = pull(REPO, tmp_path / "watch", samples=True, endpoint=hub.endpoint, token=TOKEN)
    assert where == tmp_path / "watch" / "checkpoints" / name / "samples"
    assert sorted(contents(tmp_path / "watch")) == [f"checkpoints/{name}/samples/0-voice.wav", "loss.png", "status.json",
                                                   "tb/events.out.tfevents.1"]  # no weights

    bare = tmp_path / "bare-run"
    save(bare, 2)
    push(bare, REPO, endpoint=hub.endpoint, token=TOKEN)
    with pytest.raises(StoreError, match="no samples yet"):
        pull(REPO, tmp_path / "early", samples=True, endpoint=hub.endpoint, token=TOKEN)
