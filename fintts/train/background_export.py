"""The slow part of a task's export (ONNX graphs, say) made in the background, so training goes on meanwhile.

At a new best the main process replaces ``model/`` with the task's quick export (its
weights) as before, then hands the slow part (:meth:`Task.export_later`) to a worker thread,
which makes it in a hard-linked copy of that folder. Only the main thread swaps the finished
copy in, and only while ``model/`` still holds the export the copy was made from: a newer
best meanwhile makes the copy stale (dropped; the newest one is made next). So ``model/``
never holds files derived from other weights than its own whenever a push snapshots it, and a
session killed mid-way leaves ``model/`` as the quick export wrote it (the copy is removed at
the next start). The main process waits for the newest one before its final save
(:meth:`BackgroundExport.settle`), so the final push carries the graphs when the clock allows.

One worker at a time, at the lowest CPU priority: the slow part is CPU work, and the CPU also feeds the devices.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from fintts.train.saving import replace_export

#: Seconds between looks at a signal or the deadline while the final save waits for an export.
WAIT_STEP = 0.1
#: The worker thread's niceness (Linux): the CPU that feeds the devices goes to training first.
NICENESS = 19


@dataclass
class _Job:
    generation: int
    folder: Path
    started: float
    thread: threading.Thread | None = None
    error: BaseException | None = None
    seconds: float = 0.0
    done: threading.Event = field(default_factory=threading.Event)

    def run(self, derive: Callable[[Path], None]) -> None:
        _yield_to_training()
        try:
            derive(self.folder)
        except BaseException as err:  # reported by the main thread, which owns the warnings
            self.error = err
        finally:
            self.seconds = time.time() - self.started
            self.done.set()


class BackgroundExport:
    """The background part of ``final``'s exports; every method is called from the main thread of the main process."""

    def __init__(self, final: Path, warn: Callable[[str], None]):
        self.final, self._warn = final, warn
        self._work = final.with_name(f".{final.name}-later")
        for leftover in final.parent.glob(f"{self._work.name}-*"):  # a killed session's unfinished copies
            shutil.rmtree(leftover, ignore_errors=True)
        self.generation = 0
        self._job: _Job | None = None
        self._wanted: Callable[[Path], None] | None = None
        self._step = 0

    def exported(self, derive: Callable[[Path], None] | None, step: int) -> None:
        """``final`` was just replaced by the export of ``step``; ``derive`` (``None``: nothing) is its slow part."""
        self.generation += 1
        self._wanted, self._step = derive, step
        self.poll()

    def pending(self) -> bool:
        return self._job is not None or self._wanted is not None

    def poll(self) -> float | None:
        """Swap in a finished, still current job (its seconds are returned) and start the wanted one if none runs."""
        swapped = None
        job = self._job
        if job is not None and job.done.is_set():
            self._job = None
            if job.generation != self.generation:
                shutil.rmtree(job.folder, ignore_errors=True)
            elif job.error is not None:
                shutil.rmtree(job.folder, ignore_errors=True)
                self._warn(f"could not finish the export of {self.final} at step {self._step} ({type(job.error).__name__}: "
                           f"{job.error}); it holds the quick part only")
            else:
                err = replace_export(self.final, lambda fresh: os.replace(job.folder, fresh))
                if err is not None:
                    self._warn(f"could not complete {self.final} at step {self._step} ({err}); it holds the quick part only")
                else:
                    swapped = job.seconds
        if self._job is None and self._wanted is not None:
            self._start(self._wanted)
        return swapped

    def _start(self, derive: Callable[[Path], None]) -> None:
        self._wanted = None
        folder = self._work.with_name(f"{self._work.name}-{self.generation}")
        shutil.rmtree(folder, ignore_errors=True)
        try:
            shutil.copytree(self.final, folder, copy_function=_link_or_copy)
        except OSError as err:
            shutil.rmtree(folder, ignore_errors=True)
            self._warn(f"could not copy {self.final} to finish its export at step {self._step} ({err}); it holds the quick part only")
            return
        self._job = _Job(self.generation, folder, time.time())
        self._job.thread = threading.Thread(target=self._job.run, args=(derive,), name="fintts-export", daemon=True)
        self._job.thread.start()

    def settle(self, deadline: float | None, interrupted: Callable[[], bool] = lambda: False) -> float | None:
        """Finish the newest export before ``deadline`` (a ``time.time()``; ``None``: none) unless ``interrupted()``; the
        seconds waited, or ``None`` when it did not finish (then ``final`` keeps the quick part, and a person is told)."""
        started = time.time()
        while self.pending():
            job = self._job
            if job is not None:
                while not job.done.wait(WAIT_STEP) and (deadline is None or time.time() < deadline) and not interrupted():
                    pass
                if not job.done.is_set():
                    self._warn(f"the export of {self.final} at step {self._step} was not finished in this session: it holds "
                               f"the quick part only; the next session finishes it (for a voice, so does "
                               f"`fintts export --onnx --voice {self.final}`)")
                    return None
            self.poll()
        return time.time() - started


def _yield_to_training() -> None:
    """Lower this thread's CPU priority, and so its helper threads' (they inherit it); Linux's niceness is per thread."""
    if sys.platform != "linux":  # elsewhere the id would name a process: the export keeps the training's priority
        return
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICENESS)
    except OSError:
        pass  # not allowed here: the export keeps the training's priority


def _link_or_copy(source: str, target: str) -> None:
    """A hard link: the quick export never rewrites a file in place (it replaces the folder), so the copy stays as it was."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)
