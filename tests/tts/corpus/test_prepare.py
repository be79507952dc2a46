"""``fintts prepare``: long recordings cut at their pauses into a corpus that ``fintts check`` passes (issue 45)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from corpus_sources import SENTENCES, speak
from trainer_helpers import in_process

#: two recordings as a person reads a script: sentences (with commas inside: short pauses) and breaths between
READINGS = {
    "ilta1": [*SENTENCES[:4], "Kolme kertaa kolme on yhdeksän, ja se on totta."],
    "ilta2": [*SENTENCES[4:], "Tänään on tiistai.", "Lähdemme kotiin, kun aurinko laskee."],
}


def _said(text: str) -> tuple[np.ndarray, int]:
    """espeak-ng saying ``text``, its own silence at the ends cut off; a ``|`` is a 0.45 s pause (a breath mid-sentence)."""
    parts = []
    for piece in text.split("|"):
        samples, rate = speak(piece, "fi")
        voiced = np.flatnonzero(np.abs(samples) > 1e-3)
        parts += [samples[voiced[0]: voiced[-1] + 1], np.zeros(int(0.45 * rate), dtype=np.float32)]
    return np.concatenate(parts[:-1]), rate


def _record(folder: Path, seed: int = 0, readings: dict[str, list[str]] = READINGS) -> dict[str, list[tuple[float, float]]]:
    """Each reading as one long recording: pauses of 0.5-1.2 s between sentences, a room's hiss under all of it
    (and under the second, a DC offset).

    Returns where each sentence's sound starts and ends, in seconds.
    """
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    spans = {}
    for name, sentences in readings.items():
        parts, where, at = [], [], 0.0
        rate = 22050
        for sentence in sentences:
            gap = np.zeros(int(rng.uniform(0.5, 1.2) * rate), dtype=np.float32)
            samples, rate = _said(sentence)  # espeak-ng's own silence at the ends is part of the gap
            at += len(gap) / rate
            where.append((at, at + len(samples) / rate))
            at += len(samples) / rate
            parts += [gap, samples]
        parts.append(np.zeros(rate, dtype=np.float32))
        audio = np.concatenate(parts)
        audio = audio + rng.normal(0, 10 ** (-62 / 20), len(audio)).astype(np.float32)  # -62 dBFS of room noise
        if name == "ilta2":
            audio += 0.05  # a cheap microphone's DC offset: as loud as quiet speech, and no sound
        sf.write(folder / f"{name}.flac", audio, rate)
        spans[name] = where
    return spans


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("recordings") / "recordings"
    return folder, _record(folder)


def _clips(corpus: Path) -> list[dict[str, str]]:
    lines = (corpus / "clips.tsv").read_text(encoding="utf-8").splitlines()
    header = lines[0].split("\t")
    return [dict(zip(header, line.split("\t"))) for line in lines[1:]]


@pytest.mark.process
def test_cuts_land_in_the_pauses_and_the_script_fills_a_corpus_that_check_passes(recorded, tmp_path):
    folder, spans = recorded
    script = tmp_path / "script.txt"
    script.write_text("\n\n".join(" ".join(s) for s in READINGS.values()) + "\n", encoding="utf-8")
    result = in_process("prepare", str(folder), "--out", str(tmp_path / "corpus"), "--script", str(script), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "9 clips" in result.stdout and "fintts check" in result.stdout

    clips = _clips(tmp_path / "corpus")
    expected = [(name, n) for name, where in spans.items() for n in range(len(where))]
    assert len(clips) == len(expected)
    for clip, (name, n) in zip(clips, expected):
        start, end = float(clip["start"]), float(clip["end"])
        said = spans[name]
        assert Path(clip["recording"]).stem == name
        assert said[n][0] - 0.25 <= start <= said[n][0], (clip, said[n])  # in the pause before it, at most 0.2 s of it
        assert said[n][1] <= end <= said[n][1] + 0.25, (clip, said[n])
        if n:
            assert start >= said[n - 1][1]  # nothing of the sentence before
        if n + 1 < len(said):
            assert end <= said[n + 1][0]

    metadata = (tmp_path / "corpus" / "metadata.csv").read_text(encoding="utf-8").splitlines()
    assert metadata == [f"{c['id']}|{s}" for c, s in zip(clips, [s for r in READINGS.values() for s in r])]
    check = in_process("check", str(tmp_path / "corpus"), "--json", "--no-progress", cwd=tmp_path)
    report = json.loads(check.stdout)
    assert check.returncode == 0 and report["clips"] == 9 and not report["problems"], check.stdout[-2000:]


@pytest.mark.process
def test_without_a_script_the_table_waits_for_the_transcripts_and_check_names_each_empty_one(recorded, tmp_path):
    folder, _ = recorded
    result = in_process("prepare", str(folder / "ilta1.flac"), "--out", str(tmp_path / "corpus"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "write what is said in each clip" in result.stdout
    lines = (tmp_path / "corpus" / "metadata.csv").read_text(encoding="utf-8").splitlines()
    assert lines == [f"ilta1_{n:04d}|" for n in range(1, 6)]
    report = json.loads(in_process("check", str(tmp_path / "corpus"), "--json", "--no-progress", cwd=tmp_path).stdout)
    assert len(report["problems"]) == 5 and all("ilta1_" in p["path"] for p in report["problems"])


@pytest.mark.process
def test_speech_the_script_does_not_have_is_named_and_left_out_and_the_sentences_that_line_up_are_filled(recorded, tmp_path):
    folder, spans = recorded
    script = tmp_path / "script.txt"
    script.write_text(" ".join(READINGS["ilta1"][:-1]) + "\n", encoding="utf-8")  # one sentence short
    result = in_process("prepare", str(folder / "ilta1.flac"), "--out", str(tmp_path / "corpus"), "--script", str(script),
                        cwd=tmp_path)
    assert result.returncode == 0 and "4 of the 4 sentences" in result.stdout, result.stdout
    last = spans["ilta1"][-1]
    assert f"ilta1.flac 0:{last[0]:04.1f}" in result.stdout and "matched no sentence" in result.stdout, result.stdout
    lines = (tmp_path / "corpus" / "metadata.csv").read_text(encoding="utf-8").splitlines()
    assert lines == [f"ilta1_{n:04d}|{s}" for n, s in enumerate(READINGS["ilta1"][:-1], start=1)]


@pytest.mark.process
def test_transcripts_already_typed_are_never_overwritten_without_force(recorded, tmp_path):
    folder, _ = recorded
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "metadata.csv").write_text("ilta1_0001|Hyvää huomenta.\n", encoding="utf-8")
    result = in_process("prepare", str(folder), "--out", str(corpus), cwd=tmp_path)
    assert result.returncode == 2 and "already holds a corpus (metadata.csv" in result.stderr and "--force" in result.stderr
    assert (corpus / "metadata.csv").read_text(encoding="utf-8") == "ilta1_0001|Hyvää huomenta.\n"
    assert in_process("prepare", str(folder), "--out", str(corpus), "--force", cwd=tmp_path).returncode == 0


@pytest.mark.process
def test_a_long_stretch_without_a_sentence_pause_is_cut_at_its_longest_short_pause(recorded, tmp_path):
    folder, _ = recorded
    result = in_process("prepare", str(folder / "ilta1.flac"), "--out", str(tmp_path / "corpus"), "--min-pause", "2",
                        "--max-seconds", "6", cwd=tmp_path)  # no pause counts: only the length cuts
    assert result.returncode == 0, result.stderr
    clips = _clips(tmp_path / "corpus")
    assert len(clips) >= 3 and all(float(c["end"]) - float(c["start"]) <= 6 for c in clips)
    for clip in clips:  # cut in a pause (between sentences, or at a comma), never inside a word
        audio, rate = sf.read(tmp_path / "corpus" / "wavs" / f"{clip['id']}.wav")
        edge = int(0.01 * rate)
        assert max(np.abs(audio[:edge]).max(), np.abs(audio[-edge:]).max()) < 0.01, clip


def test_a_missing_recording_or_an_unreadable_one_is_a_user_error(tmp_path):
    missing = in_process("prepare", str(tmp_path / "nowhere.wav"), "--out", str(tmp_path / "corpus"), cwd=tmp_path)
    assert missing.returncode == 2 and "nowhere.wav does not exist" in missing.stderr
    (tmp_path / "broken.wav").write_bytes(b"not audio at all")
    broken = in_process("prepare", str(tmp_path / "broken.wav"), "--out", str(tmp_path / "corpus"), cwd=tmp_path)
    assert broken.returncode == 2 and "broken.wav: cannot be read as audio" in broken.stderr


@pytest.mark.process
def test_two_recordings_of_the_same_name_are_refused_before_one_overwrites_the_other(recorded, tmp_path):
    folder, _ = recorded
    (tmp_path / "toinen").mkdir()
    (tmp_path / "toinen" / "ilta1.flac").write_bytes((folder / "ilta1.flac").read_bytes())
    result = in_process("prepare", str(folder), str(tmp_path / "toinen"), "--out", str(tmp_path / "corpus"), cwd=tmp_path)
    assert result.returncode == 2 and "have the same name" in result.stderr and not (tmp_path / "corpus").exists()


@pytest.mark.process
def test_a_breath_inside_a_sentence_is_joined_when_the_script_says_it_is_one_sentence(tmp_path):
    readings = {"ilta": [*SENTENCES, "Kolme kertaa kolme on yhdeksän,|ja se on totta joka ikinen päivä.", "Tänään on tiistai.",
                         "Lähdemme kotiin, kun aurinko laskee.", "Hyvää yötä ja kauniita unia kaikille."]}
    spans = _record(tmp_path / "rec", readings=readings)
    script = tmp_path / "script.txt"
    script.write_text(" ".join(readings["ilta"]).replace("|", " ") + "\n", encoding="utf-8")
    result = in_process("prepare", str(tmp_path / "rec"), "--out", str(tmp_path / "corpus"), "--script", str(script), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "11 stretches of speech" in result.stdout and "10 of the 10 sentences" in result.stdout, result.stdout
    clips = _clips(tmp_path / "corpus")
    assert len(clips) == 10
    said = spans["ilta"][6]
    assert float(clips[6]["start"]) <= said[0] and float(clips[6]["end"]) >= said[1]  # the whole sentence, both halves
    check = json.loads(in_process("check", str(tmp_path / "corpus"), "--json", "--no-progress", cwd=tmp_path).stdout)
    assert check["clips"] == 10 and not check["problems"]

    wrong = tmp_path / "wrong.txt"  # a sentence of the script not read, another read that is not in it
    lines = [*readings["ilta"][:3], "Tämä lause on kirjoitettu käsikirjoitukseen mutta sitä ei luettu ääneen koskaan, "
             "vaikka se on hyvin pitkä ja siinä on monta sanaa.", *readings["ilta"][4:]]
    wrong.write_text(" ".join(lines).replace("|", " ") + "\n", encoding="utf-8")
    named = in_process("prepare", str(tmp_path / "rec"), "--out", str(tmp_path / "other"), "--script", str(wrong), cwd=tmp_path)
    assert named.returncode == 0 and "9 of the 10 sentences" in named.stdout, named.stdout
    assert "sentence 4 ('Tämä lause on kirjoitettu" in named.stdout and "not found" in named.stdout, named.stdout
    assert "(expected in ilta.flac after 0:07." in named.stdout, named.stdout  # after sentence 3, which ends at 7.8 s
    assert f"ilta.flac 0:{spans['ilta'][3][0]:04.1f}" in named.stdout and "matched no sentence" in named.stdout
    table = (tmp_path / "other" / "metadata.csv").read_text(encoding="utf-8").splitlines()
    assert [line.split("|", 1)[1] for line in table] == [s.replace("|", " ") for n, s in enumerate(readings["ilta"]) if n != 3]

