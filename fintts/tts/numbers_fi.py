"""Finnish numbers read aloud in the case the sentence asks for.

Finnish inflects its numerals: "12 €:lla" is "kahdellatoista eurolla", "5:ltä" is
"viideltä", "3. sijalle" is "kolmannelle sijalle". Written Finnish marks the case in one of
two ways, and this module reads both (num2words inflects the numerals themselves):

* **A colon suffix** (``5:ltä``, ``12:lla``, ``3:nnen``, ``40 %:lla``, ``km:n``): the letters
  after the colon are the end of the inflected word. :func:`case_of_suffix` reads the case
  from them; whether the number is a cardinal, an ordinal or a plural is decided by which of
  those forms actually ends with the suffix (``3:n`` "kolmen", ``3:nnen`` "kolmannen",
  ``3:s`` "kolmas", ``2:issa`` "kaksissa"). ``:tta``/``:ttä`` is the ordinal's partitive
  (``5:ttä`` "viidettä"; the cardinal's is ``5:tä`` "viittä"). After a unit or a currency the
  suffix belongs to the unit, and the number takes the same case ("neljälläkymmenellä
  prosentilla"). A suffix that is no Finnish case ending (``5:xyz``) is left as written.
* **The next word**, whose case an ordinal always agrees with ("3. sijalle" -> "kolmannelle
  sijalle", "3. ja 4. luokalla" -> "kolmannella ja neljännellä luokalla") and a cardinal
  does outside the nominative ("3 kaupungissa" -> "kolmessa kaupungissa", "5 minuutin" ->
  "viiden minuutin"; before a partitive, "3 kertaa", the cardinal stays "kolme").
  :func:`case_of_word` reads the case from the word's ending. It is deliberately cautious,
  because an ending is not always a case: it reads only endings that are rarely anything else
  (-ssa, -sta, -lla, -lta, -lle, -ksi, illatives with a long vowel, genitive -n), takes
  essives only from time words ("kolmantena päivänä"), skips passive verbs (-taan, -daan are
  never read as illatives), pronouns and postpositions (``vuoden 2020 jälkeen`` stays
  "kaksituhatta kaksikymmentä jälkeen"), capitalised words and numbers after a year word
  (``vuonna 1995``). An ordinal's partitive ("kolmatta kertaa") is read from -aa/-ää/-tta
  endings. Plural agreement ("kolmansilla luokilla") is not attempted: the singular is read.

Money (``12,50 €``, ``3,50 e``, ``50 snt``, ``5 $``) is euros and cents; units after a number
(km, kg, %, °C, min, h, ...) are spelled out; both inflect with the number. Decimals keep the
comma reading ("kolme pilkku viisi"), inflected part by part when a suffix asks for a case.
Dates are read in :mod:`fintts.tts.text`. A span of two numbers (``12–15``, ``klo 9–17``) is read from
the first to the second, elative and illative ("kahdestatoista viiteentoista"), as a Finn reads it; a
phone number digit by digit; a price per unit (``€/kg``) "euroa kilolta".
"""

from __future__ import annotations

import dataclasses
import re

from num2words import num2words

CASES = ("nominative", "genitive", "partitive", "inessive", "elative", "illative", "adessive", "ablative",
         "allative", "essive", "translative", "abessive", "instructive", "comitative")

#: A colon suffix: letters right after a colon, not followed by more letters or digits.
SUFFIX = r"(?::(?P<suffix>[a-zåäö]{1,7})(?![\w]))"

_LETTERS = "a-zåäöéü"


def _fold(word: str) -> str:
    """Vowel harmony folded away: writers get ``:lla``/``:llä`` wrong, the case is the same."""
    return word.lower().translate(str.maketrans("äöy", "aou"))


# ----------------------------------------------------------------------------- numerals

def number_words(digits: str, case: str = "nominative", *, ordinal: bool = False, plural: bool = False) -> str:
    """``digits`` as a Finnish numeral in ``case``; a leading zero (``040``) is read digit by digit."""
    if len(digits) > 1 and digits.startswith("0"):
        return " ".join(num2words(int(d), lang="fi") for d in digits)
    return num2words(int(digits), lang="fi", to="ordinal" if ordinal else "cardinal", case=case, plural=plural)


