"""A voice family's front door: what the command line and ``say`` may ask of a family, and nothing else.

A family (VITS, Chatterbox, one of another package) is one folder under ``fintts/tts`` or anywhere
importable. It trains through its task (registered in ``fintts.tasks``, as every task is) and shows
the rest of fintts one :class:`Family`, registered in the ``fintts.families`` entry points
(:mod:`fintts.tts.families` finds them): how to know its voice folder, how to speak it, export it,
publish it, evaluate it, merge an adapter into it. An operation a family does not offer is ``None``,
and the command says so in one line (:meth:`Family.operation`). The command line and ``say`` dispatch
through it and never name a family; no family imports another (tests/test_layers.py checks both).

A face is loaded whenever a voice folder is looked up, on a laptop too: its module imports no torch,
and each operation imports what it needs when it runs. This module imports nothing of fintts but its errors.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

from fintts.errors import UsageError

#: The command that runs each operation of a face: what a person typed, named in the line that says it is not offered.
COMMANDS = {"load_voice": "say", "export": "export", "publish": "publish", "evaluate": "eval", "merge": "merge"}


class Voice(Protocol):
    """A voice that speaks: what ``fintts say`` and :func:`fintts.load_voice` hand back, whatever its family.

    A family's voice class extends :class:`fintts.tts.streamed_voice.StreamedVoice`, which adds ``synthesize`` and ``save``.
    """

    @property
    def sample_rate(self) -> int: ...

    @property
    def backend_name(self) -> str:
        """What runs the network (``onnx``, ``torch``, a package's name), for ``fintts say``'s report."""
        ...

    def stream(self, text: str, *, speaker: str | int | None = None,
               warn: Callable[[str], None] | None = None) -> Iterator[Any]:
        """The text's audio, a float32 numpy array in [-1, 1] at a time (a sentence, or the whole text), as it is made."""
        ...

    def synthesize(self, text: str, *, speaker: str | int | None = None,
                   warn: Callable[[str], None] | None = None) -> tuple[Any, int]: ...

    def save(self, text: str, path: str | Path, *, speaker: str | int | None = None,
             warn: Callable[[str], None] | None = None) -> Path: ...


@dataclasses.dataclass(frozen=True)
class Scores:
    """What a family's ``evaluate`` found: ``figures`` for ``--json`` (a JSON object), ``text`` for a person."""

    figures: dict[str, Any]
    text: str


@dataclasses.dataclass(frozen=True)
class Family:
    """One voice family's public face; every operation but ``owns`` is optional (``None``: not offered).

    ``owns(folder)``: whether ``folder`` is this family's voice, read from its files without importing torch.
    ``load_voice(folder, speaker=None, **options)`` → :class:`Voice` (``options``: ``fintts say``'s backend, int8,
    speed, noise, seed; a family ignores those it has no use for).
    ``export(folder, *, piper, out, int8)`` → the files written.
    ``publish(store, hub_repo, **options)`` → an object whose ``format()`` says what was published.
    ``evaluate(model_dir, settings)`` → :class:`Scores` (``settings``: the run's task settings; :mod:`fintts.tts.evaluation`).
    ``merge(folder, out, speaker, *, onnx)`` → (the speaker folded in, the voice's speakers).
    ``pulled(folder, repo_id)``: what the family adds to a voice ``fintts pull`` downloaded (VITS: the ONNX graphs a run
    did not ship).
    ``weights_only_files``: pickled files of its voice folder that ``fintts pull`` downloads, where the rest of them stay
    on the Hub: only those its loader reads with ``torch.load(weights_only=True)``, which runs no code on torch >= 2.6.
    """

    name: str
    #: the task that trains it (a ``fintts.tasks`` name): how a run's family is known from its status
    task: str
    owns: Callable[[Path], bool]
    load_voice: Callable[..., Voice] | None = None
    export: Callable[..., list[Path]] | None = None
    publish: Callable[..., Any] | None = None
    evaluate: Callable[..., Scores] | None = None
    merge: Callable[..., tuple[str, list[str]]] | None = None
    pulled: Callable[[Path, str], None] | None = None
    weights_only_files: tuple[str, ...] = ()

    def operation(self, name: str) -> Callable[..., Any]:
        """The operation ``name`` (one of :data:`COMMANDS`), or a :class:`~fintts.errors.UsageError` in one line."""
        found = getattr(self, name)
        if found is None:
            offered = ", ".join(f"fintts {command}" for op, command in COMMANDS.items() if getattr(self, op) is not None)
            raise UsageError(f"{self.name} voices offer no fintts {COMMANDS[name]}; what they offer: {offered or 'nothing'}")
        return found
