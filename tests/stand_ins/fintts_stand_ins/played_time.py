"""Kaggle's hours played in seconds: ``fintts kaggle run`` on a clock whose waits are short and whose time jumps ahead.

What a chain meets over days — a state that says ``running`` past Kaggle's 12-hour limit, a dataset processing for
minutes — must be tested as it is met, not assumed, and a test cannot wait 13 hours. ``fintts kaggle run`` reads the
time and waits only through the :class:`fintts.kaggle.clock.Clock` it is given (the system's from the command line);

    python -m fintts_stand_ins.played_time SPEED kaggle run --hub-repo ... --poll 1800

runs that very command, parsed by fintts's own parser, with :func:`played` as its clock: each wait of ``s`` seconds
takes ``s / SPEED`` and moves the clock ``s`` ahead, so ``--poll 1800`` at a speed of 36000 is half an hour of Kaggle's
time every 50 ms. The process is a new one, as a person's is: the ``kaggle`` client reads its environment when it is
first imported (``KaggleApi.args``), so it cannot be pointed at a stand-in from inside a test process.

A chain whose sessions really train cannot be played at one speed: their seconds are real, and a clock fast enough to
play 13 hours of a stuck session in seconds would count each real session past Kaggle's limit too. With ``@FILE`` for
SPEED the command runs on :func:`warped` instead: on the system's time while ``FILE`` is absent; once the test writes a
number N there, each wait takes as long as it says and moves the clock N times as far (until the test removes it).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

from fintts.kaggle.clock import Clock


def played(speed: float) -> Clock:
    """A clock that runs ``speed`` times as fast as the system's while it waits, and at its pace otherwise."""
    ahead = [0.0]  # seconds this clock is ahead of the system's

    def sleep(seconds: float) -> None:
        real = seconds / speed
        time.sleep(real)
        ahead[0] += seconds - real

    return Clock(now=lambda: time.time() + ahead[0], sleep=sleep)


def warped(factor: Callable[[], float]) -> Clock:
    """A clock whose waits take as long as they say and move it ``factor()`` times as far (read as each wait ends)."""
    ahead = [0.0]

    def sleep(seconds: float) -> None:
        time.sleep(seconds)
        ahead[0] += seconds * (factor() - 1.0)

    return Clock(now=lambda: time.time() + ahead[0], sleep=sleep)


def factor_in(path: Path) -> Callable[[], float]:
    """The number in ``path`` (1 while there is none): how many times as far a wait moves a :func:`warped` clock."""

    def factor() -> float:
        try:
            return float(path.read_text())
        except (FileNotFoundError, ValueError):  # absent, or caught half-written: the system's pace
            return 1.0

    return factor


def main(argv: list[str] | None = None) -> int:
    """``SPEED kaggle run ...``: the command, as :func:`fintts.cli.main` runs it, on a :func:`played` clock (``@FILE``: a
    :func:`warped` one)."""
    from fintts.cli import args as cli_args
    from fintts.cli import commands as cli
    from fintts.cli.kaggle import cmd_kaggle_run
    from fintts.errors import StoreError

    speed, *command = sys.argv[1:] if argv is None else argv
    args = cli_args.parse(cli.build_parser(), command)
    if args.func is not cmd_kaggle_run:
        raise SystemExit(f"played_time runs `fintts kaggle run` only, not {' '.join(command[:2])}")
    clock = warped(factor_in(Path(speed[1:]))) if speed.startswith("@") else played(float(speed))
    try:
        return cmd_kaggle_run(args, clock=clock)
    except StoreError as err:  # as fintts.cli.main ends on it
        print(f"error: {err}", file=sys.stderr)
        return cli_args.EXIT_STORE


if __name__ == "__main__":
    sys.exit(main())
