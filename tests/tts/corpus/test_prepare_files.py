"""``fintts prepare``'s files: what is not audio or holds no speech is named and skipped, clip ids the table can hold,
a corpus replaced whole or not at all, and memory that does not grow with a recording's length (issue 56)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from corpus_sources import long_recording
from fintts.tts.corpus.prepare import prepare_corpus
from trainer_helpers import in_process, start_cli


def _ids(corpus: Path) -> list[str]:
    return [line.split("|")[0] for line in (corpus / "metadata.csv").read_text(encoding="utf-8").splitlines()]


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.process
def test_a_file_that_is_not_audio_and_a_silent_recording_are_named_and_skipped_and_the_others_prepared(tmp_path):
    folder = tmp_path / "recordings"
    said = long_recording(folder / "ilta.wav", 16000, 20.0)
    heard = long_recording(tmp_path / "aamu.wav", 48000, 10.0, seed=4)  # and a 48 kHz mp3 of it, as a phone records
    subprocess.run(["ffmpeg", "-loglevel", "error", "-i", str(tmp_path / "aamu.wav"), "-c:a", "libmp3lame", str(folder / "aamu.mp3")],
                   check=True)
    (folder / "notes.wav").write_text("what I read on Tuesday\n", encoding="utf-8")
    sf.write(folder / "quiet.wav", np.zeros(5 * 16000, dtype=np.float32), 16000)
    sf.write(folder / "hiss.flac", np.random.default_rng(0).normal(0, 0.001, 5 * 16000).astype(np.float32), 16000)
    result = in_process("prepare", str(folder), "--out", str(tmp_path / "corpus"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"skipped {folder / 'notes.wav'}: cannot be read as audio" in result.stdout, result.stdout
    assert f"skipped {folder / 'quiet.wav'}: silent: no speech found (digital silence)" in result.stdout, result.stdout
    assert f"skipped {folder / 'hiss.flac'}: silent: no speech found" in result.stdout, result.stdout
    assert _ids(tmp_path / "corpus") == [*(f"aamu_{n:04d}" for n in range(1, len(heard) + 1)),
                                         *(f"ilta_{n:04d}" for n in range(1, len(said) + 1))]

    nothing = in_process("prepare", str(folder / "notes.wav"), str(folder / "quiet.wav"), "--out", str(tmp_path / "none"),
                         cwd=tmp_path)
    assert nothing.returncode == 2 and "no speech to prepare" in nothing.stderr and "notes.wav: cannot be read" in nothing.stderr
    assert "quiet.wav: silent" in nothing.stderr and not (tmp_path / "none" / "metadata.csv").exists()


def test_a_recording_named_with_a_bar_gets_clip_ids_that_the_table_can_hold(tmp_path):
    long_recording(tmp_path / "rec" / "ilta|1.wav", 16000, 12.0)
    result = in_process("prepare", str(tmp_path / "rec"), "--out", str(tmp_path / "corpus"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    table = tmp_path / "corpus" / "metadata.csv"
    ids = _ids(tmp_path / "corpus")
    assert ids and all(i.startswith("ilta_1_") for i in ids), ids
    table.write_text("".join(f"{i}|Hyvää iltaa.\n" for i in ids), encoding="utf-8")  # the person's transcripts
    check = in_process("check", str(tmp_path / "corpus"), "--json", "--no-progress", cwd=tmp_path)
    report = json.loads(check.stdout)
    assert check.returncode == 0 and report["clips"] == len(ids) and not report["problems"], check.stdout[-2000:]


def test_force_replaces_the_whole_corpus_leaving_no_stale_clip_and_keeps_the_old_table_aside(tmp_path):
    long_recording(tmp_path / "first" / "ilta.wav", 16000, 30.0)
    long_recording(tmp_path / "second" / "aamu.wav", 16000, 12.0, seed=1)
    corpus = tmp_path / "corpus"
    assert in_process("prepare", str(tmp_path / "first"), "--out", str(corpus), cwd=tmp_path).returncode == 0
    typed = "".join(f"{i}|Hyvää iltaa.\n" for i in _ids(corpus))
    (corpus / "metadata.csv").write_text(typed, encoding="utf-8")
    (corpus / "README.md").write_text("my voice\n", encoding="utf-8")

    result = in_process("prepare", str(tmp_path / "second"), "--out", str(corpus), "--force", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    ids = _ids(corpus)
    assert ids and all(i.startswith("aamu_") for i in ids)
    assert sorted(p.stem for p in (corpus / "wavs").iterdir()) == ids  # no clip of the first run left
    assert all(line.startswith("aamu_") for line in (corpus / "clips.tsv").read_text(encoding="utf-8").splitlines()[1:])
    kept = list(corpus.glob("metadata.csv.*.bak"))
    assert len(kept) == 1 and kept[0].read_text(encoding="utf-8") == typed and f"kept as {kept[0]}" in result.stdout
    assert (corpus / "README.md").read_text(encoding="utf-8") == "my voice\n"
    assert sorted(p.name for p in corpus.iterdir()) == sorted(["README.md", "clips.tsv", kept[0].name, "metadata.csv", "wavs"])


def test_clips_without_a_table_are_not_overwritten_without_force(tmp_path):
    long_recording(tmp_path / "rec" / "ilta.wav", 16000, 12.0)
    corpus = tmp_path / "corpus"
    assert in_process("prepare", str(tmp_path / "rec"), "--out", str(corpus), cwd=tmp_path).returncode == 0
    (corpus / "metadata.csv").unlink()  # the table moved away to be edited elsewhere: the clips are still what it names
    (corpus / "clips.tsv").unlink()
    before = _files(corpus)
    long_recording(tmp_path / "rec" / "ilta.wav", 16000, 12.0, seed=2)
    result = in_process("prepare", str(tmp_path / "rec"), "--out", str(corpus), cwd=tmp_path)
    assert result.returncode == 2 and "already holds a corpus (wavs/" in result.stderr and "--force" in result.stderr
    assert _files(corpus) == before


@pytest.mark.process
def test_a_run_killed_midway_under_force_leaves_the_old_corpus_whole_and_the_next_run_replaces_it(tmp_path):
    long_recording(tmp_path / "rec" / "ilta.wav", 48000, 40.0)
    corpus = tmp_path / "corpus"
    assert in_process("prepare", str(tmp_path / "rec"), "--out", str(corpus), cwd=tmp_path).returncode == 0
    typed = "".join(f"{i}|Hyvää iltaa.\n" for i in _ids(corpus))
    (corpus / "metadata.csv").write_text(typed, encoding="utf-8")
    before = _files(corpus)
    long_recording(tmp_path / "rec" / "ilta.wav", 48000, 240.0, seed=3, channels=2)  # recorded again, longer

    started = time.time_ns()
    process = start_cli("prepare", str(tmp_path / "rec"), "--out", str(corpus), "--force", cwd=tmp_path)
    try:  # killed as soon as it has written its first clip: mid-write, with most of the clips still to come
        while process.poll() is None and not _written_since(corpus, started):
            time.sleep(0.002)
        process.send_signal(signal.SIGKILL)
    finally:
        output = process.communicate(timeout=60)[0]
    assert process.returncode == -signal.SIGKILL, output  # it was still writing when killed
    assert {k: v for k, v in _files(corpus).items() if not k.startswith(".preparing")} == before

    result = in_process("prepare", str(tmp_path / "rec"), "--out", str(corpus), "--force", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert not (corpus / ".preparing").exists() and len(_ids(corpus)) > len(before) - 2
    assert [p.read_text(encoding="utf-8") for p in corpus.glob("metadata.csv.*.bak")] == [typed]


def _written_since(folder: Path, started: int) -> bool:
    """Whether a clip has been written anywhere under ``folder`` since ``started`` (ns)."""
    for path in folder.rglob("*.wav"):
        try:
            if path.stat().st_mtime_ns > started:
                return True
        except FileNotFoundError:  # moved while looked at
            continue
    return False


def _peak(recording: Path, out: Path) -> int:
    tracemalloc.start()
    try:
        prepare_corpus([recording], out, log=lambda line: None)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_does_not_grow_with_the_recordings_length(tmp_path):
    """A ten-minute recording needs no more memory than a one-minute one: both are read a block at a time (read
    whole, the long one's samples alone would be 38 MB of float32 here, an hour of 48 kHz stereo 1.4 GB)."""
    long_recording(tmp_path / "short" / "ilta.wav", 16000, 60.0)
    long_recording(tmp_path / "long" / "ilta.wav", 16000, 600.0)
    short = _peak(tmp_path / "short" / "ilta.wav", tmp_path / "a")
    long = _peak(tmp_path / "long" / "ilta.wav", tmp_path / "b")
    assert long < 1.5 * short, (short, long)
    assert len(_ids(tmp_path / "b")) > 150
