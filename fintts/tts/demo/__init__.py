"""Embedded demo corpus: a small multi-speaker Finnish corpus shipped inside the package
(its folder: :data:`fintts.tts.corpus.data_names.DEMO_CORPUS`).

The audio is espeak-ng output, generated once by :mod:`fintts.tts.demo.make_corpus` and
committed, so that a fresh laptop or a Kaggle kernel can run the whole fine-tuning demo
without an apt step, a download, or a dataset licence to accept. It is a pipeline
smoke-test corpus, not a voice worth keeping: the point is that every stage (text front
end, features, multi-speaker training, evaluation) sees real Finnish text and audio.
"""
