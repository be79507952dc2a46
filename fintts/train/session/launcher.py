"""Every GPU of the machine: one training process per device, started and watched from here.

:func:`launch` is the one training call of the notebooks and of ``fintts train``. With one device it
trains in this process, as :func:`fintts.train.train`; with more it starts one ``python -m fintts
train`` per device with the environment ``accelerate launch`` would give it, so the processes join
one process group. Not ``accelerate launch`` itself: torch's elastic agent kills the workers 30 s
after a signal, too soon for the final checkpoint and its upload. So this process relays the first
process's output, passes signals on, gives every process its session start and NCCL's error
handling, the Hugging Face token to the first process only (:mod:`~fintts.train.processes.hub_token`),
tells the first process at once when another ends with an error (it would wait for it in its next
collective: :data:`~fintts.train.session.watchdog.PEER_EXITS_VARIABLE`), and ends whatever outlives
the session. The rules and their grace periods are in docs/sessions-and-stores.md ("Several GPUs"
and its table of timeouts).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import torch
import torch.distributed as dist
import yaml

from fintts.process_exit import end_with_parent
from fintts.train.config import ConfigError, RunConfig, as_run_config
from fintts.train.machine.platform import ORIGIN_VARIABLE, START_VARIABLE
from fintts.train.processes.collective import NCCL_ERROR_HANDLING
from fintts.train.processes.collective_check import check_collectives
from fintts.train.processes.hub_token import without_hub_token
from fintts.train.report.summary import SessionSummary
from fintts.train.run.layout import LOGS_DIR
from fintts.train.session.clock import SessionClock, session_clock
from fintts.train.session.loop import Trainer
from fintts.train.session.store_choice import store_for
from fintts.train.session.watchdog import PEER_EXITS_VARIABLE

#: Seconds the other processes get to end by themselves after one failed (they save nothing;
#: the main one writes the run's "failed" status and hands back the Hub lease).
PEER_GRACE = 120.0
#: Without a session limit: seconds the first process gets after another failed, to push its newest checkpoint
#: (its wait for the push is bounded by the Hub store's SECURE_WAIT, 10 min, and its collectives by their timeout).
MAIN_GRACE = 30 * 60.0
#: Seconds a process that ended its session may take to leave its process group before it exits without leaving it.
TEARDOWN = 10.0
#: Lines of a failed process's log quoted in the error.
LOG_TAIL = 25
#: The launching process's id, given to each training process so that it ends with it.
PARENT_VARIABLE = "FINTTS_LAUNCHER_PID"


class LaunchFailed(RuntimeError):
    """A training process ended with an error; ``exit_code`` is the one ``fintts train`` exits with."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code


