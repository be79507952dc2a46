"""What the trainer measures about itself: memory, where a session's time goes, its data's batches."""

from __future__ import annotations

import json

import pytest
import torch

from fintts.train import train
from fintts.train.run.state import PHASES
from trainer_helpers import QUIET, assert_bit_identical, final_weights, write_config


@pytest.mark.slow
def test_every_validation_and_the_summary_report_peak_memory(tmp_path):
    messages: list[str] = []
    summary = train(write_config(tmp_path, max_steps=8, eval_every=4), store=tmp_path / "store", progress=False, log=messages.append)
    validations = [m for m in messages if m.startswith("step ") and ": val/" in m]  # not the saves' and the stop's lines
    assert len(validations) == 2 and all("; memory: cpu " in m and "GiB peak RSS" in m for m in validations)
    status = json.loads((tmp_path / "store" / "status.json").read_text())
    (peak,) = status["memory"]
    assert peak["device"] == "cpu" and peak["rss_gib"] > 0.05  # torch alone is more than 50 MB resident
    assert summary.memory == status["memory"] and "GiB peak RSS" in summary.format()


@pytest.mark.process
def test_persistent_loader_workers_across_epochs_and_a_break_train_the_same_model(tmp_path):
    """One loader per session, its workers kept between epochs: the data order is still the plan's."""
    settings = dict(n_items=64, max_steps=11, adversarial=False, checkpoint_every_steps=0, eval_every=0)
    train(write_config(tmp_path, **settings), store=tmp_path / "inline", **QUIET)
    config = write_config(tmp_path, **settings, num_workers=2, persistent_workers=True)
    train(config, store=tmp_path / "workers", max_steps=6, **QUIET)  # 4 steps per epoch: stops inside epoch 1
    train(config, store=tmp_path / "workers", **QUIET)
    assert_bit_identical(final_weights(tmp_path / "workers"), final_weights(tmp_path / "inline"))


@pytest.mark.slow
def test_cuda_switches_are_put_back_after_a_session(tmp_path):
    before = torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32, torch.get_float32_matmul_precision()
    train(write_config(tmp_path, max_steps=2, cudnn_benchmark=True, tf32=not before[1]), store=tmp_path / "s", **QUIET)
    assert (torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32, torch.get_float32_matmul_precision()) == before


@pytest.mark.slow
def test_a_session_records_where_its_time_went_and_its_batches_padding(tmp_path):
    messages: list[str] = []
    train(write_config(tmp_path, n_items=64, max_steps=6, eval_every=3, checkpoint_every_steps=4),
          store=tmp_path / "store", progress=False, log=messages.append)
    status = json.loads((tmp_path / "store" / "status.json").read_text())
    phases = status["sessions"][0]["phases"]
    assert set(phases) == set(PHASES) and all(seconds >= 0 for seconds in phases.values())
    assert phases["steps"] > 0 and phases["validation"] > 0 and phases["checkpoints"] > 0 and phases["final"] > 0
    assert sum(phases.values()) - phases["before"] <= status["sessions"][0]["seconds"] + 0.1
    assert status["loss"]["step_seconds"] > 0
    data = status["data"]
    assert (data["items"], data["batch_size"], data["steps_per_epoch"], data["length_buckets"]) == (64, 16, 4, True)
    assert 0 < data["padding"]["bucketed"] < data["padding"]["unbucketed"] < 1
    assert any(m.startswith("data: 64 items, 4 steps per epoch") and "padding 11%" in m for m in messages)


@pytest.mark.slow
def test_epochs_decide_the_length_of_a_run(tmp_path):
    config = write_config(tmp_path, n_items=64, epochs=2.5, max_steps=1000, eval_every=0)
    summary = train(config, store=tmp_path / "store", **QUIET)
    assert summary.end_step == summary.max_steps == 10 and summary.state == "finished"  # 2.5 × 64 // 16
