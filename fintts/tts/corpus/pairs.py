"""Audio files each with a transcript of the same stem beside them (``a.wav`` + ``a.lab``/``a.txt``).

Found recursively (Fish-Speech / Kaggle style); item ids are paths relative to the folder.
"""

from __future__ import annotations

from pathlib import Path

from fintts.tts.corpus.files import audio_files, link_problem, transcript_of
from fintts.tts.corpus.model import Item, Problem


def read_pairs(folder: Path, speaker: str, id_prefix: str, items: list[Item], problems: list[Problem]) -> None:
    first_of_stem: dict[Path, Path] = {}
    for audio in audio_files(folder, recursive=True):
        stem = audio.with_suffix("")
        if stem in first_of_stem:
            problems.append(Problem(audio, f"has the same name as {first_of_stem[stem].name}; keep only one of them"))
            continue
        first_of_stem[stem] = audio
        transcript = transcript_of(audio)
        if transcript is None:
            problems.append(
                Problem(audio, f"no transcript: expected {stem.name}.lab or {stem.name}.txt beside it")
            )
            continue
        linked = link_problem(transcript, folder)
        if linked:
            problems.append(Problem(transcript, linked))
            continue
        try:
            text = " ".join(transcript.read_text(encoding="utf-8-sig").split())
        except UnicodeDecodeError as error:
            problems.append(Problem(transcript, f"is not UTF-8 text ({error}); save it as UTF-8"))
            continue
        if not text:
            problems.append(Problem(transcript, "empty transcript; write it or remove the clip"))
            continue
        clip_id = stem.relative_to(folder).as_posix()
        items.append(Item(id=id_prefix + clip_id, audio=audio, text=text, speaker=speaker, transcript=transcript))
