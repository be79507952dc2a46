"""The retry schedule every remote loop shares (fintts/train/retry.py): doubling, capped, at any count of failures."""

from __future__ import annotations

from fintts.train.retry import Backoff


def test_the_wait_doubles_up_to_its_cap_and_stays_there_however_many_failures_came_before():
    backoff = Backoff(base=5.0, cap=300.0, jitter=0.0)
    assert [backoff.delay(n) for n in (1, 2, 3, 4)] == [5.0, 10.0, 20.0, 40.0]
    # a long outage retried at short waits counts thousands of failures: the wait is the cap, not an OverflowError that
    # ends the thread retrying
    assert backoff.delay(2_000) == backoff.delay(100_000) == 300.0
    assert Backoff(base=0.01, cap=0.05, jitter=0.0).delay(5_000) == 0.05


def test_a_services_retry_after_wins_when_longer_up_to_its_own_cap():
    backoff = Backoff(base=5.0, cap=300.0, jitter=0.0, retry_after_cap=3600.0)
    assert backoff.delay(1, retry_after=120.0) == 120.0
    assert backoff.delay(1, retry_after=10_000.0) == 3600.0
    assert backoff.delay(9, retry_after=1.0) == 300.0
