"""Which layout a corpus is in, and reading it with that layout's reader: detection in one place.

Detection (:func:`detect_format`) tries, in order, and takes the first that fits:

========================  ======================================================================
``hub``                   ``data`` is ``hf://datasets/USER/NAME``
``audiofolder``           ``metadata.csv``/``.jsonl`` with ``file_name`` (or split folders of such)
``ljspeech[-speaker]``    any other ``metadata.csv`` (``id|speaker|text`` header: the speaker variant)
``css10``                 ``transcript.txt`` with ``path.wav|original|normalized|duration`` lines
``commonvoice``           ``validated.tsv``/``train.tsv``/… with ``client_id``, ``path``, ``sentence``
``kaldi``                 ``wav.scp`` and ``text``
``speakers``              subfolders that are LJSpeech or pairs corpora, the folder itself none
``pairs``                 audio files with a ``.lab``/``.txt`` transcript of the same name, anywhere below
========================  ======================================================================

A single-speaker ``pairs`` corpus split into chapter subfolders therefore reads as ``speakers``;
pass ``format="pairs"`` for it. Whatever is found, :attr:`Corpus.looked_for` says what decided it.
"""

from __future__ import annotations

from pathlib import Path

from fintts.tts.audio import AUDIO_EXTENSIONS
from fintts.tts.corpus import audiofolder, commonvoice, css10, hub, kaldi
from fintts.tts.corpus.files import has_pairs, hidden, link_problem
from fintts.tts.corpus.ljspeech import METADATA, metadata_layout, read_metadata
from fintts.tts.corpus.model import HUB_PREFIX, Corpus, CorpusError, Item, Problem, ReadOptions, speaker_name_problem
from fintts.tts.corpus.pairs import read_pairs

FORMATS = ("ljspeech", "ljspeech-speaker", "pairs", "speakers", "css10", "commonvoice", "audiofolder", "kaldi", "hub")
#: what each layout is recognised by, for messages
SIGNS = {
    "audiofolder": "metadata.csv (or metadata.jsonl) with file_name and transcription|text|sentence (Hugging Face audiofolder)",
    "ljspeech": "metadata.csv with id|text or id|text|normalized lines, audio in wavs/",
    "ljspeech-speaker": "metadata.csv with an id|speaker|text header, audio in wavs/",
    "css10": "transcript.txt with book/clip.wav|original|normalized|duration lines (CSS10)",
    "commonvoice": "validated.tsv (or train/dev/test/other.tsv) with client_id, path, sentence columns, audio in clips/ (Common Voice)",
    "kaldi": "wav.scp and text (with utt2spk, segments) (Kaldi data directory)",
    "speakers": "subfolders, one per speaker, each an LJSpeech or pairs corpus",
    "pairs": "audio files each with a .lab or .txt transcript of the same name beside it, searched recursively",
    "hub": "hf://datasets/USER/NAME (parquet with an Audio column, on the Hugging Face Hub)",
}
#: split folder names that make subfolders an audiofolder's splits rather than speakers
SPLIT_NAMES = {"train", "validation", "valid", "dev", "test"}


def is_hub(source: str | Path) -> bool:
    return isinstance(source, str) and source.startswith(HUB_PREFIX)


def detect_format(source: str | Path) -> str:
    """The layout of the corpus at ``source``, or :class:`CorpusError` saying what was sought."""
    return _detect(source)[0]


def _detect(source: str | Path) -> tuple[str, str]:
    """(format, what it was recognised by)."""
    if is_hub(source):
        return "hub", SIGNS["hub"]
    root = existing_folder(source)
    found = _folder_layout(root)
    if found:
        return found
    files = [p for p in root.rglob("*") if p.is_file() and not hidden(p, root)]
    audio = [p for p in files if p.suffix.lower() in AUDIO_EXTENSIONS]
    looked = "; ".join(f"{name}: {sign}" for name, sign in SIGNS.items())
    inside = [(sub, _folder_layout(sub)) for sub in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))]
    hints = [f"{sub} looks like {layout[0]}" for sub, layout in inside if layout]
    raise CorpusError(
        f"{root} is not a corpus fintts recognizes. Looked for — {looked}. Found {len(files)} files, {len(audio)} of "
        f"them audio. {'; '.join(hints) + ': pass that folder. ' if hints else ''}"
        f"Arrange the files in one of these layouts or pass format= one of {FORMATS}."
    )


def _folder_layout(root: Path) -> tuple[str, str] | None:
    """(format, what it was recognised by) of a folder, or None."""
    if audiofolder.is_audiofolder(root):
        return "audiofolder", SIGNS["audiofolder"]
    layout = metadata_layout(root)
    if layout:
        return layout, SIGNS[layout]
    if css10.looks_like_css10(root):
        return "css10", SIGNS["css10"]
    if commonvoice.tables(root):
        return "commonvoice", SIGNS["commonvoice"]
    if kaldi.is_kaldi(root):
        return "kaldi", SIGNS["kaldi"]
    splits = audiofolder.split_folders(root)
    if splits and {p.name for p in splits} & SPLIT_NAMES:
        return "audiofolder", f"split folders ({', '.join(p.name for p in splits)}) each with {SIGNS['audiofolder']}"
    if corpus_subfolders(root):
        return "speakers", SIGNS["speakers"]
    if has_pairs(root, recursive=True):
        return "pairs", SIGNS["pairs"]
    return None


