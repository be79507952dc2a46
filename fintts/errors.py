"""The errors fintts raises for a person to act on, by what the command line does with them.

Every other module raises these (or subclasses of them) for problems a person fixes, and
plain exceptions for bugs. ``fintts`` exits 2 on a :class:`UsageError`, 3 on a
:class:`ConfigDrift`, 4 on a :class:`StoreError`; anything else is a bug and shows its
traceback. This module imports nothing of fintts, so any module, the laptop voice's
included, can raise them without importing the trainer.
"""

from __future__ import annotations


class UsageError(ValueError):
    """A setting, file or argument a person has to change; the message names it and says how."""


class ConfigError(UsageError):
    """A config file or override is invalid; the message names the key and the fix."""


class ConfigDrift(ConfigError):
    """Resuming with settings that change the math; the message lists them and the override."""


class StoreError(Exception):
    """A store cannot be used as asked (unreachable, held by another session, misconfigured)."""


class LeaseConflict(StoreError):
    """Another session holds the run; the message says who and how to take over."""
