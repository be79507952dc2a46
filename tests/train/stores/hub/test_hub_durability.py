"""Nothing saved is lost on the Hub: a failing session's newest checkpoint, ``model/`` that only moves forward,
a re-pushed checkpoint, bounded uploads, and the ceilings of the reserve and the lease. Real ``fintts train``
processes and stores against the local Hub stand-in and its fault switches."""

from __future__ import annotations

import json
import signal
import time

import pytest
from huggingface_hub import HfApi, constants

from fintts.train import Trainer
from fintts.train.config import load_config
from fintts.train.run import checkpoint
from fintts.train.session.clock import SessionClock
from fintts.train.stores import LeaseConflict
from fintts.train.stores.hub import pull
from fintts.train.stores.hub.commits import Saved
from fintts_stand_ins import HubServer
from hub_helpers import REPO, TOKEN, export_model, latest_on_hub, make_store, save
from trainer_helpers import FAULTY, cli, start_cli, write_config

BIG_COMMIT = 30_000


def hub_status(hub) -> dict:
    return json.loads(hub.files(REPO)["status.json"])


# ---------------------------------------------------------------- a failing session


@pytest.mark.process
@pytest.mark.parametrize(
    "fault",
    [
        {"fault": "cuda", "fault_at": 11, "fault_steps": 0, "eval_every": 0},  # a device fault in step 11
        {"fault": "eval-bug", "fault_at": 10, "eval_every": 5},  # a bug in the task's evaluate at step 10
    ],
    ids=["cuda-error", "evaluate-bug"],
)
def test_a_failing_session_pushes_its_newest_checkpoint(hub_env, tmp_path, fault):
    hub = hub_env
    config = write_config(tmp_path, task=FAULTY, max_steps=100, checkpoint_every_steps=4, **fault)
    store = tmp_path / "kaggle"
    # push_every 1h: only the session's first checkpoint is due for a push; step 8 is on this disk only
    result = cli("train", str(config), "--hub-repo", REPO, "--store", str(store), "--push-every", "1h", "--no-progress", cwd=tmp_path)
    assert result.returncode != 0, result.stdout
    assert checkpoint.read_latest(store) == "step-00000008"
    assert latest_on_hub(hub) == "step-00000008", result.stdout + result.stderr
    assert "step-00000008 is on hf://" in result.stdout, result.stdout
    status = hub_status(hub)
    assert status["state"] == "failed" and "lease.json" not in hub.files(REPO)
    assert status["saved"]["hub"] == "step-00000008" and not status["saved"]["local_only"]
    assert status["step"] > 8 and "newest checkpoint on the Hub is step-00000008" in status["saved"]["note"]


@pytest.mark.slow
def test_a_second_ctrl_c_still_pushes_the_newest_checkpoint(hub_env, tmp_path):
    hub = hub_env
    config = write_config(tmp_path, max_steps=1000, step_delay=1.0, eval_every=0, checkpoint_every_steps=4)
    store = tmp_path / "kaggle"
    process = start_cli("train", str(config), "--hub-repo", REPO, "--store", str(store), "--push-every", "1h", "--no-progress",
                        cwd=tmp_path)
    deadline = time.time() + 120
    while checkpoint.step_of(checkpoint.read_latest(store) or "step-00000000") < 8 and time.time() < deadline:
        assert process.poll() is None, process.stdout.read()
        time.sleep(0.02)
    process.send_signal(signal.SIGINT)  # just after a checkpoint: both signals come within the next 1-second step
    time.sleep(0.1)
    process.send_signal(signal.SIGINT)  # a person who means it: the session fails at once
    out, _ = process.communicate(timeout=120)
    assert process.returncode == 130, out
    newest = checkpoint.read_latest(store)
    assert checkpoint.step_of(newest) >= 8
    assert latest_on_hub(hub) == newest, out
    assert hub_status(hub)["state"] == "failed" and hub_status(hub)["saved"]["hub"] == newest


def test_a_status_pushed_by_a_heartbeat_says_which_checkpoint_is_only_local(hub, tmp_path):
    store = make_store(hub, tmp_path / "run", push_every=3600, lease_timeout=0.9)
    store.acquire("session-1")
    store.resume_point()
    store.publish(save(store.root, 4))  # the session's first: pushed
    assert store.wait(timeout=30)
    store.publish(save(store.root, 8))  # within push_every: stays on this disk
    (store.root / "status.json").write_text(json.dumps({"state": "running", "step": 9}))
    deadline = time.time() + 30
    while "saved" not in json.loads(hub.files(REPO).get("status.json", b"{}")) and time.time() < deadline:
        time.sleep(0.1)  # the next heartbeat brings status.json
    saved = hub_status(hub)["saved"]
    assert saved["hub"] == "step-00000004" and saved["local"] == "step-00000008" and saved["local_only"]
    assert "step-00000008 is only on" in saved["note"]
    read = Saved.of(hub_status(hub))  # the reader beside the writer (fintts kaggle run reads it so)
    assert (read.hub, read.local, read.local_only, read.folder) == ("step-00000004", "step-00000008", True, str(store.root))
    store.release()
    store.close()


