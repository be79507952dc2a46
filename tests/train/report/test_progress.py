"""The progress bar of a session, as a person reads it in a terminal or a Kaggle log."""

from __future__ import annotations

import re

from trainer_helpers import cli, write_config

BAR = re.compile(r"(\d+)/(\d+) \[[^\]]*left=(\d\d:\d\d:\d\d)")


def test_the_bar_counts_to_where_the_session_ends_with_its_time_left_not_to_max_steps(tmp_path):
    config = write_config(tmp_path, max_steps=1_000_000, step_delay=0.02, eval_every=25, checkpoint_every_steps=0)
    result = cli("train", str(config), "--store", str(tmp_path / "store"), "--budget", "20s", cwd=tmp_path, timeout=60)
    assert result.returncode == 0, result.stderr
    shown = [tuple(m.groups()) for m in BAR.finditer(result.stderr.replace("\r", "\n"))]
    assert len(shown) > 3, result.stderr
    totals = [int(total) for _, total, _ in shown]
    assert max(totals) < 1000, "the bar's total is the session's end, not the run's 1,000,000 steps"
    done, total, left = shown[-1]
    assert done == total and left == "00:00:00"  # the session is complete when its bar is
    # while training, the predicted end is ahead of the step, and the time left falls
    middle = shown[: len(shown) // 2]
    assert all(int(total) >= int(done) for done, total, _ in middle)
    assert middle[0][2] > middle[-1][2]
