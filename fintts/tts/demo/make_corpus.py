"""Synthesise the embedded demo corpus with espeak-ng.

Run ``python -m fintts.tts.demo.make_corpus`` to regenerate ``fintts/tts/demo/corpus``.
The result is committed, so users never need espeak-ng; only whoever changes the
sentences or the speakers runs this.

Why espeak-ng: it is the one Finnish synthesiser that is free, offline and apt-installable,
and its output carries no third-party rights, so the corpus can ship with the code. Its
voice variants with different pitch and rate give several clearly different "speakers",
which is what a multi-speaker VITS fine-tune needs to exercise its speaker embedding.

Layout written (the loader in :mod:`fintts.tts` reads it)::

    <out>/<speaker>/metadata.csv   id|text, training clips
    <out>/<speaker>/heldout.csv    id|text, a few clips whose text no speaker trains on
    <out>/<speaker>/wavs/<id>.flac 16 kHz mono 16-bit FLAC
    <out>/README.md                how it was made, and its licence

The text in the CSV files is the raw sentence (digits and all), so the text front end's
number expansion is exercised exactly as on user data.
"""

from __future__ import annotations

import argparse
import math
import random
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf
from scipy.signal import resample_poly

DEMO_DIR = Path(__file__).resolve().parent
DEFAULT_SENTENCES = DEMO_DIR / "sentences.txt"
DEFAULT_OUT = DEMO_DIR / "corpus"

SAMPLE_RATE = 16_000
# Silence trimming: frames quieter than this (relative to the loudest frame) at either end
# are cut, but a short margin is kept so that word-final plosives and fricatives survive.
TRIM_TOP_DB = 40.0
TRIM_FRAME_S = 0.010
TRIM_MARGIN_S = 0.050


@dataclass(frozen=True)
class DemoSpeaker:
    """One demo voice: an espeak-ng Finnish voice variant plus pitch and rate."""

    name: str
    voice: str  # espeak-ng -v, e.g. "fi+m3"
    pitch: int  # espeak-ng -p, 0..99
    speed: int  # espeak-ng -s, words per minute


# Two synthesiser families (the default formant voices and the Klatt voices), low and high
# pitch, slow and fast rate: distinct enough that speaker identity is learnable.
DEMO_SPEAKERS: tuple[DemoSpeaker, ...] = (
    DemoSpeaker("espeak_m3", "fi+m3", pitch=30, speed=175),
    DemoSpeaker("espeak_f5", "fi+f5", pitch=75, speed=190),
    DemoSpeaker("espeak_klatt3", "fi+klatt3", pitch=60, speed=195),
    DemoSpeaker("espeak_f2", "fi+f2", pitch=55, speed=165),
)


@dataclass(frozen=True)
class Clip:
    """One planned utterance: which speaker says which sentence, and in which split."""

    speaker: DemoSpeaker
    sentence_index: int
    text: str
    heldout: bool

    @property
    def clip_id(self) -> str:
        # The sentence index (not a running number) keeps ids stable and lets the same
        # sentence spoken by two speakers be recognised as such.
        return f"{self.speaker.name}_{self.sentence_index:04d}"


def read_sentences(path: Path) -> list[str]:
    """Sentences one per line; blank lines and ``#`` comment lines are skipped."""
    sentences = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        if "|" in text:
            raise ValueError(f"'|' is the metadata separator and cannot appear in: {text!r}")
        sentences.append(text)
    if len(set(sentences)) != len(sentences):
        raise ValueError(f"{path} has duplicate sentences; held-out text must be unseen")
    return sentences


def plan_clips(
    sentences: list[str],
    speakers: tuple[DemoSpeaker, ...],
    *,
    heldout_per_speaker: int,
    shared_fraction: float,
    seed: int,
) -> list[Clip]:
    """Assign sentences to speakers, deterministically for a given seed.

    The first ``heldout_per_speaker * len(speakers)`` shuffled sentences become held-out
    text, each spoken by one speaker and trained on by none, so validation measures
    generalisation to unseen text. Every other sentence goes to one speaker (round-robin,
    so speakers get equal shares) and a ``shared_fraction`` of them also to a second
    speaker: the same text in two voices is what teaches the model that voice and text
    are separate factors.
    """
    n_heldout = heldout_per_speaker * len(speakers)
    if n_heldout >= len(sentences):
        raise ValueError(f"{len(sentences)} sentences cannot spare {n_heldout} for held-out")
    rng = random.Random(seed)
    order = list(range(len(sentences)))
    rng.shuffle(order)
    clips = [
        Clip(speakers[k % len(speakers)], i, sentences[i], heldout=True)
        for k, i in enumerate(order[:n_heldout])
    ]
    training = order[n_heldout:]
    n_shared = round(shared_fraction * len(training))
    for k, i in enumerate(training):
        primary = k % len(speakers)
        clips.append(Clip(speakers[primary], i, sentences[i], heldout=False))
        if k < n_shared:
            second = (primary + 1 + rng.randrange(len(speakers) - 1)) % len(speakers)
            clips.append(Clip(speakers[second], i, sentences[i], heldout=False))
    return clips


