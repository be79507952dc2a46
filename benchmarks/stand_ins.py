"""Stand-ins for a real corpus and for ``facebook/mms-tts-fin``, for benchmarks on machines without them.

    python benchmarks/stand_ins.py OUT [--clips 200] [--seconds 6] [--rate 22050]

writes ``OUT/corpus`` and ``OUT/mms-sized``, so that the MMS config can be timed anywhere:

    fintts bench configs/mms-fin.yaml data=OUT/corpus init=OUT/mms-sized --compare

The corpus (LJSpeech layout) holds voiced-sounding synthetic clips — harmonic tones under a
syllable-rate envelope, 16-bit WAV, ``seconds`` ± 30 % long — with Finnish words from the
demo's sentences at about 15 characters a second, so text and audio lengths are those of read
speech; a step's cost depends on those lengths, not on what is said. The voice is
``VitsModel(VitsConfig())`` with random weights (transformers' defaults are the MMS-TTS
architecture) and the Finnish tokenizer, saved with ``save_pretrained`` as a downloaded
``facebook/mms-tts-fin`` would be, so it loads the same way and has the same size.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import soundfile as sf
import torch
from transformers import VitsConfig, VitsModel

from fintts.tts.text import FinnishText

SENTENCES = Path(__file__).resolve().parents[1] / "fintts" / "tts" / "demo" / "sentences.txt"
WORDS = [
    word.strip(".,!?;:'\"()")
    for line in SENTENCES.read_text(encoding="utf-8").splitlines() if line and not line.startswith("#")
    for word in line.split()
]
#: VitsConfig fields of a voice built in milliseconds, with the MMS architecture's every part (the GPU check's dry
#: run, and the tests that run configs/mms-fin.yaml as shipped on a CPU, where an MMS-sized step takes ~10 s).
SMALL_VOICE = {
    "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "ffn_dim": 32, "flow_size": 8,
    "spectrogram_bins": 65, "upsample_initial_channel": 32, "upsample_rates": [4, 4, 4], "upsample_kernel_sizes": [8, 8, 8],
    "resblock_kernel_sizes": [3], "resblock_dilation_sizes": [[1, 3]], "prior_encoder_num_flows": 2,
    "prior_encoder_num_wavenet_layers": 1, "posterior_encoder_num_wavenet_layers": 2, "duration_predictor_num_flows": 2,
    "duration_predictor_filter_channels": 16, "depth_separable_num_layers": 2,
}
#: the discriminator beside :data:`SMALL_VOICE` (a config's ``discriminator_config``).
SMALL_DISCRIMINATOR = {"periods": [2, 3], "scale_channels": [8, 16, 16], "scale_groups": [1, 2, 1], "period_channels": [8, 16]}


def make_corpus(folder: Path, clips: int, seconds: float, rate: int) -> Path:
    """An LJSpeech-layout corpus of voiced-sounding synthetic clips, ``seconds`` ± 30 % long."""
    rng = np.random.default_rng(0)
    (folder / "wavs").mkdir(parents=True)
    lines = []
    for n in range(clips):
        length = seconds * rng.uniform(0.7, 1.3)
        t = np.arange(int(length * rate)) / rate
        pitch = rng.uniform(100, 220)
        voice = sum(np.sin(2 * np.pi * pitch * k * t) / k for k in range(1, 6))
        envelope = 0.5 + 0.5 * np.sin(2 * np.pi * 4 * t) ** 2
        audio = (0.1 * voice * envelope + 0.003 * rng.standard_normal(t.size)).astype(np.float32)
        sf.write(folder / "wavs" / f"clip{n:05d}.wav", audio, rate, subtype="PCM_16")
        words = rng.choice([w for w in WORDS if w], size=max(2, int(length * 15 / 7)))
        lines.append(f"clip{n:05d}|{' '.join(words)}.")
    (folder / "metadata.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def make_init(folder: Path, **sizes) -> Path:
    """An MMS-sized voice with random weights, saved as a downloaded checkpoint would be.

    ``sizes`` (``VitsConfig`` fields, such as :data:`SMALL_VOICE`) make a smaller one, for a check that only needs
    the code paths (``benchmarks/gpu_check.py --dry-run``, the tests of the shipped configs).
    """
    text = FinnishText.default()
    torch.manual_seed(0)
    VitsModel(VitsConfig(vocab_size=text.vocab_size, **sizes)).save_pretrained(folder)
    text.save_tokenizer(folder)
    return folder


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--clips", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=6.0, help="mean clip length")
    parser.add_argument("--rate", type=int, default=22050)
    args = parser.parse_args(argv)
    corpus = make_corpus(args.out / "corpus", args.clips, args.seconds, args.rate)
    init = make_init(args.out / "mms-sized")
    print(f"wrote {corpus} ({args.clips} clips of ~{args.seconds:g} s at {args.rate} Hz) and {init}")


if __name__ == "__main__":
    main()
