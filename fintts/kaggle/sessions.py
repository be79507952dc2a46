"""``fintts kaggle run`` and ``fintts kaggle status``: a run's sessions, chained from the laptop.

A Kaggle session trains until shortly before its 12-hour limit and pauses; then the run
waits for someone to start the next. ``fintts kaggle run`` is that someone. It pushes a new
version of the training notebook (which Kaggle runs at once), follows it, and when it ends
reads what the session left in the run's ``status.json`` on the Hub:

- ``paused`` with a new checkpoint: push the next session;
- ``finished``: stop, and say how to pull the voice;
- ``failed``, a kernel that ended in error, or a session that left no new checkpoint: a
  failure. One may be Kaggle's (a lost machine, a network outage) and the next session is
  pushed; two in a row are a pattern, and it stops with the reason and the end of the
  session's log.

It also stops after ``max_sessions`` sessions or ``gpu_hours`` GPU hours. GPU hours are the
time the kernel was seen running (queueing is free), which is what Kaggle's weekly quota
counts; the polling interval bounds the error. A version already queued or running when it
starts is followed instead of pushing a second one, which would find the run's lease taken.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from typing import IO, Any

from fintts.kaggle.client import KaggleError, calling, connect, user_of
from fintts.kaggle.kernel import TEMPLATE, KernelSettings, push, slug
from fintts.train.clock import hms
from fintts.train.stores.base import STATUS

#: Kaggle's kernel states that end a session.
ENDED = {"COMPLETE", "ERROR", "CANCEL_ACKNOWLEDGED"}
FAILURES_IN_A_ROW = 2
LOG_TAIL = 30


@dataclasses.dataclass
class Session:
    """One session as ``fintts kaggle run`` saw it."""

    version: int
    started: float  # pushed (or found running)
    ended: float = 0.0
    running_seconds: float = 0.0
    kernel: str = ""  # Kaggle's final state: COMPLETE, ERROR...
    state: str | None = None  # the run's state afterwards: paused, finished, failed (None: no status)
    start_step: int = 0
    end_step: int = 0
    best: str = ""

    @property
    def gpu_hours(self) -> float:
        return self.running_seconds / 3600


def kernel_id(api: Any) -> str:
    """``owner/slug`` of the training notebook of the credentials' user."""
    return f"{user_of(api)}/{slug(json.loads(TEMPLATE.read_text())['title'])}"


def kernel_state(api: Any, kernel: str) -> tuple[str, str] | None:
    """Kaggle's state of ``kernel``'s latest version and its failure message; ``None`` if never pushed."""
    try:
        response = calling(f"read the status of {kernel}", lambda: api.kernels_status(kernel))
    except KaggleError as err:
        if err.status == 404:
            return None
        raise
    return response.status.name, response.failure_message or ""


def read_run(repo: str) -> dict[str, Any] | None:
    """The run's ``status.json`` on the Hub now (``None``: nothing trained there yet)."""
    # the Hub store imports torch (1-2 s); only run and status read the run, push and wheels need not wait
    from fintts.train.stores.hub.client import HubClient, json_object
    from fintts.train.stores.hub.errors import HubRepoError

    client = HubClient.connect(repo)
    try:
        return json_object(client.read(STATUS, client.head()))
    except Exception as err:
        failure = client.failure(err)
        if isinstance(failure, HubRepoError):  # the first session creates the repo
            return None
        raise failure.prefixed(f"could not read {repo}'s status", "") from None


def log_tail(api: Any, kernel: str, lines: int = LOG_TAIL) -> str:
    """The end of the session's log, as text (Kaggle keeps it as JSON lines of ``data`` fields)."""
    raw = calling(f"read the log of {kernel}", lambda: api.kernels_logs(kernel))
    try:
        text = "".join(entry.get("data", "") for entry in json.loads(raw))
    except (ValueError, AttributeError, TypeError):
        text = raw
    return "\n".join(text.splitlines()[-lines:])


def best_of(status: dict[str, Any] | None) -> str:
    best = (status or {}).get("best")
    return f"{status.get('monitor')} {best['value']:.4g}" if best and status.get("monitor") else ""


def follow(api: Any, kernel: str, session: Session, *, poll: float, out: IO[str]) -> tuple[str, str]:
    """Wait for the session's end, showing its state; returns Kaggle's final state and message."""
    live = out.isatty()
    last = None
    seen_running = None
    while True:
        state = kernel_state(api, kernel)
        name, message = state if state is not None else ("QUEUED", "")
        now = time.time()
        if name == "RUNNING" and seen_running is None:
            seen_running = now
        if seen_running is not None:
            session.running_seconds = now - seen_running
        line = f"version {session.version}: {name.lower()} {hms(now - session.started)}"
        if live:
            out.write("\r" + line + " " * 8)
            out.flush()
        elif name != last:
            out.write(line + "\n")
        last = name
        if name in ENDED:
            if live:
                out.write("\n")
            session.ended, session.kernel = now, name
            return name, message
        time.sleep(poll)


