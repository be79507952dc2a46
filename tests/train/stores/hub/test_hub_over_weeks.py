"""What a run that lasts weeks meets on the Hub (issue 53, items 3 and 6): a gateway's error page at the final push,
which failures are retried and which need a person, and the account's plan at a session's start. The real
``huggingface_hub`` and ``hf_xet`` against the local Hub stand-in; the classifier alone where it is pure."""

from __future__ import annotations

import logging
import time

import httpx2
import pytest
from huggingface_hub import CommitOperationAdd, HfApi, constants
from huggingface_hub.utils import hf_raise_for_status

from fintts.train.config import ConfigError, load_config
from fintts.train.session.store_choice import store_for
from fintts.train.stores import StoreError
from fintts.train.stores.hub import HubClient
from fintts.train.stores.hub.errors import HubAuthError, HubError, HubRefused, HubRepoError, HubStorageFull, HubUnavailable, classify
from fintts.train.stores.hub.plan import FREE, PRO, UNKNOWN, plan_of
from hub_helpers import FAST, REPO, TOKEN, latest_on_hub, make_store, save
from trainer_helpers import write_config

GB = 10**9
CARD = "---\nlicense: mit\nlanguage:\n- fi\n---\n\n# a voice\n\nstep {step}\n"


def _classified(err: BaseException) -> HubError:
    return classify(err, token=TOKEN, endpoint="http://hub", repo_id=REPO)


# ---------------------------------------------------------------- item 3: a gateway's 502 at the final push


@pytest.mark.parametrize("path", ["/api/validate-yaml", "/commit/"], ids=["before-the-commit", "the-commit"])
def test_the_final_push_survives_a_gateways_html_502(hub, tmp_path, path):
    """``create_commit`` asks ``/api/validate-yaml`` first for a commit carrying the card and reads its answer as JSON
    before its status: a gateway's HTML 502 there was a JSONDecodeError, taken for a refusal, and the final wait gave up."""
    store = make_store(hub, tmp_path / "run")
    store.root.mkdir(parents=True, exist_ok=True)
    (store.root / "README.md").write_text(CARD.format(step=1))
    store.acquire("session-a")
    store.publish(save(store.root, 1))
    assert store.wait(timeout=30), store.problem()  # the card's metadata passed the Hub's validator once this session
    (store.root / "README.md").write_text(CARD.format(step=2))  # a new page: the final push carries it
    hub.fail(502, path=path, gateway=True)
    store.publish(save(store.root, 2), final=True)
    assert store.wait(timeout=30), store.problem()
    assert latest_on_hub(hub) == "step-00000002"
    assert b"step 2" in hub.files(REPO)["README.md"]
    assert [r.status for r in hub.requests if path in r.path].count(502) == 1  # the gateway's page was met, once
    store.release()
    store.close()


# ---------------------------------------------------------------- item 3: what is retried, what needs a person


def _answer(status: int, **kwargs) -> httpx2.Response:
    return httpx2.Response(status, request=httpx2.Request("POST", f"http://hub/api/models/{REPO}/commit/main"), **kwargs)


def _raised(response: httpx2.Response) -> BaseException:
    try:
        hf_raise_for_status(response)  # the client's own mapping of an answer to its error classes
    except Exception as err:
        return err
    raise AssertionError("no error raised")


@pytest.mark.parametrize("status", [500, 501, 502, 504, 507, 520, 530, 408, 425, 429])
def test_every_server_error_and_not_now_answer_passes(status):
    gateway = _classified(_raised(_answer(status, headers={"Content-Type": "text/html"}, text="<html>oops</html>")))
    hub_own = _classified(_raised(_answer(status, json={"error": "Internal Error"})))
    assert gateway.transient and hub_own.transient and isinstance(gateway, HubUnavailable)
    assert "gateway" in str(gateway) and "gateway" not in str(hub_own)


@pytest.mark.parametrize("status", [400, 413, 422])
def test_a_request_the_hub_refuses_is_a_refusal(status):
    failure = _classified(_raised(_answer(status, json={"error": "no"})))
    assert isinstance(failure, HubRefused) and not failure.transient


class _Surprise(Exception):
    """A failure of a type nobody has seen yet (a new client version's, a library's bug)."""


