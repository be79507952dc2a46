"""Monotonic alignment search (MAS): which text token each spectrogram frame belongs to.

VITS (Kim et al. 2021, §2.2.1, eq. 5) learns durations without an external aligner: it
picks the monotonic, non-skipping alignment ``A`` that maximises the log-likelihood of the
flow-transformed posterior latents ``z_p`` under the text prior ``N(m_p, exp(logs_p))``,
found by dynamic programming (Glow-TTS, Kim et al. 2020, Algorithm 1).

The original code runs that DP in Cython, one cell at a time, on the CPU. Here the DP
is vectorised over the batch and the text axis and loops only over frames: ``T_frames``
iterations of a handful of tensor operations, no host synchronisation inside the loop,
so it stays on the GPU next to the tensors it aligns. The backtrack is vectorised over
the batch in the same way.
"""

from __future__ import annotations

import math

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
        ``[B, T_text, T_frames]`` log-likelihoods, summed over the ``C`` channels.
    """
    with torch.autocast(z_p.device.type, enabled=False):
        z_p, m_p, logs_p = z_p.float(), m_p.float(), logs_p.float()
        inverse_variance = torch.exp(-2.0 * logs_p)  # [B, C, T_text]
        constant = torch.sum(-0.5 * math.log(2 * math.pi) - logs_p, dim=1).unsqueeze(-1)
        quadratic = torch.matmul(inverse_variance.transpose(1, 2), -0.5 * z_p.square())
        cross = torch.matmul((m_p * inverse_variance).transpose(1, 2), z_p)
        mean_term = torch.sum(-0.5 * m_p.square() * inverse_variance, dim=1).unsqueeze(-1)
        return constant + quadratic + cross + mean_term


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
        ``[B, T_text, T_frames]`` float32 0/1 alignment: each valid frame is assigned to
        exactly one valid token, padding is zero.
    """
    batch, num_tokens, num_frames = log_likelihood.shape
    device = log_likelihood.device
    scores = log_likelihood.float().permute(2, 0, 1).contiguous()  # [T_frames, B, T_text]
    text_lengths = text_mask.sum(dim=1)
    frame_lengths = frame_mask.sum(dim=1)

    # Forward pass. best[b, i] is the best score of a path that ends at token i on the
    # current frame. Cells of padded tokens never feed real tokens (the path only moves
    # up the text axis) and padded frames come after the backtrack's start, so padding
    # needs no masking here.
    came_from_previous_token = torch.zeros(num_frames, batch, num_tokens, dtype=torch.uint8, device=device)
    best = torch.full((batch, num_tokens), -math.inf, device=device)
    best[:, 0] = scores[0, :, 0]
    minus_inf_column = torch.full((batch, 1), -math.inf, device=device)
    for frame in range(1, num_frames):
        advance = torch.cat([minus_inf_column, best[:, :-1]], dim=1)
        torch.gt(advance, best, out=came_from_previous_token[frame])
        best = torch.maximum(best, advance) + scores[frame]

    # Backtrack from the last valid token at the last valid frame of each item; frames
    # past an item's end never move its token.
    inside = torch.arange(num_frames, device=device).view(-1, 1) < frame_lengths.view(1, -1)  # [T_frames, B]
    came_from_previous_token *= inside.unsqueeze(-1)
    token = (text_lengths - 1).clamp_min(0)
    token_of_frame = torch.empty(batch, num_frames, dtype=torch.long, device=device)
    for frame in range(num_frames - 1, -1, -1):
        token_of_frame[:, frame] = token
        token = token - came_from_previous_token[frame].gather(1, token.unsqueeze(1)).squeeze(1)

    token_ids = torch.arange(num_tokens, device=device)
    path = token_of_frame.unsqueeze(1) == token_ids.view(1, -1, 1)
    path &= frame_mask.bool().unsqueeze(1) & text_mask.bool().unsqueeze(2)
    return path.float()
