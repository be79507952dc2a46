"""Monotonic alignment search (MAS): which text token each spectrogram frame belongs to.

VITS (Kim et al. 2021, §2.2.1, eq. 5) learns durations without an external aligner: it
picks the monotonic, non-skipping alignment ``A`` that maximises the log-likelihood of the
flow-transformed posterior latents ``z_p`` under the text prior ``N(m_p, exp(logs_p))``,
found by dynamic programming (Glow-TTS, Kim et al. 2020, Algorithm 1).

The DP is a chain of ``T_text x T_frames`` dependent max-and-add cells per item: nothing
in it is wide enough for a GPU, and a loop of tensor operations over frames costs a few
kernel launches per frame (thousands per micro-batch, bound by the CPU that launches them).
So, like the original Cython and Coqui's and Piper's ports, it runs as compiled code on the
CPU (numba), one item at a time inside the band of cells a valid path can use; on CUDA the
score table is copied to the host once per micro-batch and the 0/1 path back (one
synchronisation, two copies of a few MB each, a few milliseconds on PCIe against a
launch-bound loop of ~8 kernels per frame). ``benchmarks/mas.py`` measures the choice.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import torch
from torch import Tensor


@torch.no_grad()
def prior_log_likelihood(z_p: Tensor, m_p: Tensor, logs_p: Tensor) -> Tensor:
    """``log N(z_p[:, :, j]; m_p[:, :, i], diag(exp(logs_p[:, :, i]))²)`` for every token i, frame j.

    The expanded Gaussian log-density written as four matrix products, as the original
    code does, so the ``[B, T_text, T_frames]`` table costs two batched matmuls instead of
    a ``[B, C, T_text, T_frames]`` intermediate. Computed in float32 whatever the inputs.

    Args:
        z_p: ``[B, C, T_frames]`` posterior latents mapped through the flow.
        m_p, logs_p: ``[B, C, T_text]`` prior means and log standard deviations.

    Returns:
        ``[B, T_text, T_frames]`` log-likelihoods, summed over the ``C`` channels: a transposed
        view of a frame-major table, the layout :func:`monotonic_alignment_search` reads
        without a copy.
    """
    with torch.autocast(z_p.device.type, enabled=False):
        z_p, m_p, logs_p = z_p.float(), m_p.float(), logs_p.float()
        inverse_variance = torch.exp(-2.0 * logs_p)  # [B, C, T_text]
        constant = torch.sum(-0.5 * math.log(2 * math.pi) - logs_p, dim=1).unsqueeze(1)
        quadratic = torch.matmul(-0.5 * z_p.square().transpose(1, 2), inverse_variance)  # [B, T_frames, T_text]
        cross = torch.matmul(z_p.transpose(1, 2), m_p * inverse_variance)
        mean_term = torch.sum(-0.5 * m_p.square() * inverse_variance, dim=1).unsqueeze(1)
        return (constant + quadratic + cross + mean_term).transpose(1, 2)


@torch.no_grad()
def monotonic_alignment_search(log_likelihood: Tensor, text_mask: Tensor, frame_mask: Tensor) -> Tensor:
    """The hard alignment maximising the summed log-likelihood (VITS eq. 5 / Glow-TTS Alg. 1).

    Frame 0 belongs to token 0, the last valid frame to the last valid token, and from
    one frame to the next the token either stays or advances by one. When an item has at
    least as many frames as tokens every token gets at least one frame; otherwise the
    path is still monotonic but some tokens get none. Ties go to "stay", as in the
    original implementation.

    Args:
        log_likelihood: ``[B, T_text, T_frames]`` score of assigning frame j to token i
            (see :func:`prior_log_likelihood`). Values in padded rows/columns are ignored.
        text_mask: ``[B, T_text]`` bool, True for real tokens (a prefix of each row).
        frame_mask: ``[B, T_frames]`` bool, True for real frames (a prefix of each row).

    Returns:
        ``[B, T_text, T_frames]`` float32 0/1 alignment on ``log_likelihood``'s device: each
        valid frame is assigned to exactly one valid token, padding is zero.
    """
    text_lengths = text_mask.sum(dim=1).to("cpu", torch.int64).numpy()
    frame_lengths = frame_mask.sum(dim=1).to("cpu", torch.int64).numpy()
    # frames outermost, as the DP walks the table (free for prior_log_likelihood's, a copy for others)
    scores = log_likelihood.detach().transpose(1, 2).to("cpu", torch.float32).contiguous().numpy()
    return torch.from_numpy(_best_path(scores, text_lengths, frame_lengths)).to(log_likelihood.device)


@numba.njit(cache=True, nogil=True)
def _best_path(scores: np.ndarray, text_lengths: np.ndarray, frame_lengths: np.ndarray) -> np.ndarray:
    """The ``[B, T_text, T_frames]`` float32 0/1 path through ``scores`` (``[B, T_frames, T_text]``).

    ``value[frame, token]`` is the best score of a path ending at that cell, in float32 as the
    scores are. Only cells that a path from token 0 at frame 0 can reach (``token <= frame``)
    and that can still reach the last token at the last frame are computed; the others stay
    ``-inf`` and are never on the backtracked path. (With fewer frames than tokens no path
    reaches the last token: the search then keeps every reachable cell and the backtrack
    stays on the last token until a real path leads down.) Ties go to "stay".
    """
    batch, _, num_tokens = scores.shape
    path = np.zeros((batch, num_tokens, scores.shape[1]), dtype=np.float32)
    for b in range(batch):
        tokens, frames = text_lengths[b], frame_lengths[b]
        if tokens == 0 or frames == 0:
            continue
        value = np.full((frames, tokens), -np.inf, dtype=np.float32)
        value[0, 0] = scores[b, 0, 0]
        for frame in range(1, frames):
            low = max(0, tokens - frames + frame) if frames >= tokens else 0
            if low == 0:
                value[frame, 0] = value[frame - 1, 0] + scores[b, frame, 0]
                low = 1
            for token in range(low, min(tokens - 1, frame) + 1):
                value[frame, token] = max(value[frame - 1, token], value[frame - 1, token - 1]) + scores[b, frame, token]
        token = tokens - 1
        for frame in range(frames - 1, -1, -1):
            path[b, token, frame] = 1.0
            if token > 0 and frame > 0 and value[frame - 1, token - 1] > value[frame - 1, token]:
                token -= 1
    return path
