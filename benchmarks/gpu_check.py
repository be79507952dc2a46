"""The first GPU session, prepared: one command that measures what only a GPU can show.

    python benchmarks/gpu_check.py --out DIR              # one CUDA GPU (an H100/H200 here, Kaggle's T4 the target): < 9 minutes
    python benchmarks/gpu_check.py --out DIR --dry-run    # every part at toy size on the CPU (CI), a few minutes
    python benchmarks/gpu_check.py --out DIR --only resume bench   # rerun some parts into DIR's report

Each part (:data:`PARTS`; what it measures and its targets: benchmarks/README.md, "The GPU check")
runs in a process of its own (``gpu_check.py --part NAME``, :mod:`gpu_parts`) under a time limit,
so a part that hangs, crashes or runs the GPU out of memory is that part's result and the next
one still runs. On CUDA every part's process caps its GPU memory at a T4's (``--cap-gib``,
``torch.cuda.set_per_process_memory_fraction``), so "fits a T4" is measured on a larger card.
``DIR/report.json`` and ``DIR/report.md`` are rewritten after every part: a run killed half-way
leaves the parts it finished (and a part cut off by its limit leaves the figures it had).

Decisions. The parts share one deadline (``--total-seconds``, 540 by default: a lent GPU's call
runs 10 minutes, and installing fintts and the wheels it needs took ~15 s of the rest; every part
at its full size took ~590 s on an H200, 2026-11-26): each gets its own limit or what is left,
whichever is less, the most-wanted first; a part with under 10 s left is not started. The dry run exists so that CI
keeps the script working, not for its figures: it runs each part's code at toy size and judges
only the targets that hold on any device (no NaN, the loss scaler, the budget, resume), with
torch on one thread per process (on a shared 2-core runner torch's thread pool spin-waits:
25× slower steps measured under load). Without a CUDA device and without ``--dry-run`` it
stops after the stand-ins: MMS-sized steps on a CPU would take hours.

This file imports no torch: the parts do, each in its own process.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
REPORT_JSON, REPORT_MD = "report.json", "report.md"
#: a T4's 15 GB as a process sees it: torch reports ~14.7 GiB on Kaggle's T4, of which the CUDA context
#: and library workspaces outside torch's allocator take ~0.5 GiB.
T4_CAP_GIB = 14.25
#: (name, what it measures, limit on a GPU in seconds, limit in the dry run), the most wanted first.
PARTS = [
    ("stand_ins", "stand-ins: a synthetic corpus and a random-weight voice (MMS-sized; toy in the dry run)", 45, 90),
    ("fp16_step", "the VITS step, fp16 against fp32: speed, peak memory under the T4 cap, loss scaler, NaN", 90, 120),
    ("mas", "monotonic alignment search on the device against the CPU path, both host copies counted", 45, 90),
    ("resume", "an fp16 session through the CLI with a budget, resumed; resume against the unbroken run", 150, 180),
    ("background_export", "the ONNX export in the background beside training: step time with and without it", 100, 150),
    ("step_share", "the share of a session in optimizer steps (benchmarks/step_share.py)", 140, 150),
    ("bench", "fintts bench --compare: each speed switch, SDPA, the largest micro-batch under the T4 cap", 180, 180),
    ("nccl_failure", "a hung process of two: failed status and the newest checkpoint under NCCL's settings (two GPUs; else gloo)",
     120, 150),
    ("chatterbox", "Chatterbox's T3 at real size in fp16 under the T4 cap: full + checkpointing, LoRA, full", 240, 120),
    ("nccl_torchrun", "a lost process of two under torchrun: fintts's NCCL settings over torchrun's, failed status and the "
     "newest checkpoint (two GPUs; else gloo)", 90, 120),
]
TITLES = {name: title for name, title, _, _ in PARTS}
MIN_SECONDS = 10.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="where the reports, the logs and the stand-ins go")
    parser.add_argument("--dry-run", action="store_true", help="every part at toy size on the CPU")
    parser.add_argument("--only", nargs="+", choices=[name for name, *_ in PARTS], metavar="PART",
                        help="run these parts (and the stand-ins if DIR has none), merged into DIR's report")
    parser.add_argument("--total-seconds", type=float, default=540.0, help="the deadline of all parts together")
    parser.add_argument("--cap-gib", type=float, default=T4_CAP_GIB, help="GPU memory each part may use (default: a T4's)")
    parser.add_argument("--part", help=argparse.SUPPRESS)  # run one part in this process (what the driver starts)
    args = parser.parse_args(argv)
    if args.part:  # the driver made OUT/parts; a person running one part by hand may not have
        (args.out / "parts").mkdir(parents=True, exist_ok=True)
        sys.path[:0] = [str(ROOT), str(BENCH)]
        import gpu_parts

        return gpu_parts.run(args.part, out=args.out, dry_run=args.dry_run, cap_gib=args.cap_gib)
    return drive(args)


def drive(args) -> int:
    out = args.out.resolve()
    (out / "parts").mkdir(parents=True, exist_ok=True)
    (out / "logs").mkdir(exist_ok=True)
    wanted = [name for name, *_ in PARTS if not args.only or name in args.only]
    if args.only and "stand_ins" not in wanted and not (out / "stand-ins" / "done").is_file():
        wanted.insert(0, "stand_ins")
    kept = _read(out / REPORT_JSON).get("parts", []) if args.only else []
    report = {
        "command": " ".join(["python benchmarks/gpu_check.py", "--out", str(args.out), *(["--dry-run"] if args.dry_run else []),
                             *(["--only", *args.only] if args.only else [])]),
        "dry_run": args.dry_run, "started": _now(), "cap_gib": args.cap_gib, "total_seconds": args.total_seconds,
        "wall_seconds": 0.0, "finished": False, "env": {}, "parts": [p for p in kept if p["name"] not in wanted],
    }
    started = time.monotonic()
    signal.signal(signal.SIGTERM, _interrupt)  # the parts run in sessions of their own: a signal must end them here
    for name in wanted:
        left = args.total_seconds - (time.monotonic() - started)
        limit = min(_limit(name, args.dry_run), left)
        if left < MIN_SECONDS:
            entry = _entry(name, "not run", error=f"not started: {left:.0f} s left of --total-seconds {args.total_seconds:g}")
        elif report["env"].get("device_type") == "cpu" and not args.dry_run:
            entry = _entry(name, "not run", error="no CUDA device: MMS-sized steps on a CPU take hours; run with --dry-run on a CPU")
        else:
            print(f"[gpu_check] {name}: {TITLES[name]} (limit {limit:.0f} s)", flush=True)
            try:
                entry = run_part(name, out, args, limit)
            except (Interrupted, KeyboardInterrupt) as err:  # the part's process group is ended; the report says so
                entry = _entry(name, "interrupted", error=f"the check was stopped ({err or 'SIGINT'}) during this part",
                               found=_read(out / "parts" / f"{name}.json"))
                report["parts"] = [p for p in report["parts"] if p["name"] != name] + [entry]
                report["wall_seconds"] = round(time.monotonic() - started, 1)
                write_reports(out, report)
                print(f"[gpu_check] stopped during {name}: the report so far is in {out / REPORT_MD}", flush=True)
                return 130
            report["env"] = report["env"] or entry.get("env", {})
        report["parts"] = [p for p in report["parts"] if p["name"] != name] + [entry]
        report["wall_seconds"] = round(time.monotonic() - started, 1)
        write_reports(out, report)
        print(f"[gpu_check] {name}: {entry['status']}, {'passed' if entry['passed'] else 'NOT passed'} "
              f"({entry['seconds']:.0f} s){': ' + entry['error'] if entry.get('error') else ''}", flush=True)
    report["finished"] = True
    write_reports(out, report)
    passed = sum(p["passed"] for p in report["parts"])
    print(f"[gpu_check] {passed} of {len(report['parts'])} parts passed in {report['wall_seconds']:.0f} s: "
          f"{out / REPORT_MD}", flush=True)
    return 0 if passed == len(report["parts"]) else 1


def _limit(name: str, dry_run: bool) -> float:
    return next(dry if dry_run else gpu for part, _, gpu, dry in PARTS if part == name)


def run_part(name: str, out: Path, args, limit: float) -> dict:
    """Run part ``name`` in a process of its own for at most ``limit`` seconds; its entry for the report."""
    command = _command(name, out, args)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(BENCH), *filter(None, [os.environ.get("PYTHONPATH")])]),
           "PYTHONUNBUFFERED": "1"}
    if args.dry_run:
        env |= {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    if name == "resume":  # cuBLAS is deterministic only with a fixed workspace, set before CUDA starts
        env["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
    result_file = out / "parts" / f"{name}.json"
    result_file.unlink(missing_ok=True)
    log_path = out / "logs" / f"{name}.log"
    started = time.monotonic()
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = process.wait(timeout=limit)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
            code = _end(process)
        except BaseException:
            _end(process)
            raise
    seconds = time.monotonic() - started
    found = _read(result_file)
    if timed_out:
        status, error = "timed out", f"stopped at its limit of {limit:.0f} s" + (" (the figures it had are kept)" if found else "")
    elif found.get("status") == "ok":
        status, error = "ok", None
    elif found.get("status") == "error":
        status, error = "error", found.get("error")
    else:
        status, error = "error", f"the part's process ended with exit code {code} and no result; its log: {_tail(log_path)}"
    entry = _entry(name, status, error=error, seconds=seconds, limit=limit, found=found)
    entry["log"] = str(log_path.relative_to(out))
    return entry


class Interrupted(Exception):
    """The driver got SIGTERM (a device's time limit, a person)."""


def _interrupt(signum: int, frame) -> None:
    raise Interrupted(signal.Signals(signum).name)


def _command(name: str, out: Path, args) -> list[str]:
    command = [sys.executable, str(Path(__file__).resolve()), "--out", str(out), "--part", name, "--cap-gib", str(args.cap_gib)]
    return command + (["--dry-run"] if args.dry_run else [])


def _end(process: subprocess.Popen) -> int:
    """End a part's process group (its data-loader workers and export children too): SIGTERM, then SIGKILL."""
    for sig, grace in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        try:
            return process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            continue
    return process.wait()


def _entry(name: str, status: str, *, error: str | None = None, seconds: float = 0.0, limit: float = 0.0,
           found: dict | None = None) -> dict:
    found = found or {}
    checks = found.get("checks", [])
    env = found.get("env", {})
    return {
        "name": name, "title": TITLES[name], "status": status,
        "passed": status == "ok" and not any(check["met"] is False for check in checks),
        "seconds": round(seconds, 1), "limit_seconds": round(limit), "error": error,
        "device": env.get("device"), "torch": env.get("torch"), "cuda": env.get("cuda"), "env": env,
        "summary": found.get("summary", ""), "checks": checks, "figures": found.get("figures", {}),
        "commands": found.get("commands", []),
    }


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return {}


def _tail(path: Path, lines: int = 6) -> str:
    text = path.read_text(errors="replace").strip().splitlines()
    return " | ".join(text[-lines:])[-1500:]


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


# ---------------------------------------------------------------------- the reports


def write_reports(out: Path, report: dict) -> None:
    for name, text in ((REPORT_JSON, json.dumps(report, indent=1)), (REPORT_MD, markdown(report))):
        tmp = out / f".{name}.tmp"
        tmp.write_text(text + "\n", encoding="utf-8")
        os.replace(tmp, out / name)


def markdown(report: dict) -> str:
    """The report as the README's GPU rows: one row per target, then one per part."""
    env = report.get("env") or {}
    parts = report["parts"]
    passed = sum(p["passed"] for p in parts)
    where = (f"{env.get('device', 'device unknown')}, torch {env.get('torch', '?')}, CUDA {env.get('cuda') or 'none'}"
             + (f", GPU memory capped at {report['cap_gib']:g} GiB (a T4's)" if env.get("device_type") == "cuda" else ""))
    lines = [
        f"# fintts GPU check{' (dry run: toy sizes on the CPU, targets judged on CUDA only are not judged)' if report['dry_run'] else ''}",
        "",
        f"`{report['command']}`: {report['started']}, {where}; {passed} of {len(parts)} part(s) passed in "
        f"{report['wall_seconds']:.0f} s{'' if report['finished'] else ' (still running or cut off)'}.",
        "",
        "| part | target | figure | met |",
        "|---|---|---|---|",
    ]
    for part in parts:
        for check in part["checks"]:
            met = {True: "yes", False: "**no**", None: f"not judged ({check.get('why') or 'no target'})"}[check["met"]]
            lines.append(f"| {part['name']} | {_cell(check['target'])} | {_cell(check['value'])} | {met} |")
        if not part["checks"]:
            lines.append(f"| {part['name']} | — | {_cell(part['summary'] or part['error'] or '')} | — |")
    lines += ["", "| part | status | seconds | figures |", "|---|---|---:|---|"]
    for part in parts:
        text = part["summary"] + (f" — {part['error']}" if part.get("error") else "")
        lines.append(f"| {part['name']} | {part['status']}{'' if part['passed'] else ', not passed'} | {part['seconds']:.0f} "
                     f"| {_cell(text)} |")
    commands = [(part["name"], command) for part in parts for command in part.get("commands", [])]
    if commands:
        lines += ["", "The same figures one by one (what each part runs, as commands; OUT is DIR/stand-ins):", "", "```bash"]
        lines += [f"{command}   # {name}" for name, command in commands] + ["```"]
    return "\n".join(lines)


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


if __name__ == "__main__":
    sys.exit(main())