def decimal_words(number: str, case: str = "nominative") -> str:
    """``3,05`` -> "kolme pilkku nolla viisi"; leading zeros of the fraction are said."""
    whole, _, fraction = number.partition(",")
    if not fraction:
        return number_words(whole, case)
    zeros = len(fraction) - len(fraction.lstrip("0"))
    rest = fraction[zeros:]
    spoken = ["nolla"] * zeros + ([number_words(rest, case)] if rest else [])
    return f"{number_words(whole, case)} pilkku {' '.join(spoken)}"


#: Suffix ending (folded) -> the readings it can be, most likely first.
_CARDINAL_FIRST = ((False, False), (True, False), (False, True), (True, True))  # (ordinal, plural)
_SUFFIX_RULES: tuple[tuple[str, tuple[tuple[str, bool, bool], ...]], ...] = (
    (r"ssa", tuple(("inessive", o, p) for o, p in _CARDINAL_FIRST)),
    (r"sta", tuple(("elative", o, p) for o, p in _CARDINAL_FIRST)),
    (r"lla", tuple(("adessive", o, p) for o, p in _CARDINAL_FIRST)),
    (r"lta", tuple(("ablative", o, p) for o, p in _CARDINAL_FIRST)),
    (r"lle", tuple(("allative", o, p) for o, p in _CARDINAL_FIRST)),
    (r"ksi", tuple(("translative", o, p) for o, p in _CARDINAL_FIRST)),
    (r"tta", (("partitive", True, False), ("partitive", False, False), ("abessive", False, False), ("abessive", True, False))),
    (r"na", tuple(("essive", o, p) for o, p in _CARDINAL_FIRST)),
    (r"a", (("partitive", False, False), ("partitive", True, False), ("partitive", False, True), ("partitive", True, True))),
    (r"(?:h[aeiou]n|seen|siin|([aeiou])\1n)", tuple(("illative", o, p) for o, p in _CARDINAL_FIRST)),
    (r"n", (("genitive", False, False), ("genitive", True, False), ("nominative", True, False), ("genitive", False, True),
            ("genitive", True, True))),
    (r"s", (("nominative", True, False),)),
    (r"t", (("nominative", False, True), ("nominative", True, True))),
)


def case_of_suffix(suffix: str, digits: str | None = None) -> tuple[str, bool, bool] | None:
    """``(case, ordinal, plural)`` a colon suffix asks for, or None when it is no case ending.

    With ``digits`` the reading whose word really ends with the suffix is chosen (``3:n``
    "kolmen" but ``3:nnen`` "kolmannen"); when none does (``1:s`` for "ensimmäinen") the
    case's most likely reading is taken.
    """
    folded = _fold(suffix)
    for ending, readings in _SUFFIX_RULES:
        if not re.fullmatch(rf"[a-z]*{ending}", folded):
            continue
        if digits is None:
            return readings[0]
        for case, ordinal, plural in readings:
            word = _fold(number_words(digits, case, ordinal=ordinal, plural=plural))
            if word.removesuffix("toista").endswith(folded):  # 12:lla: "kahdella|toista"
                return case, ordinal, plural
        return readings[0]
    return None


# ----------------------------------------------------------------------------- the next word

