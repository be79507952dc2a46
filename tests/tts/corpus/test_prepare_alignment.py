"""``fintts prepare --script`` on long recordings at 16, 22.05, 44.1 and 48 kHz: every clip holds exactly its sentence (issue 56).

The recordings are espeak-ng's Finnish, one sentence at a time, joined with known pauses, so the
truth of every sentence's first and last sample is known before ``prepare`` looks; a sentence
longer than ``--max-seconds`` and a recording read with no pauses at all must come out named,
never cut inside a word or joined to another sentence.
"""

from __future__ import annotations

import functools
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from scipy.signal import resample_poly

from corpus_sources import long_recording, speak
from trainer_helpers import in_process

SCRIPT = [
    "Hyvää huomenta, tänään sataa lunta.", "Juna lähtee laiturilta kolme.", "Suomen kieli on kaunis kieli.",
    "Kahvi on valmista, tule syömään.", "Kirjasto aukeaa kello yhdeksän.", "Metsässä kasvaa mustikoita ja puolukoita.",
    "Isoäiti leipoo pullaa joka lauantai.", "Kissa nukkuu ikkunalaudalla auringossa.", "Tänään on tiistai.",
    "Lähdemme kotiin, kun aurinko laskee.", "Järven jää on vielä liian ohutta.", "Veljeni asuu Tampereella.",
    "Bussi oli taas myöhässä.", "Ostin torilta tuoreita mansikoita.", "Sauna lämpenee puolessa tunnissa.",
    "Koira haukkuu postinkantajalle.", "Syksyllä lehdet muuttuvat keltaisiksi.", "Hän soittaa viulua orkesterissa.",
    "Pöydällä on kolme kirjaa.", "Muista sammuttaa valot lähtiessäsi.", "Lapset leikkivät pihalla koko illan.",
    "Talvella pimeää riittää.", "Mökillä ei ole sähköä eikä juoksevaa vettä.", "Kokous alkaa vartin päästä.",
    "Laiva saapuu satamaan aamulla.", "Tuuli yltyi myrskyksi yön aikana.",
    "Kun kevät vihdoin tuli, koko kylä kokoontui rantaan katsomaan, miten jäät lähtivät, ja vanhimmat kertoivat "
    "tarinoita keväistä, jolloin vesi nousi pihoille asti ja veneet piti vetää metsän reunaan turvaan.",
    "Hyvää yötä ja kauniita unia.", "Aamupalaksi syön puuroa.", "Posti tuo lehden joka aamu.",
    "Puhelin soi keskellä yötä.", "Kaupunki heräsi hitaasti.", "Ikkunan takana satoi vettä.",
    "Juhlat pidettiin vanhalla koululla.", "Hän luki kirjan yhdessä illassa.", "Tie oli liukas ja mutkainen.",
    "Kalastaja souti verkoille.", "Linnut palasivat etelästä.", "Illalla kuuntelimme radiota.", "Pitkä päivä on takana.",
]
LONG = 26  # longer than --max-seconds 8 when read, with only a comma's pauses inside
#: the recordings, by file name (sorted: the script's order): rate, format, which sentences, and whether read with pauses
RECORDINGS = {
    "1_ilta.wav": (16000, "PCM_16", range(0, 6), True),
    "2_ilta.wav": (22050, "PCM_16", range(6, 33), True),  # 2 min: 10 ms counted for 220 samples is 0.3 s late at its end
    "3_ilta.wav": (44100, "PCM_16", range(33, 36), True),  # stereo
    "4_ilta.wav": (48000, "PCM_24", range(36, 40), False),  # read without a pause: one stretch of four sentences
}


@functools.cache
def _said(text: str) -> np.ndarray:
    """espeak-ng saying ``text`` at 22,050 Hz, its own silence at the ends cut off."""
    samples, _ = speak(text, "fi")
    voiced = np.flatnonzero(np.abs(samples) > 1e-3)
    return samples[voiced[0]: voiced[-1] + 1]


