"""Training's numbers: mean losses over the steps between two log lines, and TensorBoard, which never stops training."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

from fintts.train.report.status import STEP_SECONDS


class Board:
    """TensorBoard logs that never stop training: a write that fails (a full disk) turns them off, with a warning."""

    def __init__(self, writer, warn: Callable[[str], None]):
        self.writer, self.warn = writer, warn

    @classmethod
    def open(cls, folder: Path | None, warn: Callable[[str], None]) -> Board:
        """TensorBoard's event files in ``folder`` (the main process's); ``None``, or a folder that cannot be written: none."""
        if folder is None:
            return cls(None, warn)
        from torch.utils.tensorboard import SummaryWriter  # imports tensorboard (seconds); only the main process logs

        try:
            return cls(SummaryWriter(str(folder)), warn)
        except OSError as err:
            warn(f"no TensorBoard logs this session: {err}")
            return cls(None, warn)

    def scalar(self, key: str, value: float, step: int) -> None:
        if self.writer is None:
            return
        try:
            self.writer.add_scalar(key, value, step)
        except OSError as err:
            self.writer = None
            self.warn(f"TensorBoard logging stopped: {err}")

    def entry(self, tag: str, entry, step: int) -> None:
        """A task's :class:`~fintts.train.task.BoardEntry` (audio, an image...) through ``SummaryWriter.add_<kind>``."""
        if self.writer is None:
            return
        try:
            getattr(self.writer, f"add_{entry.kind}")(tag, entry.value, step, **entry.options)
        except OSError as err:
            self.writer = None
            self.warn(f"TensorBoard logging stopped: {err}")

    def close(self) -> None:
        try:
            if self.writer is not None:
                self.writer.close()
        except OSError as err:
            self.warn(f"TensorBoard's last events were not written: {err}")


class LossWindow:
    """Each loss summed over the steps since the last :meth:`take`, with the steps' seconds.

    A step with a non-finite loss is left out; a skipped step's finite losses still tell its story.
    """

    def __init__(self) -> None:
        self.sums: dict[str, float] = {}
        self.steps = 0

    def add(self, losses: dict[str, float], seconds: float) -> None:
        if not all(math.isfinite(v) for v in losses.values()):
            return
        self.steps += 1
        for key, value in {STEP_SECONDS: seconds, **losses}.items():
            self.sums[key] = self.sums.get(key, 0.0) + value

    def take(self) -> dict[str, float] | None:
        """The means since the last take (``None``: no step counted), and a fresh window."""
        means = {key: value / self.steps for key, value in self.sums.items()} if self.steps else None
        self.sums, self.steps = {}, 0
        return means

    def record(self, writer: Board, history: list[dict[str, float]], step: int, *, lr: float) -> None:
        """The means since the last take (and the learning rate) into the run's ``history`` and TensorBoard; none if no step
        was counted."""
        means = self.take()
        if means is None:
            return
        entry = {"step": step, **means, "lr": lr}
        history.append(entry)
        for key, value in entry.items():
            if key != "step":
                writer.scalar(f"train/{key}", value, step)
