"""``fintts kaggle corpus`` sends what the check used and names everything else it leaves out (issue 52, item 4).

The command itself runs against the local Kaggle (:class:`KaggleServer`) with the real ``kaggle``
client in a ``fintts`` process, on an LJSpeech corpus planted with secret-looking files. Every
layout's upload is then staged in-process (:func:`fintts.kaggle.corpus.stage`, what the command
hands the client), put into the stand-in as the uploaded version and mounted as a session mounts
it: it must read as the same corpus, every accepted clip in it, and hold nothing the check did not use.
"""

from __future__ import annotations

import io
import os
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from test_kaggle_cli import local_kaggle, run
from test_kaggle_setup import make_corpus

import corpus_sources as sources
from fintts.kaggle.corpus import plan, refusal, stage
from fintts.train.config import ConfigError
from fintts.tts.corpus import ReadOptions, check_corpus
from fintts.tts.corpus.data_names import DEMO_CORPUS
from fintts.tts.corpus.selection import read_heldout_files
from fintts_stand_ins.kaggle_server import KaggleServer

#: every test here starts a process (a fintts command, a server's session, espeak-ng or ffmpeg): not the unit tier
pytestmark = pytest.mark.process

#: what a careless corpus folder holds beside the corpus, not hidden, each with bytes of its own
PLANTED = ("token", "id_rsa", "id_ed25519", "credentials.json", "kaggle.json", "env", "secrets.yaml", "netrc",
           "notes.txt", "wavs/token", "wavs.zip", ".env", ".kaggle/kaggle.json")


@pytest.fixture
def kaggle_env(hub_env, tmp_path):
    """The local Kaggle (and Hub), and the env of a laptop using them (test_kaggle_cli's)."""
    yield from local_kaggle(hub_env, tmp_path, notebook_exists=False)


def secret(name: str) -> bytes:
    return f"SECRET-{name}-do-not-upload".encode()


def sent_bytes(version: dict[str, bytes]) -> bytes:
    """Every byte a dataset version holds, its zips' members included."""
    sent = b"".join(version.values())
    for name, data in version.items():
        if name.endswith(".zip"):
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                sent += b"".join(archive.read(member) for member in archive.namelist())
    return sent


