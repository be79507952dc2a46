"""A speech recogniser's first draft of a prepared corpus's transcripts, for the person to correct.

``fintts transcribe`` fills the empty lines of the ``metadata.csv`` that ``fintts prepare`` wrote
(:mod:`fintts.tts.corpus.prepare`) with what a Finnish-capable recogniser hears in each clip, through
transformers' ``automatic-speech-recognition`` pipeline: a Whisper checkpoint (told the language
is Finnish) or a CTC model (wav2vec2 and its kin). It is a draft: a recogniser gets names, numbers
and case endings wrong, and a voice trained on a wrong transcript learns the wrong sounds, so the
command says to read every line before ``fintts check``. A line that already has text is never
replaced (the person may have corrected it) unless ``redo`` is given.

It is slow on a CPU (Whisper's small model is about real time there); run it where a GPU is, as
a Kaggle notebook, and copy the table back. Clips are fed to the model at its feature extractor's
rate, resampled here with :func:`fintts.tts.audio.load_audio` (transformers would need torchaudio
for it, which this project leaves out).
"""

from __future__ import annotations

import dataclasses
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
        found = find_audio(corpus / "wavs", rows[n][0])
        if found is None:
            raise FileNotFoundError(f"{table}: clip {rows[n][0]!r} has no audio in {corpus / 'wavs'}")
        audio[n] = found
    recognise, rate, options = _recogniser(model, device)
    drafted = []
    for done, n in enumerate(todo, 1):
        heard = recognise(load_audio(audio[n], rate).numpy(), **options)
        text = " ".join(str(heard.get("text", "")).split()).replace("|", " ")
        rows[n] = (rows[n][0], text)
        drafted.append(rows[n][0])
        if done % 50 == 0:
            log(f"{done} of {len(todo)} clips transcribed")
    partial = table.with_name(table.name + ".partial")
    partial.write_text("".join(f"{clip}|{text}\n" for clip, text in rows), encoding="utf-8")
    partial.replace(table)  # the table is never half written: it may hold transcripts typed by hand
    return Transcribed(table, drafted, len(rows) - len(todo), model)
