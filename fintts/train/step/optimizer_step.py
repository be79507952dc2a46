"""The optimizer step: accumulate micro-batches into every optimizer group, judge the step, apply it or not.

Autocast and the fp16 GradScaler are ours (so the same fp16 path runs on a CPU), the gradient
all-reduce is accelerate's (DDP, skipped with ``no_sync`` on all but the last micro-batch).
"""

from __future__ import annotations

import contextlib
import dataclasses
import warnings
from collections.abc import Iterator
from typing import Any

import torch

from fintts.train.processes.collective import post_note, who_raised
from fintts.train.step.building import BuiltPhase
from fintts.train.step.guard import StepGuard, gradient_norm
from fintts.train.step.memory import is_out_of_memory
from fintts.train.step.stepping import AUTOCAST_DTYPES, first_line, to_device


@dataclasses.dataclass
class OutOfMemory:
    """A step that ran out of memory in ``processes`` (``error``: this process's own, if it was one of them)."""

    processes: list[int]
    error: BaseException | None


def optimizer_step(
    built: BuiltPhase, batches: Iterator[Any], *, accelerator, guard: StepGuard, precision: str, device: torch.device,
    rank: int, world: int,
) -> tuple[dict[str, float], str | None, OutOfMemory | None]:
    """Accumulate ``accumulation`` micro-batches into every group, then step every group, unless the guard skips it.

    Returns the step's losses, why it was skipped (``None``: applied), and, when it ran
    out of memory in any process, where (then nothing was applied). The losses and the
    groups' gradient norms reach the host together, in one device sync (averaged over the
    processes, so every process judges the step the same).

    Out of memory in one process: before each group's last backward (the one whose
    gradients are all-reduced) the processes tell each other whether any ran out of
    memory so far, so a process that did still meets the others in that collective and
    they all give up the step together. An out-of-memory error inside that last
    backward itself cannot be met this way; it ends that process with an error.
    """
    totals: dict[str, torch.Tensor] = {}
    autocast_dtype = AUTOCAST_DTYPES[precision]
    failure: BaseException | None = None
    for index in range(built.accumulation):
        syncing = index == built.accumulation - 1
        batch = to_device(next(batches), device) if failure is None else None
        with contextlib.ExitStack() as stack:
            if not syncing:
                for model in built.models.values():
                    stack.enter_context(accelerator.no_sync(model))
            for group in built.groups:
                loss = None
                if failure is None:
                    try:
                        with torch.autocast(device.type, dtype=autocast_dtype or torch.float32, enabled=autocast_dtype is not None):
                            losses = built.task.step(built.models, batch, group.name)
                        loss = losses["loss"]
                        if not syncing or world == 1:
                            built.scaler.scale(loss / built.accumulation).backward(inputs=built.group_params[group.name])
                    except Exception as err:
                        if not is_out_of_memory(err):
                            raise
                        failure = err
                if world == 1 and failure is not None:
                    return {}, None, _give_up(built, device, rank, [rank], failure)
                if syncing and world > 1:
                    failed = who_raised(failure is not None, rank, world, device)
                    if failed:
                        return {}, None, _give_up(built, device, rank, failed, failure)
                    built.scaler.scale(loss / built.accumulation).backward(inputs=built.group_params[group.name])
                if failure is None:
                    for key, value in losses.items():
                        name = key if len(built.groups) == 1 else f"{group.name}/{key}"
                        totals[name] = totals.get(name, 0.0) + value.detach().float() / built.accumulation
    norms = []
    for group in built.groups:
        if built.scaler.is_enabled():
            built.scaler.unscale_(group.optimizer)  # fp16: judge (and clip) the true gradients
        norms.append(gradient_norm(built.group_params[group.name], device))
    stacked = torch.stack([*totals.values(), *norms])
    if world > 1:
        stacked = accelerator.reduce(stacked, reduction="mean")
    values = stacked.cpu().tolist()  # one device sync per step
    losses = dict(zip(totals, values))
    skipped = guard.judge(losses[built.main_loss], values[len(totals):], fp16=built.scaler.is_enabled())
    if skipped is None:
        for group in built.groups:
            if group.clip_grad_norm:
                torch.nn.utils.clip_grad_norm_(built.group_params[group.name], group.clip_grad_norm)
            built.scaler.step(group.optimizer)
    built.scaler.update()  # fp16: after an overflow the scale is halved; otherwise a no-op
    guard.record(losses[built.main_loss], skipped)
    for group in built.groups:
        group.optimizer.zero_grad(set_to_none=True)
        with warnings.catch_warnings():
            # a skipped step does not step the optimizer; the schedule follows the step count regardless
            warnings.filterwarnings("ignore", message=r"Detected call of `lr_scheduler.step\(\)` before")
            built.schedulers[group.name].step()
    return losses, skipped, None


def _give_up(built: BuiltPhase, device: torch.device, rank: int, processes: list[int], error: BaseException | None) -> OutOfMemory:
    """Free what a step that ran out of memory held; the step is not applied (it is redone when the run resumes).

    This process's error message is left for the main process, which says it in the session's warnings.
    """
    for group in built.groups:
        group.optimizer.zero_grad(set_to_none=True)
    if device.type == "cuda":
        torch.cuda.empty_cache()
    if error is not None and rank != 0:
        post_note("out-of-memory", rank, first_line(error))
    return OutOfMemory(processes, error)