def _record(folder: Path) -> dict[str, list[tuple[float, float]]]:
    """Each recording made at 22,050 Hz (pauses of 0.6-1.2 s between sentences, room noise) and resampled to its
    rate; returns where each sentence's sound starts and ends, in seconds."""
    rng = np.random.default_rng(56)
    folder.mkdir()
    truth = {}
    for name, (rate, subtype, which, paused) in RECORDINGS.items():
        parts, where, at = [np.zeros(11025, dtype=np.float32)], [], 11025
        for n in which:
            samples = _said(SCRIPT[n])
            where.append((at / 22050, (at + len(samples)) / 22050))
            gap = np.zeros(int(rng.uniform(0.6, 1.2) * 22050) if paused else 0, dtype=np.float32)
            parts += [samples, gap]
            at += len(samples) + len(gap)
        audio = np.concatenate([*parts, np.zeros(22050, dtype=np.float32)])
        if rate != 22050:
            step = math.gcd(rate, 22050)
            audio = resample_poly(audio, rate // step, 22050 // step).astype(np.float32)
        audio += rng.normal(0, 10 ** (-60 / 20), len(audio)).astype(np.float32)
        sf.write(folder / name, np.stack([audio, audio], axis=1) if rate == 44100 else audio, rate, subtype=subtype)
        truth[name] = where
    return truth


def _table(path: Path) -> list[dict[str, str]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [dict(zip(lines[0].split("\t"), line.split("\t"))) for line in lines[1:]]


@pytest.mark.process
def test_every_clip_holds_exactly_its_sentence_at_every_rate_and_what_does_not_line_up_is_named(tmp_path):
    truth = _record(tmp_path / "recordings")
    script = tmp_path / "script.txt"
    script.write_text(" ".join(SCRIPT) + "\n", encoding="utf-8")
    result = in_process("prepare", str(tmp_path / "recordings"), "--out", str(tmp_path / "corpus"), "--script", str(script),
                        "--max-seconds", "8", cwd=tmp_path)
    assert result.returncode == 0, result.stderr

    unaligned = {LONG, 36, 37, 38, 39}
    assert f"{len(SCRIPT) - len(unaligned)} of the {len(SCRIPT)} sentences" in result.stdout, result.stdout
    assert re.search(rf"sentence {LONG + 1} \('Kun kevät.*longer than --max-seconds 8: left out; raise --max-seconds",
                     result.stdout), result.stdout
    assert "sentences 37-40 (Kalastaja souti" in result.stdout and "read without a pause between them in 4_ilta.wav" in result.stdout

    metadata = (tmp_path / "corpus" / "metadata.csv").read_text(encoding="utf-8").splitlines()
    clips = _table(tmp_path / "corpus" / "clips.tsv")
    assert [line.split("|")[0] for line in metadata] == [c["id"] for c in clips]
    texts = [line.split("|", 1)[1] for line in metadata]
    assert texts == [s for n, s in enumerate(SCRIPT) if n not in unaligned]  # every sentence that lined up, in order
    firsts = {name: which.start for name, (_, _, which, _) in RECORDINGS.items()}
    for clip, text in zip(clips, texts):
        name = Path(clip["recording"]).name
        said = truth[name]
        n = SCRIPT.index(text) - firsts[name]
        start, end = float(clip["start"]), float(clip["end"])
        assert start <= said[n][0] and end >= said[n][1], (clip, text, said[n])  # all of its sentence...
        assert n == 0 or start >= said[n - 1][1], (clip, text)  # ...and nothing of the one before or after
        assert n + 1 == len(said) or end <= said[n + 1][0], (clip, text)
        rate = RECORDINGS[name][0]
        audio, clip_rate = sf.read(tmp_path / "corpus" / "wavs" / f"{clip['id']}.wav", dtype="float32")
        recording, _ = sf.read(clip["recording"], dtype="float32", always_2d=True, start=round(start * rate), frames=len(audio))
        assert clip_rate == rate and abs(len(audio) - (end - start) * rate) <= 1
        assert np.abs(audio - recording.mean(axis=1)).max() < 1e-3, clip  # the clip is those samples of its recording

    check = in_process("check", str(tmp_path / "corpus"), "--json", "--no-progress", cwd=tmp_path)
    report = json.loads(check.stdout)
    assert check.returncode == 0 and report["clips"] == len(clips) and not report["problems"], check.stdout[-2000:]


@pytest.mark.parametrize("rate", [11025, 22050])
def test_cuts_stay_in_the_pauses_to_the_end_of_a_long_recording_where_a_frame_is_not_10_ms(tmp_path, rate):
    """At 22,050 Hz a 10 ms frame is 220 samples (9.98 ms): counted as 10 ms, the cuts drift 0.23% late, 0.4 s after
    3 minutes, into the speech after each pause."""
    said = long_recording(tmp_path / "ilta.wav", rate, 180.0)
    result = in_process("prepare", str(tmp_path / "ilta.wav"), "--out", str(tmp_path / "corpus"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    clips = _table(tmp_path / "corpus" / "clips.tsv")
    assert len(clips) == len(said)
    for n, (clip, (first, last)) in enumerate(zip(clips, said)):
        start, end = float(clip["start"]), float(clip["end"])
        assert start <= first and end >= last, (clip, first, last)
        assert n == 0 or start >= said[n - 1][1], clip
        assert n + 1 == len(said) or end <= said[n + 1][0], clip
