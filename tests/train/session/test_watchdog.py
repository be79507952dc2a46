"""The watchdog's own rules: when a session of one process has none, and how long a collective waits once steps are
measured (the first bound, before any step: test_collective_bound.py)."""

from __future__ import annotations

import time

from fintts.train.session.clock import SessionClock, StopRequest
from fintts.train.session.watchdog import GAP_FACTOR, PEER_EXITS_VARIABLE, collective_timeout, start


class Unwatched:
    """A session that must never be ended here: the test fails if the watchdog tries."""

    def where(self) -> str:
        return "nowhere"

    def overrun(self, error: BaseException) -> None:
        raise AssertionError(f"the watchdog ended the session: {error}")


def test_a_session_of_one_process_has_no_watchdog_which_could_end_the_notebook_kernel_it_runs_in(monkeypatch):
    monkeypatch.delenv(PEER_EXITS_VARIABLE, raising=False)
    hour = SessionClock(start=time.time(), limit=3600)
    found = [start(Unwatched(), clock=hour, stop=StopRequest(), log=print, world=1),
             # several processes started by torchrun (no launcher of ours to tell of a peer) and no limit: nothing to watch
             start(Unwatched(), clock=SessionClock(start=time.time(), limit=None), stop=StopRequest(), log=print, world=2)]
    for watchdog in found:
        if watchdog is not None:  # stood down before it could end this process (it would end it with os._exit)
            watchdog.stand_down()
    assert found == [None, None]


def test_a_collective_waits_a_few_of_the_longest_stretches_between_votes_never_less_than_its_floor_nor_past_the_session():
    assert GAP_FACTOR == 4.0
    assert collective_timeout(300.0, 100.0, None) == 400.0  # four of the longest stretch
    assert collective_timeout(300.0, 10.0, None) == 300.0  # the floor: room for a first checkpoint or validation
    assert collective_timeout(300.0, 100.0, 350.0) == 350.0  # never past the session's limit
    assert collective_timeout(3.0, 0.5, None) == 3.0  # a collective_timeout that is set is the floor
