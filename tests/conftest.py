"""Fixtures shared by the test modules (a local Hugging Face Hub and the token it accepts), the order tests are dealt
out in, and the unit tier: ``--unit`` runs the tests that start no process, and fails one that does."""

from __future__ import annotations

import os

# One thread for torch (OpenMP, MKL) in the tests and in every process they start, set before anything imports torch:
# the suite runs on 2 shared cores, three tests at a time (pytest -n 3), and a thread pool wider than the free cores
# spin-waits, a dozen times slower (benchmarks/README.md, "How the suite is scheduled"). What a session does with its
# threads (the launcher gives each process its share) is unchanged: a test that sets OMP_NUM_THREADS still wins.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
# hf_xet reads its settings once per process, when huggingface_hub makes the process's one XetSession: at the first
# upload of any kind, whichever test makes it (a fixture's setenv after that changes nothing). Its defaults (5 retries
# from a 3-s base, measured: about 8 minutes before a CAS outage is raised) outlast a test's wait, so the tests' brief
# retries are set here, for every worker and every process they start. Durations need a unit: "0.05" is a parse error
# that falls back to 3 s (hf_xet's log says "default due to parse error").
os.environ.setdefault("HF_XET_CLIENT_RETRY_MAX_ATTEMPTS", "1")
os.environ.setdefault("HF_XET_CLIENT_RETRY_BASE_DELAY", "50ms")
os.environ.setdefault("HF_XET_TELEMETRY_ENABLED", "false")

import _posixsubprocess  # noqa: E402
import subprocess  # noqa: E402

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


#: the marks that keep a test out of the unit tier
NOT_UNIT = ("process", "slow")


class ProcessStarted(RuntimeError):
    """A test of the unit tier started a process (a command, a worker, a tool such as espeak-ng or ffmpeg), or ran a
    whole training session."""


def pytest_addoption(parser):
    parser.addoption("--unit", action="store_true",
                     help="the unit tier: only tests not marked `process` or `slow`; a test that starts a process or runs a "
                          "training session fails")


@pytest.fixture(scope="session", autouse=True)
def _processes_refused_in_the_unit_tier(request):
    """Under ``--unit``, every way a test's code starts a process raises :class:`ProcessStarted` and is recorded, and so
    does a training session run in the test's process (``Trainer.run``: seconds each, a test of them is ``slow``).

    The unit tier's promise (no process, so a few minutes on two cores) is kept by the tier itself, not by a label: a
    test marked wrongly fails. Session-scoped, so that a fixture building something once (a corpus spoken by espeak-ng)
    is caught too, and active only in the processes that run tests (pytest-xdist's workers), never in the one that
    starts them. ``subprocess`` and ``multiprocessing``'s spawn and forkserver start through ``fork_exec``, its fork
    through ``os.fork``; ``os.system`` and ``os.posix_spawn`` are refused alike."""
    if not request.config.getoption("--unit"):
        yield []
        return
    started: list[str] = []

    def refuse(what: str, mark: str = "process"):
        def refused(*args, **kwargs):
            started.append(what)
            raise ProcessStarted(f"this test {what}: mark it `{mark}`, it is not a unit test")
        return refused

    from fintts.train import Trainer  # imports torch, which only the unit tier needs here

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Trainer, "run", refuse("runs a training session (Trainer.run)", "slow"))
        patch.setattr(subprocess.Popen, "_execute_child", refuse("starts a process (subprocess)"))
        patch.setattr(_posixsubprocess, "fork_exec", refuse("starts a process (fork_exec)"))
        for name in ("fork", "system", "posix_spawn", "posix_spawnp"):
            if hasattr(os, name):
                patch.setattr(os, name, refuse(f"starts a process (os.{name})"))
        yield started


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Each phase's report kept on its test, for :func:`_no_process_started` to read."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture(autouse=True)
def _no_process_started(request, _processes_refused_in_the_unit_tier):
    """Fails a test of the unit tier that started a process where the error could not reach it (a thread, an
    ``except Exception``); one that failed already is left as it failed."""
    before = len(_processes_refused_in_the_unit_tier)
    yield
    call = getattr(request.node, "report_call", None)
    if len(_processes_refused_in_the_unit_tier) > before and call is not None and call.passed:
        pytest.fail(f"this test {_processes_refused_in_the_unit_tier[before]}: mark it `process` (a training session: "
                    "`slow`), it is not a unit test", pytrace=False)


def pytest_collection_modifyitems(config, items):
    """Deal the tests out one file at a time, taking the files in turn from each folder, instead of file after file.

    The suite is CPU-bound on two cores except where its tests wait (a stalled Hub, a hung peer, a lease running out,
    backoffs). Those are in a few files (``train/stores``, ``train/processes``): run file after file, three of
    them wait side by side, where dealt out a waiting test runs beside tests that compute (the idle core-seconds
    and the time saved: benchmarks/README.md, "How the suite is scheduled"). The expensive fixtures are
    session-scoped, so a module's tests running apart do not build them again.

    Under ``--unit``, the tests marked ``process`` or ``slow`` are left out first."""
    if config.getoption("--unit"):
        left_out = [item for item in items if any(item.get_closest_marker(mark) for mark in NOT_UNIT)]
        if left_out:
            config.hook.pytest_deselected(items=left_out)
            items[:] = [item for item in items if not any(item.get_closest_marker(mark) for mark in NOT_UNIT)]
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
