"""Where training's numbers go besides the run's state: TensorBoard, which never stops training."""

from __future__ import annotations

from typing import Callable


class Board:
    """TensorBoard scalars that never stop training: a write that fails (a full disk) turns them off, with a warning."""

    def __init__(self, writer, warn: Callable[[str], None]):
        self.writer, self.warn = writer, warn

    def scalar(self, key: str, value: float, step: int) -> None:
        if self.writer is None:
            return
        try:
            self.writer.add_scalar(key, value, step)
        except OSError as err:
            self.writer = None
            self.warn(f"TensorBoard logging stopped: {err}")

    def close(self) -> None:
        try:
            if self.writer is not None:
                self.writer.close()
        except OSError as err:
            self.warn(f"TensorBoard's last events were not written: {err}")
