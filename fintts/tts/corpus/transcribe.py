"""A speech recogniser's first draft of a prepared corpus's transcripts, for the person to correct.

``fintts transcribe`` fills the empty lines of the ``metadata.csv`` that ``fintts prepare`` wrote
(:mod:`fintts.tts.corpus.prepare`) with what a Finnish-capable recogniser hears in each clip, through
transformers' ``automatic-speech-recognition`` pipeline: a Whisper checkpoint (told the language
is Finnish) or a CTC model (wav2vec2 and its kin). It is a draft: a recogniser gets names, numbers
and case endings wrong, and a voice trained on a wrong transcript learns the wrong sounds, so the
command says to read every line before ``fintts check``. A line that already has text is never
replaced (the person may have corrected it) unless ``redo`` is given.

It runs for hours on a CPU, and the person may correct the table meanwhile, so each draft is saved
as soon as it is heard: the table is read again from the disk and the one line filled only if it
still holds what the run found at its start (empty; with ``redo``, the old text), then written
whole to a temporary file and moved over the table (``os.replace``: never half written). A line
typed meanwhile is kept, and a run that is interrupted (a session's end, Ctrl-C, an unreadable
clip) keeps every draft made before; run it again and it drafts only the lines still empty (with
``redo`` it starts over). An editor that saves a table it read before a draft was written still
writes that older copy over it: close the table while the run is going, or save only after it.

It is slow on a CPU (Whisper's small model is about real time there); run it where a GPU is, as
a Kaggle notebook, and copy the table back. Clips are fed to the model at its feature extractor's
rate, resampled here with :func:`fintts.tts.audio.load_audio` (transformers would need torchaudio
for it, which this project leaves out).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path

from fintts.errors import UsageError
from fintts.tts.audio import load_audio
from fintts.tts.corpus.files import find_audio
from fintts.tts.corpus.ljspeech import METADATA


@dataclasses.dataclass
class Transcribed:
    """What :func:`transcribe_corpus` did, for the command's message."""

    table: Path
    drafted: list[str]
    kept: int
    model: str

    def format_text(self) -> str:
        if not self.drafted:
            return f"every line of {self.table} already has a transcript ({self.kept}); --redo drafts them all again"
        return (f"{len(self.drafted)} transcripts drafted by {self.model} in {self.table} ({self.kept} already written, kept)\n"
                f"next: listen to each clip and correct its line (names, numbers, endings), then: fintts check {self.table.parent}")


def _rows(table: Path) -> list[tuple[str, str]]:
    if not table.is_file():
        raise FileNotFoundError(f"{table} not found: transcribe reads the table fintts prepare wrote (fintts prepare … --out DIR)")
    rows = []
    for number, line in enumerate(table.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        clip, bar, text = line.partition("|")
        if not bar or "|" in text:
            raise UsageError(f"{table}: line {number} is not id|text ({line!r}); fix it, or transcribe a table fintts prepare wrote")
        rows.append((clip.strip(), text.strip()))
    return rows


def _recogniser(model: str, device: str | None):
    from transformers import pipeline  # [train] only: the laptop's install has no transformers

    try:
        recognise = pipeline("automatic-speech-recognition", model=model, device=device)
    except (OSError, ValueError) as err:
        raise UsageError(f"cannot load the speech recogniser {model!r} ({str(err).splitlines()[0]}); give a local folder, or "
                         f"download it where there is a network: hf download {model}") from None
    whisper = recognise.model.config.model_type == "whisper"
    # generate_kwargs as a dict: 4.40's pipeline takes it by that name, and 5.x still does (transformers 5.24,
    # pipelines/automatic_speech_recognition.py, _sanitize_parameters: "BC: accept a dictionary of generation kwargs")
    options = {"generate_kwargs": {"language": "finnish", "task": "transcribe"}} if whisper else {}
    return recognise, recognise.feature_extractor.sampling_rate, options


def transcribe_corpus(corpus: str | Path, model: str, *, device: str | None = None, redo: bool = False,
                      log: Callable[[str], None] = print) -> Transcribed:
    """Draft the empty transcripts of ``corpus/metadata.csv`` (every one with ``redo``) with the recogniser ``model``."""
    corpus = Path(corpus)
    table = corpus / METADATA
    rows = _rows(table)
    todo = [n for n, (_, text) in enumerate(rows) if redo or not text]
    if not todo:
        return Transcribed(table, [], len(rows), model)
    audio = {}
    for n in todo:
        path = find_audio(corpus / "wavs", rows[n][0])
        if path is None:
            raise FileNotFoundError(f"{table}: clip {rows[n][0]!r} has no audio in {corpus / 'wavs'}")
        audio[n] = path
    recognise, rate, options = _recogniser(model, device)
    drafted, typed = [], 0
    for done, n in enumerate(todo, 1):
        clip, found = rows[n]
        if dict(_rows(table)).get(clip) != found:
            typed += 1  # typed (or removed) by the person since the run began: nothing to draft
            continue
        heard = recognise(load_audio(audio[n], rate).numpy(), **options)
        if _save_draft(table, clip, found, " ".join(str(heard.get("text", "")).split()).replace("|", " ")):
            drafted.append(clip)
        else:
            typed += 1
        if done % 50 == 0:
            log(f"{done} of {len(todo)} clips transcribed")
    return Transcribed(table, drafted, len(rows) - len(todo) + typed, model)


def _save_draft(table: Path, clip: str, found: str, draft: str) -> bool:
    """Write ``draft`` into ``clip``'s line if the table on the disk still has ``found`` there; whether it did.

    The table is read again first: whatever the person wrote since (this line or any other) is what is
    written back, with this one line filled in.
    """
    rows = _rows(table)
    if (clip, found) not in rows:
        return False
    rows[rows.index((clip, found))] = (clip, draft)
    partial = table.with_name(table.name + ".partial")
    partial.write_text("".join(f"{name}|{text}\n" for name, text in rows), encoding="utf-8")
    os.replace(partial, table)  # the table is never half written: it holds transcripts typed by hand
    return True
