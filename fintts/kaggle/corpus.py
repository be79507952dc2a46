"""``fintts kaggle corpus``: a checked corpus folder uploaded as a private Kaggle dataset, folders and all, and nothing else.

**What goes up is what the check used**, an allow-list (:mod:`fintts.tts.corpus.used`): the tables
the check read, the clips it accepted and their own transcripts, held-out tables and their clips,
and a README or LICENSE at the top. Leaving out dot entries and links was a deny-list, and it still
sent a ``token``, an ``id_rsa``, a ``credentials.json``, a ``wavs/token``, a top-level ``kaggle.json``
and a hard link to a secret (issue 52, item 4). Everything else in the folder is left out and
named in the log with why: a file the check did not use, a clip it rejected, a link (never
followed), a folder none of whose files it used (named once, with its count). A **hard link** (a
file with more than one name: its bytes are also somewhere else on this machine, maybe under a
secret's name) is left out and named too, unless ``hard_links`` (``--allow-hard-links``) asks for
it; when the session needs it (a table, an accepted clip), nothing is uploaded.

**Every accepted clip arrives.** The clips that go up are counted against the check's before
anything is staged: one that cannot go (a hard link, a Kaldi recording outside the folder) refuses
the upload. A copy of what goes up is then read as the session will read it
(:func:`~fintts.tts.corpus.used.reads_alike`): the same layout, every accepted clip where it was.

**Folders go up as zips.** The ``kaggle`` client uploads the *files* at the top of a dataset folder
and skips its folders unless asked to zip them; a corpus is mostly folders (``wavs/``, ``clips/``,
one per speaker), so an upload without them leaves a dataset of transcripts whose every clip is
"audio not found" in the session. Here each folder is sent as ``NAME.zip``, which Kaggle unpacks
back into ``NAME/`` where it mounts the dataset (:mod:`.inputs`). fintts writes the zips itself:
the client's ``dir_mode="zip"`` follows links (issue 41, item 7). Staged names must not collide: a
top-level ``wavs.zip`` beside ``wavs/`` overwrote the folder's zip, and the clips went missing
(issue 52, item 4); a corpus that would stage one name twice is refused.

The client reads ``dataset-metadata.json`` from the folder it uploads; fintts does not write
into the corpus, so it uploads a staging folder (copies of the top-level files, the zips, and
a metadata file of its own: a private dataset, licence "other", titled by its slug). A
``dataset-metadata.json`` already in the corpus is not one the check used: ``--corpus`` names the
dataset. The first upload creates the dataset; later ones add a version to it, which the next
pushed session mounts.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fintts.kaggle.client import KaggleError, calling, connect, user_of
from fintts.kaggle.visibility import private_or_absent
from fintts.train.config import ConfigError
from fintts.train.repo_id import repo_id_problem
from fintts.tts.corpus import CheckReport, check_corpus
from fintts.tts.corpus.used import UsedFiles, reads_alike, used_files

METADATA = "dataset-metadata.json"
#: Kaggle refuses a dataset folder with more files than this at its top level (zip them: a folder goes up as one zip).
MAX_FLAT_FILES = 1000
HARD_LINK = "a hard link (its bytes have {links} names, which may be anywhere on this machine): --allow-hard-links sends it"


def dataset_metadata(ref: str) -> dict[str, Any]:
    """``dataset-metadata.json`` of a private corpus dataset ``owner/slug``."""
    return {"title": ref.split("/")[1], "id": ref, "licenses": [{"name": "other"}]}


def check_ref(ref: str, user: str) -> None:
    """Refuse a dataset name Kaggle would refuse, before anything is uploaded."""
    if repo_id_problem(ref):
        raise ConfigError(f"--corpus: {ref!r} is not a Kaggle dataset; write OWNER/SLUG (e.g. {user}/my-voice)")
    owner, slug = ref.split("/")
    if owner != user:
        raise ConfigError(f"--corpus: {ref} belongs to {owner}, and these Kaggle credentials are {user}'s: write {user}/{slug}")
    if not 6 <= len(slug) <= 50 or not all(c in "abcdefghijklmnopqrstuvwxyz0123456789-" for c in slug):
        raise ConfigError(f"--corpus: Kaggle takes a slug of 6 to 50 lower-case letters, digits and dashes, not {slug!r}")


@dataclasses.dataclass
class Plan:
    """What the upload of a checked corpus sends and leaves out, paths relative to ``used.root``.

    ``left_out``: (path, why) of everything else in the folder (a folder's path ends in ``/``);
    ``withheld``: the files among them that the session needs (hard links): nothing goes up then.
    """

    used: UsedFiles
    sent: list[str] = dataclasses.field(default_factory=list)
    left_out: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    withheld: list[str] = dataclasses.field(default_factory=list)

    @property
    def clips(self) -> int:
        """How many of the clips the check accepted go up (a Kaldi recording holds several)."""
        sent = set(self.sent)
        return sum(1 for rel in self.used.clips.values() if rel in sent)


def plan(report: CheckReport, *, hard_links: bool = False) -> Plan:
    """What goes up of the folder ``report`` checked, and what is left out and why (see the module)."""
    used = used_files(report)
    keep = used.all
    found = Plan(used)
    _walk(used.root, keep, {parent.as_posix() for rel in keep for parent in Path(rel).parents}, hard_links, found)
    return found


def _walk(folder: Path, keep: set[str], folders: set[str], hard_links: bool, found: Plan) -> None:
    """Sort the entries below ``folder`` into sent (those in ``keep``) and left out; a link is never followed, a folder
    holding nothing kept (not in ``folders``) never entered."""
    used = found.used
    for entry in sorted(folder.iterdir()):
        rel = entry.relative_to(used.root).as_posix()
        if entry.is_symlink():
            found.left_out.append((rel, "a symbolic link: never followed"))
        elif entry.is_dir():
            if rel in folders:
                _walk(entry, keep, folders, hard_links, found)
            else:
                count = sum(len(files) for _, _, files in os.walk(entry))  # os.walk enters no linked folder
                found.left_out.append((f"{rel}/", f"a folder of {count} file(s), none of them used by the check"))
        elif not entry.is_file():
            found.left_out.append((rel, "not a regular file"))
        else:
            links = entry.stat().st_nlink
            if rel not in keep:
                why = "a clip the check rejected (see its problems)" if rel in used.rejected else "not a file the check used"
                found.left_out.append((rel, why + (f", and {HARD_LINK.format(links=links)}" if links > 1 else "")))
            elif links > 1 and not hard_links:
                found.left_out.append((rel, HARD_LINK.format(links=links)))
                if rel in used.needed:
                    found.withheld.append(rel)
            else:
                found.sent.append(rel)


def refusal(found: Plan, report: CheckReport) -> str | None:
    """Why nothing of ``found`` may go up (``None``: it may): the session would not read the corpus the check read."""
    if found.withheld:
        return (f"the session needs {len(found.withheld)} file(s) that are hard links ({', '.join(found.withheld[:5])}"
                f"{', …' if len(found.withheld) > 5 else ''}): pass --allow-hard-links to send them, or replace each "
                "with a copy of its own (cp FILE FILE.tmp && mv FILE.tmp FILE)")
    if found.clips != len(report.items):  # what is left: a clip outside the folder (a Kaldi wav.scp may name one)
        sent = set(found.sent)
        first = next(item for item in report.items if found.used.clips[item.id] not in sent)
        return (f"{found.clips} of the {len(report.items)} clips the check accepted would go up; the others lie outside the "
                f"folder (the first: {first.id}, {first.audio}): put their audio in it, named relative to it")
    why = reads_alike(report, found.sent)
    if why:
        return (f"a copy of the files the check used would not read as this corpus: {why}. Keep every clip inside the folder "
                "and name it by a path relative to the folder")
    return None


def stage(found: Plan, ref: str, folder: Path) -> list[str]:
    """What ``found`` sends, in ``folder`` as the client uploads it: each top-level file, each top-level folder as
    ``NAME.zip`` of its files that go up, and the metadata; the names staged.

    A name staged twice would overwrite the first (``wavs.zip`` beside ``wavs/``): refused. Kaggle refuses a folder
    of more than :data:`MAX_FLAT_FILES` files at the top of a dataset: refused first.
    """
    root = found.used.root
    tops: dict[str, list[str]] = {}
    for rel in found.sent:
        tops.setdefault(rel.split("/")[0], []).append(rel)
    staged = {METADATA: "fintts's dataset metadata"}
    for top, files in tops.items():
        name, what = (top, f"the file {top}") if files == [top] else (f"{top}.zip", f"the folder {top}/")
        if name in staged:
            raise ConfigError(f"{root}: {staged[name]} and {what} would both go up as {name} (Kaggle unpacks NAME.zip into "
                              f"NAME/), and one would overwrite the other: rename one of them")
        staged[name] = what
    flat = [top for top, files in tops.items() if files == [top]]
    if len(flat) > MAX_FLAT_FILES:
        raise ConfigError(f"{root} holds {len(flat)} files to upload at its top level, and Kaggle refuses a dataset folder of more "
                          f"than {MAX_FLAT_FILES}: move the clips into a folder (e.g. wavs/, which goes up as one zip)")
    for top, files in tops.items():
        if files == [top]:
            shutil.copyfile(root / top, folder / top)  # a copy: the client reads what is staged
            continue
        with zipfile.ZipFile(folder / f"{top}.zip", "w", zipfile.ZIP_STORED) as archive:  # audio does not deflate
            for rel in files:
                archive.write(root / rel, rel[len(top) + 1:])
    (folder / METADATA).write_text(json.dumps(dataset_metadata(ref), indent=2) + "\n", encoding="utf-8")
    return list(tops)


def upload(corpus: str | Path, ref: str, *, notes: str = "", api: Any = None, log: Callable[[str], None] = print,
           report: CheckReport | None = None, hard_links: bool = False) -> str:
    """Upload what the check of the corpus folder used as the private dataset ``ref`` (a new version when it exists); its URL.

    ``report``: the check of ``corpus`` already made (``fintts kaggle corpus`` prints it first); ``None``: it is checked
    here. ``hard_links``: send a hard-linked file the check used (see the module).
    """
    corpus = Path(corpus).expanduser()
    if not corpus.is_dir():
        raise ConfigError(f"{corpus} is not a folder: fintts kaggle corpus uploads a corpus folder (a Hub dataset needs no upload)")
    api = api or connect()
    check_ref(ref, user_of(api))
    # a public one is refused: a version fintts adds would publish the voice (dataset_create_version keeps visibility)
    exists = private_or_absent(api, ref, risk="a version fintts adds would publish your voice",
                               instead=f"pick another name: --corpus {ref.split('/')[0]}/another-name")
    report = report or check_corpus(corpus, progress=False)
    found = plan(report, hard_links=hard_links)
    if found.left_out:
        log(f"left out {len(found.left_out)} of {report.root}'s entries; only what the check used goes up (its tables, the "
            "clips it accepted, held-out tables and clips, a README or LICENSE):")
        for rel, why in found.left_out:
            log(f"  {rel}: {why}")
    why = refusal(found, report)
    if why:
        raise ConfigError(f"{report.root}: {why}; nothing was uploaded")
    with tempfile.TemporaryDirectory(prefix="fintts-corpus-") as tmp:
        names = stage(found, ref, Path(tmp))
        shown = ", ".join(f"{name}/ (as {name}.zip)" if (Path(tmp) / f"{name}.zip").is_file() else name for name in names)
        log(f"uploading {len(found.sent)} file(s) of {report.root}: {shown}; {found.clips} clip(s), all that the check accepted, "
            f"to {'a new version of ' if exists else 'the new '}{ref} (private: only you and those you share it with see it)")
        if exists:
            result = calling(f"add a version to {ref}", lambda: api.dataset_create_version(
                tmp, notes or "fintts kaggle corpus", quiet=True))
        else:
            result = calling(f"create {ref}", lambda: api.dataset_create_new(tmp, public=False, quiet=True))
    if result is None or getattr(result, "error", None):
        raise KaggleError(f"Kaggle did not take {ref}: {getattr(result, 'error', 'no answer')}")
    return getattr(result, "url", "") or f"https://www.kaggle.com/datasets/{ref}"
