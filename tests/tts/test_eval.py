"""MCD and DTW: zero on identity, monotone in noise, alignment-invariant, DTW optimal; the noise floor."""

import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

from fintts.tts.demo import make_corpus
from fintts.tts.eval import dtw_path, mel_cepstral_distortion, nearest_reference, noise_floor_db

SR = 16_000


@pytest.fixture(scope="session")
def clip() -> np.ndarray:
    wav = next(iter(sorted((make_corpus.DEFAULT_OUT / "espeak_m3" / "wavs").glob("*.flac"))))
    audio, rate = sf.read(wav, dtype="float64")
    assert rate == SR
    return audio


def test_mcd_of_identical_signals_is_zero(clip):
    assert mel_cepstral_distortion(clip, clip, SR) == 0.0
    as_tensor = torch.from_numpy(clip).float().unsqueeze(0)
    assert mel_cepstral_distortion(as_tensor, as_tensor, SR) == 0.0


def test_mcd_ignores_loudness(clip):
    # c0 is excluded, so a gain change scores ~0; only frames near the power floor
    # (digital silence at the clip edges) keep it from being exactly 0.
    assert mel_cepstral_distortion(clip, 0.5 * clip, SR) < 0.05


def test_mcd_grows_with_noise(clip):
    noise = np.random.default_rng(0).standard_normal(len(clip))
    power = np.mean(clip**2)
    scores = [
        mel_cepstral_distortion(clip, clip + noise * np.sqrt(power / 10 ** (snr / 10)), SR)
        for snr in (30, 20, 10)
    ]
    assert 0 < scores[0] < scores[1] < scores[2]


