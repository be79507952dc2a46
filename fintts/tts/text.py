"""Finnish text front end: written Finnish to spoken words to MMS character ids.

MMS-TTS is a character model: it reads letters, not phonemes, and it was trained on
lower-cased Bible text with numbers spelled out. Whatever we feed it at training and at
inference must therefore look like that text: every digit, symbol and abbreviation has
to become the words a reader would say, and only characters the model has an embedding
for may remain. This module does that conversion and the id mapping, and writes a
tokenizer folder that transformers' ``VitsTokenizer`` reads back to the same ids.

Reading decisions (all in :meth:`FinnishText.normalize`):

* Cardinals use ``num2words(n, lang="fi")`` (``2026`` -> "kaksituhatta
  kaksikymmentäkuusi"). Digit groups separated by a space, no-break space or thin space
  (``10 000``) are one number, as Finnish typography writes them. A number with a
  leading zero (``040``, phone numbers) is read digit by digit.
* Numbers are read in the case Finnish marks for them (:mod:`fintts.tts.numbers_fi`): a
  colon suffix (``5:ltä`` -> "viideltä", ``Lipun saa 12 €:lla`` -> "... kahdellatoista eurolla",
  ``3:nnen`` -> "kolmannen") or the next word ("3 kaupungissa" -> "kolmessa
  kaupungissa"). A colon suffix that is no case ending is left as written.
* A number followed by a period and then a lower-case word is an ordinal agreeing with
  that word (``3. päivä`` -> "kolmas päivä", ``3. sijalle`` -> "kolmannelle sijalle");
  before a capital or at the end of the text the period ends the sentence and the number
  stays a cardinal.
* Dates ``22.11.2026`` and ``22.11.`` are read in the nominative, month in the
  partitive, year as a cardinal: "kahdeskymmenestoinen marraskuuta kaksituhatta
  kaksikymmentäkuusi"; so after "on", where the date is the predicate ("tänään on kuudes
  joulukuuta"). After a weekday's essive, ``viimeistään`` or a verb (``syntyi 1.5.``,
  ``itsenäistyi 6.12.1917``, ``pidetään 3.4.``, any passive: see ``_ESSIVE_BEFORE``) the day is
  in the essive, as a Finn says it: "syntyi ensimmäisenä toukokuuta". Other inflections a
  sentence may call for ("1.5. alkaen": "ensimmäisestä") need syntax we do not have.
* Weekday abbreviations before a date, a time or a span of hours (``pe 22.11.``, ``su klo
  12``, ``la 10–14``) are the weekday's essive ("perjantaina"), except as the predicate of a
  day ("tänään on ma 6.12.": "maanantai kuudes joulukuuta"); ``ma–pe`` is "maanantaista
  perjantaihin". A written-out weekday keeps the case its writer gave it. ``s.`` before a number
  is "sivu" (``s. 12–15``: "sivut"), before a date or a year "syntynyt"; neither ends a sentence.
* A Roman numeral after a capitalised name is a regnal ordinal in the name's case (``Kaarle XII``
  "kaarle kahdestoista", ``Kustaa III:n`` "kustaa kolmannen"); after a label word (``osa II``) a
  cardinal, "osa kaksi" (:func:`fintts.tts.numbers_fi.read_roman_numerals`).
* E-mail and web addresses are read out, their marks as words: ``matti.meikalainen@example.fi``
  "matti piste meikalainen ät example piste fi", ``https://www.yle.fi/uutiset`` "vee vee vee
  piste yle piste fi kauttaviiva uutiset" (the scheme, a query and a final slash unsaid).
* A span ``12–15`` (``5–10 henkeä``, ``klo 9–17``, ``10–15 km``) is read from the first
  number to the second: "kahdestatoista viiteentoista"; a descending pair (a score,
  ``2–1``), a pair after a score word (``päättyi 1–3``) and years (``1939–1945``) are read as
  two numbers.
* Phone numbers (``040 123 4567``, ``+358 40 123 4567``, any digits after ``puh.``) are read
  digit by digit.
* Times ``klo 14.30``, ``14:30`` and a bare ``14.30`` (hour <= 23, minutes 00-59) are read
  as hours and minutes: "kello neljätoista kolmekymmentä"; ``:05`` is "nolla viisi",
  ``:00`` is left unsaid.
* A number joined by a hyphen to a word becomes part of it (``1990-luvulla`` ->
  "tuhat yhdeksänsataayhdeksänkymmentäluvulla"; ``2000-luvun`` -> "kaksituhatluvun").
* Decimals use the comma: ``3,5`` -> "kolme pilkku viisi", ``3,05`` -> "kolme pilkku
  nolla viisi". Any other ``a.b`` number is "a piste b".
* ``%`` is "prosenttia", ``€`` (and ``e``, ``eur``) "euroa" (``12,50 €`` and ``3,50 e``
  -> "... euroa viisikymmentä senttiä", ``0,50 €`` -> "viisikymmentä senttiä"), ``snt``
  "senttiä", ``$`` "dollaria"; units after a number (km, m, cm, mm, kg, g, l, dl, ml,
  °C, min, h, vrk) are spelled out, and one per a unit of time (``km/h``, ``m/s``, ``l/min``:
  "kilometriä tunnissa", "metriä sekunnissa", "litraa minuutissa"); after exactly ``1`` the singular
  is used ("yksi euro", "yksi kilometri tunnissa"). Written in capitals only where SI writes them so: ``5G`` is no gram. A price per
  unit is read per that unit: ``2,50 €/kg`` "... euroa viisikymmentä senttiä kilolta".
* Common abbreviations are expanded (see ``_ABBREVIATIONS``). Acronyms (``EU``) are
  lower-cased and read as a word; with a case ending after a colon they are spelled with
  the letters' names (``EU:n`` -> "eeuun", see :func:`fintts.tts.numbers_fi.read_acronym_suffixes`).
* Letters outside the vocabulary fall back to the nearest letter that is in it
  (é -> e, ü -> y, æ -> ä, ø -> ö, ß -> ss), the way a Finnish reader would say them.
* Quotes are dropped; dashes, brackets and sentence punctuation become word breaks
  unless the vocabulary has the character. Hyphens and apostrophes inside words are
  kept when the vocabulary has them (``vaa'an``, ``EU-maa``).

Anything else (Cyrillic, emoji, an ``@`` outside an address) is *unknown*: :meth:`FinnishText.unknown_chars`
names it, :meth:`FinnishText.normalize` leaves it out, :meth:`FinnishText.encode` leaves
it out and says so through its ``warn`` callback.
"""

