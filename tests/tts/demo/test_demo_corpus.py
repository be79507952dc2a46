"""The shipped demo corpus is present and well-formed, and make_corpus reproduces its layout."""

import shutil
from pathlib import Path

import pytest
import soundfile as sf

from fintts.tts.demo import make_corpus

CORPUS = make_corpus.DEFAULT_OUT
MAX_BYTES = 10_000_000


def _read_csv(path: Path) -> list[tuple[str, str]]:
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        clip_id, sep, text = line.partition("|")
        assert sep and clip_id and text.strip(), f"bad line in {path}: {line!r}"
        rows.append((clip_id, text))
    return rows


def _check_layout(root: Path) -> dict[str, list[tuple[str, str, bool]]]:
    """Assert the layout contract; returns {speaker: [(id, text, heldout), ...]}."""
    assert (root / "README.md").is_file()
    corpus = {}
    for speaker_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        wavs = speaker_dir / "wavs"
        assert wavs.is_dir(), f"{speaker_dir} has no wavs/"
        rows = [(i, t, False) for i, t in _read_csv(speaker_dir / "metadata.csv")]
        rows += [(i, t, True) for i, t in _read_csv(speaker_dir / "heldout.csv")]
        ids = [i for i, _, _ in rows]
        assert len(set(ids)) == len(ids), f"duplicate ids in {speaker_dir}"
        assert {p.stem for p in wavs.glob("*.flac")} == set(ids), "orphan or missing FLACs"
        for clip_id in ids:
            info = sf.info(wavs / f"{clip_id}.flac")
            assert (info.format, info.subtype) == ("FLAC", "PCM_16"), clip_id
            assert (info.samplerate, info.channels) == (16_000, 1), clip_id
            assert 0.3 < info.duration < 15.0, f"{clip_id}: {info.duration:.2f} s"
        corpus[speaker_dir.name] = rows
    training_text = {t for rows in corpus.values() for _, t, held in rows if not held}
    heldout_text = {t for rows in corpus.values() for _, t, held in rows if held}
    assert not training_text & heldout_text, "held-out text also appears in training"
    return corpus


def test_shipped_corpus_is_well_formed():
    if not CORPUS.is_dir():
        pytest.fail(f"{CORPUS} missing: run python -m fintts.tts.demo.make_corpus")
    corpus = _check_layout(CORPUS)
    clips = [row for rows in corpus.values() for row in rows]
    assert len(corpus) >= 4
    assert len(clips) >= 200
    assert all(any(held for _, _, held in rows) for rows in corpus.values())
    size = sum(p.stat().st_size for p in CORPUS.rglob("*") if p.is_file())
    assert size <= MAX_BYTES, f"corpus is {size / 1e6:.1f} MB"
    sentences = set(make_corpus.read_sentences(make_corpus.DEFAULT_SENTENCES))
    assert {text for _, text, _ in clips} <= sentences, "CSV text differs from sentences.txt"


def test_plan_holds_out_unseen_text_and_balances_speakers():
    sentences = [f"Lause numero {i}." for i in range(100)]
    clips = make_corpus.plan_clips(
        sentences, make_corpus.DEMO_SPEAKERS, heldout_per_speaker=5, shared_fraction=0.2, seed=0
    )
    heldout = {c.sentence_index for c in clips if c.heldout}
    training = [c for c in clips if not c.heldout]
    assert len(heldout) == 5 * len(make_corpus.DEMO_SPEAKERS)
    assert heldout.isdisjoint(c.sentence_index for c in training)
    assert {c.sentence_index for c in clips} == set(range(100))
    assert len(training) == 80 + 16
    per_speaker = [sum(c.speaker == s for c in training) for s in make_corpus.DEMO_SPEAKERS]
    assert max(per_speaker) - min(per_speaker) <= 4
    assert len({c.clip_id for c in clips}) == len(clips), "a sentence given twice to one speaker"
    assert clips == make_corpus.plan_clips(
        sentences, make_corpus.DEMO_SPEAKERS, heldout_per_speaker=5, shared_fraction=0.2, seed=0
    )


def test_build_refuses_non_empty_output(tmp_path):
    (tmp_path / "stale.flac").write_bytes(b"")
    with pytest.raises(FileExistsError):
        make_corpus.build_corpus(["Hyvää huomenta."], tmp_path)


@pytest.mark.process
@pytest.mark.skipif(shutil.which("espeak-ng") is None,
                    reason="espeak-ng not installed (apt-get install espeak-ng)")
def test_make_corpus_regenerates_same_layout(tmp_path):
    sentences = tmp_path / "sentences.txt"
    sentences.write_text(
        "# test sentences\nKello on 7.30.\nHyvää huomenta kaikille.\nVuonna 1870 satoi lunta.\n",
        encoding="utf-8",
    )
    out = tmp_path / "corpus"
    make_corpus.main(["--out", str(out), "--sentences", str(sentences),
                      "--heldout-per-speaker", "0", "--shared-fraction", "1"])
    corpus = _check_layout(out)
    assert sorted(corpus) == sorted(s.name for s in make_corpus.DEMO_SPEAKERS)
    spoken = [text for rows in corpus.values() for _, text, _ in rows]
    assert sorted(spoken) == sorted(2 * make_corpus.read_sentences(sentences))
