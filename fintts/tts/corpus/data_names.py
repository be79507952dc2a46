"""What a ``data:`` setting, or a command's DATA, names: a folder, a Hub dataset's address, or ``demo``.

``demo`` is the small corpus shipped inside the package (``fintts/tts/demo/corpus``, made by
:mod:`fintts.tts.demo.make_corpus`). Reading a config's data is corpus code, below the demo that
uses it, so the shipped corpus is known here by its place in the package, not by importing the
demo (whose runner speaks with a voice: a layer above the corpus).
"""

from __future__ import annotations

from pathlib import Path

from fintts.tts.corpus.model import HUB_PREFIX

#: The name that ``data: demo`` (and ``demo`` as a command's DATA) gives the embedded corpus.
DEMO = "demo"
#: The embedded corpus's folder.
DEMO_CORPUS = Path(__file__).resolve().parents[1] / "demo" / "corpus"


def data_root(data: str) -> Path | str:
    """The corpus a ``data:`` setting (or a command's DATA) names: ``demo`` is the embedded corpus; a Hub
    dataset's address (``hf://datasets/USER/NAME``) stays an address."""
    if data.startswith(HUB_PREFIX):
        return data
    return DEMO_CORPUS if data == DEMO else Path(data).expanduser()
