"""A tiny Finnish VITS run on the shipped demo corpus: seconds per step on a CPU."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import torch
import yaml
from torch import nn
from transformers import VitsConfig

from fintts.tts.vits.discriminator import DiscriminatorConfig

TINY_MODEL = {
    "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "ffn_dim": 32, "flow_size": 8,
    "spectrogram_bins": 65, "upsample_initial_channel": 32, "upsample_rates": [4, 4, 4], "upsample_kernel_sizes": [8, 8, 8],
    "resblock_kernel_sizes": [3], "resblock_dilation_sizes": [[1, 3]], "prior_encoder_num_flows": 2,
    "prior_encoder_num_wavenet_layers": 1, "posterior_encoder_num_wavenet_layers": 2, "duration_predictor_num_flows": 2,
    "duration_predictor_filter_channels": 16, "depth_separable_num_layers": 2, "sampling_rate": 16000,
}
TINY_DISCRIMINATOR = {"periods": [2, 3], "scale_channels": [8, 16, 16], "scale_groups": [1, 2, 1], "period_channels": [8, 16]}
TINY = {
    "task": "vits", "data": "demo", "init": "scratch", "max_steps": 6, "batch_size": 4, "eval_every": 3,
    "num_workers": 0, "segment_frames": 16, "mcd_items": 2, "eval_speakers": 1, "eval_sentences": ["Kello on 7.30."],
    "speakers": ["espeak_f2", "espeak_m3"], "model": TINY_MODEL, "discriminator_config": TINY_DISCRIMINATOR,
    # the ONNX export stays on, as shipped: a test config may shrink the model, never switch off a part of the path
    # (but see TRAINING_ONLY)
}
#: The settings of a test whose subject is the training itself (resumes, corpus readers, precisions, phases), not what a
#: session leaves: its ONNX graphs off. They are made in a child process from model/'s saved weights after the fact
#: (fintts/train/session/background_export.py), so they can change nothing such a test looks at, and each session's
#: cost ~10 s of CPU (starting torch, transformers and onnxruntime, two traces, the int8 pass): without them, the 8
#: files of such tests (25 sessions) took 137 CPU seconds instead of 373 (2026-11-27). Every test of a session's end,
#: its voice or its export keeps them: the shipped configs, the background and pending exports, publish, pull, Piper,
#: the bench.
TRAINING_ONLY = {"export_onnx": False}


def tiny_vits_config(**overrides: Any) -> VitsConfig:
    """A VitsConfig small enough for unit tests (a few thousand parameters per part): :data:`TINY_MODEL`, smaller still.

    16 kHz audio, hop 16 (upsample rates 4×4), 33 linear-spectrogram bins (n_fft 64).
    """
    smaller = {"vocab_size": 38, "spectrogram_bins": 33, "upsample_rates": [4, 4], "upsample_kernel_sizes": [8, 8], "layerdrop": 0.0}
    return VitsConfig(**{**TINY_MODEL, **smaller, **overrides})


def tiny_config(folder, **settings):
    path = folder / "tiny.yaml"
    path.write_text(yaml.safe_dump({**TINY, **settings}, allow_unicode=True))
    return path


class OriginalScale(nn.Module):
    """The original VITS DiscriminatorS layout (jaywalnut310/vits), with the old weight-norm API (weight_g/weight_v).

    The original has six convs; here their count follows ``config.scale_channels`` (a wide input conv, strided
    grouped ones, a narrow last one), so a test can make the original of a tiny discriminator too.
    """

    def __init__(self, config: DiscriminatorConfig):
        super().__init__()
        wn = nn.utils.weight_norm
        shapes = [(15, 1, 7)] + [(41, 4, 20)] * (len(config.scale_channels) - 2) + [(5, 1, 2)]
        widths = (1, *config.scale_channels)
        self.convs = nn.ModuleList(
            wn(nn.Conv1d(widths[i], widths[i + 1], k, s, groups=config.scale_groups[i], padding=p))
            for i, (k, s, p) in enumerate(shapes)
        )
        self.conv_post = wn(nn.Conv1d(widths[-1], 1, 3, 1, padding=1))

    def forward(self, x):
        for conv in self.convs:
            x = nn.functional.leaky_relu(conv(x), 0.1)
        return torch.flatten(self.conv_post(x), 1)


class OriginalPeriod(nn.Module):
    """The original VITS DiscriminatorP layout, with the old weight-norm API (strided convs per ``period_channels``, one more)."""

    def __init__(self, period: int, config: DiscriminatorConfig):
        super().__init__()
        wn = nn.utils.weight_norm
        self.period = period
        widths = (1, *config.period_channels, config.period_channels[-1])
        strides = (3,) * len(config.period_channels) + (1,)
        self.convs = nn.ModuleList(
            wn(nn.Conv2d(widths[i], widths[i + 1], (5, 1), (strides[i], 1), padding=(2, 0))) for i in range(len(strides))
        )
        self.conv_post = wn(nn.Conv2d(widths[-1], 1, (3, 1), 1, padding=(1, 0)))

    def forward(self, x):
        b, c, t = x.shape
        if t % self.period:
            x = nn.functional.pad(x, (0, self.period - t % self.period), "reflect")
        x = x.view(b, c, -1, self.period)
        for conv in self.convs:
            x = nn.functional.leaky_relu(conv(x), 0.1)
        return torch.flatten(self.conv_post(x), 1)


class OriginalMultiPeriod(nn.Module):
    """The original VITS MultiPeriodDiscriminator: its state dict is what a released ``D_*.pth`` holds under ``model``."""

    def __init__(self, config: DiscriminatorConfig):
        super().__init__()
        with warnings.catch_warnings():  # the old API is the point: a released file holds its weight_g/weight_v
            warnings.simplefilter("ignore", FutureWarning)
            self.discriminators = nn.ModuleList(
                [OriginalScale(config), *(OriginalPeriod(p, config) for p in config.periods)]
            )


def original_discriminator_file(path: Path, config: DiscriminatorConfig, seed: int = 0) -> OriginalMultiPeriod:
    """Write a ``D_*.pth`` as VITS's ``save_checkpoint`` does (model, optimizer, iteration, learning rate); the module it holds."""
    torch.manual_seed(seed)
    original = OriginalMultiPeriod(config)
    with torch.no_grad():  # norms that differ from the directions' norms, as after training
        for name, parameter in original.named_parameters():
            if name.endswith("weight_g"):
                parameter.mul_(torch.rand_like(parameter) + 0.5)
    optimizer = torch.optim.AdamW(original.parameters(), 2e-4, betas=(0.8, 0.99), eps=1e-9)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"model": original.state_dict(), "iteration": 100_000, "optimizer": optimizer.state_dict(),
                "learning_rate": 2e-4}, path)
    return original


def converted(original: nn.Module) -> dict[str, torch.Tensor]:
    """An original discriminator's weights under torch's parametrized weight-norm names (weight_g/weight_v → original0/1)."""
    names = {"weight_g": "parametrizations.weight.original0", "weight_v": "parametrizations.weight.original1"}
    out = {}
    for key, value in original.state_dict().items():
        head, _, last = key.rpartition(".")
        out[f"{head}.{names.get(last, last)}"] = value
    return out
