"""What a person reads at the end of a session, and the loss plot kept with each checkpoint.

The summary is a view of the run's status (:mod:`fintts.train.report.status`) plus the few facts
only the ending session knows (was its checkpoint made safe, where it resumed from, how
its clock was started), so it says exactly what ``status.json`` says.
"""

from __future__ import annotations

import dataclasses
import io
import time
from collections.abc import Mapping, Sequence
from typing import Any

from fintts.train.decision import reason_words
from fintts.train.report.durations import hms, in_words
from fintts.train.report.status import NOT_LOSSES


@dataclasses.dataclass
class SessionSummary:
    run_name: str
    store: str
    state: str
    reason: str
    start_step: int
    end_step: int
    max_steps: int
    session_seconds: float
    total_seconds: float
    sessions: int
    loss: float | None
    best: dict[str, Any] | None
    monitor: str | None
    last_eval: dict[str, float] | None
    latest_checkpoint: str | None
    resumed_from: str | None
    durable: bool
    pending: str | None
    clock_origin: str
    warnings: list[str] = dataclasses.field(default_factory=list)
    #: peak memory per device this session (:func:`fintts.train.step.memory.peak_memory`).
    memory: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    #: what validation scores (the task's ``describe()["validated_on"]``): its size says how far the figures hold.
    validated_on: str | None = None

    @property
    def succeeded(self) -> bool:
        """The session ended cleanly (paused or finished) and its final checkpoint is safe in the store."""
        return self.durable and self.state != "failed"

    @property
    def steps(self) -> int:
        return self.end_step - self.start_step

    @classmethod
    def from_status(
        cls, status: Mapping[str, Any], *, resumed_from: str | None, durable: bool, pending: str | None, clock_origin: str
    ) -> SessionSummary:
        """The summary of the session that wrote ``status`` (its newest entry of ``sessions``)."""
        session = status["sessions"][-1]
        loss = status.get("loss") or {}
        evals = status.get("evals") or []
        return cls(
            run_name=status["run_name"],
            store=status["store"],
            state=status["state"],
            reason=status["reason"],
            start_step=session["start_step"],
            end_step=status["step"],
            max_steps=status["max_steps"],
            session_seconds=session["seconds"],
            total_seconds=status["time_used_seconds"],
            sessions=len(status["sessions"]),
            loss=loss.get(status.get("main_loss")),
            best=status.get("best"),
            monitor=status.get("monitor"),
            last_eval=evals[-1] if evals else None,
            latest_checkpoint=status.get("latest_checkpoint"),
            resumed_from=resumed_from,
            durable=durable,
            pending=pending,
            clock_origin=clock_origin,
            warnings=list(status.get("warnings") or []),
            memory=list(status.get("memory") or []),
            validated_on=(status.get("about") or {}).get("validated_on"),
        )

    def next_step(self) -> str:
        if self.pending:
            return "push the checkpoint first (the command above), then run the same command again to continue"
        if self.state == "failed":
            return f"see the warnings above; then run the same command again to continue from {self.latest_checkpoint or 'the start'}"
        if self.state == "finished":
            return f"done: the model is in {self.store}/model (fintts status --store {self.store} for details)"
        return f"run the same command again (next session or after a restart) to continue from step {self.end_step}"

    def format(self) -> str:
        per_step = self.session_seconds / self.steps if self.steps else 0.0
        lines = [
            "── fintts session summary " + "─" * 30,
            f"run        {self.run_name}   store: {self.store}",
            f"steps      {self.start_step} → {self.end_step} of {self.max_steps}"
            + (f"   ({self.steps} this session, {per_step:.2f} s/step incl. saving)" if self.steps else ""),
        ]
        if self.loss is not None:
            best = ""
            if self.best and self.monitor:
                best = f"   best {self.monitor} {self.best['value']:.4g} at step {self.best['step']}"
            lines.append(f"loss       {self.loss:.4g}{best}")
        if self.last_eval:
            metrics = ", ".join(f"{k} {v:.4g}" for k, v in self.last_eval.items() if k != "step")
            lines.append(f"validation step {self.last_eval.get('step')}: {metrics}")
        if self.validated_on:
            lines.append(f"validated  on {self.validated_on}")
        lines.append(
            f"time used  {hms(self.session_seconds)} this session, {hms(self.total_seconds)} in {self.sessions} session(s)"
            f"   (clock from {self.clock_origin})"
        )
        if self.memory:
            lines.append(f"memory     {describe_peaks(self.memory)}")
        lines.append(f"stopped    {reason_words(self.reason)}")
        lines += [f"WARNING    {warning}" for warning in self.warnings]
        if self.latest_checkpoint:
            lines.append(f"checkpoint {self.latest_checkpoint}" + ("" if self.durable else "   (NOT yet safe in the store)"))
        if self.pending:
            lines.append("WARNING    " + self.pending)
        lines.append(f"next       {self.next_step()}")
        return "\n".join(lines)


