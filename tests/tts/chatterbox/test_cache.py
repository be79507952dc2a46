"""The token cache: made once per clip, found again by content wherever the corpus lies, apart per frozen weights."""

from __future__ import annotations

import shutil

import pytest
import torch
from safetensors.torch import save_file

from fintts.tts.chatterbox import cache as cache_module
from fintts.tts.chatterbox.cache import TokenCache
from fintts.tts.chatterbox.frozen import TOKENS_PER_SECOND, RandomParts
from fintts.tts.chatterbox.text import ChatterboxText
from fintts.tts.corpus import Item
from fintts.tts.corpus.data_names import DEMO_CORPUS


def _items(root, count=2):
    wavs = sorted((root / "espeak_f2" / "wavs").glob("*.flac"))[:count]
    return [Item(f"espeak_f2/{wav.stem}", wav, "Hyvää päivää.", "espeak_f2") for wav in wavs]


class _Counting(RandomParts):
    made = 0

    def speech_tokens(self, wav):
        type(self).made += 1
        return super().speech_tokens(wav)


def test_tokens_are_made_once_and_found_again_from_another_path(tmp_path):
    text = ChatterboxText.builtin(256)
    cache = TokenCache(tmp_path / "cache", RandomParts.fingerprint, _Counting, text)
    first = cache.tokens(_items(DEMO_CORPUS), log=lambda _: None)
    assert _Counting.made == 2
    assert abs(len(first[0].speech_tokens) - TOKENS_PER_SECOND * 1.0) < 200 and first[0].speaker.shape == (256,)
    moved = tmp_path / "moved"
    shutil.copytree(DEMO_CORPUS / "espeak_f2", moved / "espeak_f2")
    again = TokenCache(tmp_path / "cache", RandomParts.fingerprint, _Counting, text).tokens(_items(moved), log=lambda _: None)
    assert _Counting.made == 2  # the same bytes: read, not made
    assert all(torch.equal(a.speech_tokens, b.speech_tokens) and torch.equal(a.text_ids, b.text_ids) for a, b in zip(first, again))


def test_other_frozen_weights_make_their_own_entries(tmp_path):
    text = ChatterboxText.builtin(256)
    cache = TokenCache(tmp_path, RandomParts.fingerprint, RandomParts, text)
    other = TokenCache(tmp_path, "other-weights", RandomParts, text)
    assert cache.folder != other.folder


class _ReadsOtherwise(ChatterboxText):
    """A text front end whose normaliser reads the transcript differently (as a new fintts version may)."""

    def prepare(self, text: str) -> str:
        return super().prepare(text.replace("Hyvää", "Hei"))


def test_a_changed_text_front_end_remakes_the_text_ids_and_not_the_speech_tokens(tmp_path):
    builtin = ChatterboxText.builtin(256)
    items = _items(DEMO_CORPUS)
    before = TokenCache(tmp_path, RandomParts.fingerprint, _Counting, builtin).tokens(items, log=lambda _: None)
    made = _Counting.made
    changed = _ReadsOtherwise(builtin.json)
    after = TokenCache(tmp_path, RandomParts.fingerprint, _Counting, changed).tokens(items, log=lambda _: None)
    assert _Counting.made == made  # the audio is the same: its speech tokens are read, not made
    assert after[0].text_ids.tolist() == changed.encode(items[0].text) != before[0].text_ids.tolist()
    assert torch.equal(after[0].speech_tokens, before[0].speech_tokens)
    edited = Item(items[0].id, items[0].audio, "Toinen teksti.", items[0].speaker)
    assert TokenCache(tmp_path, RandomParts.fingerprint, _Counting, builtin).tokens([edited], log=lambda _: None)[0].text_ids \
        .tolist() == builtin.encode("Toinen teksti.")
    assert _Counting.made == made


def test_a_half_written_shard_is_made_again(tmp_path):
    text = ChatterboxText.builtin(256)
    cache = TokenCache(tmp_path, RandomParts.fingerprint, RandomParts, text)
    item = _items(DEMO_CORPUS)[0]
    whole = cache.tokens([item], log=lambda _: None)[0]
    (shard,) = cache.folder.glob("*.safetensors")
    shard.write_bytes(shard.read_bytes()[:20])  # a session killed while writing, a download cut short
    assert torch.equal(cache.tokens([item], log=lambda _: None)[0].speech_tokens, whole.speech_tokens)


class _Failing(RandomParts):
    """Frozen parts that fail at the third clip they are given (a session stopped while it makes tokens)."""

    made = 0

    def speech_tokens(self, wav):
        type(self).made += 1
        if type(self).made == 3:
            raise RuntimeError("stopped")
        return super().speech_tokens(wav)


def test_entries_are_kept_in_shards_and_a_stopped_session_keeps_the_shards_it_wrote(tmp_path, monkeypatch):
    """A corpus's clips go to the Hub in a few files, not one each (the Hub asks for under 100 files a commit)."""
    monkeypatch.setattr(cache_module, "SHARD_CLIPS", 2)
    text, items = ChatterboxText.builtin(256), _items(DEMO_CORPUS, 5)
    with pytest.raises(RuntimeError, match="stopped"):
        TokenCache(tmp_path, RandomParts.fingerprint, _Failing, text).tokens(items, log=lambda _: None)
    cache = TokenCache(tmp_path, RandomParts.fingerprint, _Counting, text)
    assert len(list(cache.folder.glob("*.safetensors"))) == 1  # the first two clips' shard
    made, said = _Counting.made, []
    whole = cache.tokens(items, log=said.append)
    assert _Counting.made - made == 3 and said[0].startswith("token cache: making 3 of 5")
    assert len(list(cache.folder.glob("*.safetensors"))) == 3  # 2 + 2 + 1 clips
    again = TokenCache(tmp_path, RandomParts.fingerprint, _Counting, text).tokens(items, log=lambda _: None)
    assert _Counting.made - made == 3 and all(torch.equal(a.speech_tokens, b.speech_tokens) for a, b in zip(whole, again))


def test_a_file_of_one_clip_written_before_shards_is_read(tmp_path):
    """A run whose carried cache fintts wrote a file per clip (named by the clip's key) reads it, making nothing."""
    text, item = ChatterboxText.builtin(256), _items(DEMO_CORPUS)[0]
    cache = TokenCache(tmp_path, RandomParts.fingerprint, _Counting, text)
    cache.folder.mkdir(parents=True)
    tokens, speaker = torch.arange(7, dtype=torch.int16), torch.ones(256)
    save_file({"speech_tokens": tokens, "speaker": speaker}, str(cache.folder / f"{cache.key(item)}.safetensors"))
    made = _Counting.made
    (clip,) = cache.tokens([item], log=lambda _: None)
    assert _Counting.made == made and clip.speech_tokens.tolist() == list(range(7)) and torch.equal(clip.speaker, speaker)
