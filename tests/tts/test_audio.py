"""Audio loading, saving, VITS spectrograms and the content-hashed feature cache."""

import io
import subprocess
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
from transformers import VitsConfig

from fintts.tts.audio import AudioError, load_audio, resampled_length
from fintts.tts.features import FeatureCache
from fintts.tts.spectrogram import Spectrogram, SpectrogramConfig, linear_spectrogram, mel_spectrogram, spec_to_mel
from fintts.tts.wav import save_wav, wav_bytes

MMS = SpectrogramConfig(sample_rate=16000, n_fft=1024, hop_length=256, win_length=1024, n_mels=80)


def _tone(seconds: float, rate: int, hz: float = 440.0, amplitude: float = 0.5) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (amplitude * np.sin(2 * np.pi * hz * t)).astype(np.float32)


def test_load_audio_mixes_to_mono_and_resamples(tmp_path: Path) -> None:
    path = tmp_path / "stereo.wav"
    left = _tone(1.0, 22050)
    sf.write(path, np.stack([left, left * 0.5], axis=1), 22050)

    wav = load_audio(path, 16000)

    assert wav.dtype == torch.float32 and wav.dim() == 1
    assert wav.shape[0] == 16000
    assert wav.abs().max() == pytest.approx(0.375, abs=0.01)  # mean of 0.5 and 0.25


def test_load_audio_reads_flac_and_ogg_at_native_rate(tmp_path: Path) -> None:
    for name in ("clip.flac", "clip.ogg"):
        sf.write(tmp_path / name, _tone(0.5, 16000), 16000)
        assert load_audio(tmp_path / name, 16000).shape[0] == 8000


@pytest.mark.parametrize(("content", "reason"), [(b"not audio at all" * 50, "cannot be read"), (b"", "cannot be read")])
def test_unreadable_audio_names_the_file(tmp_path: Path, content: bytes, reason: str) -> None:
    path = tmp_path / "broken.wav"
    path.write_bytes(content)
    with pytest.raises(AudioError, match=reason) as raised:
        load_audio(path, 16000)
    assert raised.value.path == path and str(path) in str(raised.value)


def test_audio_without_samples_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.wav"
    sf.write(path, np.zeros(0, dtype=np.float32), 16000)
    with pytest.raises(AudioError, match="no samples"):
        load_audio(path, 16000)


def test_save_wav_and_wav_bytes_write_16_bit_pcm(tmp_path: Path) -> None:
    wav = torch.from_numpy(_tone(0.25, 16000))
    save_wav(tmp_path / "out.wav", wav, 16000)

    info = sf.info(tmp_path / "out.wav")
    assert (info.subtype, info.samplerate, info.frames) == ("PCM_16", 16000, 4000)
    back, _ = sf.read(io.BytesIO(wav_bytes(wav, 16000)), dtype="float32")
    assert np.abs(back - wav.numpy()).max() < 1e-4
    assert wav_bytes(wav, 16000) == (tmp_path / "out.wav").read_bytes()


def test_config_from_vits_config_matches_mms() -> None:
    assert SpectrogramConfig.from_vits_config(VitsConfig()) == MMS