def test_nearest_reference_finds_the_same_sentence_said_differently():
    clips = sorted((make_corpus.DEFAULT_OUT / "espeak_m3" / "wavs").glob("*.flac"))[:6]
    references = [sf.read(path, dtype="float64")[0] for path in clips]
    noise = np.random.default_rng(0)
    for k, reference in enumerate(references):
        # 20% slower (every fifth 10 ms block said twice: pitch and formants unchanged), noisy at 20 dB SNR
        blocks = np.array_split(reference, len(reference) // 160)
        stretched = np.concatenate([piece for n, block in enumerate(blocks) for piece in [block] * (1 + (n % 5 == 0))])
        said = stretched + noise.standard_normal(len(stretched)) * np.sqrt(np.mean(reference**2) / 100)
        nearest, scores = nearest_reference(said, references, SR)
        assert nearest == k and len(scores) == len(references)
        assert scores[k] == min(scores) < sorted(scores)[1]


def test_mcd_rejects_multichannel(clip):
    with pytest.raises(ValueError):
        mel_cepstral_distortion(np.stack([clip, clip]), clip, SR)


@pytest.mark.process
@pytest.mark.skipif(shutil.which("espeak-ng") is None,
                    reason="espeak-ng not installed (apt-get install espeak-ng)")
def test_dtw_aligns_time_stretched_speech():
    def speak(text, speed):
        voice = make_corpus.DemoSpeaker("test", "fi+m3", pitch=30, speed=speed)
        with tempfile.TemporaryDirectory() as tmp:
            audio, rate = make_corpus.synthesize(text, voice, Path(tmp))
        return make_corpus.trim_silence(make_corpus.resample(audio, rate), SR)

    sentence = "Kuin kotimaa tää pohjoinen, maa kallis isien."
    normal, slow = speak(sentence, 175), speak(sentence, 120)
    other = speak("Hiljaa hyvä tulee, sanoi vanha mies.", 175)
    assert len(slow) > 1.3 * len(normal)
    same = mel_cepstral_distortion(normal, slow, SR)
    different = mel_cepstral_distortion(normal, other, SR)
    assert same < different / 3, (same, different)


def _all_paths(n, m):
    """Every monotone (1,0)/(0,1)/(1,1) path from (0,0) to (n-1,m-1), by enumeration."""
    if (n, m) == (1, 1):
        yield [(0, 0)]
        return
    for di, dj in ((1, 0), (0, 1), (1, 1)):
        if n - di >= 1 and m - dj >= 1:
            for path in _all_paths(n - di, m - dj):
                yield path + [(n - 1, m - 1)]


@pytest.mark.parametrize("shape", [(1, 1), (1, 4), (4, 1), (3, 5), (5, 4), (5, 5)])
def test_dtw_matches_brute_force(shape):
    cost = np.random.default_rng(sum(shape)).integers(0, 10, size=shape).astype(float)
    path = dtw_path(cost)
    assert path[0] == (0, 0) and path[-1] == (shape[0] - 1, shape[1] - 1)
    steps = {(b[0] - a[0], b[1] - a[1]) for a, b in zip(path, path[1:])}
    assert steps <= {(1, 0), (0, 1), (1, 1)}
    best = min(sum(cost[i, j] for i, j in p) for p in _all_paths(*shape))
    assert sum(cost[i, j] for i, j in path) == best


def test_dtw_of_self_distance_is_the_diagonal():
    features = np.random.default_rng(0).standard_normal((30, 12))
    cost = np.linalg.norm(features[:, None] - features[None], axis=-1)
    assert dtw_path(cost) == [(i, i) for i in range(30)]


def test_dtw_repeats_frames_of_the_shorter_sequence():
    # b is a with every frame doubled: each b frame must map to its source frame in a.
    a = np.arange(6, dtype=float)[:, None]
    b = np.repeat(a, 2, axis=0)
    path = dtw_path(np.abs(a - b.T))
    assert path == [(j // 2, j) for j in range(12)]


def _tone_with_a_gap(seconds=2.0, amplitude=0.5):
    """A 250 Hz tone (5 whole periods per 20 ms frame: power amplitude²/2 in every frame)
    with its second quarter digitally silent."""
    t = np.arange(int(seconds * SR)) / SR
    tone = amplitude * np.sin(2 * np.pi * 250 * t)
    tone[len(tone) // 4 : len(tone) // 2] = 0.0
    return tone


def test_noise_floor_of_a_silent_gap_is_the_16_bit_floor():
    # quietest tenth: digital silence, read as 1e-10 (-100 dBFS); loudest: the tone at 0.125 (-9 dBFS)
    assert noise_floor_db(_tone_with_a_gap(), SR) == pytest.approx(10 * np.log10(0.125 / 1e-10), abs=0.05)


def test_noise_floor_is_the_level_of_a_steady_hiss_below_the_voice():
    # the quietest tenth is the hiss alone in the gap (its quietest frames: ~0.3 dB below its mean)
    tone = _tone_with_a_gap()
    for below in (20, 40, 60):
        hiss = np.random.default_rng(below).standard_normal(len(tone)) * np.sqrt(0.125 * 10 ** (-below / 10))
        assert noise_floor_db(tone + hiss, SR) == pytest.approx(below, abs=0.6)


def test_noise_floor_does_not_count_a_constant_offset_as_noise():
    # an inaudible DC offset at -59 dBFS in the gap (as a HiFi-GAN decoder emits) leaves it silent
    assert noise_floor_db(_tone_with_a_gap() - 1.1e-3, SR) == pytest.approx(noise_floor_db(_tone_with_a_gap(), SR), abs=0.05)


def test_noise_floor_ignores_gain_and_reads_a_steady_sound_as_zero():
    tone = _tone_with_a_gap() + 1e-3 * np.random.default_rng(0).standard_normal(2 * SR)
    assert noise_floor_db(0.1 * tone, SR) == pytest.approx(noise_floor_db(tone, SR), abs=1e-9)
    steady = np.sin(2 * np.pi * 250 * np.arange(SR) / SR)
    assert noise_floor_db(torch.from_numpy(steady).unsqueeze(0), SR) == pytest.approx(0.0, abs=1e-6)


def test_noise_floor_needs_one_frame():
    assert np.isfinite(noise_floor_db(np.ones(320), SR))
    with pytest.raises(ValueError, match="20 ms frame"):
        noise_floor_db(np.ones(319), SR)


@pytest.mark.process
def test_eval_store_imports_no_task_module_a_pulled_checkpoint_names(tmp_path):
    """A run folder's config.yaml came from the Hub: `task: module:Class` in it is refused, never imported."""
    from fintts.train.run import checkpoint
    from trainer_helpers import cli

    marker = tmp_path / "imported"
    (tmp_path / "planted_task.py").write_text(f"open({str(marker)!r}, 'w').close()\nclass PlantedTask: pass\n")
    checkpoint.save(tmp_path / "pulled", checkpoint.name_for_step(30),
                    lambda folder: (folder / "config.yaml").write_text("task: planted_task:PlantedTask\n"))
    result = cli("eval", "--store", "pulled", cwd=tmp_path)  # the working folder is on a `python -m` process's path
    assert not marker.exists()
    assert result.returncode == 2 and "'planted_task:PlantedTask' is not an installed task" in result.stderr, result.stderr
    assert "fintts.tasks" in result.stderr