def espeak_version() -> str:
    """The ``espeak-ng --version`` line without its local data path, for the README."""
    line = subprocess.run(
        [_espeak_binary(), "--version"], check=True, capture_output=True, text=True
    ).stdout.strip()
    return line.split("Data at:")[0].strip()


def _espeak_binary() -> str:
    binary = shutil.which("espeak-ng")
    if binary is None:
        raise RuntimeError("espeak-ng not found; install it (apt-get install espeak-ng)")
    return binary


def synthesize(text: str, speaker: DemoSpeaker, workdir: Path) -> tuple[np.ndarray, int]:
    """Run espeak-ng once; returns (float waveform, its native sample rate)."""
    wav_path = workdir / "clip.wav"
    # Text goes in on stdin (-b 1: UTF-8) so a sentence starting with '-' is not an option.
    subprocess.run(
        [_espeak_binary(), "-v", speaker.voice, "-p", str(speaker.pitch),
         "-s", str(speaker.speed), "-b", "1", "--stdin", "-w", str(wav_path)],
        input=text.encode("utf-8"), check=True, capture_output=True,
    )
    audio, rate = sf.read(wav_path, dtype="float64", always_2d=True)
    return audio.mean(axis=1), rate


def resample(audio: np.ndarray, rate: int, target: int = SAMPLE_RATE) -> np.ndarray:
    """Polyphase resampling (exact rational ratio, e.g. 22050 -> 16000 is 320/441)."""
    g = math.gcd(rate, target)
    return resample_poly(audio, target // g, rate // g)


def trim_silence(audio: np.ndarray, rate: int) -> np.ndarray:
    """Cut leading/trailing near-silence, keeping a short margin at each end."""
    frame = max(1, int(TRIM_FRAME_S * rate))
    n_frames = max(1, len(audio) // frame)
    frames = audio[: n_frames * frame].reshape(n_frames, frame)
    level_db = 10 * np.log10(np.mean(frames**2, axis=1) + 1e-12)
    loud = np.flatnonzero(level_db > level_db.max() - TRIM_TOP_DB)
    margin = int(TRIM_MARGIN_S * rate)
    start = max(0, loud[0] * frame - margin)
    end = min(len(audio), (loud[-1] + 1) * frame + margin)
    return audio[start:end]


def render_clip(clip: Clip, wav_dir: Path, workdir: Path) -> float:
    """Synthesise, resample, trim and write one clip; returns its duration in seconds."""
    audio, rate = synthesize(clip.text, clip.speaker, workdir)
    audio = trim_silence(resample(audio, rate), SAMPLE_RATE)
    # Polyphase filtering can overshoot a full-scale input slightly; clip before 16-bit.
    audio = np.clip(audio, -1.0, 1.0)
    # compression_level=1.0 is FLAC level 8: lossless either way, just smaller in git.
    sf.write(wav_dir / f"{clip.clip_id}.flac", audio, SAMPLE_RATE,
             format="FLAC", subtype="PCM_16", compression_level=1.0)
    return len(audio) / SAMPLE_RATE


def build_corpus(
    sentences: list[str],
    out_dir: Path,
    *,
    speakers: tuple[DemoSpeaker, ...] = DEMO_SPEAKERS,
    heldout_per_speaker: int = 5,
    shared_fraction: float = 0.05,
    seed: int = 0,
) -> dict[str, dict[str, float]]:
    """Write the corpus into ``out_dir`` (which must be absent or empty).

    Refusing a non-empty directory, rather than overwriting, keeps stale clips from an
    older sentence list out of a corpus that is going to be committed.
    Returns per-speaker stats: ``{speaker: {"clips", "heldout", "seconds"}}``.
    """
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()):
        raise FileExistsError(f"{out_dir} is not empty; delete it first to regenerate")
    version = espeak_version()
    clips = plan_clips(sentences, speakers, heldout_per_speaker=heldout_per_speaker,
                       shared_fraction=shared_fraction, seed=seed)
    stats = {s.name: {"clips": 0, "heldout": 0, "seconds": 0.0} for s in speakers}
    lines: dict[tuple[str, bool], list[str]] = {
        (s.name, h): [] for s in speakers for h in (False, True)
    }
    with tempfile.TemporaryDirectory() as tmp:
        for clip in sorted(clips, key=lambda c: (c.speaker.name, c.sentence_index)):
            wav_dir = out_dir / clip.speaker.name / "wavs"
            wav_dir.mkdir(parents=True, exist_ok=True)
            seconds = render_clip(clip, wav_dir, Path(tmp))
            lines[clip.speaker.name, clip.heldout].append(f"{clip.clip_id}|{clip.text}")
            entry = stats[clip.speaker.name]
            entry["heldout" if clip.heldout else "clips"] += 1
            entry["seconds"] += seconds
    for (name, heldout), rows in lines.items():
        (out_dir / name).mkdir(parents=True, exist_ok=True)
        csv = out_dir / name / ("heldout.csv" if heldout else "metadata.csv")
        csv.write_text("".join(row + "\n" for row in rows), encoding="utf-8")
    (out_dir / "README.md").write_text(
        _readme(speakers, stats, version, seed, heldout_per_speaker, shared_fraction), encoding="utf-8"
    )
    return stats


def _readme(speakers, stats, version, seed, heldout_per_speaker, shared_fraction) -> str:
    total_clips = sum(s["clips"] + s["heldout"] for s in stats.values())
    total_s = sum(s["seconds"] for s in stats.values())
    rows = "\n".join(
        f"| {s.name} | `{s.voice}` | {s.pitch} | {s.speed} | {stats[s.name]['clips']} "
        f"| {stats[s.name]['heldout']} | {stats[s.name]['seconds'] / 60:.1f} |"
        for s in speakers
    )
    return f"""# fintts demo corpus

A small multi-speaker Finnish corpus for smoke-testing the fine-tuning pipeline. It is
synthetic (espeak-ng), so a model trained on it sounds like espeak-ng: use it to check
that everything runs, not to judge voice quality.

Generated by `python -m fintts.tts.demo.make_corpus` (seed {seed}, {heldout_per_speaker}
held-out sentences per speaker, shared fraction {shared_fraction}) from
`fintts/tts/demo/sentences.txt` with {version} (`espeak-ng --version`).

- {total_clips} clips, {total_s / 3600:.3f} h, 16 kHz mono 16-bit FLAC, leading/trailing
  silence trimmed (frames {TRIM_TOP_DB:.0f} dB below the loudest, {TRIM_MARGIN_S * 1000:.0f} ms margin kept).
- Every sentence is spoken by one speaker, {shared_fraction:.0%} of the training sentences by a
  second speaker too.
- `<speaker>/metadata.csv`: training clips, `id|text`, text exactly as in `sentences.txt`
  (digits unexpanded).
- `<speaker>/heldout.csv`: validation clips whose text appears in no `metadata.csv`.

| speaker | espeak-ng voice | pitch (-p) | rate (-s, wpm) | training clips | held-out clips | minutes |
|---|---|---|---|---|---|---|
{rows}

## Licence

The text is public domain (Kalevala, Aleksis Kivi, *Maamme*, traditional proverbs) or was
written for fintts; see the header of `sentences.txt`. The audio is the output of the
espeak-ng program; espeak-ng's GPL-3.0 covers the program, not the speech it produces.
The corpus is distributed with fintts under the fintts licence (Apache-2.0).
"""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help="output directory, absent or empty (default: the packaged corpus)")
    parser.add_argument("--sentences", type=Path, default=DEFAULT_SENTENCES,
                        help="UTF-8 text file, one sentence per line, '#' comments")
    parser.add_argument("--heldout-per-speaker", type=int, default=5)
    parser.add_argument("--shared-fraction", type=float, default=0.05,
                        help="fraction of training sentences also spoken by a second speaker")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    stats = build_corpus(
        read_sentences(args.sentences), args.out,
        heldout_per_speaker=args.heldout_per_speaker,
        shared_fraction=args.shared_fraction, seed=args.seed,
    )
    for name, entry in stats.items():
        print(f"{name}: {entry['clips']} training + {entry['heldout']} held-out clips, "
              f"{entry['seconds'] / 60:.1f} min")


if __name__ == "__main__":
    main()
