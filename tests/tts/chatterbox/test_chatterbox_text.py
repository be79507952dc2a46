"""Finnish text for Chatterbox: our normaliser, then Chatterbox's steps; whether ä, ö and å survive them."""

from __future__ import annotations

import json
import unicodedata

from fintts.tts.chatterbox.text import SPACE, UNKNOWN, VOCAB_FILE, ChatterboxText


def _tokens(text: ChatterboxText, ids: list[int]) -> list[str]:
    names = {index: name for name, index in text.vocab.items()}
    return [names[i] for i in ids]


def test_numbers_are_read_in_finnish_then_upstreams_steps_follow():
    text = ChatterboxText.builtin(256)
    spoken = "kello on neljätoista kolmekymmentä."
    upstream = "[fi]" + unicodedata.normalize("NFKD", spoken.lower()).replace(" ", SPACE)  # MTLTokenizer.encode's string
    assert text.prepare("Kello on 14.30") == upstream


def test_front_vowels_survive_as_a_letter_and_its_combining_mark():
    """NFKD splits ä into a + U+0308: with the mark in the vocabulary, 'tää' and 'taa' are told apart."""
    text = ChatterboxText.builtin(256)
    front, back = text.encode("Tää yö, Åbo"), text.encode("Taa yo, Abo")
    assert front != back
    assert _tokens(text, front)[1:9] == ["t", "a", "\u0308", "a", "\u0308", SPACE, "y", "o"]
    assert "\u030a" in _tokens(text, front) and UNKNOWN not in _tokens(text, front)


def test_a_vocabulary_without_the_combining_marks_is_named_not_silent(tmp_path):
    builtin = json.loads(ChatterboxText.builtin(256).json)
    del builtin["model"]["vocab"]["\u0308"]
    (tmp_path / VOCAB_FILE).write_text(json.dumps(builtin, ensure_ascii=False), encoding="utf-8")
    text = ChatterboxText.from_folder(tmp_path)
    warnings = []
    ids = text.encode("Hyvää yötä", warn=warnings.append)
    assert text.vocab[UNKNOWN] in ids
    assert len(warnings) == 1 and "U+0308" in warnings[0] and "Hyvää yötä" in warnings[0]


def test_letters_finnish_lacks_are_read_as_a_finn_reads_them_and_others_are_named():
    text = ChatterboxText.builtin(256)
    assert text.prepare("Müller") == "[fi]myller."
    warnings = []
    text.encode("Привет, Helsinki!", warn=warnings.append)
    assert warnings and "U+043F" in warnings[0]
