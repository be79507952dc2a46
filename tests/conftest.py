"""Fixtures shared by the test modules: a local Hugging Face Hub and the token it accepts."""

from __future__ import annotations

import os

# One thread for torch (OpenMP, MKL) in the tests and in every process they start, set before anything imports torch:
# the suite runs on 2 shared cores, three tests at a time (pytest -n 3), and a thread pool wider than the free cores
# spin-waits. One test's 40 tiny VITS steps took 141 s with torch's default 2 threads beside another busy process,
# 10 s with 1 (tests/tts/vits/test_vits_training.py -k overfitting, 2026-11-26). What a session does with its
# threads (the launcher gives each process its share) is unchanged: a test that sets OMP_NUM_THREADS still wins.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import pytest  # noqa: E402

from fintts_stand_ins import HubServer  # noqa: E402
from hub_helpers import TOKEN  # noqa: E402


@pytest.fixture
def hub(tmp_path):
    """A Hub stand-in on 127.0.0.1 that accepts :data:`TOKEN`."""
    with HubServer(tmp_path / "hub", token=TOKEN) as server:
        yield server


@pytest.fixture
def hub_env(hub, monkeypatch):
    """:func:`hub`, with the environment a ``fintts`` process reads it from (endpoint and token)."""
    monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    return hub


def pytest_collection_modifyitems(items):
    """Deal the tests out one file at a time, taking the files in turn from each folder, instead of file after file.

    The suite is CPU-bound on two cores except where its tests wait (a stalled Hub, a hung peer, a lease running out,
    backoffs). Those are in a few files (``train/stores``, ``train/processes``): run file after file, three of
    them waited side by side, about 125 of a profiled run's 178 idle core-seconds. Dealt out, a waiting test runs
    beside tests that compute: 143 idle core-seconds were left in all, and that run took 698 s instead of 726 s
    (2026-11-26). The expensive fixtures are session-scoped, so a module's tests running apart do not build them again."""
    by_file: dict[str, list] = {}
    for item in items:
        by_file.setdefault(item.location[0], []).append(item)
    folders: dict[str, list[str]] = {}
    for path in by_file:
        folders.setdefault(os.path.dirname(path), []).append(path)
    files = [path for turn in _in_turn(list(folders.values())) for path in turn]
    items[:] = [item for turn in _in_turn([by_file[path] for path in files]) for item in turn]


def _in_turn(lists: list[list]) -> list[list]:
    """The first of each list, then the second of each, and so on: ``[[a1, b1], [a2, b2], [a3]]``."""
    return [[entries[i] for entries in lists if i < len(entries)] for i in range(max(map(len, lists), default=0))]