#: Words whose ending looks like a case but that a number before them does not agree with:
#: pronouns, postpositions and adverbs that follow numbers, common verbs.
_NO_AGREEMENT = frozenset("""
    on en ei ole olen olin oli ovat olla tulla mennä teen tein tulen menen näen saan voin
    kun jos niin kuin ennen vaan sekä mutta sillä koska joten siksi myös vain noin yli alle
    jälkeen aikana mennessä lähtien alkaen asti saakka aikaan verran mukaan kohdalla kohdassa välillä
    paikkeilla tienoilla tienoolla vuoksi takia myötä sisällä kuluessa päästä sitten kanssa luona
    lisäksi yhteensä yhdessä kesken vastaan varten ajan aikaisemmin myöhemmin edellä jäljessä
    minulla sinulla hänellä meillä teillä heillä minulle sinulle hänelle meille teille heille
    minulta sinulta häneltä meiltä teiltä heiltä minussa sinussa hänessä meissä teissä heissä
    minusta sinusta hänestä meistä teistä heistä minuun sinuun häneen meihin teihin heihin
    minun sinun hänen meidän teidän heidän sen sillä siltä sille siinä siitä siihen sinä
    tämän tällä tältä tälle tässä tästä tähän tuon tuolla tuolta tuolle tuossa tuosta tuohon
    niiden niillä niiltä niille niissä niistä niihin näiden näillä näiltä näille näissä näistä näihin
    jonka jolla jolta jolle jossa josta johon joiden joilla joissa joista joihin minkä missä mistä mihin
    täällä siellä tuolla kotona ulkona sisällä kotiin ulos kyllä yksi kaksi miksi ensiksi toiseksi
    enemmän vähemmän paljon hyvin kauan kokonaan yhtään tänään takaisin perään ympäri lasta miestä
    askelta kyyneltä säveltä
""".split())
#: Nominatives ending in -n (a genitive -n is far more common after a number: "tunnin", "päivän").
_NOMINATIVES_IN = frozenset("puhelin avain eläin kirjain soitin keitin istuin kuljetin laskin sytytin jäsen sydän lämmin avoin".split())
#: Words after which a number is a label (a year, a page), read in the nominative whatever follows.
_LABEL_WORDS = frozenset("""
    vuonna vuoden vuodesta vuoteen vuosi vuosina vuosien vuosista vuosiin v
    sivu sivulla sivun sivulta sivulle numero numeron numerolla kohta kohdan kohdassa luku luvussa luvun
    pykälä pykälän pykälässä huone huoneessa talo linja laituri laiturilta raide raiteelta portti portilta
""".split())
#: Essives are read only from time words: "päivänä", but a nominative "ikkuna" ends the same way.
_TIME_ESSIVES = re.compile(
    r"(?:päivä|aamu|ilta|yö|viikko|kuukaute|vuote|kerta|kevää|kesä|syksy|talve|sunnuntai|maanantai|tiistai"
    r"|keskiviikko|torstai|perjantai|lauantai|hetke|jakso)n[aä]"
)


def case_of_word(word: str, *, ordinal: bool) -> str | None:
    """The case a numeral takes before ``word``, or None for the nominative (see the module's docstring)."""
    if not word[:1].islower() or word in _NO_AGREEMENT or not re.fullmatch(f"[{_LETTERS}]+", word):
        return None
    folded = _fold(word)
    endings = [("ssa", "inessive"), ("lla", "adessive"), ("lta", "ablative"), ("lle", "allative"), ("ksi", "translative")]
    if ordinal:  # after a cardinal -sta is as often a partitive ("kolme ihmistä", "viisi lasta") as an elative
        endings.append(("sta", "elative"))
    for ending, case in endings:
        if folded.endswith(ending) and len(folded) > len(ending) + 1:
            return case
    if len(folded) > 4 and re.search(r"(?:(?:ii|oo|uu)n|(?:aa|ee|ii|oo|uu|ie|uo|ai|ei|oi|ui|au|ou|eu|iu)h[aeiou]n|seen|siin)$", folded):
        return "illative"  # "taloon", "maahan", "huoneeseen"
    if len(folded) > 4 and re.search(r"[^aeiou]aan$", folded) and not re.search(r"(?:[aeiou][td]|ll|nn|rr|ss|s[td]|h[td])aan$", folded):
        return "illative"  # "osaan", "kertaan", "hintaan"; not the passive "kerrotaan", "tehdään", "mennään"
    if _TIME_ESSIVES.fullmatch(word) or word == "vuonna":
        return "essive"
    if ordinal and len(folded) > 3 and re.search(r"(?:aa|tta)$", folded):
        return "partitive"  # "kolmatta kertaa"; a cardinal before a partitive is itself nominative
    genitive = re.search(r"[aeiou]n$", folded) and not re.search(r"(?:nen|aan)$", folded)
    if (genitive or len(folded) <= 4 and re.search(r"(?:aa|ee|ii|oo|uu)n$", folded)) and word not in _NOMINATIVES_IN:
        return "genitive"  # "päivän", "huoneen", "tunnin"; "maan", "puun"
    return None


def after_label(text: str, start: int) -> bool:
    """Whether the number at ``start`` follows a year word or a label word (``vuonna 1995``, ``sivulla 5``)."""
    previous = re.search(rf"([{_LETTERS}]+)\.?\s+$", text[:start], re.IGNORECASE)
    return bool(previous) and previous.group(1).lower() in _LABEL_WORDS


