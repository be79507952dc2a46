"""``discriminator: auto``: an MMS fine-tune starts from MMS's released discriminator, fetched from the (local) Hub."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import torch
from huggingface_hub import HfApi
from safetensors.torch import load_file
from transformers import VitsConfig, VitsModel

from fintts.errors import ConfigError, UsageError
from fintts.train import train
from fintts.train.config import load_config
from fintts.train.run import checkpoint
from fintts.tts.text import FALLBACK_VOCAB
from fintts.tts.vits.discriminator import DiscriminatorConfig
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
