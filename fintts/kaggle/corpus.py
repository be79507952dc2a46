"""``fintts kaggle corpus``: a checked corpus folder uploaded as a private Kaggle dataset, folders and all.

The ``kaggle`` client uploads the *files* at the top of a dataset folder and skips its
folders unless asked to zip them (``dir_mode="zip"``, the command line's ``--dir-mode
zip``); a corpus is mostly folders (``wavs/``, ``clips/``, one per speaker), so an upload
without it leaves a dataset of transcripts whose every clip is "audio not found" in the
session. Here every folder is sent as ``NAME.zip``, which Kaggle unpacks back into
``NAME/`` under ``/kaggle/input/<slug>``, so the session reads the layout the laptop checked.

The client reads ``dataset-metadata.json`` from the folder it uploads; fintts does not write
into the corpus, so it uploads a staging folder of links to the corpus's entries beside a
metadata file of its own (a private dataset, licence "other", titled by its slug). A
``dataset-metadata.json`` already in the corpus is left out: ``--dataset`` names the dataset.
The first upload creates the dataset; later ones add a version to it, which the next pushed
session mounts.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fintts.kaggle.client import KaggleError, calling, connect, user_of
from fintts.train.config import ConfigError
from fintts.train.repo_id import repo_id_problem

METADATA = "dataset-metadata.json"
#: What the client itself reads as dataset metadata: never sent as corpus files.
CLIENT_FILES = {METADATA, "datapackage.json"}


def dataset_metadata(ref: str) -> dict[str, Any]:
    """``dataset-metadata.json`` of a private corpus dataset ``owner/slug``."""
    return {"title": ref.split("/")[1], "id": ref, "licenses": [{"name": "other"}]}


def check_ref(ref: str, user: str) -> None:
    """Refuse a dataset name Kaggle would refuse, before anything is uploaded."""
    if repo_id_problem(ref):
        raise ConfigError(f"--dataset: {ref!r} is not a Kaggle dataset; write OWNER/SLUG (e.g. {user}/my-voice)")
    owner, slug = ref.split("/")
    if owner != user:
        raise ConfigError(f"--dataset: {ref} belongs to {owner}, and these Kaggle credentials are {user}'s: write {user}/{slug}")
    if not 6 <= len(slug) <= 50 or not all(c in "abcdefghijklmnopqrstuvwxyz0123456789-" for c in slug):
        raise ConfigError(f"--dataset: Kaggle takes a slug of 6 to 50 lower-case letters, digits and dashes, not {slug!r}")


def stage(corpus: Path, ref: str, folder: Path) -> list[str]:
    """Links to ``corpus``'s entries and the metadata in ``folder``; the entries' names."""
    names = sorted(entry.name for entry in corpus.iterdir() if entry.name not in CLIENT_FILES)
    for name in names:
        try:
            os.symlink((corpus / name).resolve(), folder / name, target_is_directory=(corpus / name).is_dir())
        except OSError as err:  # e.g. Windows without the right to make links
            raise KaggleError(f"cannot stage {corpus} for upload ({err}): links are needed to upload it without writing into it") from None
    (folder / METADATA).write_text(json.dumps(dataset_metadata(ref), indent=2) + "\n", encoding="utf-8")
    return names


def upload(corpus: str | Path, ref: str, *, notes: str = "", api: Any = None, log: Callable[[str], None] = print) -> str:
    """Upload the corpus folder as the private dataset ``ref`` (a new version when it exists); returns its URL."""
    corpus = Path(corpus).expanduser()
    if not corpus.is_dir():
        raise ConfigError(f"{corpus} is not a folder: fintts kaggle corpus uploads a corpus folder (a Hub dataset needs no upload)")
    api = api or connect()
    check_ref(ref, user_of(api))
    try:
        calling(f"look up {ref}", lambda: api.dataset_status(ref))
        exists = True
    except KaggleError as err:
        # absent: a 404, or since 2026 a 403 (kaggle-cli PR #951, #548); ref is in the credentials' own namespace
        # (check_ref), so a 403 cannot be someone else's dataset we may not see
        if err.status not in (403, 404):
            raise
        exists = False
    with tempfile.TemporaryDirectory(prefix="fintts-corpus-") as tmp:
        names = stage(corpus, ref, Path(tmp))
        folders = [name for name in names if (corpus / name).is_dir()]
        log(f"uploading {len(names) - len(folders)} file(s) and {len(folders)} folder(s) as zips "
            f"({', '.join(folders) or 'none'}) to {'a new version of ' if exists else 'the new private dataset '}{ref}")
        if exists:
            result = calling(f"add a version to {ref}", lambda: api.dataset_create_version(
                tmp, notes or "fintts kaggle corpus", quiet=True, dir_mode="zip"))
        else:
            result = calling(f"create {ref}", lambda: api.dataset_create_new(tmp, public=False, quiet=True, dir_mode="zip"))
    if result is None or getattr(result, "error", None):
        raise KaggleError(f"Kaggle did not take {ref}: {getattr(result, 'error', 'no answer')}")
    return getattr(result, "url", "") or f"https://www.kaggle.com/datasets/{ref}"