@pytest.mark.parametrize("samples", [385, 1000, 16000, 16255, 16256])
def test_frames_are_samples_over_hop(samples: int) -> None:
    wav = torch.randn(samples) * 0.1
    assert linear_spectrogram(wav, MMS).shape == (513, samples // 256)
    assert mel_spectrogram(wav, MMS).shape == (80, samples // 256)


def test_sine_peaks_in_its_frequency_bin_and_batches_agree() -> None:
    wav = torch.from_numpy(_tone(1.0, 16000, hz=1000.0))
    spectrogram = Spectrogram(MMS)

    spec = spectrogram.linear(wav)
    batch = spectrogram.linear(torch.stack([wav, 0.5 * wav]))

    assert int(spec.mean(dim=-1).argmax()) == 64  # 1000 Hz / (16000 Hz / 1024)
    assert batch.shape == (2, 513, 62)
    torch.testing.assert_close(batch[0], spec)
    torch.testing.assert_close(spectrogram.mel(wav), spec_to_mel(spec, MMS))


def test_silence_reaches_the_magnitude_floor() -> None:
    spec = linear_spectrogram(torch.zeros(4096), MMS)
    torch.testing.assert_close(spec, torch.full_like(spec, 1e-3))


def test_spectrograms_stay_float32_under_autocast() -> None:
    wav = torch.from_numpy(_tone(0.5, 16000))
    spectrogram = Spectrogram(MMS)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        mel = spectrogram.mel(wav)
    assert mel.dtype == torch.float32
    torch.testing.assert_close(mel, spectrogram.mel(wav))


def test_too_short_audio_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="too short"):
        linear_spectrogram(torch.zeros(100), MMS)


def test_feature_cache_serves_repeats_from_disk(tmp_path: Path) -> None:
    clip = tmp_path / "clip.wav"
    sf.write(clip, _tone(1.0, 22050), 22050)
    cache = FeatureCache(tmp_path / "cache", MMS)

    first = cache.get(clip)
    second = cache.get(clip)

    assert (cache.misses, cache.hits) == (1, 1)
    assert first.wav.shape == (16000,) and first.spec.shape == (513, 62)
    torch.testing.assert_close(second.wav, first.wav)
    torch.testing.assert_close(second.spec, first.spec)
    assert len(list(cache.folder.glob("*.safetensors"))) == 1

    fresh = FeatureCache(tmp_path / "cache", MMS)  # another session, same folder
    torch.testing.assert_close(fresh.get(clip).spec, first.spec)
    assert (fresh.misses, fresh.hits) == (0, 1)


def test_feature_cache_recomputes_edited_clips_and_other_settings(tmp_path: Path) -> None:
    clip = tmp_path / "clip.wav"
    sf.write(clip, _tone(1.0, 16000, hz=440.0), 16000)
    cache = FeatureCache(tmp_path / "cache", MMS)
    before = cache.get(clip)

    sf.write(clip, _tone(1.0, 16000, hz=880.0), 16000)
    after = cache.get(clip)

    assert cache.misses == 2
    assert not torch.allclose(before.spec, after.spec)

    other = FeatureCache(tmp_path / "cache", SpectrogramConfig(16000, 512, 128, 512, 80))
    assert other.folder != cache.folder
    assert other.get(clip).spec.shape == (257, 125)
    assert other.misses == 1


@pytest.mark.process
def test_stretches_of_one_recording_are_read_and_cached_each_as_its_own_clip(tmp_path: Path) -> None:
    recording = tmp_path / "session.mp3"
    low, high = _tone(1.0, 48000, hz=220.0), _tone(1.5, 48000, hz=1760.0)
    sf.write(tmp_path / "session.wav", np.concatenate([low, high]), 48000)
    subprocess.run(["ffmpeg", "-loglevel", "error", "-i", str(tmp_path / "session.wav"), "-b:a", "128k", str(recording)],
                   check=True)
    cache = FeatureCache(tmp_path / "cache", MMS)
    first, second = cache.get(recording, (0.0, 1.0)), cache.get(recording, (1.0, 2.5))
    assert first.wav.shape == (16000,) and second.wav.shape == (24000,)
    assert len(second.wav) == resampled_length(recording, 16000, (1.0, 2.5))
    assert cache.entry(recording, (0.0, 1.0)) != cache.entry(recording, (1.0, 2.5)) != cache.entry(recording)
    # the low tone's energy sits in the first stretch only
    assert first.spec[:10].sum() > 10 * second.spec[:10].sum()
    with pytest.raises(AudioError, match="ends after the recording"):
        load_audio(recording, 16000, (2.0, 9.0))


def test_feature_cache_recomputes_a_damaged_entry(tmp_path: Path) -> None:
    clip = tmp_path / "clip.wav"
    sf.write(clip, _tone(1.0, 16000), 16000)
    cache = FeatureCache(tmp_path / "cache", MMS)
    good = cache.get(clip)
    next(cache.folder.glob("*.safetensors")).write_bytes(b"truncated")

    torch.testing.assert_close(cache.get(clip).spec, good.spec)
    assert cache.misses == 2


def test_feature_cache_entries_are_read_back_without_rehashing_and_survive_loss(tmp_path: Path) -> None:
    clip = tmp_path / "clip.wav"
    sf.write(clip, _tone(1.0, 16000), 16000)
    cache = FeatureCache(tmp_path / "cache", MMS)
    entry, first = cache.lookup(clip)
    assert entry.is_file() and entry.parent == cache.folder
    torch.testing.assert_close(cache.load(entry, clip).spec, first.spec)
    assert (cache.misses, cache.hits) == (1, 1)
    entry.unlink()  # e.g. a cache folder cleaned between epochs
    torch.testing.assert_close(cache.load(entry, clip).spec, first.spec)
    assert cache.misses == 2 and entry.is_file()


@pytest.mark.parametrize("rate", [16000, 22050, 44100, 24000])
@pytest.mark.parametrize("seconds", [0.77, 2.0])
def test_resampled_length_from_the_header_is_what_loading_gives(tmp_path: Path, rate: int, seconds: float) -> None:
    clip = tmp_path / "clip.flac"
    sf.write(clip, _tone(seconds, rate), rate)
    assert resampled_length(clip, 16000) == len(load_audio(clip, 16000))
