"""The one decision after each step: which stop reason wins when several hold, and when a due checkpoint is saved."""

from __future__ import annotations

import torch

from fintts.train.decision import (
    FAILURES,
    FINISHED,
    PRECEDENCE,
    SAVES,
    STOPS,
    Decision,
    Flags,
    SaveReason,
    StopReason,
    already_over,
    decide,
    judge,
    reason_words,
)

CPU = torch.device("cpu")


def decided(**flags):
    return decide(Flags(**flags), rank=0, world=1, device=CPU)


def test_a_signal_in_the_step_that_finishes_the_run_does_not_make_it_paused():
    assert decided(signal="SIGTERM", early_stop=True).stop is StopReason.EARLY_STOPPING
    assert decided(signal="SIGINT", max_steps=True).stop is StopReason.MAX_STEPS
    assert decided(early_stop=True, max_steps=True).stop is StopReason.EARLY_STOPPING


def test_failures_come_first_then_the_run_finishing_then_signals_then_the_deadline():
    assert decided(out_of_memory=True, diverged=True, signal="SIGINT", deadline=True).stop is StopReason.OUT_OF_MEMORY
    assert decided(diverged=True, max_steps=True).stop is StopReason.DIVERGED
    assert decided(signal="SIGTERM", deadline=True).stop is StopReason.SIGTERM
    assert decided(deadline=True).stop is StopReason.DEADLINE
    assert PRECEDENCE.index(StopReason.VALIDATION_ERROR) == 0
    assert all(PRECEDENCE.index(f) < PRECEDENCE.index(d) for f in FAILURES for d in FINISHED)


def test_an_early_stop_before_the_last_phase_ends_the_phase_not_the_session():
    decision = decide(Flags(early_stop=True), rank=0, world=1, device=CPU, early_stop_ends_run=False)
    assert decision.stop is None and decision.early_stop


def test_a_due_checkpoint_is_saved_only_when_the_session_goes_on():
    assert decided(save_by_time=True).save is SaveReason.TIME and decided(save_by_steps=True).save is SaveReason.STEPS
    assert decided(save_by_time=True, save_by_steps=True).save is SaveReason.STEPS
    assert not decided(save_by_time=True, deadline=True).save  # the final save takes it
    assert not decided().save and decided().stop is None


def test_the_reasons_are_the_words_of_the_status():
    assert str(StopReason.OUT_OF_MEMORY) == "out_of_memory" and StopReason("deadline") is StopReason.DEADLINE


def test_every_reason_a_session_stops_or_saves_is_in_one_table_with_its_words():
    # the one place a reader finds why a session ended: each reason there once, with the line the session logs
    assert set(STOPS) == set(StopReason) and set(SAVES) == set(SaveReason)
    assert FAILURES == {StopReason.VALIDATION_ERROR, StopReason.OUT_OF_MEMORY, StopReason.DIVERGED, StopReason.DISK_FULL}
    assert FINISHED == {StopReason.EARLY_STOPPING, StopReason.MAX_STEPS}
    assert {r for r, stop in STOPS.items() if not stop.final_save} == {StopReason.DIVERGED, StopReason.DISK_FULL}
    assert Decision(stop=StopReason.MAX_STEPS).line(48) == "step 48: the session stops (max_steps): reached max_steps"
    assert Decision(stop=None, save=SaveReason.STEPS).line(5) == (
        "step 5: saving a checkpoint (checkpoint_every_steps): every checkpoint_every_steps steps")
    assert Decision(stop=None).line(7) is None
    assert reason_words("deadline") == StopReason.DEADLINE.words and reason_words("error: ValueError") == "error: ValueError"


def test_one_process_judges_the_run_s_end_the_deadline_and_a_due_checkpoint_from_what_it_saw():
    def judged(**seen):
        flags = Flags()
        judge(flags, **{"step": 10, "max_steps": 48, "diverged": False, "out_of_time": False, "steady": True,
                        "since_save": 0.0, "checkpoint_every": None, "checkpoint_every_steps": 0, **seen})
        return flags

    assert judged(step=48).max_steps and not judged().max_steps
    assert judged(out_of_time=True).deadline and judged(diverged=True).diverged
    assert judged(checkpoint_every_steps=5).save_by_steps and not judged(checkpoint_every_steps=4).save_by_steps
    assert judged(checkpoint_every=60.0, since_save=60.0).save_by_time and not judged(checkpoint_every=60.0).save_by_time
    # while steps are being skipped no checkpoint is due: latest stays the last good one
    assert not judged(steady=False, checkpoint_every_steps=5, checkpoint_every=1.0, since_save=9.0).save_by_steps


def test_a_run_that_ended_in_an_earlier_session_has_nothing_left_and_says_why():
    assert already_over(10, 48, stopped_early=False, patience=3, last_phase=True) is None
    assert already_over(48, 48, stopped_early=False, patience=3, last_phase=True) is StopReason.MAX_STEPS
    assert already_over(20, 48, stopped_early=True, patience=3, last_phase=True) is StopReason.EARLY_STOPPING
    # an early stop in an earlier phase ends that phase, not the run
    assert already_over(20, 48, stopped_early=True, patience=3, last_phase=False) is None
