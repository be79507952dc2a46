"""Embedded demo corpus: a small multi-speaker Finnish corpus shipped inside the package.

The audio is espeak-ng output, generated once by :mod:`fintts.tts.demo.make_corpus` and
committed, so that a fresh laptop or a Kaggle kernel can run the whole fine-tuning demo
without an apt step, a download, or a dataset licence to accept. It is a pipeline
smoke-test corpus, not a voice worth keeping: the point is that every stage (text front
end, features, multi-speaker training, evaluation) sees real Finnish text and audio.
"""

from pathlib import Path

from fintts.tts.corpus.model import HUB_PREFIX

#: The corpus's folder; ``data: demo`` in a config (and ``demo`` as a command's DATA) names it.
CORPUS = Path(__file__).resolve().parent / "corpus"


def data_root(data: str) -> Path | str:
    """The corpus a ``data:`` setting (or a command's DATA) names: ``demo`` is this embedded corpus; a Hub
    dataset's address (``hf://datasets/USER/NAME``) stays an address."""
    if data.startswith(HUB_PREFIX):
        return data
    return CORPUS if data == "demo" else Path(data).expanduser()
