"""A dataset on the Hugging Face Hub: ``data: hf://datasets/USER/NAME`` (``@REVISION`` optional).

What ``datasets``' ``push_to_hub`` writes and most people who fine-tune MMS voices keep:
parquet files per split (``data/train-00000-of-00001.parquet``, ``train/0000.parquet``…) with
an ``Audio`` column (a struct of the file's ``bytes`` and its original ``path``), a transcript
column and perhaps a speaker column. The split's parquet files are downloaded with
huggingface_hub into the cache, and each clip's bytes unpacked once into a folder named after
the dataset's commit, so every later step (checks, features, a resumed session) reads plain
files. The parquet is read with pyarrow, in batches: it is the reference implementation,
one wheel with no dependencies of its own beyond numpy (fastparquet needs pandas), and
Kaggle's images have it installed.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from huggingface_hub import constants
from huggingface_hub.errors import HfHubHTTPError

from fintts.tts.audio import AUDIO_EXTENSIONS
from fintts.tts.corpus.model import HUB_PREFIX, CorpusError, Item, Problem, ReadOptions, speaker_name_problem
from fintts.tts.hub_inputs import repo_files

DEFAULT_SPLIT = "train"
AUDIO_COLUMN = "audio"
TEXT_COLUMNS = ("transcription", "text", "sentence", "normalized_text")
SPEAKER_COLUMNS = ("speaker_id", "speaker", "client_id")
_MAGIC = ((b"RIFF", ".wav"), (b"fLaC", ".flac"), (b"OggS", ".ogg"), (b"ID3", ".mp3"), (b"\xff\xfb", ".mp3"), (b"\xff\xf3", ".mp3"))


def parse(source: str) -> tuple[str, str | None]:
    """``(USER/NAME, revision)`` of an ``hf://datasets/USER/NAME[@REVISION]`` address."""
    rest = source[len(HUB_PREFIX):].strip("/")
    repo, _, revision = rest.partition("@")
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", repo):
        raise CorpusError(f"data: {source!r} is not a Hub dataset address; write hf://datasets/USER/NAME (or …@REVISION)")
    return repo, revision or None


def split_files(files: list[str], split: str) -> list[str]:
    """The parquet files of ``split``: in a folder named after it, or named ``<split>-…``/``<split>.parquet``."""
    def matches(path: str) -> bool:
        *folders, name = path.split("/")
        return split in folders or name.startswith(f"{split}-") or name == f"{split}.parquet"

    return sorted(f for f in files if f.endswith(".parquet") and matches(f))


def _suffix(path: str, data: bytes) -> str:
    suffix = Path(path or "").suffix.lower()
    if suffix in AUDIO_EXTENSIONS:
        return suffix
    return next((ext for magic, ext in _MAGIC if data.startswith(magic)), ".wav")


def _unpack(target: Path, data: bytes) -> None:
    """Write ``data`` to ``target`` once; a file of the same size is the same clip of the same commit."""
    if target.is_file() and target.stat().st_size == len(data):
        return
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")  # processes of one run unpack side by side
    tmp.write_bytes(data)
    os.replace(tmp, target)


def download(source: str, options: ReadOptions) -> tuple[Path, list[Path], str, str]:
    """The split's parquet files, downloaded: ``(audio folder, files, repo@commit, split)``.

    In a session of several processes the one holding the token downloads them, and the others
    read them from the cache at its commit (``options.fetch_first``: :mod:`fintts.tts.hub_inputs`).
    """
    repo, revision = parse(source)
    split = options.split or DEFAULT_SPLIT
    hub_cache = options.cache_dir / "hub" if options.cache_dir else None

    def choose(every: list[str]) -> list[str]:
        files = split_files(every, split)
        if not files:
            have = ", ".join(f for f in every if f.endswith(".parquet")) or "none"
            raise CorpusError(f"{source}: no parquet files of split {split!r} (looked for */{split}/*.parquet and "
                              f"{split}-*.parquet; its parquet files: {have}); pass split: one the dataset has")
        return files

    try:
        commit, local = repo_files(repo, repo_type="dataset", revision=revision, choose=choose, cache_dir=hub_cache,
                                   fetch_first=options.fetch_first)
    except HfHubHTTPError as error:
        raise CorpusError(f"{source}: cannot download it from the Hub ({error}); check the name, your token "
                          "(HF_TOKEN) for a private dataset, and the network") from error
    base = options.cache_dir or Path(constants.HF_HOME) / "fintts"
    audio = base / "datasets" / repo / commit / split
    audio.mkdir(parents=True, exist_ok=True)
    return audio, local, f"{repo}@{commit[:12]}", split


def read_hub(source: str, options: ReadOptions, items: list[Item], problems: list[Problem]) -> tuple[Path, str]:
    """Rows of the split as items, their audio unpacked; returns (audio folder, what was read)."""
    try:
        import pyarrow.parquet as pq  # optional: only Hub datasets need it
    except ImportError as error:
        raise CorpusError(f"{source}: reading a Hub dataset's parquet needs pyarrow; pip install 'fintts[datasets]' "
                          "(or pip install pyarrow)") from error
    folder, files, name, split = download(source, options)
    speaker_default = name.split("/")[1].split("@")[0]
    index = 0
    for parquet in files:
        reader = pq.ParquetFile(parquet)
        header = reader.schema_arrow.names
        audio_column = options.audio_column or AUDIO_COLUMN
        text_column = options.text_column or next((c for c in TEXT_COLUMNS if c in header), "")
        speaker_column = options.speaker_column or next((c for c in SPEAKER_COLUMNS if c in header), "")
        missing = [c for c in (audio_column, text_column, speaker_column) if c and c not in header]
        if missing or not text_column:
            raise CorpusError(f"{source} ({split}): no column {', '.join(missing) or 'for the transcript'} "
                              f"(it has {', '.join(header)}); name them with audio_column, text_column, speaker_column")
        columns = [c for c in (audio_column, text_column, speaker_column) if c]
        for batch in reader.iter_batches(columns=columns, batch_size=256):
            for row in batch.to_pylist():
                index += 1
                where = Path(f"{parquet.name}#row{index}")
                audio = row[audio_column] or {}
                data = audio.get("bytes") if isinstance(audio, dict) else None
                if not data:
                    problems.append(Problem(where, f"no audio bytes in column {audio_column!r} (path {audio.get('path')!r}); "
                                                   "push the dataset with its Audio column embedded"))
                    continue
                speaker = str(row[speaker_column]).strip() if speaker_column and row[speaker_column] is not None else speaker_default
                problem = speaker_name_problem(speaker)
                if problem:
                    problems.append(Problem(where, problem))
                    continue
                clip_id = f"{split}/{index:06d}"
                target = folder / f"{index:06d}{_suffix(audio.get('path') or '', data)}"
                _unpack(target, data)
                text = " ".join(str(row[text_column] or "").split())
                if not text:
                    problems.append(Problem(target, f"empty {text_column} ({where})"))
                    continue
                items.append(Item(id=clip_id, audio=target, text=text, speaker=speaker))
    return folder, f"{source} split {split} ({len(files)} parquet file(s) of {name})"
