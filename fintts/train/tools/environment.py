"""``fintts env``: what a session would run on, checked before twelve hours depend on it.

The facts a training session relies on, gathered in one place: the platform and its
session clock (the same :mod:`fintts.train.machine.platform` the trainer uses, so the time left is
the trainer's), the GPUs and their memory, the free space where checkpoints are written,
whether a Hugging Face token is there (never its value) and whether the Hub answers; with
``--gpus``, whether the training processes can talk (:mod:`fintts.train.processes.collective_check`).

On Kaggle, ``/kaggle/working`` is the only folder kept as the notebook version's output
and is limited (20 GB, Kaggle's notebook documentation). With a Hub repo the local folder
is only the store's mirror: the trainer keeps ``keep_last`` checkpoints in it and the Hub
keeps the run, so nothing more needs to fit there.

It is a tool above the machine's room and the stores' (it reads the Hub token with
:func:`fintts.train.stores.hub.auth.find_token`), not part of :mod:`fintts.train.machine`: the Hub
store stands on the machine's platform facts (its lease names the host and Kaggle's session
limit), so the machine's room imports nothing of the stores'.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import torch
from huggingface_hub import constants
from huggingface_hub.utils import get_session

from fintts.train.machine.platform import PLATFORM_LIMITS, detect_platform, session_start
from fintts.train.report.durations import hms
from fintts.train.stores.hub.auth import find_token
from fintts.train.stores.hub.errors import HubAuthError

#: Seconds to wait for the Hub before saying it does not answer.
HUB_TIMEOUT = 10.0


def gpus() -> list[dict[str, Any]]:
    """Name and memory (MiB) of each visible GPU, from ``nvidia-smi`` (no CUDA context is created)."""
    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total,memory.used", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=20, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    found = []
    for line in out.strip().splitlines():
        name, total, used = (part.strip() for part in line.rsplit(",", 2))
        found.append({"name": name, "memory_mib": int(total), "used_mib": int(used)})
    visible = [i.strip() for i in os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",") if i.strip()]
    if "CUDA_VISIBLE_DEVICES" in os.environ and all(i.isdigit() for i in visible):  # indices (not UUIDs): as torch counts them
        found = [found[int(i)] for i in visible if int(i) < len(found)]
    return found


def free_space(folder: Path) -> dict[str, Any]:
    """Free and total bytes of the file system ``folder`` is (or will be) on."""
    probe = folder.expanduser().resolve()
    while not probe.exists():
        probe = probe.parent
    usage = shutil.disk_usage(probe)
    return {"folder": str(folder), "free_bytes": usage.free, "total_bytes": usage.total}


def hub_check(endpoint: str | None = None) -> dict[str, Any]:
    """Is a token there (never its value), does the Hub answer, and whose token is it.

    One request to ``/api/whoami-v2``, with the token when there is one: any HTTP answer
    means the Hub is reachable; 401 with a token means the token is not accepted.
    """
    try:
        token: str | None = find_token()
    except HubAuthError:
        token = None
    endpoint = (endpoint or constants.ENDPOINT).rstrip("/")
    facts: dict[str, Any] = {"endpoint": endpoint, "token": token is not None, "answers": False}
    headers = {"authorization": f"Bearer {token}"} if token else {}
    try:
        response = get_session().get(f"{endpoint}/api/whoami-v2", headers=headers, timeout=HUB_TIMEOUT)
    except Exception as err:  # any failure to get an answer is the fact reported
        facts["error"] = f"no answer from {endpoint} ({type(err).__name__})"
        return facts
    facts["answers"] = True
    if token and response.status_code == 200:
        facts["user"] = response.json().get("name")
    elif token:
        facts["error"] = f"the Hub does not accept the token ({response.status_code})"
    return facts


def describe(store: str | Path = "runs", *, hub: bool = True) -> dict[str, Any]:
    """Everything ``fintts env`` reports, as a dict (``fintts env --json``)."""
    platform = detect_platform()
    started, how = session_start(platform, own_process=True)  # what `fintts train` would count from here
    limit = PLATFORM_LIMITS.get(platform)
    facts: dict[str, Any] = {
        "platform": platform,
        "session": {
            "started": started, "clock_from": how, "limit_seconds": limit,
            "left_seconds": None if limit is None else max(0.0, started + limit - time.time()),
        },
        "gpus": gpus(),
        "cpu": {"cores": os.cpu_count(), "torch": torch.__version__},
        "disk": free_space(Path(store)),
    }
    if hub:
        facts["hub"] = hub_check()
    return facts


def _gb(n: float) -> str:
    return f"{n / 1e9:.1f} GB"


def format_text(facts: dict[str, Any]) -> str:
    session = facts["session"]
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(session["started"]))
    limit = "no time limit" if session["limit_seconds"] is None else (
        f"limit {hms(session['limit_seconds'])}, {hms(session['left_seconds'])} left"
    )
    lines = [
        f"platform   {facts['platform']}",
        f"session    started {started} ({session['clock_from']}); {limit}",
    ]
    if facts["gpus"]:
        for index, gpu in enumerate(facts["gpus"]):
            lines.append(f"GPU {index}      {gpu['name']}, {gpu['memory_mib'] / 1024:.1f} GiB ({gpu['used_mib']} MiB in use)")
    else:
        lines.append(f"GPUs       none: training runs on the CPU ({facts['cpu']['cores']} cores, torch {facts['cpu']['torch']})")
    disk = facts["disk"]
    lines.append(f"disk       {_gb(disk['free_bytes'])} free of {_gb(disk['total_bytes'])} where checkpoints go ({disk['folder']})")
    if facts["platform"] == "kaggle":
        lines.append("           /kaggle/working keeps at most 20 GB as the version's output; with a Hub repo only "
                     "the newest keep_last checkpoints stay there")
    hub = facts.get("hub")
    if hub is not None:
        lines.append("HF token   " + ("present (its value is never shown)" if hub["token"] else
                                     "absent: set HF_TOKEN (on Kaggle: the secret HF_TOKEN) to keep the run on the Hub"))
        if hub["answers"] and not hub.get("error"):
            lines.append(f"Hub        {hub['endpoint']} answers" + (f"; the token is {hub['user']}'s" if hub.get("user") else ""))
        elif hub["answers"]:
            lines.append(f"Hub        {hub['endpoint']} answers, but: {hub['error']}")
        else:
            lines.append(f"Hub        does not answer: {hub['error']}")
    collectives = facts.get("collectives")
    if collectives is not None:
        lines.append(f"collective {collectives['message']}")
    return "\n".join(lines)
