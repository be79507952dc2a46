"""A run's inputs on the Hugging Face Hub, read alike by every process of a session, with the token in one of them.

Only a session's main process holds the Hugging Face token (fintts/train/processes/hub_token.py): a
private dataset, base voice or release that every process read for itself would be refused to all the
others (401). So every read here has two parts. The *fetch* runs in the main process alone, through
the task's ``fetch_first`` (:class:`fintts.train.task.TaskContext`; the others wait for it off the
device): it downloads into the cache the processes share (the run's cache folder, or ``HF_HOME``,
which the launcher leaves to every process), reads what it needs, and names the commit it resolved.
The others then *read* that commit from the cache with ``local_files_only``: none reaches the network,
and none resolves a branch again, which may have moved on meanwhile. A process on its own (one GPU,
``fintts check``) fetches in place, as it always did: the fetch is the one-process path unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from huggingface_hub import HfApi, hf_hub_download, snapshot_download

#: ``fetch_first(name, fetch)`` (:attr:`fintts.train.task.TaskContext.fetch_first`); ``None``: fetch here.
FetchFirst = Callable[[str, Callable[[], Any]], Any]
Read = TypeVar("Read")


def pinned(name: str, fetch: Callable[[], tuple[Any, Read]], read: Callable[[Any], Read],
           fetch_first: FetchFirst | None) -> tuple[Any, Read]:
    """What every process reads of one Hub input: ``(pin, what was read)``.

    ``fetch()`` runs in the main process (alone: here) and returns the pin (JSON: the commit, the
    files) with what it read, which that process keeps; every other process gets the pin and
    ``read(pin)``: the same files, from the cache alone. ``name`` says what is fetched (the same in
    every process).
    """
    kept: list[Read] = []

    def fetch_and_keep() -> Any:
        pin, value = fetch()
        kept.append(value)
        return pin

    pin = (fetch_first or _here)(name, fetch_and_keep)
    return pin, kept[0] if kept else read(pin)


def repo_files(repo_id: str, *, repo_type: str, revision: str | None, choose: Callable[[list[str]], Sequence[str]],
               cache_dir: Path | None = None, fetch_first: FetchFirst | None = None) -> tuple[str, list[Path]]:
    """The files ``choose`` picks from the repo's listing, downloaded at the commit ``revision`` names (``None``: the
    default branch): ``(that commit, their paths in the cache)``, the same in every process.

    ``choose`` runs in the fetching process only; what it raises (no such split, say) fails the
    session there, and the others with it.
    """
    def fetch() -> tuple[dict[str, Any], list[Path]]:
        api = HfApi()
        commit = api.repo_info(repo_id, repo_type=repo_type, revision=revision).sha
        names = list(choose(api.list_repo_files(repo_id, repo_type=repo_type, revision=commit)))
        paths = [Path(hf_hub_download(repo_id, name, repo_type=repo_type, revision=commit, cache_dir=cache_dir)) for name in names]
        return {"commit": commit, "files": names}, paths

    def read(pin: dict[str, Any]) -> list[Path]:
        # a commit's file already in the cache's snapshots/<commit>/ is returned before any request (huggingface_hub 2.4,
        # file_download.py _hf_hub_download_to_cache_dir: "if user provides a commit_hash and they already have the file
        # on disk, shortcut everything"); local_files_only makes none either way (LocalEntryNotFoundError if it is not)
        return [Path(hf_hub_download(repo_id, name, repo_type=repo_type, revision=pin["commit"], cache_dir=cache_dir,
                                     local_files_only=True)) for name in pin["files"]]

    pin, paths = pinned(f"{repo_type} {repo_id}@{revision or 'main'}", fetch, read, fetch_first)
    return pin["commit"], paths


def snapshot(repo_id: str, *, allow_patterns: list[str], cache_dir: Path | None = None,
             fetch_first: FetchFirst | None = None) -> Path:
    """``snapshot_download`` of a model repo's files that match ``allow_patterns``, at one commit in every process: its
    folder in the cache.

    The fetch is ``snapshot_download`` as a process on its own makes it (the cache's copy when the
    Hub cannot be reached). Its folder is ``snapshots/<commit>`` (huggingface_hub 2.4,
    _snapshot_download.py: ``snapshot_folder = os.path.join(storage_folder, "snapshots",
    commit_hash)``, returned whether downloaded or found), so its name is the commit; the others ask
    for that commit with ``local_files_only``, which returns the same folder once the tree listing
    the fetch cached says it holds every file asked for (``_raise_if_incomplete_snapshot``).
    """
    def fetch() -> tuple[str, Path]:
        folder = Path(snapshot_download(repo_id, allow_patterns=allow_patterns, cache_dir=cache_dir))
        return folder.name, folder

    def read(commit: str) -> Path:
        return Path(snapshot_download(repo_id, revision=commit, allow_patterns=allow_patterns, cache_dir=cache_dir,
                                      local_files_only=True))

    return pinned(f"model {repo_id}", fetch, read, fetch_first)[1]


def _here(name: str, fetch: Callable[[], Any]) -> Any:
    return fetch()
