"""The Kaggle notebook fintts pushes: its ``kernel-metadata.json``, its parameters, the staged folder.

``kaggle-metadata.json`` at the project's root is the documented template (README, "Kaggle
quick start", explains every field). The ``kaggle`` client reads a file named
``kernel-metadata.json`` in the folder it pushes, next to the notebook, so a push stages
both in a temporary folder:

- ``title`` is the run's: ``fintts <hub repo>`` (:func:`kernel_title`), so each Hub repo,
  one voice, has a kernel of its own and its own sessions; a push without a Hub repo uses
  the template's title;
- ``id`` is ``<kaggle user>/<slug of the title>``: Kaggle derives a kernel's slug from its
  title, and an id that is not the title's slug makes the client warn and later pushes
  fail with a conflict;
- ``code_file`` is the staged notebook, whose ``parameters`` cell holds this push's
  settings (Kaggle runs notebooks without papermill);
- ``dataset_sources`` are the template's plus the wheels dataset (``fintts kaggle wheels``),
  the corpus and the token dataset (``fintts kaggle token``, when it exists), all mounted under
  ``/kaggle/input`` (where exactly: :mod:`.inputs`);
- ``enable_internet`` is the template's unless the push says ``--no-internet``.

Everything else — ``kernel_type: notebook``, ``enable_gpu: true``, ``machine_shape:
NvidiaTeslaT4`` (the "GPU T4 ×2" of Kaggle's editor, per the kaggle client's
documentation), ``is_private: true`` — comes from the template as written.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import json
import tempfile
from pathlib import Path
from typing import Any

from fintts.kaggle import parameters
from fintts.kaggle.client import NOT_ACTED_ON, KaggleError, calling, connect, user_of
from fintts.train.config import SHIPPED_CONFIGS, ConfigError, load_config, parse_duration, shipped_config
from fintts.train.repo_id import repo_id_problem
from fintts.train.retry import Backoff

PROJECT = Path(__file__).resolve().parents[2]
TEMPLATE = PROJECT / "kaggle-metadata.json"
NOTEBOOK = PROJECT / "notebooks" / "kaggle_train.ipynb"
#: What the ``kaggle`` client reads in a pushed folder.
METADATA = "kernel-metadata.json"
#: The wheels dataset's slug (``fintts kaggle wheels``), under the pushing user.
WHEELS_SLUG = "fintts-wheels"
#: The Python of Kaggle's notebook image: 3.12 since Kaggle/docker-python PR #1496 (2026 tracebacks show
#: ``/usr/local/lib/python3.12/``). The one place it is written: ``fintts kaggle wheels --offline`` fetches wheels for
#: it, and each push writes it into the notebook (``PYTHON``), whose first cell compares it with the session's own.
KAGGLE_PYTHON = "3.12"


@dataclasses.dataclass
class KernelSettings:
    """What one push of the training notebook says: the notebook's parameters and its inputs."""

    #: a config of fintts's ``configs/`` (shipped in the wheels dataset) by file name, or the path of any config
    #: file, whose text the push writes into the notebook (a kernel push carries no other file).
    config: str = "mms-fin.yaml"
    #: the corpus dataset, ``owner/slug``; the session finds it under either mount layout (:mod:`.inputs`). Empty: the config's data.
    corpus: str = ""
    #: the corpus folder in the session; default: where the corpus dataset is mounted.
    data: str = ""
    #: the Hugging Face repo that keeps the run (``user/name``); empty: the session's output only.
    hub_repo: str = ""
    #: the run's local folder in the session; empty: runs/<repo name> with hub_repo, else runs/<config name> (and the
    #: corpus folder's name after it, where that is not the config's data: fintts.train.config.default_run_name).
    store: str = ""
    #: the session's length (e.g. 11h30m); empty: until Kaggle's session limit.
    budget: str = ""
    #: the session may reach the internet (the Hub needs it).
    internet: bool = True
    #: the wheels dataset, ``owner/slug``; default <user>/fintts-wheels.
    wheels: str = ""
    #: the private dataset holding the Hugging Face token (``fintts kaggle token``), attached when set.
    token_dataset: str = ""

    def check(self) -> None:
        """Refuse settings a session would only fail on, hours later."""
        if self.own_config() is None and shipped_config(self.config) is None:
            known = ", ".join(sorted(p.name for p in SHIPPED_CONFIGS.glob("*.yaml")))
            raise ConfigError(f"config: {self.config!r} is neither a file nor one of fintts's configs ({known}, which the "
                              "wheels dataset ships); give the path of your config file or one of those names")
        own = self.own_config()
        if own is not None:
            load_config(own)  # a typo fails here, not in a session hours later
        for key in ("corpus", "wheels"):
            value = getattr(self, key)
            if value and repo_id_problem(value):
                raise ConfigError(f"{key}: {value!r} is not a Kaggle dataset; write OWNER/SLUG (e.g. alice/my-voice)")
        if self.hub_repo and repo_id_problem(self.hub_repo):
            raise ConfigError(f"hub_repo: {repo_id_problem(self.hub_repo)}")
        if self.hub_repo and not self.internet:
            raise ConfigError("hub_repo needs the internet: drop --no-internet, or keep the run in the session's output")
        if self.budget:
            parse_duration(self.budget, key="budget")

    def own_config(self) -> Path | None:
        """The person's own config file, when ``config`` is a path to one (a bare name of fintts's configs is not)."""
        path = Path(self.config).expanduser()
        is_shipped = path.name == self.config and shipped_config(self.config) is not None
        return path if path.is_file() and not is_shipped else None

    def notebook_parameters(self) -> dict[str, str]:
        own = self.own_config()
        # a shipped one by its file's name, which the wheels dataset holds (configs/mms-fin.yaml, mms-fin → mms-fin.yaml)
        config, text = (own.name, own.read_text(encoding="utf-8")) if own else (shipped_config(self.config).name, "")
        return {"CONFIG": config, "CONFIG_YAML": text, "CORPUS": self.corpus, "DATA": self.data, "REPO": self.hub_repo,
                "STORE": self.store, "BUDGET": self.budget, "TOKEN_DATASET": self.token_dataset, "PYTHON": KAGGLE_PYTHON}


