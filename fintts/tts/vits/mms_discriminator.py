"""Where a fine-tune's discriminator starts: MMS's own (``discriminator: auto``), a file, or fresh.

transformers publishes only the MMS generators (``facebook/mms-tts-<lang>``). Meta's original
training checkpoints are in one Hub repo, ``facebook/mms-tts``: per language
``full_models/<lang>/G_100000.pth`` and ``D_100000.pth``, the original VITS discriminator
(a torch pickle: ``{"model": state dict, "optimizer": ..., "iteration": ..., "learning_rate": ...}``;
46.7 M parameters, about 190 MB as float32, and the optimizer's state besides). finetune-hf-vits starts its fine-tunes from it: the
discriminator already tells that language's real speech from MMS's synthesis, so the
generator's adversarial and feature-matching gradients mean something from the first step,
where a fresh one spends the first thousands of steps learning what speech is.

``auto`` with an MMS ``init`` (``facebook/mms-tts-fin``, or a local copy whose folder is named
``mms-tts-fin``) fetches that file once per run (:func:`fetch_release`: through fintts's bounded Hub
client, pinned to one commit, checked against the Hub's checksum), converts it (:func:`read_mms_discriminator`:
``torch.load(weights_only=True)``, so no code a pickle names runs) and keeps the converted
weights as ``cache/discriminators/mms-tts-<lang>-D_100000.safetensors`` in the run's folder;
the downloaded original is deleted. Any other ``init`` has no released discriminator that
matches it, and starts a fresh one. When the file cannot be had (an offline session, no Hub,
no such file, a fetch too slow, a checksum that differs, a file ``weights_only`` refuses, a damaged or empty file
or one whose values are not finite float tensors, shapes that do not fit ``discriminator_config``, a cached copy
that cannot be read) training starts with a fresh discriminator, the session's warnings (its summary,
``status.json``) say why and what to do, and a cached copy that could not be read is deleted. A session
that resumes from a checkpoint, or a phase that starts from the previous phase's weights, fetches
nothing: those weights replace whatever is built.

With several processes only the main one fetches; the others read the converted file when the
cache has it and otherwise build a fresh one, which DDP replaces with the main process's weights
when it wraps the model (it broadcasts rank 0's parameters), so every process starts alike.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from huggingface_hub import constants
from safetensors.torch import load_model, save_file

from fintts.errors import StoreError, UsageError
from fintts.tts.vits.discriminator import DiscriminatorConfig, VitsDiscriminator, read_mms_discriminator
from fintts.tts.vits.settings import AUTO

#: Meta's repo of the original MMS-TTS training checkpoints
MMS_RELEASE = "facebook/mms-tts"
#: the training step of every released MMS checkpoint
MMS_STEP = 100_000
#: seconds the whole fetch of a release may take (190 MB at 0.7 MB/s); a Hub that trickles costs this, then a fresh one
FETCH_SECONDS = 300.0
#: seconds any one request of the fetch may take
REQUEST_SECONDS = 30.0
#: converted discriminators, under the run's cache folder
CACHE_SUBDIR = "discriminators"

_MMS_NAME = re.compile(r"^mms-tts-(?P<lang>[a-z]{3}(?:-script_[a-z]+)?)$")


def mms_language(init: str) -> str | None:
    """The MMS language of ``init`` (``facebook/mms-tts-fin`` → ``fin``); ``None`` when it is not an MMS voice.

    A local folder counts by its name (``/kaggle/input/mms-tts-fin``): a copy of the MMS voice
    attached to an offline session keeps it. The language is the repo's suffix, script included
    (``mms-tts-uig-script_arabic``), as the release's folders are named.
    """
    name = str(init).rstrip("/").rsplit("/", 1)[-1]
    match = _MMS_NAME.match(name)
    return match["lang"] if match else None


def release_file(lang: str) -> str:
    """The discriminator of ``lang`` in :data:`MMS_RELEASE`."""
    return f"full_models/{lang}/D_{MMS_STEP}.pth"


def cached_file(cache_dir: Path, lang: str) -> Path:
    return Path(cache_dir) / CACHE_SUBDIR / f"mms-tts-{lang}-D_{MMS_STEP}.safetensors"


class Unavailable(Exception):
    """The pretrained discriminator cannot be had; the message says why and what to do."""


def starting_discriminator(
    setting: str,
    init: str,
    config: DiscriminatorConfig,
    *,
    cache_dir: Path,
    init_checkpoint: Path | None = None,
    replaced: bool = False,
    fetch: bool = True,
    log: Callable[[str], None] = print,
    warn: Callable[[str], None] = print,
) -> tuple[VitsDiscriminator, str | None]:
    """The discriminator a run starts with, and where its weights came from (``fresh``, a file, the release).

    ``setting`` is the config's ``discriminator``: ``auto`` (see the module's docstring), a file
    (an original ``D_*.pth`` or converted ``.safetensors``: an error when it cannot be loaded, since
    it was asked for by name) or empty (fresh). With ``init`` a fintts checkpoint
    (``init_checkpoint``), its own discriminator wins over ``auto`` and empty. ``replaced``: weights
    replace the discriminator once built (a resumed checkpoint's, the previous phase's), so
    nothing is read or fetched and the source is ``None``. ``fetch=False`` (a process other than
    the main one) never downloads. Weights that are wanted but cannot be had are said through ``warn``.
    """
    discriminator = VitsDiscriminator(config)
    if replaced:
        return discriminator, None
    own = init_checkpoint / "discriminator.safetensors" if init_checkpoint is not None else None
    if own is not None and own.is_file() and setting in ("", AUTO):
        load_weights_file(discriminator, own)
        return discriminator, str(own)
    if not setting:
        return discriminator, "fresh"
    if setting != AUTO:
        load_weights_file(discriminator, Path(setting).expanduser())
        return discriminator, setting
    lang = mms_language(init)
    if lang is None:
        if init != "scratch":
            log(f"discriminator: auto starts a fresh one: init {init!r} is not an MMS voice (facebook/mms-tts-LANG), "
                "the only ones with a released discriminator")
        return discriminator, "fresh"
    source = f"{MMS_RELEASE}/{release_file(lang)}"
    cached = cached_file(cache_dir, lang)
    fresh = {key: value.clone() for key, value in discriminator.state_dict().items()}
    try:
        if not cached.is_file():
            if not fetch:
                return discriminator, "fresh"  # DDP gives this process the main one's weights
            fetch_release(lang, discriminator, cached, log=log)
        load_weights_file(discriminator, cached)
    except (Unavailable, UsageError) as err:
        discriminator.load_state_dict(fresh)  # exactly the one discriminator: "" starts with, whatever a failed load left
        # a cached copy that cannot be read (cut short, damaged, converted for another discriminator_config) goes, so
        # this session's warning is the only one: the next session that needs it fetches it again
        cached.unlink(missing_ok=True)
        if isinstance(err, Unavailable):
            advice = (f"To use it, download {release_file(lang)} from https://huggingface.co/{MMS_RELEASE} where there is "
                      "network (on Kaggle: attach it as a dataset) and set discriminator: PATH")
        else:
            advice = 'The file was not used; discriminator: "" starts a fresh one without this warning'
        warn(
            "discriminator: auto could not start from MMS's pretrained discriminator, so training starts with a fresh one, "
            f"whose first thousands of steps give the generator meaningless adversarial gradients: {err}. {advice}"
        )
        return discriminator, "fresh"
    log(f"discriminator: MMS's pretrained one ({source}, converted: {cached})")
    return discriminator, source


def load_weights_file(discriminator: VitsDiscriminator, path: Path) -> None:
    """Load converted weights (``.safetensors``) or an original checkpoint into ``discriminator``; a clear error otherwise."""
    if not path.is_file():
        raise UsageError(f"discriminator: {path} does not exist")
    if path.suffix.lower() != ".safetensors":
        discriminator.load_state_dict(read_mms_discriminator(path, discriminator))
        return
    try:
        load_model(discriminator, str(path), strict=True)
    except Exception as err:  # safetensors' header errors and strict-load mismatches alike
        raise UsageError(f"{path}: does not fit a discriminator with {discriminator.config} "
                         f"({str(err).strip().splitlines()[-1].strip()})") from None


def offline() -> bool:
    """``HF_HUB_OFFLINE``, read now as well as when huggingface_hub was imported (a notebook may set it later)."""
    return constants.is_offline_mode() or os.environ.get("HF_HUB_OFFLINE", "").upper() in {"1", "ON", "YES", "TRUE"}


def fetch_release(lang: str, discriminator: VitsDiscriminator, out: Path, *, log: Callable[[str], None] = print) -> None:
    """Download ``lang``'s released discriminator, convert it for ``discriminator`` and write it to ``out``.

    Through fintts's Hub client (:class:`~fintts.train.stores.hub.HubClient`: every request bounded, and none
    sent after :data:`FETCH_SECONDS`), pinned to the release's commit as it is looked up, so the file is the one
    that commit lists, and checked against the checksum the Hub lists for it (the LFS sha256, or the git blob's
    sha1 for a small file): a file changed, cut short or corrupted on the way is refused. The whole download
    gets :data:`FETCH_SECONDS`: a Hub that trickles costs the session that long, not its start. The original
    goes to a ``.download-*`` folder beside ``out`` and is deleted once converted (a killed session's is
    removed by the next fetch); ``out`` appears whole (written, then renamed).

    Raises:
        Unavailable: offline, unreachable, too slow, no such file, or a file that fails its checksum.
        UsageError: the file is refused by ``weights_only`` or does not fit ``discriminator``.
    """
    from fintts.train.stores.hub import HubClient  # lazy: the Hub's client is only needed for a fetch

    filename = release_file(lang)
    if offline():
        raise Unavailable(f"the session is offline (HF_HUB_OFFLINE), so {MMS_RELEASE}/{filename} cannot be fetched")
    endpoint = os.environ.get("HF_ENDPOINT") or None  # read now: huggingface_hub read it once, at import
    client = HubClient.connect(MMS_RELEASE, endpoint=endpoint, timeout=REQUEST_SECONDS, anonymous_ok=True)
    client.deadline = time.time() + FETCH_SECONDS
    try:
        revision = client.head()  # the release's commit: the listing and the download are of this one
        listed = client.files(revision).get(filename)
    except Exception as err:  # httpx's connection errors and the Hub's HTTP errors alike: said token-free, then the fallback
        reason = err if isinstance(err, StoreError) else client.failure(err)
        raise Unavailable(f"{endpoint or constants.ENDPOINT} could not be reached for {MMS_RELEASE}/{filename} ({reason})") from None
    if listed is None:
        raise Unavailable(f"{MMS_RELEASE} has no {filename} (at its commit {revision[:12]})")
    size = f"{listed.size / 1e6:.0f} MB" if listed.size else "size unknown"
    log(f"discriminator: fetching {MMS_RELEASE}/{filename} ({size}, commit {revision[:12]}) once for this run")
    out.parent.mkdir(parents=True, exist_ok=True)
    for leftover in out.parent.glob(".download-*"):  # a killed session's (the run's folder is this session's alone)
        shutil.rmtree(leftover, ignore_errors=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=".download-") as folder:
        original = Path(folder) / filename
        _bounded_download(client, filename, revision, Path(folder))
        _check(original, listed, f"{MMS_RELEASE}/{filename} at {revision[:12]}")
        state = read_mms_discriminator(original, discriminator)
        partial = Path(folder) / out.name
        save_file(state, str(partial), metadata={"source": f"{MMS_RELEASE}/{filename}", "revision": revision})
        os.replace(partial, out)


def _bounded_download(client, filename: str, revision: str, folder: Path) -> None:
    """``client.download`` on a thread of its own, given up at the client's deadline: a download that keeps trickling
    never trips a per-request bound (the thread is a daemon; what it still writes goes with its folder)."""
    failure: list[BaseException] = []

    def fetch() -> None:
        try:
            client.download([filename], revision, folder)
        except BaseException as err:  # handed to the caller's thread
            failure.append(err)

    worker = threading.Thread(target=fetch, name="fintts-fetch-discriminator", daemon=True)
    worker.start()
    worker.join(max(0.0, client.deadline - time.time()))
    if worker.is_alive():
        raise Unavailable(f"the download of {MMS_RELEASE}/{filename} took more than {FETCH_SECONDS:.0f} s")
    if failure:
        err = failure[0]
        reason = err if isinstance(err, StoreError) else client.failure(err)
        raise Unavailable(f"the download of {MMS_RELEASE}/{filename} failed ({reason})") from None


def _check(path: Path, listed, what: str) -> None:
    """The file is the one the Hub lists: its LFS sha256, or (a file stored in git) its blob's sha1 (``git hash-object``)."""
    lfs = getattr(listed, "lfs", None)
    expected = getattr(lfs, "sha256", None) if lfs is not None else None
    data = path.read_bytes()
    if expected:
        got = hashlib.sha256(data).hexdigest()
    else:
        expected = getattr(listed, "blob_id", None)
        got = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    if not expected:
        raise Unavailable(f"the Hub lists no checksum for {what}, so the download cannot be checked")
    if got != expected:
        raise Unavailable(f"{what}: the download does not match the checksum the Hub lists ({got[:12]} != {expected[:12]}); "
                          "it was not used")
