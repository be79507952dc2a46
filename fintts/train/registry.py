"""Which task a config's ``task:`` names, and the dataclass of its settings.

``task:`` is ``package.module:Class``, or a short name that an installed package registers in
the ``fintts.tasks`` entry-point group (fintts registers its own in its ``pyproject.toml``).
A package may also register the task's settings dataclass under the same name in
``fintts.task_settings``: reading a config then imports only that, and the task (its models,
torch) only when something trains. So a laptop with fintts's base install, without torch,
checks a config before ``fintts kaggle push`` sends it to a session, and a notebook's corpus
check takes a fraction of a second instead of torch's and transformers' import (~7 s of CPU).
"""

from __future__ import annotations

import importlib
import importlib.metadata

from fintts.train.task import Task

#: The entry-point group in which packages register their tasks under short names.
TASK_ENTRY_POINTS = "fintts.tasks"
#: The entry-point group of their settings dataclasses, under the same names (optional: the module docstring says why).
TASK_SETTINGS_ENTRY_POINTS = "fintts.task_settings"


def registered_tasks() -> dict[str, str]:
    """Short task names → ``package.module:Class``, as installed packages register them."""
    return {ep.name: ep.value for ep in importlib.metadata.entry_points(group=TASK_ENTRY_POINTS)}


def resolve_settings(name: str, *, registered_only: bool = False) -> type:
    """The dataclass of task ``name``'s settings: registered in ``fintts.task_settings``, imported without the task;
    else the task's ``config_class`` (which imports the task)."""
    entry = next((ep for ep in importlib.metadata.entry_points(group=TASK_SETTINGS_ENTRY_POINTS) if ep.name == name), None)
    if entry is None:
        return resolve_task(name, registered_only=registered_only).config_class
    try:
        return entry.load()
    except (ImportError, AttributeError) as err:
        raise ValueError(f"task: cannot import the settings of task {name!r} ({entry.value}): {err}") from err


def resolve_task(name: str, *, registered_only: bool = False) -> type[Task]:
    """A registered short name or ``package.module:Class`` → the Task subclass, with a clear error.

    ``registered_only``: the name came from outside (a pulled checkpoint's config), and only the
    installed packages' ``fintts.tasks`` entry points are imported, never a module it names.
    """
    registered = registered_tasks()
    known = ", ".join(sorted(registered)) or "none: is fintts installed (pip install -e .)?"
    if not name:
        raise ValueError(f"task: missing; name the task to train, one of the installed ones ({known}) or package.module:Class")
    target = registered.get(name, name)
    if registered_only and target not in registered.values():
        raise ValueError(f"task: {name!r} is not an installed task ({known}); a config taken from a checkpoint may only "
                         "name a task registered under the fintts.tasks entry points, since importing a module it names "
                         "would run that module's code (evaluate with --model DIR --config FILE of your own instead)")
    if ":" not in target:
        raise ValueError(f"task: {name!r} is neither an installed task ({known}) nor an import path package.module:Class")
    module_name, class_name = target.split(":", 1)
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ValueError(f"task: cannot import {module_name!r} for task {name!r}: {err}") from err
    cls = getattr(module, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, Task)):
        raise ValueError(f"task: {target!r} is not a fintts.train.task.Task subclass")
    return cls
