"""Which voice family a folder or a run is: the families' faces, found through the ``fintts.families`` entry points.

fintts registers its own families (VITS, Chatterbox) in its ``pyproject.toml``, as it registers its
tasks; another package adds one the same way, with no change to fintts (docs/families.md). Only the
installed packages' entry points are imported, never a module a file names (DESIGN.md: nothing from
outside is executed).
"""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

from fintts.tts.family import Family
from fintts.tts.voice_format import VOICE_DIR, VoiceError

#: The entry-point group in which packages register their families' faces (:class:`~fintts.tts.family.Family`).
FAMILY_ENTRY_POINTS = "fintts.families"
#: The tasks' entry points (:data:`fintts.train.registry.TASK_ENTRY_POINTS`), named again because looking a voice up imports
#: nothing of the trainer: a config may name a family's task by the ``package.module:Class`` registered there.
TASK_ENTRY_POINTS = "fintts.tasks"
#: A run's status file (the trainer's ``STATUS``, :mod:`fintts.train.run.layout`), named again because looking a voice
#: up imports nothing of the trainer (the laptop voice): its ``task`` names the run's family.
RUN_STATUS = "status.json"
#: A run kept on the Hub, as ``fintts publish --store`` names it: ``hf://USER/RUN``.
HUB_RUN = "hf://"


def registered_families() -> dict[str, Family]:
    """Name → face of every installed family, in name order."""
    families = {}
    for entry in sorted(importlib.metadata.entry_points(group=FAMILY_ENTRY_POINTS), key=lambda ep: ep.name):
        try:
            face = entry.load()
        except (ImportError, AttributeError) as err:
            raise VoiceError(f"the voice family {entry.name!r} ({entry.value}) cannot be imported: {err}; reinstall "
                             "the package that registers it") from err
        if not isinstance(face, Family):
            raise VoiceError(f"the voice family {entry.name!r} ({entry.value}) is not a fintts.tts.family.Family")
        families[entry.name] = face
    if not families:
        raise VoiceError(f"no voice family is installed (the {FAMILY_ENTRY_POINTS} entry points): reinstall fintts "
                         "(pip install -e . in a checkout, or pip install fintts)")
    return families


def family_of_folder(folder: Path) -> Family | None:
    """The family whose voice ``folder`` holds; ``None``: no installed family's. Two that claim it are an error."""
    owners = [face for face in registered_families().values() if face.owns(folder)]
    if len(owners) > 1:
        raise VoiceError(f"{folder} is a voice of several families ({', '.join(f.name for f in owners)}): "
                         "keep one family's files in a voice folder")
    return owners[0] if owners else None


def voice_in(path: Path) -> tuple[Path, Family] | None:
    """The voice at ``path``: the folder itself or its ``model/`` (a run folder), with its family; ``None``: neither."""
    for candidate in (path, path / VOICE_DIR):
        if candidate.is_dir() and (family := family_of_folder(candidate)) is not None:
            return candidate, family
    return None


def family_of_task(task: str) -> Family | None:
    """The family that the task ``task`` (a config's ``task:``: a registered name, or the ``package.module:Class`` it names) trains."""
    targets = {ep.name: ep.value for ep in importlib.metadata.entry_points(group=TASK_ENTRY_POINTS)}
    return next((face for face in registered_families().values() if task in (face.task, targets.get(face.task))), None)


def family_of_run(run: Path) -> Family | None:
    """The family of a local run folder: of its exported voice, else of the task its status names."""
    found = voice_in(run)
    if found is not None:
        return found[1]
    try:
        task = json.loads((run / RUN_STATUS).read_text(encoding="utf-8")).get("task")
    except (OSError, ValueError, AttributeError):
        return None
    return family_of_task(task) if isinstance(task, str) else None


def family_of_store(store: str | Path) -> Family:
    """The family of the run ``store`` (a local folder, or ``hf://USER/RUN``), or a :class:`VoiceError` saying what to give."""
    where = str(store)
    hub = where.startswith(HUB_RUN)
    family = family_of_hub_run(where[len(HUB_RUN):].strip("/")) if hub else family_of_run(Path(where).expanduser())
    if family is None:
        hint = "" if hub or Path(where).expanduser().is_dir() else f" ({where} does not exist; a Hub run is --store hf://USER/RUN)"
        raise VoiceError(f"--store {store}: no {VOICE_DIR}/ voice of an installed family, and no {RUN_STATUS} naming its "
                         f"task{hint}; give the run's folder, whose {VOICE_DIR}/ the trainer wrote")
    return family


def family_of_hub_run(repo_id: str) -> Family | None:
    """The family of a Hub run (``fintts publish --store hf://USER/RUN``): of the task its ``status.json`` names.

    Read with ``huggingface_hub.hf_hub_download``, which takes the endpoint from ``HF_ENDPOINT`` and the token from
    ``HF_TOKEN`` or the cached login (huggingface_hub 2.4, ``constants.ENDPOINT``, ``utils/_auth.get_token``), as the
    publishing itself does.
    """
    from huggingface_hub import hf_hub_download  # 0.15 s to import: only for a Hub run
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    try:
        status = json.loads(Path(hf_hub_download(repo_id, RUN_STATUS, library_name="fintts")).read_text(encoding="utf-8"))
    except (HfHubHTTPError, LocalEntryNotFoundError, ValueError, OSError) as err:
        raise VoiceError(f"hf://{repo_id}: cannot read its {RUN_STATUS}, which names the run's voice family "
                         f"({str(err).strip().splitlines()[0][:200] if str(err).strip() else type(err).__name__}); check the "
                         "name, and log in (hf auth login) for a private run") from None
    task = status.get("task") if isinstance(status, dict) else None
    return family_of_task(task) if isinstance(task, str) else None
