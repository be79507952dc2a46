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
is a new entry; the same corpus at another path finds its entries. An entry's name says its
content and it is never rewritten, so the run's store may carry the folder between sessions by
adding the files it lacks (:attr:`fintts.train.task.TaskContext.carried_dir`).

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
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from tqdm.auto import tqdm

from fintts.train.run.checkpoint import sha256_file
from fintts.tts.audio import load_audio
from fintts.tts.chatterbox.frozen import SAMPLE_RATE
from fintts.tts.chatterbox.text import ChatterboxText
from fintts.tts.corpus import Item


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

    def entry(self, item: Item) -> Path:
        stat = item.audio.stat()
        file_key = (item.audio, stat.st_size, stat.st_mtime_ns)
        if file_key not in self._digests:
            self._digests[file_key] = sha256_file(item.audio)
        digest = hashlib.sha256(f"{self._digests[file_key]}\n{item.span!r}".encode()).hexdigest()
        return self.folder / f"{digest[:40]}.safetensors"

    def tokens(self, items: Sequence[Item], *, progress: bool = False, log: Callable[[str], None] = print,
               warn: Callable[[str], None] | None = None) -> list[ClipTokens]:
        """Every item's tokens: speech tokens and speaker embedding read from the cache, made (and kept) for those it
        lacks; the text ids made from the transcript now."""
        entries = [self.entry(item) for item in items]
        missing = sum(not entry.is_file() for entry in entries)
        if missing:
            log(f"token cache: making {missing} of {len(items)} clips' speech tokens and speaker embeddings in {self.folder}")
        result = []
        for item, entry in tqdm(list(zip(items, entries)), desc="speech tokens", disable=not (progress and missing), leave=False):
            speech = self._load(entry)
            if speech is None:
                speech = self._make(item)
                self._store(entry, *speech)
            text_ids = torch.tensor(self.text.encode(item.text, warn=warn), dtype=torch.long)
            result.append(ClipTokens(text_ids, *speech))
        return result

    def _make(self, item: Item) -> tuple[torch.Tensor, torch.Tensor]:
        if self._frozen is None:
            self._frozen = self.make_frozen()
        wav = load_audio(item.audio, SAMPLE_RATE, item.span)
        return self._frozen.speech_tokens(wav).long(), self._frozen.speaker_embedding(wav).float()

    def _load(self, entry: Path) -> tuple[torch.Tensor, torch.Tensor] | None:
        try:
            saved = load_file(str(entry))
            return saved["speech_tokens"].long(), saved["speaker"]
        except (FileNotFoundError, SafetensorError, KeyError, OSError):  # absent or half-written by a killed session
            return None

    def _store(self, entry: Path, speech_tokens: torch.Tensor, speaker: torch.Tensor) -> None:
        """Written under a temporary name and renamed: processes making the same entry at once both leave a whole file."""
        self.folder.mkdir(parents=True, exist_ok=True)
        tensors = {"speech_tokens": speech_tokens.to(torch.int16), "speaker": speaker.contiguous()}
        handle, tmp = tempfile.mkstemp(dir=self.folder, prefix=f".{entry.name}.", suffix=".tmp")
        os.close(handle)
        try:
            save_file(tensors, tmp)
            os.replace(tmp, entry)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