def read_corpus(source: str | Path, format: str | None = None, options: ReadOptions | None = None) -> Corpus:
    """Items and problems of the corpus at ``source`` (a folder or a Hub address); ``format`` overrides detection."""
    options = options or ReadOptions()
    if format:
        if format not in FORMATS:
            raise CorpusError(f"unknown corpus format {format!r}; use one of {FORMATS}")
        looked_for = f"format {format} as given ({SIGNS[format]})"
    else:
        format, sign = _detect(source)
        looked_for = f"detected {format}: {sign}"
    items: list[Item] = []
    problems: list[Problem] = []
    if format == "hub":
        if not is_hub(source):
            raise CorpusError(f"format 'hub' needs data: hf://datasets/USER/NAME, not {source}")
        root, read = hub.read_hub(str(source), options, items, problems)
        return Corpus(root, format, items, problems, f"{looked_for}; read {read}")
    root = existing_folder(source)
    tables = _read_folder(root, format, options, items, problems)
    linked = {item.id: link_problem(item.audio, root) for item in items}  # never followed (see fintts.tts.corpus.files)
    problems += [Problem(item.audio, linked[item.id]) for item in items if linked[item.id]]
    items = [item for item in items if not linked[item.id]]
    # Common Voice's and an audiofolder's table is one of several a folder may hold: say which was read
    read = tables[0].relative_to(root).as_posix() if format in ("commonvoice", "audiofolder") else ""
    return Corpus(root, format, items, problems, f"{looked_for}; read {read}" if read else looked_for, tables)


def _read_folder(root: Path, format: str, options: ReadOptions, items: list[Item], problems: list[Problem]) -> list[Path]:
    """Read ``root`` with one layout; returns the tables read (:attr:`Corpus.tables`)."""
    if format in ("ljspeech", "ljspeech-speaker"):
        if not (root / METADATA).is_file():
            raise CorpusError(f"format {format!r} needs {root / METADATA}, which does not exist")
        read_metadata(root / METADATA, format == "ljspeech-speaker", root.name, "", items, problems)
        return [root / METADATA]
    if format == "pairs":
        read_pairs(root, root.name, "", items, problems)
        return []
    if format == "speakers":
        return _read_speakers(root, items, problems)
    if format == "css10":
        if not (root / css10.TRANSCRIPT).is_file():
            raise CorpusError(f"format 'css10' needs {root / css10.TRANSCRIPT}, which does not exist")
        css10.read_css10(root, items, problems)
        return [root / css10.TRANSCRIPT]
    if format == "commonvoice":
        return [commonvoice.read_commonvoice(root, options.split, items, problems)]
    if format == "audiofolder":
        return [audiofolder.read_audiofolder(root, options.split, options.text_column, options.speaker_column, items, problems)]
    if not kaldi.is_kaldi(root):  # kaldi: FORMATS holds no other folder layout
        raise CorpusError(f"format 'kaldi' needs {root / kaldi.WAV_SCP} and {root / kaldi.TEXT}")
    return kaldi.read_kaldi(root, items, problems)


def _read_speakers(root: Path, items: list[Item], problems: list[Problem]) -> list[Path]:
    """Each speaker's folder read with its own layout; the speakers' tables (a pairs speaker has none)."""
    subfolders = corpus_subfolders(root)
    if not subfolders:
        raise CorpusError(f"format 'speakers' needs subfolders of {root} that are corpora; none are")
    tables = []
    for sub, layout in subfolders:
        problem = speaker_name_problem(sub.name)
        if problem:
            problems.append(Problem(sub, f"{problem}; rename the folder"))
            continue
        if layout == "pairs":
            read_pairs(sub, sub.name, f"{sub.name}/", items, problems)
        else:
            read_metadata(sub / METADATA, layout == "ljspeech-speaker", sub.name, f"{sub.name}/", items, problems)
            tables.append(sub / METADATA)
    return tables


def existing_folder(path: str | Path) -> Path:
    root = Path(path).expanduser().resolve()
    if not root.is_dir():
        raise CorpusError(f"{root} is not a folder; pass the folder that holds the corpus")
    return root


def _layout(folder: Path) -> str | None:
    """How one speaker's folder is laid out: a metadata layout, ``pairs`` or None (an audiofolder's
    ``metadata.csv`` is not LJSpeech's)."""
    if audiofolder.is_audiofolder(folder):
        return None
    return metadata_layout(folder) or ("pairs" if has_pairs(folder, recursive=True) else None)


def corpus_subfolders(root: Path) -> list[tuple[Path, str]]:
    """(subfolder, layout) of subfolders that are corpora, when ``root`` itself is none."""
    if (root / METADATA).is_file() or has_pairs(root, recursive=False):
        return []
    subfolders = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    layouts = [(sub, _layout(sub)) for sub in subfolders]
    return [(sub, layout) for sub, layout in layouts if layout is not None]