# ---------------------------------------------------------------- model/ moves forward only


def test_an_older_local_model_never_replaces_the_hubs(hub, tmp_path):
    old = make_store(hub, tmp_path / "laptop")  # a disk that trained the run's beginning
    old.acquire("session-1")
    old.resume_point()
    name = save(old.root, 4)
    export_model(old.root, 4)
    old.publish(name, final=True)
    assert old.wait(timeout=30)
    old.release()
    old.close()

    kaggle = make_store(hub, tmp_path / "kaggle")  # the run goes on elsewhere, with a better model
    kaggle.acquire("session-2")
    kaggle.resume_point()
    name = save(kaggle.root, 8)
    export_model(kaggle.root, 8)
    kaggle.publish(name, final=True)
    assert kaggle.wait(timeout=30)
    kaggle.release()
    kaggle.close()

    back = make_store(hub, tmp_path / "laptop")  # the first disk again, its model/ still step 4's
    back.acquire("session-3")
    assert back.resume_point().name == "step-00000008"
    back.publish(save(back.root, 12), final=True)  # no better validation: the trainer exports nothing new
    assert back.wait(timeout=30)
    back.release()
    back.close()
    assert json.loads(hub.files(REPO)["model/config.json"]) == {"step": 8}


# ---------------------------------------------------------------- a checkpoint pushed again


def test_a_checkpoint_pushed_again_replaces_its_folder_on_the_hub(hub, tmp_path):
    store = make_store(hub, tmp_path / "run")

    def first(folder):
        (folder / "state.json").write_text('{"step": 4, "try": 1}')
        (folder / "discriminator.safetensors").write_bytes(b"x" * 2048)

    checkpoint.save(store.root, "step-00000004", first)
    store.publish("step-00000004", final=True)
    assert store.wait(timeout=30)
    checkpoint.save(store.root, "step-00000004", lambda folder: (folder / "state.json").write_text('{"step": 4, "try": 2}'))
    store.publish("step-00000004", final=True)  # saved again at the same step (e.g. latest was damaged)
    assert store.wait(timeout=30)
    store.close()
    assert "checkpoints/step-00000004/discriminator.safetensors" not in hub.files(REPO)
    pulled = pull(REPO, tmp_path / "elsewhere", checkpoint="step-4", endpoint=hub.endpoint, token=TOKEN)  # verifies
    assert json.loads((pulled / "state.json").read_text())["try"] == 2


# ---------------------------------------------------------------- ceilings


def test_one_slow_push_takes_at_most_a_share_of_every_later_session():
    twelve_hours = 12 * 3600.0
    clock = SessionClock(start=time.time(), limit=twelve_hours, measured=[300.0, 3 * 3600.0])  # one 3-hour push
    assert clock.reserve() == pytest.approx(0.25 * twelve_hours)  # a quarter of the session
    assert "capped at 25% of the session" in clock.ceiling_note()
    calm = SessionClock(start=time.time(), limit=twelve_hours, measured=[300.0, 400.0])
    assert calm.reserve() == 800.0 and calm.ceiling_note() is None


def test_the_lease_timeout_of_a_run_with_slow_pushes_has_a_ceiling(hub, tmp_path):
    writer = make_store(hub, tmp_path / "writer", lease_timeout=1)
    writer.set_deadline(time.time() + 16)  # a 16 s session: the lease times out after at most 4 s
    writer.acquire("session-writer")
    hub.stall(2.5, path="/commit/", after_bytes=BIG_COMMIT, times=1)
    writer.publish(save(writer.root, 1, size=64_000))  # 2.5 s: 3 x that would be 7.5 s
    assert writer.wait(timeout=30)
    # the push's time is recorded after its commit lands, on the publisher's thread: looked for, not waited a fixed time
    for _ in range(300):
        if any("at most 25% of the session" in note for note in writer.notes()):
            break
        time.sleep(0.1)
    assert any("at most 25% of the session" in note for note in writer.notes())
    time.sleep(1.0)  # a heartbeat with the new timeout
    lease = json.loads(hub.files(REPO)["lease.json"])
    assert lease["timeout"] <= 4.0 + 1e-6, lease
    writer.release()
    writer.close()


# ---------------------------------------------------------------- bulk uploads


