"""The Hub store's publisher on its own: what it pushes after an outage, and what a final wait says of a refusal.

The pushes are the store's (given to the publisher as callables); here they are recorded, and fail as the test says."""

from __future__ import annotations

import threading

from fintts.train.retry import Backoff
from fintts.train.stores.hub.errors import HubError, HubUnavailable
from fintts.train.stores.hub.publisher import Publisher, Target

QUICK = Backoff(base=0.01, cap=0.05, jitter=0.0)


def publisher(push, *, push_every: float = 0.0) -> Publisher:
    return Publisher(push=push, heartbeat=lambda: None, after_push=lambda target: None,
                     classify=lambda err: err if isinstance(err, HubError) else HubError(str(err)),
                     push_every=push_every, heartbeat_every=3600.0, backoff=QUICK, label="test")


def test_after_an_outage_one_push_catches_up_with_the_newest_checkpoint_and_skips_those_between():
    tried: list[str] = []
    pushing, newer_published = threading.Event(), threading.Event()

    def push(target: Target) -> None:
        tried.append(target.name)
        pushing.set()
        if target.name == "step-00000100":  # the Hub is down while it is pushed, and the training goes on meanwhile
            assert newer_published.wait(10)
            raise HubUnavailable("503 Service Unavailable")

    hub = publisher(push)
    try:
        hub.publish("step-00000100", lambda: None, final=False)
        assert pushing.wait(10)
        hub.publish("step-00000200", lambda: None, final=False)
        hub.publish("step-00000300", lambda: None, final=True)
        newer_published.set()
        assert hub.wait(timeout=10)
    finally:
        hub.close()
    assert tried == ["step-00000100", "step-00000300"]  # one commit after the outage, of the newest
    assert hub.last_error is None


def test_a_final_wait_does_not_outlast_a_refusal_of_the_checkpoint_it_waits_for():
    refused = threading.Event()

    def push(target: Target) -> None:
        refused.set()
        raise HubError("413 Payload Too Large")  # not transient: the Hub refused this commit

    hub = Publisher(push=push, heartbeat=lambda: None, after_push=lambda target: None, classify=lambda err: err,
                    push_every=0.0, heartbeat_every=3600.0, backoff=Backoff(base=60.0, cap=60.0, jitter=0.0), label="test")
    try:
        hub.publish("step-00000100", lambda: None, final=True)
        assert refused.wait(10)
        looked: list[int] = []
        assert hub.wait(timeout=30, interrupted=lambda: bool(looked.append(1))) is False
        assert looked == []  # said at once, before a single round of waiting (the retry is a minute away)
        assert "413" in hub.last_error and hub.busy() == {"step-00000100"}  # still due, still kept on disk
    finally:
        hub.close(timeout=0.0)


def test_a_failure_that_cannot_be_described_is_tried_again_and_pushing_goes_on():
    """Whatever a push raises, and whatever describing it raises, the pushing thread lives: the next try lands."""
    tried: list[str] = []

    def push(target: Target) -> None:
        tried.append(target.name)
        if len(tried) == 1:
            raise ValueError("an error nobody expected")

    def classify(err: BaseException) -> HubError:
        if isinstance(err, ValueError):
            raise RuntimeError("and describing it failed too")
        return HubError(str(err))

    hub = Publisher(push=push, heartbeat=lambda: None, after_push=lambda target: None, classify=classify, push_every=0.0,
                    heartbeat_every=3600.0, backoff=QUICK, label="test")
    try:
        hub.publish("step-00000100", lambda: None, final=True)
        assert hub.wait(timeout=10), hub.last_error
        assert tried == ["step-00000100", "step-00000100"] and hub.last_error is None
    finally:
        hub.close()
