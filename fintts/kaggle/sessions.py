"""``fintts kaggle run`` and ``fintts kaggle status``: a run's sessions, chained from the laptop.

A Kaggle session trains until shortly before its 12-hour limit and pauses; then the run waits for
someone to start the next. ``fintts kaggle run`` is that someone: it pushes the training notebook,
follows the session, and decides from what the Hub holds afterwards (the run's ``status.json``,
read through :mod:`.hub_run`) whether to push the next one, stop as finished, or stop and say what
to do. The Hub decides, not the status alone: a session whose newest checkpoint did not reach the
Hub would have the next one resume from an older checkpoint and lose its training, so that
checkpoint is first pushed from the version's output when Kaggle kept it there (:mod:`.output`).
The rules — when the chain stops, a dead session's lease, a state that stays running, the quota,
retries, the first day — are in docs/kaggle.md (step 6, "Run").
"""

from __future__ import annotations

import dataclasses
import sys
import time
from typing import IO, Any

from fintts.errors import StoreError
from fintts.kaggle import quota as weekly
from fintts.kaggle.client import KaggleError, connect, user_of
from fintts.kaggle.clock import SYSTEM_CLOCK, Clock
from fintts.kaggle.hub_run import HubRun, read_run, status_of
from fintts.kaggle.kernel import KernelSettings, Pushed, kernel_ref, push
from fintts.kaggle.kernels import (
    ATTEMPTS,
    BACKOFF,
    ENDED,
    NEVER_RUN,
    PAST_LIMIT,
    PAST_LIMIT_MARGIN,
    READY_POLL,
    REQUEST_TIMEOUT,
    kernel_state,
    log_tail,
    missing_verdict,
    wait_for_datasets,
)
from fintts.kaggle.output import KAGGLE_OUTPUT, push_from_output_of
from fintts.kaggle.secret import MISSING, attach_hint, token_dataset
from fintts.train.config import parse_duration
from fintts.train.machine.platform import KAGGLE_SESSION_LIMIT
from fintts.train.report.durations import hms
from fintts.train.run.checkpoint import is_checkpoint_name
from fintts.train.stores.hub.client import HubClient
from fintts.train.stores.hub.errors import HubRepoError
from fintts.train.stores.hub.lease import Lease, lease_now, release_ended

FAILURES_IN_A_ROW = 2
#: How a session on Kaggle names its machine in the Hub lease (:func:`fintts.train.machine.platform.host_name`).
KAGGLE_HOST = "kaggle"


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
    #: the lease on the Hub just before this session was pushed, as (session, acquired); ``None``: none there.
    #: A lease the ended kernel left is one that differs from it: judged by the lease's own words, not by comparing
    #: this machine's clock with Kaggle's (they may be minutes apart).
    lease_before: tuple[str, str] | None = None
    #: the token dataset this version was pushed with (``""``: none)
    token_dataset: str = ""

    @property
    def gpu_hours(self) -> float:
        return self.running_seconds / 3600


def kernel_id(api: Any, hub_repo: str = "") -> str:
    """``owner/slug`` of the credentials' user's training notebook for ``hub_repo`` (one kernel per Hub repo)."""
    return kernel_ref(user_of(api), hub_repo)


#: Exit code when the person has to attach the secret before a session can train (a setting to change).
EXIT_SECRET = 2


def create_notebook(settings: KernelSettings, api: Any, kernel: str, out: IO[str]) -> Pushed:
    """Save ``kernel`` without running it, so that it exists for its secret; say what to do next."""
    saved = push(with_token(settings, api), api, attempts=ATTEMPTS, backoff=BACKOFF, run=False)
    out.write(f"created {kernel} on Kaggle ({saved.url}), saved without running: no session was spent.\n"
              f"Before its first session it needs your Hugging Face token: {attach_hint(kernel)}.\n"
              "Then run this command again.\n")
    out.flush()
    return saved


