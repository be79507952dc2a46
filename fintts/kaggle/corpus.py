"""``fintts kaggle corpus``: a checked corpus folder uploaded as a private Kaggle dataset, folders and all.

The ``kaggle`` client uploads the *files* at the top of a dataset folder and skips its
folders unless asked to zip them; a corpus is mostly folders (``wavs/``, ``clips/``, one per
speaker), so an upload without them leaves a dataset of transcripts whose every clip is
"audio not found" in the session. Here every folder is sent as ``NAME.zip``, which Kaggle
unpacks back into ``NAME/`` where it mounts the dataset (:mod:`.inputs`), so the session
reads the layout the laptop checked.

Only the corpus goes up: regular files and folders, never a dot entry (``.env``,
``.kaggle/``, ``.cache/huggingface/``) nor a link, at any depth. fintts writes the zips
itself, since the client's ``dir_mode="zip"`` follows links (a corpus holding secrets and
links once uploaded 3 of 4 planted secrets: issue 41, item 7).

The client reads ``dataset-metadata.json`` from the folder it uploads; fintts does not write
into the corpus, so it uploads a staging folder (copies of the top-level files, the zips, and
a metadata file of its own: a private dataset, licence "other", titled by its slug). A
``dataset-metadata.json`` already in the corpus is left out: ``--corpus`` names the dataset.
The first upload creates the dataset; later ones add a version to it, which the next pushed
session mounts.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fintts.kaggle.client import KaggleError, calling, connect, user_of
from fintts.kaggle.visibility import private_or_absent
from fintts.train.config import ConfigError
from fintts.train.repo_id import repo_id_problem

METADATA = "dataset-metadata.json"
#: What the client itself reads as dataset metadata: never sent as corpus files.
CLIENT_FILES = {METADATA, "datapackage.json"}
#: Kaggle refuses a dataset folder with more files than this at its top level (zip them: a folder goes up as one zip).
MAX_FLAT_FILES = 1000


def dataset_metadata(ref: str) -> dict[str, Any]:
    """``dataset-metadata.json`` of a private corpus dataset ``owner/slug``."""
    return {"title": ref.split("/")[1], "id": ref, "licenses": [{"name": "other"}]}


def check_ref(ref: str, user: str) -> None:
    """Refuse a dataset name Kaggle would refuse, before anything is uploaded."""
    if repo_id_problem(ref):
        raise ConfigError(f"--corpus: {ref!r} is not a Kaggle dataset; write OWNER/SLUG (e.g. {user}/my-voice)")
    owner, slug = ref.split("/")
    if owner != user:
        raise ConfigError(f"--corpus: {ref} belongs to {owner}, and these Kaggle credentials are {user}'s: write {user}/{slug}")
    if not 6 <= len(slug) <= 50 or not all(c in "abcdefghijklmnopqrstuvwxyz0123456789-" for c in slug):
        raise ConfigError(f"--corpus: Kaggle takes a slug of 6 to 50 lower-case letters, digits and dashes, not {slug!r}")


def _kept(path: Path) -> bool:
    """Whether ``path`` goes up: a regular file or folder, not a link, not a dot entry (``.env``, ``.cache/``, ``.kaggle/``)."""
    return not path.name.startswith(".") and not path.is_symlink() and (path.is_file() or path.is_dir())


def _files(folder: Path) -> list[Path]:
    """The regular files under ``folder`` that go up, at any depth: no link followed, nothing under a dot folder."""
    found = []
    for entry in sorted(folder.iterdir()):
        if not _kept(entry):
            continue
        found.extend(_files(entry) if entry.is_dir() else [entry])
    return found


def stage(corpus: Path, ref: str, folder: Path) -> list[str]:
    """The corpus as it goes up, in ``folder``: its top-level files, each folder as ``NAME.zip``, and the metadata; the names.

    What a corpus folder may also hold — ``.env``, ``.kaggle/kaggle.json``, ``.cache/huggingface/token``, links to
    anywhere — is never sent: dot entries and links are left out at every depth (issue 41, item 7), and the zips are
    written here (the client's own ``dir_mode="zip"`` follows links). Kaggle unpacks each zip back into ``NAME/``.
    Kaggle refuses a folder of more than :data:`MAX_FLAT_FILES` files at the top of a dataset.
    """
    names = []
    top = [entry for entry in sorted(corpus.iterdir()) if _kept(entry) and entry.name not in CLIENT_FILES]
    flat = [entry for entry in top if entry.is_file()]
    if len(flat) > MAX_FLAT_FILES:
        raise ConfigError(f"{corpus} holds {len(flat)} files at its top level, and Kaggle refuses a dataset folder of more than "
                          f"{MAX_FLAT_FILES}: move the clips into a folder (e.g. wavs/, which goes up as one zip)")
    for entry in top:
        if entry.is_file():
            shutil.copyfile(entry, folder / entry.name)  # a copy: the client reads what is staged, links included
            names.append(entry.name)
            continue
        files = _files(entry)
        if not files:
            continue
        with zipfile.ZipFile(folder / f"{entry.name}.zip", "w", zipfile.ZIP_STORED) as archive:  # audio does not deflate
            for path in files:
                archive.write(path, path.relative_to(entry).as_posix())
        names.append(entry.name)
    (folder / METADATA).write_text(json.dumps(dataset_metadata(ref), indent=2) + "\n", encoding="utf-8")
    return names


def upload(corpus: str | Path, ref: str, *, notes: str = "", api: Any = None, log: Callable[[str], None] = print) -> str:
    """Upload the corpus folder as the private dataset ``ref`` (a new version when it exists); returns its URL."""
    corpus = Path(corpus).expanduser()
    if not corpus.is_dir():
        raise ConfigError(f"{corpus} is not a folder: fintts kaggle corpus uploads a corpus folder (a Hub dataset needs no upload)")
    api = api or connect()
    check_ref(ref, user_of(api))
    # a public one is refused: a version fintts adds would publish the voice (dataset_create_version keeps visibility)
    exists = private_or_absent(api, ref, risk="a version fintts adds would publish your voice",
                               instead=f"pick another name: --corpus {ref.split('/')[0]}/another-name")
    with tempfile.TemporaryDirectory(prefix="fintts-corpus-") as tmp:
        names = stage(corpus, ref, Path(tmp))
        folders = [name for name in names if (Path(tmp) / f"{name}.zip").is_file()]
        log(f"uploading {len(names) - len(folders)} file(s) and {len(folders)} folder(s) as zips "
            f"({', '.join(folders) or 'none'}) to {'a new version of ' if exists else 'the new private dataset '}{ref}")
        if exists:
            result = calling(f"add a version to {ref}", lambda: api.dataset_create_version(
                tmp, notes or "fintts kaggle corpus", quiet=True))
        else:
            result = calling(f"create {ref}", lambda: api.dataset_create_new(tmp, public=False, quiet=True))
    if result is None or getattr(result, "error", None):
        raise KaggleError(f"Kaggle did not take {ref}: {getattr(result, 'error', 'no answer')}")
    return getattr(result, "url", "") or f"https://www.kaggle.com/datasets/{ref}"
