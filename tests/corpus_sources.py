"""Small corpora laid out exactly as their sources publish them, spoken by espeak-ng's Finnish voices.

Each builder writes one layout into a folder and returns what a reader must find there: every
good clip's id and speaker, and a word from each bad row that its problem must name. Audio is
made the way the sources make it: CSS10's 22,050 Hz wavs, Common Voice's 48 kHz mp3s (ffmpeg
with LAME), an audiofolder of ogg/opus/float-wav files at mixed rates, Kaldi recordings that
segments cut into utterances, and a Hub dataset's parquet with an ``Audio`` column.
"""

from __future__ import annotations

import dataclasses
import io
import shutil
import subprocess
from pathlib import Path

import numpy as np
import soundfile as sf

SENTENCES = [
    "Hyvää huomenta, tänään sataa lunta.",
    "Juna lähtee laiturilta kolme.",
    "Suomen kieli on kaunis kieli.",
    "Kahvi on valmista, tule syömään.",
    "Kirjasto aukeaa kello yhdeksän.",
    "Metsässä kasvaa mustikoita ja puolukoita.",
]
VOICES = ("fi+m3", "fi+f2", "fi+f5")


@dataclasses.dataclass
class Expected:
    """What reading a built corpus must give: good clips (id → speaker) and a word each bad row's problem names."""

    clips: dict[str, str]
    bad: list[str]

    @property
    def speakers(self) -> set[str]:
        return set(self.clips.values())


def speak(text: str, voice: str) -> tuple[np.ndarray, int]:
    """espeak-ng's float samples and its native rate (22,050 Hz)."""
    wav = subprocess.run(["espeak-ng", "-v", voice, "--stdout", text], check=True, capture_output=True).stdout
    samples, rate = sf.read(io.BytesIO(wav), dtype="float32")
    return samples, rate


def _ffmpeg(source: np.ndarray, rate: int, target: Path, *args: str) -> None:
    """Encode samples with ffmpeg (mp3 through LAME, opus through libopus) at the rate the args say."""
    target.parent.mkdir(parents=True, exist_ok=True)
    wav = io.BytesIO()
    sf.write(wav, source, rate, format="WAV")
    subprocess.run([shutil.which("ffmpeg") or "ffmpeg", "-loglevel", "error", "-y", "-f", "wav", "-i", "pipe:0", *args, str(target)],
                   input=wav.getvalue(), check=True)


