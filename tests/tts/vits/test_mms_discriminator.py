"""``discriminator: auto``: an MMS fine-tune starts from MMS's released discriminator, fetched from the (local) Hub."""

from __future__ import annotations

import io
import os
import random
import time
from pathlib import Path

import pytest
import torch
from huggingface_hub import HfApi
from safetensors.torch import load_file, save_file
from transformers import VitsConfig, VitsModel

from fintts.errors import ConfigError, UsageError
from fintts.train import train
from fintts.train.config import load_config
from fintts.train.run import checkpoint
from fintts.tts.text import FALLBACK_VOCAB
from fintts.tts.vits.discriminator import DiscriminatorConfig, VitsDiscriminator, read_mms_discriminator
from fintts.tts.vits.mms_discriminator import MMS_RELEASE, cached_file, mms_language, release_file, starting_discriminator
from hub_helpers import TOKEN
from trainer_helpers import QUIET
from vits_helpers import TINY_DISCRIMINATOR, TINY_MODEL, TRAINING_ONLY, converted, original_discriminator_file, tiny_config

TINY = DiscriminatorConfig(**{k: tuple(v) for k, v in TINY_DISCRIMINATOR.items()})


def release(hub, folder: Path, lang: str = "fin", file: Path | None = None):
    """Put a D_100000.pth (``file``, or one made from an original MultiPeriodDiscriminator) where MMS keeps it."""
    original = None
    if file is None:
        file = folder / "D_100000.pth"
        original = original_discriminator_file(file, TINY)
    api = HfApi(endpoint=hub.endpoint, token=TOKEN)
    api.create_repo(MMS_RELEASE, exist_ok=True)
    api.upload_file(path_or_fileobj=str(file), path_in_repo=release_file(lang), repo_id=MMS_RELEASE)
    return original


def mms_stand_in(folder: Path) -> Path:
    """A tiny VITS voice saved as ``.../mms-tts-fin``, the way an MMS voice attached to a session is named."""
    path = folder / "mms-tts-fin"
    VitsModel(VitsConfig(**TINY_MODEL, vocab_size=len(FALLBACK_VOCAB))).save_pretrained(path)
    return path


def assert_same(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor]) -> None:
    assert sorted(got) == sorted(want)
    for key in want:
        assert torch.equal(got[key], want[key]), key


def start(cache: Path, init: str = "facebook/mms-tts-fin", setting: str = "auto", **options):
    warnings: list[str] = []
    discriminator, source = starting_discriminator(setting, init, TINY, cache_dir=cache, log=lambda _: None,
                                                   warn=warnings.append, **options)
    return discriminator, source, warnings


