"""The laptop's clock as ``fintts kaggle run`` reads it: passed in, so that a test plays Kaggle's hours in seconds.

A chain of sessions lives by hours: a session's 12-hour limit, a dataset's minutes of processing, the minute between
two looks at a session. Its rules about them (a state that stays ``running`` past the limit, a dataset still
processing after 15 minutes) are tested as they are met, not assumed: :func:`~fintts.kaggle.sessions.run_sessions`
reads the time and waits only through the :class:`Clock` it is given, the system's from the command line, and one
whose waits are short and whose time jumps ahead by what was waited in the tests
(``tests/stand_ins/fintts_stand_ins/played_time.py``). Requests' own time-outs and retries' backoffs stay on the
system's clock: they are seconds, and a stand-in server answers them in real time.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable


@dataclasses.dataclass(frozen=True)
class Clock:
    """``now()``: seconds since the epoch; ``sleep(seconds)``: wait that long."""

    now: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep


#: The system's clock: what the command line runs on.
SYSTEM_CLOCK = Clock()