def test_an_exception_of_an_unknown_type_is_retried_until_the_deadline():
    client = HubClient(REPO, endpoint="http://127.0.0.1:9", token=TOKEN, timeout=1)
    client.deadline = time.time() + 1.0
    calls = []

    def call() -> None:
        calls.append(1)
        raise _Surprise("something new")

    with pytest.raises(HubError, match="no time left in this session") as raised:
        client.retrying("push", call, attempts=10_000, backoff=FAST, on_retry=lambda _: None)
    assert raised.value.transient and "_Surprise: something new" in str(raised.value)
    assert len(calls) > 2  # tried again and again until the session's end, not given up at once


def test_an_unreadable_answer_is_retried_and_then_succeeds():
    client = HubClient(REPO, endpoint="http://127.0.0.1:9", token=TOKEN, timeout=1)
    calls = []

    def call() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise _Surprise("first")
        if len(calls) == 2:
            _answer(502, headers={"Content-Type": "text/html"}, text="<html>502</html>").json()  # JSONDecodeError
        return "landed"

    assert client.retrying("commit", call, attempts=5, backoff=FAST, on_retry=lambda _: None) == "landed"
    assert len(calls) == 3


def _commit(api: HfApi, repo: str = REPO, readme: bytes = b"# a voice\n", size: int = 100) -> None:
    operations = [CommitOperationAdd("README.md", readme), CommitOperationAdd("model.safetensors", b"w" * size)]
    api.create_commit(repo, operations, commit_message="push")


@pytest.mark.parametrize(
    "case, kind",
    [("token", HubAuthError), ("permission", HubAuthError), ("repo", HubRepoError), ("card", HubRefused),
     ("quota", HubStorageFull)],
)
def test_a_refusal_is_not_retried(hub, case, kind):
    """A rejected token (401), no permission (403), a missing repo (404), a card refused as invalid, a full quota."""
    HfApi(endpoint=hub.endpoint, token=TOKEN).create_repo(REPO, private=True)
    api = HfApi(endpoint=hub.endpoint, token="hf_" + "x" * 34 if case == "token" else TOKEN)
    repo, readme, size = REPO, b"# a voice\n", 100
    if case == "permission":
        hub.scope_token(["fintts-tester/another-voice"])
    elif case == "repo":
        repo = "fintts-tester/no-such-voice"
    elif case == "card":
        readme = b"---\nlicense: my-own-licence\n---\n# a voice\n"
    elif case == "quota":
        hub.storage_limit, size = 1000, 5000
    client = HubClient(REPO, endpoint=hub.endpoint, token=TOKEN, timeout=5)
    calls = []

    def call() -> None:
        calls.append(1)
        _commit(api, repo, readme, size)

    with pytest.raises(kind) as raised:
        client.retrying("push", call, attempts=5, backoff=FAST, on_retry=lambda _: None)
    assert len(calls) == 1 and not raised.value.transient and TOKEN not in str(raised.value)


@pytest.mark.parametrize("status, says", [(404, "does not know"), (400, "refused the request")])
def test_xet_storage_404_and_400_mean_what_they_mean(xet_hub, status, says):
    api = HfApi(endpoint=xet_hub.endpoint, token=TOKEN)
    api.create_repo(REPO, private=True)
    xet_hub.fail_xet(status, times=5)
    with pytest.raises(Exception) as raised:
        _commit(api, size=64_000)  # large: through hf_xet to the stand-in's CAS
    failure = _classified(raised.value)
    assert isinstance(failure, HubRefused) and not failure.transient, failure
    assert says in str(failure) and f"({status} " in str(failure)


def test_xet_storage_that_is_down_still_passes(xet_hub):
    api = HfApi(endpoint=xet_hub.endpoint, token=TOKEN)
    api.create_repo(REPO, private=True)
    xet_hub.fail_xet(503, times=5)
    with pytest.raises(Exception) as raised:
        _commit(api, size=64_000)
    assert isinstance(_classified(raised.value), HubUnavailable) and _classified(raised.value).transient


# ---------------------------------------------------------------- item 6: the account's plan at a session's start


