"""How a fintts process ends once its work is done and said: without Python's slow goodbye.

After a session, Python's own exit frees the modules of torch, transformers and their kin one
by one: seconds from the session's summary to the process's end, more under load, time the
session had not planned for (a session that printed its summary within its budget exited past
it: benchmarks/README.md, "Figures behind the code's comments"). So a process that
fintts started (``python -m fintts``, the ``fintts`` command, the background export) ends as a
finished C program does: the exit handlers that Python and the libraries registered run as at
any exit (logging's flush, multiprocessing's clean-up of its children, ...), standard output and
error are flushed, and then :func:`os._exit` skips only the freeing of memory the OS takes back
anyway. Where another non-daemon thread still runs, Python's own exit (which waits for it) is
used instead. Code that calls fintts inside another program (a notebook, ``fintts.cli.main`` in
a test) never comes here.

A process fintts starts to work for another (a training process of a launch, the background
export) also ends with the process that started it (:func:`end_with_parent`): a notebook's
kernel restarted, or a session killed, leaves nothing of its own running on the devices.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
from typing import NoReturn


def exit_process(code: int | None) -> NoReturn:
    """End this process with ``code`` (``None``: 0) at once, after its exit handlers and a flush of its output."""
    code = 0 if code is None else code
    main = threading.main_thread()
    if threading.current_thread() is not main or any(t is not main and not t.daemon and t.is_alive() for t in threading.enumerate()):
        sys.exit(code)
    atexit._run_exitfuncs()  # what Python's exit runs after it has joined the threads; os._exit runs none of them
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more can be said
            pass
    os._exit(code)


def end_with_parent(parent: int) -> bool:
    """Have the kernel kill this process (SIGKILL) when its parent, ``parent``, ends; ``False``: it already has.

    Linux only (``PR_SET_PDEATHSIG``; elsewhere nothing is set up and only the check is made). Linux
    counts the end of the parent's *thread* that started this process: the launcher and the
    session wait for their processes in that thread, so it lives as long as they are wanted. The
    check covers a parent that ended before the call: a fresh process spends seconds importing
    torch before it gets here.
    """
    if sys.platform.startswith("linux"):
        try:
            import ctypes  # lazy: only a started process needs it

            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    return os.getppid() == parent
