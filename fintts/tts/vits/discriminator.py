"""The VITS discriminator: one scale discriminator on raw audio plus five period discriminators.

transformers ships only the VITS generator, so the discriminator is rebuilt here with the
original's module layout (jaywalnut310/vits ``models.MultiPeriodDiscriminator``:
``discriminators.0`` is the scale discriminator, ``discriminators.1..5`` the period ones,
each with ``convs.N`` and ``conv_post``) so that a released ``D_*.pth`` — MMS publishes
one per language next to the generator — loads by name. Starting fine-tuning from the
pretrained discriminator instead of a random one avoids the first thousands of steps in
which a fresh discriminator gives the generator meaningless adversarial gradients.
"""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path

import torch
from torch import Tensor, nn
from torch.nn.utils.parametrizations import weight_norm

from fintts.errors import UsageError

#: Leaky-ReLU slope of every discriminator layer (HiFi-GAN, VITS ``modules.LRELU_SLOPE``).
LEAKY_RELU_SLOPE = 0.1


@dataclasses.dataclass(frozen=True)
class DiscriminatorConfig:
    """Sizes of the discriminator; the defaults are the original VITS/MMS ones.

    ``scale_channels`` are the output channels of the scale discriminator's convs (its
    grouped convs use ``scale_groups``); ``period_channels`` those of each period
    discriminator's strided convs, after which one more conv keeps the last width.
    Tests shrink the channels to build a discriminator in milliseconds.
    """

    periods: tuple[int, ...] = (2, 3, 5, 7, 11)
    scale_channels: tuple[int, ...] = (16, 64, 256, 1024, 1024, 1024)
    scale_groups: tuple[int, ...] = (1, 4, 16, 64, 256, 1)
    period_channels: tuple[int, ...] = (32, 128, 512, 1024)

    def __post_init__(self) -> None:
        if len(self.scale_channels) != len(self.scale_groups):
            raise ValueError("scale_channels and scale_groups must have the same length")


def _conv_stack(convs: nn.ModuleList, conv_post: nn.Module, hidden: Tensor) -> tuple[Tensor, list[Tensor]]:
    """Leaky-ReLU conv stack then the output conv; every activation is a feature map (eq. 10)."""
    feature_maps = []
    for conv in convs:
        hidden = nn.functional.leaky_relu(conv(hidden), LEAKY_RELU_SLOPE)
        feature_maps.append(hidden)
    hidden = conv_post(hidden)
    feature_maps.append(hidden)
    return torch.flatten(hidden, 1), feature_maps


class ScaleDiscriminator(nn.Module):
    """HiFi-GAN/MelGAN scale discriminator on the raw waveform (VITS ``DiscriminatorS``)."""

    def __init__(self, channels: tuple[int, ...], groups: tuple[int, ...]):
        super().__init__()
        # (kernel, stride, padding) of the original: a wide input conv, four grouped
        # strided convs, one narrow conv.
        shapes = [(15, 1, 7)] + [(41, 4, 20)] * (len(channels) - 2) + [(5, 1, 2)]
        in_channels = (1, *channels[:-1])
        self.convs = nn.ModuleList(
            weight_norm(nn.Conv1d(c_in, c_out, k, s, padding=p, groups=g))
            for c_in, c_out, g, (k, s, p) in zip(in_channels, channels, groups, shapes)
        )
        self.conv_post = weight_norm(nn.Conv1d(channels[-1], 1, 3, 1, padding=1))

    def forward(self, wav: Tensor) -> tuple[Tensor, list[Tensor]]:
        return _conv_stack(self.convs, self.conv_post, wav)


