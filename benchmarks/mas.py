"""Monotonic alignment search: fintts's against the frame loop it replaced and against the peers' compiled CPU version.

    python benchmarks/mas.py [--device cpu|cuda] [--batch 1 8 16] [--repeats 5] [--threads N]

Three implementations of the same DP on the same score tables, each timed over ``repeats``
calls after one untimed call (numba's compilation, CUDA's lazy initialisation):

- ``fintts``: :func:`fintts.tts.vits.alignment.monotonic_alignment_search` as training calls
  it (on CUDA this includes the copy of the table to the host and of the path back);
- ``frame loop``: the implementation before it, vectorised over batch and tokens, one Python
  iteration of a few tensor operations per frame, on ``--device`` (copied below unchanged);
- ``VITS port``: the original VITS/Glow-TTS Cython ``maximum_path_each`` (also what Coqui and
  Piper train with), written cell for cell in numba, on the CPU, with the table already there.

Two shapes: ``400x1000`` (every item 400 tokens × 1000 frames, the worst case
``benchmarks/vits_step.py`` times) and ``mixed`` (MMS-like micro-batches: 60-400 tokens, 2-3
frames per token, padded to the longest). Prints one JSON line per shape and batch.
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numba
import numpy as np
import torch

from fintts.tts.vits.alignment import monotonic_alignment_search


@torch.no_grad()
def frame_loop(log_likelihood: torch.Tensor, text_mask: torch.Tensor, frame_mask: torch.Tensor) -> torch.Tensor:
    """fintts's MAS until 2026-11-24: a loop over frames of batched tensor operations (about 8 kernels a frame)."""
    batch, num_tokens, num_frames = log_likelihood.shape
    device = log_likelihood.device
    scores = log_likelihood.float().permute(2, 0, 1).contiguous()
    text_lengths = text_mask.sum(dim=1)
    frame_lengths = frame_mask.sum(dim=1)
    came_from_previous_token = torch.zeros(num_frames, batch, num_tokens, dtype=torch.uint8, device=device)
    best = torch.full((batch, num_tokens), -math.inf, device=device)
    best[:, 0] = scores[0, :, 0]
    minus_inf_column = torch.full((batch, 1), -math.inf, device=device)
    for frame in range(1, num_frames):
        advance = torch.cat([minus_inf_column, best[:, :-1]], dim=1)
        torch.gt(advance, best, out=came_from_previous_token[frame])
        best = torch.maximum(best, advance) + scores[frame]
    inside = torch.arange(num_frames, device=device).view(-1, 1) < frame_lengths.view(1, -1)
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


@numba.njit(nogil=True)
def _vits_maximum_path_each(path, value, t_y, t_x, max_neg_val=-1e9):
    """VITS ``monotonic_align/core.pyx`` ``maximum_path_each``, line for line (``value`` is overwritten)."""
    index = t_x - 1
    for y in range(t_y):
        for x in range(max(0, t_x + y - t_y), min(t_x, y + 1)):
            if x == y:
                v_cur = max_neg_val
            else:
                v_cur = value[y - 1, x]
            if x == 0:
                if y == 0:
                    v_prev = 0.0
                else:
                    v_prev = max_neg_val
            else:
                v_prev = value[y - 1, x - 1]
            value[y, x] += max(v_prev, v_cur)
    for y in range(t_y - 1, -1, -1):
        path[y, index] = 1
        if index != 0 and (index == y or value[y - 1, index] < value[y - 1, index - 1]):
            index = index - 1


@numba.njit(nogil=True)
def _vits_maximum_path(paths, values, t_ys, t_xs):
    for b in range(paths.shape[0]):
        _vits_maximum_path_each(paths[b], values[b], t_ys[b], t_xs[b])


def vits_port(values: np.ndarray, t_ys: np.ndarray, t_xs: np.ndarray) -> np.ndarray:
    """The VITS call: ``values`` is ``[B, T_frames, T_text]`` float32 (a copy is overwritten), returns the path."""
    paths = np.zeros(values.shape, dtype=np.int32)
    _vits_maximum_path(paths, values.copy(), t_ys, t_xs)
    return paths


def tables(shape: str, batch: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(batch)
    if shape == "400x1000":
        tokens = torch.full((batch,), 400)
        frames = torch.full((batch,), 1000)
    else:
        tokens = torch.randint(60, 401, (batch,), generator=generator)
        frames = (tokens * (2 + torch.rand(batch, generator=generator))).long()
    # frame-major memory behind a [B, T_text, T_frames] view, as prior_log_likelihood makes the table in training
    scores = (torch.randn(batch, int(frames.max()), int(tokens.max()), generator=generator) * 4 - 20).transpose(1, 2)
    text_mask = torch.arange(scores.shape[1])[None] < tokens[:, None]
    frame_mask = torch.arange(scores.shape[2])[None] < frames[:, None]
    return scores.to(device), text_mask.to(device), frame_mask.to(device)


def timed(call, device: torch.device, repeats: int) -> float:
    call()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    for _ in range(repeats):
        call()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return (time.perf_counter() - start) / repeats


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 8, 16])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0, help="torch's CPU threads (0: torch's default)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    results = []
    for shape in ("400x1000", "mixed"):
        for batch in args.batch:
            scores, text_mask, frame_mask = tables(shape, batch, device)
            ours = monotonic_alignment_search(scores, text_mask, frame_mask)
            if not torch.equal(ours, frame_loop(scores, text_mask, frame_mask)):
                raise AssertionError(f"{shape} batch {batch}: fintts's path differs from the frame loop's")
            values = scores.transpose(1, 2).contiguous().cpu().numpy()
            t_ys = frame_mask.sum(1).int().cpu().numpy()
            t_xs = text_mask.sum(1).int().cpu().numpy()
            row = {
                "device": str(device), "shape": shape, "batch": batch, "table": list(scores.shape),
                "fintts_ms": 1e3 * timed(lambda: monotonic_alignment_search(scores, text_mask, frame_mask), device, args.repeats),
                "frame_loop_ms": 1e3 * timed(lambda: frame_loop(scores, text_mask, frame_mask), device, args.repeats),
                "vits_port_cpu_ms": 1e3 * timed(lambda: vits_port(values, t_ys, t_xs), torch.device("cpu"), args.repeats),
                "threads": torch.get_num_threads(), "numba": numba.__version__,
            }
            results.append(row)
            print(json.dumps({k: round(v, 2) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
    return results


if __name__ == "__main__":
    main()
