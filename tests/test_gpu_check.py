"""``benchmarks/gpu_check.py --dry-run``: the GPU session's one command keeps working, at toy size on the CPU.

The GPU check itself only runs where a GPU is lent (rarely, and for minutes); this runs every
one of its parts on the CPU the way the real run does — each in its own process, under its
time limit, the reports rewritten after each — so the script cannot rot between GPU sessions.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import gpu_check  # noqa: E402  (imports no torch: only the driver's table of parts)

#: every test here starts a process (a fintts command, a server's session, espeak-ng or ffmpeg): not the unit tier
pytestmark = pytest.mark.process


@pytest.mark.slow
def test_dry_run_runs_every_part_on_the_cpu_and_writes_both_reports(tmp_path):
    out = tmp_path / "check"
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--out", str(out), "--dry-run"],
        cwd=tmp_path, capture_output=True, text=True, timeout=900, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    report = json.loads((out / "report.json").read_text())
    parts = {part["name"]: part for part in report["parts"]}
    logs = {name: (out / part["log"]).read_text()[-3000:] for name, part in parts.items() if part.get("log")}
    assert list(parts) == [name for name, *_ in gpu_check.PARTS], result.stdout
    for name, part in parts.items():
        assert part["status"] == "ok" and part["passed"], f"{name}: {part['error']} {part['checks']}\n{logs.get(name, '')}"
        assert part["device"].startswith("1×cpu") and part["torch"], name
        assert part["checks"] or part["summary"], name
    assert result.returncode == 0, result.stdout + result.stderr
    assert report["dry_run"] and report["finished"]
    # the targets that hold on any device were judged, and met; the GPU's were left for a GPU
    judged = {check["target"].split(" (")[0]: check["met"] for part in parts.values() for check in part["checks"]}
    assert judged["no NaN or inf loss in the fp16 steps"] is True
    assert judged["it saves: a complete checkpoint of its last step, safe in the store"] is True
    assert any(target.startswith("resumed at step") and met is True for target, met in judged.items())
    assert judged["fp16 ≥ 1.5× faster than fp32 at batch 4"] is None
    markdown = (out / "report.md").read_text()
    assert markdown.startswith("# fintts GPU check (dry run") and "| part | target | figure | met |" in markdown
    for name in parts:
        assert f"| {name} |" in markdown, name
    # the parts with figures of their own, read here rather than run again by tests of their own (~90 s of the suite)
    nccl = {check["target"].split(" (")[0]: check for check in parts["nccl_failure"]["checks"]}
    assert nccl["the launcher's NCCL error handling reaches both training processes"]["met"] is True
    ending = next(check for target, check in nccl.items() if target.startswith("a process hung in step 10"))
    assert ending["met"] is True and "status failed at step 9, latest step-00000008" in ending["value"]
    assert nccl["the same on NCCL"]["met"] is None and "ran on gloo" in nccl["the same on NCCL"]["why"]  # no two GPUs: said
    torchrun = {check["target"].split(" (")[0]: check for check in parts["nccl_torchrun"]["checks"]}
    assert torchrun["torchrun gives its workers its own TORCH_NCCL_ASYNC_ERROR_HANDLING=1"]["value"] == '["1", "1"]'
    assert torchrun["both processes run with fintts's NCCL error handling, not torchrun's"]["met"] is True
    lost = next(check for target, check in torchrun.items() if target.startswith("a process lost in step 5 under torchrun"))
    assert lost["met"] is True and "status failed at step 4, latest step-00000004" in lost["value"]
    on_nccl = torchrun["the same on NCCL under torchrun"]
    assert on_nccl["met"] is None and "ran on gloo" in on_nccl["why"]
    chatterbox = json.loads((out / "parts" / "chatterbox.json").read_text())
    rows = chatterbox["figures"]["rows"]  # a tiny T3 through the three modes
    assert [row["mode"] for row in rows] == ["full, checkpointing", "lora r=16", "full"]
    assert all(row["seconds_per_step"] > 0 and row["loss_scale"] >= 1 for row in rows)
    lora, full = rows[1], rows[2]
    # the task's frozen tables (the Llama's unused token table, the text head) stay frozen in the check too
    assert lora["trainable_parameters"] < full["trainable_parameters"] < full["parameters"] < lora["parameters"]
    assert lora["merged_tensors"] > 0  # the export's merge ran beside the LoRA's training
    t3 = {check["target"]: check["met"] for check in chatterbox["checks"]}
    assert t3["no NaN or inf loss in the fp16 T3 steps"] is True
    assert [met for target, met in t3.items() if "fits a T4" in target] == [None, None]  # judged on CUDA only


def test_a_part_that_fails_or_hangs_is_its_own_result_and_the_report_is_written(tmp_path, monkeypatch):
    """The driver's contract, without torch: an erroring part and one past its limit are entries, the others still run."""
    script = tmp_path / "fake_part.py"
    script.write_text(
        "import json, sys, time\n"
        "out, name = sys.argv[1], sys.argv[2]\n"
        "if name == 'mas':\n"
        "    raise SystemExit('no numba here')\n"
        "if name == 'resume':\n"
        "    json.dump({'status': 'running', 'figures': {'session_a': 1}, 'env': {'device': 'fake'}},"
        " open(f'{out}/parts/{name}.json', 'w'))\n"
        "    time.sleep(60)\n"
        "json.dump({'status': 'ok', 'summary': name, 'checks': [{'target': 't', 'value': 'v', 'met': True}],"
        " 'env': {'device': 'fake', 'device_type': 'cuda'}}, open(f'{out}/parts/{name}.json', 'w'))\n"
    )
    monkeypatch.setattr(gpu_check, "_command", lambda name, out, args: [sys.executable, str(script), str(out), name])
    monkeypatch.setattr(gpu_check, "_limit", lambda name, dry_run: 3.0 if name == "resume" else 60.0)
    code = gpu_check.main(["--out", str(tmp_path / "check")])
    report = json.loads((tmp_path / "check" / "report.json").read_text())
    parts = {part["name"]: part for part in report["parts"]}
    assert code == 1 and list(parts) == [name for name, *_ in gpu_check.PARTS]
    assert parts["mas"]["status"] == "error" and "no numba here" in parts["mas"]["error"] and not parts["mas"]["passed"]
    assert parts["resume"]["status"] == "timed out" and parts["resume"]["figures"] == {"session_a": 1}
    assert "stopped at its limit of 3 s" in parts["resume"]["error"]
    assert all(parts[name]["passed"] for name in parts if name not in ("mas", "resume"))
    markdown = (tmp_path / "check" / "report.md").read_text()
    assert "| resume | timed out, not passed |" in markdown and "| mas | error, not passed |" in markdown