def push_session(settings: KernelSettings, api: Any, *, spent_hours: float = 0.0, gpu_hours: float = 0.0,
                 request_timeout: float = REQUEST_TIMEOUT, say: Any = None, poll: float = READY_POLL,
                 clock: Clock = SYSTEM_CLOCK) -> Pushed:
    """Push one session whose budget fits the weekly quota (and ``gpu_hours``); :class:`~.quota.QuotaSpent` when none fits."""
    try:
        quota = weekly.read_quota(api, attempts=ATTEMPTS, backoff=BACKOFF, timeout=request_timeout)
    except KaggleError as err:
        quota = None
        if say:
            say(f"could not read the weekly GPU quota ({err}): this session's budget is not capped by it")
    wanted = parse_duration(settings.budget, key="budget") if settings.budget else None
    if wanted is not None and wanted >= KAGGLE_SESSION_LIMIT and say:
        say(f"budget {settings.budget} is not less than Kaggle's {KAGGLE_SESSION_LIMIT / weekly.HOUR:g} h session limit, which "
            "would end the session before its final save: the session runs to the limit, less the reserve it keeps")
    limit_left = (gpu_hours - spent_hours) * weekly.HOUR if gpu_hours else None
    budget = weekly.session_budget(quota, wanted=wanted, limit_left=limit_left)
    if budget is None and wanted is not None:  # over the limit: the session's own limit, which keeps the final save's reserve
        settings = dataclasses.replace(settings, budget="")
    elif budget is not None and budget != wanted:
        why = "the weekly GPU quota" if quota is not None and budget == quota.left - weekly.MARGIN else f"--gpu-hours {gpu_hours:g}"
        settings = dataclasses.replace(settings, budget=weekly.duration(budget))
        if say:
            left = f"{quota.left / weekly.HOUR:.2f} h of the quota left" if quota is not None else "quota unknown"
            say(f"budget {settings.budget} for this session, capped by {why} ({left})")
    settings = with_token(settings, api)
    wait_for_datasets(api, settings, say=say, poll=poll, clock=clock)
    return push(settings, api, attempts=ATTEMPTS, backoff=BACKOFF)




def with_token(settings: KernelSettings, api: Any) -> KernelSettings:
    """``settings`` with the token dataset attached when it exists (looked up at every push: it may be new)."""
    if not settings.hub_repo or settings.token_dataset:
        return settings
    return dataclasses.replace(settings, token_dataset=token_dataset(api))


def unpushed_problem(run: HubRun, repo: str, kernel: str) -> str | None:
    """Why the chain must stop because ``run``'s newest checkpoint is only on a session's disk, with how to push it."""
    name = run.unpushed()
    if name is None:
        return None
    host, folder = run.local_folder()
    store = folder
    fetch = ""
    if folder.startswith(KAGGLE_OUTPUT):  # the session's output, as `kaggle kernels output` (or the Output tab) gives it
        store = f"OUT/{folder[len(KAGGLE_OUTPUT):]}"
        fetch = f"kaggle kernels output {kernel} -p OUT (or the version's Output tab), then "
    step = status_of(run).get("step")
    hub = run.latest if is_checkpoint_name(run.latest) else "none"
    return (f"{LOCAL_ONLY} {name} (step {step}) is only on {host} in {folder}; the Hub's latest is {hub}. The next session "
            f"would resume from {hub} and lose this session's training, so no session is pushed. Push it: "
            f"{fetch}fintts push --store {store} --hub-repo {repo}; then run this again "
            f"(to give {name} up instead, start one session by hand: fintts kaggle push)")


def release_dead_lease(repo: str, session: Session, timeout: float = REQUEST_TIMEOUT) -> str | None:
    """Delete the lease that the session's ended kernel left on the Hub; what was done, for the output (``None``: nothing).

    The lease's rules are the store's (:func:`fintts.train.stores.hub.lease.release_ended`); what is Kaggle's is which
    lease is the ended kernel's: a Kaggle host's, taken after this session was pushed.
    """
    client = HubClient.connect(repo, timeout=timeout)

    def ended(lease: Lease) -> bool:
        return lease.host == KAGGLE_HOST and _taken_after(lease, session)

    def release() -> Lease | None:
        return release_ended(client, ended, lambda lease: f"release: session {lease.session}, whose Kaggle kernel ended "
                                                          f"({session.kernel.lower()})")

    try:
        lease = client.retrying("release the lease of the ended kernel", release, attempts=ATTEMPTS, backoff=BACKOFF)
    except HubRepoError:  # no repo yet (a session that ended before its first push): no lease either
        return None
    except StoreError as err:  # e.g. a commit refused because the run moved on: someone holds it, and it is theirs
        return f"the lease on hf://{repo} stays ({err}); the next session waits for it to expire"
    if lease is None:
        return None
    if session.kernel == PAST_LIMIT:
        ended_how, gone = f"the kernel still said running past Kaggle's {KAGGLE_SESSION_LIMIT / weekly.HOUR:g} h limit", \
            "no session outlives that"
    else:
        ended_how, gone = f"the kernel ended ({session.kernel.lower()})", "Kaggle says it is gone"
    return (f"{ended_how} and left the lease of session {lease.session} on hf://{repo}: {gone}, so the lease is released "
            "and the next session takes the run over")


