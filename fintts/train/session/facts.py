"""The facts of one session: what it runs on and with, built once at its start, taken explicitly by every part.

The session's accelerator, device, rank and world, precision, clock, store, record and log used to be set
on the trainer one by one while it set up, so whether a fact was set yet depended on who called and when.
:meth:`SessionFacts.begin` builds them once, in the order the session needs (the process group before the
device, the store's deadline before anything talks to it). Nothing in it is rebound while the session
runs; the objects it holds change inside (the clock learns, the record gathers warnings, the store pushes),
and a phase switch changes ``BuiltPhase.cfg``, never ``config``: the run's config as the session began.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable

import torch
from accelerate import Accelerator

from fintts.train.config import RunConfig
from fintts.train.machine.platform import device_label, host_name
from fintts.train.run.state import SessionRecord
from fintts.train.session.clock import SessionClock, StopRequest, session_clock
from fintts.train.session.watchdog import CollectiveBound, process_group_settings
from fintts.train.step import memory
from fintts.train.step.precision import resolve_precision
from fintts.train.stores import Store


@dataclasses.dataclass(frozen=True)
class SessionFacts:
    """What one session runs on and with (see the module): built by :meth:`begin`, never rebound."""

    #: the run's config as the session began (a phase's own settings are ``BuiltPhase.cfg``)
    config: RunConfig
    store: Store
    #: the signals received during the session, and the phase that says how they are handled
    stop: StopRequest
    clock: SessionClock
    #: where the clock's start came from (for the summary)
    clock_origin: str
    #: the process group's timeout, following the measured stretches between votes
    bound: CollectiveBound
    accelerator: Accelerator
    #: this process's device (``cpu``, never accelerate's ``cpu:0``, which torch.load and safetensors refuse)
    device: torch.device
    world: int
    rank: int
    #: the process that writes, pushes and speaks for the session
    main: bool
    precision: str
    #: this session's entry in the run's sessions log (its warnings, times and end fill in as it goes)
    record: SessionRecord
    #: the caller's log, in every process (:meth:`log` speaks in the main one only)
    sink: Callable[[str], None] = print

    @classmethod
    def begin(cls, config: RunConfig, store: Store, stop: StopRequest, log: Callable[[str], None], *,
              own_process: bool = False) -> SessionFacts:
        """The session's facts, at its start: its clock, the process group bounded by it, the device, the store's deadline,
        its record, and the device's peak memory counted from here (also when one process trains several sessions).
        ``own_process``: this process was started for this session (see :func:`~fintts.train.machine.platform.session_start`)."""
        cfg = config.train
        clock, clock_origin = session_clock(cfg, own_process=own_process)
        bound = CollectiveBound(cfg.collective_timeout, clock.limit)
        accelerator = Accelerator(kwargs_handlers=process_group_settings(bound))
        bound.joined()
        device = torch.device("cpu") if accelerator.device.type == "cpu" else accelerator.device
        world = accelerator.num_processes
        precision = resolve_precision(cfg.precision, device)
        store.set_deadline(clock.end)
        record = SessionRecord(
            id=uuid.uuid4().hex[:12], host=host_name(), devices=device_label(device, world), precision=precision, started=time.time(),
        )
        record.phases["before"] = max(0.0, record.started - clock.start)
        memory.reset_peaks(device)
        return cls(
            config=config, store=store, stop=stop, clock=clock, clock_origin=clock_origin, bound=bound, accelerator=accelerator,
            device=device, world=world, rank=accelerator.process_index, main=accelerator.is_main_process, precision=precision,
            record=record, sink=log,
        )

    def log(self, message: str) -> None:
        """Say ``message`` once for the session: in the main process."""
        if self.main:
            self.sink(message)

    def warn(self, message: str) -> None:
        """Something a person must know, that does not stop training: logged, and kept in the session's warnings."""
        if message not in self.record.warnings:
            self.record.warnings.append(message)
            self.log(f"warning: {message}")

    def stopping(self, why: str) -> None:
        """Why training stops the session: kept in its warnings (the status and the summary say it), and logged."""
        self.record.warnings.append(why)
        self.log("stopping: " + why)

    def spent(self, phase: str, since: float) -> None:
        """Add the time since ``since`` to this session's ``phase`` (see :data:`fintts.train.run.state.PHASES`)."""
        self.record.phases[phase] = self.record.phases.get(phase, 0.0) + time.time() - since