def test_kaggle_corpus_sends_only_what_the_check_used_and_names_each_file_it_leaves_out(kaggle_env, tmp_path):
    kaggle, env, _ = kaggle_env
    corpus = make_corpus(tmp_path / "my-voice", 4, silent=1)
    silent = (corpus / "metadata.csv").read_text().splitlines()[4].split("|")[0]
    (corpus / "README.md").write_text("# my voice\nRecorded at home, CC BY 4.0.\n", encoding="utf-8")
    for name in PLANTED:
        (corpus / name).parent.mkdir(parents=True, exist_ok=True)
        if name == "wavs.zip":  # beside wavs/: it once overwrote the folder's zip, and the clips went missing
            with zipfile.ZipFile(corpus / name, "w") as archive:
                archive.writestr("token", secret(name))
        else:
            (corpus / name).write_bytes(secret(name))
    (tmp_path / "ssh").mkdir()
    (tmp_path / "ssh" / "id_rsa").write_bytes(secret("hard-linked"))
    os.link(tmp_path / "ssh" / "id_rsa", corpus / "wavs" / "voice.flac")  # a hard link to a secret, among the clips
    (corpus / "link.txt").symlink_to(tmp_path / "ssh" / "id_rsa")
    shutil.copy(corpus / "wavs" / f"{silent}.flac", corpus / "wavs" / "stray.flac")  # audio the table does not name
    result = run("-m", "fintts", "kaggle", "corpus", str(corpus), "--corpus", "alice/new-voice", "--no-progress", env=env,
                 cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr

    (version,) = kaggle.datasets["alice/new-voice"]
    assert set(version) == {"metadata.csv", "README.md", "wavs.zip"}
    assert b"SECRET" not in sent_bytes(version)
    with zipfile.ZipFile(io.BytesIO(version["wavs.zip"])) as archive:
        assert len(archive.namelist()) == 4 and all(name.endswith(".flac") for name in archive.namelist())
    left = {line.split(": ")[0].strip(): line.split(": ", 1)[1] for line in result.stdout.splitlines() if line.startswith("  ")
            and ": " in line}
    for name in [*PLANTED[:-2], "stray.flac"]:
        named = f"wavs/{name}" if name == "stray.flac" else name
        assert left.get(named) == "not a file the check used", (named, result.stdout)
    assert left[".env"] == "not a file the check used" and left[".kaggle/"].startswith("a folder of 1 file(s), none")
    assert left["wavs/voice.flac"].startswith("not a file the check used, and a hard link (its bytes have 2 names")
    assert left["link.txt"] == "a symbolic link: never followed"
    assert left[f"wavs/{silent}.flac"].startswith("a clip the check rejected")
    assert "4 clip(s), all that the check accepted" in result.stdout and "private: only you" in result.stdout
    mounted = kaggle.mount("alice/new-voice", tmp_path / "input")
    assert "Good clips: 4" in run("-m", "fintts", "check", str(mounted), "--no-progress", env=env, cwd=tmp_path).stdout

    # a clip that is a hard link goes up only when asked for: the session needs it, so nothing goes up without it
    os.unlink(corpus / "wavs" / "voice.flac")
    clip = corpus / "wavs" / "espeak_f2_0001.flac"
    os.link(clip, tmp_path / "another-name.flac")
    refused = run("-m", "fintts", "kaggle", "corpus", str(corpus), "--corpus", "alice/new-voice", "--no-progress", env=env,
                  cwd=tmp_path)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "wavs/espeak_f2_0001.flac: a hard link" in refused.stdout and "--allow-hard-links" in refused.stderr
    assert "nothing was uploaded" in refused.stderr and len(kaggle.datasets["alice/new-voice"]) == 1
    asked = run("-m", "fintts", "kaggle", "corpus", str(corpus), "--corpus", "alice/new-voice", "--no-progress",
                "--allow-hard-links", env=env, cwd=tmp_path)
    assert asked.returncode == 0, asked.stdout + asked.stderr
    with zipfile.ZipFile(io.BytesIO(kaggle.datasets["alice/new-voice"][1]["wavs.zip"])) as archive:
        assert "espeak_f2_0001.flac" in archive.namelist() and len(archive.namelist()) == 4


# -- every layout ------------------------------------------------------------------------------


def tone(path: Path, seconds: float = 1.0) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(path, (0.3 * np.sin(2 * np.pi * 220 * np.arange(int(seconds * 16000)) / 16000)).astype(np.float32), 16000)


def ljspeech(root: Path) -> str:
    for n in range(3):
        tone(root / "wavs" / f"clip{n}.wav")
    (root / "metadata.csv").write_text("clip0|yksi\nclip1|kaksi\nclip2|kolme\nclip9|puuttuu\n", encoding="utf-8")
    return "wavs"


def speakers(root: Path) -> str:
    """Two of the demo's speakers, each a metadata.csv of a few lines (the rest of wavs/ unlisted) and its heldout.csv."""
    for name in ("espeak_f2", "espeak_m3"):
        shutil.copytree(DEMO_CORPUS / name, root / name)
        lines = (root / name / "metadata.csv").read_text(encoding="utf-8").splitlines()
        (root / name / "metadata.csv").write_text("\n".join(lines[:4]) + "\n", encoding="utf-8")
    return "espeak_f2/wavs"


def pairs(root: Path) -> str:
    for folder, stem, text in ((root, "a", "yksi"), (root, "b", "kaksi"), (root / "luku1", "c", "kolme")):
        tone(folder / f"{stem}.wav")
        (folder / f"{stem}.lab").write_text(text, encoding="utf-8")
    tone(root / "luku1" / "d.wav", seconds=0.1)  # too short: rejected, and its transcript stays home with it
    (root / "luku1" / "d.lab").write_text("lyhyt", encoding="utf-8")
    return "luku1"


def kaldi(root: Path) -> str:
    """Kaldi's data directory with its recordings inside it (wav.scp's paths relative to it)."""
    recipe = root.parent / f"{root.name}-recipe"
    data, _ = sources.kaldi(recipe)
    shutil.move(recipe / "audio", data / "audio")
    shutil.move(data, root)
    return "audio"


BUILDERS = {"ljspeech": ljspeech, "speakers": speakers, "pairs": pairs, "kaldi": kaldi,
            "css10": lambda root: sources.css10(root) and "kalevala", "commonvoice": lambda root: sources.commonvoice(root) and "clips",
            "audiofolder": lambda root: sources.audiofolder(root) and "data"}


def staged_and_mounted(root: Path, tmp_path: Path, **options):
    """The check of ``root``, what goes up of it, and the folder a session would find it in."""
    report = check_corpus(root, progress=False, **options)
    found = plan(report)
    assert refusal(found, report) is None
    (tmp_path / "staged").mkdir()
    stage(found, "alice/a-voice", tmp_path / "staged")
    kaggle = KaggleServer(user="alice")  # not started: its datasets and mount, as an uploaded version is mounted
    kaggle.add_dataset("alice/a-voice", {p.name: p.read_bytes() for p in (tmp_path / "staged").iterdir()
                                         if p.name != "dataset-metadata.json"})
    return report, found, kaggle.mount("alice/a-voice", tmp_path / "input")


@pytest.mark.parametrize("layout", sorted(BUILDERS))
def test_every_layout_goes_up_as_the_corpus_the_check_read_with_nothing_else(layout, tmp_path):
    root = tmp_path / "corpus"
    clips = BUILDERS[layout](root)
    (root / "README.md").write_text("about this corpus\n", encoding="utf-8")
    planted = ["token", f"{clips}/token", f"{clips}/stray.wav"]
    for rel in planted[:2]:
        (root / rel).write_bytes(secret(rel))
    tone(root / planted[2])
    report, found, mounted = staged_and_mounted(root, tmp_path)
    assert report.items and report.format == layout
    again = check_corpus(mounted, progress=False)
    assert again.format == layout and {item.id for item in again.items} == {item.id for item in report.items}
    assert found.clips == len(report.items) and (mounted / "README.md").is_file()
    assert {rel: why for rel, why in found.left_out if rel in planted} == dict.fromkeys(planted, "not a file the check used")
    files = {p.relative_to(mounted).as_posix() for p in mounted.rglob("*") if p.is_file()}
    assert not any(p in files for p in planted) and files == set(found.sent)
    if layout == "speakers":  # the held-out tables a VITS session validates on, and their clips
        assert {i.id for i in read_heldout_files(mounted)} == {i.id for i in read_heldout_files(root)} != set()
    if layout == "pairs":
        assert "luku1/d.lab" not in files and dict(found.left_out)["luku1/d.wav"].startswith("a clip the check rejected")


def test_a_common_voice_split_goes_up_with_its_own_table_only(tmp_path):
    root = tmp_path / "fi"
    sources.commonvoice(root)
    report, found, mounted = staged_and_mounted(root, tmp_path, options=ReadOptions(split="train"))
    assert sorted(p.name for p in mounted.glob("*.tsv")) == ["train.tsv"] and found.clips == len(report.items) == 2
    assert dict(found.left_out)["invalidated.tsv"] == "not a file the check used"


def test_clips_outside_the_folder_refuse_the_upload(tmp_path):
    data, _ = sources.kaldi(tmp_path / "recipe")  # wav.scp names audio/ relative to the recipe, two folders up
    report = check_corpus(data, progress=False)
    why = refusal(plan(report), report)
    assert why and f"0 of the {len(report.items)} clips the check accepted would go up" in why and "outside the folder" in why


def test_a_file_that_would_be_staged_as_a_folders_zip_is_refused(tmp_path):
    root = tmp_path / "corpus"
    kaldi(root)
    shutil.copytree(root / "audio", root / "wavs")  # a folder wavs/ goes up as wavs.zip ...
    shutil.copy(root / "audio" / "rec1.wav", root / "wavs.zip")  # ... and so would a recording named wavs.zip
    scp = (root / "wav.scp").read_text(encoding="utf-8")
    (root / "wav.scp").write_text(scp.replace("rec0 audio/rec0.wav", "rec0 wavs/rec0.wav").replace(
        "rec1 audio/rec1.wav", "rec1 wavs.zip"), encoding="utf-8")
    report = check_corpus(root, progress=False)
    found = plan(report)
    assert found.clips == len(report.items) and refusal(found, report) is None
    (tmp_path / "staged").mkdir()
    with pytest.raises(ConfigError, match=r"the folder wavs/ and the file wavs\.zip would both go up as wavs\.zip"):
        stage(found, "alice/a-voice", tmp_path / "staged")


def test_a_chatterbox_corpus_sends_its_long_clips_when_checked_with_its_limit(kaggle_env, tmp_path):
    """A 25-s clip is VITS's problem (20 s), not a Chatterbox config's (30 s): ``--max-seconds 30`` sends it."""
    kaggle, env, _ = kaggle_env
    root = tmp_path / "long-voice"
    ljspeech(root)
    tone(root / "wavs" / "clip1.wav", seconds=25.0)
    upload = ("-m", "fintts", "kaggle", "corpus", str(root), "--corpus", "alice/long-voice", "--no-progress")
    vits = run(*upload, env=env, cwd=tmp_path)
    assert vits.returncode == 0, vits.stdout + vits.stderr
    assert "wavs/clip1.wav: a clip the check rejected" in vits.stdout and "2 clip(s), all that the check accepted" in vits.stdout
    chatterbox = run(*upload, "--max-seconds", "30", env=env, cwd=tmp_path)
    assert chatterbox.returncode == 0, chatterbox.stdout + chatterbox.stderr
    assert "3 clip(s), all that the check accepted" in chatterbox.stdout
    mounted = check_corpus(kaggle.mount("alice/long-voice", tmp_path / "input"), progress=False, max_seconds=30)
    assert mounted.format == "ljspeech" and len(mounted.items) == 3
