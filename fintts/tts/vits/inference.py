"""VITS inference with its randomness as inputs: one module for torch and for ONNX.

``VitsModel.forward`` draws two noises inside: the stochastic duration predictor's
latents (``[1, 2, tokens]``) and the prior sample (``[1, flow_size, frames]``, whose length
is only known once the durations are). A graph exported from it would draw its own
numbers, so its output could never be compared with torch's, and a seed could never make
both backends say the same thing. :class:`VitsSynthesizer` runs the same computation with
both noises passed in, already scaled by the caller (``noise_scale_duration`` and
``noise_scale``). The prior noise is given for an upper bound of frames: the graph takes
the first ``frames`` columns and reports ``frames``, and a caller that gave too few
columns (the graph pads with zeros rather than fail) runs it again with more; noise drawn
frame by frame keeps its first columns, so the result does not depend on the bound.

Batch size 1 and no padding: the voice synthesises one sentence at a time, which keeps
memory flat and the first audio early. Everything it runs is ``VitsModel``'s own
submodules; only the glue between them is written here: the duration predictor's reverse
pass (its rational-quadratic spline without the boolean-mask indexing that has no static
shape to export, :func:`_spline_reverse`) and the expansion of the prior to frames.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
from safetensors.torch import load_file
from torch import Tensor, nn
from torch.nn.functional import pad, softmax, softplus
from torch.nn.utils import parametrize
from transformers import VitsConfig, VitsModel
from transformers.models.vits.modeling_vits import VitsConvFlow

from fintts.tts.voice_format import WEIGHTS_FILE

# transformers' spline constants (modeling_vits._unconstrained_rational_quadratic_spline)
_MIN_BIN_WIDTH = _MIN_BIN_HEIGHT = _MIN_DERIVATIVE = 1e-3


class VitsSynthesizer(nn.Module):
    """``VitsModel`` inference for one sentence, noise as inputs (see the module docstring).

    ``forward(input_ids [1, T] int64, duration_noise [1, 2, T], prior_noise [1, C, N],
    length_scale [1], speaker_id [1] int64 or None)`` returns ``(waveform [1, frames × hop],
    frames [] int64)``.
    """

    def __init__(self, vits: VitsModel):
        super().__init__()
        self.vits = vits

    def forward(
        self, input_ids: Tensor, duration_noise: Tensor, prior_noise: Tensor, length_scale: Tensor, speaker_id: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        speaker = self.speaker(speaker_id)
        means, log_std, frames = self.prior(input_ids, duration_noise, length_scale, speaker)
        noise = torch.cat([prior_noise, torch.zeros_like(means)], dim=2)[:, :, : means.shape[2]]
        return self.decode(means, log_std, noise, speaker), frames

    def speaker(self, speaker_id: Tensor | None) -> Tensor | None:
        """The speaker's conditioning ``[1, E, 1]`` (``None`` for a one-speaker voice)."""
        return self.vits.embed_speaker(speaker_id).unsqueeze(-1) if speaker_id is not None else None

    def prior(self, input_ids: Tensor, duration_noise: Tensor, length_scale: Tensor, speaker: Tensor | None
              ) -> tuple[Tensor, Tensor, Tensor]:
        """The prior's means and log standard deviations per frame ``[1, C, frames]``, and ``frames``: the text encoder,
        the durations and the expansion to frames (the Piper graph draws its prior noise once it knows ``frames``)."""
        vits = self.vits
        token_mask = torch.ones_like(input_ids, dtype=duration_noise.dtype).unsqueeze(1)  # [1, 1, T]
        encoded = vits.text_encoder(input_ids=input_ids, padding_mask=token_mask.transpose(1, 2), return_dict=True)
        hidden = encoded.last_hidden_state.transpose(1, 2)
        log_duration = self._log_duration(hidden, token_mask, speaker, duration_noise)

        duration = torch.ceil(torch.exp(log_duration) * length_scale)  # [1, 1, T]
        frames = torch.clamp_min(duration.sum(), 1).long()
        # token t covers frames [end_t - duration_t, end_t): a [frames, T] 0/1 alignment
        end = torch.cumsum(duration, -1)[0, 0]
        frame_index = torch.arange(frames, dtype=end.dtype, device=end.device).unsqueeze(1)
        alignment = ((frame_index < end) & (frame_index >= end - duration[0, 0])).to(hidden.dtype)
        means = torch.matmul(alignment, encoded.prior_means[0]).transpose(0, 1).unsqueeze(0)  # [1, C, frames]
        log_std = torch.matmul(alignment, encoded.prior_log_variances[0]).transpose(0, 1).unsqueeze(0)
        return means, log_std, frames

    def decode(self, means: Tensor, log_std: Tensor, noise: Tensor, speaker: Tensor | None) -> Tensor:
        """The waveform ``[1, frames × hop]`` of the prior sample ``means + noise · exp(log_std)``: flow, then HiFi-GAN."""
        frame_mask = torch.ones_like(means[:, :1])
        latents = self.vits.flow(means + noise * torch.exp(log_std), frame_mask, speaker, reverse=True)
        return self.vits.decoder(latents, speaker)[:, 0]

    def _log_duration(self, hidden: Tensor, mask: Tensor, speaker: Tensor | None, noise: Tensor) -> Tensor:
        """``VitsStochasticDurationPredictor(..., reverse=True)`` with ``noise`` for its latents."""
        predictor = self.vits.duration_predictor
        if not self.vits.config.use_stochastic_duration_prediction:
            return predictor(hidden, mask, speaker)
        condition = predictor.conv_pre(hidden)
        if speaker is not None:
            condition = condition + predictor.cond(speaker)
        condition = predictor.conv_proj(predictor.conv_dds(condition, mask)) * mask
        flows = list(reversed(predictor.flows))
        flows = flows[:-2] + [flows[-1]]  # as transformers: the last conv flow is unused in reverse
        latents = noise
        for flow in flows:
            latents = torch.flip(latents, [1])
            if isinstance(flow, VitsConvFlow):
                latents = _conv_flow_reverse(flow, latents, mask, condition)
            else:
                latents, _ = flow(latents, mask, global_conditioning=condition, reverse=True)
        return latents[:, :1]


