"""VITS training pieces: discriminator (and MMS checkpoint conversion), losses, training forward."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn
from transformers import VitsModel

from fintts.train.task import TaskContext
from fintts.tts.spectrogram import Spectrogram, SpectrogramConfig
from fintts.tts.vits.discriminator import DiscriminatorConfig, VitsDiscriminator, load_mms_discriminator
from fintts.tts.vits.generator import (
    GeneratorOutput,
    VitsTrainingForward,
    discriminator_loss_terms,
    duration_flows_forward,
    generator_loss_terms,
    train_forward,
)
from fintts.tts.vits.losses import discriminator_loss, feature_matching_loss, generator_adversarial_loss, kl_loss
from fintts.tts.vits.settings import CHECKPOINTABLE_BLOCKS, GENERATOR, LossWeights
from fintts.tts.vits.task import VitsBatch, VitsTask, VitsTaskConfig
from vits_helpers import OriginalMultiPeriod, tiny_vits_config

TINY_DISCRIMINATOR = DiscriminatorConfig(
    scale_channels=(4, 8, 16, 16, 16, 16),
    scale_groups=(1, 2, 4, 4, 4, 1),
    period_channels=(4, 8, 16, 16),
)
pytestmark = pytest.mark.filterwarnings("ignore:`torch.nn.utils.weight_norm` is deprecated:FutureWarning")

HOP = 16  # prod(tiny_vits_config().upsample_rates)
N_FFT = 64  # 2 * (spectrogram_bins - 1)


def log_spectrogram(wav: torch.Tensor) -> torch.Tensor:
    """Stand-in for the project's log-mel (fintts.tts.audio): log STFT magnitude, [B, bins, frames]."""
    window = torch.hann_window(N_FFT, device=wav.device)
    spec = torch.stft(wav, N_FFT, HOP, window=window, return_complex=True).abs()
    return torch.log(spec.clamp_min(1e-5))


