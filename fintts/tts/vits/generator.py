"""The training forward pass of VITS around transformers' ``VitsModel``.

transformers implements VITS inference only (``VitsModel.forward`` refuses ``labels``),
but every network VITS trains is there as a submodule. This module wires them as the
original ``SynthesizerTrn.forward`` does (Kim et al. 2021, §2 and Fig. 1a):

text encoder → prior ``(m_p, logs_p)`` per token; posterior encoder on the linear
spectrogram → ``z ~ q(z|x_lin)``; flow ``z_p = f(z)``; monotonic alignment search of
``z_p`` against the prior; duration loss on the aligned durations; prior expanded to
frames for the KL term; a random window of ``z`` decoded to audio by HiFi-GAN.

Precision: the text encoder, posterior encoder and decoder run under whatever autocast
the caller set (fp16 on a T4); the flow, MAS, the duration predictor (rational-quadratic
splines, logs of small differences) and everything feeding the KL term run in float32
with autocast disabled, because that is where fp16 overflows or loses the result.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Collection

import torch
import torch.utils.checkpoint
from torch import Tensor, nn
from transformers import VitsModel
from transformers.models.vits.modeling_vits import VitsStochasticDurationPredictor

from fintts.tts.vits.alignment import monotonic_alignment_search, prior_log_likelihood
from fintts.tts.vits.losses import (
    deterministic_duration_loss,
    discriminator_loss,
    feature_matching_loss,
    generator_adversarial_loss,
    kl_loss,
    mel_reconstruction_loss,
    stochastic_duration_loss,
)
from fintts.tts.vits.settings import LossWeights, check_blocks


def _block(name: str, module: nn.Module, checkpointed: frozenset[str]) -> Callable:
    """``module``, or a call of it that recomputes its activations in the backward pass.

    Non-reentrant checkpointing restores the RNG and autocast state for the recomputation,
    so dropout and the encoders' own noise come out the same and the gradients are unchanged.
    """
    if name not in checkpointed:
        return module
    return lambda *args, **kwargs: torch.utils.checkpoint.checkpoint(module, *args, use_reentrant=False, **kwargs)


@dataclasses.dataclass
class GeneratorOutput:
    """What one training forward pass produced: everything the losses need.

    Shapes: ``B`` batch, ``C`` = ``config.flow_size``, ``T_text`` tokens, ``T_frames``
    spectrogram frames, ``S`` = ``segment_frames × hop`` samples.
    """

    #: ``[B, 1, S]`` audio decoded from the sliced posterior latents (carries gradients).
    wav_fake: Tensor
    #: ``[B, 1, S]`` the matching window of the recorded audio.
    wav_real: Tensor
    #: ``[B]`` first frame of each window.
    ids_slice: Tensor
    #: ``[B, C, T_frames]`` posterior latents after the flow (float32).
    z_p: Tensor
    #: ``[B, C, T_frames]`` posterior log standard deviations (float32).
    logs_q: Tensor
    #: ``[B, C, T_frames]`` prior means and log standard deviations expanded to frames (float32).
    m_p: Tensor
    logs_p: Tensor
    #: ``[B, 1, T_frames]`` and ``[B, 1, T_text]`` float 0/1 masks.
    frame_mask: Tensor
    text_mask: Tensor
    #: ``[B, T_text, T_frames]`` hard alignment found by MAS (no gradient).
    alignment: Tensor
    #: scalar duration loss (stochastic NLL or deterministic L2, per the config).
    duration_loss: Tensor


def train_forward(
    model: VitsModel,
    input_ids: Tensor,
    input_mask: Tensor,
    spec: Tensor,
    spec_mask: Tensor,
    wav: Tensor,
    speaker_ids: Tensor | None = None,
    *,
    segment_frames: int,
    generator: torch.Generator | None = None,
    checkpointing: Collection[str] = (),
) -> GeneratorOutput:
    """Run VITS's training forward pass (the original ``SynthesizerTrn.forward``).

    Args:
        model: the generator; its submodules are used directly.
        input_ids: ``[B, T_text]`` token ids; input_mask: ``[B, T_text]`` 1 on real tokens.
        spec: ``[B, spectrogram_bins, T_frames]`` linear magnitude spectrogram;
            spec_mask: ``[B, T_frames]`` 1 on real frames.
        wav: ``[B, 1, T_samples]`` (or ``[B, T_samples]``) audio with ``T_samples ≥ T_frames × hop``
            aligned to the frames, ``hop = prod(config.upsample_rates)``.
        speaker_ids: ``[B]`` speaker indices, required iff ``config.num_speakers > 1``.
        segment_frames: frames per decoded window (VITS: 32 frames = 8192 samples at hop 256).
        generator: RNG for the window positions and the posterior/duration noise
            (``None``: torch's global RNG); keep it on the batch's device, or every
            draw is a host-device copy.
        checkpointing: blocks of :data:`CHECKPOINTABLE_BLOCKS` to recompute in the backward
            pass instead of storing their activations (the decoder's dominate memory).
    """
    config = model.config
    checkpointed = check_blocks(checkpointing)
    device_type = input_ids.device.type
    text_mask = input_mask.unsqueeze(1).float()
    frame_mask = spec_mask.unsqueeze(1).float()
    speaker_embedding = _speaker_embedding(model, speaker_ids)

    encoded = _block("text_encoder", model.text_encoder, checkpointed)(
        input_ids=input_ids,
        padding_mask=input_mask.unsqueeze(-1).to(model.text_encoder.embed_tokens.weight.dtype),
        attention_mask=input_mask.long(),
    )
    text_hidden = encoded.last_hidden_state.transpose(1, 2)
    # The encoder's own sample (global RNG, autocast dtype) is dropped and z is drawn
    # below in float32 from ``generator``.
    _, m_q, logs_q = _block("posterior_encoder", model.posterior_encoder, checkpointed)(spec, frame_mask, speaker_embedding)

    with torch.autocast(device_type, enabled=False):
        m_p = encoded.prior_means.transpose(1, 2).float()
        logs_p = encoded.prior_log_variances.transpose(1, 2).float()
        m_q, logs_q = m_q.float(), logs_q.float()
        speaker_fp32 = None if speaker_embedding is None else speaker_embedding.float()

        z = (m_q + _standard_normal(m_q, generator) * torch.exp(logs_q)) * frame_mask
        z_p = _block("flow", model.flow, checkpointed)(z, frame_mask, speaker_fp32)

        alignment = monotonic_alignment_search(
            prior_log_likelihood(z_p, m_p, logs_p), input_mask.bool(), spec_mask.bool()
        )
        durations = alignment.sum(dim=2).unsqueeze(1)  # [B, 1, T_text]
        if config.use_stochastic_duration_prediction:
            nll = stochastic_duration_nll(
                model.duration_predictor, text_hidden.float(), text_mask, durations, speaker_fp32, generator
            )
            duration_loss = stochastic_duration_loss(nll, text_mask)
        else:
            predicted = model.duration_predictor(text_hidden.float(), text_mask, speaker_fp32)
            duration_loss = deterministic_duration_loss(predicted, durations, text_mask)

        m_p_frames = torch.matmul(m_p, alignment)
        logs_p_frames = torch.matmul(logs_p, alignment)

    hop = math.prod(config.upsample_rates)
    wav = wav if wav.dim() == 3 else wav.unsqueeze(1)
    if wav.shape[-1] < spec.shape[-1] * hop:
        raise ValueError(f"wav has {wav.shape[-1]} samples, fewer than {spec.shape[-1]} frames × hop {hop}")
    ids_slice = _random_window_starts(spec_mask.sum(dim=1), segment_frames, generator, z.device)
    z_slice = _slice(z, ids_slice, segment_frames)
    wav_real = _slice(wav, ids_slice * hop, segment_frames * hop)

    wav_fake = _block("decoder", model.decoder, checkpointed)(z_slice, speaker_embedding)

    return GeneratorOutput(
        wav_fake=wav_fake,
        wav_real=wav_real,
        ids_slice=ids_slice,
        z_p=z_p,
        logs_q=logs_q,
        m_p=m_p_frames,
        logs_p=logs_p_frames,
        frame_mask=frame_mask,
        text_mask=text_mask,
        alignment=alignment,
        duration_loss=duration_loss,
    )


class VitsTrainingForward(nn.Module):
    """:func:`train_forward` as a module, so that it is what DistributedDataParallel wraps.

    DDP synchronises gradients through hooks on the wrapped module's ``forward``; the
    training pass calls ``VitsModel``'s submodules rather than ``VitsModel.forward``
    (which is inference), so the generator must be wrapped in this instead.
    """

    def __init__(self, model: VitsModel, segment_frames: int, checkpointing: Collection[str] = ()):
        super().__init__()
        self.model = model
        self.segment_frames = segment_frames
        self.checkpointing = check_blocks(checkpointing)

    def forward(
        self,
        input_ids: Tensor,
        input_mask: Tensor,
        spec: Tensor,
        spec_mask: Tensor,
        wav: Tensor,
        speaker_ids: Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> GeneratorOutput:
        return train_forward(
            self.model,
            input_ids,
            input_mask,
            spec,
            spec_mask,
            wav,
            speaker_ids,
            segment_frames=self.segment_frames,
            generator=generator,
            checkpointing=self.checkpointing,
        )


#: What the discriminator says of a window: per sub-discriminator its logits, and its feature maps.
Judgement = tuple[list[Tensor], list[list[Tensor]]]


def discriminator_loss_terms(discriminator: nn.Module, output: GeneratorOutput, real: Judgement | None = None) -> dict[str, Tensor]:
    """The discriminator's step: LSGAN loss on real audio and the *detached* generated audio.

    ``real``: the discriminator's pass on ``output.wav_real`` if the generator's step made it
    (:func:`judge_real`), with the same weights and its graph: not run again.
    """
    real_logits, _ = real if real is not None else discriminator(output.wav_real)
    fake_logits, _ = discriminator(output.wav_fake.detach())
    loss = discriminator_loss(real_logits, fake_logits)
    return {"loss": loss, "discriminator": loss.detach()}


def generator_loss_terms(
    discriminator: nn.Module | None,
    output: GeneratorOutput,
    log_mel: Callable[[Tensor], Tensor],
    weights: LossWeights = LossWeights(),
    real: Judgement | None = None,
) -> dict[str, Tensor]:
    """The generator's step: every term of VITS eq. 11, their weighted sum as ``loss``.

    ``log_mel`` maps float32 audio ``[B, samples]`` to a log-mel spectrogram; it runs in
    float32 with autocast disabled. Backward ``loss`` into the generator's parameters
    only (the trainer passes them as ``backward(inputs=...)``), or the discriminator
    accumulates gradients from it; under data parallelism pass the unwrapped
    discriminator so that this forward does not take part in its gradient sync.

    ``discriminator=None``: the adversarial and feature-matching terms are 0 and the
    discriminator is not run (a generator trained from reconstruction alone, as before a
    GAN's start step). ``real``: its pass on the real window (:func:`judge_real`), else
    it is run here without gradients.
    """
    device_type = output.wav_fake.device.type
    with torch.autocast(device_type, enabled=False):
        real_mel = log_mel(output.wav_real.squeeze(1).float())
        fake_mel = log_mel(output.wav_fake.squeeze(1).float())
    terms = {
        "mel": mel_reconstruction_loss(real_mel, fake_mel),
        "kl": kl_loss(output.z_p, output.logs_q, output.m_p, output.logs_p, output.frame_mask),
        "duration": output.duration_loss,
    }
    if discriminator is None:
        terms["feature_matching"] = terms["adversarial"] = torch.zeros((), device=output.wav_fake.device)
    else:
        if real is None:
            with torch.no_grad():
                real = discriminator(output.wav_real)
        real_feature_maps = real[1]
        fake_logits, fake_feature_maps = discriminator(output.wav_fake)
        terms["feature_matching"] = feature_matching_loss(real_feature_maps, fake_feature_maps)
        terms["adversarial"] = generator_adversarial_loss(fake_logits)
    loss = weights.combine(terms)
    return {"loss": loss, **{name: value.detach() for name, value in terms.items()}}


def judge_real(discriminator: nn.Module, output: GeneratorOutput) -> Judgement:
    """The discriminator's pass on the real window, once for both steps of a batch.

    The generator's feature matching reads its feature maps (detached), the discriminator's
    loss its logits, with gradients; the two steps see the same weights (the trainer steps
    every optimizer after the batch), so the second pass of the real window would repeat
    the first to the bit. Its graph is kept until the discriminator's backward.
    """
    return discriminator(output.wav_real)


def stochastic_duration_nll(
    predictor: VitsStochasticDurationPredictor,
    text_hidden: Tensor,
    text_mask: Tensor,
    durations: Tensor,
    speaker_embedding: Tensor | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Negative variational lower bound on ``log p(d | c_text)`` (VITS eq. 7), per utterance.

    Variational dequantisation ``u`` and augmentation ``ν`` are sampled from the
    posterior flows conditioned on the durations; ``d - u`` goes through a log, then with
    ``ν`` through the main flows to a standard normal. The text hidden states (and the
    speaker embedding) are detached, as in VITS: the duration loss does not train the
    text encoder.

    transformers' ``VitsStochasticDurationPredictor.forward(reverse=False)`` computes the
    same quantity but flips the channels after the leading elementwise-affine flow,
    which the original model (and so the MMS weights) does not; its inference direction
    matches the original. So this re-implements the training direction with the
    module's own layers, in the original order (see :func:`duration_flows_forward`).

    Args:
        text_hidden: ``[B, hidden_size, T_text]`` text-encoder output.
        text_mask: ``[B, 1, T_text]``; durations: ``[B, 1, T_text]`` frames per token.
        speaker_embedding: ``[B, speaker_embedding_size, 1]`` or ``None``.

    Returns:
        ``[B]`` negative log-likelihood bound in nats.
    """
    condition = predictor.conv_pre(text_hidden.detach())
    if speaker_embedding is not None:
        condition = condition + predictor.cond(speaker_embedding.detach())
    condition = predictor.conv_dds(condition, text_mask)
    condition = predictor.conv_proj(condition) * text_mask

    duration_features = predictor.post_conv_pre(durations)
    duration_features = predictor.post_conv_dds(duration_features, text_mask)
    duration_features = predictor.post_conv_proj(duration_features) * text_mask

    noise = _standard_normal(durations.expand(-1, 2, -1), generator) * text_mask
    posterior, log_det_posterior = duration_flows_forward(
        predictor.post_flows, noise, text_mask, condition + duration_features
    )
    dequantisation_logit, augmentation = torch.split(posterior, [1, 1], dim=1)
    dequantisation = torch.sigmoid(dequantisation_logit) * text_mask
    log_det_posterior = log_det_posterior + torch.sum(
        (nn.functional.logsigmoid(dequantisation_logit) + nn.functional.logsigmoid(-dequantisation_logit)) * text_mask,
        dim=[1, 2],
    )
    log_q = torch.sum(-0.5 * (math.log(2 * math.pi) + noise**2) * text_mask, dim=[1, 2]) - log_det_posterior

    log_durations = torch.log(torch.clamp_min((durations - dequantisation) * text_mask, 1e-5)) * text_mask
    log_det = torch.sum(-log_durations, dim=[1, 2])
    latents = torch.cat([log_durations, augmentation], dim=1)
    latents, log_det_flows = duration_flows_forward(predictor.flows, latents, text_mask, condition)
    nll = torch.sum(0.5 * (math.log(2 * math.pi) + latents**2) * text_mask, dim=[1, 2]) - (log_det + log_det_flows)
    return nll + log_q


def duration_flows_forward(
    flows: nn.ModuleList, latents: Tensor, mask: Tensor, condition: Tensor
) -> tuple[Tensor, Tensor]:
    """Apply a duration-predictor flow stack in the training (data → noise) direction.

    The stack is ``[elementwise affine, conv flow × n]``; as in the original VITS the
    channels are flipped after every conv flow but not after the affine flow. Returns the
    transformed ``[B, 2, T]`` latents and the ``[B]`` summed log-determinant.
    """
    latents, log_det = flows[0](latents, mask, global_conditioning=condition)
    for flow in flows[1:]:
        latents, flow_log_det = flow(latents, mask, global_conditioning=condition)
        latents = torch.flip(latents, [1])
        log_det = log_det + flow_log_det
    return latents, log_det


def _speaker_embedding(model: VitsModel, speaker_ids: Tensor | None) -> Tensor | None:
    if model.config.num_speakers > 1:
        if speaker_ids is None:
            raise ValueError(f"speaker_ids are required: the model has {model.config.num_speakers} speakers")
        return model.embed_speaker(speaker_ids).unsqueeze(-1)
    if speaker_ids is not None:
        raise ValueError("speaker_ids given to a single-speaker model")
    return None


def _standard_normal(like: Tensor, generator: torch.Generator | None) -> Tensor:
    """Float32 N(0, 1) noise shaped like ``like``, drawn from ``generator``'s device."""
    device = generator.device if generator is not None else like.device
    return torch.randn(like.shape, generator=generator, device=device).to(like.device)


def _random_window_starts(
    lengths: Tensor, window: int, generator: torch.Generator | None, device: torch.device
) -> Tensor:
    """Uniform start frames so each window lies inside its item (at 0 when the item is shorter)."""
    rng_device = generator.device if generator is not None else device
    highest = (lengths.to(rng_device) - window).clamp_min(0)
    uniform = torch.rand(lengths.shape, generator=generator, device=rng_device)
    return (uniform * (highest + 1)).long().to(device)


def _slice(sequence: Tensor, starts: Tensor, width: int) -> Tensor:
    """``sequence[b, :, starts[b] : starts[b] + width]`` for every item.

    Starts come from :func:`_random_window_starts`, so a window only runs past the end
    when the whole batch is shorter than ``width``; that tail is zero-padded.
    """
    if sequence.shape[-1] < width:
        sequence = nn.functional.pad(sequence, (0, width - sequence.shape[-1]))
    index = starts.view(-1, 1, 1) + torch.arange(width, device=sequence.device).view(1, 1, -1)
    return torch.gather(sequence, 2, index.expand(-1, sequence.shape[1], -1))
