"""How long a collective may wait before any step is measured: minutes, never the session's whole budget."""

from __future__ import annotations

import datetime

from fintts.train.session.watchdog import FIRST_COLLECTIVE, CollectiveBound, first_timeout, process_group_settings

TWELVE_HOURS = 12 * 3600.0


def test_before_any_step_is_measured_a_collective_waits_minutes_not_the_session():
    bound = CollectiveBound("auto", TWELVE_HOURS)
    assert bound.initial == FIRST_COLLECTIVE == 600.0  # a process lost in the first minute costs 10 minutes, not 12 hours
    assert process_group_settings(bound)[0].timeout == datetime.timedelta(seconds=FIRST_COLLECTIVE)  # the group's start too


def test_the_first_bound_is_never_past_the_session_and_is_kept_without_a_limit():
    assert first_timeout("auto", 45.0) == 45.0
    assert first_timeout("auto", None) == FIRST_COLLECTIVE  # not torch's default (30 min on gloo)
    assert first_timeout(None, None) == FIRST_COLLECTIVE  # collective_timeout: none reads as auto


def test_a_collective_timeout_that_is_set_is_the_first_bound_too():
    assert first_timeout(3.0, TWELVE_HOURS) == 3.0
    assert CollectiveBound(3.0, None).initial == 3.0