def _taken_after(lease: Lease, session: Session) -> bool:
    """Whether ``lease`` was taken after this session was pushed: it is not the one on the Hub before (a followed session: any)."""
    return not session.version or (lease.session, lease.acquired) != session.lease_before


def lease_on_hub(repo: str, timeout: float = REQUEST_TIMEOUT) -> tuple[str, str] | None:
    """The run's lease on the Hub now, as (session, acquired); ``None`` when there is none (or no repo yet)."""
    client = HubClient.connect(repo, timeout=timeout, anonymous_ok=True)

    def read() -> tuple[str, str] | None:
        lease = lease_now(client)
        return None if lease is None else (lease.session, lease.acquired)

    try:
        return client.retrying("read the run's lease", read, attempts=ATTEMPTS, backoff=BACKOFF)
    except HubRepoError:
        return None


def best_of(status: dict[str, Any] | None) -> str:
    best = (status or {}).get("best")
    return f"{status.get('monitor')} {best['value']:.4g}" if best and status.get("monitor") else ""


#: How long after it was first seen running a session whose state still says RUNNING counts as ended (:data:`PAST_LIMIT`).
PAST_LIMIT_AFTER = KAGGLE_SESSION_LIMIT + PAST_LIMIT_MARGIN


def follow(api: Any, kernel: str, session: Session, *, poll: float, out: IO[str], timeout: float = REQUEST_TIMEOUT,
           clock: Clock = SYSTEM_CLOCK) -> tuple[str, str]:
    """Wait for the session's end, showing its state; returns Kaggle's final state and message.

    A pushed session is followed by its version (``owner/slug/N``): right after a push the kernel's
    latest state may still be the previous version's COMPLETE (issue 41), which would end the
    session before it began. Should Kaggle refuse the version's status, the kernel's is read
    instead, and an ended state counts only once this session was seen queued or running.

    No session outlives Kaggle's limit: a state still RUNNING :data:`PAST_LIMIT_AFTER` after this
    machine first saw it running (a session found running: after the first look) ends the wait as
    :data:`PAST_LIMIT`, which the chain counts as a failed session, its lease released as a crashed
    one's. A session that stays QUEUED is waited for: Kaggle's limit counts from the container's start.
    """
    live = out.isatty()
    last = None
    seen_running = None
    seen_active = not session.version  # a session found running: its kernel's state is its own
    while True:
        state = kernel_state(api, kernel, timeout, session.version) if session.version else None
        if state is None or state[0] == NEVER_RUN:
            state = kernel_state(api, kernel, timeout)
            if state is not None and state[0] in ENDED and not seen_active:
                state = None
        name, message = state if state is not None and state[0] != NEVER_RUN else ("QUEUED", "")
        seen_active = seen_active or name in {"QUEUED", "RUNNING"} and state is not None
        now = clock.now()
        if name == "RUNNING" and seen_running is None:
            seen_running = now
        if seen_running is not None:
            session.running_seconds = now - seen_running
        if name == "RUNNING" and session.running_seconds > PAST_LIMIT_AFTER:
            name, message = PAST_LIMIT, (
                f"Kaggle still said running {hms(session.running_seconds)} after the session was first seen running, past "
                f"Kaggle's {KAGGLE_SESSION_LIMIT / weekly.HOUR:g} h session limit and {PAST_LIMIT_MARGIN / 60:g} minutes "
                "more: no session runs that long, so it counts as ended, and failed")
        shown = "running past Kaggle's limit" if name == PAST_LIMIT else name.lower()
        line = f"version {session.version}: {shown} {hms(now - session.started)}"
        if live:
            out.write("\r" + line + " " * 8)
            out.flush()
        elif name != last:
            out.write(line + "\n")
        last = name
        if name in ENDED or name == PAST_LIMIT:
            if live:
                out.write("\n")
            session.ended, session.kernel = now, name
            return name, message
        clock.sleep(poll)


