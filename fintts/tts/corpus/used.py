"""Which files of a corpus folder its check used: all that an upload of the corpus may carry.

An upload carries what the check accepted, never whatever else lies in the folder (``DESIGN.md``:
an allow-list, never a deny-list; issue 52, item 4: leaving out dot entries and links still sent a
``token``, an ``id_rsa``, a ``credentials.json``, a ``wavs/token`` and a top-level ``kaggle.json``).
For every layout, what the check used is:

- the tables its reader listed the clips in (:attr:`CheckReport.tables`: LJSpeech's
  ``metadata.csv``, one per speaker's folder in a ``speakers`` corpus, CSS10's ``transcript.txt``,
  Common Voice's table of the split, an audiofolder's ``metadata.csv``/``.jsonl`` of the split,
  Kaldi's ``wav.scp`` and ``text`` with its ``utt2spk`` and ``segments``), each whole;
- the audio of each clip the check accepted, and a ``pairs`` clip's own ``.lab``/``.txt``
  (:attr:`Item.transcript`);
- ``heldout.csv`` beside an LJSpeech table the check read, and those of the clips it names that
  read as audio: a VITS session validates on them (:func:`~fintts.tts.corpus.ljspeech.heldout_tables`)
  and, without them, holds out training clips instead;
- a README or LICENSE at the top of the folder (:data:`ABOUT`): what the corpus is and on which
  terms it may be used, which travels with it. The session does not need it.

A clip the check rejected stays home, with the rest. The table still lists it, so a session's
check, reading the same table, names it "audio not found" and skips it, as the laptop's check
skipped it for its own reason.

The session reads the uploaded corpus with these same readers, so before anything is sent,
:func:`reads_alike` reads a copy of what goes up: it must be recognised as the same layout and
hold every clip the check accepted, where the check found it.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

from fintts.tts.audio import AUDIO_EXTENSIONS, AudioError, read_audio
from fintts.tts.corpus.check import CheckReport
from fintts.tts.corpus.files import link_problem
from fintts.tts.corpus.layouts import detect_format, read_corpus
from fintts.tts.corpus.ljspeech import METADATA, heldout_tables, read_table
from fintts.tts.corpus.model import CorpusError

#: Names (any case) of a file at the top of a corpus that says what it is and on which terms; the suffix of one may be
#: one of :data:`ABOUT_SUFFIXES`.
ABOUT = ("readme", "license", "licence", "copying")
ABOUT_SUFFIXES = ("", ".md", ".txt", ".rst")


@dataclasses.dataclass
class UsedFiles:
    """The files of ``root`` that its check used (see the module), each a path relative to ``root``.

    ``needed``: what a session needs to read the corpus as the check did; ``about``: the README and
    LICENSE files, which it does not. ``clips``: each accepted clip's id → its audio (``None``: the
    audio lies outside ``root``, where a Kaldi ``wav.scp`` may name it). ``rejected``: the audio of
    clips the check rejected and none it accepted, to say why each is left out.
    """

    root: Path
    needed: set[str]
    about: set[str]
    clips: dict[str, str | None]
    rejected: set[str]

    @property
    def all(self) -> set[str]:
        return self.needed | self.about


def inside(path: Path, root: Path) -> str | None:
    """``path`` relative to ``root`` (``/``-separated), or ``None`` when it lies outside (``..`` resolved as text)."""
    rel = os.path.relpath(os.path.normpath(os.path.abspath(path)), root)
    return None if rel == ".." or rel.startswith("../") or os.path.isabs(rel) else Path(rel).as_posix()


def used_files(report: CheckReport) -> UsedFiles:
    """The files of the checked folder ``report.root`` that the check used (see the module)."""
    root = report.root
    clips = {item.id: inside(item.audio, root) for item in report.items}
    needed = {rel for rel in clips.values() if rel}
    needed |= {rel for item in report.items if item.transcript and (rel := inside(item.transcript, root))}
    needed |= {rel for table in report.tables if (rel := inside(table, root))}
    needed |= _heldout(report)
    rejected = {rel for item in report.rejected if (rel := inside(item.audio, root))} - needed
    about = {entry.name for entry in root.iterdir() if entry.is_file() and not entry.is_symlink()
             and entry.stem.lower() in ABOUT and entry.suffix.lower() in ABOUT_SUFFIXES}
    return UsedFiles(root, needed, about, clips, rejected)


def _heldout(report: CheckReport) -> set[str]:
    """The held-out tables beside an LJSpeech table the check read, and the clips of theirs that read as audio."""
    root, found = report.root, set()
    for table in heldout_tables(root):
        if table.parent / METADATA not in report.tables or link_problem(table, root):
            continue
        found.add(table.relative_to(root).as_posix())
        for item in read_table(table, table.parent.name)[0]:
            if link_problem(item.audio, root):
                continue
            try:
                read_audio(item.audio)
            except AudioError:
                continue  # a session's validation fails on it alike; a file that is not audio is never sent
            found.add(item.audio.relative_to(root).as_posix())
    return found


def reads_alike(report: CheckReport, kept: Iterable[str]) -> str | None:
    """Why a folder holding only ``kept`` (paths relative to ``report.root``) would not read as the check read the corpus
    (``None``: it would).

    The copy is made as a session meets it: tables and transcripts copied, each audio file an empty
    stand-in (the readers look for audio; only the check decodes it), in a folder whose parents hold
    nothing of the corpus, as those of a dataset mounted under ``/kaggle/input`` do. It must be
    recognised as the same layout (when the corpus itself is: a layout given by ``--format`` is the
    session's to give too) and list every clip the check accepted, with its audio where it was.
    """
    root = report.root
    accepted = {inside(item.audio, root) for item in report.items}
    with tempfile.TemporaryDirectory(prefix="fintts-corpus-copy-") as tmp:
        copy = Path(tmp) / "input" / root.name
        copy.mkdir(parents=True)
        for rel in kept:
            target = copy / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if rel in accepted or target.suffix.lower() in AUDIO_EXTENSIONS:
                target.touch()
            else:
                shutil.copyfile(root / rel, target)
        here, there = _layout(root), _layout(copy)
        if here == report.format and there != here:
            return f"it would not be recognised as {here} (it reads as {there or 'no layout fintts knows'})"
        try:
            corpus = read_corpus(copy, report.format, report.options)
        except CorpusError as err:
            return f"it would not read as {report.format}: {str(err).replace(str(copy), str(root))}"
        found = {item.id: inside(item.audio, copy) for item in corpus.items}
        lost = [item for item in report.items if found.get(item.id) is None or found[item.id] != inside(item.audio, root)]
    if lost:
        return (f"{len(lost)} of the {len(report.items)} clips the check accepted would not be found in it (the first: "
                f"{lost[0].id}, {lost[0].audio})")
    return None


def _layout(folder: Path) -> str | None:
    try:
        return detect_format(folder)
    except CorpusError:
        return None