from __future__ import annotations

import dataclasses
import json
import re
import tempfile
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fintts.tts.numbers_fi import (
    decimal_words,
    number_words,
    read_acronym_suffixes,
    read_cardinals,
    read_clock_times,
    read_money_and_units,
    read_ordinals,
    read_phone_numbers,
    read_ranges,
    read_roman_numerals,
    read_suffixed_numbers,
)
from fintts.tts.voice_format import VoiceError

#: Character vocabulary used when no MMS tokenizer is at hand.
#:
#: NOT VERIFIED against ``facebook/mms-tts-fin``: its ``vocab.json`` could not be read
#: from this build environment. MMS vocabularies are in an arbitrary order, and the
#: character at id 0 doubles as the blank that ``add_blank`` puts between characters,
#: so these ids will not line up with the pretrained embeddings. Whenever the pretrained
#: model is loaded (``init: facebook/mms-tts-fin``) build the front end with
#: :meth:`FinnishText.from_tokenizer` from that model's tokenizer; it is authoritative.
#: This set (Finnish and Latin letters incl. å ä ö, space, apostrophe, hyphen, with a
#: dedicated blank ``_`` at id 0 that normalised text never contains) is our best guess
#: at the characters a Finnish MMS vocabulary holds once numbers are spelled out; it
#: serves training from scratch and tests.
FALLBACK_VOCAB: dict[str, int] = {
    symbol: index
    for index, symbol in enumerate(["_", " ", "'", "-", *"abcdefghijklmnopqrstuvwxyz", "å", "ä", "ö"])
}

_UNKNOWN_TOKEN = "<unk>"

_MONTHS_PARTITIVE = (
    "tammikuuta helmikuuta maaliskuuta huhtikuuta toukokuuta kesäkuuta heinäkuuta "
    "elokuuta syyskuuta lokakuuta marraskuuta joulukuuta"
).split()

