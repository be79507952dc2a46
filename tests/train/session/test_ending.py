"""What a session's end says of the run: the status its stop reason leaves for the next session and for a person."""

from __future__ import annotations

import pytest

from fintts.train.decision import StopReason
from fintts.train.session.ending import final_state

LEAVES = {
    StopReason.VALIDATION_ERROR: "failed", StopReason.OUT_OF_MEMORY: "failed", StopReason.DIVERGED: "failed",
    StopReason.DISK_FULL: "failed",
    StopReason.EARLY_STOPPING: "finished", StopReason.MAX_STEPS: "finished",  # the run is done: no next session
    StopReason.SIGINT: "paused", StopReason.SIGTERM: "paused", StopReason.DEADLINE: "paused",  # the next one goes on
}


def test_every_stop_reason_leaves_the_run_failed_finished_or_paused():
    assert set(LEAVES) == set(StopReason)  # a new reason is given a status here too


@pytest.mark.parametrize("reason", list(StopReason), ids=str)
def test_a_sessions_stop_reason_leaves_the_run_in_the_status_a_chain_of_sessions_acts_on(reason):
    assert final_state(reason) == LEAVES[reason]