def slug(title: str) -> str:
    """The slug Kaggle gives a kernel of this title (the ``kaggle`` client's own rule)."""
    from slugify import slugify  # python-slugify comes with kaggle ([train])

    return slugify(title)


#: The longest kernel title fintts makes: Kaggle's web editor takes titles of 5 to 50 characters.
MAX_TITLE = 50
#: What a run's kernel title begins with.
TITLE_PREFIX = "fintts"


def kernel_title(hub_repo: str, template_title: str) -> str:
    """The title of the kernel that trains ``hub_repo`` (``template_title`` without one).

    ``fintts alice my-voice`` (slug ``fintts-alice-my-voice``): one kernel per Hub repo, so
    two voices of one Kaggle account never follow or queue behind each other's sessions, and
    the same repo always finds its kernel again. A slug keeps letters, digits and dashes only,
    so two repo ids that differ in what it drops (``my_voice``, ``my.voice``, ``my-voice``)
    would share a slug: such an id, and one too long for :data:`MAX_TITLE`, gets 6 hex digits
    of its SHA-1 at the end (``fintts alice my_voice 1a2b3c``), stable and distinct. Letter
    case is not kept: the Hub treats repo ids that differ only in case as one.
    """
    if not hub_repo:
        return template_title
    # no "/" in a title: Kaggle slugifies one in a way nobody documents (issue 41); a space gives the same slug here
    title = f"{TITLE_PREFIX} {hub_repo.replace('/', ' ')}"
    if slug(hub_repo) == hub_repo.lower().replace("/", "-") and len(title) <= MAX_TITLE:
        return title
    digest = hashlib.sha1(hub_repo.lower().encode()).hexdigest()[:6]
    return f"{title[: MAX_TITLE - len(digest) - 1].rstrip(' ./_-')} {digest}"


