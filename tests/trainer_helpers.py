"""Small shared helpers for the session-trainer tests (toy runs, weight comparison, CLI processes)."""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import torch
import yaml
from safetensors.torch import load_file

from fintts.train.run import checkpoint

ROOT = Path(__file__).resolve().parents[1]
QUIET = {"progress": False, "log": lambda message: None}
#: the toy task with faults on demand (tests/stand_ins/fintts_stand_ins/faulty.py), a registered task
FAULTY = "faulty-toy"
#: set in a Kaggle kernel (fintts reads the platform from it): never in the commands the tests run
KAGGLE_MARK = "KAGGLE_KERNEL_RUN_TYPE"

TOY = {
    "task": "toy",
    "seed": 11,
    "max_steps": 48,
    "batch_size": 16,
    "eval_every": 8,
    "checkpoint_every_steps": 5,
    "num_workers": 0,
    "log_every": 4,
    "adversarial": True,
    "dropout": 0.2,
}


def built_once(tmp_path_factory, name: str, build: Callable[[Path], object]) -> Path:
    """The folder ``name``, which ``build(folder)`` fills once for the whole test run: by the first of pytest-xdist's
    workers to ask for it, under a lock, while the others wait for it and then use it as it is.

    For the expensive fixtures whose tests only read what they built (a trained run): each worker building its own took
    tens of CPU-seconds more per run (benchmarks/README.md, "How the suite is scheduled"). What ``build`` returns is not
    kept; the tests read what it wrote."""
    base = tmp_path_factory.getbasetemp()
    run = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # one folder per run, shared by its workers
    folder = run / "built-once" / name
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.with_name(name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed, or when a worker dies
        done = folder.with_name(name + ".built")
        if not done.is_file():
            if folder.exists():  # a worker that died half-way through building it
                shutil.rmtree(folder)
            folder.mkdir()
            build(folder)
            done.touch()
    return folder


def write_config(folder: Path, **settings) -> Path:
    path = folder / "toy.yaml"
    path.write_text(yaml.safe_dump({**TOY, **settings}))
    return path


def final_weights(store: Path) -> dict[str, torch.Tensor]:
    folder = checkpoint.latest_complete(store, log=lambda _: None)
    assert folder is not None, f"no complete checkpoint in {store}"
    weights = {}
    for path in sorted(folder.glob("*.safetensors")):  # every model the task saved
        weights.update({f"{path.stem}.{k}": v for k, v in load_file(path).items()})
    return weights


def assert_bit_identical(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), f"{key} differs"


def cli(*args: str, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fintts", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=_env()
    )


#: What the libraries print that a fintts command must not show: transformers' "Loading weights" (a model loaded) and
#: "Writing model shards" (one saved), tqdm's bars, and huggingface_hub's warnings, which it logs through its own handler
#: and the root's (twice under the CLI's logging).
LIBRARY_NOISE = re.compile(r"Loading weights|Writing model shards|it/s\]|thrown while requesting|Retrying in")
#: huggingface_hub's bar of a download from the Hub (``fintts pull``, ``say --hub-repo``): wanted, a person waits on it.
DOWNLOAD_BAR = re.compile(r"^Fetching \d+ files")


def assert_quiet(result: subprocess.CompletedProcess, command: str) -> None:
    """A command run as a person runs it printed fintts's lines only (and exited 0); read wherever such a command runs
    in the tests (train, demo, say with each backend, bench), rather than run once more to be read."""
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    noise = sorted({line.strip()[:120] for line in output.replace("\r", "\n").splitlines()
                    if LIBRARY_NOISE.search(line) and not DOWNLOAD_BAR.match(line.strip())})
    assert noise == [], f"fintts {command} showed the libraries' output: {noise}"


def run_python(program: str, *, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    """``program`` in a Python process of its own, as a person's script or notebook kernel runs it (this checkout)."""
    return subprocess.run([sys.executable, "-c", program], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=_env())


def in_process(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """``fintts ARGS`` through :func:`fintts.cli.main` in this process, answered as :func:`cli` answers.

    For the quick commands (``check``, ``status``, ``plan``, ``speakers``) where no signal, kill, exit of the
    interpreter or import is under test: a process of their own costs ~2-4 s of imports each (on a 2-core
    runner, process starts are most of the suite's time). Not for a command that reads the Hub from the
    environment (``env``, ``status --hub-repo``, a Hub dataset): huggingface_hub reads ``HF_ENDPOINT`` once,
    at import. What they print and log is captured as a process's standard output and error would be;
    ``SystemExit`` (argparse) is its exit code.
    """
    from fintts.cli import main

    out, err = io.StringIO(), io.StringIO()
    handler = logging.StreamHandler(err)
    handler.setFormatter(logging.Formatter("%(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        with contextlib.chdir(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), mock.patch.dict(os.environ):
            os.environ.pop(KAGGLE_MARK, None)  # as _env for a process
            try:
                code = main(list(args))
            except SystemExit as exit_:
                code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 2)
    finally:
        root.removeHandler(handler)
    return subprocess.CompletedProcess(["fintts", *args], code, out.getvalue(), err.getvalue())


def start_cli(*args: str, cwd: Path, sigint_ignored: bool = False) -> subprocess.Popen:
    """``fintts ARGS`` started as a process; ``sigint_ignored``: as a shell starts a background job (``fintts train … &``),
    with SIGINT ignored, which Python then leaves ignored unless the program handles it itself."""
    ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else None
    return subprocess.Popen(
        [sys.executable, "-m", "fintts", *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_env(),
        preexec_fn=ignore,
    )


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop(KAGGLE_MARK, None)
    env["PYTHONUNBUFFERED"] = "1"
    # the checkout under test and its stand-ins first, then the tests' helpers; sys.path[0] is not inherited
    paths = [str(ROOT), str(ROOT / "tests" / "stand_ins"), str(ROOT / "tests"), env.get("PYTHONPATH")]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, paths))
    return env


def wait_for_step(store: Path, step: int, process: subprocess.Popen, timeout: float = 120) -> None:
    """Block until the store's ``latest`` names a checkpoint at ``step`` or later."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        name = checkpoint.read_latest(store)
        if name and checkpoint.step_of(name) >= step:
            return
        if process.poll() is not None:
            raise AssertionError(f"trainer exited early ({process.returncode}): {process.stdout.read()}")
        time.sleep(0.02)
    raise AssertionError(f"no checkpoint at step {step} within {timeout}s")


def stop(process: subprocess.Popen, sig: signal.Signals) -> str:
    """Send ``sig`` and wait for the process's end; one that does not end is killed (its training processes with it)."""
    process.send_signal(sig)
    try:
        out, _ = process.communicate(timeout=120)
    except subprocess.TimeoutExpired as err:
        process.kill()
        out, _ = process.communicate()
        raise AssertionError(f"{sig.name} did not end the session in 120 s: {out}") from err
    return out


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (Linux's /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def running(pid: int) -> bool:
    """Is ``pid`` a process that has not ended (a zombie has)?"""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def export_processes(store: Path | str, wait: float = 0.0) -> list[str]:
    """Command lines of live background-export processes working in ``store`` (a run's folder, or one export's copy),
    after up to ``wait`` seconds for them to go."""
    deadline = time.time() + wait
    while True:
        found = []
        for proc in Path("/proc").glob("[0-9]*"):
            try:
                line = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if "background_export" in line and str(store) in line and running(int(proc.name)):
                found.append(line)
        if not found or time.time() > deadline:
            return found
        time.sleep(0.1)


#: A checkpoint push's commit is larger than this; the lease's and the heartbeats' are smaller.
BIG_COMMIT = 30_000
#: Seconds an interpreter may take to tear down after its last Python line (torch's finalisers, a loaded machine).
TEARDOWN = 8


def train_cli(config, store, *extra, timeout=120):
    """``fintts train`` of ``config`` in two processes, as a subprocess."""
    return cli("train", str(config), "--store", str(store), "--num-processes", "2", "--no-progress", *extra,
               cwd=store.parent, timeout=timeout)


def status_of(store):
    return json.loads((store / "status.json").read_text())


def training_processes(launcher: int) -> list[int]:
    """A launcher's training processes (``python -m fintts train``, given a ``RANK``), not its collective check's, nor a
    child between its fork and its own program (it shows the launcher's command line and environment until then)."""
    found = []
    for pid in children(launcher):
        try:
            if b"train" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") and \
                    any(pair.startswith(b"RANK=") for pair in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")):
                found.append(pid)
        except OSError:
            continue
    return found


def environment_of(pid: int) -> dict[str, str]:
    """A running process's environment (Linux's /proc)."""
    pairs = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(pair.decode(errors="replace").split("=", 1) for pair in pairs if b"=" in pair)
