"""The session trainer's promises, through its public API with the toy task."""

from __future__ import annotations

import dataclasses
import json
import warnings
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from fintts.train import ConfigDrift, Trainer, train
from fintts.train.config import ConfigError, load_config
from fintts.train.run import checkpoint
from fintts.train.session.clock import SessionClock
from fintts.train.step.sampler import EpochPlan, MicroBatchSampler
from trainer_helpers import QUIET, assert_bit_identical, final_weights, run_python, write_config


@pytest.fixture(scope="session")
def reference(tmp_path_factory):
    """The toy run trained without a break: the weights every resumed run must reproduce."""
    folder = tmp_path_factory.mktemp("reference")
    config = write_config(folder)
    train(config, store=folder / "store", **QUIET)
    return config, final_weights(folder / "store")


@pytest.mark.slow
@pytest.mark.parametrize("breaks", [[1], [5, 6], [17, 31, 40]])
def test_stopping_anywhere_and_resuming_is_bit_identical(reference, tmp_path, breaks):
    config, expected = reference
    store = tmp_path / "store"
    for stop_at in breaks:
        summary = train(config, store=store, max_steps=stop_at, **QUIET)
        assert summary.end_step == stop_at
    summary = train(config, store=store, **QUIET)
    assert summary.state == "finished" and summary.end_step == 48
    assert_bit_identical(final_weights(store), expected)


@pytest.mark.slow
def test_a_session_says_in_its_log_why_it_saves_and_why_it_stops(tmp_path):
    # each reason in the words of fintts.train.decision's tables, at the step it was decided
    said = []
    train(write_config(tmp_path, max_steps=6, eval_every=0), store=tmp_path / "store", progress=False, log=said.append)
    assert "step 5: saving a checkpoint (checkpoint_every_steps): every checkpoint_every_steps steps" in said, said
    assert "step 6: the session stops (max_steps): reached max_steps" in said, said
    assert "step 6: saving a checkpoint (final): the session ends: its last step" in said, said
    said.clear()
    train(write_config(tmp_path, max_steps=6, eval_every=0), store=tmp_path / "store", progress=False, log=said.append)
    assert "step 6: the session stops (max_steps): reached max_steps" in said, said  # nothing left: said all the same


@pytest.mark.slow
def test_fp16_scaler_state_resumes_exactly(tmp_path):
    config = write_config(tmp_path, precision="fp16", adversarial=False, max_steps=20)
    train(config, store=tmp_path / "whole", **QUIET)
    train(config, store=tmp_path / "broken", max_steps=9, **QUIET)
    scaler = torch.load(tmp_path / "broken/checkpoints/step-00000009/scaler.pt", weights_only=True)
    assert scaler["scale"] > 0
    train(config, store=tmp_path / "broken", **QUIET)
    assert_bit_identical(final_weights(tmp_path / "broken"), final_weights(tmp_path / "whole"))