def kernel_ref(user: str, hub_repo: str, template: Path = TEMPLATE) -> str:
    """``owner/slug`` of the kernel that ``user`` trains ``hub_repo`` with."""
    return f"{user}/{slug(kernel_title(hub_repo, json.loads(template.read_text(encoding='utf-8'))['title']))}"


def editor_url(kernel: str) -> str:
    """Where the kernel's editor is on kaggle.com (Add-ons → Secrets is there)."""
    return f"https://www.kaggle.com/code/{kernel}/edit"


def kernel_metadata(user: str, settings: KernelSettings, template: dict[str, Any]) -> dict[str, Any]:
    """``kernel-metadata.json`` for a push of the training notebook by ``user``."""
    if template.get("kernel_type") != "notebook" or template.get("language") != "python":
        raise ConfigError(f"{TEMPLATE.name}: kernel_type must be notebook and language python (fintts pushes a Python notebook)")
    sources = [*template.get("dataset_sources", []), settings.wheels or f"{user}/{WHEELS_SLUG}"]
    if settings.corpus:
        sources.append(settings.corpus)
    if settings.token_dataset:
        sources.append(settings.token_dataset)
    title = kernel_title(settings.hub_repo, template["title"])
    return {
        "id": f"{user}/{slug(title)}",
        **{key: value for key, value in template.items() if key != "id"},
        "title": title,
        "code_file": NOTEBOOK.name,
        "enable_internet": bool(template.get("enable_internet", True)) and settings.internet,
        "dataset_sources": list(dict.fromkeys(sources)),
    }


def stage(folder: Path, user: str, settings: KernelSettings, *, template: Path = TEMPLATE, notebook: Path = NOTEBOOK) -> Path:
    """Write ``kernel-metadata.json`` and the notebook with this push's parameters into ``folder``."""
    settings.check()
    metadata = kernel_metadata(user, settings, json.loads(template.read_text(encoding="utf-8")))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / METADATA).write_text(json.dumps(metadata, indent=2) + "\n", encoding="utf-8")
    parameters.save(parameters.with_parameters(parameters.load(notebook), settings.notebook_parameters()), folder / NOTEBOOK.name)
    return folder


@dataclasses.dataclass
class Pushed:
    kernel: str  # owner/slug
    version: int
    url: str
    token_dataset: str = ""  # the token dataset attached to this version ("": none)


def push(settings: KernelSettings, api: Any = None, *, attempts: int = 1, backoff: Backoff = Backoff(),
         run: bool = True) -> Pushed:
    """Push a new version of the training notebook (which Kaggle then runs), from a staged folder.

    Sent again (up to ``attempts`` tries) only when Kaggle answers 429: any other failure may
    have started a session, and a second push would run two. ``run=False`` saves the version
    without running it (Kaggle's Quick Save): the notebook then exists, for its secret to be
    attached, and no session or GPU time is spent.
    """
    api = api or connect()
    user = user_of(api)
    with tempfile.TemporaryDirectory(prefix="fintts-kernel-") as tmp:
        folder = stage(Path(tmp), user, settings)
        kernel = json.loads((folder / METADATA).read_text())["id"]
        if not run and "no_run" not in inspect.signature(api.kernels_push).parameters:
            raise KaggleError(f"this kaggle client cannot save {kernel} without running it (Quick Save): pip install -U kaggle")
        send = functools.partial(api.kernels_push, str(folder), **({} if run else {"no_run": True}))
        result = calling(f"push {kernel}", send, attempts=attempts, backoff=backoff, retry_on=NOT_ACTED_ON)
    if result is None or result.error:
        raise KaggleError(f"Kaggle refused the push of {kernel}: {getattr(result, 'error', 'no answer')}")
    invalid = [*result.invalid_dataset_sources, *result.invalid_kernel_sources]
    if invalid:
        raise KaggleError(
            f"Kaggle pushed {kernel} but cannot attach {', '.join(invalid)}: create them first "
            "(fintts kaggle wheels; your corpus as a private dataset) or fix the names"
        )
    return Pushed(kernel, int(result.version_number or 0), result.url, settings.token_dataset)