#: Abbreviation (regex, matched case-insensitively at a word start) -> spoken form.
_ABBREVIATIONS: tuple[tuple[str, str], ...] = (
    # "s." before a number: born before a date or a year ("s. 1.5.1865", "s. 1865"), else page(s) ("s. 12–15")
    (r"s\.(?=\s*(?:\d{1,2}\.\d{1,2}\.|1\d{3}\b|20\d{2}\b)(?!\s?[–—-]\s?\d))", "syntynyt"),
    (r"s\.(?=\s*\d+\s?[–—-]\s?\d)", "sivut"),
    (r"s\.(?=\s*\d)", "sivu"),
    (r"esim\.", "esimerkiksi"),
    (r"jne\.", "ja niin edelleen"),
    (r"ks\.", "katso"),
    (r"vrt\.", "vertaa"),
    (r"huom\.", "huomaa"),
    (r"klo\b\.?", "kello"),
    (r"n\.(?=\s+[\d\w])", "noin"),
    (r"mm\.", "muun muassa"),
    (r"ns\.", "niin sanottu"),
    (r"ts\.", "toisin sanoen"),
    (r"tms\.", "tai muuta sellaista"),
    (r"yms\.", "ynnä muuta sellaista"),
    (r"ym\.", "ynnä muuta"),
    (r"prof\.", "professori"),
    (r"tri\b\.?", "tohtori"),
    (r"puh\.", "puhelin"),
    (r"milj\.", "miljoonaa"),
    (r"mrd\.", "miljardia"),
    (r"ekr\.", "ennen kristusta"),
    (r"jkr\.", "jälkeen kristuksen"),
    (r"n:o\b", "numero"),
    (r"nro\b\.?", "numero"),
    (r"kpl\b\.?", "kappaletta"),
    # "viim." is "viimeistään" in the notices text is pasted from ("Ilmoittaudu viim. 5.6."); "viimeksi", the
    # other reading, is rarely abbreviated so
    (r"viim\.", "viimeistään"),
    (r"v\.(?=\s*\d{4}\b)", "vuonna"),  # before a year only ("v. 1917"); "5 v." (years of age) is left as written
    # a price line: "sis. alv" is "sisältää arvonlisäveron" (the object of "sisältää"), "alv" with a case ending as written
    (r"sis\.\s*alv(?::n)?\b", "sisältää arvonlisäveron"),
    (r"sis\.", "sisältää"),
    (r"alv:n\b", "arvonlisäveron"),
    (r"alv:t?[aä]\b", "arvonlisäveroa"),
    (r"alv:ll[aä]\b", "arvonlisäverolla"),
    (r"alv:st[aä]\b", "arvonlisäverosta"),
    (r"alv\b", "arvonlisävero"),
)

#: Symbols standing alone (not after a number) -> words.
_SYMBOLS = {"&": " ja ", "+": " plus ", "§": " pykälä ", "€": " euroa ", "$": " dollaria ",
            "%": " prosenttia ", "‰": " promillea ", "°": " astetta "}

#: Letters a Finnish reader says as another letter; used only when the letter itself is
#: not in the vocabulary.
_LETTER_FALLBACKS = {"ü": "y", "ű": "y", "æ": "ä", "ø": "ö", "œ": "ö", "ß": "ss", "ð": "d", "þ": "th"}

_QUOTES = "\"“”„‟«»‹›〝〞＂"
_APOSTROPHES = "'’‘ʼ´`′"
_DASHES = "‐‑‒–—―−"
#: Punctuation that only marks a pause or structure: a word break unless in the vocab.
_BREAKS = ".,;:!?()[]{}…/\\|_~*•·"

#: Placeholders protecting in-word marks while other punctuation is removed.
_KEEP_APOSTROPHE, _KEEP_HYPHEN = "\x01", "\x02"


#: Weekdays: their abbreviations (``ma`` … ``su``) and the stems of their essive, elative and illative.
_WEEKDAYS = {"ma": "maanantai", "ti": "tiistai", "ke": "keskiviikko", "to": "torstai", "pe": "perjantai", "la": "lauantai",
             "su": "sunnuntai"}
