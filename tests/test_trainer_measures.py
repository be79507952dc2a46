"""What the trainer measures about itself: memory, where a session's time goes, its data's batches."""

from __future__ import annotations

import json

from fintts.train import train
from trainer_helpers import write_config


def test_every_validation_and_the_summary_report_peak_memory(tmp_path):
    messages: list[str] = []
    summary = train(write_config(tmp_path, max_steps=8, eval_every=4), store=tmp_path / "store", progress=False, log=messages.append)
    validations = [m for m in messages if m.startswith("step ")]
    assert len(validations) == 2 and all("; memory: cpu " in m and "GiB peak RSS" in m for m in validations)
    status = json.loads((tmp_path / "store" / "status.json").read_text())
    (peak,) = status["memory"]
    assert peak["device"] == "cpu" and peak["rss_gib"] > 0.05  # torch alone is more than 50 MB resident
    assert summary.memory == status["memory"] and "GiB peak RSS" in summary.format()
