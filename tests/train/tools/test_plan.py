"""``fintts plan``: the hand arithmetic exactly, and sessions and weeks from measured figures."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from trainer_helpers import in_process, write_config
from vits_helpers import tiny_config


def plan_json(*args: str, cwd) -> dict:
    result = in_process("plan", *args, "--json", cwd=cwd)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_plan_reproduces_the_arithmetic_people_do_by_hand(tmp_path):
    config = str(write_config(tmp_path))
    by_steps = plan_json(config, "--samples", "2000", "batch_size=8", "max_steps=2800", "--step-seconds", "1.5", cwd=tmp_path)
    assert (by_steps["steps_per_epoch"], by_steps["total_steps"], by_steps["epochs"]) == (250, 2800, pytest.approx(11.2))
    by_epochs = plan_json(config, "--samples", "2000", "batch_size=8", "epochs=11.2", "--step-seconds", "1.5", cwd=tmp_path)
    assert (by_epochs["total_steps"], by_epochs["steps_source"]) == (2800, "epochs=11.2")
    # 2800 steps × 1.5 s in one 12-hour session, plus its assumed 180 s of install; 30 GPU hours a week
    assert by_steps["sessions"] == 1
    assert by_steps["gpu_hours"] == pytest.approx((2800 * 1.5 + 180) / 3600)
    assert by_steps["weeks"] == pytest.approx((2800 * 1.5 + 180) / 3600 / 30)
    long = plan_json(config, "--samples", "2000", "batch_size=8", "max_steps=100000", "--step-seconds", "1.5",
                     "--budget", "12h", "--price", "0.5", cwd=tmp_path)
    assert long["sessions"] == 4  # 41.7 h of steps, under 12 h each once the margin and start-up are taken
    assert long["cost"] == pytest.approx(long["gpu_hours"] * 0.5, abs=0.01)
    assert long == plan_json(config, "--samples", "2000", "batch_size=8", "max_steps=100000", "--step-seconds", "1.5",
                             "--price", "0.5", cwd=tmp_path)  # budget: auto plans Kaggle's sessions


def test_plan_takes_the_budget_from_the_config_its_option_and_the_old_option(tmp_path):
    config = str(write_config(tmp_path, budget="6h"))
    run = ("--samples", "2000", "batch_size=8", "max_steps=100000", "--step-seconds", "1.5")
    six = plan_json(config, *run, cwd=tmp_path)
    assert (six["sessions"], six["budget"]) == (8, 6 * 3600)  # 41.7 h of steps, under 6 h each
    assert plan_json(config, *run, "--budget", "12h", cwd=tmp_path)["sessions"] == 4
    old = in_process("plan", config, *run, "--session-hours", "12", "--json", cwd=tmp_path)
    assert old.returncode == 0 and json.loads(old.stdout)["sessions"] == 4
    assert "--session-hours is now --budget (e.g. --budget 12h)" in old.stderr


def test_plan_counts_the_corpus_items_when_given_data(tmp_path):
    config = str(tiny_config(tmp_path))  # two demo speakers, 51 training clips each once 5 are held out
    plan = plan_json(config, "--data", "demo", "--step-seconds", "2", cwd=tmp_path)
    assert (plan["items"], plan["steps_per_epoch"]) == (102, 25)


def test_plan_without_items_or_with_too_few_says_what_to_do(tmp_path):
    config = str(write_config(tmp_path))
    result = in_process("plan", config, "--samples", "3", "--step-seconds", "1", cwd=tmp_path)
    assert result.returncode == 2 and "3 items are fewer than batch_size=16" in result.stderr
    result = in_process("plan", str(tiny_config(tmp_path)), "data=/no/such/corpus", "--step-seconds", "1", cwd=tmp_path)
    assert result.returncode == 2 and "/no/such/corpus" in result.stderr


SHIPPED = sorted((Path(__file__).resolve().parents[3] / "configs").glob("*.yaml"))


@pytest.mark.parametrize("config", SHIPPED, ids=lambda path: path.name)
def test_every_shipped_config_plans_a_run_a_person_can_do(tmp_path, config):
    """Two hours of recordings (1,200 clips of 6 s) at 1 s a step, as a T4 is expected to take (an estimate):
    each shipped config plans by what really ends it, a run of hours, not a placeholder's weeks."""
    plan = plan_json(str(config), "--samples", "1200", "--step-seconds", "1", cwd=tmp_path)
    assert plan["total_steps"] <= 10_000 and plan["sessions"] == 1, plan["stops_on"]
    assert plan["gpu_hours"] < 4 and plan["weeks"] < 0.15
    text = in_process("plan", str(config), "--samples", "1200", "--step-seconds", "1", cwd=tmp_path).stdout
    ends = re.search(r"^  the run ends +(.*)$", text, re.MULTILINE).group(1)
    assert f"{plan['total_steps']:,} steps" in ends
    early = "patience: 0" not in config.read_text() and "phases:" not in config.read_text()
    assert ("early stopping" in ends) == early == (plan["earliest"] is not None)
    if early:  # what it takes should early stopping end it at its first chance, beside the whole length's
        assert plan["earliest"]["steps"] < plan["total_steps"] and plan["earliest"]["gpu_hours"] < plan["gpu_hours"]
        assert f"(early stopping at its first chance, step {plan['earliest']['steps']:,})" in text
    assert "an estimate from the step time you gave" in text
    assert not re.search(r"\d\.\d{4,}", text)  # figures rounded for people