def run_sessions(
    settings: KernelSettings,
    *,
    max_sessions: int = 0,
    gpu_hours: float = 0.0,
    poll: float = 60.0,
    out: IO[str] = sys.stdout,
) -> int:
    """Chain sessions of the run ``settings.hub_repo`` until it is finished, fails twice, or a limit is reached."""
    if not settings.hub_repo:
        raise KaggleError("fintts kaggle run follows the run through its Hub repo: give --hub-repo USER/NAME")
    settings.check()
    api = connect()
    kernel = kernel_id(api)
    before = read_run(settings.hub_repo)
    sessions: list[Session] = []
    failures: list[str] = []

    def say(text: str) -> None:
        out.write(text + "\n")
        out.flush()

    if before and before.get("state") == "finished":
        say(f"{settings.hub_repo} is already finished: {_pull_hint(settings.hub_repo)}")
        return 0
    current = kernel_state(api, kernel)
    following = current is not None and current[0] in {"QUEUED", "RUNNING"}
    while True:
        spent = sum(s.gpu_hours for s in sessions)
        if max_sessions and len(sessions) >= max_sessions:
            verdict, code = f"stopped after {len(sessions)} session(s) (--max-sessions {max_sessions})", 0
            break
        if gpu_hours and spent >= gpu_hours:
            verdict, code = f"stopped after {spent:.2f} GPU hours (--gpu-hours {gpu_hours:g})", 0
            break
        if following:
            say(f"{kernel} is already {current[0].lower()}: following it instead of pushing another session")
            session = Session(version=0, started=time.time())
            following = False
        else:
            pushed = push(settings, api)
            say(f"session {len(sessions) + 1}: pushed version {pushed.version} of {pushed.url}")
            session = Session(version=pushed.version, started=time.time())
        name, message = follow(api, kernel, session, poll=poll, out=out)
        after = read_run(settings.hub_repo)
        session.state = (after or {}).get("state")
        session.start_step = (before or {}).get("step", 0)
        session.end_step = (after or {}).get("step", session.start_step)
        session.best = best_of(after)
        sessions.append(session)
        problem = _problem(name, message, before, after)
        if problem is None:
            failures = []
            before = after
            if session.state == "finished":
                verdict, code = f"the run is finished. {_pull_hint(settings.hub_repo)}", 0
                break
            continue
        failures.append(problem)
        say(f"session {len(sessions)} failed: {problem}")
        if len(failures) >= FAILURES_IN_A_ROW:
            tail = log_tail(api, kernel)
            why = "; ".join(dict.fromkeys(failures))
            verdict = f"stopped: {FAILURES_IN_A_ROW} sessions in a row failed ({why}). End of the last session's log:\n{tail}"
            code = 1
            break
        before = after or before
    say(format_table(sessions))
    say(verdict)
    return code


def _problem(kernel_state_name: str, message: str, before: dict | None, after: dict | None) -> str | None:
    """Why a session counts as failed, or ``None`` when it left the run further on."""
    if after is not None and after.get("state") == "failed":
        return f"the run failed: {after.get('reason')}"
    if kernel_state_name != "COMPLETE":
        return f"the notebook ended {kernel_state_name.lower()}" + (f": {message}" if message else "")
    if after is None or (before is not None and after.get("step", 0) <= before.get("step", 0) and after.get("state") != "finished"):
        return "the session left no new checkpoint"
    return None


def _pull_hint(repo: str) -> str:
    return f"Pull the voice with: fintts pull {repo} --out voices/{repo.split('/')[-1]}"


def format_table(sessions: list[Session]) -> str:
    lines = [f"{'session':<8} {'version':>7}  {'start':<16} {'end':<16} {'steps':<17} {'best':<20} {'GPU h':>6}  state"]
    for number, s in enumerate(sessions, 1):
        lines.append(
            f"{number:<8} {s.version or '-':>7}  {_when(s.started):<16} {_when(s.ended):<16} "
            f"{f'{s.start_step} → {s.end_step}':<17} {s.best or '-':<20} {s.gpu_hours:>6.2f}  {s.state or s.kernel.lower()}"
        )
    return "\n".join(lines)


def _when(stamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp)) if stamp else "-"


def describe(hub_repo: str = "") -> str:
    """``fintts kaggle status``: the notebook's state on Kaggle, the run's on the Hub, and the weekly GPU quota."""
    api = connect()
    kernel = kernel_id(api)
    state = kernel_state(api, kernel)
    lines = [f"kernel     {kernel}: " + ("never pushed (fintts kaggle push)" if state is None else
                                          state[0].lower() + (f" ({state[1]})" if state[1] else ""))]
    if hub_repo:
        run = read_run(hub_repo)
        if run is None:
            lines.append(f"run        hf://{hub_repo}: nothing trained yet")
        else:
            best = best_of(run)
            lines.append(
                f"run        hf://{hub_repo}: {run.get('state')} at step {run.get('step')} of {run.get('max_steps')}, "
                f"{len(run.get('sessions', []))} session(s)" + (f", best {best}" if best else "")
            )
    quota = calling("read the GPU quota", api.quota_view)
    if quota is not None and quota.gpu_quota is not None:
        used = quota.gpu_quota.time_used.total_seconds() / 3600
        total = quota.gpu_quota.total_time_allowed.total_seconds() / 3600
        refresh = quota.quota_refresh_time.strftime("%Y-%m-%d %H:%M UTC") if quota.quota_refresh_time else "?"
        lines.append(f"GPU quota  {used:.1f} h used of {total:.0f} h this week (renews {refresh})")
    return "\n".join(lines)