def format_status(status: dict, quota_hours: float) -> str:
    """``fintts status``: the run's status dict (with ``store_facts`` and ``estimate`` added) as text."""
    best = status.get("best")
    lines = [
        f"run         {status.get('run_name')}   ({status.get('task')})   store: {status.get('store')}",
        f"state       {status.get('state')}" + (f"   ({status['reason']})" if status.get("reason") else ""),
        f"step        {status.get('step')} of {status.get('max_steps')}   epoch {status.get('epoch')}",
    ]
    phase = status.get("phase")
    if phase:
        chosen = "".join(f", {k}: {v}" for k, v in phase["resolved"].items())
        lines.append(f"phase       {phase['index'] + 1} of {phase['count']}: {phase['name']} since step {phase['start_step']}{chosen}")
        for done in phase["finished"]:
            its_best = f", best {done['best']['value']:.4g} at step {done['best']['step']}" if done.get("best") else ""
            lines.append(f"            {done['name']}: steps {done['start_step']} → {done['end_step']} ({done['reason']}{its_best})")
    lines += [f"warning     {warning}" for warning in status.get("warnings") or []]
    if best:
        lines.append(f"best        {status.get('monitor')} {best['value']:.4g} at step {best['step']}")
    validated_on = (status.get("about") or {}).get("validated_on")
    if validated_on:
        lines.append(f"validated   on {validated_on}")
    if status.get("loss"):
        loss = {k: v for k, v in status["loss"].items() if k not in NOT_LOSSES}
        lines.append("loss        " + ", ".join(f"{k} {v:.4g}" for k, v in loss.items()))
    lines.append(f"checkpoint  {status.get('latest_checkpoint')}")
    if status.get("memory"):
        lines.append(f"memory      {describe_peaks(status['memory'])}   (the newest session's peak)")
    lines.append(f"time used   {hms(status.get('time_used_seconds') or 0)} in {len(status.get('sessions', []))} session(s)")
    estimate = status.get("estimate")
    if estimate and status.get("state") != "finished":
        lines.append(_estimate_line(status, estimate, quota_hours))
    facts = {k: v for k, v in status.get("store_facts", {}).items() if k != "store"}
    for key, value in facts.items():
        lines.append(f"{key:<11} {value}")
    sessions = status.get("sessions", [])
    # columns as wide as their longest entry: a device is named whole ("1×cpu (AMD EPYC, 2 threads)"), never cut mid-word
    host = max([len("host"), *(len(s["host"]) for s in sessions)])
    devices = max([len("devices"), *(len(s["devices"]) for s in sessions)])
    lines.append(f"sessions    {'started':<20} {'host':<{host}} {'devices':<{devices}} {'steps':<15} training  reason")
    for s in sessions:
        started = time.strftime("%Y-%m-%d %H:%M", time.localtime(s["started"]))
        lines.append(
            f"            {started:<20} {s['host']:<{host}} {s['devices']:<{devices}} "
            f"{s['start_step']:>6} → {s['end_step']:<6} {_training_share(s):>8}  {s['reason']}"
        )
    return "\n".join(lines)


def _estimate_line(status: Mapping[str, Any], estimate: Mapping[str, Any], quota_hours: float) -> str:
    """What is left, rounded as a person plans: the sessions' length in words, hours to a tenth, and no GPU quota
    for a run whose sessions all ran on a CPU."""
    limit = (status.get("clock") or {}).get("limit")
    sessions = status.get("sessions") or []
    on_cpu = bool(sessions) and all("cpu" in s.get("devices", "").lower() for s in sessions)
    spent = (f", {estimate['gpu_hours']:.1f} h of CPU time" if on_cpu else
             f", {estimate['gpu_hours']:.1f} GPU h, {estimate['weeks']:.2f} weeks at {quota_hours:g} GPU h/week")
    return (f"estimate    {estimate['steps']:,} steps left to step {status.get('max_steps'):,}: "
            f"{estimate['sessions']:,} more session(s)" + (f" of {in_words(limit)}" if limit else "")
            + spent + " (at the pace this run's sessions measured)")


def _training_share(session: dict) -> str:
    """The share of a session's time, from its true start, spent in optimizer steps."""
    phases = session.get("phases") or {}
    whole = session["seconds"] + phases.get("before", 0.0)
    return f"{phases['steps'] / whole:.1%}" if phases.get("steps") and whole else "—"


def loss_plot_png(history: list[dict[str, float]], evals: list[dict[str, float]]) -> bytes | None:
    """Training losses (and validation metrics on a second axis) as a PNG, or ``None`` with no history."""
    if not history:
        return None
    import matplotlib  # slow to import (~0.5 s); only the loss plot needs it

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure  # after matplotlib.use: the headless backend

    figure = Figure(figsize=(7, 4), dpi=90)
    axis = figure.add_subplot(1, 1, 1)
    steps = [h["step"] for h in history]
    for key in sorted({k for h in history for k in h} - NOT_LOSSES):
        axis.plot(steps, [h.get(key, float("nan")) for h in history], label=key, linewidth=1)
    axis.set_xlabel("step")
    axis.set_ylabel("training loss")
    axis.set_yscale("symlog", linthresh=1e-2)
    axis.legend(loc="upper left", fontsize=7)
    if evals:
        other = axis.twinx()
        for key in sorted({k for e in evals for k in e} - {"step"}):
            other.plot([e["step"] for e in evals], [e.get(key, float("nan")) for e in evals], "o--", label=key, markersize=3)
        other.set_ylabel("validation")
        other.legend(loc="upper right", fontsize=7)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def describe_peaks(peaks: Sequence[dict[str, Any]]) -> str:
    """The peaks of :func:`fintts.train.step.memory.peak_memory` in one line for people:
    ``cuda:0 3.1/4.0 GiB, cuda:1 3.1/4.2 GiB peak allocated/reserved``."""
    if not peaks:
        return "not measured"
    if all("allocated_gib" in p for p in peaks):
        parts = [f"{p['device']} {p['allocated_gib']:.2f}/{p['reserved_gib']:.2f} GiB" for p in peaks]
        return ", ".join(parts) + " peak allocated/reserved"
    parts = [f"{p['device']} {p['rss_gib']:.2f} GiB" if p.get("rss_gib") is not None else f"{p['device']} ?" for p in peaks]
    return ", ".join(parts) + " peak RSS"
