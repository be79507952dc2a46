"""``fintts transcribe``: a recogniser's draft fills the empty transcripts of a prepared corpus, never typed ones (issue 45).

The recogniser here is a tiny wav2vec2 CTC model with random weights, made on the spot (no model can be
downloaded in the tests): what it hears is nonsense, but it goes through transformers' real pipeline,
feature extractor and tokenizer, as a Finnish checkpoint would.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import soundfile as sf

from corpus_sources import SENTENCES, speak
from trainer_helpers import in_process

#: every test here starts a process (a fintts command, a server's session, espeak-ng or ffmpeg): not the unit tier
pytestmark = pytest.mark.process


@pytest.fixture(scope="module")
def recogniser(tmp_path_factory) -> Path:
    import torch
    from transformers import Wav2Vec2Config, Wav2Vec2CTCTokenizer, Wav2Vec2FeatureExtractor, Wav2Vec2ForCTC, Wav2Vec2Processor

    out = tmp_path_factory.mktemp("asr")
    vocab = {"<pad>": 0, "|": 1, **{c: i + 2 for i, c in enumerate("abcdefghijklmnopqrstuvwxyzåäö")}}
    (out / "vocab.json").write_text(json.dumps(vocab))
    tokenizer = Wav2Vec2CTCTokenizer(str(out / "vocab.json"), pad_token="<pad>", word_delimiter_token="|", unk_token="<pad>")
    Wav2Vec2Processor(feature_extractor=Wav2Vec2FeatureExtractor(sampling_rate=16000), tokenizer=tokenizer).save_pretrained(out)
    config = Wav2Vec2Config(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16,
                            conv_dim=(8, 8), conv_stride=(5, 4), conv_kernel=(10, 4), num_conv_pos_embeddings=4,
                            num_conv_pos_embedding_groups=2, pad_token_id=0)
    torch.manual_seed(0)
    Wav2Vec2ForCTC(config).save_pretrained(out)
    return out


def _prepared(root: Path, typed: dict[int, str]) -> Path:
    """A corpus as fintts prepare leaves it (espeak-ng's 22,050 Hz clips, ``id|`` lines), some lines typed in since."""
    (root / "wavs").mkdir(parents=True)
    lines = []
    for n, sentence in enumerate(SENTENCES[:3], start=1):
        samples, rate = speak(sentence, "fi")
        sf.write(root / "wavs" / f"ilta_{n:04d}.wav", samples, rate, subtype="PCM_16")
        lines.append(f"ilta_{n:04d}|{typed.get(n, '')}")
    (root / "metadata.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def test_the_draft_fills_the_empty_lines_and_keeps_the_typed_ones(recogniser, tmp_path):
    corpus = _prepared(tmp_path / "corpus", {2: "Juna lähtee laiturilta kolme."})
    result = in_process("transcribe", str(corpus), "--model", str(recogniser), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "2 transcripts drafted" in result.stdout and "1 already written, kept" in result.stdout
    rows = dict(line.split("|") for line in (corpus / "metadata.csv").read_text(encoding="utf-8").splitlines())
    assert rows["ilta_0002"] == "Juna lähtee laiturilta kolme."
    assert all(re.fullmatch(r"[a-zåäö' ]+", rows[clip]) for clip in ("ilta_0001", "ilta_0003")), rows

    again = in_process("transcribe", str(corpus), "--model", str(recogniser), cwd=tmp_path)
    assert again.returncode == 0 and "already has a transcript" in again.stdout
    redone = in_process("transcribe", str(corpus), "--model", str(recogniser), "--redo", cwd=tmp_path)
    assert redone.returncode == 0 and "3 transcripts drafted" in redone.stdout


def test_a_recogniser_that_cannot_be_loaded_or_a_corpus_without_a_table_is_a_user_error(tmp_path):
    corpus = _prepared(tmp_path / "corpus", {})
    missing = in_process("transcribe", str(corpus), "--model", str(tmp_path / "no-such-model"), cwd=tmp_path)
    assert missing.returncode == 2 and "cannot load the speech recogniser" in missing.stderr and "hf download" in missing.stderr
    assert (corpus / "metadata.csv").read_text(encoding="utf-8").count("|\n") == 3  # untouched
    bare = in_process("transcribe", str(tmp_path), "--model", "x", cwd=tmp_path)
    assert bare.returncode == 2 and "metadata.csv not found" in bare.stderr


def _table(corpus: Path) -> dict[str, str]:
    return dict(line.split("|") for line in (corpus / "metadata.csv").read_text(encoding="utf-8").splitlines())


def test_an_interrupted_run_keeps_its_drafts_and_the_next_one_drafts_only_the_rest(recogniser, tmp_path):
    corpus = _prepared(tmp_path / "corpus", {})
    good = (corpus / "wavs" / "ilta_0002.wav").read_bytes()
    (corpus / "wavs" / "ilta_0002.wav").write_bytes(b"RIFF, but no audio")  # the run stops at clip 2 of 3

    stopped = in_process("transcribe", str(corpus), "--model", str(recogniser), cwd=tmp_path)
    assert stopped.returncode != 0 and "ilta_0002.wav" in stopped.stderr
    first = _table(corpus)
    assert re.fullmatch(r"[a-zåäö' ]+", first["ilta_0001"]) and first["ilta_0002"] == first["ilta_0003"] == ""

    (corpus / "wavs" / "ilta_0002.wav").write_bytes(good)
    again = in_process("transcribe", str(corpus), "--model", str(recogniser), cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "2 transcripts drafted" in again.stdout and "1 already written, kept" in again.stdout
    assert _table(corpus)["ilta_0001"] == first["ilta_0001"] and all(_table(corpus).values())


def test_a_line_typed_while_it_runs_is_kept(recogniser, tmp_path, monkeypatch):
    """The person types lines 2 and 3 while the recogniser is on clip 2: both are kept, clip 3 is not even heard."""
    from fintts.tts.corpus import transcribe

    corpus = _prepared(tmp_path / "corpus", {})
    table = corpus / "metadata.csv"
    read = transcribe.load_audio
    heard = []

    def meanwhile(path, rate):
        heard.append(path.stem)
        if path.stem == "ilta_0002":
            table.write_text(table.read_text(encoding="utf-8").replace("ilta_0002|\n", "ilta_0002|Kaksi.\n")
                             .replace("ilta_0003|\n", "ilta_0003|Kolme.\n"), encoding="utf-8")
        return read(path, rate)

    monkeypatch.setattr(transcribe, "load_audio", meanwhile)  # the audio is read as ever; the person types beside it
    result = transcribe.transcribe_corpus(corpus, str(recogniser), log=lambda line: None)

    rows = _table(corpus)
    assert rows["ilta_0002"] == "Kaksi." and rows["ilta_0003"] == "Kolme." and re.fullmatch(r"[a-zåäö' ]+", rows["ilta_0001"])
    assert result.drafted == ["ilta_0001"] and result.kept == 2 and heard == ["ilta_0001", "ilta_0002"]