def run_sessions(
    settings: KernelSettings,
    *,
    max_sessions: int = 0,
    gpu_hours: float = 0.0,
    poll: float = 60.0,
    request_timeout: float = REQUEST_TIMEOUT,
    out: IO[str] = sys.stdout,
    clock: Clock = SYSTEM_CLOCK,
) -> int:
    """Chain sessions of the run ``settings.hub_repo`` until it is finished, fails twice, or a limit is reached.

    ``request_timeout``: seconds one look at Kaggle or the Hub may take before it is tried again. ``clock``: the time
    and the waits of the chain (:mod:`.clock`: the command line passes the system's).
    """
    if not settings.hub_repo:
        raise KaggleError("fintts kaggle run follows the run through its Hub repo: give --hub-repo USER/NAME")
    settings.check()
    api = connect()
    kernel = kernel_id(api, settings.hub_repo)
    before = read_run(settings.hub_repo, request_timeout)
    sessions: list[Session] = []
    failures: list[str] = []
    earlier = kaggle_hours(before)  # --gpu-hours counts the run's hours, not this command's: a rerun goes on counting

    def say(text: str) -> None:
        out.write(text + "\n")
        out.flush()

    def from_output(run: HubRun | None, version: int, prefix: str) -> HubRun | None:
        return push_from_output_of(api, kernel, version, run, settings.hub_repo, timeout=request_timeout,
                                   say=lambda text: say(prefix + text))

    if status_of(before).get("state") == "finished" and before.missing():
        before = from_output(before, 0, f"{settings.hub_repo}: ") or before
    if status_of(before).get("state") == "finished":
        missing = before.missing()
        if missing:
            say(f"{settings.hub_repo} says finished, but {'; '.join(missing)}. The newest checkpoint is in the last "
                "session's output on Kaggle (Output tab): push it with fintts push, then run this again")
            return 1
        say(f"{settings.hub_repo} is already finished: {_pull_hint(settings.hub_repo)}")
        return 0
    current = kernel_state(api, kernel, request_timeout)
    if current is None and not token_dataset(api):  # a new notebook with no token to read: made first, for its secret
        create_notebook(settings, api, kernel, out)
        return 0
    following = current is not None and current[0] in {"QUEUED", "RUNNING"}
    # (a running session's newest checkpoint is its own to push: it is followed)
    blocked = None if following else _blocked(before, settings.hub_repo, kernel, current)
    if blocked:
        rescued = from_output(before, 0, f"{settings.hub_repo}: ")
        before = rescued or before
        blocked = _blocked(before, settings.hub_repo, kernel, current, rescued=rescued is not None)
    if blocked:
        say(f"{settings.hub_repo}: {blocked}")
        return 1
    while True:
        # the run's own record (earlier commands' sessions included), or what this command saw, whichever is more
        spent = max(kaggle_hours(before), earlier + sum(s.gpu_hours for s in sessions))
        if max_sessions and len(sessions) >= max_sessions:
            verdict, code = f"stopped after {len(sessions)} session(s) (--max-sessions {max_sessions})", 0
            break
        if gpu_hours and spent >= gpu_hours:
            verdict, code = f"stopped after {spent:.2f} GPU hours (--gpu-hours {gpu_hours:g})", 0
            break
        if following:
            say(f"{kernel} is already {current[0].lower()}: following it instead of pushing another session")
            session = Session(version=0, started=clock.now())
            following = False
        else:
            lease_before = lease_on_hub(settings.hub_repo, request_timeout)
            try:
                pushed = push_session(settings, api, spent_hours=spent, gpu_hours=gpu_hours, request_timeout=request_timeout, poll=poll,
                                      say=lambda text: say(f"session {len(sessions) + 1}: {text}"), clock=clock)
            except (weekly.QuotaSpent, weekly.LimitSpent) as err:
                verdict, code = f"stopped: {err}", 0
                break
            say(f"session {len(sessions) + 1}: pushed version {pushed.version} of {pushed.url}")
            session = Session(version=pushed.version, started=clock.now(), lease_before=lease_before,
                              token_dataset=pushed.token_dataset)
        name, message = follow(api, kernel, session, poll=poll, out=out, timeout=request_timeout, clock=clock)
        released = release_dead_lease(settings.hub_repo, session, request_timeout)
        if released:
            say(f"session {len(sessions) + 1}: {released}")
        after = read_run(settings.hub_repo, request_timeout)
        sessions.append(session)
        problem = _problem(name, message, before, after, repo=settings.hub_repo, kernel=kernel, version=session.version)
        if problem is not None and _lost_unless_pushed(problem):  # the newest checkpoint may be in the version's output
            rescued = from_output(after, session.version, f"session {len(sessions)}: ")
            if rescued is not None:
                after = rescued
                problem = _problem(name, message, before, after, repo=settings.hub_repo, kernel=kernel, version=session.version,
                                   rescued=True)
        _record(session, before, after)
        if problem is None:
            failures = []
            before = after
            if session.state == "finished":
                verdict, code = f"the run is finished. {_pull_hint(settings.hub_repo)}", 0
                break
            continue
        failures.append(problem)
        say(f"session {len(sessions)} failed: {problem}")
        tail = readable_log_tail(api, kernel, timeout=request_timeout, version=session.version)
        if MISSING in tail:
            verdict = (f"stopped: the session ended at once ({MISSING}), and so would the next: "
                       f"{missing_verdict(api, kernel, session.version, session.token_dataset)}")
            code = EXIT_SECRET
            break
        final = _lost_unless_pushed(problem)
        if len(failures) >= FAILURES_IN_A_ROW or final:
            why = "; ".join(dict.fromkeys(failures))
            stopped = "stopped" if final else f"stopped: {FAILURES_IN_A_ROW} sessions in a row failed"
            verdict = f"{stopped} ({why}). End of the last session's log:\n{tail}"
            code = 1
            break
        before = after or before
    say(format_table(sessions))
    say(verdict)
    return code


