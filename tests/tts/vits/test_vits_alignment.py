"""Monotonic alignment search against brute force, and the prior log-likelihood table."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from fintts.tts.vits.alignment import monotonic_alignment_search, prior_log_likelihood


def _all_monotonic_alignments(num_tokens: int, num_frames: int):
    """Every way to give each token ≥1 consecutive frames, in order (compositions of num_frames)."""
    for cuts in itertools.combinations(range(1, num_frames), num_tokens - 1):
        bounds = (0, *cuts, num_frames)
        yield [bounds[i + 1] - bounds[i] for i in range(num_tokens)]


def _best_score(scores: torch.Tensor) -> float:
    num_tokens, num_frames = scores.shape
    best = -math.inf
    for durations in _all_monotonic_alignments(num_tokens, num_frames):
        frame, total = 0, 0.0
        for token, duration in enumerate(durations):
            total += float(scores[token, frame : frame + duration].sum())
            frame += duration
        best = max(best, total)
    return best


def _check_valid_path(path: torch.Tensor, num_tokens: int, num_frames: int) -> None:
    valid = path[:num_tokens, :num_frames]
    assert path.sum() == valid.sum(), "padding must stay unassigned"
    assert torch.all(valid.sum(dim=0) == 1), "each frame belongs to exactly one token"
    assert torch.all(valid.sum(dim=1) >= 1), "each token gets at least one frame"
    tokens = valid.argmax(dim=0)
    steps = tokens[1:] - tokens[:-1]
    assert tokens[0] == 0 and tokens[-1] == num_tokens - 1
    assert torch.all((steps == 0) | (steps == 1)), "monotonic, no skipped tokens"


@pytest.mark.parametrize("seed", range(6))
def test_alignment_matches_brute_force_on_padded_batches(seed):
    generator = torch.Generator().manual_seed(seed)
    batch, max_tokens, max_frames = 8, 4, 7
    text_lengths = torch.randint(1, max_tokens + 1, (batch,), generator=generator)
    frame_lengths = torch.stack(
        [torch.randint(int(n), max_frames + 1, (1,), generator=generator)[0] for n in text_lengths]
    )
    scores = torch.randn(batch, max_tokens, max_frames, generator=generator) * 3
    # Integer-valued scores force ties, where paths may differ but the best score may not.
    if seed % 2:
        scores = scores.round()
    text_mask = torch.arange(max_tokens)[None] < text_lengths[:, None]
    frame_mask = torch.arange(max_frames)[None] < frame_lengths[:, None]

    path = monotonic_alignment_search(scores, text_mask, frame_mask)

    assert path.shape == scores.shape and path.dtype == torch.float32
    for b in range(batch):
        n, m = int(text_lengths[b]), int(frame_lengths[b])
        _check_valid_path(path[b], n, m)
        chosen = float((path[b, :n, :m] * scores[b, :n, :m]).sum())
        assert chosen == pytest.approx(_best_score(scores[b, :n, :m]), abs=1e-4)


def test_alignment_ignores_values_in_padding():
    scores = torch.randn(1, 3, 6)
    text_mask = torch.tensor([[True, True, False]])
    frame_mask = torch.tensor([[True, True, True, True, False, False]])
    polluted = scores.clone()
    polluted[:, 2, :] = float("nan")
    polluted[:, :, 4:] = 1e9
    assert torch.equal(
        monotonic_alignment_search(scores, text_mask, frame_mask),
        monotonic_alignment_search(polluted, text_mask, frame_mask),
    )


def test_alignment_of_equal_lengths_is_the_diagonal():
    path = monotonic_alignment_search(torch.randn(2, 5, 5), torch.ones(2, 5, dtype=torch.bool), torch.ones(2, 5, dtype=torch.bool))
    assert torch.equal(path, torch.eye(5).expand(2, 5, 5))


def test_prior_log_likelihood_is_the_gaussian_log_density():
    generator = torch.Generator().manual_seed(0)
    z_p = torch.randn(2, 3, 5, generator=generator)
    m_p = torch.randn(2, 3, 4, generator=generator)
    logs_p = torch.randn(2, 3, 4, generator=generator) * 0.3

    table = prior_log_likelihood(z_p, m_p, logs_p)

    normal = torch.distributions.Normal(m_p.unsqueeze(-1), torch.exp(logs_p).unsqueeze(-1))
    expected = normal.log_prob(z_p.unsqueeze(2)).sum(dim=1)  # [B, T_text, T_frames]
    torch.testing.assert_close(table, expected, rtol=1e-5, atol=1e-4)


def _reference_alignment(scores, text_length: int, frame_length: int):
    """The DP cell by cell over the whole table, in float32, as the frame-loop implementation before it did it.

    Every cell of the valid rectangle, no band; ``advanced[j][i]``: the best path to token i
    at frame j came from token i - 1 (strictly better, so ties stay). The backtrack starts at
    the last token on the last frame; a frame past the item's end keeps the last token.
    """
    minus_inf = np.float32(-np.inf)
    best = [minus_inf] * text_length
    best[0] = np.float32(scores[0, 0])
    advanced = [[False] * text_length for _ in range(frame_length)]
    for frame in range(1, frame_length):
        previous = list(best)
        for token in range(text_length):
            advance = previous[token - 1] if token > 0 else minus_inf
            advanced[frame][token] = bool(advance > previous[token])
            best[token] = np.float32(max(previous[token], advance) + np.float32(scores[token, frame]))
    path = np.zeros(scores.shape, dtype=np.float32)
    token = text_length - 1
    for frame in range(frame_length - 1, -1, -1):
        path[token, frame] = 1
        token -= advanced[frame][token]
    return path


@pytest.mark.parametrize("seed", range(4))
def test_alignment_matches_the_plain_dynamic_programme_on_random_mms_like_batches(seed):
    """Different lengths in one batch, ties, and items with fewer frames than tokens."""
    generator = torch.Generator().manual_seed(100 + seed)
    batch, max_tokens, max_frames = 6, 24, 70
    text_lengths = torch.randint(1, max_tokens + 1, (batch,), generator=generator)
    frame_lengths = torch.randint(1, max_frames + 1, (batch,), generator=generator)
    text_lengths[0], frame_lengths[0] = max_tokens, max_frames  # one item fills the padded table
    frame_lengths[1] = max(1, int(text_lengths[1]) - 3)  # fewer frames than tokens: no path reaches the last token
    scores = torch.randn(batch, max_tokens, max_frames, generator=generator) * 4 - 20
    if seed % 2:
        scores = scores.round()  # ties everywhere
    text_mask = torch.arange(max_tokens)[None] < text_lengths[:, None]
    frame_mask = torch.arange(max_frames)[None] < frame_lengths[:, None]

    path = monotonic_alignment_search(scores, text_mask, frame_mask)

    for b in range(batch):
        n, m = int(text_lengths[b]), int(frame_lengths[b])
        expected = _reference_alignment(scores[b].numpy(), n, m)
        assert np.array_equal(path[b].numpy(), expected), f"item {b} ({n} tokens, {m} frames)"
