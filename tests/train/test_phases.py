"""A run in phases, through the trainer's public API and the CLI, with the toy task."""

from __future__ import annotations

import json
import shutil

import pytest

from fintts.train import ConfigDrift, Trainer, train
from fintts.train.config import ConfigError, load_config
from fintts.train.run import checkpoint
from trainer_helpers import QUIET, assert_bit_identical, final_weights, in_process, write_config

#: 20 steps with a critic, then a quieter learner without one: the models themselves change at the switch.
PHASES = [
    {"name": "warm", "steps": 20},
    {"name": "fine", "settings": {"lr": 0.001, "dropout": 0.0, "adversarial": False, "patience": 0}},
]


@pytest.fixture(scope="session")
def reference(tmp_path_factory):
    """The two-phase run without a break: what every interrupted run must reproduce bit for bit."""
    folder = tmp_path_factory.mktemp("phases")
    config = write_config(folder, phases=PHASES, max_steps=36)
    summary = train(config, store=folder / "store", **QUIET)
    return config, folder / "store", summary


@pytest.mark.slow
def test_the_run_switches_phase_and_records_it(reference):
    _, store, summary = reference
    assert summary.state == "finished" and summary.end_step == 36
    status = json.loads((store / "status.json").read_text())
    phase = status["phase"]
    assert (phase["index"], phase["count"], phase["name"], phase["start_step"]) == (1, 2, "fine", 20)
    [warm] = phase["finished"]
    assert (warm["name"], warm["start_step"], warm["end_step"], warm["reason"]) == ("warm", 0, 20, "steps")
    assert warm["checkpoint"] == "step-00000020" and warm["best"]["step"] in (8, 16)
    # the critic trains only in the first phase; the second phase starts with a validation of its starting weights
    assert (store / "checkpoints" / "step-00000020" / "critic.safetensors").is_file()
    assert not (checkpoint.latest_complete(store) / "critic.safetensors").exists()
    assert [e["step"] for e in status["evals"]] == [8, 16, 20, 24, 32]
    assert status["best"]["step"] >= 20  # the second phase's own best, on its own scores


@pytest.mark.slow
@pytest.mark.parametrize("breaks", [[19], [20], [21], [20, 21], [7, 26]])
def test_resuming_before_at_and_after_the_switch_is_bit_identical(reference, tmp_path, breaks):
    config, whole, _ = reference
    store = tmp_path / "store"
    for stop_at in breaks:
        assert train(config, store=store, max_steps=stop_at, **QUIET).end_step == stop_at
    summary = train(config, store=store, **QUIET)
    assert summary.state == "finished" and summary.end_step == 36
    assert_bit_identical(final_weights(store), final_weights(whole))
    status, expected = (json.loads((s / "status.json").read_text()) for s in (store, whole))
    assert status["phase"]["finished"][0]["end_step"] == expected["phase"]["finished"][0]["end_step"] == 20


@pytest.mark.slow
def test_a_phase_resumes_from_its_newest_checkpoint_alone(reference, tmp_path):
    """As on a new machine that downloads only the newest checkpoint: everything the phase needs is in it."""
    config, whole, _ = reference
    store = tmp_path / "store"
    train(config, store=store, max_steps=27, **QUIET)
    for name in checkpoint.list_names(store)[:-1]:
        shutil.rmtree(store / "checkpoints" / name)
    train(config, store=store, **QUIET)
    assert_bit_identical(final_weights(store), final_weights(whole))


@pytest.mark.slow
def test_early_stopping_ends_a_phase_and_the_phase_end_is_kept(tmp_path):
    # a learning rate this high stops improving quickly; keep_last 1 would prune the phase's end without protection
    phases = [{"name": "wild", "settings": {"lr": 0.5, "patience": 2}}, {"name": "calm", "settings": {"patience": 0}}]
    config = write_config(tmp_path, phases=phases, max_steps=200, eval_every=2, keep_last=1, checkpoint_every_steps=1)
    summary = train(config, store=tmp_path / "store", max_steps=60, **QUIET)
    status = json.loads((tmp_path / "store" / "status.json").read_text())
    [wild] = status["phase"]["finished"]
    assert wild["reason"] == "early_stopping" and wild["end_step"] < 60 and summary.end_step == 60
    assert status["state"] == "finished" and status["phase"]["name"] == "calm"
    kept = checkpoint.list_names(tmp_path / "store")
    assert wild["checkpoint"] in kept and checkpoint.name_for_step(wild["end_step"]) == wild["checkpoint"]


