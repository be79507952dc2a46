"""Which ``chatterbox`` package speaks a Chatterbox voice: two distributions publish the import name, and only some
``from_local`` can be told the voice's T3 file. The package here is a stand-in for the third-party one, written into a
temporary folder; fintts's own code is what runs."""

from __future__ import annotations

import importlib
import json
import sys

import pytest
from huggingface_hub import CommitOperationAdd, HfApi

from fintts.tts.hub_voice import pull_voice
from fintts.tts.voice import load_voice
from fintts.tts.voice_format import VoiceError
from hub_helpers import TOKEN

T3_FILE = "t3_mtl23ls_v2.safetensors"


def chatterbox_package(root, *, distribution: str, version: str, t3_model: bool) -> None:
    """A ``chatterbox`` package whose ``from_local`` takes ``t3_model`` (chatterbox-light, upstream's master) or not
    (chatterbox-tts 0.1.7), installed as ``distribution`` ``version`` (a dist-info naming its import name)."""
    package = root / "chatterbox"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    keyword = ", t3_model=None" if t3_model else ""
    (package / "mtl_tts.py").write_text(
        "class ChatterboxMultilingualTTS:\n"
        "    sr = 24000\n"
        "    @classmethod\n"
        f"    def from_local(cls, ckpt_dir, device{keyword}):\n"
        "        made = cls()\n"
        f"        made.asked = (str(ckpt_dir), device{', t3_model' if t3_model else ''})\n"
        "        return made\n")
    info = root / f"{distribution.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n")
    (info / "top_level.txt").write_text("chatterbox\n")


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """Install a stand-in ``chatterbox`` for the test (on sys.path), and forget it afterwards.

    Forgotten before too: pytest puts ``tests/tts`` on sys.path, where ``chatterbox`` (this folder, without an
    ``__init__``) imports as a namespace package, and an earlier test on the same worker may have left it imported.
    """
    def forget():
        for name in [name for name in sys.modules if name == "chatterbox" or name.startswith("chatterbox.")]:
            del sys.modules[name]

    def install(**kwargs):
        chatterbox_package(tmp_path / "site", **kwargs)
        monkeypatch.syspath_prepend(str(tmp_path / "site"))
        importlib.invalidate_caches()
        forget()
    yield install
    forget()


@pytest.fixture
def voice_folder(tmp_path):
    """An exported folder as far as the loader reads it: the description and the release's frozen parts."""
    folder = tmp_path / "voice"
    folder.mkdir()
    (folder / "chatterbox.json").write_text(json.dumps({"t3_file": T3_FILE}))
    for name in ("ve.pt", "s3gen.pt"):
        (folder / name).write_bytes(b"")
    return folder


def test_a_package_whose_from_local_takes_t3_model_speaks_the_folders_t3(installed, voice_folder):
    installed(distribution="chatterbox-light", version="1.0.2", t3_model=True)
    voice = load_voice(voice_folder)
    assert voice.tts.asked == (str(voice_folder), "cpu", T3_FILE) and voice.sample_rate == 24000


def test_chatterbox_tts_0_1_7_is_named_with_what_to_install_instead(installed, voice_folder):
    installed(distribution="chatterbox-tts", version="0.1.7", t3_model=False)
    with pytest.raises(VoiceError) as caught:
        load_voice(voice_folder)
    said = str(caught.value)
    assert "chatterbox-tts 0.1.7" in said and "t3_model" in said and "pip install chatterbox-light" in said
    assert "\n" not in said


def test_fintts_pull_brings_the_pickled_parts_upstream_reads_weights_only_and_no_other_pickle(hub, tmp_path, monkeypatch):
    """A Chatterbox voice on the Hub: its conds.pt (the built-in voice), ve.pt and s3gen.pt, which upstream's from_local
    reads with torch.load(weights_only=True), come with ``fintts pull`` (without them the pulled voice cannot speak);
    any other pickled file in model/ stays on the Hub."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    files = {"chatterbox.json": json.dumps({"t3_file": T3_FILE}), T3_FILE: "T3", "grapheme_mtl_merged_expanded_v1.json": "{}",
             "README.md": "card", "conds.pt": "conds", "ve.pt": "ve", "s3gen.pt": "s3gen", "other.pt": "?",
             "pytorch_model.bin": "?"}
    api = HfApi(endpoint=hub.endpoint, token=TOKEN)
    api.create_repo("alice/cb-voice", private=True)
    api.create_commit("alice/cb-voice", [CommitOperationAdd(f"model/{name}", data.encode()) for name, data in files.items()],
                      commit_message="a run's push")
    folder = pull_voice("alice/cb-voice", tmp_path / "laptop", endpoint=hub.endpoint, token=TOKEN)
    assert folder == tmp_path / "laptop" / "model"
    assert {path.name: path.read_text() for path in folder.iterdir()} == {
        name: data for name, data in files.items() if name not in ("other.pt", "pytorch_model.bin")}
