"""The Hub as it answers in 2026 (issue 42): Xet storage, card validation, quotas, tokens, visibility, history
rewrites, against the local Hub stand-in switched to each behaviour and the real ``huggingface_hub``/``hf_xet``."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from huggingface_hub import HfApi, constants

from fintts.train.stores import StoreError
from fintts.train.stores.hub import pull
from fintts.train.stores.hub.errors import HubUnavailable, classify
from fintts_stand_ins import HubServer
from hub_helpers import REPO, TOKEN, latest_on_hub, make_store, save

# ---------------------------------------------------------------- item 1: errors by where they came from


def test_a_xet_storage_outage_in_the_final_push_is_retried_and_named(xet_hub, tmp_path, caplog):
    caplog.set_level(logging.INFO)
    store = make_store(xet_hub, tmp_path / "run")
    store.acquire("session-a")
    xet_hub.fail_xet(503, times=2)  # the real hf_xet meets a failing CAS twice, then the storage is back
    store.publish(save(store.root, 1, size=64_000), final=True)
    assert store.wait(timeout=90)
    assert latest_on_hub(xet_hub) == "step-00000001"
    failures = [r.getMessage() for r in caplog.records if "push failed" in r.getMessage()]
    assert failures and all("Xet storage failed" in m and "local file problem" not in m for m in failures), failures
    store.release()
    store.close()


def test_a_xet_storage_refusal_says_it_is_the_token_and_does_not_hold_the_final_wait(xet_hub, tmp_path):
    store = make_store(xet_hub, tmp_path / "run")
    store.acquire("session-a")
    xet_hub.fail_xet(403, times=1000)
    store.publish(save(store.root, 1, size=64_000), final=True)
    started = time.monotonic()
    assert not store.wait(timeout=60)
    assert time.monotonic() - started < 30  # a refusal needs a person: no point waiting out the session
    pending = store.pending()
    assert "Xet storage refused" in pending and "write" in pending and TOKEN not in pending
    store.close()


def test_an_old_hf_xet_cas_error_passes_and_a_local_permission_problem_needs_a_person(tmp_path):
    old = classify(RuntimeError("Data processing error: CAS service error : Reqwest error: 502"), token=None, endpoint="e", repo_id=REPO)
    assert isinstance(old, HubUnavailable) and old.transient
    unreadable = tmp_path / "model.safetensors"
    try:
        raise PermissionError(13, "Permission denied", str(unreadable))
    except PermissionError as err:
        local = classify(err, token=None, endpoint="e", repo_id=REPO)
    assert not local.transient and str(unreadable) in str(local) and "permission" in str(local).lower()


# ---------------------------------------------------------------- item 3: a revision that vanishes mid-read


def _deleted_file(hub: HubServer) -> None:
    """A large file added and deleted again: the head now descends from a commit that references its storage."""
    api = HfApi(endpoint=hub.endpoint, token=TOKEN)
    api.upload_file(path_or_fileobj=b"x" * 5000, path_in_repo="samples/junk.bin", repo_id=REPO)
    api.delete_file("samples/junk.bin", repo_id=REPO)


def _rewrite_history(hub: HubServer) -> None:
    """What freeing a deleted file's storage does on the Hub: every commit since the file's first gets a new id."""
    api = HfApi(endpoint=hub.endpoint, token=TOKEN)
    doomed = [f for f in api.list_lfs_files(REPO) if f.filename == "samples/junk.bin"]
    api.permanently_delete_lfs_files(REPO, doomed, rewrite_history=True)


def test_a_resume_that_races_a_history_rewrite_reads_again_and_finds_the_run(hub, tmp_path):
    writer = make_store(hub, tmp_path / "writer")
    writer.acquire("session-a")
    writer.publish(save(writer.root, 1, size=8000))
    assert writer.wait(timeout=30)
    writer.release()
    writer.close()
    _deleted_file(hub)
    reader = make_store(hub, tmp_path / "reader")
    hub.stall(None, path="/tree/", times=1)  # the reader has read the head and lists its files...
    found: list = []
    thread = threading.Thread(target=lambda: found.append(reader.resume_point(log=lambda _: None)))
    thread.start()
    assert hub.wait_stalled(timeout=30)
    _rewrite_history(hub)  # ...while the history is rewritten: the head it read is gone
    hub.release()
    thread.join(timeout=60)
    assert found and found[0] is not None and found[0].name == "step-00000001", found
    reader.close()


def test_a_pull_that_races_a_history_rewrite_pulls_again(hub, tmp_path):
    writer = make_store(hub, tmp_path / "writer")
    writer.acquire("session-a")
    writer.publish(save(writer.root, 1, size=8000))
    assert writer.wait(timeout=30)
    writer.release()
    writer.close()
    _deleted_file(hub)
    hub.stall(None, path="/tree/", times=1)
    pulled: list = []
    thread = threading.Thread(target=lambda: pulled.append(
        pull(REPO, tmp_path / "pulled", checkpoint="latest", endpoint=hub.endpoint, token=TOKEN, request_timeout=5)))
    thread.start()
    assert hub.wait_stalled(timeout=30)
    _rewrite_history(hub)
    hub.release()
    thread.join(timeout=60)
    assert pulled and pulled[0].name == "step-00000001"


# ---------------------------------------------------------------- item 2: the card's metadata


CARD = "---\nlicense: {licence}\nlanguage:\n- fi\n---\n\n# a voice\n\nstep {step}\n"


def test_a_card_the_hub_refuses_is_left_out_and_never_stops_a_push(hub, tmp_path):
    store = make_store(hub, tmp_path / "run")
    (store.root).mkdir(parents=True, exist_ok=True)
    (store.root / "README.md").write_text(CARD.format(licence="my-own-licence", step=1))
    store.acquire("session-a")
    store.publish(save(store.root, 1), final=True)
    assert store.wait(timeout=30), store.problem()
    assert latest_on_hub(hub) == "step-00000001" and "README.md" not in hub.files(REPO)
    assert "README.md" in store.problem() and "license" in store.problem()
    store.release()
    store.close()


def test_rules_that_tighten_mid_session_never_stop_heartbeats_and_the_card_rides_only_when_it_changes(hub, tmp_path):
    store = make_store(hub, tmp_path / "run", lease_timeout=1.5)
    store.root.mkdir(parents=True, exist_ok=True)
    (store.root / "README.md").write_text(CARD.format(licence="mit", step=1))
    store.acquire("session-a")
    store.publish(save(store.root, 1))
    assert store.wait(timeout=30)
    assert hub.files(REPO)["README.md"].startswith(b"---\nlicense: mit")
    hub.refuse_card_field("license", "is refused by a rule added today")
    time.sleep(3)  # heartbeats every 0.5 s
    beats = [r for r in hub.requests if "/commit/" in r.path and b"heartbeat" in r.body]
    assert len(beats) >= 2 and all(r.status == 200 for r in beats), [(r.status, r.body[:200]) for r in beats]
    assert not any(b"README.md" in r.body for r in beats)
    (store.root / "README.md").write_text(CARD.format(licence="mit", step=2))  # a new page, now refused
    store.publish(save(store.root, 2), final=True)
    deadline = time.monotonic() + 30
    while latest_on_hub(hub) != "step-00000002" and time.monotonic() < deadline:
        time.sleep(0.2)
    assert latest_on_hub(hub) == "step-00000002"
    assert b"step 1" in hub.files(REPO)["README.md"]  # the refused page stayed out; the run went on
    store.release()
    store.close()


# ---------------------------------------------------------------- item 3: commits and rewrites per session


@pytest.mark.process
def test_a_session_with_the_shipped_config_makes_at_most_30_commits_and_2_rewrites(tmp_path):
    """benchmarks/hub_commits.py on a clock where an hour lasts one second: the shipped config's 12-hour session."""
    root = Path(__file__).resolve().parents[4]
    out = tmp_path / "counts.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(root / "tests" / "stand_ins")])}
    result = subprocess.run(
        [sys.executable, str(root / "benchmarks" / "hub_commits.py"), str(root / "configs" / "mms-fin.yaml"), "--hour", "1.0",
         "--json", str(out)], capture_output=True, text=True, timeout=300, env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    counts = json.loads(out.read_text())
    assert counts["commits"] <= 30 and counts["rewrites"] <= 2, counts
    assert counts["by_kind"]["checkpoint push"] >= 12  # the hourly pushes all happened


def test_pushes_free_storage_at_the_session_end_not_after_each_push(hub, tmp_path):
    store = make_store(hub, tmp_path / "run")
    store.acquire("session-a")
    for step in range(1, 5):
        store.prune(1)
        store.publish(save(store.root, step, size=8000))
        assert store.wait(timeout=30)
    assert hub.rewrites(REPO) == 0  # deleted checkpoints wait: no history rewrite mid-session
    store.prune(1)
    store.publish(save(store.root, 5, size=8000), final=True)
    assert store.wait(timeout=30)
    assert hub.rewrites(REPO) == 0  # the final push's rewrite comes after the release (issue 53): it never holds the lease
    store.release()
    assert hub.rewrites(REPO) == 1
    assert {p.split("/")[1] for p in hub.files(REPO) if p.startswith("checkpoints/")} == {"step-00000005"}
    store.close()


# ---------------------------------------------------------------- items 4-6: quotas, rate limits, tokens, visibility


def test_the_storage_limit_403_says_the_storage_is_full_not_the_token(tmp_path):
    with HubServer(tmp_path / "hub", token=TOKEN, storage_limit=20_000) as hub:
        store = make_store(hub, tmp_path / "run", storage_limit_gb=None)
        store.acquire("session-a")
        store.publish(save(store.root, 1, size=64_000), final=True)
        assert not store.wait(timeout=30)
        pending = store.pending()
        assert "storage is full" in pending and "write role" not in pending, pending
        store.close()


def test_a_session_that_could_not_save_within_the_accounts_storage_is_refused_at_its_start(hub, tmp_path):
    api = HfApi(endpoint=hub.endpoint, token=TOKEN)
    api.create_repo("fintts-tester/older-voice", private=True)
    api.upload_file(path_or_fileobj=b"w" * 50_000, path_in_repo="model.safetensors", repo_id="fintts-tester/older-voice")
    store = make_store(hub, tmp_path / "run", storage_limit_gb=40_000 / 1e9)
    with pytest.raises(StoreError, match=r"use 0\.0 GB .*storage_limit_gb is 4e-05 GB.*Free space"):
        store.acquire("session-a")
    assert "lease.json" not in hub.files(REPO)


def test_a_429_waits_as_the_ratelimit_header_says_and_uploads_nothing_twice(tmp_path, monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)  # the stand-in's LFS path shows each upload
    with HubServer(tmp_path / "hub", token=TOKEN, lfs_uploads=True) as hub:
        store = make_store(hub, tmp_path / "run")
        store.acquire("session-a")
        hub.fail(429, path="/commit/", ratelimit=3, times=1)  # the hourly commit quota, said by RateLimit alone
        store.publish(save(store.root, 1, size=64_000), final=True)
        assert store.wait(timeout=60)
        commits = [r for r in hub.requests if "/commit/" in r.path and r.status in (200, 429)]
        refused = next(i for i, r in enumerate(commits) if r.status == 429)
        assert commits[refused + 1].status == 200
        assert len([r for r in hub.requests if r.path.startswith("/lfs-upload/")]) == 1  # the checkpoint's file, once
        store.release()
        store.close()


def test_a_429_is_retried_no_sooner_than_the_ratelimit_reset(tmp_path):
    with HubServer(tmp_path / "hub", token=TOKEN) as hub:
        store = make_store(hub, tmp_path / "run")
        store.acquire("session-a")
        hub.fail(429, path="/commit/", ratelimit=3, times=1)
        started = time.monotonic()
        store.publish(save(store.root, 1), final=True)
        assert store.wait(timeout=60)
        assert time.monotonic() - started >= 2.9
        store.release()
        store.close()


def test_a_token_that_may_not_create_repos_is_told_to_create_the_repo_first(hub, tmp_path):
    hub.scope_token(["fintts-tester/other-voice"])
    store = make_store(hub, tmp_path / "run")
    with pytest.raises(StoreError) as refused:
        store.acquire("session-a")
    assert "create the repo first" in str(refused.value) and "write role" not in str(refused.value)


def test_a_repo_in_someone_elses_namespace_is_refused(tmp_path):
    with HubServer(tmp_path / "hub", token=TOKEN, owners_only=True) as hub:
        store = make_store(hub, tmp_path / "run", repo="someone-else/voice")
        with pytest.raises(StoreError, match="may not create someone-else/voice"):
            store.acquire("session-a")


def test_a_public_repo_is_refused_for_a_training_run_unless_asked_for(hub, tmp_path):
    HfApi(endpoint=hub.endpoint, token=TOKEN).create_repo(REPO, private=False)
    store = make_store(hub, tmp_path / "run")
    with pytest.raises(StoreError, match="is public.*hub_public"):
        store.acquire("session-a")
    assert "lease.json" not in hub.files(REPO)
    allowed = make_store(hub, tmp_path / "run", allow_public=True)
    allowed.acquire("session-a")
    allowed.release()
    allowed.close()


def test_a_token_that_may_not_free_storage_says_so_once_and_what_storage_grows_to(hub, tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    store = make_store(hub, tmp_path / "run", rewrite_every=0)  # each push frees storage
    store.acquire("session-a")
    hub.fail(403, path="/lfs-files/batch", times=100)  # the token writes files but may not delete LFS objects
    for step in (1, 2, 3):
        store.prune(1)
        store.publish(save(store.root, step, size=8000), final=step == 3)  # and the release after the final one
        assert store.wait(timeout=30)
    store.release()
    store.close()
    told = [r.getMessage() for r in caplog.records if "may not free" in r.getMessage()]
    assert len(told) == 1 and "grows by every push" in told[0], [r.getMessage() for r in caplog.records]
