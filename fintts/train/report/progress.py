"""The progress bar of one session: how far this session will get, and the time it has left.

A run's ``max_steps`` is no session's goal: a Kaggle session of 12 hours ends long before
a 100,000-step run does, and a bar of ``0/100000`` with a 30-hour ETA says nothing true.
The bar's total is therefore the step this session is predicted to end at — ``max_steps``
when the session has no time limit or will reach it, otherwise the current step plus the
steps that fit in the time left at the session's own pace so far (validations and
checkpoints included) — so its ETA is the session's remaining training time. Until the
first step is timed there is no prediction, and the bar shows a count without a total.
At the end the total is the step reached: the session is complete, whatever stopped it.
"""

from __future__ import annotations

import time
from typing import Protocol

from tqdm.auto import tqdm


class Clock(Protocol):
    """What the bar reads of the session's clock (:class:`~fintts.train.session.clock.SessionClock`, which a report
    below the session does not import): the seconds of training left, ``None`` without a limit."""

    def remaining(self) -> float | None: ...


def session_end_step(step: int, max_steps: int, seconds_left: float | None, seconds_per_step: float | None) -> int | None:
    """The step a session is predicted to stop at; ``None`` while its pace is unknown."""
    if seconds_left is None:
        return max_steps
    if not seconds_per_step:
        return None
    return min(max_steps, step + int(max(0.0, seconds_left) / seconds_per_step))


class SessionBar:
    """A tqdm bar from the session's first step to its predicted last, shown only when ``enabled``."""

    def __init__(self, *, step: int, max_steps: int, clock: Clock, enabled: bool, desc: str):
        self.clock, self.max_steps = clock, max_steps
        self.first_step, self.started = step, time.time()
        total = session_end_step(step, max_steps, clock.remaining(), None)
        self.bar = tqdm(total=total, initial=step, disable=not enabled, desc=desc, dynamic_ncols=True)

    def update(self, step: int, **postfix: str) -> None:
        left = self.clock.remaining()
        pace = (time.time() - self.started) / max(1, step - self.first_step)
        self.bar.total = session_end_step(step, self.max_steps, left, pace)
        self.bar.set_postfix(
            **postfix, left="∞" if left is None else time.strftime("%H:%M:%S", time.gmtime(max(0.0, left))), refresh=False
        )
        self.bar.update(step - self.bar.n)

    def close(self) -> None:
        self.bar.total = self.bar.n
        self.bar.close()