class Exploit:
    """A pickle that makes a folder when unpickled: what a booby-trapped D_100000.pth could do instead."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.makedirs, (str(self.marker),)


@pytest.mark.slow
def test_an_mms_fine_tune_starts_with_the_released_discriminator_and_resumes_without_fetching_it(tmp_path, hub_env):
    original = release(hub_env, tmp_path)
    config = tiny_config(tmp_path, init=str(mms_stand_in(tmp_path)), model={}, discriminator="auto", max_steps=1,
                         eval_every=0, lr=0.0, **TRAINING_ONLY)  # lr 0: the checkpoint holds the weights the run started with
    store = tmp_path / "store"
    summary = train(config, store=store, **QUIET)
    assert summary.warnings == []
    assert_same(load_file(checkpoint.latest_complete(store) / "discriminator.safetensors"), converted(original))
    downloads = [r for r in hub_env.requests if r.method == "GET" and r.path.endswith(release_file("fin"))]
    assert len(downloads) == 1
    cached = cached_file(store / "cache", "fin")
    assert_same(load_file(cached), converted(original))
    assert [p.name for p in cached.parent.iterdir()] == [cached.name]  # the original, optimizer state and all, is not kept

    hub_env.stop()
    cached.unlink()
    summary = train(config, store=store, max_steps=2, **QUIET)  # resumes: the checkpoint's discriminator, nothing fetched
    assert summary.end_step == 2 and summary.warnings == [] and not cached.exists()


@pytest.mark.slow
def test_a_release_that_runs_code_when_unpickled_is_refused_and_the_session_starts_fresh(tmp_path, hub_env):
    marker = tmp_path / "the-pickle-ran"
    trapped = tmp_path / "trapped" / "D_100000.pth"
    original = original_discriminator_file(trapped, TINY)
    torch.save({"model": original.state_dict(), "iteration": Exploit(marker)}, trapped)
    release(hub_env, tmp_path, file=trapped)
    config = tiny_config(tmp_path, init=str(mms_stand_in(tmp_path)), model={}, discriminator="auto", max_steps=1,
                         eval_every=0, lr=0.0, **TRAINING_ONLY)
    summary = train(config, store=tmp_path / "store", **QUIET)

    assert not marker.exists()
    [warning] = summary.warnings
    assert "weights_only" in warning and "starts with a fresh one" in warning and release_file("fin") in warning
    fresh = load_file(checkpoint.latest_complete(tmp_path / "store") / "discriminator.safetensors")
    assert not torch.equal(fresh["discriminators.0.conv_post.bias"], original.state_dict()["discriminators.0.conv_post.bias"])
    assert not cached_file(tmp_path / "store" / "cache", "fin").exists()
    torch.load(trapped, weights_only=False)  # the trap is real: a plain load runs it
    assert marker.is_dir()


@pytest.mark.slow
def test_a_session_whose_cached_release_is_damaged_warns_once_drops_it_and_trains_from_a_fresh_discriminator(tmp_path):
    original = original_discriminator_file(tmp_path / "D_100000.pth", TINY)
    store = tmp_path / "store"
    cached = cached_file(store / "cache", "fin")
    cached.parent.mkdir(parents=True)
    save_file(converted(original), str(cached))
    cached.write_bytes(cached.read_bytes()[:-100])  # cut short: a disk that filled up, a copy that was stopped
    config = tiny_config(tmp_path, init=str(mms_stand_in(tmp_path)), model={}, discriminator="auto", max_steps=1,
                         eval_every=0, lr=0.0, **TRAINING_ONLY)  # lr 0: the checkpoint holds the weights the run started with
    summary = train(config, store=store, **QUIET)  # no Hub: the damaged copy is all there is

    assert summary.state == "finished" and summary.end_step == 1
    [warning] = summary.warnings
    assert str(cached) in warning and "starts with a fresh one" in warning
    assert not cached.exists()
    started = load_file(checkpoint.latest_complete(store) / "discriminator.safetensors")
    assert not torch.equal(started["discriminators.0.conv_post.bias"], original.state_dict()["discriminators.0.conv_post.bias"])
    summary = train(config, store=store, max_steps=2, **QUIET)  # resumes: the checkpoint's discriminator, no warning again
    assert summary.end_step == 2 and summary.warnings == []


def test_the_converted_release_is_kept_in_the_runs_cache_and_read_without_the_hub(tmp_path, hub_env):
    original = release(hub_env, tmp_path)
    discriminator, source, warnings = start(tmp_path / "cache")
    assert warnings == [] and source == f"{MMS_RELEASE}/full_models/fin/D_100000.pth"
    assert_same(discriminator.state_dict(), converted(original))
    hub_env.stop()
    again, _, warnings = start(tmp_path / "cache")
    assert warnings == []
    assert_same(again.state_dict(), converted(original))


def test_without_the_hub_the_run_starts_fresh_and_says_why(tmp_path, monkeypatch):
    torch.manual_seed(0)
    fresh, _, _ = start(tmp_path / "fresh", setting="")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens on the discard port
    torch.manual_seed(0)
    discriminator, source, [warning] = start(tmp_path / "cache")
    assert source == "fresh" and "could not be reached" in warning and "127.0.0.1:9" in warning
    assert "discriminator: PATH" in warning and release_file("fin") in warning
    assert_same(discriminator.state_dict(), fresh.state_dict())  # the very one discriminator: "" starts with
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _, _, [warning] = start(tmp_path / "cache")
    assert "offline" in warning and "discriminator: PATH" in warning


def test_a_language_without_a_released_discriminator_starts_fresh_and_says_so(tmp_path, hub_env):
    release(hub_env, tmp_path, lang="fin")
    _, source, [warning] = start(tmp_path / "cache", init="facebook/mms-tts-smn")
    assert source == "fresh" and "has no full_models/smn/D_100000.pth" in warning


def test_a_release_that_does_not_fit_discriminator_config_starts_fresh_and_says_why(tmp_path, hub_env):
    release(hub_env, tmp_path)
    warnings: list[str] = []
    _, source = starting_discriminator("auto", "facebook/mms-tts-fin", DiscriminatorConfig(), cache_dir=tmp_path,
                                       log=lambda _: None, warn=warnings.append)
    assert source == "fresh" and "does not match a VITS discriminator" in warnings[0] and "missing keys" in warnings[0]


def test_other_inits_start_fresh_without_a_fetch_or_a_warning(tmp_path, hub_env):
    release(hub_env, tmp_path)
    for init in ("scratch", "me/my-finnish-voice", str(tmp_path / "my-voice")):
        _, source, warnings = start(tmp_path / "cache", init=init)
        assert source == "fresh" and warnings == []
    _, source, warnings = start(tmp_path / "cache", fetch=False)  # a process other than the main one
    assert source == "fresh" and warnings == []
    assert not any(r.path.endswith(".pth") for r in hub_env.requests)


def test_a_named_file_loads_or_stops_the_run(tmp_path):
    original = original_discriminator_file(tmp_path / "D_100000.pth", TINY)
    discriminator, source, _ = start(tmp_path, setting=str(tmp_path / "D_100000.pth"))
    assert source == str(tmp_path / "D_100000.pth")
    assert_same(discriminator.state_dict(), converted(original))
    with pytest.raises(UsageError, match="missing.pth does not exist"):
        start(tmp_path, setting=str(tmp_path / "missing.pth"))
    trapped = tmp_path / "trapped.pth"
    torch.save({"model": {}, "x": Exploit(tmp_path / "ran")}, trapped)
    with pytest.raises(UsageError, match=r"trapped\.pth: refused: .*weights_only=True"):
        start(tmp_path, setting=str(trapped))
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize("init, lang", [
    ("facebook/mms-tts-fin", "fin"), ("facebook/mms-tts-uig-script_arabic", "uig-script_arabic"),
    ("/kaggle/input/mms-tts-fin/", "fin"), ("scratch", None), ("facebook/mms-tts", None), ("me/mms-tts-fin-tuned", None),
])
def test_the_mms_language_comes_from_the_init_name(init, lang):
    assert mms_language(init) == lang


def test_the_setting_is_checked_when_the_config_loads(tmp_path):
    for good in ("auto", "", "/kaggle/input/mms-d/D_100000.pth", "weights.safetensors"):
        assert load_config(tiny_config(tmp_path, discriminator=good)).task.discriminator == good
    with pytest.raises(ConfigError, match=r"discriminator: 'mms' is not one of: auto"):
        load_config(tiny_config(tmp_path, discriminator="mms"))


@pytest.mark.parametrize("content, why", [
    ({"model": {"discriminators.0.conv_post.bias": 1.0}}, "values that are not tensors"),
    (None, "not a readable torch checkpoint"),  # an empty file
], ids=["values-not-tensors", "empty-file"])
def test_a_release_that_is_no_discriminator_starts_fresh_and_says_why(tmp_path, hub_env, content, why):
    file = tmp_path / "odd" / "D_100000.pth"
    file.parent.mkdir()
    if content is None:
        file.write_bytes(b"")
    else:
        torch.save(content, file)
    release(hub_env, tmp_path, file=file)
    _, source, [warning] = start(tmp_path / "cache")
    assert source == "fresh" and why in warning and "starts with a fresh one" in warning


def test_the_fetch_is_pinned_checked_and_leaves_no_partial_download(tmp_path, hub_env):
    original = release(hub_env, tmp_path)
    leftover = cached_file(tmp_path / "cache", "fin").parent / ".download-killed"
    leftover.mkdir(parents=True)
    (leftover / "D_100000.pth.incomplete").write_bytes(b"half of it")  # a session killed mid-download
    discriminator, _, warnings = start(tmp_path / "cache")
    assert warnings == []
    assert_same(discriminator.state_dict(), converted(original))
    assert [p.name for p in leftover.parent.iterdir()] == [cached_file(tmp_path / "cache", "fin").name]
    head = HfApi(endpoint=hub_env.endpoint, token=TOKEN).model_info(MMS_RELEASE).sha
    downloads = [r.path for r in hub_env.requests if r.method == "GET" and r.path.endswith(release_file("fin"))]
    assert downloads and all(f"/resolve/{head}/" in path for path in downloads), downloads  # the commit looked up, not main


def test_a_release_download_that_trickles_is_given_up_and_the_run_starts_fresh(tmp_path, hub_env, monkeypatch):
    from fintts.tts.vits import mms_discriminator

    release(hub_env, tmp_path)
    monkeypatch.setattr(mms_discriminator, "FETCH_SECONDS", 3.0)  # 5 min as shipped
    hub_env.stall(30, path=r"/resolve/.*D_100000\.pth", times=10)
    started = time.monotonic()
    _, source, [warning] = start(tmp_path / "cache")
    assert time.monotonic() - started < 10
    assert source == "fresh" and "took more than 3 s" in warning, warning


def damaged_release(good: bytes, state: dict[str, torch.Tensor], rng: random.Random, number: int) -> bytes:
    """The bytes of a ``D_100000.pth`` gone wrong in the ``number % 3``-th way: cut short; bytes overwritten (in the
    pickle at the front, the zip's directory at the end, or anywhere); or a whole file of the wrong tensors."""
    if number % 3 == 0:
        return good[: rng.randrange(len(good))]
    if number % 3 == 1:
        damaged = bytearray(good)
        where = rng.choice([(0, min(len(good), 6000)), (max(0, len(good) - 4000), len(good)), (0, len(good))])
        for _ in range(rng.randint(1, 6)):
            damaged[rng.randrange(*where)] = rng.randrange(256)
        return bytes(damaged)
    model: dict = dict(state)
    key = rng.choice(sorted(model))
    wrong = rng.randrange(9)
    if wrong == 0:
        model[key] = torch.zeros(())
    elif wrong == 1:
        model[key] = torch.ones(model[key].shape, dtype=torch.bool)
    elif wrong == 2:
        model[key] = model[key].to(torch.int64)
    elif wrong == 3:
        model[key] = torch.full(model[key].shape, float("nan"))
    elif wrong == 4:
        model[key] = model[key].flatten()
    elif wrong == 5:
        model[key] = torch.zeros(0)
    elif wrong == 6:
        model[len(model)] = model.pop(key)  # a key that is no name
    elif wrong == 7:
        del model[key]
    else:
        model[key] = {"nested": model[key]}
    buffer = io.BytesIO()
    torch.save({"model": model, "iteration": 100_000}, buffer)
    return buffer.getvalue()


def test_damaged_release_files_are_read_or_refused_with_a_usage_error_never_another(tmp_path):
    """300 damaged D_100000.pth files (seeded): each is read whole or refused naming the file, which is what
    discriminator: auto turns into a warning and a fresh discriminator; no other error ends the session."""
    original = original_discriminator_file(tmp_path / "D_100000.pth", TINY)
    good, state = (tmp_path / "D_100000.pth").read_bytes(), original.state_dict()
    discriminator = VitsDiscriminator(TINY)
    expected = {key: value.shape for key, value in discriminator.state_dict().items()}
    rng = random.Random(52)
    refused = 0
    for number in range(300):
        file = tmp_path / f"damaged-{number}.pth"
        file.write_bytes(damaged_release(good, state, rng, number))
        try:
            weights = read_mms_discriminator(file, discriminator)
        except UsageError as err:
            assert str(err).startswith(str(file)), err
            refused += 1
            continue
        assert {key: value.shape for key, value in weights.items()} == expected  # a flip inside a tensor's own bytes
        assert all(bool(torch.isfinite(value).all()) for value in weights.values())
    assert refused > 200  # the damage was mostly of the kind that shows


def test_a_cached_release_that_cannot_be_read_is_warned_about_once_dropped_and_a_fresh_one_starts(tmp_path):
    """The converted copy in the run's cache, cut short or overwritten: the session starts fresh, says so, and deletes it."""
    torch.manual_seed(0)
    fresh, _, _ = start(tmp_path / "fresh", setting="")
    cached = cached_file(tmp_path / "cache", "fin")
    cached.parent.mkdir(parents=True)
    save_file(converted(original_discriminator_file(tmp_path / "D_100000.pth", TINY)), str(cached))
    good = cached.read_bytes()
    header = 8 + int.from_bytes(good[:8], "little")  # safetensors: its length, then the JSON that places each tensor
    rng = random.Random(52)
    refused = 0
    for number in range(60):
        damaged = bytearray(good[: rng.randrange(len(good))] if number % 2 else good)
        if number % 2 == 0:  # in the header: a copy damaged inside a tensor's own bytes still reads
            for _ in range(rng.randint(1, 6)):
                damaged[rng.randrange(header)] = rng.randrange(256)
        cached.write_bytes(bytes(damaged))
        torch.manual_seed(0)
        discriminator, source, warnings = start(tmp_path / "cache", fetch=False)  # no Hub: the cache alone
        if source == "fresh":
            [warning] = warnings
            assert str(cached) in warning and "starts with a fresh one" in warning
            assert not cached.exists()
            assert_same(discriminator.state_dict(), fresh.state_dict())
            refused += 1
        else:
            assert warnings == [] and cached.exists()
    assert refused > 40
