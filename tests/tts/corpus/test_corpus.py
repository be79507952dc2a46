"""Corpus layouts are detected and read; check_corpus reports every bad item and keeps the rest."""

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from fintts.tts.corpus import CorpusError, Item, check_corpus, detect_format, read_corpus


def _tone(path: Path, seconds: float = 1.0, rate: int = 16000, amplitude: float = 0.3) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    t = np.arange(int(seconds * rate)) / rate
    sf.write(path, (amplitude * np.sin(2 * np.pi * 220 * t)).astype(np.float32), rate)
    return path


def _ljspeech(root: Path, lines: list[str], ext: str = "wav") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "metadata.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for line in lines:
        clip_id = line.split("|")[0]
        if clip_id and clip_id != "id":
            _tone(root / "wavs" / f"{clip_id}.{ext}")
    return root


def _pair(folder: Path, stem: str, text: str, transcript_ext: str = ".lab") -> None:
    _tone(folder / f"{stem}.wav")
    (folder / f"{stem}{transcript_ext}").write_text(text, encoding="utf-8")


def _by_id(items: list[Item]) -> dict[str, Item]:
    return {item.id: item for item in items}


def test_ljspeech_uses_the_normalized_column_and_the_folder_as_speaker(tmp_path: Path) -> None:
    root = _ljspeech(tmp_path / "anna", ["a|Raw 1 text|Yksi teksti", "b|Toinen lause", "c|Kolmas|"])

    corpus = read_corpus(root)

    assert corpus.format == detect_format(root) == "ljspeech"
    items = _by_id(corpus.items)
    assert [items[i].text for i in "abc"] == ["Yksi teksti", "Toinen lause", "Kolmas"]
    assert {item.speaker for item in corpus.items} == {"anna"}
    assert items["a"].audio == root / "wavs" / "a.wav"
    assert corpus.problems == []


def test_ljspeech_problems_name_file_and_line(tmp_path: Path) -> None:
    root = _ljspeech(tmp_path / "c", ["a|Hyvä", "b|", "c|liian|monta|kenttää", "missing|Ei ääntä", "a|toistettu"])
    (root / "wavs" / "missing.wav").unlink()

    corpus = read_corpus(root)

    assert [item.id for item in corpus.items] == ["a"]
    reasons = [str(problem) for problem in corpus.problems]
    assert any("b.wav" in r and "empty transcript" in r and "line 2" in r for r in reasons)
    assert any("metadata.csv" in r and "line 3" in r and "4 fields" in r for r in reasons)
    assert any("missing" in r and "audio not found" in r and "line 4" in r for r in reasons)
    assert any("line 5" in r and "already listed on line 1" in r for r in reasons)


def test_ljspeech_speaker_column_is_detected_from_its_header(tmp_path: Path) -> None:
    root = _ljspeech(tmp_path / "multi", ["id|speaker|text", "a|anna|Hei", "b|pekka|Moi"])

    corpus = read_corpus(root)

    assert corpus.format == "ljspeech-speaker"
    assert {(i.id, i.speaker) for i in corpus.items} == {("a", "anna"), ("b", "pekka")}


def test_speaker_column_without_header_needs_the_format_forced(tmp_path: Path) -> None:
    root = _ljspeech(tmp_path / "multi", ["a|anna|Hei", "b|pekka|Moi"])

    assert read_corpus(root).items[0].text == "Hei"  # read as id|text|normalized
    forced = read_corpus(root, format="ljspeech-speaker")
    assert {(i.id, i.speaker, i.text) for i in forced.items} == {("a", "anna", "Hei"), ("b", "pekka", "Moi")}


def test_pairs_are_found_recursively_with_lab_or_txt(tmp_path: Path) -> None:
    root = tmp_path / "pairs"
    _pair(root, "one", "Yksi")
    _pair(root / "chapter", "two", "Kaksi\nriviä", transcript_ext=".txt")
    _tone(root / "orphan.wav")

    corpus = read_corpus(root, format="pairs")

    assert {(i.id, i.text, i.speaker) for i in corpus.items} == {
        ("one", "Yksi", "pairs"),
        ("chapter/two", "Kaksi riviä", "pairs"),
    }
    assert [(p.path.name, "no transcript" in p.reason) for p in corpus.problems] == [("orphan.wav", True)]


def test_pairs_directly_in_the_folder_are_detected(tmp_path: Path) -> None:
    _pair(tmp_path / "c", "x", "Hei")
    assert detect_format(tmp_path / "c") == "pairs"


