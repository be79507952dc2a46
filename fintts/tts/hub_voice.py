"""A voice from a fintts Hub repo onto a laptop: its ``model/`` folder, with no torch installed.

A fintts run's Hub repo holds checkpoints and the voice; a laptop wants only the voice.
:func:`download_voice` fetches ``model/`` through ``huggingface_hub``'s own cache (so a
second call, or a call with no network, uses the copy already there: offline once
pulled); :func:`pull_voice` (``fintts pull``) writes it into a folder of the person's
choosing, and the voice's family adds what the run did not ship (a VITS voice: ``model.onnx`` and the Piper voice). A repo
with no ``model/`` whose root is a voice (what ``fintts publish`` writes, or any transformers VITS repo) is taken from its
root: the voice's own files, by name, never the whole repo.

Only what loads without running code is downloaded: safetensors, JSON, ONNX, text, and the pickled
files the voice's family names as read only with ``torch.load(weights_only=True)`` (a Chatterbox
voice's ``conds.pt``, ``ve.pt`` and ``s3gen.pt``: :attr:`fintts.tts.family.Family.weights_only_files`).
Any other ``pytorch_model.bin`` (or pickled file) in the repo is left there, since unpickling can run
code; a VITS voice with no ``model.safetensors`` is refused.

The token is ``huggingface_hub``'s: ``$HF_TOKEN`` or the cached ``hf auth login``, only
needed for a private repo; it is never printed.
"""

from __future__ import annotations

import logging
from pathlib import Path

from fintts.tts.families import voice_in
from fintts.tts.voice_format import VOICE_DIR, WEIGHTS_FILE, VoiceError, is_vits_voice

log = logging.getLogger(__name__)

#: The voice's weights, the only form they are taken from the Hub in.
#: Pickled files (PyTorch's own formats among them): never downloaded.
PICKLED = ("*.bin", "*.pt", "*.pth", "*.pkl", "*.pickle", "*.ckpt")
#: A voice at a repo's root: these names there (a pattern without ``/`` in it matches any depth: only exact names and the
#: graphs, which a run's checkpoints never hold).
ROOT_VOICE = ("config.json", WEIGHTS_FILE, "vocab.json", "tokenizer_config.json", "added_tokens.json", "special_tokens_map.json",
              "speakers.json", "README.md", "*.onnx", "*.onnx.json")


def download_voice(repo_id: str, out_dir: str | Path | None = None, *, endpoint: str | None = None,
                   token: str | None = None) -> Path:
    """``model/`` of the Hub run ``repo_id``: into ``out_dir``, or the Hugging Face cache; returns that folder."""
    # huggingface_hub's client takes 0.15 s to import: `fintts say` with a local voice does without it
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, LocalEntryNotFoundError, RepositoryNotFoundError

    def fetch(patterns: list[str], pickled: bool = False) -> Path:
        # a published voice of several speakers keeps them all in all-speakers/ (fintts publish): the root's one is enough
        ignored = [*([] if pickled else PICKLED), "all-speakers/*"]
        return Path(snapshot_download(repo_id, allow_patterns=patterns, ignore_patterns=ignored, local_dir=out_dir,
                                      endpoint=endpoint, token=token, library_name="fintts"))

    try:
        root = fetch([f"{VOICE_DIR}/*"])
        folder = root / VOICE_DIR
        if not (folder.is_dir() and any(folder.iterdir())) and (fetch(list(ROOT_VOICE)) / "config.json").is_file():
            folder = root  # a published voice: the repo is the voice
        found = voice_in(folder)
        if found is not None and found[0] == folder and found[1].weights_only_files:
            where = "" if folder == root else f"{VOICE_DIR}/"
            fetch([where + name for name in found[1].weights_only_files], pickled=True)
    except (RepositoryNotFoundError, GatedRepoError):
        raise VoiceError(f"Hub repo {repo_id} not found, or it is private and this machine is not logged in: check the "
                         "name (user/name), then log in with `hf auth login` or set HF_TOKEN to a read token") from None
    except LocalEntryNotFoundError:
        raise VoiceError(f"cannot reach the Hub to download {repo_id}, and it is not downloaded yet: connect once, "
                         "then it works offline") from None
    except HfHubHTTPError as err:
        status = getattr(getattr(err, "response", None), "status_code", "?")
        raise VoiceError(f"the Hub refused to send {repo_id} (HTTP {status}); try again later") from None
    if not (folder.is_dir() and any(folder.iterdir())):
        raise VoiceError(f"{repo_id} has no {VOICE_DIR}/ yet: the run has not exported a voice; pull a checkpoint "
                         "instead (fintts pull --checkpoint latest) or wait for the next push")
    if is_vits_voice(folder) and not (folder / WEIGHTS_FILE).is_file():
        where = "root" if folder == root else f"{VOICE_DIR}/"
        raise VoiceError(f"{repo_id}'s {where} has no {WEIGHTS_FILE}: fintts takes a voice's weights from the Hub only "
                         "as safetensors (a pytorch_model.bin or other pickled file can run code when it is loaded, so it "
                         "is not downloaded); export the voice again with fintts, or ask its owner to")
    return folder


def pull_voice(repo_id: str, out_dir: str | Path, *, onnx: bool = True, endpoint: str | None = None,
               token: str | None = None) -> Path:
    """``fintts pull``: ``out_dir/model`` from the Hub, with what its family adds to a pulled voice.

    Any task's ``model/`` is pulled as it is; its family (:mod:`fintts.tts.families`) may then make what the run did
    not ship (a VITS voice its ONNX graphs and Piper voice, where torch is installed, or says how).
    """
    folder = download_voice(repo_id, out_dir, endpoint=endpoint, token=token)
    found = voice_in(folder)
    if onnx and found is not None and found[0] == folder and found[1].pulled is not None:
        found[1].pulled(folder, repo_id)
    return folder


def is_public(repo_id: str, *, endpoint: str | None = None) -> bool:
    """Whether ``repo_id`` can be read without a token (so a notebook need not ask for one)."""
    from huggingface_hub import HfApi  # 0.15 s to import: only when asked (see download_voice)
    from huggingface_hub.errors import HfHubHTTPError

    try:
        HfApi(endpoint=endpoint, token=False).model_info(repo_id)
    except HfHubHTTPError as err:  # RepositoryNotFoundError and GatedRepoError are ones too
        if getattr(getattr(err, "response", None), "status_code", None) in (401, 403, 404):
            return False
        raise
    return True