def css10(root: Path) -> Expected:
    """transcript.txt ``book/book_0001.wav|original|normalized|duration``, wavs per book, 22,050 Hz, one reader."""
    lines, clips = [], {}
    for n, sentence in enumerate(SENTENCES[:4], start=1):
        book = "kalevala" if n <= 2 else "seitseman_veljesta"
        rel = f"{book}/{book}_{n:04d}.wav"
        samples, rate = speak(sentence, VOICES[0])
        (root / book).mkdir(parents=True, exist_ok=True)
        sf.write(root / rel, samples, rate, subtype="PCM_16")
        lines.append(f"{rel}|{sentence.upper()}|{sentence}|{len(samples) / rate:.2f}")
        clips[rel.removesuffix(".wav")] = root.name
    lines.append("kalevala/kalevala_0099.wav|Puuttuva.|Puuttuva.|1.20")  # no such file
    lines.append("kalevala/kalevala_0100.wav|vain kaksi kenttää")  # fields missing
    (root / "transcript.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return Expected(clips, ["kalevala_0099.wav", "line 6"])


CV_HEADER = ["client_id", "path", "sentence_id", "sentence", "sentence_domain", "up_votes", "down_votes", "age", "gender",
             "accents", "variant", "locale", "segment"]
CLIENTS = ("3f9c2b1e" + "a" * 56, "3f9c2b1e" + "b" * 56, "77d0e5c1" + "c" * 56)


def commonvoice(root: Path) -> Expected:
    """validated/train/invalidated.tsv beside clips/*.mp3 at 48 kHz; speakers are client_ids."""
    rows, clips = [], {}
    for n, sentence in enumerate(SENTENCES[:5]):
        client = CLIENTS[n % 3]
        name = f"common_voice_fi_{30000 + n}.mp3"
        samples, rate = speak(sentence, VOICES[n % 3])
        _ffmpeg(samples, rate, root / "clips" / name, "-ar", "48000", "-c:a", "libmp3lame", "-b:a", "64k")
        text = sentence if n != 1 else 'Hän sanoi "juna lähtee" ja lähti.'  # Common Voice leaves quotes unescaped
        rows.append([client, name, f"s{n}", text, "", "2", "0", "", "", "", "", "fi", ""])
        clips[name.removesuffix(".mp3")] = client[:16]  # the first two share their first 8 digits
    rows.append([CLIENTS[0], "common_voice_fi_39999.mp3", "s9", "Puuttuva leike.", "", "2", "0", "", "", "", "", "fi", ""])
    table = lambda picked: "\n".join("\t".join(r) for r in [CV_HEADER, *picked]) + "\n"  # noqa: E731
    (root / "validated.tsv").write_text(table(rows), encoding="utf-8")
    (root / "train.tsv").write_text(table(rows[:2]), encoding="utf-8")
    rejected = ["9" * 64, "common_voice_fi_40000.mp3", "x", "Hylätty lause.", "", "0", "3", "", "", "", "", "fi", ""]
    samples, rate = speak("Hylätty lause.", VOICES[0])
    _ffmpeg(samples, rate, root / "clips" / rejected[1], "-ar", "48000", "-c:a", "libmp3lame")
    (root / "invalidated.tsv").write_text(table([rejected]), encoding="utf-8")
    (root / "validated_sentences.tsv").write_text("sentence_id\tsentence\n", encoding="utf-8")
    return Expected(clips, ["common_voice_fi_39999.mp3"])


def audiofolder(root: Path) -> Expected:
    """metadata.csv ``file_name,transcription,speaker_id`` (quoted commas), ogg/opus/float wav at mixed rates."""
    root.mkdir(parents=True, exist_ok=True)
    rows, clips = ["file_name,transcription,speaker_id"], {}
    forms = [("data/a.ogg", 44100, "vorbis"), ("data/b.opus", 48000, "opus"), ("data/c.wav", 24000, "float"),
             ("data/sub/d.flac", 16000, "flac")]
    for n, (rel, rate, form) in enumerate(forms):
        samples, native = speak(SENTENCES[n], VOICES[n % 2])
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if form == "opus":
            _ffmpeg(samples, native, target, "-ar", str(rate), "-c:a", "libopus")
        else:
            from scipy.signal import resample_poly

            resampled = resample_poly(samples, rate, native).astype(np.float32)
            subtype = {"vorbis": "VORBIS", "float": "FLOAT", "flac": "PCM_16"}[form]
            sf.write(target, resampled, rate, subtype=subtype)
        speaker = f"puhuja{n % 2}"
        rows.append(f'{rel},"{SENTENCES[n]}",{speaker}')  # the sentences hold commas: quoted
        clips[rel.rsplit(".", 1)[0]] = speaker
    rows.append('data/missing.wav,"Ei tiedostoa.",puhuja0')
    rows.append("data/a.ogg,Pilkku, ilman lainausmerkkejä,puhuja1,ylimääräinen")
    (root / "metadata.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return Expected(clips, ["missing.wav", "line 7"])


def kaldi(recipe: Path) -> tuple[Path, Expected]:
    """A recipe folder with long recordings in audio/ and data/train/{wav.scp,segments,utt2spk,text}."""
    data = recipe / "data" / "train"
    data.mkdir(parents=True, exist_ok=True)
    (recipe / "audio").mkdir(exist_ok=True)
    scp, segments, utt2spk, text, clips = [], [], [], [], {}
    for r, (speaker, voice) in enumerate([("spk_anna", VOICES[1]), ("spk_pekka", VOICES[0])]):
        pieces, start, rate = [], 0.0, 22050
        for u in range(3):
            samples, rate = speak(SENTENCES[r * 3 + u], voice)
            utterance = f"{speaker}-rec{r}-{u:03d}"
            end = start + len(samples) / rate
            segments.append(f"{utterance} rec{r} {start:.2f} {end:.2f}")
            utt2spk.append(f"{utterance} {speaker}")
            text.append(f"{utterance} {SENTENCES[r * 3 + u]}")
            clips[utterance] = speaker
            pieces += [samples, np.zeros(int(0.5 * rate), dtype=np.float32)]
            start = end + 0.5
        sf.write(recipe / "audio" / f"rec{r}.wav", np.concatenate(pieces), rate)
        scp.append(f"rec{r} audio/rec{r}.wav")  # relative to the recipe folder, as Kaldi scripts run there
    marker = recipe / "pipe-ran"
    scp.append(f"rec9 touch {marker} |")  # a command: never run
    segments += ["spk_anna-rec9-000 rec9 0.00 1.00", "spk_anna-rec0-099 rec0 100.00 101.00"]
    utt2spk += ["spk_anna-rec9-000 spk_anna", "spk_anna-rec0-099 spk_anna"]
    text += ["spk_anna-rec9-000 Putkesta luettu.", "spk_anna-rec0-099 Liian myöhään."]
    for name, lines in (("wav.scp", scp), ("segments", segments), ("utt2spk", utt2spk), ("text", text)):
        (data / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return data, Expected(clips, ["rec9", "spk_anna-rec0-099"])


def hub_parquet(path: Path) -> Expected:
    """A ``push_to_hub``-style parquet: an Audio struct (bytes, path), transcription and speaker_id."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    audio, texts, speakers, clips = [], [], [], {}
    for n, sentence in enumerate(SENTENCES[:4]):
        samples, rate = speak(sentence, VOICES[n % 3])
        buffer = io.BytesIO()
        sf.write(buffer, samples, rate, format="FLAC")
        audio.append({"bytes": buffer.getvalue(), "path": f"clip{n}.flac"})
        texts.append(sentence)
        speakers.append(n % 2)
        clips[f"train/{n + 1:06d}"] = str(n % 2)
    audio.append({"bytes": None, "path": "elsewhere.wav"})
    texts.append("Ei ääntä.")
    speakers.append(0)
    struct = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    table = pa.table({"audio": pa.array(audio, type=struct), "transcription": texts, "speaker_id": speakers})
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return Expected(clips, ["row5"])


def publish_dataset(hub, repo: str, parquet: Path, token: str) -> None:
    """Put the parquet on the local Hub as a dataset's train split (data/train-00000-of-00001.parquet)."""
    from huggingface_hub import HfApi

    api = HfApi(endpoint=hub.endpoint, token=token)
    api.create_repo(repo, repo_type="dataset", private=True)
    api.upload_file(path_or_fileobj=str(parquet), path_in_repo="data/train-00000-of-00001.parquet", repo_id=repo,
                    repo_type="dataset")


def long_recording(path: Path, rate: int, seconds: float, *, seed: int = 0, channels: int = 1,
                   subtype: str = "PCM_16") -> list[tuple[float, float]]:
    """A long recording made cheaply, without espeak-ng: tones of 1.2-2.4 s (voice-like harmonics of 110-220 Hz) with
    pauses of 0.6-1.0 s between them over a room's hiss, written at ``rate``; where each tone starts and ends, seconds."""
    rng = np.random.default_rng(seed)
    audio = rng.normal(0, 10 ** (-60 / 20), round(seconds * rate)).astype(np.float32)
    where, at = [], 0.5
    while at + 2.4 + 0.5 < seconds:
        length, pitch = rng.uniform(1.2, 2.4), rng.uniform(110, 220)
        first, stop = round(at * rate), round((at + length) * rate)
        t = np.arange(stop - first) / rate
        audio[first:stop] += (0.1 * sum(np.sin(2 * np.pi * pitch * h * t) / h for h in (1, 2, 3))).astype(np.float32)
        where.append((first / rate, stop / rate))
        at += length + rng.uniform(0.6, 1.0)
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(path, np.repeat(audio[:, None], channels, axis=1) if channels > 1 else audio, rate, subtype=subtype)
    return where
