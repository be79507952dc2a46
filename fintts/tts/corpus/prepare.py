"""Long recordings to a corpus: clips cut at the pauses, and a transcript table for the person to fill in.

``fintts prepare`` does the mechanical part of making a corpus from an evening's recordings; the
transcripts stay the person's (a wrong transcript teaches the voice to say the wrong thing, and
only the speaker knows what was said). What it writes is the LJSpeech layout ``fintts check``
and training read (:mod:`fintts.tts.corpus.ljspeech`): ``wavs/<recording>_<nnnn>.wav`` and
``metadata.csv`` with one ``id|text`` line per clip, the text empty until filled in, plus
``clips.tsv`` saying where in which recording each clip came from, for finding it again. It is
written beside the old corpus and swapped in (:mod:`fintts.tts.corpus.staging`).

Where the pauses are: :mod:`fintts.tts.corpus.pauses`. Each clip is cut in the middle of its
pauses and keeps up to ``keep_silence`` seconds of them at either end (VITS learns the start and
end of speech from them). Clips are cut only at pauses, never inside a word: speech longer than
``max_seconds`` with no pause to cut at is left out and named, with the hint to raise it.

Without ``script`` a stretch shorter than ``min_seconds`` joins the neighbour across the shorter
pause, and every clip's text is left empty. With ``script`` (the text that was read, as written)
the sentences are lined up with the stretches by how long each takes to say
(:mod:`fintts.tts.corpus.script_align`): each sentence that lines up is one clip with its text,
and each that does not is named with what was found in its place, since a guess that drifts by
one sentence would mislabel every clip after it.

A file that is not audio, or a recording without speech, is named with its reason and skipped;
the others are prepared.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import soundfile as sf

from fintts.errors import UsageError
from fintts.tts.audio import AUDIO_EXTENSIONS, AudioError
from fintts.tts.corpus import staging
from fintts.tts.corpus.ljspeech import METADATA
from fintts.tts.corpus.pauses import BLOCK_FRAMES, FRAME, Speech, SplitSettings, clip_frames, find_speech, unscripted_spans
from fintts.tts.corpus.script_align import Stretch, align
from fintts.tts.text import split_sentences

__all__ = ["Clip", "Prepared", "SplitSettings", "prepare_corpus", "recordings"]


@dataclasses.dataclass(frozen=True)
class Clip:
    id: str
    source: Path
    #: first sample and the sample after the last, at the recording's rate
    first: int
    stop: int
    rate: int
    text: str = ""

    @property
    def start(self) -> float:
        return self.first / self.rate

    @property
    def end(self) -> float:
        return self.stop / self.rate


@dataclasses.dataclass
class Prepared:
    """What :func:`prepare_corpus` wrote, and what it left out and why, for the command's message."""

    out: Path
    clips: list[Clip]
    notes: list[str]

    @property
    def seconds(self) -> float:
        return sum(c.end - c.start for c in self.clips)

    @property
    def filled(self) -> bool:
        return any(c.text for c in self.clips)

    def format_text(self) -> str:
        minutes = self.seconds / 60
        lines = [f"{len(self.clips)} clips ({minutes:.1f} min) in {self.out / staging.WAVS}; "
                 f"where each came from: {self.out / staging.CLIPS_TABLE}", *self.notes]
        what = "check each transcript against its clip" if self.filled else "write what is said in each clip after its id"
        lines.append(f"next: {what} in {self.out / METADATA} (id|text, one line a clip), then: fintts check {self.out}")
        return "\n".join(lines)