def _record(session: Session, before: HubRun | None, after: HubRun | None) -> None:
    """What the run's status said of the session once it ended: its state, steps and best."""
    session.state = status_of(after).get("state")
    session.start_step = status_of(before).get("step", 0)
    session.end_step = status_of(after).get("step", session.start_step)
    session.best = best_of(status_of(after) or None)


def _blocked(run: HubRun | None, repo: str, kernel: str, current: tuple[str, str] | None, *, rescued: bool = False) -> str | None:
    """Why no session may be pushed before the last one's newest checkpoint reaches the Hub (``None``: one may).

    ``rescued``: as for :func:`_problem`.
    """
    lost = unpushed_problem(run, repo, kernel) if run is not None else None
    if lost:
        return lost
    if current is not None and current[0] in ENDED and status_of(run).get("state") == "running" and not rescued:
        return ended_running_problem(run, repo, kernel, current[0])
    return None


def _lost_unless_pushed(problem: str) -> bool:
    """Whether ``problem`` says the session's newest checkpoint is only in its output (no later session may resume)."""
    return problem.startswith(UNFINISHED) or LOCAL_ONLY in problem or NO_END in problem


def readable_log_tail(api: Any, kernel: str, *, timeout: float = REQUEST_TIMEOUT, version: int = 0) -> str:
    """The end of a failed session's log, or why it could not be read: the verdict stands either way (a log is a help)."""
    try:
        return log_tail(api, kernel, timeout=timeout, version=version)
    except KaggleError as err:
        return f"(the session's log could not be read: {err})"


#: How a finished status over an incomplete Hub begins (no later session can finish it: it stops the chain).
UNFINISHED = "status.json says finished, but"
#: How a session whose newest checkpoint is only on its disk begins (a next session would lose it: it stops the chain).
LOCAL_ONLY = "its final push did not land:"
#: How a status still ``running`` after its kernel ended begins (its end never reached the Hub: it stops the chain).
NO_END = "its end never reached the Hub:"