def visible_gpus() -> int:
    """CUDA devices this process may use (``CUDA_VISIBLE_DEVICES`` applies).

    Counting leaves torch's CUDA state uninitialised here (``torch.cuda.is_initialized()`` stays
    false), and the training processes are started fresh rather than forked, so nothing done in
    a notebook's process before :func:`launch` can break them.
    """
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def in_launched_process() -> bool:
    """Is this one of several processes already started together (by :func:`launch`, ``accelerate launch``, ``torchrun``)?"""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def launch(
    config: RunConfig | str | Path,
    *,
    overrides: list[str] | Mapping[str, Any] = (),
    num_processes: int | None = None,
    allow_config_change: bool = False,
    force: bool = False,
    progress: bool = True,
    out: IO[str] | None = None,
    summary_json: str | Path | None = None,
    own_process: bool = False,
    **settings: Any,
) -> SessionSummary:
    """Train one session of a run on every device: one process per GPU (default), or ``num_processes``.

    Settings are given as for :func:`fintts.train.train` and checked here, before any process
    starts. With one process (one GPU, the CPU, or inside an already launched process) it
    trains in this process. Raises :class:`LaunchFailed` when a process fails; returns the
    session's summary (already printed by the first process) otherwise. ``out``: where the
    first process's output goes (default ``sys.stdout``). ``summary_json``: also write the
    summary there (:func:`write_summary`); in a launched process, before it leaves its process
    group, so a teardown that hangs cannot keep the session from having ended. ``own_process``:
    this process was started for this session (``fintts train``), so off Kaggle and Colab the
    session's clock starts with it; otherwise with this call (a notebook's kernel may be hours old).
    """
    config = as_run_config(config, overrides, settings)
    if in_launched_process():
        parent = os.environ.get(PARENT_VARIABLE)
        if parent is not None and not end_with_parent(int(parent)):
            raise LaunchFailed("the process that launched this one has ended (a kernel restarted, say); it does not train "
                               "without it", 1)
        # read when the group is made. Set, not defaulted: torchrun gives every worker TORCH_NCCL_ASYNC_ERROR_HANDLING=1
        # (torch 2.13, torch/distributed/elastic/agent/server/local_elastic_agent.py, _start_workers: os.getenv(..., "1")),
        # under which NCCL's watchdog kills the process and the session's failure path never runs
        os.environ.update(NCCL_ERROR_HANDLING)
        # a process that never pushes opens the run's store as a reader: it has no token (see _Processes._start)
        store = store_for(config.train, read_only=os.environ.get("RANK", "0") != "0")
        try:
            summary = Trainer(config, store=store, allow_config_change=allow_config_change, force=force, progress=progress).run()
        except BaseException:
            if summary_json:  # the session has failed and its end (status, newest checkpoint, lease) is done
                _ended_marker(summary_json).touch()
            raise
        if summary_json:
            write_summary(summary, summary_json)
        _leave_process_group()
        return summary
    gpus = visible_gpus()
    count = max(1, gpus) if num_processes is None else num_processes
    if count < 1 or 0 < gpus < count:
        raise ConfigError(
            f"num_processes: {count} is not possible with {gpus} visible GPU(s); use 1 to {max(1, gpus)} (one process per device)"
        )
    if count == 1:
        summary = Trainer(config, allow_config_change=allow_config_change, force=force, progress=progress,
                          own_process=own_process).run()
    else:
        flags = [*(["--allow-config-change"] if allow_config_change else []), *(["--force"] if force else []),
                 *([] if progress else ["--no-progress"])]
        clock = session_clock(config.train, own_process=own_process)  # before the check: its seconds are the session's
        if not (check := check_collectives(count, cuda=gpus > 0)).ok:
            raise LaunchFailed(check.message, 1)
        summary = _Processes(config, count, flags, out or sys.stdout, cpu=gpus == 0, clock=clock).run()
    if summary_json:
        write_summary(summary, summary_json)
    return summary