# ----------------------------------------------------------------------------- units and money

@dataclasses.dataclass(frozen=True)
class Noun:
    """A unit's noun, declined from its two stems (``prosenti-n`` but ``prosentti-na``)."""

    nominative: str
    weak: str
    strong: str
    partitive: str
    illative: str
    tail: str = ""  # words after the inflected one ("kilometriä tunnissa")

    def form(self, case: str, count: int = 2) -> str:
        """The noun after a number ``count``: nominative singular after 1, partitive after others."""
        a = self.partitive[-1]  # the vowel harmony of the last part of a compound ("kilometriä")
        endings = {"genitive": "n", "inessive": f"ss{a}", "elative": f"st{a}", "adessive": f"ll{a}", "ablative": f"lt{a}",
                   "allative": "lle", "translative": "ksi", "abessive": f"tt{a}"}
        if case == "nominative":
            word = self.nominative if count == 1 else self.partitive
        elif case == "partitive":
            word = self.partitive
        elif case == "illative":
            word = self.illative
        elif case == "essive":
            word = f"{self.strong}n{a}"
        elif case in endings:
            word = self.weak + endings[case]
        else:  # instructive, comitative: no unit reads so; the nominative reading
            word = self.nominative if count == 1 else self.partitive
        return f"{word} {self.tail}".strip()


_METRI = ("metri", "metri", "metri", "metriä", "metriin")
EURO = Noun("euro", "euro", "euro", "euroa", "euroon")
SENTTI = Noun("sentti", "senti", "sentti", "senttiä", "senttiin")
DOLLARI = Noun("dollari", "dollari", "dollari", "dollaria", "dollariin")

#: A unit of length, mass or volume written after a number -> its noun.
_MEASURES: dict[str, Noun] = {
    "km": Noun(*("kilo" + f for f in _METRI)),
    "cm": Noun(*("sentti" + f for f in _METRI)),
    "mm": Noun(*("milli" + f for f in _METRI)),
    "m": Noun(*_METRI),
    "kg": Noun("kilogramma", "kilogramma", "kilogramma", "kilogrammaa", "kilogrammaan"),
    "g": Noun("gramma", "gramma", "gramma", "grammaa", "grammaan"),
    "l": Noun("litra", "litra", "litra", "litraa", "litraan"),
    "dl": Noun("desilitra", "desilitra", "desilitra", "desilitraa", "desilitraan"),
    "ml": Noun("millilitra", "millilitra", "millilitra", "millilitraa", "millilitraan"),
}
#: The unit of time under a slash (``80 km/h``, ``3 m/s``, ``10 l/min``) -> what a Finn says after the measure: per
#: hour is "tunnissa", the inessive ("kahdeksankymmentä kilometriä tunnissa", "yksi litra minuutissa"); only the
#: measure inflects ("viidenkymmenen kilometrin tunnissa nopeudella").
_PER_TIME = {"h": "tunnissa", "min": "minuutissa", "s": "sekunnissa", "vrk": "vuorokaudessa"}

#: Unit written after a number -> its noun.
UNITS: dict[str, Noun] = {
    **{f"{unit}/{per}": dataclasses.replace(noun, tail=said) for unit, noun in _MEASURES.items() for per, said in _PER_TIME.items()},
    **_MEASURES,
    "°C": Noun("aste", "astee", "astee", "astetta", "asteeseen"),
    "°": Noun("aste", "astee", "astee", "astetta", "asteeseen"),
    "%": Noun("prosentti", "prosenti", "prosentti", "prosenttia", "prosenttiin"),
    "‰": Noun("promille", "promille", "promille", "promillea", "promilleen"),
    "min": Noun("minuutti", "minuuti", "minuutti", "minuuttia", "minuuttiin"),
    "h": Noun("tunti", "tunni", "tunti", "tuntia", "tuntiin"),
    "vrk": Noun("vuorokausi", "vuorokaude", "vuorokaute", "vuorokautta", "vuorokauteen"),
    "snt": SENTTI,
    "€": EURO,
    "$": DOLLARI,
}


