"""What someone else may leave in a run's files (on the Hub or on disk) never stops a session: a ``pushes.json`` of the
wrong shape, a ``latest`` edited by hand into something that is not a checkpoint's name."""

from __future__ import annotations

import logging

import pytest
from huggingface_hub import HfApi

from fintts.train.run import checkpoint
from hub_helpers import REPO, TOKEN, latest_on_hub, make_store, save


def first_session_pushes_step_4(hub, folder) -> None:
    """A session that pushes checkpoint step 4 to the Hub and gives its lease back."""
    first = make_store(hub, folder)
    first.acquire("session-1")
    first.resume_point(log=lambda _: None)
    first.publish(save(first.root, 4), final=True)
    assert first.wait(timeout=30)
    first.release()
    first.close()


@pytest.mark.parametrize("text", ['{"seconds": 12}', '["slow", 3]', '[{"seconds": "slow"}]', "not json", '[{"checkpoint": "x"}]'],
                         ids=["object", "strings", "text-seconds", "not-json", "no-seconds"])
def test_a_pushes_json_of_the_wrong_shape_on_the_hub_is_treated_as_absent(hub, tmp_path, caplog, text):
    first_session_pushes_step_4(hub, tmp_path / "first")
    HfApi(endpoint=hub.endpoint, token=TOKEN).upload_file(path_or_fileobj=text.encode(), path_in_repo="pushes.json", repo_id=REPO)

    caplog.set_level(logging.WARNING)
    store = make_store(hub, tmp_path / "second")  # a fresh disk: resumes from the Hub, pushes.json with it
    store.acquire("session-2")
    assert store.resume_point(log=lambda _: None).name == "step-00000004"
    store.publish(save(store.root, 8), final=True)  # the session's first save
    assert store.wait(timeout=30), store.pending()
    assert latest_on_hub(hub) == "step-00000008"
    assert any("pushes.json" in r.getMessage() and "treating it as absent" in r.getMessage() for r in caplog.records)
    store.release()
    store.close()


def test_a_latest_on_the_hub_that_is_not_text_is_treated_as_absent(hub, tmp_path):
    first_session_pushes_step_4(hub, tmp_path / "first")
    HfApi(endpoint=hub.endpoint, token=TOKEN).upload_file(path_or_fileobj=b"\xff\xfe\x00", path_in_repo="latest", repo_id=REPO)
    store = make_store(hub, tmp_path / "second")
    store.acquire("session-2")
    assert store.resume_point(log=lambda _: None).name == "step-00000004"  # the newest checkpoint on the Hub that verifies
    assert checkpoint.read_latest(store.root) == "step-00000004"
    store.release()
    store.close()
