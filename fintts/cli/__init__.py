"""The command line, ``fintts``: the shell over the library, one folder apart from it.

:mod:`fintts.cli.commands` has the commands and their exit codes (its docstring's table);
:mod:`fintts.cli.kaggle` the ``fintts kaggle …`` commands; :mod:`fintts.cli.args` what several
commands share (a config named the same ways, a corpus read the same ways, the exit codes). Nothing
of the library imports the shell, so the shell's folder is the top of the house.
"""

from fintts.cli.args import EXIT_DRIFT, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_STORE, EXIT_USAGE
from fintts.cli.commands import build_parser, main, run

__all__ = ["EXIT_DRIFT", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_STORE", "EXIT_USAGE", "build_parser", "main", "run"]
