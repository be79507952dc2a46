"""The token cache: each clip's speech tokens and speaker embedding, made once and kept in the run's store.

T3 never reads audio: what it learns from is a clip's speech tokens (about 90,000 for an hour,
180 kB as int16), its text ids and the speaker embedding of a clip. Making the first and the last runs the
frozen speech tokenizer and speaker encoder (:mod:`fintts.tts.chatterbox.frozen`), so a session
makes those of the clips the cache lacks when it starts, on its device, and every later session
reads them (a Kaggle disk starts empty: the Hub store carries the folder with the checkpoints and
fetches it at resume, before the task is built).

Keys: the folder is named by the fingerprint of the frozen weights (other weights make other
tokens); an entry by the clip's audio bytes (sha256; with its span when it is a stretch of a
longer recording), which is all its speech tokens and speaker embedding depend on. Changed audio
is a new entry; the same corpus at another path finds its entries.

Files: entries are written in shards of up to :data:`SHARD_CLIPS` clips, each a safetensors file
named by the entries it holds and never rewritten, so the run's store may carry the folder between
sessions by adding the files it lacks (:attr:`fintts.train.task.TaskContext.carried_dir`). One
file per clip would put a corpus's thousands of clips into one Hub commit and folder, where the
Hub recommends under 100 files a commit and 10k entries a folder ("Repository limitations and
recommendations", huggingface.co/docs/hub/repositories-recommendations); a shard is written
each :data:`SHARD_CLIPS` clips made, so a session stopped while making them keeps what it made.
A file of one clip, as fintts wrote them before shards, is read as a shard of one.

The text ids are not kept: they are made from the transcript every session (microseconds a
clip, no frozen part). Kept, they would have to be keyed by everything the text front end does
(our normaliser's readings change between versions, and no version number would be remembered
to bump); made afresh, a changed normaliser or vocabulary reaches them without a word, and the
speech tokens stay.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file
from tqdm.auto import tqdm

from fintts.train.run.checkpoint import sha256_file
from fintts.tts.audio import load_audio
from fintts.tts.chatterbox.frozen import SAMPLE_RATE
from fintts.tts.chatterbox.text import ChatterboxText
from fintts.tts.corpus import Item

#: Clips per shard file: a corpus of 10,000 clips makes 50 files (a clip's entry is a few kB).
SHARD_CLIPS = 200


@dataclasses.dataclass
class ClipTokens:
    """What T3 learns from one clip."""

    text_ids: torch.Tensor  # int64, without start/stop
    speech_tokens: torch.Tensor  # int64
    speaker: torch.Tensor  # float32, the speaker encoder's embedding


class TokenCache:
    """``frozen_fingerprint`` names the frozen weights; ``make_frozen`` loads them, the first time a clip is missing (a
    session whose clips are all cached never loads them)."""

    def __init__(self, root: Path, frozen_fingerprint: str, make_frozen: Callable[[], object], text: ChatterboxText):
        self.make_frozen, self.text, self._frozen = make_frozen, text, None
        key = hashlib.sha256(frozen_fingerprint.encode()).hexdigest()[:16]
        self.folder = Path(root) / f"speech-{key}"
        self._digests: dict[tuple, str] = {}

    def key(self, item: Item) -> str:
        """The entry's name: the clip's audio bytes and its span, which are all its speech tokens depend on."""
        stat = item.audio.stat()
        file_key = (item.audio, stat.st_size, stat.st_mtime_ns)
        if file_key not in self._digests:
            self._digests[file_key] = sha256_file(item.audio)
        return hashlib.sha256(f"{self._digests[file_key]}\n{item.span!r}".encode()).hexdigest()[:40]

    def tokens(self, items: Sequence[Item], *, progress: bool = False, log: Callable[[str], None] = print,
               warn: Callable[[str], None] | None = None) -> list[ClipTokens]:
        """Every item's tokens: speech tokens and speaker embedding read from the cache, made (and kept, a shard each
        :data:`SHARD_CLIPS` clips) for those it lacks; the text ids made from the transcript now."""
        keys = [self.key(item) for item in items]
        found = self._index()
        missing = len({key for key in keys if key not in found})
        if missing:
            log(f"token cache: making {missing} of {len(items)} clips' speech tokens and speaker embeddings in {self.folder}")
        made: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        unsaved: list[str] = []
        result = []
        for item, key in tqdm(list(zip(items, keys)), desc="speech tokens", disable=not (progress and missing), leave=False):
            speech = made.get(key) or self._read(found.get(key))
            if speech is None:
                speech = made[key] = self._make(item)
                unsaved.append(key)
                if len(unsaved) == SHARD_CLIPS:
                    self._store({k: made[k] for k in unsaved})
                    unsaved = []
            text_ids = torch.tensor(self.text.encode(item.text, warn=warn), dtype=torch.long)
            result.append(ClipTokens(text_ids, *speech))
        if unsaved:
            self._store({k: made[k] for k in unsaved})
        return result

    def _index(self) -> dict[str, tuple[Path, str]]:
        """Where each entry is: its file and the prefix of its tensors' names. A file that cannot be read (half
        written by a killed session, cut short in a download) holds nothing: its clips are made again."""
        index: dict[str, tuple[Path, str]] = {}
        for path in sorted(self.folder.glob("*.safetensors")) if self.folder.is_dir() else []:
            try:
                with safe_open(str(path), framework="pt") as handle:
                    names = list(handle.keys())
            except (SafetensorError, OSError):
                continue
            if "speech_tokens" in names:  # a file of one clip, named by its key (fintts before shards)
                index[path.stem] = (path, "")
            keys = (name.removesuffix(".speaker") for name in names if name.endswith(".speaker"))
            index.update((key, (path, key + ".")) for key in keys)
        return index

    def _make(self, item: Item) -> tuple[torch.Tensor, torch.Tensor]:
        if self._frozen is None:
            self._frozen = self.make_frozen()
        wav = load_audio(item.audio, SAMPLE_RATE, item.span)
        return self._frozen.speech_tokens(wav).long(), self._frozen.speaker_embedding(wav).float()

    @staticmethod
    def _read(where: tuple[Path, str] | None) -> tuple[torch.Tensor, torch.Tensor] | None:
        if where is None:
            return None
        path, prefix = where
        try:
            with safe_open(str(path), framework="pt") as handle:
                return handle.get_tensor(prefix + "speech_tokens").long(), handle.get_tensor(prefix + "speaker")
        except (SafetensorError, OSError):  # removed or damaged since the index was read
            return None

    def _store(self, entries: dict[str, tuple[torch.Tensor, torch.Tensor]]) -> None:
        """One shard, named by the entries it holds, written under a temporary name and renamed: processes making the
        same entries at once both leave a whole file of that name."""
        self.folder.mkdir(parents=True, exist_ok=True)
        tensors = {}
        for key, (speech_tokens, speaker) in entries.items():
            tensors[f"{key}.speech_tokens"] = speech_tokens.to(torch.int16)
            tensors[f"{key}.speaker"] = speaker.contiguous()
        name = hashlib.sha256("\n".join(sorted(entries)).encode()).hexdigest()[:40]
        shard = self.folder / f"shard-{name}.safetensors"
        handle, tmp = tempfile.mkstemp(dir=self.folder, prefix=f".{shard.name}.", suffix=".tmp")
        os.close(handle)
        try:
            save_file(tensors, tmp)
            os.replace(tmp, shard)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