_WEEKDAY_ELATIVE, _WEEKDAY_ILLATIVE = {"keskiviikko": "keskiviikosta"}, {"keskiviikko": "keskiviikkoon"}
_WEEKDAY = rf"(?<![\w-])(?P<day>{'|'.join(_WEEKDAYS)})\.?"
#: What follows a weekday abbreviation in a date context: a date, a time, a span of hours.
_DAY_CONTEXT = r"(?=,?\s+(?:\d{1,2}\.\d{1,2}\.|klo\b|kello\b|\d{1,2}(?:[.:]\d{2})?\s?[–—-]\s?\d))"

#: Words after which a date is read in the essive ("syntyi ensimmäisenä toukokuuta", "Suomi itsenäistyi kuudentena
#: joulukuuta"): a weekday's essive and verbs, for a date after a verb tells when something happened, an
#: adverbial of time, and a day as one is in the essive (Iso suomen kielioppi § 980, table 151: "jouluna"). The verbs: a few
#: common ones by name, and the endings of verb forms that no noun a date follows ends with: any passive
#: ("pidetään", "avattiin"; and so "viimeistään"), a past in -ui/-yi ("itsenäistyi", "ilmestyi"), a present in -tuu/-tyy ("sattuu"),
#: a plural past in -ivat/-ivät ("menivät"), the participles in -nut/-nyt/-llut/-neet/-lleet ("ilmestynyt", "tullut") and
#: -ttu/-tty/-stu ("päivitetty", "julkaistu"). Not "on": after it a date or a weekday is the predicate,
#: "tänään on kuudes joulukuuta", and a predicate noun is in the nominative (Iso suomen kielioppi § 1230).
_ESSIVE_BEFORE = re.compile(
    r"(?:maanantai|tiistai|keskiviikko|torstai|perjantai|lauantai|sunnuntai)na|syntyi|syntyivät|syntynyt"
    r"|kuoli|kuollut|alkoi|alkaa|alkavat|alkanut|päättyi|päättyy|päättyvät|loppui|loppuu|tapahtui|tapahtuu|saapui|saapuu"
    r"|lähti|lähtee|palasi|palaa|tuli|tulee|meni|menee|muutti|muuttaa|avautui|avautuu|aukeaa|aukesi|valmistui|valmistuu"
    r"|täytti|täyttää|vietti|viettää|nähdään|tavataan"
    r"|[a-zåäö]{2,}(?:[td][aä][aä]n|t?tiin|[uy]i|t[uy][uy]|[aeiouyäö]iv[aä]t|(?:n|ll|nn|rr|ss)[uy]t|[a-zåäö]{2}neet|lleet|tt[uy]|st[uy])"
)
#: Subjects that make a weekday after "on" its predicate ("tänään on ma 6.12.": "tänään on maanantai kuudes
#: joulukuuta", what day it is), not an adverbial of when ("kokous on ma 6.12.": "maanantaina", when it is held).
_DAY_SUBJECTS = r"tänään|huomenna|ylihuomenna|eilen|toissapäivänä|nyt|[a-zåäö]*päivä|[a-zåäö]*aatto|päivämäärä"
_COPULA_AFTER_DAY = re.compile(rf"(?<![\w-])(?:{_DAY_SUBJECTS})\s+(?:on|oli|ovat|olivat|olisi|onkin|olikin)\s+$", re.IGNORECASE)


def _weekdays(text: str) -> str:
    """``ma–pe`` "maanantaista perjantaihin"; ``pe 22.11.``, ``su klo 12``, ``la 10–14``: "perjantaina …" (essive),
    but "tänään on ma 6.12." is "tänään on maanantai …", the predicate (see ``_DAY_SUBJECTS``)."""
    def name(abbreviation: str) -> str:
        return _WEEKDAYS[abbreviation.lower()]

    def days(m: re.Match) -> str:
        first, last = name(m.group("day")), name(m.group("last"))
        return f"{_WEEKDAY_ELATIVE.get(first, first + 'sta')} {_WEEKDAY_ILLATIVE.get(last, last + 'hin')}"

    def day(m: re.Match) -> str:
        predicate = _COPULA_AFTER_DAY.search(m.string, 0, m.start())
        return name(m.group("day")) + ("" if predicate else "na")

    text = re.sub(rf"{_WEEKDAY}\s?[–—-]\s?(?P<last>{'|'.join(_WEEKDAYS)})\.?(?![\w-])", days, text, flags=re.IGNORECASE)
    return re.sub(rf"{_WEEKDAY}{_DAY_CONTEXT}", day, text, flags=re.IGNORECASE)


