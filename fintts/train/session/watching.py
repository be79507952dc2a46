"""The session's side of :mod:`fintts.train.session.watchdog`: the process group's first timeout, the watchdog started and stood down.

Only with several processes is the main one's clock watched from a thread: a single
process may be the notebook's own kernel, which the watchdog would end.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from accelerate.utils import InitProcessGroupKwargs

from fintts.train.session.watchdog import CollectiveBound, SessionWatchdog

if TYPE_CHECKING:  # the facts are built with this module's process group settings
    from fintts.train.session.facts import SessionFacts


def process_group_settings(bound: CollectiveBound) -> list[InitProcessGroupKwargs]:
    """The process group's timeout until the steps are measured (see :class:`~fintts.train.session.watchdog.CollectiveBound`):
    ``collective_timeout``, or (``auto``) the session's limit (torch's default without one)."""
    seconds = bound.initial
    return [InitProcessGroupKwargs(timeout=datetime.timedelta(seconds=seconds))] if seconds else []


def watch_the_end(facts: SessionFacts, overrun: Callable[[BaseException], None], where: Callable[[], str]) -> SessionWatchdog | None:
    """With several processes, the main one's clock watched from a thread (started here); ``None`` with one, or no limit."""
    if facts.world > 1 and facts.clock.end is not None:
        watchdog = SessionWatchdog(facts.clock, facts.stop, overrun, where, facts.log)
        watchdog.start()
        return watchdog
    return None


def own_end(watchdog: SessionWatchdog | None) -> None:
    """The main thread ends the session, unless the watchdog took the end: then it leaves it the process."""
    if watchdog is not None and not watchdog.stand_down():
        watchdog.join()


def where(step: int | None, began: float | None, mean_step: float) -> str:
    """Where training stands, for the watchdog's error: ``step`` done, the next one ``began`` (``None``: not yet)."""
    if began is None or step is None:
        return "the session was still setting up"
    return (f"step {step + 1} began {time.time() - began:.0f} s ago"
            + (f" (steps took {mean_step:.1f} s)" if mean_step else "") + ": a process hung, or this step is far slower than measured")

