"""What a corpus from elsewhere can hold that is not what it should be, checked through `fintts check`: rows that are
not UTF-8, clips far too long to decode, symbolic links, Common Voice speakers whose names cannot be file names."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from fintts.cli import main

LATIN1 = "Hyvää päivää".encode("latin-1")  # what an old editor saves: 0xe4 for ä


def tone(path: Path, seconds: float = 1.0, rate: int = 16000) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    t = np.arange(int(seconds * rate)) / rate
    sf.write(path, (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32), rate)
    return path


def run_check(capsys, root: Path, *options: str) -> tuple[int, dict | None, str]:
    code = main(["check", str(root), "--json", "--no-progress", *options])
    out, err = capsys.readouterr()
    return code, json.loads(out) if out.strip().startswith("{") else None, err


# ---------------------------------------------------------------- rows that are not UTF-8


def ljspeech(root: Path) -> tuple[Path, int]:
    tone(root / "wavs" / "a.wav"), tone(root / "wavs" / "b.wav")
    (root / "metadata.csv").write_bytes(b"a|Hyv\xc3\xa4\xc3\xa4 huomenta\nb|" + LATIN1 + b"\n")
    return root / "metadata.csv", 2


def css10(root: Path) -> tuple[Path, int]:
    tone(root / "kirja" / "k_1.wav"), tone(root / "kirja" / "k_2.wav")
    (root / "transcript.txt").write_bytes(b"kirja/k_1.wav|" + LATIN1 + b"|" + LATIN1 + b"|1.0\n"
                                          b"kirja/k_2.wav|Toinen lause|Toinen lause|1.0\n")
    return root / "transcript.txt", 1


def commonvoice(root: Path) -> tuple[Path, int]:
    tone(root / "clips" / "a.wav"), tone(root / "clips" / "b.wav")
    rows = [b"client_id\tpath\tsentence", b"aaaaaaaa11\ta.wav\tToinen lause", b"bbbbbbbb22\tb.wav\t" + LATIN1]
    (root / "validated.tsv").write_bytes(b"\n".join(rows) + b"\n")
    return root / "validated.tsv", 3


def audiofolder(root: Path) -> tuple[Path, int]:
    tone(root / "a.wav"), tone(root / "b.wav")
    (root / "metadata.csv").write_bytes(b"file_name,transcription\na.wav," + LATIN1 + b"\nb.wav,Toinen lause\n")
    return root / "metadata.csv", 2


def audiofolder_jsonl(root: Path) -> tuple[Path, int]:
    tone(root / "a.wav"), tone(root / "b.wav")
    (root / "metadata.jsonl").write_bytes(b'{"file_name": "a.wav", "text": "Toinen lause"}\n'
                                          b'{"file_name": "b.wav", "text": "' + LATIN1 + b'"}\n')
    return root / "metadata.jsonl", 2


def kaldi(root: Path) -> tuple[Path, int]:
    tone(root / "audio" / "r1.wav"), tone(root / "audio" / "r2.wav")
    (root / "wav.scp").write_text("r1 audio/r1.wav\nr2 audio/r2.wav\n")
    (root / "text").write_bytes(b"r1 Toinen lause\nr2 " + LATIN1 + b"\n")
    (root / "utt2spk").write_text("r1 anna\nr2 anna\n")
    return root / "text", 2


@pytest.mark.parametrize("layout", [ljspeech, css10, commonvoice, audiofolder, audiofolder_jsonl, kaldi], ids=lambda f: f.__name__)
def test_a_row_that_is_not_utf8_is_a_problem_naming_its_file_and_line_and_the_rest_is_read(tmp_path, capsys, layout):
    table, line = layout(tmp_path / "corpus")
    code, report, err = run_check(capsys, tmp_path / "corpus")
    assert code == 0 and report is not None, err
    assert report["clips"] == 1
    reasons = [p["reason"] for p in report["problems"] if p["path"] == str(table)]
    assert any(r.startswith(f"line {line}: not UTF-8 text (byte 0xe4 at column ") and f"save {table.name} as UTF-8" in r
               for r in reasons), report["problems"]


def test_a_table_whose_header_is_not_utf8_is_an_error_naming_the_file(tmp_path, capsys):
    root = tmp_path / "cv"
    commonvoice(root)
    table = root / "validated.tsv"
    table.write_bytes(b"client_id\tpath\tsentence\tl\xe4hde\n" + table.read_bytes().split(b"\n", 1)[1])
    code, report, err = run_check(capsys, root)
    assert code == 2 and report is None
    assert f"{table}: line 1: not UTF-8 text (byte 0xe4 at column 26" in err and "the header" in err


# ---------------------------------------------------------------- a clip far too long


def sparse_wav(path: Path, seconds: float, rate: int = 48_000, channels: int = 2) -> Path:
    """A 16-bit PCM WAV of ``seconds`` of silence whose data is a hole in the file (no disk used)."""
    data = int(seconds * rate) * channels * 2
    header = (b"RIFF" + (36 + data).to_bytes(4, "little") + b"WAVEfmt " + (16).to_bytes(4, "little")
              + (1).to_bytes(2, "little") + channels.to_bytes(2, "little") + rate.to_bytes(4, "little")
              + (rate * channels * 2).to_bytes(4, "little") + (channels * 2).to_bytes(2, "little") + (16).to_bytes(2, "little")
              + b"data" + data.to_bytes(4, "little"))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(header)
        handle.truncate(len(header) + data)
    return path


def test_a_clip_far_too_long_is_refused_by_its_header_without_decoding_it(tmp_path, capsys):
    # 10 minutes of 48 kHz stereo: 230 MB as float32 samples once decoded (a 2-hour clip: 2.8 GB, and so on)
    root = tmp_path / "voice"
    sparse_wav(root / "wavs" / "long.wav", 600)
    tone(root / "wavs" / "short.wav")
    (root / "metadata.csv").write_text("long|Pitkä lause\nshort|Lyhyt lause\n", encoding="utf-8")
    tracemalloc.start()
    try:
        code, report, err = run_check(capsys, root)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert code == 0 and report["clips"] == 1, err
    assert any("too long: 600.0 s > 20.0 s" in p["reason"] for p in report["problems"]), report["problems"]
    assert peak < 50e6, f"check allocated {peak / 1e6:.0f} MB for a clip it refuses"


# ---------------------------------------------------------------- Common Voice speakers


def test_a_common_voice_client_id_that_cannot_be_a_file_name_is_a_problem_when_the_table_is_read(tmp_path, capsys):
    root = tmp_path / "cv"
    tone(root / "clips" / "a.wav"), tone(root / "clips" / "b.wav")
    rows = ["client_id\tpath\tsentence", "../../tmp/x\ta.wav\tHyvää huomenta", "cccccccc33\tb.wav\tToinen lause"]
    (root / "validated.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    code, report, err = run_check(capsys, root)
    assert code == 0 and [s["name"] for s in report["speakers"]] == ["cccccccc"], err
    assert any(p["reason"].startswith("line 2: speaker name '../../tm' cannot be used") for p in report["problems"]), report["problems"]


# ---------------------------------------------------------------- symbolic links


def test_symbolic_links_in_a_corpus_are_never_followed(tmp_path, capsys):
    secret = tone(tmp_path / "elsewhere" / "secret.wav")  # any file on this machine, e.g. a key, a token
    root = tmp_path / "voice"
    tone(root / "wavs" / "a.wav")
    (root / "wavs" / "b.wav").symlink_to(secret)
    (root / "wavs" / "linked").symlink_to(secret.parent, target_is_directory=True)  # a folder inside the corpus that is a link
    (root / "metadata.csv").write_text("a|Hyvää huomenta\nb|Toinen lause\nlinked/secret|Kolmas lause\n", encoding="utf-8")
    code, report, err = run_check(capsys, root, "--format", "ljspeech")
    assert code == 0 and report["clips"] == 1, err
    reasons = {Path(p["path"]).name: p["reason"] for p in report["problems"]}
    assert reasons["b.wav"].startswith("is a symbolic link; fintts never follows links inside a corpus")
    assert reasons["secret.wav"].startswith(f"is below {root / 'wavs' / 'linked'}, which is a symbolic link"), reasons
    # a table that is a link is not read at all
    (root / "metadata.csv").rename(tmp_path / "elsewhere" / "metadata.csv")
    (root / "metadata.csv").symlink_to(tmp_path / "elsewhere" / "metadata.csv")
    code, report, err = run_check(capsys, root, "--format", "ljspeech")
    assert code == 2 and "metadata.csv: is a symbolic link" in err
