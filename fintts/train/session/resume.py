"""Resuming: the checkpoint a session starts from, loaded into the phase built from its state.

Drift is refused before anything is built (:func:`starting_checkpoint`): a checkpoint trained with
settings that change the result, or for other labels, is not continued unless asked
(``allow_config_change``). What may change (the data's items, the library versions, the
number of processes, the precision) is said, and kept in the session's warnings where the
training dynamics change.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import torch

from fintts.train import data_drift
from fintts.train.config import ConfigDrift, fingerprint, fingerprint_changes
from fintts.train.machine.platform import library_versions
from fintts.train.processes.collective import announce, await_main
from fintts.train.report import status
from fintts.train.run import checkpoint
from fintts.train.run.rng import restore_rng
from fintts.train.run.state import TrainerState
from fintts.train.session.facts import SessionFacts
from fintts.train.step.building import BuiltPhase
from fintts.train.step.guard import StepGuard


def starting_checkpoint(facts: SessionFacts, *, allow_config_change: bool) -> tuple[Path | None, TrainerState | None]:
    """The checkpoint to resume from and its state, read before anything is built; drift is refused here."""
    config, store, log = facts.config, facts.store, facts.log
    if facts.main:
        folder = store.resume_point(log)
        announce("resume-point")
    else:  # off the device: the main process may be downloading from the Hub for a while
        await_main("resume-point", facts.clock.end)
        folder = checkpoint.latest_complete(store.root, log=lambda _: None)
    if folder is None:
        log(f"starting run {config.train.run_name!r} in {store.url}")
        return None, None
    saved = checkpoint.read_state(folder, log)
    current = fingerprint(config)
    changes = fingerprint_changes(saved.fingerprint, current)
    if changes and not allow_config_change:
        raise ConfigDrift(
            f"{folder.name} in {store.url} was trained with other settings that change the result:\n  "
            + "\n  ".join(changes)
            + "\nRestore them, or pass --allow-config-change (allow_config_change=True) to continue with the new ones,"
            " or train a new run in another --store."
        )
    if changes:
        log("continuing with changed settings (--allow-config-change):\n  " + "\n  ".join(changes))
        saved.fingerprint = current
    return folder, saved


def data_record(built: BuiltPhase) -> dict[str, Any] | None:
    """What the run's state records of the data a phase trains on (compared at the next resume)."""
    return dataclasses.asdict(built.data_fingerprint) if built.data_fingerprint else None


def load_checkpoint(folder: Path, saved: TrainerState, built: BuiltPhase, facts: SessionFacts, *, guard: StepGuard,
                    allow_config_change: bool) -> None:
    """Load the checkpoint's weights, optimizers and random streams into the phase built from its state."""
    cfg, store, log, world, rank = built.cfg, facts.store, facts.log, facts.world, facts.rank
    data = check_data(saved, folder.name, built, facts, allow_config_change=allow_config_change)
    try:
        scaler = checkpoint.load_files(folder, models=built.raw_models, optimizers={g.name: g.optimizer for g in built.groups},
                                       schedulers=built.schedulers, device=facts.device)
    except checkpoint.WeightsDoNotFit as err:  # shapes that do not fit: say why, not a strict-load dump
        raise ConfigDrift(
            f"{folder.name} in {store.url}: its {err.model} weights do not fit the model built now ({err.detail})."
            + (f" The data changed: {data.labels}." if data.labels else "")
            + " Restore the settings and data it was trained with, or train a new run in another --store."
        ) from None
    load_scaler(scaler, saved, folder.name, built, facts)
    versions = library_versions()
    changed = {k: (v, versions.get(k, "(none)")) for k, v in saved.versions.items() if versions.get(k) != v}
    if changed:
        log(
            f"library versions changed since {folder.name} (results may differ slightly from an unbroken run): "
            + ", ".join(f"{k} {a} -> {b}" for k, (a, b) in sorted(changed.items()))
        )
    if saved.world_size != world or saved.micro_batch_size != built.micro:
        log(
            f"resuming on {world} device(s) with micro_batch_size={built.micro} (was {saved.world_size} × "
            f"{saved.micro_batch_size}): accumulation is now {built.accumulation} (was "
            f"{cfg.batch_size // max(1, saved.world_size * saved.micro_batch_size)}), so each step still uses "
            f"batch_size={cfg.batch_size} samples"
        )
    if saved.world_size == world and len(saved.rng) == world:
        restore_rng(saved.rng[rank])
    else:
        torch.manual_seed(cfg.seed + 7919 * saved.step + rank)
        log("the number of processes changed, so random streams restart from the seed and step (not bit-exact)")
    if saved.best_step is not None and saved.best_checkpoint is None:  # saved before the holder was recorded
        saved.best_checkpoint = status.best_checkpoint(saved.best_step, store.checkpoint_names())
    guard.restore(saved.guard)
    facts.clock.measured = list(saved.durable_seconds)
    facts.clock.validations = list(saved.validation_seconds)
    config = facts.config
    phase = f", phase {config.train.phases[saved.phase].name}" if config.train.phases else ""
    log(f"resuming run {cfg.run_name!r} from {folder.name} (step {saved.step}, epoch {saved.epoch}{phase}) in {store.url}")