def test_without_a_gpu_and_without_dry_run_it_stops_after_the_stand_ins(tmp_path, monkeypatch):
    script = tmp_path / "fake_part.py"
    script.write_text(
        "import json, sys\n"
        "json.dump({'status': 'ok', 'summary': 'made', 'env': {'device': '1×cpu', 'device_type': 'cpu'}},"
        " open(f'{sys.argv[1]}/parts/{sys.argv[2]}.json', 'w'))\n"
    )
    monkeypatch.setattr(gpu_check, "_command", lambda name, out, args: [sys.executable, str(script), str(out), name])
    assert gpu_check.main(["--out", str(tmp_path / "check")]) == 1
    parts = json.loads((tmp_path / "check" / "report.json").read_text())["parts"]
    assert parts[0]["name"] == "stand_ins" and parts[0]["passed"]
    assert all(part["status"] == "not run" and "no CUDA device" in part["error"] for part in parts[1:])


def test_a_stopped_check_ends_the_running_part_and_leaves_its_report(tmp_path):
    """SIGTERM to the driver (a device's time limit): the part's process group is ended, the report says where it stopped."""
    part = tmp_path / "fake_part.py"
    part.write_text(
        "import json, os, sys, time\n"
        "out, name = sys.argv[1], sys.argv[2]\n"
        "if name == 'mas':\n"
        "    open(f'{out}/mas.pid', 'w').write(str(os.getpid()))\n"
        "    time.sleep(120)\n"
        "json.dump({'status': 'ok', 'summary': name, 'env': {'device': 'fake', 'device_type': 'cuda'}},"
        " open(f'{out}/parts/{name}.json', 'w'))\n"
    )
    driver = tmp_path / "driver.py"
    driver.write_text(
        f"import sys\nsys.path.insert(0, {str(ROOT / 'benchmarks')!r})\nimport gpu_check\n"
        f"gpu_check._command = lambda name, out, args: [sys.executable, {str(part)!r}, str(out), name]\n"
        "sys.exit(gpu_check.main(sys.argv[1:]))\n"
    )
    out = tmp_path / "check"
    process = subprocess.Popen([sys.executable, str(driver), "--out", str(out)], stdout=subprocess.PIPE, text=True)
    pid_file = out / "mas.pid"
    deadline = time.monotonic() + 60
    while not pid_file.is_file() or not pid_file.read_text():
        assert time.monotonic() < deadline and process.poll() is None, "the mas part never started"
        time.sleep(0.1)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 130
    child = int(pid_file.read_text())
    time.sleep(0.2)
    assert not Path(f"/proc/{child}").exists(), "the part's process outlived the check"
    parts = {p["name"]: p for p in json.loads((out / "report.json").read_text())["parts"]}
    assert list(parts) == ["stand_ins", "fp16_step", "mas"] and parts["fp16_step"]["passed"]
    assert parts["mas"]["status"] == "interrupted" and "SIGTERM" in parts["mas"]["error"]
    assert "| mas | interrupted, not passed |" in (out / "report.md").read_text()


