"""``lora:`` in a config, for every family: an adapter of rank ``r`` on the modules ``targets`` match.

What a family adapts differs (VITS's attention and convolutions, T3's Llama projections), so each
family names its default ``alpha`` and ``targets`` in a subclass and checks the matched modules'
kinds itself; the fields, their checks and how a list of patterns picks module names are the same,
and live here, below the families. Imports no torch: settings are read where nothing trains.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable

from fintts.errors import ConfigError


@dataclasses.dataclass
class LoraSettings:
    """``r: 0``: no adapter, the whole model trains; ``targets``: regular expressions, each matching whole module names."""

    r: int = 0
    alpha: float = 16.0
    dropout: float = 0.05
    targets: list[str] = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        if self.r < 0:
            raise ConfigError(f"r must be 0 (no adapter) or positive, not {self.r}")
        for target in self.targets:
            try:
                re.compile(target)
            except re.error as err:
                raise ConfigError(f"targets: {target!r} is not a regular expression ({err})") from None


def matching_names(names: Iterable[str], targets: list[str]) -> list[str]:
    """The module ``names`` (a model's ``named_modules()`` names) that one of ``targets`` matches whole, in their order."""
    pattern = re.compile("|".join(f"(?:{target})" for target in targets))
    return [name for name in names if name and pattern.fullmatch(name)]