def ended_running_problem(run: HubRun | None, repo: str, kernel: str, kernel_state_name: str, version: int = 0) -> str:
    """Why a run whose status still says ``running`` after Kaggle ended the kernel stops the chain, and what to do.

    The trainer writes ``running`` while it trains and ``paused``/``finished``/``failed`` at its end, with the final
    save: a status still ``running`` means neither the final push nor the release reached the Hub (the Hub down at the
    session's end, say). The session's newest checkpoint is newer than the Hub's, and only in that version's output;
    the next session would resume from the Hub's and lose the difference (up to ``push_every`` of training).
    """
    status = status_of(run)
    host, folder = run.local_folder() if run is not None else ("the Kaggle session", "the run's folder")
    ref = f"{kernel}/{version}" if version else kernel
    store = f"OUT/{folder[len(KAGGLE_OUTPUT):]}" if folder.startswith(KAGGLE_OUTPUT) else folder
    hub = run.latest if run is not None and is_checkpoint_name(run.latest) else "none"
    return (f"{NO_END} Kaggle ended the kernel ({kernel_state_name.lower()}) while hf://{repo}/status.json still says running "
            f"at step {status.get('step')} (the Hub's latest is {hub}). The session's newest checkpoint is in {folder} of that "
            f"version's output, not on the Hub, so no session is pushed. Push it: kaggle kernels output {ref} -p OUT (or the "
            f"version's Output tab), then fintts push --store {store} --hub-repo {repo}; then run this again")


def _problem(kernel_state_name: str, message: str, before: HubRun | None, after: HubRun | None, *, repo: str = "",
             kernel: str = "", version: int = 0, rescued: bool = False) -> str | None:
    """Why a session counts as failed, or ``None`` when it left the run further on.

    A session counts by what the Hub holds, not by the step its status reached: a newest
    checkpoint that is only on the session's disk is a failure whatever the state says.
    ``rescued``: that checkpoint was just pushed from the version's output (:mod:`.output`), with the
    status beside it there. A status still ``running`` is then the output's own — a session killed
    before its end wrote none — and no longer says the Hub lacks anything: the run goes on from it, as
    it would had the session's final push landed.
    """
    then, now = status_of(before), status_of(after)
    if now.get("state") == "finished" and after.missing():
        return f"{UNFINISHED} {'; '.join(after.missing())}. The newest checkpoint is in the session's output on Kaggle"
    lost = unpushed_problem(after, repo, kernel) if after is not None else None
    if lost:
        return (f"the run failed ({now.get('reason')}) and " if now.get("state") == "failed" else "") + lost
    if now.get("state") == "running" and not rescued:
        return ended_running_problem(after, repo, kernel, kernel_state_name, version)
    if now.get("state") == "failed":
        return f"the run failed: {now.get('reason')}"
    if kernel_state_name == PAST_LIMIT:
        return message
    if kernel_state_name != "COMPLETE":
        return f"the notebook ended {kernel_state_name.lower()}" + (f": {message}" if message else "")
    if not now or (then and now.get("step", 0) <= then.get("step", 0) and now.get("state") != "finished"):
        return "the session left no new checkpoint"
    return None


def kaggle_hours(run: HubRun | None) -> float:
    """The GPU hours the run's Kaggle sessions took, as its ``status.json`` records them (``started``/``ended`` of each)."""
    seconds = 0.0
    for record in status_of(run).get("sessions") or []:
        if not isinstance(record, dict) or record.get("host", KAGGLE_HOST) != KAGGLE_HOST:
            continue
        started, ended = record.get("started"), record.get("ended")
        if isinstance(started, (int, float)) and isinstance(ended, (int, float)):
            seconds += max(0.0, ended - started)
    return seconds / weekly.HOUR


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
    kernel = kernel_id(api, hub_repo)
    state = kernel_state(api, kernel)
    if state is None:
        kernel_line = "never pushed (fintts kaggle run creates it)"
    elif state[0] == NEVER_RUN:
        kernel_line = f"saved, never run (attach HF_TOKEN first: {attach_hint(kernel)})"
    else:
        kernel_line = state[0].lower() + (f" ({state[1]})" if state[1] else "")
    lines = [f"kernel     {kernel}: {kernel_line}"]
    if hub_repo:
        run = status_of(read_run(hub_repo))
        if not run:
            lines.append(f"run        hf://{hub_repo}: nothing trained yet")
        else:
            best = best_of(run)
            lines.append(
                f"run        hf://{hub_repo}: {run.get('state')} at step {run.get('step')} of {run.get('max_steps')}, "
                f"{len(run.get('sessions', []))} session(s)" + (f", best {best}" if best else "")
            )
    quota = weekly.read_quota(api)
    if quota is not None:
        lines.append(f"GPU quota  {quota.format()}")
    return "\n".join(lines)
