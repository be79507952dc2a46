"""Objective quality signals: mel cepstral distortion (MCD) with DTW alignment, and the noise floor.

Training loss alone does not say whether a fine-tuned voice got closer to the target
speaker; MCD between synthesised and reference held-out utterances does, and it needs
no network, no ASR model and no listener, so it runs inside a quota-limited session.

This is the common MFCC-based approximation of MCD, not SPTK ``mcep``: mel-cepstra come
from a DCT of the log mel-filterbank spectrum instead of mel-generalised cepstral
analysis, because pysptk is a compiled extra dependency and nothing may be downloaded at
evaluation time. The DCT is scaled so that the coefficients are cepstral coefficients of
the (mel-warped) log *amplitude* spectrum, ``log|X| ~ c0 + 2 * sum_m c_m cos(m w)``, which
is the quantity the MCD constant ``10 / ln 10 * sqrt(2 * ...)`` was defined for; absolute
values are therefore in the same range as SPTK-based MCD (a few dB for close speech) but
not identical to it. Compare systems only with numbers from this same function.

MCD drops the frame energy ``c0`` on purpose, so it cannot hear a voice that says the right
sounds over a constant hiss: :func:`noise_floor_db` measures exactly that.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from scipy.fft import dct
from scipy.spatial.distance import cdist

if TYPE_CHECKING:
    import torch

# 10/ln(10) * sqrt(2): per-frame MCD is this times the Euclidean distance of the cepstra.
_MCD_SCALE = 10.0 / math.log(10.0) * math.sqrt(2.0)
# Power floor before the log (-100 dB re full scale): digital silence must not give -inf.
_POWER_FLOOR = 1e-10


def mel_cepstral_distortion(
    reference: np.ndarray | torch.Tensor,
    synthesized: np.ndarray | torch.Tensor,
    sample_rate: int,
    *,
    n_mfcc: int = 13,
    n_mels: int = 40,
    frame_ms: float = 25.0,
    hop_ms: float = 10.0,
    trim_db: float | None = None,
) -> float:
    """MCD in dB between two mono waveforms at the same ``sample_rate``.

    Cepstra ``c0 .. c{n_mfcc-1}`` are computed per frame and ``c0`` (energy) is dropped,
    so loudness differences do not count. The two sequences are aligned with DTW on the
    Euclidean cepstral distance (durations of synthesised speech never match the
    reference), and the result is the mean over the DTW path of
    ``10 / ln(10) * sqrt(2 * sum_{m>=1} (c_ref[m] - c_syn[m])**2)``.

    ``trim_db``: if given, leading and trailing frames more than ``trim_db`` below each
    utterance's loudest frame are dropped first, so differing silence padding is not
    scored. Off by default: the demo corpus is already trimmed and VITS adds little
    silence, and the untrimmed number is the one other tools report.

    Inputs may be numpy arrays or torch tensors of shape ``(T,)`` or ``(1, T)``; resample
    both to one rate first.
    """
    ref = _mel_cepstra(_as_mono(reference), sample_rate, n_mfcc, n_mels, frame_ms, hop_ms, trim_db)
    syn = _mel_cepstra(_as_mono(synthesized), sample_rate, n_mfcc, n_mels, frame_ms, hop_ms, trim_db)
    return cepstral_distortion(ref, syn)


def mel_cepstra(signal: np.ndarray | torch.Tensor, sample_rate: int) -> np.ndarray:
    """A clip's cepstra as :func:`mel_cepstral_distortion` computes them (its defaults), to compare one clip with many
    without computing them again for each pair (:func:`cepstral_distortion`)."""
    return _mel_cepstra(_as_mono(signal), sample_rate, 13, 40, 25.0, 10.0, None)


def cepstral_distortion(reference: np.ndarray, synthesized: np.ndarray) -> float:
    """MCD in dB between two clips' :func:`mel_cepstra` (c0 dropped, DTW-aligned): :func:`mel_cepstral_distortion`'s figure."""
    cost = cdist(reference[:, 1:], synthesized[:, 1:])  # exact per-pair distance: MCD(x, x) is exactly 0
    rows, cols = np.asarray(dtw_path(cost)).T
    return float(_MCD_SCALE * cost[rows, cols].mean())


def noise_floor_db(audio: np.ndarray | torch.Tensor, sample_rate: int, *, frame_ms: float = 20.0, share: float = 0.1) -> float:
    """How far the quietest moments of a clip lie below its loudest, in dB (higher is cleaner).

    The clip is cut into consecutive, non-overlapping ``frame_ms`` frames (a trailing
    partial frame is dropped; a clip shorter than one frame is an error). Each frame's
    power is its variance (the mean square about the frame's own mean), floored at 1e-10
    (-100 dB re full scale, about the quantisation noise of 16-bit audio) so that digital
    silence reads as the quietest a 16-bit file can be instead of -inf. The frames are
    sorted by power; the loudest and the quietest ``share`` of them (at least one frame
    each) are pooled by their *mean power*, and the result is ``10 log10(loud / quiet)``.

    The variance, not the plain mean square, because a constant offset is not noise: it
    is inaudible, a spectrogram does not show it, and a HiFi-GAN decoder emits one where
    it should be silent (the demo voice's is about -59 dBFS, invisible to the mel loss
    whose filters give 0 Hz no weight). Counted, it would cap the floor of a voice whose
    silences are otherwise clean (see ``benchmarks/noise_sources.py``).

    Why this shape: speech has silences (pauses, stop closures) and a recording or a
    clean synthesis keeps them near silent, while a voice with a broadband noise floor
    fills them with hiss at a roughly constant level. The quietest tenth of frames is
    where that hiss is all there is, the loudest tenth is the voice at full strength, so
    the difference is a signal-to-floor ratio that needs no reference and no alignment.
    Pooling by mean power rather than mean dB keeps a few digitally silent frames from
    dominating (in dB they are all at the -100 floor). A clean recording scores 60-100
    dB, a voice over a steady hiss scores about its speech-to-hiss ratio; 0 dB means the
    clip is as loud everywhere (a steady tone, a drone or pure noise).
    """
    samples = _as_mono(audio)
    frame = int(round(frame_ms * sample_rate / 1000))
    count = len(samples) // frame if frame > 0 else 0
    if count == 0:
        raise ValueError(f"noise_floor_db needs at least one {frame_ms:g} ms frame; got {len(samples)} samples at {sample_rate} Hz")
    power = np.sort(np.maximum(np.var(samples[: count * frame].reshape(count, frame), axis=1), _POWER_FLOOR))
    tenth = max(1, int(round(share * count)))
    return float(10 * np.log10(power[-tenth:].mean() / power[:tenth].mean()))


def nearest_reference(
    synthesized: np.ndarray | torch.Tensor,
    references: Sequence[np.ndarray | torch.Tensor],
    sample_rate: int,
) -> tuple[int, list[float]]:
    """Which of ``references`` the synthesised clip is closest to by MCD, and every MCD.

    Used as a content check that MCD alone is not: synthesise the text of reference
    ``k`` and see whether reference ``k`` — rather than another sentence in the same
    voice — is the nearest. A voice that only matches the speaker's timbre, or mumbles,
    picks the wrong sentence about as often as chance (``1 / len(references)``); a voice
    that says the right sounds in the right order picks its own. It is a proxy for
    intelligibility that needs no ASR model, not a measure of it.
    """
    if not references:
        raise ValueError("nearest_reference needs at least one reference")
    scores = [mel_cepstral_distortion(reference, synthesized, sample_rate) for reference in references]
    return int(np.argmin(scores)), scores


def dtw_path(cost: np.ndarray) -> list[tuple[int, int]]:
    """Minimum-total-cost monotone path through ``cost`` from (0, 0) to (N-1, M-1).

    Steps are (1, 0), (0, 1) and (1, 1), unweighted. Rows are filled one at a time; within
    a row the horizontal recursion ``D[j] = min(A[j], D[j-1] + cost[i, j])`` is a prefix
    minimum after subtracting the row's cumulative cost, so each row is a few vectorised
    numpy calls (a 500 x 500 matrix takes milliseconds). Ties prefer the diagonal step.
    """
    cost = np.asarray(cost, dtype=np.float64)
    if cost.ndim != 2 or 0 in cost.shape:
        raise ValueError(f"cost must be a non-empty 2-D matrix, got shape {cost.shape}")
    n, m = cost.shape
    acc = np.empty_like(cost)
    acc[0] = np.cumsum(cost[0])
    for i in range(1, n):
        from_above = acc[i - 1].copy()
        from_above[1:] = np.minimum(acc[i - 1, 1:], acc[i - 1, :-1])
        entry = cost[i] + from_above
        running = np.cumsum(cost[i])
        acc[i] = running + np.minimum.accumulate(entry - running)

    path = [(n - 1, m - 1)]
    i, j = n - 1, m - 1
    while i > 0 or j > 0:
        if i == 0:
            j -= 1
        elif j == 0:
            i -= 1
        else:
            step = int(np.argmin((acc[i - 1, j - 1], acc[i - 1, j], acc[i, j - 1])))
            i, j = (i - 1, j - 1) if step == 0 else (i - 1, j) if step == 1 else (i, j - 1)
        path.append((i, j))
    path.reverse()
    return path


def _as_mono(signal: np.ndarray | torch.Tensor) -> np.ndarray:
    if hasattr(signal, "detach"):  # torch.Tensor, without importing torch here
        signal = signal.detach().cpu().numpy()
    audio = np.squeeze(np.asarray(signal, dtype=np.float64))
    if audio.ndim != 1:
        raise ValueError(f"expected a mono waveform, got shape {np.shape(signal)}")
    return audio


def _mel_cepstra(
    audio: np.ndarray,
    sample_rate: int,
    n_mfcc: int,
    n_mels: int,
    frame_ms: float,
    hop_ms: float,
    trim_db: float | None,
) -> np.ndarray:
    """(frames, n_mfcc) cepstra of the log mel amplitude spectrum, c0 included."""
    if not 1 < n_mfcc <= n_mels:
        raise ValueError(f"need 1 < n_mfcc <= n_mels, got {n_mfcc} and {n_mels}")
    win = int(round(frame_ms * sample_rate / 1000))
    hop = int(round(hop_ms * sample_rate / 1000))
    n_fft = 1 << (win - 1).bit_length()
    if len(audio) < win:
        audio = np.pad(audio, (0, win - len(audio)))
    frames = np.lib.stride_tricks.sliding_window_view(audio, win)[::hop]
    power = np.abs(np.fft.rfft(frames * np.hanning(win + 1)[:-1], n=n_fft)) ** 2
    mel_power = power @ _mel_filterbank(sample_rate, n_fft, n_mels).T
    if trim_db is not None:
        level_db = 10 * np.log10(mel_power.sum(axis=1) + _POWER_FLOOR)
        loud = np.flatnonzero(level_db > level_db.max() - trim_db)
        mel_power = mel_power[loud[0] : loud[-1] + 1]
    log_amplitude = 0.5 * np.log(np.maximum(mel_power, _POWER_FLOOR))
    # DCT-II / (2 * n_mels) turns the log spectrum sampled at band centres into cepstral
    # coefficients (see module docstring), not merely "an MFCC" of arbitrary scale.
    return dct(log_amplitude, type=2, axis=1)[:, :n_mfcc] / (2 * n_mels)


def _mel_filterbank(sample_rate: int, n_fft: int, n_mels: int) -> np.ndarray:
    """(n_mels, n_fft // 2 + 1) triangular HTK-mel filters spanning 0 .. Nyquist."""
    def hz_to_mel(hz):
        return 2595.0 * np.log10(1.0 + np.asarray(hz) / 700.0)

    def mel_to_hz(mel):
        return 700.0 * (10.0 ** (np.asarray(mel) / 2595.0) - 1.0)

    edges = mel_to_hz(np.linspace(0.0, hz_to_mel(sample_rate / 2), n_mels + 2))
    bins = np.fft.rfftfreq(n_fft, 1.0 / sample_rate)
    lower, centre, upper = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    rising = (bins - lower) / (centre - lower)
    falling = (upper - bins) / (upper - centre)
    return np.maximum(0.0, np.minimum(rising, falling))
