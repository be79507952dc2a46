"""Before twelve hours rely on it: does the process group's backend carry one all-reduce and a barrier?

On some two-GPU hosts NCCL's peer-to-peer transport hangs at the first collective; inside a
training session that is a silent wait until NCCL's watchdog gives up, minutes later, with
nothing saved. So the launcher (and ``fintts env --gpus``) first starts the same number of
fresh processes on the same backend (NCCL on GPUs, gloo on the CPU), each of which joins a
process group, all-reduces a tensor, checks the sum and passes a barrier. They get
:data:`DEADLINE` seconds in all, start-up included; any still running then is killed, and the
error names the known ways out (:data:`ESCAPE_HATCHES`).

The processes meet through a file in a temporary folder rather than a TCP port: the
transports between devices are what is checked, and no port can be taken by another program.
Setting ``FINTTS_COLLECTIVE_CHECK_HANG_RANK`` to a rank makes that process sleep instead of
joining, as a hung peer does (how the deadline is tested). The processes never talk to the Hub:
they get no way to the Hugging Face token (:mod:`fintts.train.processes.hub_token`).
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from fintts.process_exit import exit_process
from fintts.train.processes.hub_token import without_hub_token

#: Seconds the whole check may take: process start, torch's import, the group, the collectives.
DEADLINE = 60.0
HANG_RANK = "FINTTS_COLLECTIVE_CHECK_HANG_RANK"
ESCAPE_HATCHES = (
    "set NCCL_P2P_DISABLE=1 (peer-to-peer transport between the GPUs hangs on some 2×T4 hosts), then "
    "NCCL_IB_DISABLE=1 (no InfiniBand probing); NCCL_DEBUG=INFO shows where it stops; or train on one GPU "
    "(fintts train --num-processes 1, or CUDA_VISIBLE_DEVICES=0). In a notebook, set the variables in "
    "os.environ before fintts.train.launch"
)
#: Lines of a failed process's output quoted in the message.
OUTPUT_TAIL = 8


@dataclasses.dataclass
class CollectiveCheck:
    ok: bool
    backend: str
    processes: int
    seconds: float
    message: str


def check_collectives(processes: int, *, cuda: bool, deadline: float = DEADLINE) -> CollectiveCheck:
    """Start ``processes`` processes on NCCL (``cuda``) or gloo and see them all-reduce and meet at a barrier."""
    backend = "nccl" if cuda else "gloo"
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="fintts-collective-check-") as tmp:
        rendezvous = Path(tmp) / "rendezvous"
        outputs = [Path(tmp) / f"process-{rank}.log" for rank in range(processes)]
        children = []
        for rank, output in enumerate(outputs):
            with open(output, "wb") as log:
                children.append(subprocess.Popen(
                    [sys.executable, "-m", "fintts.train.processes.collective_check", str(rank), str(processes), backend,
                     str(rendezvous), str(deadline)],
                    env={**without_hub_token(os.environ, Path(tmp) / "no-token"), "OMP_NUM_THREADS": "1"},
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                ))
        while any(child.poll() is None for child in children) and time.time() - started < deadline:
            time.sleep(0.05)
        hung = [rank for rank, child in enumerate(children) if child.poll() is None]
        for rank in hung:
            os.killpg(children[rank].pid, signal.SIGKILL)
        codes = [child.wait() for child in children]
        seconds = time.time() - started
        what = f"{backend} across {processes} processes (one all-reduce and a barrier)"
        if not hung and all(code == 0 for code in codes):
            return CollectiveCheck(True, backend, processes, seconds, f"{what}: passed in {seconds:.1f} s")
        if hung:
            problem = f"process(es) {', '.join(map(str, hung))} did not finish within {deadline:.0f} s"
        else:
            problem = "process(es) " + ", ".join(f"{rank} (exit code {code})" for rank, code in enumerate(codes) if code)
        quoted = "".join(_tail(outputs[rank], rank) for rank, code in enumerate(codes) if code)
    return CollectiveCheck(
        False, backend, processes, seconds,
        f"the check of {what} failed: {problem}. Training would wait at its first collective. Ways out: "
        f"{ESCAPE_HATCHES}.{quoted}",
    )


def check_devices(processes: int | None = None) -> CollectiveCheck:
    """The check ``fintts train`` would make here: one process per visible GPU on NCCL, or
    ``processes`` (default 2) on gloo without GPUs. One GPU trains in one process: nothing to check."""
    import torch  # counting devices needs it; importing this module does not

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    count = processes or (gpus if gpus else 2)
    if count == 1:
        return CollectiveCheck(True, "nccl" if gpus else "gloo", 1, 0.0, "one process: no collective to check")
    return check_collectives(count, cuda=gpus > 0)


def _tail(output: Path, rank: int) -> str:
    lines = output.read_text(errors="replace").strip().splitlines()[-OUTPUT_TAIL:]
    return f"\nprocess {rank}:\n" + "\n".join(lines) if lines else ""


def _join(rank: int, world: int, backend: str, rendezvous: str, timeout: float) -> None:
    """One process of the check: join, all-reduce ``rank + 1``, compare with the sum, barrier, leave."""
    if os.environ.get(HANG_RANK) == str(rank):
        time.sleep(10 * timeout)
    import torch  # only in the check's processes: the launcher and `fintts env` import this module without torch
    import torch.distributed as dist

    device = torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(
        backend, init_method=f"file://{rendezvous}", rank=rank, world_size=world, timeout=timedelta(seconds=timeout),
        **({"device_id": device} if device.type == "cuda" else {}),
    )
    value = torch.full((1 << 16,), float(rank + 1), device=device)
    dist.all_reduce(value)
    expected = world * (world + 1) / 2
    if not bool(torch.all(value == expected)):
        raise SystemExit(f"all-reduce gave {value[0].item()} instead of {expected}")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    _join(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], float(sys.argv[5]))
    exit_process(0)
