"""The weekly GPU quota, as Kaggle reports it, and the budget it leaves the next session.

Kaggle counts every hour a GPU session runs against a weekly quota (30 hours in most weeks);
a session still running when the quota is spent is stopped, mid-step and without its final
save. The ``kaggle`` client reads the quota with ``KaggleApi.quota_view()``
(``GetAcceleratorQuotaStatistics``: ``timeUsed``, ``timeReserved`` — time held for sessions
running now — and ``totalTimeAllowed`` of ``gpuQuota``, and ``quotaRefreshTime``; the
``kaggle quota`` command shows the same). ``fintts kaggle run`` reads it before every push and
gives the session a budget (the notebook's ``BUDGET``, which the session clock ends by) of at
most what is left, less :data:`MARGIN`; when less than :data:`MIN_SESSION` would be left, it
pushes nothing and stops, saying when the quota renews.

:data:`MARGIN` covers what the quota counts and the session clock does not: the minutes
before the clock starts (the container, the install cell), the notebook's last cell and
Kaggle's saving of the version's output, and the lag of the quota's own figures.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

from fintts.kaggle.client import KaggleError, calling
from fintts.train.machine.platform import KAGGLE_SESSION_LIMIT
from fintts.train.retry import Backoff

HOUR = 3600.0
#: Quota kept back from a session's budget (see the module's docstring).
MARGIN = 20 * 60.0
#: The shortest budget worth a push: installing, loading the model and the final save take minutes of it.
MIN_SESSION = 15 * 60.0


@dataclasses.dataclass(frozen=True)
class Quota:
    """The week's GPU quota in seconds, and when it renews (UTC; ``None`` when Kaggle does not say)."""

    used: float
    reserved: float
    total: float
    renews: datetime.datetime | None

    @property
    def left(self) -> float:
        return max(0.0, self.total - self.used - self.reserved)

    def format(self) -> str:
        renews = f" (renews {self.renews.strftime('%Y-%m-%d %H:%M UTC')})" if self.renews else ""
        return f"{(self.used + self.reserved) / HOUR:.1f} h used of {self.total / HOUR:.0f} h this week{renews}"


def read_quota(api: Any, *, attempts: int = 1, backoff: Backoff = Backoff(), timeout: float | None = None) -> Quota | None:
    """The GPU quota of the credentials' user; ``None`` when Kaggle reports none (an account without GPU access)."""
    if not hasattr(api, "quota_view"):
        raise KaggleError("this kaggle client cannot read the GPU quota: pip install -U kaggle")
    answer = calling("read the GPU quota", api.quota_view, attempts=attempts, backoff=backoff, timeout=timeout)
    gpu = getattr(answer, "gpu_quota", None)
    if gpu is None or gpu.total_time_allowed is None:
        return None

    def seconds(value: datetime.timedelta | None) -> float:
        return value.total_seconds() if value is not None else 0.0

    return Quota(seconds(gpu.time_used), seconds(gpu.time_reserved), seconds(gpu.total_time_allowed), answer.quota_refresh_time)


def session_budget(quota: Quota | None, *, wanted: float | None, limit_left: float | None = None) -> float | None:
    """The budget (seconds) for the next session, or ``None`` for the session's own limit; raise when none is worth a push.

    ``wanted``: the budget asked for (``--budget``; ``None``: Kaggle's limit). ``limit_left``: what
    is left of ``--gpu-hours`` (``None``: no such limit), which caps the budget too.
    """
    if limit_left is not None and limit_left < MIN_SESSION:  # e.g. 45 s of --gpu-hours left: not worth a container start
        raise LimitSpent(limit_left)
    if wanted is not None and wanted >= KAGGLE_SESSION_LIMIT:  # Kaggle ends a session then, final save or not
        wanted = None
    caps = [cap for cap in (wanted, limit_left) if cap is not None]
    if quota is not None:
        room = quota.left - MARGIN
        if room < MIN_SESSION:
            raise QuotaSpent(quota)
        caps.append(room)
    budget = min(caps) if caps else None
    return None if budget is None or budget >= KAGGLE_SESSION_LIMIT and wanted is None else budget


class QuotaSpent(KaggleError):
    """Less of the week's GPU quota is left than a session needs (``fintts kaggle run`` stops on it, exit 0; a push exits 4)."""

    def __init__(self, quota: Quota):
        self.quota = quota
        renews = f"it renews {quota.renews.strftime('%Y-%m-%d %H:%M UTC')}" if quota.renews else "it renews weekly"
        super().__init__(
            f"the weekly GPU quota is spent: {(quota.used + quota.reserved) / HOUR:.1f} h of {quota.total / HOUR:.0f} h used, "
            f"{quota.left / HOUR:.2f} h left, less than a session needs ({(MARGIN + MIN_SESSION) / HOUR:.2f} h); {renews}. "
            "Run the same command then: it picks the run up where it stopped"
        )


def duration(seconds: float) -> str:
    """``seconds`` as a budget the notebook's ``BUDGET`` takes: ``5h40m``, ``45m``, ``30s`` (rounded down to the minute)."""
    whole = int(seconds)
    if whole < 60:
        return f"{max(whole, 1)}s"
    hours, minutes = divmod(whole // 60, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m"


class LimitSpent(KaggleError):
    """Less of ``--gpu-hours`` is left than a session needs (``fintts kaggle run`` stops on it, exit 0)."""

    def __init__(self, left: float):
        super().__init__(f"{left / HOUR:.2f} GPU hours of --gpu-hours are left, less than a session is worth "
                         f"({MIN_SESSION / HOUR:.2f} h: the container, the install and the final save take minutes of it)")
