"""Which clips a run trains on and which it validates on: chosen in one place, the same every session, for every family.

It reads a config's :class:`~fintts.tts.corpus.settings.CorpusSettings`, the fields every family's settings extend.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

from fintts.train.config import ConfigError
from fintts.tts.audio import header_seconds
from fintts.tts.corpus import Item, ReadOptions, check_corpus, read_table
from fintts.tts.corpus.data_names import data_root
from fintts.tts.corpus.ljspeech import heldout_tables
from fintts.tts.corpus.settings import CorpusSettings
from fintts.tts.corpus.speakers import BEST, analyse_speakers
from fintts.tts.hub_inputs import FetchFirst
from fintts.tts.text import FinnishText


def read_heldout_files(root: Path) -> list[Item]:
    """``heldout.csv`` tables (``id|text``, audio in ``wavs/``) beside a corpus's metadata, as the demo ships."""
    items: list[Item] = []
    for table in heldout_tables(root):
        speaker = table.parent.name
        items += read_table(table, speaker, id_prefix=f"{speaker}/")[0]
    return items



def heldout_count(clips: int, wanted: int) -> int:
    """How many of a speaker's ``clips`` to hold out: ``wanted``, at most a tenth of them but at least 2 (while
    training keeps more than half), none of 4 or fewer. Why ``wanted`` is 24: ``CorpusSettings.heldout_per_speaker``."""
    count = min(wanted, max(2, clips // 10))
    return count if clips > 2 * count else 0


@dataclasses.dataclass
class CorpusSelection:
    """The clips a run trains on and the ones it validates on; the same every session.

    ``speakers`` are the model's (its speaker table); ``speaker`` the one trained on, when
    the config names one (``best`` resolved to a name).
    """

    speakers: list[str]
    items: list[Item]
    heldout: list[Item]
    hours: float
    speaker: str | None = None
    heldout_minutes: float = 0.0


def select_corpus(cfg: CorpusSettings, *, log=print, progress: bool = True, cache_dir: Path | None = None,
                  fetch_first: FetchFirst | None = None) -> CorpusSelection:
    """Check the corpus once, keep the good clips of the chosen speakers, set the held-out ones aside.

    Held-out clips come from ``heldout.csv`` files when the corpus has them (the demo does);
    otherwise, per speaker, the :func:`heldout_count` clips whose ids hash lowest (so a phase
    on one speaker validates on the clips the all-speaker phase held out for it). A Hub dataset is
    downloaded into ``cache_dir`` (default: the Hugging Face cache), by the process ``fetch_first``
    says (a task's ``context.fetch_first``; ``None``: this one).
    """
    options = ReadOptions(split=cfg.split, text_column=cfg.text_column, speaker_column=cfg.speaker_column,
                          audio_column=cfg.audio_column, cache_dir=cache_dir, fetch_first=fetch_first)
    report = check_corpus(
        data_root(cfg.data), format=cfg.format or None, options=options, text=FinnishText.default(), sample_rate=16_000,
        min_seconds=cfg.min_seconds, max_seconds=cfg.max_seconds, progress=progress,
    )
    root = report.root
    if report.problems:
        log(f"{len(report.problems)} clip(s) of {root} skipped (run `fintts check {cfg.data}` for the list):")
        for problem in report.problems[:10]:
            log(f"  {problem.path}: {problem.reason}")
    items = report.items
    if cfg.speakers:
        missing = sorted(set(cfg.speakers) - {i.speaker for i in items})
        if missing:
            raise ConfigError(f"speakers: {', '.join(missing)} not in {root} (it has: {', '.join(sorted(report.speakers))})")
        items = [i for i in items if i.speaker in cfg.speakers]
    if not items:
        raise ConfigError(f"data: {root} has no usable clips (run `fintts check {cfg.data}`)")
    speakers = sorted({i.speaker for i in items})
    speaker = None
    if cfg.speaker:
        speaker = analyse_speakers(report, among=speakers).best if cfg.speaker == BEST else cfg.speaker
        if speaker not in speakers:
            raise ConfigError(f"speaker: {cfg.speaker!r} is not one of the model's speakers in {root}: {', '.join(speakers)} "
                              f"(`fintts speakers {cfg.data}` lists them)")
        items = [i for i in items if i.speaker == speaker]
    trained = [speaker] if speaker else speakers
    heldout = [i for i in read_heldout_files(root) if i.speaker in trained]
    if not heldout:
        for speaker_name in trained:
            own = sorted((i for i in items if i.speaker == speaker_name), key=lambda i: hashlib.sha256(i.id.encode()).hexdigest())
            heldout += own[: heldout_count(len(own), cfg.heldout_per_speaker)]
        held = {i.id for i in heldout}
        items = [i for i in items if i.id not in held]
    hours = sum(report.durations.get(i.id, 0.0) for i in items) / 3600
    # round-robin over speakers, so the first ``mcd_items`` cover every voice
    rank = {item.id: n for name in trained for n, item in enumerate(i for i in heldout if i.speaker == name)}
    heldout.sort(key=lambda i: (rank[i.id], speakers.index(i.speaker)))
    minutes = sum(report.durations.get(i.id) or header_seconds(i.audio, i.span) or 0.0 for i in heldout) / 60
    return CorpusSelection(speakers, items, heldout, hours, speaker, minutes)


def data_size(item: Item) -> int:
    """A clip's size for a task's data fingerprint: its file's bytes; a stretch of a recording (all of whose
    stretches share one file) its length in milliseconds, which moves when its times do."""
    if item.span is None:
        return item.audio.stat().st_size
    return round((item.span[1] - item.span[0]) * 1000)
