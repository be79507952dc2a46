"""The model-agnostic session trainer: clock, loop, checkpoints, stores.

It knows nothing about audio. A task (:class:`fintts.train.task.Task`) plugs in; the
public entry points are :func:`train` (this process) and :func:`launch` (one process per GPU).

The names below are imported when first used (PEP 562), so that the torch-free parts —
``fintts.train.config``, ``checkpoint``, ``stores.base`` — can be imported by the laptop
side and the CLI without importing torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "ConfigDrift": "fintts.errors",
    "LaunchFailed": "fintts.train.session.launcher", "launch": "fintts.train.session.launcher",
    "Trainer": "fintts.train.session.loop", "train": "fintts.train.session.loop",
    "SessionSummary": "fintts.train.report.summary",
    **dict.fromkeys(["Evaluation", "OptimizerGroup", "Task", "TaskContext", "TrainData", "unwrap"], "fintts.train.task"),
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'fintts.train' has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
