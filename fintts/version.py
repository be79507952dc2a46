"""fintts's version, where a source tree that was never installed finds it (``fintts --version``); pyproject.toml
says the same for an installed one. A module of its own, importing nothing, so the command line reads it without
importing the package's face (which reaches the voice)."""

__version__ = "0.1.0"