#: The unit of a price per unit (``5 €/kg``) -> what a Finn says: "viisi euroa kilolta" (per kilo: the ablative;
#: per month or year: the inessive, "euroa kuukaudessa").
PER_UNIT = {"kg": "kilolta", "g": "grammalta", "l": "litralta", "dl": "desilitralta", "m": "metriltä", "km": "kilometriltä",
            "m2": "neliöltä", "m²": "neliöltä", "kpl": "kappaleelta", "hlö": "hengeltä", "h": "tunnilta", "pv": "päivältä",
            "vrk": "vuorokaudelta", "kk": "kuukaudessa", "vko": "viikossa", "v": "vuodessa", "kerta": "kerralta"}
_PER_NAMES = "|".join(re.escape(u) for u in sorted(PER_UNIT, key=len, reverse=True))


def _amount(digits: str, noun: Noun, case: str) -> str:
    count = int(digits)
    return f"{number_words(digits, case)} {noun.form(case, count)}"


def _money(whole: str, cents: str | None, noun: Noun, case: str) -> str:
    """Euros and cents: "kaksitoista euroa viisikymmentä senttiä"; no cents said when there are none."""
    parts = [] if int(whole) == 0 and cents and int(cents) else [_amount(whole, noun, case)]
    if cents and int(cents):
        parts.append(_amount(str(int(cents)), SENTTI, case))
    return " ".join(parts)


def _unit_case(suffix: str | None) -> str | None:
    if not suffix:
        return "nominative"
    reading = case_of_suffix(suffix)
    return reading[0] if reading else None


def read_money_and_units(text: str) -> str:
    """Currency and units after (or, for € and $, before) a number, with an optional colon suffix."""
    def money(m: re.Match) -> str:
        case = _unit_case(m.group("suffix"))
        if case is None:
            return m.group()
        noun = DOLLARI if m.group("unit") == "$" else EURO
        return _money(m.group("whole"), m.group("cents"), noun, case)

    text = re.sub(rf"(?P<cur>€|\$|(?<=[\d ])(?:e|eur|EUR|snt))\s?/\s?(?P<per>{_PER_NAMES})(?![{_LETTERS}])",
                  lambda m: f"{m.group('cur')} {PER_UNIT[m.group('per')]}", text)
    amount = r"(?P<whole>\d+)(?:,(?P<cents>\d{2})|,[-–])?"
    text = re.sub(rf"(?<![\d,.]){amount}\s?(?P<unit>€|e(?![{_LETTERS}\d-])|eur(?![{_LETTERS}])|EUR|\$){SUFFIX}?", money, text)
    text = re.sub(rf"(?<![\d,.]){amount}(?=\s?euroa\b)\s?(?P<unit>euroa)(?P<suffix>)", money, text)
    text = re.sub(rf"(?P<unit>[€$])\s?{amount}(?![\d,]){SUFFIX}?", money, text)
    names = "|".join(re.escape(u) for u in sorted(UNITS, key=len, reverse=True))

    def unit(m: re.Match) -> str:
        case = _unit_case(m.group("suffix"))
        if case is None:
            return m.group()
        noun = UNITS[m.group("unit")]
        number, first = m.group("number"), m.group("first")
        if first:  # 10–15 km: "kymmenestä viiteentoista kilometriä"; a descending pair is two numbers
            if case != "nominative" or "," in number or int(first) >= int(number):
                said = _amount(number, noun, case) if "," not in number else f"{decimal_words(number, case)} {noun.form(case, 2)}"
                return f"{number_words(first, case)} {said}"  # 40–50 %:lla: "neljälläkymmenellä viidelläkymmenellä prosentilla"
            return f"{number_words(first, 'elative')} {number_words(number, 'illative')} {noun.form('nominative', 2)}"
        if "," in number:
            return f"{decimal_words(number, case)} {noun.form(case, 2)}"
        return _amount(number, noun, case)

    return re.sub(rf"(?<![\d,.])(?:(?P<first>\d{{1,4}})\s?[–—-]\s?)?(?P<number>\d+(?:,\d+)?)\s?(?P<unit>{names}){SUFFIX}?(?![^\W\d_]|-)",
                  unit, text)


# ----------------------------------------------------------------------------- numbers in context

def _hours_minutes(hours: str, minutes: str | None, case: str) -> str:
    spoken = number_words(hours, case)
    if minutes and minutes != "00":
        spoken += " " + (f"nolla {number_words(minutes[1], case)}" if minutes[0] == "0" else number_words(minutes, case))
    return spoken


