"""The one decision after each step: which stop reason wins when several hold, and when a due checkpoint is saved."""

from __future__ import annotations

import torch

from fintts.train.decision import FAILURES, FINISHED, PRECEDENCE, Flags, StopReason, decide

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
    assert decided(save_by_time=True).save and decided(save_by_steps=True).save
    assert not decided(save_by_time=True, deadline=True).save  # the final save takes it
    assert not decided().save and decided().stop is None


def test_the_reasons_are_the_words_of_the_status():
    assert str(StopReason.OUT_OF_MEMORY) == "out_of_memory" and StopReason("deadline") is StopReason.DEADLINE