#: The marks of an e-mail or a web address, said as Finns say them: "ät" (Kielitoimiston sanakirja: ät-merkki),
#: "piste", "kauttaviiva", "viiva", "alaviiva".
_ADDRESS_MARKS = {"@": " ät ", ".": " piste ", "/": " kauttaviiva ", "-": " viiva ", "_": " alaviiva ", "+": " plus "}
#: Endings of a web address written without ``www.`` or a scheme ("yle.fi"), in lower case: not "se" or "no", Finnish
#: words that a missing space after a period would make an address of ("tuli.se oli").
_DOMAINS = "fi|com|org|net|eu|io|info|ax"
_PATH = r"(?:/[^\s?#]*[^\s?#.,;:!?)\]\"”'’])?/?"
_ADDRESS = re.compile(
    r"(?<![\w@.])(?:"
    r"[\w+-]+(?:\.[\w+-]+)*@[\w-]+(?:\.[\w-]+)+"  # matti.meikalainen@example.fi
    rf"|https?://[\w-]+(?:\.[\w-]+)*(?::\d+)?{_PATH}"  # https://www.yle.fi/uutiset
    rf"|www\.[\w-]+(?:\.[\w-]+)+{_PATH}"
    rf"|[\w-]+(?:\.[\w-]+)*\.(?-i:{_DOMAINS})(?![\w-]){_PATH}"  # yle.fi
    r")(?:[?#][^\s]*[^\s.,;:!?)\]\"”'’])?",
    re.IGNORECASE,
)


def _addresses(text: str) -> str:
    """``matti.meikalainen@example.fi`` "matti piste meikalainen ät example piste fi", ``https://www.yle.fi/uutiset``
    "vee vee vee piste yle piste fi kauttaviiva uutiset": an address read out, its marks as words.

    The scheme (``https://``), a port, a query (``?a=1``) and a fragment (``#osa``) are left unsaid, as a
    person reading an address aloud leaves them; a final slash too. ``www`` is "vee vee vee", as Finns say it
    (the letters alone would be one long v to a character model).
    """
    def address(m: re.Match) -> str:
        written = re.sub(r"(?i)^https?://", "", re.split(r"[?#]", m.group(), maxsplit=1)[0])
        written = re.sub(r":\d+(?=/|$)", "", written).rstrip("/")
        written = re.sub(r"(?i)^www(?=\.)", "vee vee vee", written)
        return " " + "".join(_ADDRESS_MARKS.get(ch, ch) for ch in written) + " "

    return _ADDRESS.sub(address, text)


def _join_digit_groups(text: str) -> str:
    return re.sub(r"(?<![\d,.])\d{1,3}(?:[ \u00a0\u202f\u2009]\d{3})+(?![\d])",
                  lambda m: re.sub(r"\D", "", m.group()), text)


def _abbreviations(text: str) -> str:
    for pattern, spoken in _ABBREVIATIONS:
        text = re.sub(rf"(?<![^\W\d_]){pattern}", spoken, text, flags=re.IGNORECASE)
    return text


def _dates(text: str) -> str:
    def date(m: re.Match) -> str:
        day, month, year = int(m.group(1)), int(m.group(2)), m.group(3)
        if not (1 <= day <= 31 and 1 <= month <= 12):
            return m.group()
        previous = re.search(r"([^\W\d_]+)\s+$", m.string[: m.start()])
        case = "essive" if previous and _ESSIVE_BEFORE.fullmatch(previous.group(1).lower()) else "nominative"
        spoken = f"{number_words(str(day), case, ordinal=True)} {_MONTHS_PARTITIVE[month - 1]}"
        return f"{spoken} {number_words(year)}" if year else spoken

    return re.sub(r"(?<![\d.])(\d{1,2})\.(\d{1,2})\.(\d{4})?(?!\d)", date, text)


