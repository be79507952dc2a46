"""What a chain of sessions meets over weeks on Kaggle, each as a switch of the local Kaggle, and what ``fintts kaggle
run`` does about it: a login whose access token expires, a state that stays ``running``, a final push that did not
land while the version's output holds the checkpoint, a dataset Kaggle failed or deleted, a log it refuses.

Against the local Kaggle and Hub (:mod:`test_kaggle_cli`'s fixtures), the real ``kaggle`` client in ``fintts``
processes. Hours are played in seconds where a rule is about hours (:mod:`fintts_stand_ins.played_time`).
"""

from __future__ import annotations

import json
import os

import pytest
from test_kaggle_cli import KERNEL, REPO, kaggle_run, local_kaggle, run, status

from hub_helpers import export_model, latest_on_hub, save
from notebook_helpers import ROOT

#: every test here starts a process (a fintts command, a server's session, espeak-ng or ffmpeg): not the unit tier
pytestmark = pytest.mark.process

STAND_INS = ROOT / "tests" / "stand_ins"
#: ``--poll`` of the played chains: half an hour of Kaggle's time between two looks, 50 ms of the test's at SPEED
POLL, SPEED = 1800, 36000


@pytest.fixture
def kaggle_env(hub_env, tmp_path):
    """The local Kaggle and Hub, and the env of a laptop using them; REPO's notebook exists (test_kaggle_cli's fixture)."""
    yield from local_kaggle(hub_env, tmp_path, notebook_exists=True)


def logged_in(kaggle, env: dict, how: str) -> dict:
    """``env`` with only the credentials ``how`` (``key``, ``token`` or ``oauth``: :meth:`KaggleServer.env`) in it."""
    own = {name: value for name, value in env.items() if name not in ("KAGGLE_USERNAME", "KAGGLE_KEY", "KAGGLE_API_TOKEN")}
    return own | kaggle.env(how, home=env["HOME"])


def played_run(env: dict, cwd, *extra: str):
    """``fintts kaggle run`` on a clock SPEED times as fast while it waits (this checkout's stand-ins first on the path)."""
    env = env | {"PYTHONPATH": os.pathsep.join([str(STAND_INS), env["PYTHONPATH"]])}
    return run("-m", "fintts_stand_ins.played_time", str(SPEED), "kaggle", "run", "--config", "demo.yaml", "--hub-repo", REPO,
               "--poll", str(POLL), *extra, env=env, cwd=cwd)


