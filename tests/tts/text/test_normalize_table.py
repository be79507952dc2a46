"""Written Finnish read aloud as a Finnish speaker reads it: the table in data/normalize_fi.tsv.

Each row is a sentence and what the voice says for it. The table covers issue 31's sentences,
every case a colon suffix marks (cardinals, ordinals, after units, money and times), ordinals
and cardinals agreeing with the next word, money, units, times, and what is left as written.
"""

from pathlib import Path

import pytest

from fintts.tts.text import FALLBACK_VOCAB, FinnishText

TABLE = Path(__file__).parent / "data" / "normalize_fi.tsv"


def _rows() -> list[tuple[str, str]]:
    rows = []
    for number, line in enumerate(TABLE.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        written, tab, spoken = line.partition("\t")
        assert tab and spoken and "\t" not in spoken, f"{TABLE.name}:{number}: want 'written<TAB>spoken', got {line!r}"
        rows.append((written, spoken))
    return rows


ROWS = _rows()


def test_the_table_is_large_and_has_no_repeats() -> None:
    assert len(ROWS) >= 100
    written = [w for w, _ in ROWS]
    assert len(set(written)) == len(written), [w for w in written if written.count(w) > 1]


@pytest.fixture(scope="session")
def text() -> FinnishText:
    return FinnishText.default()


@pytest.mark.parametrize(("written", "spoken"), ROWS, ids=[w for w, _ in ROWS])
def test_sentence_is_read_as_a_finnish_speaker_reads_it(text: FinnishText, written: str, spoken: str) -> None:
    assert text.normalize(written) == spoken


def test_what_is_said_stays_within_the_vocabulary(text: FinnishText) -> None:
    for written, _ in ROWS:
        assert text.unknown_chars(written) == set(), written
        assert set(text.normalize(written)) <= set(FALLBACK_VOCAB), written