def check_data(saved: TrainerState, name: str, built: BuiltPhase, facts: SessionFacts, *,
               allow_config_change: bool) -> data_drift.DataChanges:
    """Compare the task's data with the checkpoint's: refuse changed labels, warn of changed items (and reset the best)."""
    warn = facts.warn
    changes = data_drift.compare(saved.data, built.data_fingerprint)
    if changes.labels and not allow_config_change:
        raise ConfigDrift(
            f"{name} in {facts.store.url} was trained for other labels than the data has now: {changes.labels}. "
            "The model has one slot per label, so they cannot change within a run: restore the data, or train a new "
            "run in another --store (--allow-config-change continues if the shapes still fit, with the slots remapped)."
        )
    if changes.items:
        warn(
            f"the data changed since {name}: {changes.items}. The epoch plan follows the new data, so this "
            "resume is not exact"
        )
    if changes.heldout:
        warn(
            f"the validation data changed since {name}: {changes.heldout}. Validations are no longer comparable "
            f"with the stored best ({saved.best_value} at step {saved.best_step}), so the best starts again"
        )
        saved.best_value = saved.best_step = saved.best_checkpoint = None
        saved.bad_evals, saved.stopped_early = 0, False
    saved.data = data_record(built)
    return changes


def load_scaler(scaler_state: dict[str, Any], saved: TrainerState, name: str, built: BuiltPhase, facts: SessionFacts) -> None:
    """The fp16 loss scaler across a change of precision (other hardware, or another setting).

    fp16 → fp16 carries the scale on; bf16/fp32 → fp16 starts the scaler fresh (there is
    no scale to carry: the checkpoint's scaler state is empty); fp16 → bf16/fp32 drops the
    scale, which those precisions do not need. Each change is said, and kept in the
    session's warnings: the training dynamics change with the precision.
    """
    precision = facts.precision
    was = saved.precision or ("fp16" if scaler_state else "bf16 or fp32")
    if built.scaler.is_enabled() and scaler_state:
        built.scaler.load_state_dict(scaler_state)
        return
    if built.scaler.is_enabled():
        note = f"{name} was trained in {was}; fp16 loss scaling starts fresh (scale {built.scaler.get_scale():g})"
    elif scaler_state:
        note = (f"{name} was trained in fp16; its loss scale ({scaler_state.get('scale')}) is not needed in {precision} "
                "and is dropped")
    elif saved.precision and saved.precision != precision:
        note = f"{name} was trained in {saved.precision}; training continues in {precision}"
    else:
        return
    facts.log(note)
    facts.record.warnings.append(note)