@pytest.mark.parametrize(
    "whoami, namespace, plan",
    [
        ({"type": "user", "name": "anna", "isPro": True, "orgs": []}, "anna", PRO),
        ({"type": "user", "name": "anna", "isPro": False, "orgs": []}, "anna", FREE),
        ({"type": "user", "name": "anna", "orgs": []}, "anna", UNKNOWN),  # an answer that does not say
        ({"type": "user", "name": "anna", "isPro": True, "orgs": [{"name": "lab", "plan": "team"}]}, "lab", "Team"),
        ({"type": "user", "name": "anna", "isPro": True, "orgs": [{"name": "lab", "plan": "enterprise"}]}, "lab", "Enterprise"),
        ({"type": "user", "name": "anna", "isPro": True, "orgs": [{"name": "lab"}]}, "lab", UNKNOWN),  # plan deprecated, left out
        ({"type": "user", "name": "anna", "isPro": True, "orgs": []}, "someone-else", UNKNOWN),
        (None, "anna", UNKNOWN),
    ],
)
def test_the_plan_is_read_where_whoami_says_it(whoami, namespace, plan):
    found = plan_of(whoami, namespace)
    assert found == plan if not isinstance(plan, str) else (found.name == plan and found.limit_gb == 1000 and not found.refuses)


@pytest.mark.parametrize("account", ["pro-user", "team-org"])
def test_a_paying_account_past_100_gb_is_not_refused(hub, tmp_path, caplog, account):
    caplog.set_level(logging.WARNING)
    repo = REPO if account == "pro-user" else "voice-lab/finnish-voice"
    hub.set_plan(pro=account == "pro-user", orgs={"voice-lab": "team"})
    hub.occupy(repo.split("/")[0] + "/older-runs", 150 * GB)  # more than a free account's 100 GB
    store = make_store(hub, tmp_path / "run", repo=repo)
    store.acquire("session-a")
    assert "lease.json" in hub.files(repo)
    assert not [r for r in caplog.records if "GB" in r.getMessage()], [r.getMessage() for r in caplog.records]
    store.release()
    store.close()


@pytest.mark.parametrize("answer", ["without-isPro", "whoami-fails"])
def test_an_unknown_plan_warns_and_does_not_refuse(hub, tmp_path, caplog, answer):
    caplog.set_level(logging.WARNING)
    if answer == "without-isPro":
        hub.set_plan(pro=None)
    else:
        hub.fail(429, path="/api/whoami-v2", times=5)  # "heavily rate-limited"
    hub.occupy("fintts-tester/older-runs", 150 * GB)
    store = make_store(hub, tmp_path / "run")
    store.acquire("session-a")
    assert "lease.json" in hub.files(REPO)
    warned = [r.getMessage() for r in caplog.records if "did not say the account's plan" in r.getMessage()]
    assert len(warned) == 1 and "150.0 GB" in warned[0] and "storage_limit_gb" in warned[0], warned
    store.release()
    store.close()


def test_an_older_free_account_past_its_limit_is_warned_not_refused(hub, tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    hub.occupy("fintts-tester/older-runs", 150 * GB)  # held before the limits came: the Hub keeps it
    store = make_store(hub, tmp_path / "run")
    store.acquire("session-a")
    assert "lease.json" in hub.files(REPO)
    assert any("older than the limits" in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]
    store.release()
    store.close()


def test_a_free_account_whose_next_pushes_would_not_fit_is_refused(hub, tmp_path):
    store = make_store(hub, tmp_path / "run")
    store.acquire("session-a")
    store.publish(save(store.root, 1, size=64_000), final=True)
    assert store.wait(timeout=30)
    store.release()
    store.close()
    used = hub.used_storage(REPO)
    hub.occupy("fintts-tester/older-runs", 100 * GB - used - 1000)  # within 100 GB, but not two more pushes
    again = make_store(hub, tmp_path / "run")
    with pytest.raises(StoreError, match=r"a free account has 100 GB.*Free space.*storage_limit_gb"):
        again.acquire("session-b")
    again.close()


def test_the_person_sets_the_limit_in_the_config(hub_env, tmp_path, monkeypatch):
    hub = hub_env
    monkeypatch.setattr(constants, "ENDPOINT", hub.endpoint)  # what HF_ENDPOINT sets when huggingface_hub is imported
    hub.set_plan(pro=True)
    hub.occupy("fintts-tester/older-runs", 150 * GB)
    config = write_config(tmp_path)
    settings = load_config(config, [f"hub_repo={REPO}", f"store={tmp_path / 'run'}", "storage_limit_gb=120"]).train
    store = store_for(settings)
    with pytest.raises(StoreError, match=r"storage_limit_gb is 120 GB"):  # the person's number is sure: refused
        store.acquire("session-a")
    store.close()
    assert "lease.json" not in hub.files(REPO)
    with pytest.raises(ConfigError, match="storage_limit_gb: must be 0"):
        load_config(config, ["storage_limit_gb=-1"])