def _compound_number(digits: str) -> str:
    """A number as the first part of a compound (``2000-luvun``): a thousand's ``-tuhatta`` is ``-tuhat`` there,
    "kaksituhatluvun" as "tuhatluvun"."""
    words = number_words(digits)
    return words[: -len("ta")] if words.endswith("tuhatta") else words


def _numbers(text: str) -> str:
    text = read_suffixed_numbers(text)
    text = read_ordinals(text)
    text = re.sub(r"\d+,\d+", lambda m: decimal_words(m.group()), text)
    text = re.sub(r"(?<![\d.])(\d+)-(?=[^\W\d_])", lambda m: _compound_number(m.group(1)), text)
    text = read_ranges(text)
    text = re.sub(r"(\d+)\.(\d+)", lambda m: f"{number_words(m.group(1))} piste {number_words(m.group(2))}", text)
    return read_cardinals(text)


class FinnishText:
    """Normalises Finnish and maps it to the ids of a VITS/MMS character vocabulary.

    ``vocab`` maps symbols to ids as in a ``VitsTokenizer``'s ``vocab.json``; only its
    one-character entries are characters text may contain. Id 0 is the blank that
    ``add_blank`` puts between and around characters (MMS was trained that way).
    """

    def __init__(self, vocab: dict[str, int], add_blank: bool = True) -> None:
        if not vocab:
            raise VoiceError("the vocabulary is empty; pass the vocab.json mapping of a VitsTokenizer")
        if 0 not in vocab.values():
            raise VoiceError("the vocabulary has no id 0; VITS uses id 0 as the blank between characters")
        if len(set(vocab.values())) != len(vocab):
            raise VoiceError("the vocabulary maps two symbols to the same id; check its vocab.json")
        if " " not in vocab:
            raise VoiceError("the vocabulary has no space character; it cannot separate words")
        self.vocab = dict(vocab)
        self.add_blank = add_blank
        self._chars = frozenset(symbol for symbol in vocab if len(symbol) == 1)

    @classmethod
    def default(cls) -> FinnishText:
        """The built-in vocabulary (:data:`FALLBACK_VOCAB`, not verified against MMS)."""
        return cls(FALLBACK_VOCAB)

    @classmethod
    def from_tokenizer(cls, tokenizer: Any) -> FinnishText:
        """Adopt a transformers ``VitsTokenizer``'s vocabulary and blank setting.

        This is the authoritative source when fine-tuning a pretrained MMS model: its ids
        index the model's embedding table. Added tokens (``<unk>``) lie outside that
        table and are left out.
        """
        if getattr(tokenizer, "phonemize", False):
            raise VoiceError(
                "this tokenizer phonemizes its input (an English VITS checkpoint); fintts needs an MMS "
                "character tokenizer such as facebook/mms-tts-fin's"
            )
        vocab = {token: index for token, index in tokenizer.get_vocab().items() if index < tokenizer.vocab_size}
        return cls(vocab, add_blank=bool(tokenizer.add_blank))

    @classmethod
    def from_folder(cls, folder: str | Path) -> FinnishText:
        """Read a ``VitsTokenizer`` folder's ``vocab.json`` and ``tokenizer_config.json`` directly.

        The same vocabulary and blank setting as :meth:`from_tokenizer` of
        ``VitsTokenizer.from_pretrained(folder)``, without transformers (and so without
        torch): what a laptop that speaks through ONNX needs.
        """
        folder = Path(folder)
        vocab_file, config_file = folder / "vocab.json", folder / "tokenizer_config.json"
        if not vocab_file.is_file():
            raise FileNotFoundError(f"{vocab_file} not found: {folder} is not an exported voice (use the run's model/ folder)")
        vocab = _read_json(vocab_file)
        config = _read_json(config_file) if config_file.is_file() else {}
        if config.get("phonemize"):
            raise VoiceError(f"{config_file}: this tokenizer phonemizes its input (an English VITS checkpoint); "
                             "fintts needs an MMS character tokenizer such as facebook/mms-tts-fin's")
        return cls(vocab, add_blank=bool(config.get("add_blank", True)))

    @property
    def vocab_size(self) -> int:
        """Rows of the embedding table these ids index (``VitsConfig.vocab_size``)."""
        return max(self.vocab.values()) + 1

    def normalize(self, text: str) -> str:
        """Spoken, lower-case form of ``text`` holding only vocabulary characters."""
        spoken = self._spoken(text)
        return self._squeeze("".join(ch for ch in spoken if ch in self._chars))

    def unknown_chars(self, text: str) -> set[str]:
        """Characters the normalised text would need but the vocabulary lacks."""
        return set(self._spoken(text)) - self._chars

    def encode(self, text: str, *, warn: Callable[[str], None] | None = None) -> list[int]:
        """Ids for ``text``: normalised, unknown characters dropped, blanks interspersed."""
        unknown = self.unknown_chars(text)
        if unknown and warn is not None:
            names = ", ".join(repr(ch) for ch in sorted(unknown))
            warn(f"dropped characters outside the vocabulary: {names} (in {text!r})")
        ids = [self.vocab[ch] for ch in self.normalize(text)]
        if not self.add_blank:
            return ids
        interspersed = [0] * (2 * len(ids) + 1)
        interspersed[1::2] = ids
        return interspersed

    def save_tokenizer(self, out_dir: Path) -> None:
        """Write a ``VitsTokenizer`` folder (vocab.json, tokenizer_config.json, ...).

        ``VitsTokenizer.from_pretrained(out_dir)`` then gives :meth:`encode`'s ids for
        already-normalised text, and a model saved beside it works in
        ``pipeline("text-to-speech", ...)``. The blank (id 0) is declared the pad token,
        as MMS does, and ``split_special_tokens`` is set: without it transformers would
        split the text at every occurrence of that character (in MMS it is a real
        letter) and leave out the blanks around it.
        """
        from transformers import VitsTokenizer  # [torch] only: the laptop's front end reads vocab.json without it

        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        blank = next(symbol for symbol, index in self.vocab.items() if index == 0)
        with tempfile.TemporaryDirectory() as tmp:
            vocab_file = Path(tmp) / "vocab.json"
            vocab_file.write_text(json.dumps(self.vocab, ensure_ascii=False, indent=2), encoding="utf-8")
            tokenizer = VitsTokenizer(
                str(vocab_file),
                pad_token=blank,
                unk_token=_UNKNOWN_TOKEN,
                language="fin",
                add_blank=self.add_blank,
                normalize=True,
                phonemize=False,
                is_uroman=False,
                split_special_tokens=True,
            )
            tokenizer.save_pretrained(str(out_dir))

    def _spoken(self, text: str) -> str:
        """Full normalisation, keeping characters outside the vocabulary."""
        text = unicodedata.normalize("NFC", text)
        text = _addresses(text)
        text = read_phone_numbers(text)
        text = _join_digit_groups(text)
        text = re.sub(r"(?<![\w\d])[-−](?=\d)", "miinus ", text)
        text = read_money_and_units(text)
        text = _abbreviations(text)
        text = _weekdays(text)
        text = read_roman_numerals(text)
        text = read_acronym_suffixes(text)
        text = read_clock_times(text)
        text = _dates(text)
        text = _numbers(text)
        text = text.lower()
        text = "".join(self._letter(ch) for ch in text)
        text = self._punctuation(text)
        return self._squeeze(text)

    def _letter(self, ch: str) -> str:
        if ch in self._chars:
            return ch
        if ch in _SYMBOLS:
            return _SYMBOLS[ch]
        if not ch.isalpha():
            return ch
        fallback = _LETTER_FALLBACKS.get(ch) or "".join(
            c for c in unicodedata.normalize("NFKD", ch) if not unicodedata.combining(c)
        )
        return fallback if fallback and all(c in self._chars for c in fallback) else ch

    def _punctuation(self, text: str) -> str:
        """Keep in-word hyphens/apostrophes the vocabulary has; other marks break words."""
        inside_word = r"(?<=[^\W\d_]){}(?=[^\W\d_])"
        if "'" in self._chars:
            text = re.sub(inside_word.format(f"[{re.escape(_APOSTROPHES)}]"), _KEEP_APOSTROPHE, text)
        if "-" in self._chars:
            text = re.sub(inside_word.format("-"), _KEEP_HYPHEN, text)
        out = []
        for ch in text:
            if ch in _QUOTES or ch in _APOSTROPHES:
                continue
            if ch in _DASHES or ch in "-_" or ch.isspace() or (ch in _BREAKS and ch not in self._chars):
                out.append(" ")
            else:
                out.append(ch)
        return "".join(out).replace(_KEEP_APOSTROPHE, "'").replace(_KEEP_HYPHEN, "-")

    @staticmethod
    def _squeeze(text: str) -> str:
        return re.sub(r"\s+", " ", text).strip()


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as err:
        raise VoiceError(f"{path} is not valid JSON ({err}); export or pull the voice again") from None