def read_clock_times(text: str) -> str:
    """``kello 14.30`` (``klo`` is already ``kello``), ``kello 16:een``, and a bare ``14.30``/``14:30``."""
    def clock(m: re.Match) -> str:
        reading = case_of_suffix(m.group("suffix")) if m.group("suffix") else ("nominative", False, False)
        if reading is None:
            return m.group()
        return f"{m.group('kello')}{_hours_minutes(m.group('h'), m.group('min'), reading[0])}"

    def clock_range(m: re.Match) -> str:
        if max(int(m.group("h")), int(m.group("h2"))) > 24:
            return m.group()
        return (f"{m.group('kello')}{_hours_minutes(m.group('h'), m.group('min'), 'elative')} "
                f"{_hours_minutes(m.group('h2'), m.group('min2'), 'illative')}")

    both = r"(?P<h>\d{1,2})(?:[.:](?P<min>\d{2}))?\s?[–—-]\s?(?P<h2>\d{1,2})(?:[.:](?P<min2>\d{2}))?(?![\d]|[.:]\d)"
    text = re.sub(rf"(?P<kello>\bkello\s+){both}", clock_range, text)  # kello 9–17: "yhdeksästä seitsemääntoista"
    text = re.sub(r"(?<![\d.,:])(?P<kello>)(?P<h>\d{1,2})[.:](?P<min>\d{2})\s?[–—-]\s?(?P<h2>\d{1,2})[.:](?P<min2>\d{2})(?![\d]|[.:]\d)",
                  clock_range, text)
    text = re.sub(rf"(?P<kello>\bkello\s+)(?P<h>\d{{1,2}})(?:[.:](?P<min>\d{{2}}))?(?![\d]){SUFFIX}?", clock, text)

    def bare(m: re.Match) -> str:
        if int(m.group("h")) > 23 or int(m.group("min")) > 59:
            return m.group()
        dated = "." in m.group() and not m.group("suffix") and m.string[m.end(): m.end() + 1] == "."
        padded = m.group("min").startswith("0") and not m.group("h").startswith("0")  # "10.05.": a time, as minutes are written
        if dated and not padded and 1 <= int(m.group("h")) <= 31 and 1 <= int(m.group("min")) <= 12:
            return m.group()  # "22.11.", "01.05.": a date, read in fintts.tts.text (a time written so is "klo 22.11")
        return clock(m)

    return re.sub(rf"(?<![\d.,:])(?P<kello>)(?P<h>\d{{1,2}})[.:](?P<min>\d{{2}})(?!\d|[.:]\d){SUFFIX}?", bare, text)


def read_suffixed_numbers(text: str) -> str:
    """``5:ltä`` "viideltä", ``3:nnen`` "kolmannen", ``3,5:llä``; an unknown suffix is left as written."""
    def suffixed(m: re.Match) -> str:
        number = m.group("number")
        reading = case_of_suffix(m.group("suffix"), number.partition(",")[0])
        if reading is None:
            return m.group()
        case, ordinal, plural = reading
        if "," in number:
            return decimal_words(number, case)
        return number_words(number, case, ordinal=ordinal, plural=plural)

    return re.sub(rf"(?<![\d.,])(?P<number>\d+(?:,\d+)?){SUFFIX}", suffixed, text)


_JOIN = r"(?:\s*,\s*|\s*[-–]\s*|\s+(?:ja|tai|sekä)\s+)"


def read_ordinals(text: str) -> str:
    """``N.`` before a lower-case word is an ordinal agreeing with it (through ``3. ja 4.`` chains)."""
    def ordinals(m: re.Match) -> str:
        case = case_of_word(m.group("word"), ordinal=True) or "nominative"
        chain = re.sub(r"(\d+)\.", lambda n: number_words(n.group(1), case, ordinal=True), m.group("chain"))
        return f"{number_words(m.group('n'), case, ordinal=True)}{chain}{m.group('space')}"

    return re.sub(rf"(?<![\d.,])(?P<n>\d+)\.(?P<chain>(?:{_JOIN}\d+\.)*)(?P<space>\s+)(?=(?P<word>[a-zåäöéü][{_LETTERS}]*))",
                  ordinals, text)


