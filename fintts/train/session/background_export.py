"""The slow part of a task's export (ONNX graphs, say) made in a child process, so training goes on meanwhile.

At a new best the main process writes ``model/``'s quick part in place and hands the slow part
(:meth:`Task.export_later`) to a child process working in a hard-linked copy; only a copy of the export
``model/`` still holds is swapped in (a stale one's process is ended at once), so a push never snapshots
files derived from other weights. A process, not a thread: torch's tracer and onnxruntime's quantiser
cannot be abandoned half-way, and a thread still inside them at exit aborts the interpreter; a process can
be ended when the clock leaves no time, and the export is then recorded as pending for the next session.
The child's rules (dies with its parent, lowest priority, no credential, a private temporary folder) and
why are in docs/how-it-is-built.md, "Task.export and Task.export_later".
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fintts.process_exit import end_with_parent, exit_process
from fintts.train.run.checkpoint import is_disk_full

#: Seconds between looks at a signal or the deadline while the final save waits for an export.
WAIT_STEP = 0.1
#: Seconds between the lines that say the final save is still waiting for an export.
SAY_EVERY = 60.0
#: Seconds between the final save's raisings of the export's priority (a child started just before the wait lowers its
#: own once it runs; threads it starts later take whichever it then has).
HURRY_EVERY = 1.0
#: The child's niceness (Linux and macOS): the CPU that feeds the devices goes to training first.
NICENESS = 19
#: Words of a variable's name (split at ``_``) that mark it as a credential (``HF_TOKEN``, ``KAGGLE_API_TOKEN``,
#: ``KAGGLE_USER_SECRETS_TOKEN``: enough to fetch the Kaggle secrets, ``HF_TOKEN`` among them; ``AWS_SECRET_ACCESS_KEY``);
#: a child that only writes files needs none, so none is handed on (``TOKENIZERS_PARALLELISM`` is no credential).
SECRET_WORDS = frozenset({"TOKEN", "TOKENS", "SECRET", "SECRETS", "PASSWORD", "PASSWD", "CREDENTIAL", "CREDENTIALS", "KEY",
                          "AUTH"})
#: Credential variables the words miss: huggingface_hub's OIDC exchange (utils/_auth.py ``get_token``) and Kaggle's user.
SECRETS = ("HF_OIDC_RESOURCE", "KAGGLE_KEY", "KAGGLE_USERNAME")
#: A launch's process-group variables (:mod:`fintts.train.session.launcher`, torchrun's): the child joins no group.
LAUNCH_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK", "ROLE_WORLD_SIZE",
                    "MASTER_ADDR", "MASTER_PORT", "FINTTS_LAUNCHER_PID")
#: Variables that name the temporary folder (Python's ``tempfile`` reads the first that is set).
TEMP_VARIABLES = ("TMPDIR", "TEMP", "TMP")
#: Variables that set the threads of torch and the libraries under it (torch reads ``OMP_NUM_THREADS`` at start).
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
#: Times a child killed by a signal this session did not send (the OOM killer's SIGKILL) is started again.
RETRIES = 2
#: The child's ``/proc/self/oom_score_adj``: the OOM killer's first choice (a process may raise its own unprivileged).
OOM_SCORE_ADJ = 1000
#: The child's first lines: it asks to die with the session before it imports torch (seconds, under load), so a session
#: killed meanwhile leaves no child importing on; then it imports this module and makes the slow part.
_BOOT = ("import sys; from fintts.process_exit import end_with_parent; end_with_parent(int(sys.argv[3])) or sys.exit(1); "
         "from fintts.train.session.background_export import main; main(sys.argv[1:])")
#: Lines of the child's own output kept for a warning when it fails.
TAIL_LINES = 8


def replace_export(final: Path, write: Callable[[Path], None]) -> Exception | None:
    """Replace the folder ``final`` with what ``write`` puts in a fresh one, never leaving a half-written folder.

    A disk too full for the export (or any other ``OSError``) keeps the previous folder and
    returns the error: an export never stops training or the checkpoint it accompanies.
    """
    fresh, stale = final.with_name(f".{final.name}-new"), final.with_name(f".{final.name}-old")
    for leftover in (fresh, stale):
        shutil.rmtree(leftover, ignore_errors=True)
    try:
        write(fresh)
        if final.exists():
            os.replace(final, stale)
        os.replace(fresh, final)
    except Exception as err:
        if not (isinstance(err, OSError) or is_disk_full(err)):
            raise
        shutil.rmtree(fresh, ignore_errors=True)
        if stale.exists() and not final.exists():
            os.replace(stale, final)
        return err
    shutil.rmtree(stale, ignore_errors=True)
    return None


def describe(derive: Callable[[Path], None]) -> dict[str, Any]:
    """The JSON the child rebuilds ``derive`` from; a clear error for one it could not import by name."""
    func, args, kwargs = derive, (), {}
    if isinstance(derive, functools.partial):
        func, args, kwargs = derive.func, derive.args, dict(derive.keywords)
    module, name = getattr(func, "__module__", None), getattr(func, "__qualname__", "")
    if not module or module == "__main__" or "<" in name:
        raise TypeError(
            f"Task.export_later() returned {derive!r}: the export's slow part runs in a child process, which imports it by "
            "name; return a module-level function (or a functools.partial of one with JSON arguments)"
        )
    spec = {"module": module, "name": name, "args": list(args), "kwargs": kwargs}
    try:
        json.dumps(spec)
    except TypeError as err:
        raise TypeError(f"Task.export_later() returned {derive!r}: its arguments must be JSON values ({err})") from err
    return spec


@dataclass
class _Job:
    generation: int
    folder: Path
    started: float
    process: subprocess.Popen
    derive: Callable[[Path], None]
    #: how many times this export was started before (after kills)
    tries: int = 0
    #: the session ended this process itself (a newer best, the clock): not a kill to retry
    ended: bool = False

    @property
    def temp(self) -> Path:
        return self.folder.with_name(self.folder.name + ".tmp")

    def killed(self) -> bool:
        """Killed by a signal this session did not send (the OOM killer's SIGKILL, a person's kill), once :meth:`done`."""
        return not self.ended and self.process.returncode is not None and self.process.returncode < 0

    @property
    def result(self) -> Path:
        return self.folder.with_name(self.folder.name + ".json")

    @property
    def output(self) -> Path:
        return self.folder.with_name(self.folder.name + ".log")

    def done(self) -> bool:
        return self.process.poll() is not None

    def outcome(self) -> tuple[float, str | None]:
        """Seconds the child took and its error (``None``: it finished), once :meth:`done`."""
        try:
            told = json.loads(self.result.read_text())
        except (OSError, ValueError):
            told = {}
        seconds = float(told.get("seconds", time.time() - self.started))
        if self.process.returncode == 0 and "error" not in told:
            return seconds, None
        error = told.get("error") or f"the export process ended with {_exit_text(self.process.returncode)}"
        tail = _tail(self.output)
        return seconds, error + (f"; its last lines:\n{tail}" if tail else "")

    def hurry(self) -> bool:
        """Give every thread of the child this process's own niceness: once the session waits for it, no training is left
        to give way to, and at niceness 19 beside anyone else's work at 0 (a laptop in use, a busy machine) it would get
        about 1.5 % of a core (the kernel's weights: 15 against 1024) and the final save would wait for it for an hour.
        Each thread: Linux keeps a niceness per thread, and the child's threads took its 19 when they started. ``False``
        where this user may not lower a niceness (neither root nor an RLIMIT_NICE that allows it)."""
        own = os.getpriority(os.PRIO_PROCESS, 0)
        try:
            threads = [int(tid) for tid in os.listdir(f"/proc/{self.process.pid}/task")]
        except OSError:
            threads = [self.process.pid]  # not Linux (macOS's niceness is the whole process's), or it has just ended
        for tid in threads:
            try:
                os.setpriority(os.PRIO_PROCESS, tid, own)
            except ProcessLookupError:
                continue  # that thread ended meanwhile
            except PermissionError:
                return False
        return True

    def end(self) -> None:
        """Kill the child (it ignores SIGTERM and SIGINT) and remove what it left."""
        if self.process.poll() is None:
            self.ended = True
            self.process.kill()
        self.process.wait()
        self.remove()

    def remove(self) -> None:
        for folder in (self.folder, self.temp):
            shutil.rmtree(folder, ignore_errors=True)
        for path in (self.result, self.output):
            path.unlink(missing_ok=True)


class BackgroundExport:
    """The background part of ``final``'s exports; every method is called from the main thread of the main process."""

    def __init__(self, final: Path, warn: Callable[[str], None], *, enabled: bool = True):
        self.final, self._warn = final, warn
        #: ``False``: this process makes no slow part (another process of the session, or a session whose store is
        #: thrown away: a bench's)
        self.enabled = enabled
        self._work = final.with_name(f".{final.name}-later")
        self.generation = 0
        self._job: _Job | None = None
        self._wanted: Callable[[Path], None] | None = None
        #: ``final`` lacks its slow part and no process of this session is making it (stopped, failed, or never started
        #: here): the next session makes it. Only a finished swap or a newer export clears it.
        self._unmade = False
        self._step = 0

    def sweep(self) -> None:
        """Remove a killed session's unfinished copies (the main process, once the run is its to write)."""
        for leftover in self.final.parent.glob(f"{self._work.name}-*"):
            if leftover.is_dir():
                shutil.rmtree(leftover, ignore_errors=True)
            else:
                leftover.unlink(missing_ok=True)

    def exported(self, derive: Callable[[Path], None] | None, step: int) -> None:
        """``final`` was just replaced by the export of ``step``; ``derive`` (``None``: nothing) is its slow part."""
        self.generation += 1
        if self._job is not None:  # made from weights model/ no longer holds
            self._job.end()
            self._job = None
        self._wanted, self._step, self._unmade = derive, step, False
        self.poll()

    def unmade(self, step: int, why: str) -> None:
        """``final`` (the export of ``step``) lacks its slow part and this session cannot make it (``why``): it stays
        pending for the next session, whatever this session's later checkpoints say."""
        self._step, self._unmade = step, True
        self._warn(f"the export of {self.final} at step {step} still lacks its slow part ({why}); the next session makes it")

    def pending(self) -> bool:
        return self._job is not None or self._wanted is not None or self._unmade

    def poll(self) -> float | None:
        """Swap in a finished, still current job (its seconds are returned) and start the wanted one if none runs."""
        swapped = None
        job = self._job
        if job is not None and job.done():
            self._job = None
            seconds, error = job.outcome()
            if job.generation != self.generation:
                job.remove()
            elif error is not None and job.killed() and job.tries < RETRIES:
                job.remove()
                self._warn(f"the export of {self.final} at step {self._step} was killed ({error}); starting it again "
                           f"({job.tries + 1} of {RETRIES})")
                self._start(job.derive, tries=job.tries + 1)
            elif error is not None:
                job.remove()
                self._unmade = True
                self._warn(f"could not finish the export of {self.final} at step {self._step} ({error}); it holds the quick "
                           "part only; the next session tries again")
            else:
                err = replace_export(self.final, lambda fresh: os.replace(job.folder, fresh))
                job.remove()
                if err is not None:
                    self._unmade = True
                    self._warn(f"could not complete {self.final} at step {self._step} ({err}); it holds the quick part only; "
                               "the next session tries again")
                else:
                    swapped = seconds
        if self._job is None and self._wanted is not None:
            self._start(self._wanted)
        return swapped

    def _start(self, derive: Callable[[Path], None], tries: int = 0) -> None:
        self._wanted = None
        spec = describe(derive)  # a task's mistake, raised here and not hidden in a child's log
        folder = self._work.with_name(f"{self._work.name}-{self.generation}")
        temp = folder.with_name(folder.name + ".tmp")  # beside it: a killed session's is removed at the next start
        for leftover in (folder, temp):
            shutil.rmtree(leftover, ignore_errors=True)
        try:
            shutil.copytree(self.final, folder, copy_function=_link_or_copy)
            temp.mkdir(mode=0o700)
            with open(folder.with_name(folder.name + ".log"), "wb") as output:
                process = subprocess.Popen(
                    [sys.executable, "-c", _BOOT, json.dumps(spec), str(folder), str(os.getpid())],
                    stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT, env=child_environment(temp),
                    close_fds=True,
                )
        except OSError as err:
            for leftover in (folder, temp):
                shutil.rmtree(leftover, ignore_errors=True)
            self._unmade = True
            self._warn(f"could not start the export of {self.final} at step {self._step} ({err}); it holds the quick part only; "
                       "the next session tries again")
            return
        self._job = _Job(self.generation, folder, time.time(), process, derive, tries)

    def hurry(self) -> bool:
        """Give the running export the session's own priority (:meth:`_Job.hurry`), as the final save's wait does:
        ``False`` where this user may not."""
        return self._job is None or self._job.hurry()

    def settle(self, deadline: float | None, interrupted: Callable[[], bool] = lambda: False,
               say: Callable[[str], None] = lambda line: None) -> float | None:
        """Finish the newest export before ``deadline`` (a ``time.time()``; ``None``: none) unless ``interrupted()``; the
        seconds waited, or ``None`` when it did not finish: then its process is ended, ``final`` keeps the quick part,
        :meth:`pending` stays true (the next session makes it) and a person is told. A wait is said (``say``) when it
        begins and each :data:`SAY_EVERY` seconds: every process of the session waits with this one."""
        started = said = time.time()
        while self._job is not None or self._wanted is not None:
            job = self._job
            if job is not None:
                if not job.done():
                    slow = "" if self.hurry() else " (at the lowest priority: this user may not raise it)"
                    bound = "" if deadline is None else f", at most {max(0.0, deadline - time.time()):.0f} s more"
                    say(f"waiting for the slow part of the export of {self.final} at step {self._step} (started "
                        f"{time.time() - job.started:.0f} s ago){slow}{bound}; Ctrl-C stops waiting: the next session "
                        "makes it")
                hurried = time.time()
                while not job.done() and (deadline is None or time.time() < deadline) and not interrupted():
                    time.sleep(WAIT_STEP)
                    if time.time() - hurried >= HURRY_EVERY:
                        hurried = time.time()
                        self.hurry()
                    if time.time() - said >= SAY_EVERY:
                        said = time.time()
                        say(f"still waiting for the export of {self.final} at step {self._step} ({said - started:.0f} s so far)")
                if not job.done():
                    self.close()
                    self._warn(f"the export of {self.final} at step {self._step} was not finished in this session: it holds "
                               f"the quick part only; the next session finishes it (for a voice, so does "
                               f"`fintts export --onnx --voice {self.final}`)")
                    return None
            self.poll()
        return time.time() - started

    def close(self) -> None:
        """End a child still running (a session ending on an error, say): no process of ours outlives the session."""
        if self._job is not None or self._wanted is not None:
            if self._job is not None:
                self._job.end()
            self._job, self._wanted, self._unmade = None, None, True


def child_environment(temp: Path) -> dict[str, str]:
    """This process's environment less every credential and launch variable, with ``temp`` (an empty private folder)
    as its temporary folder and its Hugging Face home, so no cached login is within reach (huggingface_hub reads the
    token file at ``$HF_TOKEN_PATH``, by default ``$HF_HOME/token``: constants.py), and no download either (offline)."""
    env = {
        key: value for key, value in os.environ.items()
        if key not in SECRETS and key not in LAUNCH_VARIABLES and not SECRET_WORDS & set(key.upper().split("_"))
    }
    home = temp / "huggingface"
    env.update({name: str(temp) for name in TEMP_VARIABLES})
    env.update({name: str(export_threads()) for name in THREAD_VARIABLES})
    env.update(HF_HOME=str(home), HF_TOKEN_PATH=str(home / "token"), HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    # the task's function and this module from where this process imported them (a notebook's sys.path.insert, a checkout)
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(os.path.abspath(entry) for entry in sys.path if entry))
    return env


def export_threads() -> int:
    """The child's threads: a quarter of the CPUs this process may use, at least one. The rest stay the training's
    (its processes and their data loaders); a Kaggle T4×2 box has 4 vCPUs for two training processes."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, cpus // 4)


def _exit_text(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


def _tail(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(line for line in lines[-TAIL_LINES:] if line.strip())


def _link_or_copy(source: str, target: str) -> None:
    """A hard link: the quick export never rewrites a file in place (it replaces the folder), and the slow part writes
    new files and renames them, so the linked file stays as it was."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def _limit_interop_threads() -> None:
    """torch's intra-op threads follow ``OMP_NUM_THREADS``; its inter-op pool does not, and can be sized only before
    its first use."""
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            torch.set_num_interop_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
        except RuntimeError:
            pass  # already in use: the import of the export's module started it


def _child(spec_text: str, folder: Path, parent: int) -> int:
    """The child's whole life: make the slow part in ``folder`` and say how it went beside it."""
    if not end_with_parent(parent):  # the session died while this module was imported (seconds)
        return 1
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the session decides what Ctrl-C means, and ends this process itself
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        os.nice(NICENESS)
    except (OSError, AttributeError):
        pass  # not allowed here: the export keeps the training's priority
    try:
        Path("/proc/self/oom_score_adj").write_text(str(OOM_SCORE_ADJ))  # raising one's own needs no privilege
    except OSError:
        pass  # not Linux: the OOM killer is the kernel's own business
    started = time.time()
    result = folder.with_name(folder.name + ".json")
    spec = json.loads(spec_text)
    try:
        func: Any = importlib.import_module(spec["module"])
        for part in spec["name"].split("."):
            func = getattr(func, part)
        _limit_interop_threads()
        func(*spec["args"], folder, **spec["kwargs"])
    except Exception as err:
        result.write_text(json.dumps({"error": f"{type(err).__name__}: {err}", "seconds": time.time() - started}))
        return 1
    result.write_text(json.dumps({"seconds": time.time() - started}))
    return 0


def main(argv: list[str]) -> None:
    """The child's entry (see :data:`_BOOT`): the spec of its slow part, its folder, the session's process id."""
    exit_process(_child(argv[0], Path(argv[1]), int(argv[2])))