def test_speaker_subfolders_of_ljspeech_flac_and_pairs(tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    _ljspeech(root / "anna", ["a1|Hei", "a2|Moi"], ext="flac")
    _pair(root / "pekka", "p1", "Terve")
    (root / "README.md").write_text("demo")

    corpus = read_corpus(root)

    assert corpus.format == detect_format(root) == "speakers"
    assert {(i.id, i.speaker, i.audio.suffix) for i in corpus.items} == {
        ("anna/a1", "anna", ".flac"),
        ("anna/a2", "anna", ".flac"),
        ("pekka/p1", "pekka", ".wav"),
    }


def test_nothing_recognized_says_what_was_looked_for(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    _tone(tmp_path / "lonely.wav")
    with pytest.raises(CorpusError, match="metadata.csv") as raised:
        detect_format(tmp_path)
    assert ".lab" in str(raised.value) and "subfolders" in str(raised.value) and "2 files" in str(raised.value)
    with pytest.raises(CorpusError, match="not a folder"):
        read_corpus(tmp_path / "nope")
    with pytest.raises(CorpusError, match="unknown corpus format"):
        read_corpus(tmp_path, format="csv")


def test_check_reports_every_bad_item_and_keeps_the_good(tmp_path: Path) -> None:
    root = tmp_path / "voice"
    lines = ["good|Hyvää huomenta", "corrupt|Rikki", "long|Pitkä", "short|Lyhyt", "silent|Hiljaa", "odd|Straße ☃ ok"]
    _ljspeech(root, lines)
    (root / "wavs" / "corrupt.wav").write_bytes(np.random.default_rng(0).bytes(2000))
    _tone(root / "wavs" / "long.wav", seconds=3.0)
    _tone(root / "wavs" / "short.wav", seconds=0.2)
    _tone(root / "wavs" / "silent.wav", amplitude=0.0)
    _tone(root / "wavs" / "good.wav", rate=22050)

    report = check_corpus(root, max_seconds=2.0, progress=False)

    assert [item.id for item in report.items] == ["good"]
    assert report.duration_seconds(report.items[0]) == pytest.approx(1.0)
    reasons = {problem.path.name: problem.reason for problem in report.problems}
    assert "cannot be read" in reasons["corrupt.wav"]
    assert "too long" in reasons["long.wav"]
    assert "too short" in reasons["short.wav"]
    assert "silent" in reasons["silent.wav"]
    assert "normalisation: '☃';" in reasons["odd.wav"]  # ß is read as "ss", so only ☃ is unknown
    assert report.sample_rates == {22050: 1}
    assert report.speakers["voice"].clips == 1

    text = report.format_text()
    for expected in ("Good clips: 1", "voice", "22050 Hz: 1 clips", "Durations", "corrupt.wav", "too long"):
        assert expected in text


def test_check_totals_per_speaker(tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    _ljspeech(root / "anna", ["a1|Hei", "a2|Moi"], ext="flac")
    _pair(root / "pekka", "p1", "Terve")

    report = check_corpus(root, progress=False)

    assert report.problems == []
    assert {name: s.clips for name, s in report.speakers.items()} == {"anna": 2, "pekka": 1}
    assert report.hours == pytest.approx(3 / 3600)


@pytest.mark.process
@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng is not installed; it makes the speech clip")
def test_check_accepts_real_finnish_speech(tmp_path: Path) -> None:
    root = tmp_path / "puhe"
    (root / "wavs").mkdir(parents=True)
    sentence = "Hyvää huomenta, tänään on 22.11.2026."
    subprocess.run(["espeak-ng", "-v", "fi", "-w", str(root / "wavs" / "s1.wav"), sentence], check=True)
    (root / "metadata.csv").write_text(f"s1|{sentence}\n", encoding="utf-8")

    report = check_corpus(root, progress=False)

    assert report.problems == []
    assert 1.0 < report.durations["s1"] < 10.0


def test_names_that_would_reach_outside_their_folder_are_problems(tmp_path: Path) -> None:
    root = tmp_path / "voices"
    root.mkdir()
    (root / "metadata.csv").write_text(
        "id|speaker|text\na|anna|Hyvää huomenta.\nb|../../outside|Hyvää iltaa.\n../c|anna|Terve.\n", encoding="utf-8"
    )
    for clip in ("a", "b"):
        _tone(root / "wavs" / f"{clip}.wav")
    _tone(tmp_path / "c.wav")  # what ../c would reach
    report = check_corpus(root)
    assert [item.id for item in report.items] == ["a"]
    reasons = " ".join(problem.reason for problem in report.problems)
    assert "speaker name '../../outside' cannot be used as part of a file name" in reasons
    assert "id '../c' must name a file under wavs/" in reasons


#: The same five rows in each table layout: good, a path outside the folder, a duplicate, missing audio, no text.
_TABLES = {
    "ljspeech": ("metadata.csv", "wavs/{}.wav", "transcript", "",
                 ["a|Hyvä", "../x|Pois", "a|Taas", "gone|Ei ääntä", "b|"]),
    "css10": ("transcript.txt", "fi/{}.wav", "transcript", "",
              ["fi/a.wav|Hyvä|Hyvä|1.0", "../x.wav|Pois|Pois|1.0", "fi/a.wav|Taas|Taas|1.0",
               "fi/gone.wav|Ei ääntä|Ei ääntä|1.0", "fi/b.wav|||1.0"]),
    "commonvoice": ("validated.tsv", "clips/{}.mp3", "sentence", "client_id\tpath\tsentence_id\tsentence",
                    ["c1\ta.mp3\ts1\tHyvä", "c1\t../x.mp3\ts2\tPois", "c1\ta.mp3\ts3\tTaas", "c1\tgone.mp3\ts4\tEi ääntä",
                     "c1\tb.mp3\ts5\t"]),
    "audiofolder": ("metadata.csv", "{}.wav", "transcription", "file_name,transcription",
                    ["a.wav,Hyvä", "../x.wav,Pois", "a.wav,Taas", "gone.wav,Ei ääntä", "b.wav,"]),
}


@pytest.mark.parametrize("layout", list(_TABLES))
def test_every_table_layout_refuses_the_same_bad_rows_in_the_same_words(tmp_path: Path, layout: str) -> None:
    table, audio, text_name, header, rows = _TABLES[layout]
    root = tmp_path / "corpus"
    root.mkdir()
    (root / table).write_text("\n".join(([header] if header else []) + rows) + "\n", encoding="utf-8")
    for stem in "ab":
        _tone(root / audio.format(stem), seconds=0.2)
    first = 2 if header else 1

    corpus = read_corpus(root)

    assert corpus.format == layout and [item.id.split("/")[-1] for item in corpus.items] == ["a"]
    outside, twice, missing, empty = (str(problem) for problem in corpus.problems)
    assert f"line {first + 1}: " in outside and "must name a file under" in outside
    assert f"line {first + 2}: " in twice and f"already listed on line {first}" in twice
    assert f"audio not found for {table} line {first + 3}" in missing and "gone" in missing
    assert missing.endswith("; add the file or remove the line")
    assert str(root / audio.format("b")) in empty
    assert empty.endswith(f": empty {text_name} ({table} line {first + 4}); write it or remove the line")


@pytest.mark.parametrize("layout, table, header, rows, files", [
    ("css10", "transcript.txt", "", ["fi/a.wav|Hyvä|Hyvä|1.0", "fi/a.flac|Taas|Taas|1.0"], ["fi/a.wav", "fi/a.flac"]),
    ("commonvoice", "validated.tsv", "client_id\tpath\tsentence_id\tsentence", ["c1\ta.mp3\ts1\tHyvä", "c1\ta.wav\ts2\tTaas"],
     ["clips/a.mp3", "clips/a.wav"]),
    ("audiofolder", "metadata.csv", "file_name,transcription", ["a.wav,Hyvä", "a.flac,Taas"], ["a.wav", "a.flac"]),
])
def test_two_rows_whose_clips_differ_only_in_extension_are_one_clip_listed_twice(tmp_path, layout, table, header, rows,
                                                                                   files):
    """An item's id is its path without the extension, and ids are unique in a corpus: the second row is refused."""
    root = tmp_path / "corpus"
    root.mkdir()
    (root / table).write_text("\n".join(([header] if header else []) + rows) + "\n", encoding="utf-8")
    for file in files:
        _tone(root / file, seconds=0.2)

    corpus = read_corpus(root)

    assert corpus.format == layout and [item.text for item in corpus.items] == ["Hyvä"]
    first = 2 if header else 1
    second = files[1].removeprefix("clips/")  # as the row lists it: Common Voice's paths are under clips/
    assert [str(problem) for problem in corpus.problems] == [
        f"{root / table}: line {first + 1}: {second} already listed on line {first}"]