def read_cardinals(text: str) -> str:
    """Whole numbers left: in the case of the next word where it asks for one, else the nominative."""
    def cardinals(m: re.Match) -> str:
        word = m.group("word")
        case = None
        if word and not after_label(m.string, m.start()) and not m.group("n").startswith("0"):
            case = case_of_word(word, ordinal=False)
        case = case or "nominative"
        chain = re.sub(r"\d+", lambda n: number_words(n.group(), case), m.group("chain") or "")
        return f" {number_words(m.group('n'), case)}{chain} "

    return re.sub(rf"(?P<n>\d+)(?:(?P<chain>(?:\s+(?:ja|tai)\s+\d+)*)(?=\s+(?P<word>[{_LETTERS}]+)(?![\w])))?", cardinals, text)


#: Words before two numbers joined by a dash that make them a score or a result ("päättyi 1–3"), not a span.
_SCORE_WORDS = frozenset("päättyi päättyy voitti voittaa hävisi häviää tulos tuloksella tulokseen lukemin lukemat maalein erin".split())
_YEAR_WORDS = frozenset("vuonna vuosina vuosien vuosilta vuosille vuosiksi v".split())


def read_ranges(text: str) -> str:
    """``12–15`` "kahdestatoista viiteentoista": a span is read from its first number to its second.

    Only an ascending pair without leading zeros is a span: ``2–1`` is a score, ``040-123`` a phone
    number. After a score word (``päättyi 1–3``) the numbers are left as written, and years
    (``1939–1945``, ``vuosina 1990–1995``) are read as two years, as Finns say them.
    """
    def span(m: re.Match) -> str:
        first, second = m.group("a"), m.group("b")
        previous = re.search(rf"([{_LETTERS}]+)\.?\s+$", m.string[: m.start()], re.IGNORECASE)
        word = previous.group(1).lower() if previous else ""
        years = len(first) == len(second) == 4
        if int(first) >= int(second) or "0" in (first[0], second[0]) or years or word in _SCORE_WORDS | _YEAR_WORDS:
            return m.group()
        return f"{number_words(first, 'elative')} {number_words(second, 'illative')}"

    return re.sub(r"(?<![\d.,:–—-])(?P<a>\d{1,4})\s?[–—-]\s?(?P<b>\d{1,4})(?![\d,]|\.\d|\s?[–—-]\s?\d)", span, text)


#: Words after which digits are a phone number whatever their grouping ("puh. 123 4567").
_PHONE_WORDS = r"(?:\bpuh(?:\.|elin(?:numero)?(?:on|sta)?\b)|\btel\.?|\bgsm\b|\bnumeroon\b)"


def _digit_words(number: str) -> str:
    return " ".join(["plus"] * number.startswith("+") + [num2words(int(d), lang="fi") for d in number if d.isdigit()])


def read_phone_numbers(text: str) -> str:
    """A phone number digit by digit: ``040 123 4567`` "nolla neljä nolla yksi kaksi kolme neljä viisi kuusi seitsemän".

    A phone number is six or more digits in groups (spaces or hyphens) that start with ``+`` and a
    country code or with a zero (``+358 40 123 4567``, ``09-123 4567``), or any digits after
    ``puh.``, ``puhelin``, ``tel.``, ``gsm``. Run before digit groups are joined (``10 000``).
    """
    def phone(m: re.Match) -> str:
        return _digit_words(m.group()) if sum(c.isdigit() for c in m.group()) >= 6 else m.group()

    text = re.sub(rf"(?i)(?P<lead>{_PHONE_WORDS}\s*:?\s*)(?P<number>\+?\d[\d -]{{4,}}\d)(?![\d,]|\.\d)",
                  lambda m: m.group("lead") + _digit_words(m.group("number")), text)
    return re.sub(r"(?<![\w+])(?:\+\d{1,3}|0\d{1,3})(?:[ -]?\d{2,5}){1,4}(?![\d,]|\.\d)", phone, text)


#: Finnish names of the letters, as an acronym is spelled ("EU" "eeuu"); a name that ends in a
#: consonant takes a case ending through its stem ("HS:n" "hooässän").
_LETTER_NAMES = dict(zip("ABCDEFGHIJKLMNOPQRSTUVWXYZÅÄÖ", (
    "aa bee see dee ee äf gee hoo ii jii koo äl äm än oo pee kuu är äs tee uu vee kaksoisvee äks yy tset oo ää öö").split()))