def synthetic_batch(batch: int = 3, seed: int = 0):
    """Tokens and audio of different lengths; the linear spectrogram is computed from the audio."""
    generator = torch.Generator().manual_seed(seed)
    text_lengths = torch.tensor([9, 7, 5, 6][:batch])
    frame_lengths = torch.tensor([48, 40, 32, 36][:batch])
    num_tokens, num_frames = int(text_lengths.max()), int(frame_lengths.max())
    input_mask = torch.arange(num_tokens)[None] < text_lengths[:, None]
    spec_mask = torch.arange(num_frames)[None] < frame_lengths[:, None]
    input_ids = torch.randint(1, 38, (batch, num_tokens), generator=generator) * input_mask
    time = torch.arange(num_frames * HOP) / 16_000
    pitch = 150 + 100 * torch.rand(batch, 1, generator=generator)
    wav = 0.3 * torch.sin(2 * math.pi * pitch * time) * torch.sin(2 * math.pi * 3 * time)
    wav = wav * (torch.arange(num_frames * HOP)[None] < frame_lengths[:, None] * HOP)
    window = torch.hann_window(N_FFT)
    padded = nn.functional.pad(wav.unsqueeze(1), ((N_FFT - HOP) // 2, (N_FFT - HOP) // 2), mode="reflect")
    spec = torch.stft(padded.squeeze(1), N_FFT, HOP, window=window, center=False, return_complex=True).abs()
    spec = spec[..., :num_frames] * spec_mask.unsqueeze(1)
    return dict(
        input_ids=input_ids,
        input_mask=input_mask.long(),
        spec=spec,
        spec_mask=spec_mask.long(),
        wav=wav.unsqueeze(1),
    )


def tiny_model(seed: int = 0, **overrides) -> VitsModel:
    torch.manual_seed(seed)
    model = VitsModel(tiny_vits_config(**overrides))
    model.train()
    return model


# --------------------------------------------------------------------------- discriminator


def _original_checkpoint(tmp_path, remove_weight_norm: bool = False):
    torch.manual_seed(0)
    original = OriginalMultiPeriod(TINY_DISCRIMINATOR)
    with torch.no_grad():  # make the norms differ from the directions' norms, as after training
        for name, parameter in original.named_parameters():
            if name.endswith("weight_g"):
                parameter.mul_(torch.rand_like(parameter) + 0.5)
    if remove_weight_norm:
        for module in original.modules():
            if hasattr(module, "weight_g"):
                nn.utils.remove_weight_norm(module)
    path = tmp_path / "D_test.pth"
    torch.save({"model": original.state_dict(), "iteration": 1, "learning_rate": 2e-4}, path)
    return original, path


@pytest.mark.parametrize("remove_weight_norm", [False, True], ids=["weight_g_v", "plain_weight"])
def test_mms_discriminator_checkpoint_converts_exactly(tmp_path, remove_weight_norm):
    original, path = _original_checkpoint(tmp_path, remove_weight_norm)
    if not remove_weight_norm:
        assert "discriminators.0.convs.0.weight_g" in torch.load(path, weights_only=True)["model"]

    discriminator = load_mms_discriminator(path, TINY_DISCRIMINATOR)

    wav = torch.randn(2, 1, 1000)
    logits, feature_maps = discriminator(wav)
    with torch.no_grad():
        expected = [sub(wav) for sub in original.discriminators]
    assert len(logits) == len(feature_maps) == 6
    for got, want in zip(logits, expected):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_discriminator_outputs_logits_and_feature_maps_per_sub_discriminator():
    logits, feature_maps = VitsDiscriminator(TINY_DISCRIMINATOR)(torch.randn(2, 1, 999))
    assert len(logits) == 6 and all(score.shape[0] == 2 for score in logits)
    assert [len(maps) for maps in feature_maps] == [7, 6, 6, 6, 6, 6]


def test_full_size_discriminator_has_the_original_parameter_count():
    assert sum(p.numel() for p in VitsDiscriminator().parameters()) == pytest.approx(46.7e6, rel=0.01)


def test_wrong_checkpoint_names_the_file_and_the_keys(tmp_path):
    _, path = _original_checkpoint(tmp_path)
    with pytest.raises(ValueError, match=r"D_test\.pth: tensor shapes differ.*discriminators\.0\.convs\.0\.bias"):
        load_mms_discriminator(path)  # full-size config: the tiny tensors do not fit
    checkpoint = torch.load(path, weights_only=True)
    del checkpoint["model"]["discriminators.5.conv_post.weight_v"]
    torch.save(checkpoint, path)
    with pytest.raises(ValueError, match=r"D_test\.pth.*missing keys: .*discriminators\.5\.conv_post"):
        load_mms_discriminator(path, TINY_DISCRIMINATOR)
    generator_file = tmp_path / "G_test.pth"
    torch.save({"model": {"enc_p.emb.weight": torch.zeros(3, 2)}}, generator_file)
    with pytest.raises(ValueError, match=r"G_test\.pth.*unexpected keys: enc_p\.emb\.weight"):
        load_mms_discriminator(generator_file, TINY_DISCRIMINATOR)
    not_a_checkpoint = tmp_path / "weights.pth"
    torch.save(torch.zeros(3), not_a_checkpoint)
    with pytest.raises(ValueError, match=r"weights\.pth: not a VITS discriminator checkpoint"):
        load_mms_discriminator(not_a_checkpoint)


# --------------------------------------------------------------------------- losses


def test_lsgan_losses_vanish_at_their_optimum():
    ones, zeros = [torch.ones(2, 5), torch.ones(2, 3)], [torch.zeros(2, 5), torch.zeros(2, 3)]
    assert discriminator_loss(ones, zeros) == 0
    assert generator_adversarial_loss(ones) == 0
    assert discriminator_loss(zeros, ones) == pytest.approx(4.0)
    maps = [[torch.randn(2, 4, 8), torch.randn(2, 1, 8)]]
    assert feature_matching_loss(maps, maps) == 0


def test_kl_loss_estimates_the_gaussian_kl():
    torch.manual_seed(0)
    m_q, logs_q, m_p, logs_p = torch.tensor(0.3), torch.tensor(-0.5), torch.tensor(-0.2), torch.tensor(0.1)
    frames = 200_000
    z = m_q + torch.randn(1, 1, frames) * torch.exp(logs_q)  # flow = identity
    estimate = kl_loss(z, logs_q.expand(1, 1, frames), m_p.expand(1, 1, frames), logs_p.expand(1, 1, frames), torch.ones(1, 1, frames))
    exact = torch.distributions.kl_divergence(
        torch.distributions.Normal(m_q, logs_q.exp()), torch.distributions.Normal(m_p, logs_p.exp())
    )
    assert float(estimate) == pytest.approx(float(exact), abs=0.01)


def test_loss_weights_are_the_vits_ones():
    weights = LossWeights()
    terms = {name: torch.tensor(1.0) for name in ("mel", "kl", "duration", "feature_matching", "adversarial")}
    assert float(weights.combine(terms)) == 45 + 1 + 1 + 2 + 1


# --------------------------------------------------------------------------- training forward


def test_training_forward_shapes_alignment_and_finite_losses():
    model, batch = tiny_model(), synthetic_batch()
    output = train_forward(model, **batch, segment_frames=8)

    assert isinstance(output, GeneratorOutput)
    assert output.wav_fake.shape == output.wav_real.shape == (3, 1, 8 * HOP)
    assert output.z_p.shape == output.m_p.shape == output.logs_p.shape == output.logs_q.shape == (3, 8, 48)
    torch.testing.assert_close(output.alignment.sum(dim=(1, 2)), batch["spec_mask"].sum(1).float())
    assert torch.all(output.alignment.sum(dim=2)[batch["input_mask"].bool()] >= 1)
    for b, start in enumerate(output.ids_slice.tolist()):
        assert 0 <= start <= int(batch["spec_mask"][b].sum()) - 8
        torch.testing.assert_close(output.wav_real[b, 0], batch["wav"][b, 0, start * HOP : (start + 8) * HOP])

    discriminator = VitsDiscriminator(TINY_DISCRIMINATOR)
    d_terms = discriminator_loss_terms(discriminator, output)
    g_terms = generator_loss_terms(discriminator, output, log_spectrogram)
    assert set(g_terms) == {"loss", "mel", "kl", "duration", "feature_matching", "adversarial"}
    assert all(torch.isfinite(value) for value in [*d_terms.values(), *g_terms.values()])
    g_terms["loss"].backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_the_same_rng_gives_the_same_pass():
    batch = synthetic_batch()
    runs = []
    for _ in range(2):
        model = tiny_model().eval()  # no dropout: only the explicit generator is random
        runs.append(train_forward(model, **batch, segment_frames=8, generator=torch.Generator().manual_seed(7)))
    assert torch.equal(runs[0].ids_slice, runs[1].ids_slice)
    torch.testing.assert_close(runs[0].wav_fake, runs[1].wav_fake)
    torch.testing.assert_close(runs[0].duration_loss, runs[1].duration_loss)


def test_deterministic_duration_predictor_and_speakers_are_supported():
    model = tiny_model(use_stochastic_duration_prediction=False, num_speakers=3, speaker_embedding_size=4)
    output = VitsTrainingForward(model, segment_frames=8)(**synthetic_batch(), speaker_ids=torch.tensor([0, 2, 1]))
    assert torch.isfinite(output.duration_loss) and output.duration_loss > 0
    with pytest.raises(ValueError, match="speaker_ids are required"):
        train_forward(model, **synthetic_batch(), segment_frames=8)


def test_gradient_checkpointing_of_every_block_gives_the_same_gradients():
    """In training mode, dropout included: the recomputation must draw the same noise."""
    batch, grads = synthetic_batch(), []
    for blocks in ((), CHECKPOINTABLE_BLOCKS):
        model = tiny_model(hidden_dropout=0.2, attention_dropout=0.2).train()
        torch.manual_seed(3)  # the encoders' own dropout and noise come from the global RNG
        output = train_forward(model, **batch, segment_frames=8, generator=torch.Generator().manual_seed(1), checkpointing=blocks)
        loss = output.wav_fake.square().mean() + kl_loss(output.z_p, output.logs_q, output.m_p, output.logs_p, output.frame_mask)
        (loss + output.duration_loss).backward()
        grads.append({name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys()
    assert {name.split(".")[0] for name in grads[0]} >= {"text_encoder", "posterior_encoder", "flow", "decoder"}
    for name in grads[0]:
        torch.testing.assert_close(grads[1][name], grads[0][name], msg=name)
    with pytest.raises(ValueError, match="unknown block.*vocoder.*choose from text_encoder"):
        train_forward(tiny_model(), **batch, segment_frames=8, checkpointing=["vocoder"])


def test_duration_flows_training_direction_inverts_the_inference_direction(monkeypatch):
    """The training NLL must model the channel transformers' inference reads durations from.

    ``VitsStochasticDurationPredictor.forward(reverse=True)`` skips the first conv flow
    (as the original does; it only touches the discarded channel). Made an identity here,
    the training direction followed by the real inference code must give back the input's
    duration channel.
    """
    predictor = tiny_model().eval().duration_predictor
    first_conv_flow = predictor.flows[1]
    bins = first_conv_flow.num_bins
    identity_derivative = math.log(math.expm1(1 - 1e-3))  # softplus⁻¹(1 - min_derivative)
    with torch.no_grad():
        first_conv_flow.conv_proj.weight.zero_()
        first_conv_flow.conv_proj.bias.copy_(torch.tensor([0.0] * 2 * bins + [identity_derivative] * (bins - 1)))

    torch.manual_seed(0)
    text_hidden, mask = torch.randn(2, 16, 6), torch.ones(2, 1, 6)
    condition = predictor.conv_proj(predictor.conv_dds(predictor.conv_pre(text_hidden), mask)) * mask
    latents = torch.randn(2, 2, 6)
    with torch.no_grad():
        noise, _ = duration_flows_forward(predictor.flows, latents, mask, condition)
        monkeypatch.setattr(torch, "randn", lambda *size, **kwargs: noise.clone())
        log_durations = predictor(text_hidden, mask, reverse=True, noise_scale=1.0)
    torch.testing.assert_close(log_durations, latents[:, :1], rtol=1e-4, atol=1e-4)


# --------------------------------------------------------------------------- the task's step


def _tiny_task(tmp_path, **settings):
    """A VITS task on a tiny generator (no dropout: only the seeded global RNG draws) and discriminator, its optimizers."""
    torch.manual_seed(0)
    vits, discriminator = tiny_model().eval(), VitsDiscriminator(TINY_DISCRIMINATOR)
    task = VitsTask(VitsTaskConfig(init="scratch", discriminator="", **settings), TaskContext(0, torch.device("cpu"), None, tmp_path))
    task.spectrogram = Spectrogram(SpectrogramConfig.from_vits_config(vits.config))  # what build_models sets, without a corpus
    models = {GENERATOR: VitsTrainingForward(vits, segment_frames=8), "discriminator": discriminator}
    return task, models, task.build_optimizers(models)


def _backward(loss: torch.Tensor, model: nn.Module) -> dict[str, torch.Tensor]:
    """``loss`` backwarded into ``model``'s parameters only, as the trainer does per group; their gradients."""
    loss.backward(inputs=list(model.parameters()))
    return {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


def test_the_tasks_step_runs_the_discriminator_on_the_real_window_once_with_the_same_losses_and_gradients(tmp_path):
    """Its pass in the generator's step serves the discriminator's step: 3 passes a batch instead of 4, nothing else changed."""
    batch = VitsBatch(**synthetic_batch(), speaker_ids=None)
    runs = []
    for reused in (True, False):
        task, models, _ = _tiny_task(tmp_path)
        generator, discriminator = models[GENERATOR], models["discriminator"]
        passes = []
        discriminator.register_forward_hook(lambda module, args, out, seen=passes: seen.append(args[0]))
        torch.manual_seed(5)  # the posterior's and the duration predictor's noise, the windows
        if reused:  # the task's step
            g_terms = task.step(models, batch, "generator")
            g_grads = _backward(g_terms["loss"], generator)
            d_terms = task.step(models, batch, "discriminator")
        else:  # each step's own pass on the real window
            output = generator(batch.input_ids, batch.input_mask, batch.spec, batch.spec_mask, batch.wav)
            g_terms = generator_loss_terms(discriminator, output, task.spectrogram.mel, task.config.loss)
            g_grads = _backward(g_terms["loss"], generator)
            d_terms = discriminator_loss_terms(discriminator, output)
        runs.append((g_terms, g_grads, d_terms, _backward(d_terms["loss"], discriminator), len(passes)))
    (g_reused, g_grads_reused, d_reused, d_grads_reused, passes_reused), (g_terms, g_grads, d_terms, d_grads, passes) = runs
    assert (passes_reused, passes) == (3, 4)
    for name in g_terms:
        torch.testing.assert_close(g_reused[name], g_terms[name], msg=name)
    torch.testing.assert_close(d_reused["loss"], d_terms["loss"])
    for reused_grads, grads in ((g_grads_reused, g_grads), (d_grads_reused, d_grads)):
        assert reused_grads.keys() == grads.keys()
        for name in grads:
            torch.testing.assert_close(reused_grads[name], grads[name], msg=name)


def _training_steps(autocast_dtype: torch.dtype | None, steps: int, segment_frames: int = 32, seed: int = 0):
    """Generator + discriminator steps on one batch; returns the mel loss of every step.

    Windows are kept at 512 samples: with 128, the scale discriminator's last grouped conv
    sees 2 samples under a 41-tap kernel, and torch 2.13's CPU bf16 weight gradient for
    that shape intermittently returns garbage for one group (a kernel bug, reproducible
    on the discriminator alone; not seen from 512 samples up or in fp16/fp32).
    """
    model, discriminator, batch = tiny_model(seed), VitsDiscriminator(TINY_DISCRIMINATOR), synthetic_batch()
    g_optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, betas=(0.8, 0.99))
    d_optimizer = torch.optim.AdamW(discriminator.parameters(), lr=2e-3, betas=(0.8, 0.99))
    scaler = torch.amp.GradScaler("cpu", enabled=autocast_dtype == torch.float16)
    rng = torch.Generator().manual_seed(seed)
    mel_losses = []
    for _ in range(steps):
        with torch.autocast("cpu", dtype=autocast_dtype or torch.bfloat16, enabled=autocast_dtype is not None):
            output = train_forward(model, **batch, segment_frames=segment_frames, generator=rng)
            d_loss = discriminator_loss_terms(discriminator, output)["loss"]
        d_optimizer.zero_grad()
        scaler.scale(d_loss).backward()
        scaler.step(d_optimizer)
        with torch.autocast("cpu", dtype=autocast_dtype or torch.bfloat16, enabled=autocast_dtype is not None):
            g_terms = generator_loss_terms(discriminator, output, log_spectrogram)
        g_optimizer.zero_grad()
        scaler.scale(g_terms["loss"]).backward()
        scaler.step(g_optimizer)
        scaler.update()
        assert all(torch.isfinite(value) for value in g_terms.values()), g_terms
        assert torch.isfinite(d_loss)
        mel_losses.append(float(g_terms["mel"]))
    for module in (model, discriminator):
        assert all(torch.isfinite(p).all() for p in module.parameters())
    return mel_losses


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_mixed_precision_steps_stay_finite(dtype):
    _training_steps(dtype, steps=4)


@pytest.mark.slow
def test_overfitting_one_batch_lowers_the_mel_loss():
    mel_losses = _training_steps(None, steps=40)
    first, last = np.mean(mel_losses[:3]), np.mean(mel_losses[-5:])
    assert last < 0.7 * first, mel_losses