@dataclasses.dataclass(frozen=True)
class Chunk:
    """A piece of text a voice says in one go, and what ends it.

    ``boundary``: ``"sentence"``, ``"paragraph"`` (a blank line follows), ``"clause"`` (a
    sentence longer than the chunk limit, cut at a comma or a space) or ``"end"``.
    """

    text: str
    boundary: str


#: Longest chunk, in characters: VITS's memory and the wait for the first audio grow with
#: the length of what it says at once; 300 characters is 20-30 s of speech.
MAX_CHUNK_CHARS = 300

_TERMINAL = re.compile(r"[.!?…]+[\"”»’')\]]*(?=\s)|\n")
_OPENERS = "\"“”„«»'‘’([–—-"


def split_sentences(text: str, max_chars: int = MAX_CHUNK_CHARS) -> list[Chunk]:
    """Split written Finnish into the chunks a voice says one by one.

    A sentence ends at ``.``, ``!``, ``?`` or ``…`` (closing quotes and brackets stay with it)
    followed by a space and a capital letter or a digit, and at a line break before one;
    a blank line ends a paragraph. A period does not end a sentence after an abbreviation
    the front end expands (``esim.``, ``n.``, ``klo`` ...) or after an initial (``J.
    Sibelius``). Decimals and times (``3.5``, ``14.30``) have no space after the point and
    are never split. Sentences longer than ``max_chars`` are cut at the last comma, semicolon
    or colon that leaves a chunk of at least a third of the limit, else at a space.
    """
    chunks: list[Chunk] = []
    for paragraph in re.split(r"\n\s*\n", text.strip()):
        sentences = [s for s in _sentences(paragraph) if s.strip()]
        for n, sentence in enumerate(sentences):
            pieces = _cut(" ".join(sentence.split()), max_chars)
            chunks += [Chunk(piece, "clause") for piece in pieces[:-1]]
            chunks.append(Chunk(pieces[-1], "sentence" if n < len(sentences) - 1 else "paragraph"))
    if chunks:
        chunks[-1] = Chunk(chunks[-1].text, "end")
    return chunks