_LETTER_STEMS = {"äf": "äffä", "äl": "ällä", "äm": "ämmä", "än": "ännä", "är": "ärrä", "äs": "ässä", "äks": "äksä", "tset": "tsetä"}


def read_acronym_suffixes(text: str) -> str:
    """``EU:n`` "eeuun", ``YK:ssa`` "yykoossa", ``NATO:n`` "naton": an acronym and its case ending as one word.

    Acronyms of up to three letters, or with no vowel, are spelled with the letters' names; longer
    ones are read as words (NATO, KELA). Without a colon suffix an all-capitals word is left as a
    word: a headline in capitals looks the same as an acronym.
    """
    def acronym(m: re.Match) -> str:
        letters, suffix = m.group("letters"), m.group("suffix")
        if len(letters) > 3 and re.search("[AEIOUYÄÖ]", letters):
            word = letters.lower()
            return word + ("i" if word[-1] not in "aeiouyäö" and suffix[0] not in "aeiouyäö" else "") + suffix
        names = [_LETTER_NAMES[letter] for letter in letters]
        return "".join(names[:-1]) + _LETTER_STEMS.get(names[-1], names[-1]) + suffix

    return re.sub(rf"(?<![\w])(?P<letters>[A-ZÅÄÖ]{{2,6}}){SUFFIX}", acronym, text)


# ----------------------------------------------------------------------------- Roman numerals

_ROMAN = {"I": 1, "V": 5, "X": 10}
#: I, V and X only, up to XXXIX: enough for every regnal number (Kaarle XII, Pius XII, Ludvig XVIII), and an
#: ``L`` or ``C`` after a word is more often a size or a letter ("Koko L", "C-vitamiini") than fifty or a hundred.
_ROMAN_NUMERAL = r"X{0,3}(?:IX|IV|V?I{0,3})"
#: A word before a Roman numeral that makes it a label's number, read as a cardinal ("osa II": "osa kaksi", as
#: "osa 2" is read); the label words of Arabic numbers count too (``luku``, ``pykälä``, ``kohta``).
_ROMAN_LABELS = _LABEL_WORDS | frozenset("""
    osa osassa osan osasta liite liitteessä liitteen vaihe vaiheessa kausi kaudella taso tasolla sarja sarjassa divisioona
    luokka luokassa vaihtoehto tyyppi tyypin ryhmä ryhmässä kuva kuvio taulukko artikla momentti näytös kierros jakso painos
""".split())


def _roman_value(numeral: str) -> int:
    values = [_ROMAN[letter] for letter in numeral]
    return sum(-v if v < after else v for v, after in zip(values, values[1:] + [0]))


def read_roman_numerals(text: str) -> str:
    """A Roman numeral after a capitalised name is a regnal ordinal: ``Kaarle XII`` "Kaarle kahdestoista",
    ``Kustaa III:n`` "Kustaa kolmannen", ``Aleksanteri II:lle`` "Aleksanteri toiselle".

    Finnish reads a ruler's or a pope's number as an ordinal in the case of the name (the colon suffix
    tells it, as for an Arabic ordinal, :func:`case_of_suffix`). After a label word (``osa II``,
    ``luku IV``, capitalised or not) the numeral is the label's number, a cardinal as ``osa 2`` is:
    "osa kaksi". Anywhere else a lone capital ``I``, ``V`` or ``X`` is left alone: it is no number
    without a name before it (an initial, a letter in a list), and Finnish has no pronoun "I".
    """
    def roman(m: re.Match) -> str:
        value, suffix = _roman_value(m.group("numeral")), m.group("suffix")
        reading = ("nominative", True, False) if suffix is None else case_of_suffix(suffix)
        if reading is None:
            return m.group()
        label = m.group("name").lower() in _ROMAN_LABELS
        return f"{m.group('name')} {number_words(str(value), reading[0], ordinal=not label)}"

    return re.sub(rf"(?<![\w-])(?P<name>[A-ZÅÄÖ][{_LETTERS}]+|(?i:{'|'.join(sorted(_ROMAN_LABELS))}))\s+"
                  rf"(?P<numeral>(?=[IVX])(?-i:{_ROMAN_NUMERAL})){SUFFIX}?(?![\w-])", roman, text)