class _Processes:
    """The ``count`` training processes of one session, from start to the last exit."""

    def __init__(self, config: RunConfig, count: int, flags: list[str], out: IO[str], *, cpu: bool,
                 clock: tuple[SessionClock, str]):
        self.config, self.count, self.flags, self.out, self.cpu = config, count, flags, out, cpu
        self.logs = config.train.local_dir() / LOGS_DIR
        self.processes: list[subprocess.Popen] = []
        self.log_files: list[IO[bytes]] = []
        self.exit_grace = config.train.exit_grace or 0.0
        #: the session's clock, the processes' own (they get its start)
        self.clock, self.origin = clock
        #: processes ended because they outlived the first one's ended session (or the session) by ``exit_grace``.
        self.ended_late: set[int] = set()

    def run(self) -> SessionSummary:
        self.logs.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="fintts-launch-") as tmp:
            config_file = Path(tmp) / "config.yaml"
            config_file.write_text(yaml.safe_dump(self.config.to_dict(), sort_keys=False, allow_unicode=True))
            summary_file = Path(tmp) / "summary.json"
            peer_exits = Path(tmp) / "peer-exits"  # written when another process ended with an error (_tell_first)
            try:
                with _forwarding_signals(self._signal_all):
                    self._start(config_file, summary_file, peer_exits, Path(tmp) / "no-token")
                    codes = self._supervise(summary_file, peer_exits)
            finally:
                for log in self.log_files:
                    log.close()
            # a session that ended as its summary says (a failed one too: out of memory exits 1 in every process)
            if summary_file.is_file():
                summary = SessionSummary(**json.loads(summary_file.read_text()))
                code = 0 if summary.succeeded else 1
                if all(exit == code or rank in self.ended_late for rank, exit in enumerate(codes)):
                    return summary
            raise self._failure(codes)

    def _start(self, config_file: Path, summary_file: Path, peer_exits: Path, no_token: Path) -> None:
        """Start the processes: the first one with this process's environment, ``--summary-json`` and where it hears of
        the others' ends (``peer_exits``), the others without the Hugging Face token (their token file would be
        ``no_token``)."""
        port = _free_port()
        threads = os.environ.get("OMP_NUM_THREADS") or str(max(1, (os.cpu_count() or 1) // self.count))
        for rank in range(self.count):
            env = {
                **(os.environ if rank == 0 else without_hub_token(os.environ, no_token)), **NCCL_ERROR_HANDLING,
                "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "WORLD_SIZE": str(self.count),
                "RANK": str(rank), "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": str(self.count),
                "OMP_NUM_THREADS": threads, "PYTHONUNBUFFERED": "1",
                START_VARIABLE: repr(self.clock.start), ORIGIN_VARIABLE: self.origin, PARENT_VARIABLE: str(os.getpid()),
            }
            if self.cpu:  # as `accelerate launch --cpu`: without it accelerate ignores WORLD_SIZE on a machine without GPUs
                env["ACCELERATE_USE_CPU"] = "true"
            command = [sys.executable, "-m", "fintts", "train", str(config_file), *self.flags]
            if rank == 0:
                command += ["--summary-json", str(summary_file)]
                env[PEER_EXITS_VARIABLE] = str(peer_exits)
            self.log_files.append(open(self.logs / f"process-{rank}.log", "wb"))
            self.processes.append(subprocess.Popen(
                command, env=env, stdin=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True,
                stdout=subprocess.PIPE if rank == 0 else self.log_files[-1],
            ))

    def _supervise(self, summary_file: Path, peer_exits: Path) -> list[int]:
        """Relay the first process's output and end what outlives its part (see the module); signals are passed on
        meanwhile (:func:`_forwarding_signals`)."""
        relayed = self.processes[0].stdout
        failed_at: float | None = None
        finished_at: float | None = None
        while True:
            if relayed is None:
                time.sleep(0.2)
            elif select.select([relayed], [], [], 0.2)[0]:
                relayed = self._relay(relayed)
            codes = [p.poll() for p in self.processes]
            if relayed is None and None not in codes:
                return codes
            now = time.time()
            if finished_at is None and (codes[0] is not None or summary_file.is_file()
                                        or _ended_marker(summary_file).is_file()):
                finished_at = now
            if failed_at is None and any(code not in (None, 0) for code in codes):
                failed_at = now
            self._tell_first(codes, peer_exits)
            if finished_at is not None and now - finished_at > self.exit_grace:
                self._end_stragglers(range(self.count), f"{self.exit_grace:g} s after the first process ended the session")
            if failed_at is not None and now - failed_at > PEER_GRACE:
                self._end_stragglers(range(1, self.count), f"{PEER_GRACE:g} s after a process failed")
            end = self.clock.end
            if end is not None and now > end + self.exit_grace:
                self._end_stragglers(range(self.count), f"{self.exit_grace:g} s after the session's end")
            elif end is None and failed_at is not None and now - failed_at > MAIN_GRACE:
                self._end_stragglers(range(self.count), f"{MAIN_GRACE:g} s after a process failed")

    def _tell_first(self, codes: list[int | None], peer_exits: Path) -> None:
        """Once another process has ended with an error (not one ended here), tell the first one in ``peer_exits``:
        under NCCL its next collective would wait for it until the process group's timeout. Its watchdog
        (:class:`~fintts.train.session.watchdog.SessionWatchdog`) ends the session as failed."""
        if peer_exits.exists():
            return
        lost = next((rank for rank, code in enumerate(codes) if rank and code not in (None, 0) and rank not in self.ended_late), None)
        if lost is not None:
            news = peer_exits.with_name(peer_exits.name + ".tmp")
            news.write_text(f"process {lost} ended ({_describe_exit(codes[lost])}), its log: {self.logs}/process-{lost}.log")
            news.replace(peer_exits)  # whole at once: the watchdog reads it as soon as it exists

    def _end_stragglers(self, ranks: Iterator[int] | range, why: str) -> None:
        for rank in ranks:
            process = self.processes[rank]
            if process.poll() is None and rank not in self.ended_late:
                self.ended_late.add(rank)
                process.kill()
                self.out.write(f"process {rank} was still running {why}; ended it (its log: {self.logs}/process-{rank}.log)\n")
                self.out.flush()

    def _relay(self, stream: IO[bytes]) -> IO[bytes] | None:
        """Copy what the first process wrote to ``out`` and its log; ``None`` once it closed its output."""
        chunk = os.read(stream.fileno(), 65536)
        if not chunk:
            stream.close()
            return None
        self.log_files[0].write(chunk)
        self.log_files[0].flush()
        self.out.write(chunk.decode("utf-8", "replace"))
        self.out.flush()
        return stream

    def _signal_all(self, signum: int) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signum)

    def _failure(self, codes: list[int]) -> LaunchFailed:
        failed = [rank for rank, code in enumerate(codes) if code != 0]
        if not failed:
            return LaunchFailed(f"the first process ended without its session summary (see {self.logs}/process-0.log)", 1)
        cause = min(failed, key=lambda rank: (rank == 0, rank))  # another process's error made the first one fail
        log = self.logs / f"process-{cause}.log"
        tail = log.read_text(errors="replace").splitlines()[-LOG_TAIL:]
        ended = ", ".join(f"process {rank}: {_describe_exit(codes[rank])}" for rank in failed)
        return LaunchFailed(f"training failed ({ended}). End of {log}:\n" + "\n".join(tail), codes[0] if codes[0] > 0 else 1)


@contextlib.contextmanager
def _forwarding_signals(forward: Callable[[int], None]) -> Iterator[None]:
    """While the processes start and train, a SIGINT or SIGTERM to this process goes to all of them (a handler can only
    be set in the main thread: a launch from another thread passes none on)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, lambda signum, frame: forward(signum)) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _leave_process_group() -> None:
    """End this process's part in the run's process group after a clean session, within :data:`TEARDOWN` seconds.

    A process that exits with the group still open can abort while gloo's threads are torn
    down ("terminate called without an active exception"), turning a clean session into a
    failed exit code. After an error the group is left as it is: the process exits anyway.
    Leaving can hang too (a NCCL teardown waiting on a peer): it runs in a thread that is
    given up after :data:`TEARDOWN` seconds, and the process exits without it
    (:func:`end_process`). The session's summary is written before, so nothing is lost.
    """
    if not (dist.is_available() and dist.is_initialized()):
        return
    leaving = threading.Thread(target=dist.destroy_process_group, name="fintts-leave-process-group", daemon=True)
    leaving.start()
    leaving.join(TEARDOWN)
    if leaving.is_alive():
        print(f"leaving the process group took more than {TEARDOWN:g} s; this process ends without it "
              "(the session had ended, its summary was written)", file=sys.stderr, flush=True)


def _ended_marker(summary_json: str | Path) -> Path:
    """Beside the summary file: the first process failed, and has done what a failed session does at its end."""
    return Path(f"{summary_json}.ended")


def _describe_exit(code: int) -> str:
    return f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def end_process(code: int) -> int:
    """``code``, for the caller to exit with; in one of several launched processes, the exit itself.

    Such a process has its session over and its process group left, yet Python's own
    shutdown can still abort it while gloo's threads are torn down (SIGABRT, "terminate
    called without an active exception": once in ~16 two-process runs, pytorch/pytorch PR
    179291 describes the cause), which would report a clean session as failed. So it
    flushes its output and leaves at once, skipping that shutdown.
    """
    if in_launched_process():
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def write_summary(summary: SessionSummary, path: str | Path) -> None:
    """The session's summary as JSON: how the first process hands it to :func:`launch` (``fintts train --summary-json``)."""
    Path(path).write_text(json.dumps(dataclasses.asdict(summary), indent=1))


__all__ = ["LaunchFailed", "end_process", "in_launched_process", "launch", "visible_gpus", "write_summary"]