class PeriodDiscriminator(nn.Module):
    """HiFi-GAN period discriminator (VITS ``DiscriminatorP``): 2-D convs over the waveform
    folded into rows of ``period`` samples, so it sees periodic structure (pitch)."""

    def __init__(self, period: int, channels: tuple[int, ...], kernel_size: int = 5, stride: int = 3):
        super().__init__()
        self.period = period
        padding = ((kernel_size - 1) // 2, 0)
        widths = (1, *channels, channels[-1])
        strides = [stride] * len(channels) + [1]
        self.convs = nn.ModuleList(
            weight_norm(nn.Conv2d(c_in, c_out, (kernel_size, 1), (s, 1), padding=padding))
            for c_in, c_out, s in zip(widths[:-1], widths[1:], strides)
        )
        self.conv_post = weight_norm(nn.Conv2d(channels[-1], 1, (3, 1), 1, padding=(1, 0)))

    def forward(self, wav: Tensor) -> tuple[Tensor, list[Tensor]]:
        batch, channels, length = wav.shape
        if length % self.period:
            pad = self.period - length % self.period
            wav = nn.functional.pad(wav, (0, pad), mode="reflect")
            length += pad
        return _conv_stack(self.convs, self.conv_post, wav.view(batch, channels, length // self.period, self.period))


class VitsDiscriminator(nn.Module):
    """Scale discriminator followed by one period discriminator per period, in that order.

    ``forward`` returns, per sub-discriminator, its flattened logits and its feature maps
    (every conv's activation, the last being the logits before flattening), which is what
    the LSGAN and feature-matching losses consume.
    """

    def __init__(self, config: DiscriminatorConfig | None = None):
        super().__init__()
        self.config = config or DiscriminatorConfig()
        scale = ScaleDiscriminator(self.config.scale_channels, self.config.scale_groups)
        periods = [PeriodDiscriminator(p, self.config.period_channels) for p in self.config.periods]
        self.discriminators = nn.ModuleList([scale, *periods])

    def forward(self, wav: Tensor) -> tuple[list[Tensor], list[list[Tensor]]]:
        """``wav``: ``[B, 1, T]``. Returns ``(logits, feature_maps)``, one entry per sub-discriminator."""
        logits, feature_maps = [], []
        for discriminator in self.discriminators:
            score, maps = discriminator(wav)
            logits.append(score)
            feature_maps.append(maps)
        return logits, feature_maps


def _from_original_key(key: str) -> str:
    """Map an original (``torch.nn.utils.weight_norm``) key to the parametrised module's key."""
    if key.endswith(".weight_g"):
        return key[: -len("weight_g")] + "parametrizations.weight.original0"
    if key.endswith(".weight_v"):
        return key[: -len("weight_v")] + "parametrizations.weight.original1"
    return key


def read_mms_discriminator(path: Path | str, discriminator: VitsDiscriminator) -> dict[str, Tensor]:
    """An original VITS / MMS discriminator checkpoint (``D_*.pth``) as ``discriminator``'s state dict.

    The file is a ``torch.save``d dict whose ``"model"`` entry is the state dict of the
    original ``MultiPeriodDiscriminator`` (beside it the original keeps ``optimizer``,
    ``iteration`` and ``learning_rate``, which are not read). Its weight-normed convs store
    ``weight_g`` (the per-output-channel norm) and ``weight_v`` (the direction); these are
    exactly ``original0`` and ``original1`` of ``torch.nn.utils.parametrizations.weight_norm``,
    so the conversion is a renaming. A checkpoint saved from a module without weight norm
    (plain ``weight``) is accepted too: the weight becomes the direction and its norm the
    magnitude, which reproduces the same convolution.

    The file is read with ``torch.load(weights_only=True)``: tensors and plain containers
    only, so no code a pickle names is run.

    Raises:
        UsageError: the file holds objects ``weights_only`` refuses, is damaged or no such checkpoint,
            or its keys, values or shapes do not fit ``discriminator`` (the message names the file and why).
    """
    path = Path(path)
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        raise UsageError(
            f"{path}: refused: it holds objects that torch.load(weights_only=True) does not load, so nothing in it was "
            f"unpickled or run ({_first_line(err)})"
        ) from None
    except Exception as err:  # a damaged file fails anywhere in torch's zip and pickle readers
        # An empty file is an EOFError without a message. Cut or overwritten files raised, from torch's readers,
        # AssertionError, IndexError, KeyError, OSError and struct.error (issue 52's 300 files), and AttributeError and
        # TypeError besides (test_mms_discriminator.py's seeded 300): which one depends on the byte hit.
        raise UsageError(f"{path}: not a readable torch checkpoint, damaged or cut short "
                         f"({type(err).__name__}: {_first_line(err)})") from None
    if not isinstance(checkpoint, dict) or not isinstance(checkpoint.get("model"), dict):
        raise UsageError(f"{path}: not a VITS discriminator checkpoint (expected a dict with a 'model' state dict)")
    odd = sorted(str(key) for key, value in checkpoint["model"].items() if not isinstance(value, Tensor))
    if odd:
        raise UsageError(f"{path}: not a VITS discriminator checkpoint: its 'model' holds values that are not tensors "
                         f"({_preview(odd)})")
    odd = sorted(repr(key) for key, value in checkpoint["model"].items()
                 if not isinstance(key, str) or not value.is_floating_point() or not bool(torch.isfinite(value).all()))
    if odd:
        raise UsageError(f"{path}: not a usable VITS discriminator checkpoint: its 'model' holds keys that are not names "
                         f"or weights that are not finite floating-point numbers ({_preview(odd)})")
    expected = discriminator.state_dict()

    converted: dict[str, Tensor] = {}
    for key, value in checkpoint["model"].items():
        direction_key = key[: -len("weight")] + "parametrizations.weight.original1"
        if key.endswith(".weight") and direction_key in expected:
            norm_dims = tuple(range(1, value.dim()))
            converted[key[: -len("weight")] + "parametrizations.weight.original0"] = torch.linalg.vector_norm(
                value, dim=norm_dims, keepdim=True
            )
            converted[direction_key] = value
        else:
            converted[_from_original_key(key)] = value

    missing = sorted(set(expected) - set(converted))
    unexpected = sorted(set(converted) - set(expected))
    if missing or unexpected:
        raise UsageError(
            f"{path}: does not match a VITS discriminator with {discriminator.config}; "
            f"missing keys: {_preview(missing)}; unexpected keys: {_preview(unexpected)}"
        )
    wrong_shapes = [k for k, v in converted.items() if v.shape != expected[k].shape]
    if wrong_shapes:
        details = ", ".join(f"{k} {tuple(converted[k].shape)} != {tuple(expected[k].shape)}" for k in wrong_shapes[:5])
        raise UsageError(f"{path}: tensor shapes differ from {discriminator.config}: {details}")
    return {key: value.to(expected[key].dtype).contiguous() for key, value in converted.items()}


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def load_mms_discriminator(path: Path | str, config: DiscriminatorConfig | None = None) -> VitsDiscriminator:
    """A discriminator of ``config`` holding the original VITS / MMS checkpoint at ``path``
    (see :func:`read_mms_discriminator`, whose errors it raises)."""
    discriminator = VitsDiscriminator(config)
    discriminator.load_state_dict(read_mms_discriminator(path, discriminator))
    return discriminator


def _preview(keys: list[str], limit: int = 8) -> str:
    if not keys:
        return "none"
    shown = ", ".join(keys[:limit])
    return shown + (f" ... ({len(keys)} in all)" if len(keys) > limit else "")
