"""The GPU check's Chatterbox part in its dry run: a tiny T3 through the three modes on the CPU, judged where it can be."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_the_dry_run_times_every_mode_and_judges_what_holds_on_any_device(tmp_path):
    (tmp_path / "check" / "parts").mkdir(parents=True)  # the driver makes it before it starts a part
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--out", str(tmp_path / "check"), "--part", "chatterbox",
         "--dry-run"], cwd=tmp_path, capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    part = json.loads((tmp_path / "check" / "parts" / "chatterbox.json").read_text())
    assert part["status"] == "ok"
    rows = part["figures"]["rows"]
    assert [row["mode"] for row in rows] == ["full, checkpointing", "lora r=16", "full"]
    assert all(row["seconds_per_step"] > 0 and row["loss_scale"] >= 1 for row in rows)
    lora, full = rows[1], rows[2]
    assert lora["trainable_parameters"] < lora["parameters"] and full["trainable_parameters"] == full["parameters"]
    judged = {check["target"]: check["met"] for check in part["checks"]}
    assert judged["no NaN or inf loss in the fp16 T3 steps"] is True
    assert [met for target, met in judged.items() if "fits a T4" in target] == [None, None]  # judged on CUDA only