def recordings(paths: Sequence[Path]) -> list[Path]:
    """The files named, and the audio files in the folders named (sorted, not recursive)."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            inside = sorted(p for p in path.iterdir() if p.suffix.lower() in AUDIO_EXTENSIONS and not p.name.startswith("."))
            if not inside:
                raise UsageError(f"{path} holds no recordings ({', '.join(AUDIO_EXTENSIONS)})")
            found += inside
        elif path.is_file():
            found.append(path)
        else:
            raise FileNotFoundError(f"{path} does not exist: name recordings or a folder of them")
    return found


def clip_stem(path: Path) -> str:
    """The start of a recording's clip ids: its name with anything but letters, digits, ``.``, ``-`` and ``_`` made
    ``_`` (a ``|`` would split the table's line, a space or slash trouble a shell or a path)."""
    return re.sub(r"[^\w.-]+", "_", path.stem).strip("_") or "recording"


def _when(seconds: float) -> str:
    return f"{int(seconds // 60)}:{seconds % 60:04.1f}"


def prepare_corpus(sources: Sequence[str | Path], out: str | Path, *, settings: SplitSettings | None = None,
                   script: str | Path | None = None, force: bool = False,
                   log: Callable[[str], None] = print) -> Prepared:
    """Cut every recording at its pauses into ``out/wavs/`` and write ``out/metadata.csv`` and ``out/clips.tsv``.

    Clips keep the recording's sample rate (training resamples) as 16-bit PCM WAV, mono. An
    ``out`` that already holds a corpus (a table, clips or ``clips.tsv``) is refused without
    ``force``: the table may hold transcripts someone typed, the clips may be what it names; with
    ``force`` the old table is kept aside (:mod:`fintts.tts.corpus.staging`). Recordings are read
    twice, a block at a time (once to find the pauses, once to write the clips), so that a
    script can decide the cuts first.
    """
    out, settings = Path(out), settings or SplitSettings()
    staging.recover(out)
    if not force and (there := staging.existing(out)):
        raise UsageError(f"{out} already holds a corpus ({', '.join(there)}; {METADATA} may hold your transcripts): "
                         "choose another --out, or pass --force to replace it (the old table is kept as a .bak)")
    files = recordings([Path(s) for s in sources])
    stems: dict[str, Path] = {}
    for path in files:  # clip ids are <recording>_<nnnn>: two recordings of one name would overwrite each other's clips
        if stems.setdefault(clip_stem(path), path) != path:
            raise UsageError(f"{stems[clip_stem(path)]} and {path} have the same name, and clips are named after their "
                             "recording: rename one")
    notes: list[str] = []
    found: list[Speech] = []
    for path in files:
        try:
            speech = find_speech(path, settings)
        except AudioError as err:
            notes.append(f"skipped {err}")  # named in the summary, beside what was prepared
            continue
        if not speech.spans:
            notes.append(f"skipped {path}: {speech.why}")
            continue
        found.append(speech)
        log(f"{path.name}: {speech.samples / speech.rate / 60:.1f} min, {len(speech.spans)} stretches of speech between pauses")
    if not found:
        raise UsageError("no speech to prepare: " + "; ".join(n.removeprefix("skipped ") for n in notes))
    if script:
        plan = _scripted(found, Path(script), settings, notes)
    else:
        plan = _unscripted(found, settings, notes)
    out.mkdir(parents=True, exist_ok=True)
    stage = staging.start(out)
    try:
        clips = _written(found, plan, stage, log)
    except BaseException:  # an error or Ctrl-C: the old corpus is untouched, and nothing half-written is left
        shutil.rmtree(stage)
        raise
    kept = staging.swap(out)
    if kept:
        notes.append(f"the previous {METADATA} is kept as {kept}")
    return Prepared(out, clips, notes)


Cut = tuple[int, int, str]  # first frame, end frame, text


def _written(found: list[Speech], plan: list[list[Cut]], stage: Path, log: Callable[[str], None]) -> list[Clip]:
    """The clips of ``plan`` written into the staging folder, with ``metadata.csv`` and ``clips.tsv``."""
    clips: list[Clip] = []
    for speech, cuts in zip(found, plan):
        stem = clip_stem(speech.path)
        mine = [Clip(f"{stem}_{n:04d}", speech.path, first * speech.hop, min(stop * speech.hop, speech.samples), speech.rate, text)
                for n, (first, stop, text) in enumerate(cuts, start=1)]
        _write_clips(speech.path, mine, stage / staging.WAVS)
        log(f"{speech.path.name}: {len(mine)} clips written")
        clips += mine
    (stage / staging.CLIPS_TABLE).write_text("id\trecording\tstart\tend\n" + "".join(
        f"{c.id}\t{c.source}\t{c.start:.6f}\t{c.end:.6f}\n" for c in clips), encoding="utf-8")
    (stage / METADATA).write_text("".join(f"{c.id}|{c.text}\n" for c in clips), encoding="utf-8")
    return clips


def _unscripted(found: list[Speech], settings: SplitSettings, notes: list[str]) -> list[list[Cut]]:
    plan = []
    for speech in found:
        kept, too_long = unscripted_spans(speech, settings)
        for span in too_long:
            notes.append(f"left out {speech.path} {_when(speech.seconds(span[0]))}-{_when(speech.seconds(span[1]))}: "
                         f"{speech.duration(span):.1f} s of speech with no pause to cut at, longer than --max-seconds "
                         f"{settings.max_seconds:g}; raise --max-seconds to keep it")
        plan.append([(*clip_frames(speech, span, settings.keep_silence), "") for span in kept])
    return plan


def _scripted(found: list[Speech], script: Path, settings: SplitSettings, notes: list[str]) -> list[list[Cut]]:
    """Each sentence of ``script`` that lines up with stretches of speech as a clip with its text; what did not line
    up is named in ``notes``. When none does, the clips are cut as without a script."""
    sentences = [chunk.text for chunk in split_sentences(script.read_text(encoding="utf-8"), max_chars=10**6)]
    where = [(r, span) for r, speech in enumerate(found) for span in speech.spans]
    stretches = [Stretch(r, found[r].seconds(s), found[r].seconds(e)) for r, (s, e) in where]
    steps = align(sentences, stretches)
    plan: list[list[Cut]] = [[] for _ in found]
    filled, named = 0, []

    def moment(stretch: int, edge: int) -> str:  # edge 0: where the stretch starts, 1: where it ends
        r, span = where[stretch]
        return _when(found[r].seconds(span[edge]))

    def place(stretch_ids: Sequence[int]) -> str:
        return f"{found[where[stretch_ids[0]][0]].path.name} {moment(stretch_ids[0], 0)}-{moment(stretch_ids[-1], 1)}"

    def said(n: int) -> str:
        text = sentences[n]
        return f"sentence {n + 1} ({text[:40] + '…' if len(text) > 40 else text!r})"

    for at, step in enumerate(steps):
        if step.matched:
            r = where[step.stretches[0]][0]
            span = (where[step.stretches[0]][1][0], where[step.stretches[-1]][1][1])
            first, stop = clip_frames(found[r], span, settings.keep_silence)
            if found[r].seconds(stop - first) > settings.max_seconds:
                named.append(f"{said(step.sentences[0])}: {found[r].seconds(stop - first):.1f} s in {place(step.stretches)}, "
                             f"longer than --max-seconds {settings.max_seconds:g}: left out; raise --max-seconds to keep it")
                continue
            plan[r].append((first, stop, sentences[step.sentences[0]]))
            filled += 1
        elif len(step.sentences) > 1:
            named.append(f"sentences {step.sentences[0] + 1}-{step.sentences[-1] + 1} ({sentences[step.sentences[0]][:30]}…): "
                         f"read without a pause between them in {place(step.stretches)}: left out (a clip holds one sentence)")
        elif step.sentences:
            before = next((s for s in reversed(steps[:at]) if s.stretches and s.sentences), None)
            last = before.stretches[-1] if before else None
            after = (f" (expected in {found[where[last][0]].path.name} after {moment(last, 1)})" if last is not None
                     else " (expected before all the speech)")
            near = [s for s in steps[max(0, at - 1): at + 2] if s.stretches and not s.sentences]
            there = f"; speech that matched no sentence is near it in {place(near[0].stretches)}" if near else ""
            named.append(f"{said(step.sentences[0])}: not found as a stretch of speech of its length between pauses{after}{there}")
        else:
            named.append(f"speech in {place(step.stretches)} matched no sentence of {script.name}: left out")
    if not filled:
        notes.append(f"transcripts left empty: none of the {len(sentences)} sentences of {script} lined up with the "
                     "recordings' stretches of speech; the clips are cut at the pauses")
        return _unscripted(found, settings, notes)
    notes.append(f"transcripts: {filled} of the {len(sentences)} sentences of {script}" +
                 (f"; not lined up ({len(named)}), fix or record them again:" if named else ""))
    notes += [f"  {line}" for line in named]
    return plan


def _write_clips(path: Path, clips: list[Clip], folder: Path) -> None:
    """Write ``clips`` (in order, not overlapping) of the recording at ``path`` into ``folder``, reading it a block at a
    time: memory holds one block, however long the recording."""
    pending = iter(clips)
    clip, writer, at = next(pending, None), None, 0
    with sf.SoundFile(str(path)) as audio:
        block_size = max(1, round(FRAME * audio.samplerate)) * BLOCK_FRAMES
        for block in audio.blocks(blocksize=block_size, dtype="float32", always_2d=True):
            mono, end = block.mean(axis=1), at + len(block)
            while clip is not None and clip.first < end:
                if writer is None:
                    writer = sf.SoundFile(str(folder / f"{clip.id}.wav"), "w", samplerate=audio.samplerate, channels=1,
                                          subtype="PCM_16")
                writer.write(np.clip(mono[max(clip.first - at, 0): min(clip.stop, end) - at], -1.0, 1.0))
                if clip.stop > end:
                    break
                writer.close()
                clip, writer = next(pending, None), None
            at = end
    if writer is not None:
        writer.close()