@pytest.fixture
def lfs_hub(tmp_path, monkeypatch):
    """The Hub stand-in taking large files through the LFS batch API before their commit, as the real Hub does."""
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)  # the stand-in speaks LFS, not xet
    with HubServer(tmp_path / "hub", token=TOKEN, lfs_uploads=True) as server:
        yield server


def save_two_large_files(root, step: int) -> str:
    name = checkpoint.name_for_step(step)

    def write(folder):
        for part in ("model", "discriminator"):
            (folder / f"{part}.safetensors").write_bytes(bytes([step, len(part)]) * 40_000)
        (folder / "state.json").write_text(json.dumps({"step": step}))

    checkpoint.save(root, name, write)
    return name


def test_a_stalled_upload_never_keeps_heartbeats_from_the_lease(lfs_hub, tmp_path):
    hub = lfs_hub
    writer = make_store(hub, tmp_path / "writer", lease_timeout=3)  # (the Hub's clock counts whole seconds)
    writer.acquire("session-writer")
    hub.stall(None, path="/lfs-upload/", method="PUT", times=100)  # the checkpoint's upload hangs, try after try
    writer.publish(save(writer.root, 1, size=64_000))
    assert hub.wait_stalled(timeout=30)
    time.sleep(6.5)  # twice the lease's timeout, with the upload still hanging
    with pytest.raises(LeaseConflict, match="session-writer"):
        make_store(hub, tmp_path / "other").acquire("session-other")
    assert sum(c["summary"] == "heartbeat" for c in hub.commits(REPO)) >= 2
    hub.clear_faults()
    hub.release()
    assert writer.wait(timeout=60)
    assert latest_on_hub(hub) == "step-00000001"
    writer.release()
    writer.close()


def test_a_stalled_upload_is_given_up_at_its_deadline_and_tried_again(lfs_hub, tmp_path):
    hub = lfs_hub
    writer = make_store(hub, tmp_path / "writer", upload_timeout=3)
    writer.acquire("session-writer")
    hub.stall(None, path="/lfs-upload/", method="PUT", times=2)  # both parts of the first try hang for ever
    published = time.monotonic()
    writer.publish(save_two_large_files(writer.root, 1))
    assert writer.wait(timeout=60)
    assert time.monotonic() - published < 30
    assert latest_on_hub(hub) == "step-00000001"
    pulled = pull(REPO, tmp_path / "elsewhere", checkpoint="latest", endpoint=hub.endpoint, token=TOKEN)  # verifies
    assert pulled.name == "step-00000001"
    hub.release()  # the abandoned first try's requests end too
    writer.release()
    writer.close()


def test_a_stalled_upload_never_outlasts_the_session(lfs_hub, tmp_path):
    hub = lfs_hub
    writer = make_store(hub, tmp_path / "writer")
    writer.set_deadline(time.time() + 6)  # the session ends in 6 s (several large files upload on threads of their own)
    writer.acquire("session-writer")
    hub.stall(None, path="/lfs-upload/", method="PUT", times=100)
    writer.publish(save_two_large_files(writer.root, 1), final=True)
    assert not writer.wait(timeout=10)
    assert "did not finish within" in (writer.problem() or ""), writer.problem()
    assert "fintts push" in writer.pending()  # the summary's advice: the checkpoint is on this disk
    hub.release()
    writer.close(timeout=1)


@pytest.mark.process
def test_the_summary_says_when_the_reserve_ceiling_bites(hub_env, tmp_path):
    hub = hub_env
    config = write_config(tmp_path, max_steps=8, eval_every=0, checkpoint_every_steps=4)
    first = Trainer(load_config(config, {"max_steps": 4}), store=make_store(hub, tmp_path / "kaggle-1"), progress=False,
                    log=lambda m: None)
    first.run()
    pushes = [{"checkpoint": "step-00000004", "seconds": 100.0, "bytes": 1, "at": "2026-11-24T00:00:00Z"}]  # one slow push
    HfApi(endpoint=hub.endpoint, token=TOKEN).upload_file(path_or_fileobj=json.dumps(pushes).encode(), path_in_repo="pushes.json",
                                                         repo_id=REPO)
    # a process of its own: a session's clock starts with its process, and this one's limit is 120 s
    result = cli("train", str(config), "--hub-repo", REPO, "--store", str(tmp_path / "kaggle-2"), "--budget", "120s",
                 "--no-progress", cwd=tmp_path)  # 2 x 100 s would be most of this session
    assert result.returncode == 0, result.stdout
    assert "reached max_steps" in result.stdout and "capped at 25% of the session" in result.stdout, result.stdout
    assert any("capped at 25%" in w for w in hub_status(hub)["warnings"])
