"""Validation's samples in TensorBoard beside the curves (issue 45): the AUDIO tab holds what each step sounds like."""

from __future__ import annotations

import io

import pytest
import soundfile as sf
from tensorboard.backend.event_processing.event_accumulator import AUDIO, SCALARS, EventAccumulator

from fintts.train import train
from trainer_helpers import QUIET
from vits_helpers import TRAINING_ONLY, tiny_config


@pytest.mark.slow
def test_each_validation_puts_its_samples_in_tensorboard_as_audio(tmp_path):
    config = tiny_config(tmp_path, max_steps=4, eval_every=2, eval_speakers=2, eval_sentences=["Kello on 7.30.", "Hyvää yötä."],
                         **TRAINING_ONLY)
    train(config, store=tmp_path / "store", **QUIET)
    board = EventAccumulator(str(tmp_path / "store" / "tb"), size_guidance={AUDIO: 0, SCALARS: 0}).Reload()
    tags = set(board.Tags()["audio"])
    assert tags == {"samples/0-espeak_f2", "samples/1-espeak_f2", "samples/0-espeak_m3", "samples/1-espeak_m3"}
    assert "val/mcd" in board.Tags()["scalars"]
    events = board.Audio("samples/1-espeak_m3")
    assert [e.step for e in events] == [2, 4]  # one per validation, at its step, as val/mcd
    heard, rate = sf.read(io.BytesIO(events[-1].encoded_audio_string))
    kept, kept_rate = sf.read(tmp_path / "store" / "checkpoints" / "step-00000004" / "samples" / "1-espeak_m3.wav")
    assert rate == kept_rate == 16000 and len(heard) == len(kept) > 1000  # the same sample a person finds in the checkpoint
