"""Durations as fintts shows them to a person: a clock's ``h:mm:ss``, or rounded as one says them.

One home for both, below everything that prints a time (the summary, ``fintts env``, the plan,
the Kaggle sessions' list): the session clock counts seconds, and what reads them reads these.
"""

from __future__ import annotations


def hms(seconds: float) -> str:
    """``seconds`` as ``h:mm:ss``, how fintts shows a duration to a person."""
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def in_words(seconds: float) -> str:
    """``seconds`` rounded as a person says a length of time: ``90 s``, ``15 min``, ``2.5 h``, ``12 h``.

    Session limits and estimates are read at a glance; ``0.0333333 h`` is two minutes to no one.
    """
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    hours = seconds / 3600
    return f"{hours:.0f} h" if hours >= 10 or hours == round(hours) else f"{hours:.1f} h"