def _sentences(paragraph: str) -> list[str]:
    sentences, start = [], 0
    for match in _TERMINAL.finditer(paragraph):
        following = paragraph[match.end():].lstrip().lstrip(_OPENERS).lstrip()[:1]
        if not (following.isupper() or following.isdigit()):
            continue
        if match.group().startswith(".") and match.group().rstrip(_OPENERS) == "." and _abbreviated(paragraph, match.start()):
            continue
        sentences.append(paragraph[start:match.end()])
        start = match.end()
    return sentences + [paragraph[start:]]


def _abbreviated(text: str, dot: int) -> bool:
    """Whether the period at ``dot`` belongs to an abbreviation or an initial, not a sentence end."""
    start = dot
    while start > 0 and text[start - 1].isalpha():
        start -= 1
    word = text[start:dot]
    if len(word) == 1 and word.isupper():
        return True
    return any((m := re.compile(pattern, re.IGNORECASE).match(text, start)) and m.end() == dot + 1
               for pattern, _ in _ABBREVIATIONS)


def _cut(sentence: str, max_chars: int) -> list[str]:
    pieces = []
    while len(sentence) > max_chars:
        cut = max(sentence.rfind(mark, 0, max_chars) + 1 for mark in ",;:")
        if cut < max_chars // 3:
            cut = sentence.rfind(" ", 0, max_chars + 1)
        if cut <= 0:
            cut = max_chars
        pieces.append(sentence[:cut].strip())
        sentence = sentence[cut:].strip()
    return pieces + [sentence]
