"""The model-agnostic session trainer: clock, loop, checkpoints, stores.

It knows nothing about audio. A task (:class:`fintts.train.task.Task`) plugs in; the
public entry points are :func:`train` (this process) and :func:`launch` (one process per GPU).
"""

from fintts.train.launcher import LaunchFailed, launch
from fintts.train.loop import ConfigDrift, Trainer, train
from fintts.train.summary import SessionSummary
from fintts.train.task import Evaluation, OptimizerGroup, Task, TaskContext, TrainData, unwrap

__all__ = [
    "ConfigDrift", "Evaluation", "LaunchFailed", "OptimizerGroup", "SessionSummary", "Task", "TaskContext", "TrainData", "Trainer",
    "launch", "train", "unwrap",
]