def _conv_flow_reverse(flow: VitsConvFlow, inputs: Tensor, mask: Tensor, condition: Tensor) -> Tensor:
    first, second = torch.split(inputs, [flow.half_channels] * 2, dim=1)
    hidden = flow.conv_proj(flow.conv_dds(flow.conv_pre(first), mask, condition)) * mask
    batch, channels, length = first.shape
    hidden = hidden.reshape(batch, channels, -1, length).permute(0, 1, 3, 2)
    scale = math.sqrt(flow.filter_channels)
    widths, heights = hidden[..., : flow.num_bins] / scale, hidden[..., flow.num_bins : 2 * flow.num_bins] / scale
    second = _spline_reverse(second, widths, heights, hidden[..., 2 * flow.num_bins :], flow.tail_bound)
    return torch.cat([first, second], dim=1) * mask


def _spline_reverse(inputs: Tensor, widths: Tensor, heights: Tensor, derivatives: Tensor, bound: float) -> Tensor:
    """transformers' unconstrained rational-quadratic spline, inverse direction, element-wise.

    transformers indexes the values inside ``[-bound, bound]`` with a boolean mask (a shape
    only known at run time); here every value goes through the spline, clamped into the
    interval, and :func:`torch.where` keeps the identity outside it. Each element's
    arithmetic is the same as transformers', so the results agree.
    """
    inside = (inputs >= -bound) & (inputs <= bound)
    x = inputs.clamp(-bound, bound)
    edge = math.log(math.exp(1 - _MIN_DERIVATIVE) - 1)
    derivatives = _MIN_DERIVATIVE + softplus(pad(derivatives, (1, 1), value=edge))
    bins = widths.shape[-1]
    cumwidths, widths = _knots(widths, bins, _MIN_BIN_WIDTH, bound)
    cumheights, heights = _knots(heights, bins, _MIN_BIN_HEIGHT, bound)
    locations = torch.cat([cumheights[..., :-1], cumheights[..., -1:] + 1e-6], dim=-1)
    index = (torch.sum(x[..., None] >= locations, dim=-1) - 1)[..., None]

    def at(values: Tensor) -> Tensor:
        return values.gather(-1, index)[..., 0]

    delta = heights / widths
    in_delta, in_width, in_height, in_cumheight = at(delta), at(widths), at(heights), at(cumheights)
    in_derivative, in_derivative_next = at(derivatives), at(derivatives[..., 1:])
    intermediate1 = in_derivative + in_derivative_next - 2 * in_delta
    intermediate2 = x - in_cumheight
    intermediate3 = intermediate2 * intermediate1
    a = in_height * (in_delta - in_derivative) + intermediate3
    b = in_height * in_derivative - intermediate3
    c = -in_delta * intermediate2
    root = (2 * c) / (-b - torch.sqrt(b.pow(2) - 4 * a * c))
    return torch.where(inside, root * in_width + at(cumwidths), inputs)


def _knots(unnormalized: Tensor, bins: int, minimum: float, bound: float) -> tuple[Tensor, Tensor]:
    """Bin edges from ``-bound`` to ``bound`` and bin sizes, each bin at least ``minimum`` wide."""
    sizes = minimum + (1 - minimum * bins) * softmax(unnormalized, dim=-1)
    edges = pad(torch.cumsum(sizes, dim=-1), (1, 0), value=0.0)
    edges = 2 * bound * edges - bound
    edges = torch.cat([torch.full_like(edges[..., :1], -bound), edges[..., 1:-1], torch.full_like(edges[..., :1], bound)], dim=-1)
    return edges, edges[..., 1:] - edges[..., :-1]


def fold_weight_norm(model: nn.Module, names: list[str] | None = None) -> nn.Module:
    """Replace the weight-norm parametrization of the named modules (``None``: all) by the weight it computes.

    Training keeps magnitude and direction apart; inference only needs their product, and
    recomputing it on every call is wasted work; and peft cannot wrap a parametrized layer
    (:mod:`fintts.tts.vits.lora`). Returns ``model``, changed in place.
    """
    modules = dict(model.named_modules())
    for name in modules if names is None else names:
        if parametrize.is_parametrized(modules[name], "weight"):
            parametrize.remove_parametrizations(modules[name], "weight", leave_parametrized=True)
    return model


def load_saved(folder: Path) -> VitsModel:
    """The float32 model of the voice saved in ``folder``, from its safetensors, drawing nothing from torch's global
    generator: built on the meta device and given the weights. ``from_pretrained`` initialises with random draws, and
    the exports run beside a training that owns that generator: its resumed run would no longer be bit-identical."""
    with torch.device("meta"):
        model = VitsModel(VitsConfig.from_pretrained(folder))
    weights = load_file(str(folder / WEIGHTS_FILE))
    model.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in weights.items()}, assign=True)
    return model
