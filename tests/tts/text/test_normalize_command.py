"""``fintts normalize``: what the voice will say, one sentence a line, in-process through the CLI."""

import io
import json
from pathlib import Path

from fintts.cli import main
from fintts.tts.text import FALLBACK_VOCAB

TEXT = "Esim. Matti tuli klo 14.30. Lipun saa 12 €:lla!\n\nHän tuli 3. sijalle. Noin 40 %:lla"
SPOKEN = [
    "esimerkiksi matti tuli kello neljätoista kolmekymmentä",
    "lipun saa kahdellatoista eurolla",
    "hän tuli kolmannelle sijalle",
    "noin neljälläkymmenellä prosentilla",
]


def test_text_is_printed_as_spoken_one_sentence_a_line(capsys) -> None:
    assert main(["normalize", TEXT]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == SPOKEN and err == ""


def test_a_file_and_standard_input(tmp_path: Path, capsys, monkeypatch) -> None:
    (tmp_path / "teksti.txt").write_text(TEXT, encoding="utf-8")
    assert main(["normalize", "-f", str(tmp_path / "teksti.txt")]) == 0
    assert capsys.readouterr().out.splitlines() == SPOKEN

    monkeypatch.setattr("sys.stdin", io.StringIO(TEXT))
    assert main(["normalize", "-f", "-"]) == 0
    assert capsys.readouterr().out.splitlines() == SPOKEN

    monkeypatch.setattr("sys.stdin", io.StringIO("Soitan 5:ltä."))  # piped, no -f
    assert main(["normalize"]) == 0
    assert capsys.readouterr().out.splitlines() == ["soitan viideltä"]


def test_a_voices_own_characters_are_used_and_the_rest_named(tmp_path: Path, capsys) -> None:
    vocab = {symbol: index for index, symbol in enumerate(s for s in FALLBACK_VOCAB if s != "ö")}
    (tmp_path / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    (tmp_path / "config.json").write_text("{}", encoding="utf-8")

    assert main(["normalize", "--voice", str(tmp_path), "Öisin 5:ltä. Привет"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == ["oisin viideltä"]  # a voice without "ö" says the nearest letter it has
    assert "'п'" in err and "'ö'" not in err


def test_nothing_to_read_is_a_usage_error(tmp_path: Path, capsys) -> None:
    assert main(["normalize", "-f", str(tmp_path / "missing.txt")]) == 2
    assert "missing.txt: no such file" in capsys.readouterr().err
    assert main(["normalize", "   "]) == 2
    assert "the text is empty" in capsys.readouterr().err
    assert main(["normalize", "hei", "-f", str(tmp_path / "x.txt")]) == 2