def test_an_oauth_login_is_refreshed_when_kaggle_refuses_its_access_token(kaggle_env, tmp_path):
    # `kaggle auth login`: its access token's 12 hours end while session 1 trains, and the client's copy still looks valid
    kaggle, env, sessions = kaggle_env
    env = logged_in(kaggle, env, "oauth")
    credentials = tmp_path / "home" / ".kaggle" / "credentials.json"
    first = json.loads(credentials.read_text())["access_token"]
    sessions.start = lambda push, version: kaggle.expire_access_tokens() if version == 1 else None
    sessions.script += [(status("paused", 100, 1), True, "paused\n"), (status("finished", 300, 2, reason="max_steps"), True, "")]
    result = kaggle_run(env, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "the run is finished" in result.stdout and len(kaggle.pushes) == 2
    assert kaggle.calls["GenerateAccessToken"] == 1  # refreshed once, as the client refreshes, and then used
    renewed = json.loads(credentials.read_text())
    assert renewed["access_token"] != first and renewed["refresh_token"]
    assert first not in result.stdout + result.stderr and renewed["access_token"] not in result.stdout + result.stderr


@pytest.mark.parametrize("how", ["key", "token", "oauth"])
def test_credentials_kaggle_revoked_stop_with_what_to_do(kaggle_env, tmp_path, how):
    # nothing cures these: a key or API token expired on kaggle.com, a login whose refresh token was revoked
    kaggle, env, sessions = kaggle_env
    env = logged_in(kaggle, env, how)
    assert run("-m", "fintts", "kaggle", "status", "--hub-repo", REPO, env=env, cwd=tmp_path).returncode == 0
    kaggle.revoke()
    refused = run("-m", "fintts", "kaggle", "status", "--hub-repo", REPO, env=env, cwd=tmp_path)
    assert refused.returncode == 4, refused.stdout + refused.stderr
    assert ("401" in refused.stderr or how == "token") and "Authenticate again (kaggle auth login)" in refused.stderr
    assert "Generate New Token" in refused.stderr and "Traceback" not in refused.stderr
    assert kaggle.calls["GenerateAccessToken"] == (1 if how == "oauth" else 0)  # a login is refreshed once before it is given up


def test_a_state_that_stays_running_past_kaggles_limit_ends_the_session_as_failed_and_the_chain_goes_on(kaggle_env, tmp_path):
    # session 1 pushes its checkpoint, then hangs holding the run's lease, and Kaggle's state for it says running for good
    kaggle, env, sessions = kaggle_env
    sessions.leases, sessions.crashes = True, {1}
    kaggle.stay_running(1)
    sessions.script += [(status("paused", 100, 1), True, "paused\n"), (status("finished", 300, 2, reason="max_steps"), True, "")]
    result = played_run(env, tmp_path)
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert "session 1 failed: Kaggle still said running 13:" in out and "past Kaggle's 12 h session limit" in out
    assert ("session 1: the kernel still said running past Kaggle's 12 h limit and left the lease of session kernel-v1 on "
            f"hf://{REPO}: no session outlives that, so the lease is released") in out
    assert "the run is finished" in out and len(kaggle.pushes) == 2
    rows = [line.split() for line in out.splitlines() if line[:1].isdigit()]
    assert rows[0][-2] == "13.00"  # session 1 was waited for 12 h and the margin's hour (played), and no look longer


def chain_goes_on_from_session_2s_output(kaggle, hub_env, env, cwd) -> None:
    """The three sessions' chain, whose session 2 left step 200 only in its output: pushed from there, and finished."""
    result = kaggle_run(env, cwd)
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert (f"session 2: the newest checkpoint was not on the Hub: pushed step-00000200 (step 200) from the output of "
            f"{KERNEL}/2 on Kaggle") in out
    assert "failed" not in out and "the run is finished" in out and len(kaggle.pushes) == 3
    assert "checkpoints/step-00000200/MANIFEST.json" in hub_env.files(REPO) and latest_on_hub(hub_env, REPO) == "step-00000300"


def test_a_checkpoint_whose_final_push_did_not_land_is_pushed_from_the_versions_output_and_the_chain_goes_on(kaggle_env, hub_env,
                                                                                                            tmp_path):
    # session 2 saves step 200, its final push is refused and only its status lands; Kaggle keeps its /kaggle/working
    kaggle, env, sessions = kaggle_env
    working = tmp_path / "kaggle-working-2"

    def session_2_saves(push, version):
        if version == 2:
            run_folder = working / "runs" / "my-voice-run"
            for step in (100, 200):
                save(run_folder, step)
            export_model(run_folder, 200)
            (run_folder / "status.json").write_text(json.dumps(status("paused", 200, 2)))
            kaggle.keep_output(KERNEL, 2, working)

    sessions.start, sessions.refused = session_2_saves, {2}
    sessions.script += [(status("paused", 100, 1), True, "paused\n"), (status("paused", 200, 2), True, "paused\n"),
                        (status("finished", 300, 3, reason="max_steps"), True, "")]
    chain_goes_on_from_session_2s_output(kaggle, hub_env, env, tmp_path)


@pytest.mark.parametrize("where", ["kaggle", "elsewhere"])
def test_a_session_killed_before_its_final_push_is_pushed_from_the_versions_output_and_the_chain_goes_on(kaggle_env, hub_env,
                                                                                                         tmp_path, where):
    # session 2 pushed step 150 mid-session (status running), saved step 200 at its end and was killed before pushing it:
    # neither its final push nor its release reached the Hub, and Kaggle keeps its working folder, the run folder in it
    kaggle, env, sessions = kaggle_env
    working = tmp_path / "kaggle-working-2"
    run_folder = working / "runs" / "my-voice-run"
    # on Kaggle the session's paths are /kaggle/working's; a session whose working folder was another has that one's
    named = "/kaggle/working/runs/my-voice-run" if where == "kaggle" else str(run_folder)

    def session_2_saves(push, version):
        if version == 2:
            for step in (150, 200):
                save(run_folder, step)
            export_model(run_folder, 200)
            (run_folder / "status.json").write_text(json.dumps(as_named(status("running", 200, 2))))
            kaggle.keep_output(KERNEL, 2, working)

    def as_named(status_: dict) -> dict:
        return {**status_, "latest_checkpoint": status_["latest_checkpoint"].replace("/kaggle/working/runs/my-voice-run", named)}

    sessions.start = session_2_saves
    sessions.script += [(status("paused", 100, 1), True, "paused\n"), (as_named(status("running", 150, 2)), True, "killed\n"),
                        (status("finished", 300, 3, reason="max_steps"), True, "")]
    chain_goes_on_from_session_2s_output(kaggle, hub_env, env, tmp_path)


def test_a_checkpoint_the_versions_output_lacks_stops_the_chain_saying_how_to_push_it(kaggle_env, tmp_path):
    # as above, but Kaggle kept no output of the version (it did not complete, or it was not kept)
    kaggle, env, sessions = kaggle_env
    sessions.refused = {2}
    sessions.script += [(status("paused", 100, 1), True, "paused\n"), (status("paused", 200, 2), True, "paused\n")]
    result = kaggle_run(env, tmp_path)
    out = result.stdout
    assert result.returncode == 1 and len(kaggle.pushes) == 2, out + result.stderr
    assert f"could not be pushed from the output of {KERNEL}/2: the output of {KERNEL}/2 holds no complete checkpoint" in out
    assert f"kaggle kernels output {KERNEL} -p OUT" in out and "fintts push --store OUT/runs/my-voice-run" in out


@pytest.mark.parametrize("state", ["FAILED", "DELETED"])
def test_a_dataset_kaggle_failed_or_deleted_stops_the_push_at_once_with_the_reason(kaggle_env, tmp_path, state):
    kaggle, env, sessions = kaggle_env
    kaggle.dataset_state("alice/my-voice", state)
    result = run("-m", "fintts", "kaggle", "run", "--corpus", "alice/my-voice", "--hub-repo", REPO, "--poll", "0.1",
                 env=env, cwd=tmp_path, timeout=60)
    assert result.returncode == 4 and not kaggle.pushes, result.stdout + result.stderr
    assert f"the dataset alice/my-voice is {state.lower()} on Kaggle" in result.stderr
    assert "upload it again with fintts kaggle corpus" in result.stderr
    # is there a token dataset (and is it private: GetDataset), the wheels, the corpus: each read once, none waited on
    assert kaggle.calls["GetDatasetStatus"] + kaggle.calls["GetDataset"] == 3


def test_a_log_kaggle_refuses_after_a_failed_session_leaves_the_verdict_as_it_is(kaggle_env, tmp_path):
    kaggle, env, sessions = kaggle_env
    failed = status("failed", 0, 1, reason="RuntimeError: CUDA error: an illegal memory access was encountered")
    sessions.script += [(failed, False, "Traceback (most recent call last):\n")] * 2
    kaggle.fail(403, method="ListKernelSessionOutput", times=10)
    result = kaggle_run(env, tmp_path)
    out = result.stdout
    assert result.returncode == 1 and len(kaggle.pushes) == 2, out + result.stderr
    assert "stopped: 2 sessions in a row failed (the run failed: RuntimeError: CUDA error" in out
    assert "End of the last session's log:\n(the session's log could not be read: cannot read the log of" in out
