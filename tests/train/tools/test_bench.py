"""``fintts bench``: real steps of a config timed on this CPU, kept for ``fintts plan``; ``fintts status``'s estimate."""

from __future__ import annotations

import json
import re
import signal

import pytest

from trainer_helpers import FAULTY, assert_quiet, cli, in_process, start_cli, stop, wait_for_step, write_config
from vits_helpers import tiny_config

#: every test here starts a process (a fintts command, a server's session, espeak-ng or ffmpeg): not the unit tier
pytestmark = pytest.mark.process


def test_bench_compare_times_each_switch_and_plan_uses_the_kept_bench(tmp_path):
    config = str(write_config(tmp_path, step_delay=0.01))
    result = cli("bench", config, "--compare", "--steps", "2", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    rows = {row["label"]: row for row in report["rows"]}
    assert report["device"].startswith("1×cpu (") and list(rows)[0] == "config"
    assert {"precision=fp16", "precision=bf16", "length_buckets=false"} <= set(rows)
    for label in ("precision=fp16", "precision=bf16", "length_buckets=false"):
        assert rows[label]["seconds_per_step"] >= 0.01 and rows[label]["timed_steps"] == 2, label  # each step sleeps 10 ms
    assert rows["cudnn_benchmark=true"]["seconds_per_step"] is None and rows["cudnn_benchmark=true"]["note"] == "acts on CUDA only"
    base = rows["config"]
    assert base["samples_per_second"] == pytest.approx(16 / base["seconds_per_step"])
    assert base["memory"][0]["rss_gib"] > 0 and rows["length_buckets=false"]["padding"] > base["padding"]
    first = report["first"]
    assert first["phases"]["validation"] > 0 and first["phases"]["final"] > 0 and first["checkpoint_bytes"] > 0
    assert (tmp_path / "runs" / "toy" / "bench.json").is_file()

    plan = in_process("plan", config, "--samples", "2000", "--json", cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    planned = json.loads(plan.stdout)
    assert "no bench" not in plan.stderr  # the kept one was used, not a new one
    assert planned["costs"]["step"]["seconds"] == pytest.approx(base["seconds_per_step"])
    assert planned["costs"]["step"]["source"].startswith("measured: bench on 1×cpu")
    assert planned["sessions"] == 1 and planned["weeks"] > 0

    (tmp_path / "elsewhere.json").write_text(result.stdout)  # a bench made on another machine, brought here
    from_file = in_process("plan", config, "--samples", "2000", "--json", "--bench", "elsewhere.json", cwd=tmp_path)
    assert from_file.returncode == 0 and json.loads(from_file.stdout)["costs"]["step"] == planned["costs"]["step"]
    other = in_process("plan", config, "--samples", "2000", "--device", "T4", cwd=tmp_path)
    assert other.returncode == 2 and "no bench of this config on a device named like 'T4'" in other.stderr
    (tmp_path / "broken.json").write_text("{")
    broken = in_process("plan", config, "--samples", "2000", "--bench", "broken.json", cwd=tmp_path)
    assert broken.returncode == 2 and "--bench broken.json: not the JSON of fintts bench --json" in broken.stderr



def test_micro_batch_search_takes_out_of_memory_as_too_big_and_the_bench_is_kept(tmp_path):
    """A device with room for 20 items: the search doubles from the config's 16, bisects, and keeps every row.

    Each micro-batch sleeps 0.1 s whatever its size, so a step of 20 samples takes what one of 16 takes: 1.25× the
    samples per second, which is the speed the table gives it (an H200's search printed steps' ratio: 2026-11-26)."""
    config = str(write_config(tmp_path, task=FAULTY, oom_above=20, step_delay=0.1))
    result = cli("bench", config, "--search", "--steps", "1", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["largest_micro_batch"] == 20 and report["search_note"] == ""
    rows = {row["label"]: row for row in report["rows"]}
    assert rows["config"]["seconds_per_step"] > 0 and rows["micro_batch_size=20"]["seconds_per_step"] > 0
    for size in (32, 24, 22):
        row = rows[f"micro_batch_size={size}"]
        assert row["out_of_memory"] and row["error"].startswith("out of memory at step 1") and row["seconds_per_step"] is None
    kept = json.loads((tmp_path / "runs" / "toy" / "bench.json").read_text())["entries"]
    assert kept[0]["report"]["largest_micro_batch"] == 20
    out = cli("bench", config, "--search", "--steps", "1", cwd=tmp_path).stdout
    assert "largest micro-batch that fits in one device's memory: 20" in out
    table = {m["label"]: m for m in re.finditer(
        r"^(?P<label>config|micro_batch_size=\d+) +(?P<step>[\d.]+) +(?P<speed>[\d.]+)× +(?P<samples>[\d.]+) ", out, re.MULTILINE)}
    config_row, searched = table["config"], table["micro_batch_size=20"]
    assert float(searched["speed"]) == pytest.approx(float(searched["samples"]) / float(config_row["samples"]), abs=0.02)
    assert float(searched["speed"]) > 1.1  # 20 samples in the time of 16, give or take a loaded machine's jitter


def test_a_config_that_runs_out_of_memory_is_benched_kept_and_refused_by_plan(tmp_path):
    config = str(write_config(tmp_path, task=FAULTY, oom_above=8))
    result = cli("bench", config, "--search", "--steps", "1", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert re.search(r"^config +— .*out of memory at step 1", result.stdout, re.MULTILINE)
    assert "largest micro-batch that fits in one device's memory: 8" in result.stdout
    assert (tmp_path / "runs" / "toy" / "bench.json").is_file()
    plan = in_process("plan", config, "--samples", "2000", cwd=tmp_path)
    assert plan.returncode == 2 and "has no step time (out of memory" in plan.stderr and "lower micro_batch_size" in plan.stderr

@pytest.mark.parametrize(("budget", "seconds", "said"), [("2h", 7200, "of 2 h"), ("2m", 120, "of 2 min")])
def test_status_estimates_what_is_left_of_a_run_at_its_own_pace(tmp_path, budget, seconds, said):
    config = str(write_config(tmp_path, max_steps=4000, step_delay=0.05, checkpoint_every_steps=4))
    process = start_cli("train", config, "--store", "store", "--budget", budget, "--no-progress", cwd=tmp_path)
    wait_for_step(tmp_path / "store", 8, process)
    assert "asked to stop (SIGTERM)" in stop(process, signal.SIGTERM)
    status = json.loads(in_process("status", "--store", "store", "--json", cwd=tmp_path).stdout)
    left, estimate = 4000 - status["step"], status["estimate"]
    assert estimate["steps"] == left and status["clock"]["limit"] == seconds
    assert estimate["work_hours"] > left * 0.05 / 3600  # each step sleeps 50 ms
    text = in_process("status", "--store", "store", cwd=tmp_path).stdout
    # the session's length in words, as the budget was given (never "0.0333333 h"), the steps with thousands marked,
    # and a run on a CPU spends no GPU quota
    line = re.search(r"^estimate    .*$", text, re.MULTILINE).group(0)
    assert line.startswith(f"estimate    {left:,} steps left to step 4,000: {estimate['sessions']:,} more session(s) {said}, ")
    assert "h of CPU time" in line and "GPU" not in line and not re.search(r"\d\.\d{3,}", line)
    assert re.search(r"\d+\.\d%  SIGTERM$", text, re.MULTILINE)  # the session's share of time in steps
    devices = status["sessions"][0]["devices"]
    assert f" {devices} " in text  # the devices column names the device whole, however long


@pytest.mark.slow
def test_bench_of_a_vits_config_reports_audio_throughput_and_padding(tmp_path):
    result = cli("bench", str(tiny_config(tmp_path)), "--steps", "1", "--json", cwd=tmp_path, timeout=600)
    assert_quiet(result, "bench")  # what `fintts plan` runs without a kept bench: a session's loads, saves and export
    report = json.loads(result.stdout)
    base = report["rows"][0]
    # only the fresh session's end waits for the voice's ONNX export (a process of its own: seconds of imports alone);
    # the config's session, like every switch's, makes none for a store thrown away
    assert base["phases"]["final"] * 3 < report["first"]["phases"]["final"], (base["phases"], report["first"]["phases"])
    assert base["item_seconds"] == pytest.approx(2.2, abs=0.5)  # the demo corpus's clips last about 2 s
    assert base["data_seconds_per_second"] == pytest.approx(base["samples_per_second"] * base["item_seconds"])
    assert 0 <= base["padding"] < base["padding_other"]["unbucketed"]