@pytest.mark.slow
def test_effective_batch_is_the_same_whatever_the_split(tmp_path):
    """batch_size is per optimizer step: 1×16, 2×8 or 4×4 micro-batches train the same model."""
    results = []
    for micro in (16, 8, 4):
        config = write_config(tmp_path, dropout=0.0, adversarial=False, max_steps=12, micro_batch_size=micro)
        train(config, store=tmp_path / f"micro{micro}", **QUIET)
        results.append(final_weights(tmp_path / f"micro{micro}"))
    for other in results[1:]:
        for key in results[0]:
            torch.testing.assert_close(other[key], results[0][key], rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_resuming_with_another_split_keeps_the_effective_batch_and_says_so(tmp_path):
    config = write_config(tmp_path, dropout=0.0, adversarial=False, max_steps=12)
    train(config, store=tmp_path / "whole", **QUIET)
    train(config, store=tmp_path / "moved", max_steps=6, **QUIET)
    messages: list[str] = []
    train(
        load_config(config, ["micro_batch_size=4"]), store=tmp_path / "moved", progress=False, log=messages.append
    )
    assert any("accumulation is now 4" in m and "batch_size=16" in m for m in messages)
    whole, moved = final_weights(tmp_path / "whole"), final_weights(tmp_path / "moved")
    for key in whole:
        torch.testing.assert_close(moved[key], whole[key], rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_corrupt_latest_checkpoint_falls_back_to_the_newest_complete_one(reference, tmp_path):
    config, expected = reference
    store = tmp_path / "store"
    train(config, store=store, max_steps=22, **QUIET)  # checkpoints at 5, 10, 15, 20, 22 (keep_last 3)
    newest = store / "checkpoints" / "step-00000022"
    data = (newest / "model.safetensors").read_bytes()
    (newest / "model.safetensors").write_bytes(data[: len(data) // 2])
    messages: list[str] = []
    train(config, store=store, progress=False, log=messages.append)
    assert any("skipping checkpoint step-00000022" in m and "model.safetensors" in m for m in messages)
    assert any("resuming" in m and "step-00000020" in m for m in messages)
    assert_bit_identical(final_weights(store), expected)


@pytest.mark.slow
def test_unfinished_checkpoint_and_dangling_latest_are_ignored(reference, tmp_path):
    config, expected = reference
    store = tmp_path / "store"
    train(config, store=store, max_steps=10, **QUIET)
    partial = store / "checkpoints" / ".partial-step-00000015"
    partial.mkdir()
    (partial / "model.safetensors").write_bytes(b"half")
    no_manifest = store / "checkpoints" / "step-00000014"
    no_manifest.mkdir()
    (no_manifest / "state.json").write_text("{}")
    (store / "latest").write_text("step-00000014\n")
    messages: list[str] = []
    train(config, store=store, progress=False, log=messages.append)
    assert any("step-00000014" in m and "MANIFEST" in m for m in messages)
    assert_bit_identical(final_weights(store), expected)


@pytest.mark.slow
def test_a_checkpoint_of_a_newer_fintts_resumes_without_what_this_one_does_not_know_and_says_so(tmp_path):
    config = write_config(tmp_path, max_steps=2, eval_every=0, checkpoint_every_steps=0)
    store = tmp_path / "store"
    train(config, store=store, **QUIET)
    newest = store / "checkpoints" / "step-00000002"
    state = json.loads((newest / "state.json").read_text())
    state["sessions"][0]["gpu_memory"] = {"peak": 1.5}  # fields a newer fintts records, in a session's record
    state["schedule_v2"] = [1, 2]  # and at the top
    (newest / "state.json").write_text(json.dumps(state))
    checkpoint.write_manifest(newest)  # as that fintts finished it
    messages: list[str] = []
    summary = train(config, store=store, max_steps=3, progress=False, log=messages.append)
    assert summary.start_step == 2 and summary.end_step == 3
    [note] = [m for m in messages if "does not know" in m]
    assert "sessions[0].gpu_memory" in note and "schedule_v2" in note
    resumed = json.loads((store / "checkpoints" / "step-00000003" / "state.json").read_text())
    assert len(resumed["sessions"]) == 2 and "gpu_memory" not in resumed["sessions"][0]


@pytest.mark.slow
def test_math_changing_settings_are_refused_and_free_ones_are_not(tmp_path):
    config = write_config(tmp_path, max_steps=6)
    store = tmp_path / "store"
    train(config, store=store, **QUIET)
    with pytest.raises(ConfigDrift) as refused:
        train(load_config(config, ["seed=12", "lr=0.01", "max_steps=8"]), store=store, **QUIET)
    assert "seed: 11 -> 12" in str(refused.value) and "lr: 0.003 -> 0.01" in str(refused.value)
    assert "--allow-config-change" in str(refused.value)
    summary = train(load_config(config, ["max_steps=9", "eval_every=3", "keep_last=1", "log_every=1"]), store=store, **QUIET)
    assert summary.end_step == 9
    summary = train(load_config(config, ["seed=12", "max_steps=10"]), store=store, allow_config_change=True, **QUIET)
    assert summary.end_step == 10


def test_unknown_settings_name_the_key_and_the_valid_ones(tmp_path):
    config = write_config(tmp_path)
    with pytest.raises(ConfigError, match=r"unknown setting max_step\b.*Trainer settings: .*max_steps"):
        load_config(config, ["max_step=3"])
    with pytest.raises(ConfigError, match="precision"):
        load_config(config, ["precision=fp8"])
    with pytest.raises(ConfigError, match="lr: expected float"):
        load_config(config, ["lr=fast"])


def test_store_settings_are_config_keys_with_one_rule_for_the_local_folder(tmp_path):
    config = write_config(tmp_path)
    assert load_config(config).train.local_dir() == Path("runs/toy")
    hub = load_config(config, ["hub_repo=alice/finnish-voice", "push_every=10m", "storage_cap_gb=5"]).train
    assert hub.local_dir() == Path("runs/finnish-voice")  # a Hub run: one folder per repo, not per config
    assert hub.push_every == 600.0 and hub.storage_cap_gb == 5.0
    assert load_config(config, ["store=/tmp/elsewhere", "hub_repo=alice/x"]).train.local_dir() == Path("/tmp/elsewhere")
    with pytest.raises(ConfigError, match="hub_repo: alice/x"):
        load_config(config, ["store=hf://alice/x"])
    with pytest.raises(ConfigError, match="hub_repo: 'alice' is not a Hub repo id"):
        load_config(config, ["hub_repo=alice"])
    with pytest.raises(ConfigError, match="push_every: 'soon' is not a duration"):
        load_config(config, ["hub_repo=alice/x", "push_every=soon"])
    with pytest.raises(ConfigError, match=r"task: missing.*toy"):
        load_config(None, {"max_steps": 3})


@pytest.mark.slow
def test_early_stopping_keeps_the_best_checkpoint_and_export(tmp_path):
    # A learning rate this high makes the validation loss stop improving quickly.
    config = write_config(tmp_path, lr=0.5, max_steps=400, eval_every=2, patience=2, keep_last=1, checkpoint_every_steps=1)
    store = tmp_path / "store"
    summary = train(config, store=store, **QUIET)
    assert summary.reason == "early_stopping" and summary.end_step < 400
    state = json.loads((store / "status.json").read_text())
    best_step = state["best"]["step"]
    kept = checkpoint.list_names(store)
    assert checkpoint.name_for_step(best_step) in kept and checkpoint.name_for_step(summary.end_step) in kept
    assert len(kept) == 2 and (store / "model" / "model.safetensors").exists()
    assert state["best"]["checkpoint"] == checkpoint.name_for_step(best_step)  # what `fintts pull --checkpoint best` fetches
    best_weights = load_file(store / "checkpoints" / state["best"]["checkpoint"] / "model.safetensors")
    assert_bit_identical(load_file(store / "model" / "model.safetensors"), best_weights)
    assert summary.last_eval["step"] == summary.end_step and "validation step" in summary.format()
    again = train(config, store=store, **QUIET)  # nothing left to do: it says so and changes nothing
    assert again.steps == 0 and again.reason == "early_stopping"


@pytest.mark.slow
def test_checkpoint_holds_what_a_person_and_a_resume_need(tmp_path):
    config = write_config(tmp_path, max_steps=8)
    store = tmp_path / "store"
    train(config, store=store, **QUIET)
    folder = store / "checkpoints" / "step-00000008"
    names = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    assert {"model.safetensors", "critic.safetensors", "optim.pt", "sched.pt", "scaler.pt", "state.json",
            "config.yaml", "loss.png", "samples/val.json", "MANIFEST.json"} <= names
    for name in ("optim.pt", "sched.pt", "scaler.pt"):
        torch.load(folder / name, weights_only=True)
    manifest = json.loads((folder / "MANIFEST.json").read_text())["files"]
    assert set(manifest) == names - {"MANIFEST.json"}
    state = json.loads((folder / "state.json").read_text())
    assert {"step", "epoch", "step_in_epoch", "rng", "best_value", "bad_evals", "sessions", "fingerprint"} <= set(state)
    # the loss plot is drawn for the session's final checkpoint (and pushed ones), not for every save on this disk
    assert not (store / "checkpoints" / "step-00000005" / "loss.png").exists()
    assert (store / "checkpoints" / "step-00000005" / "MANIFEST.json").is_file()
    assert state["sessions"][0]["reason"] == "max_steps"


@pytest.mark.process
def test_a_budget_counts_from_the_call_in_a_program_that_was_running_before(tmp_path):
    """A notebook's kernel that trains a while after it started still gets its whole ``budget`` (counted from the
    kernel's start, a 5 s limit gave it one step); ``fintts train --budget`` counts from its own process's start.

    The verdict reads where the session's clock started (``status.json``: the session's ``started`` less its
    ``before`` phase), not how many steps fitted: on a busy machine the session's set-up alone can take the 6 s,
    whichever start it counts from (benchmarks/README.md, "The test suite's time").
    """
    config = write_config(tmp_path, max_steps=100_000, step_delay=0.05)
    program = f"""
import json, time
from fintts.train import train
time.sleep(6)  # the kernel ran other cells first
began = time.time()
summary = train({str(config)!r}, store="store", budget="6s", progress=False, log=lambda message: None)
print(json.dumps({{"reason": str(summary.reason), "steps": summary.end_step - summary.start_step,
                  "origin": summary.clock_origin, "began": began}}))
"""
    result = run_python(program, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    session = json.loads(result.stdout.strip().splitlines()[-1])
    assert session["reason"] == "deadline" and session["steps"] >= 1 and session["origin"] == "the call to train", session
    record = json.loads((tmp_path / "store" / "status.json").read_text())["sessions"][-1]
    clock_start = record["started"] - record["phases"]["before"]
    # counted from the kernel's start, the clock would start 6 s and the imports before the call
    assert abs(clock_start - session["began"]) < 1.0, (clock_start, session["began"], record["phases"])


def test_session_clock_learns_its_reserve():
    clock = SessionClock(start=1000.0, limit=3600.0, margin=60.0, reserve_factor=2.0, initial_reserve=300.0)
    assert clock.deadline == 1000.0 + 3600.0 - 60.0
    assert clock.reserve() == 300.0
    for seconds in (20.0, 35.0, 25.0):
        clock.record(seconds)
    assert clock.reserve() == 70.0
    now = clock.deadline - 70.0 - 5.0
    assert not clock.must_stop(4.0, now=now) and clock.must_stop(6.0, now=now)
    assert SessionClock(start=0.0, limit=60.0, initial_reserve=300.0).reserve() == 15.0  # at most a quarter
    assert SessionClock(start=0.0, limit=None).remaining() is None


def test_sampler_seeks_without_loading_and_splits_steps_across_devices():
    lengths = [((i * 37) % 101) + 1 for i in range(200)]
    plan = EpochPlan(200, 16, seed=5, lengths=lengths)
    steps = plan.steps(3)
    assert len(steps) == 12 and sorted(i for s in steps for i in s) == sorted(set(i for s in steps for i in s))
    resumed = list(MicroBatchSampler(plan, 3, 7, micro_batch_size=16))
    assert resumed == steps[7:]
    two = [list(MicroBatchSampler(plan, 3, 7, micro_batch_size=4, rank=r, world=2)) for r in range(2)]
    for k, step in enumerate(steps[7:]):
        seen = two[0][2 * k] + two[0][2 * k + 1] + two[1][2 * k] + two[1][2 * k + 1]
        assert sorted(seen) == sorted(step)
    spread = [max(lengths[i] for i in s) - min(lengths[i] for i in s) for s in steps]
    assert sum(spread) / len(spread) < 30  # length buckets: similar clips batch together
    assert plan.steps(3) == steps and plan.steps(4) != steps


def test_fewer_items_than_a_batch_is_a_config_error_naming_batch_size():
    """Said in one line with exit code 2 by the command line (a ConfigError), not a traceback: the shipped Chatterbox
    config's batch_size 8 on a corpus of a few clips meets it."""
    with pytest.raises(ConfigError, match=r"^batch_size: the dataset has 4 usable items, fewer than batch_size=8; "):
        EpochPlan(4, 8, seed=0)


@pytest.mark.slow
def test_a_session_is_one_value_with_nothing_missing_once_it_started(tmp_path):
    """The running session is built whole at its start (its facts, state, phase, guard, exports, what it learnt): no
    part of it is ``None``, nor may its type let one be; nor is anything the Trainer holds, new run or resumed."""
    config = write_config(tmp_path, max_steps=2, eval_every=0, checkpoint_every_steps=0)
    store = tmp_path / "store"
    for steps in (2, 3):  # a new run, then a resumed one
        trainer = Trainer(load_config(config, [f"store={store}", f"max_steps={steps}"]), **QUIET)
        assert trainer.run().end_step == steps
        session = trainer.session
        for field in dataclasses.fields(session):
            assert getattr(session, field.name) is not None, field.name
            assert "None" not in str(field.type) and "Optional" not in str(field.type), (field.name, field.type)
        assert [name for name, value in vars(trainer).items() if value is None] == []
        assert session.state.step == steps and session.built.max_steps == steps


@pytest.mark.slow
def test_a_resumed_optimizer_keeps_its_state_where_a_fresh_one_does(tmp_path):
    """AdamW keeps its step counters on the CPU and its moments beside the parameters; a resume must too
    (counters on the GPU would make every step wait on the device)."""
    config = write_config(tmp_path, max_steps=4, eval_every=0, checkpoint_every_steps=0)
    store = tmp_path / "store"
    fresh = Trainer(load_config(config, [f"store={store}"]), **QUIET)
    fresh.run()
    resumed = Trainer(load_config(config, [f"store={store}", "max_steps=5"]), **QUIET)
    assert resumed.run().start_step == 4
    for before, after in zip(fresh.session.built.groups, resumed.session.built.groups):
        for (param, a), b in zip(before.optimizer.state.items(), after.optimizer.state.values()):
            assert b["step"].device == a["step"].device == torch.device("cpu")
            assert b["exp_avg"].device == a["exp_avg"].device == param.device


def test_the_old_name_of_the_budget_still_loads_and_asks_for_the_new_one(tmp_path):
    config = write_config(tmp_path, session_limit="20m")
    with pytest.warns(FutureWarning, match=rf"{config}: the setting session_limit is now called budget; rename it"):
        assert load_config(config).train.budget == 1200.0
    with pytest.warns(FutureWarning, match="overrides: the setting session_limit is now called budget"):
        assert load_config(write_config(tmp_path), ["session_limit=none"]).train.budget is None
    with pytest.raises(ConfigError, match=f"{config}: session_limit is the old name of budget; give only budget"):
        load_config(write_config(tmp_path, session_limit="20m", budget="30m"))
    # a checkpoint's copy of its config (fintts eval --store reads one) was written by fintts: nothing for the person to rename
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_config(write_config(tmp_path, session_limit="20m"), registered_only=True).train.budget == 1200.0


def test_durations_are_seconds_once_loaded_and_a_bad_one_is_refused_naming_its_setting(tmp_path):
    config = write_config(tmp_path, checkpoint_every="45m", push_every="1h30m")
    loaded = load_config(config).train
    assert (loaded.checkpoint_every, loaded.push_every, loaded.budget) == (2700.0, 5400.0, "auto")
    assert load_config(config, ["budget=none"]).train.budget is None
    for key, value in [("checkpoint_every", "auto"), ("push_every", "soon"), ("exit_grace", "auto")]:
        with pytest.raises(ConfigError, match=f"{key}: '{value}' is not a duration"):
            load_config(config, [f"{key}={value}"])
