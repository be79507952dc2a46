"""VITS training losses (Kim et al. 2021, "Conditional Variational Autoencoder with
Adversarial Learning for End-to-End Text-to-Speech"), normalised as the original code does.

Every function computes in float32 with autocast disabled: squared logits, exponentials
of log-variances and sums over whole utterances are exactly where fp16 overflows, and
these are cheap next to the networks that produce their inputs.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def discriminator_loss(real_logits: Sequence[Tensor], fake_logits: Sequence[Tensor]) -> Tensor:
    """Least-squares GAN loss of the discriminator (eq. 8): ``E[(D(y) - 1)²] + E[D(G(z))²]``,
    summed over sub-discriminators. Pass the fake logits of a *detached* waveform."""
    with torch.autocast(real_logits[0].device.type, enabled=False):
        return sum(
            torch.mean((1 - real.float()) ** 2) + torch.mean(fake.float() ** 2)
            for real, fake in zip(real_logits, fake_logits, strict=True)
        )


def generator_adversarial_loss(fake_logits: Sequence[Tensor]) -> Tensor:
    """Least-squares GAN loss of the generator (eq. 9): ``E[(D(G(z)) - 1)²]``, summed over sub-discriminators."""
    with torch.autocast(fake_logits[0].device.type, enabled=False):
        return sum(torch.mean((1 - fake.float()) ** 2) for fake in fake_logits)


def feature_matching_loss(real_feature_maps: Sequence[Sequence[Tensor]], fake_feature_maps: Sequence[Sequence[Tensor]]) -> Tensor:
    """Feature-matching loss (eq. 10): mean L1 distance between the discriminator's activations
    on real and generated audio, summed over every layer of every sub-discriminator.

    The real activations are detached: this loss trains the generator only.
    """
    with torch.autocast(real_feature_maps[0][0].device.type, enabled=False):
        return sum(
            torch.mean(torch.abs(real.float().detach() - fake.float()))
            for real_maps, fake_maps in zip(real_feature_maps, fake_feature_maps, strict=True)
            for real, fake in zip(real_maps, fake_maps, strict=True)
        )


def kl_loss(z_p: Tensor, logs_q: Tensor, m_p: Tensor, logs_p: Tensor, mask: Tensor) -> Tensor:
    """KL term (eq. 3): ``log q(z|x_lin) - log p(z|c_text, A)`` at the sampled ``z``.

    With ``z = m_q + ε·exp(logs_q)`` and the volume-preserving flow ``z_p = f(z)`` (eq. 4),
    the estimate per channel and frame is ``logs_p - logs_q - ½ + ½(z_p - m_p)² exp(-2 logs_p)``,
    where ``-½`` replaces ``-½ε²`` by its expectation. Summed over channels and valid frames,
    divided by the number of valid frames, as in the original.

    Args:
        z_p: ``[B, C, T]`` flow output; logs_q: ``[B, C, T]`` posterior log-std;
        m_p, logs_p: ``[B, C, T]`` prior expanded to frames by the alignment;
        mask: ``[B, 1, T]`` (or broadcastable) 1 on valid frames.
    """
    with torch.autocast(z_p.device.type, enabled=False):
        z_p, logs_q, m_p, logs_p, mask = (t.float() for t in (z_p, logs_q, m_p, logs_p, mask))
        kl = logs_p - logs_q - 0.5 + 0.5 * (z_p - m_p) ** 2 * torch.exp(-2.0 * logs_p)
        return torch.sum(kl * mask) / torch.sum(mask)


def mel_reconstruction_loss(real_log_mel: Tensor, fake_log_mel: Tensor) -> Tensor:
    """Reconstruction loss (eq. 2): mean L1 distance between log-mel spectrograms."""
    with torch.autocast(real_log_mel.device.type, enabled=False):
        return torch.nn.functional.l1_loss(fake_log_mel.float(), real_log_mel.float())


def stochastic_duration_loss(negative_log_likelihood: Tensor, text_mask: Tensor) -> Tensor:
    """Duration loss of the stochastic duration predictor: the negative variational lower
    bound of eq. 7, one value per utterance, summed and divided by the number of tokens."""
    with torch.autocast(negative_log_likelihood.device.type, enabled=False):
        return torch.sum(negative_log_likelihood.float()) / torch.sum(text_mask.float())


def deterministic_duration_loss(predicted_log_durations: Tensor, durations: Tensor, text_mask: Tensor) -> Tensor:
    """Duration loss of the deterministic predictor (VITS ablation, Glow-TTS): squared error
    of log durations, ``Σ (log ŵ - log(w + 1e-6))²`` over valid tokens divided by their number.

    Args:
        predicted_log_durations, durations, text_mask: ``[B, 1, T_text]``.
    """
    with torch.autocast(durations.device.type, enabled=False):
        mask = text_mask.float()
        target = torch.log(durations.float() + 1e-6) * mask
        error = (predicted_log_durations.float() - target) * mask
        return torch.sum(error**2) / torch.sum(mask)
