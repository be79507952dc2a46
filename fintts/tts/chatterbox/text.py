"""Finnish text for Chatterbox Multilingual: our normalisation and numbers, then Chatterbox's own steps.

First :class:`fintts.tts.text.FinnishText` reads the text the way the VITS voices do (numbers,
dates, units, abbreviations spelled out; letters outside Finnish's mapped to the nearest one a
Finnish reader would say: ü → y, é → e), keeping the sentence punctuation Chatterbox was trained
with. Then what upstream's ``MTLTokenizer.encode`` does (resemble-ai/chatterbox,
``src/chatterbox/models/tokenizers/tokenizer.py``): lower case, Unicode NFKD, the language tag
``[fi]`` in front, each space as ``[SPACE]``, and the grapheme vocabulary
(``grapheme_mtl_merged_expanded_v1.json``, a ``tokenizers`` file) gives the ids. The start and
stop tokens are the model's (:class:`fintts.tts.chatterbox.t3.T3Settings`), put around the ids
by the caller as upstream's ``generate`` does.

**ä and ö.** NFKD splits them: ``ä`` becomes ``a`` + U+0308 (combining diaeresis), ``ö``
``o`` + U+0308, ``å`` ``a`` + U+030A. So Finnish's front vowels survive only if the vocabulary
holds the combining marks; they then cost two tokens each and share their first with the back
vowel. The released vocabulary could not be read here (it is on the Hub, not in upstream's
repository); that it holds them is what third parties report: Polish and Greek text decomposed
the same way is read correctly (audio.cpp PR #468 "Fix Chatterbox multilingual diacritic
normalization": NFKD kept the combining marks and fixed Polish; chatterbox issue #254: decomposing
Greek by hand fixed it). :meth:`ChatterboxText.encode` names any character the vocabulary lacks
(it would be ``[UNK]``), so a vocabulary without U+0308 is said, not silently turned into ``a``.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Callable
from pathlib import Path

from fintts.tts.text import FinnishText

LANGUAGE = "fi"
VOCAB_FILE = "grapheme_mtl_merged_expanded_v1.json"
SPACE, UNKNOWN, START, STOP = "[SPACE]", "[UNK]", "[START]", "[STOP]"
#: what our normaliser keeps: Finnish letters, in-word marks and the punctuation upstream's ``punc_norm`` keeps
_SPOKEN = " abcdefghijklmnopqrstuvwxyzåäö'-.,!?"
_SENTENCE_ENDS = ".!?-,"
#: combining marks NFKD leaves in Finnish text (ä, ö: diaeresis; å: ring above)
FINNISH_MARKS = "\u0308\u030a"


def finnish_normaliser() -> FinnishText:
    """Our normaliser, keeping what Chatterbox reads: Finnish letters and the sentence punctuation."""
    return FinnishText({ch: i for i, ch in enumerate(_SPOKEN)}, add_blank=False)


class ChatterboxText:
    """Text → Chatterbox text ids (without the start and stop tokens), from a ``tokenizers`` vocabulary file's content."""

    def __init__(self, tokenizer_json: str):
        from tokenizers import Tokenizer  # transformers' dependency; the laptop's light install has neither

        self.json = tokenizer_json
        self.tokenizer = Tokenizer.from_str(tokenizer_json)
        self.vocab = self.tokenizer.get_vocab(with_added_tokens=True)
        self.finnish = finnish_normaliser()

    @classmethod
    def from_folder(cls, folder: Path) -> ChatterboxText:
        return cls((Path(folder) / VOCAB_FILE).read_text(encoding="utf-8"))

    @classmethod
    def builtin(cls, vocab_size: int, stop_token: int = 0, start_token: int = 255) -> ChatterboxText:
        """A grapheme vocabulary of fintts's own for a T3 trained from random weights (tests, dry runs):
        the special tokens at the model's ids, ``[fi]``, and the characters Finnish text leaves after NFKD."""
        chars = sorted(set(unicodedata.normalize("NFKD", _SPOKEN.replace(" ", ""))) | set("0123456789"))
        specials = {STOP: stop_token, START: start_token}
        names = [UNKNOWN, SPACE, f"[{LANGUAGE}]", *chars]
        free = [i for i in range(vocab_size) if i not in specials.values()]
        if len(free) < len(names):
            raise ValueError(f"a built-in vocabulary needs text_vocab_size ≥ {len(names) + len(specials)}, not {vocab_size}")
        vocab = {**specials, **dict(zip(names, free))}
        return cls(json.dumps(_character_tokenizer(vocab), ensure_ascii=False))

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256(self.json.encode()).hexdigest()

    def prepare(self, text: str) -> str:
        """The string the vocabulary reads: normalised Finnish, a sentence end, lower case, NFKD, ``[fi]``, ``[SPACE]``."""
        spoken = re.sub(r" +([.,!?])", r"\1", self.finnish.normalize(text)).strip()
        if spoken and spoken[-1] not in _SENTENCE_ENDS:
            spoken += "."  # upstream's punc_norm ends every text with punctuation
        decomposed = unicodedata.normalize("NFKD", spoken.lower())
        return f"[{LANGUAGE}]" + decomposed.replace(" ", SPACE)

    def unknown_chars(self, text: str) -> set[str]:
        """Characters our normaliser drops (Cyrillic, emoji) and those of the prepared text the vocabulary has no token for."""
        prepared = self.prepare(text).replace(SPACE, "").replace(f"[{LANGUAGE}]", "")
        return self.finnish.unknown_chars(text) | {ch for ch in prepared if ch not in self.vocab}

    def encode(self, text: str, *, warn: Callable[[str], None] | None = None) -> list[int]:
        unknown = self.unknown_chars(text)
        if unknown and warn is not None:
            names = ", ".join(f"{ch!r} (U+{ord(ch):04X})" for ch in sorted(unknown))
            warn(f"characters left out or read as {UNKNOWN} (outside the vocabulary): {names} (in {text!r})")
        return self.tokenizer.encode(self.prepare(text)).ids


def _character_tokenizer(vocab: dict[str, int]) -> dict:
    """A ``tokenizers`` JSON that reads one token per character, the bracketed names as whole tokens."""
    specials = [name for name in vocab if name.startswith("[")]
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": vocab[name], "content": name, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for name in specials],
        "normalizer": None, "pre_tokenizer": {"type": "Split", "pattern": {"String": ""}, "behavior": "Isolated", "invert": False},
        "post_processor": None, "decoder": None,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": UNKNOWN},
    }