@pytest.mark.slow
def test_an_epoch_limit_ends_a_phase(tmp_path):
    # 512 items in batches of 16: one epoch is 32 steps
    config = write_config(tmp_path, phases=[{"epochs": 1}, {"settings": {"lr": 0.001}}], max_steps=40)
    train(config, store=tmp_path / "store", **QUIET)
    status = json.loads((tmp_path / "store" / "status.json").read_text())
    [first] = status["phase"]["finished"]
    assert (first["name"], first["end_step"], first["reason"]) == ("phase1", 32, "epochs")
    assert status["phase"]["name"] == "phase2" and status["epoch"] == 0


@pytest.mark.slow
def test_status_cli_shows_the_phase(reference, tmp_path):
    _, store, _ = reference
    result = in_process("status", "--store", str(store), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "phase       2 of 2: fine since step 20" in result.stdout
    assert "warm: steps 0 → 20 (steps, best" in result.stdout


@pytest.mark.slow
def test_changing_any_phase_is_drift_and_free_settings_are_not(reference, tmp_path):
    config, _, _ = reference
    store = tmp_path / "store"
    train(config, store=store, max_steps=10, **QUIET)
    changed = [dict(PHASES[0]), {**PHASES[1], "settings": {**PHASES[1]["settings"], "lr": 0.002}}]
    with pytest.raises(ConfigDrift, match=r"phases\.1\.lr: 0\.001 -> 0\.002"):
        train(load_config(config, {"phases": changed}), store=store, **QUIET)
    with pytest.raises(ConfigDrift, match=r"phases\.0: .*'steps': 20.* -> .*'steps': 22"):
        train(load_config(config, {"phases": [{**PHASES[0], "steps": 22}, PHASES[1]]}), store=store, **QUIET)
    free = [dict(PHASES[0]), {**PHASES[1], "settings": {**PHASES[1]["settings"], "patience": 3, "eval_every": 4}}]
    assert train(load_config(config, {"phases": free}), store=store, max_steps=12, **QUIET).end_step == 12


def test_bad_phases_are_refused_when_the_config_loads(tmp_path):
    def load(phases):
        return load_config(write_config(tmp_path, phases=phases))

    with pytest.raises(ConfigError, match=r"phases\[1\] \(b\): .*unknown setting lrr"):
        load([{"name": "a", "steps": 5}, {"name": "b", "settings": {"lrr": 0.1}}])
    with pytest.raises(ConfigError, match=r"phases\[0\] \(a\): max_steps, seed belong to the whole run"):
        load([{"name": "a", "steps": 5, "settings": {"seed": 3, "max_steps": 9}}, {"name": "b"}])
    with pytest.raises(ConfigError, match=r"phases\[0\] \(a\) never ends"):
        load([{"name": "a", "settings": {"patience": 0}}, {"name": "b"}])
    with pytest.raises(ConfigError, match=r"phases\[1\] \(a\): another phase has this name"):
        load([{"name": "a", "steps": 5}, {"name": "a"}])


@pytest.mark.slow
def test_a_phase_switch_leaves_accelerate_holding_only_the_current_phase_models(tmp_path):
    config = write_config(tmp_path, phases=PHASES, max_steps=24, eval_every=0, checkpoint_every_steps=0)
    trainer = Trainer(load_config(config, [f"store={tmp_path / 'store'}"]), **QUIET)
    assert trainer.run().end_step == 24
    held = trainer.session.facts.accelerator._models  # accelerate's references: what it keeps alive (and in its own memory bookkeeping)
    assert len(held) == 1, held  # the first phase's model and critic were released at the switch


@pytest.mark.slow
@pytest.mark.parametrize("edited", [b"my best one\n", b"\xff\xfe\x00garbage", b"step-12\n"], ids=["text", "binary", "short-name"])
def test_a_latest_edited_by_hand_into_no_checkpoint_name_is_treated_as_absent_at_the_switch(reference, tmp_path, edited):
    config, whole, _ = reference
    store = tmp_path / "store"
    assert train(config, store=store, max_steps=20, **QUIET).end_step == 20  # ends exactly at the switch
    (store / checkpoint.LATEST).write_bytes(edited)  # a person "pointing" the run at something
    summary = train(config, store=store, **QUIET)  # resumes from the newest checkpoint and switches phase first
    assert summary.state == "finished" and summary.end_step == 36
    assert json.loads((store / "status.json").read_text())["phase"]["finished"][0]["end_step"] == 20
    assert_bit_identical(final_weights(store), final_weights(whole))
