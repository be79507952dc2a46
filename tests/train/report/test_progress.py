"""The progress bar of a session, as a person reads it in a terminal or a Kaggle log.

What each test needs is counted, not timed: the budget test asks only what holds however many steps the machine had
time for (one on a busy machine, hundreds on a quiet one); the test that reads the bar while it trains gets its steps
from ``max_steps``, with a budget far past them for the time left to count down from."""

from __future__ import annotations

import re

import pytest

from fintts.train.report.progress import session_end_step
from trainer_helpers import cli, write_config

BAR = re.compile(r"(\d+)/(\d+) \[[^\]]*left=(\d\d:\d\d:\d\d)")


def bars(stderr: str) -> list[tuple[int, int, str]]:
    """Each state of the bar a terminal showed: (step, the bar's total, the time left)."""
    return [(int(done), int(total), left) for done, total, left in BAR.findall(stderr.replace("\r", "\n"))]


@pytest.mark.process
def test_the_bar_counts_to_where_the_session_ends_with_its_time_left_not_to_max_steps(tmp_path):
    config = write_config(tmp_path, max_steps=1_000_000, step_delay=0.02, eval_every=25, checkpoint_every_steps=0)
    result = cli("train", str(config), "--store", str(tmp_path / "store"), "--budget", "20s", cwd=tmp_path, timeout=60)
    assert result.returncode == 0, result.stderr
    shown = bars(result.stderr)
    assert shown, result.stderr
    assert max(total for _, total, _ in shown) < 1000, "the bar's total is the session's end, not the run's 1,000,000 steps"
    done, total, left = shown[-1]
    assert done == total and left == "00:00:00"  # the session is complete when its bar is


@pytest.mark.process
def test_while_training_the_bars_end_is_ahead_of_its_step_and_its_time_left_falls(tmp_path):
    config = write_config(tmp_path, max_steps=120, step_delay=0.03, eval_every=25, checkpoint_every_steps=0)
    result = cli("train", str(config), "--store", str(tmp_path / "store"), "--budget", "1h", cwd=tmp_path, timeout=240)
    assert result.returncode == 0, result.stderr
    shown = bars(result.stderr)
    assert shown[-1][:2] == (120, 120), result.stderr  # the steps it was given, all taken
    assert all(total >= done for done, total, _ in shown)
    steps_left = [left for done, _, left in shown if done < 120]
    # 120 steps of at least 30 ms: 3.6 s or more between the first step and the last, a second of the clock passed
    assert steps_left[0] > steps_left[-1], result.stderr


def test_the_predicted_end_is_the_steps_that_fit_in_the_time_left_at_the_sessions_pace():
    assert session_end_step(10, 1_000_000, seconds_left=100.0, seconds_per_step=0.5) == 210
    assert session_end_step(10, 50, seconds_left=100.0, seconds_per_step=0.5) == 50  # max_steps comes first
    assert session_end_step(10, 1_000_000, seconds_left=-3.0, seconds_per_step=0.5) == 10  # past the end: here
    assert session_end_step(10, 1_000_000, seconds_left=100.0, seconds_per_step=None) is None  # no pace yet: no total
    assert session_end_step(10, 1_000_000, seconds_left=None, seconds_per_step=0.5) == 1_000_000  # no time limit
