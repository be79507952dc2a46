"""What a person reads at the end of a session, and the loss plot kept with each checkpoint."""

from __future__ import annotations

import dataclasses
import io
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fintts.train.loop import Trainer

REASONS = {
    "max_steps": "reached max_steps",
    "early_stopping": "early stopping: the monitored metric stopped improving",
    "deadline": "the session's time budget is used up (stopped before the deadline, with the reserve for saving)",
    "SIGTERM": "asked to stop (SIGTERM)",
    "SIGINT": "interrupted (SIGINT)",
}


def hms(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


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
    latest_checkpoint: str | None
    resumed_from: str | None
    durable: bool
    pending: str | None
    clock_origin: str

    @property
    def steps(self) -> int:
        return self.end_step - self.start_step

    @classmethod
    def build(cls, trainer: "Trainer", *, reason: str, resumed_from: str | None, finished: bool, durable: bool, pending: str | None) -> "SessionSummary":
        from fintts.train import checkpoint

        state = trainer.state
        history = state.history[-1] if state.history else {}
        loss_key = next((k for k in ("loss", f"{trainer.groups[0].name}/loss") if k in history), None)
        latest = checkpoint.read_latest(trainer.store.root)
        return cls(
            run_name=trainer.cfg.run_name,
            store=trainer.store.url,
            state="finished" if finished else "paused",
            reason=reason,
            start_step=trainer.session.start_step,
            end_step=state.step,
            max_steps=trainer.cfg.max_steps,
            session_seconds=trainer.session.seconds,
            total_seconds=state.seconds_trained,
            sessions=len(state.sessions),
            loss=history.get(loss_key) if loss_key else None,
            best=None if state.best_step is None else {"value": state.best_value, "step": state.best_step},
            monitor=trainer.monitor or None,
            latest_checkpoint=str(trainer.store.root / checkpoint.CHECKPOINTS / latest) if latest else None,
            resumed_from=resumed_from,
            durable=durable,
            pending=pending,
            clock_origin=trainer.clock_origin,
        )

    def next_step(self) -> str:
        if self.state == "finished":
            return f"done: the voice is in {self.store}/model (fintts status --store {self.store} for details)"
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
        lines.append(
            f"time used  {hms(self.session_seconds)} this session, {hms(self.total_seconds)} in {self.sessions} session(s)"
            f"   (clock from {self.clock_origin})"
        )
        lines.append(f"stopped    {REASONS.get(self.reason, self.reason)}")
        if self.latest_checkpoint:
            lines.append(f"checkpoint {self.latest_checkpoint}" + ("" if self.durable else "   (NOT yet safe in the store)"))
        if self.pending:
            lines.append("WARNING    " + self.pending)
        lines.append(f"next       {self.next_step()}")
        return "\n".join(lines)


def loss_plot_png(history: list[dict[str, float]], evals: list[dict[str, float]]) -> bytes | None:
    """Training losses (and validation metrics on a second axis) as a PNG, or ``None`` with no history."""
    if not history:
        return None
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 4), dpi=90)
    axis = figure.add_subplot(1, 1, 1)
    steps = [h["step"] for h in history]
    for key in sorted({k for h in history for k in h} - {"step", "lr"}):
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
