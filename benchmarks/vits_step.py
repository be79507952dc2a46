"""Time one VITS GAN training step at MMS size, its text encoder alone, and monotonic alignment search at 400×1000.

    python benchmarks/vits_step.py --device cpu --precision fp32 --batch 8 16 --steps 2
    python benchmarks/vits_step.py --device cuda --precision fp16 --batch 8 16 --steps 10 --json out.json

The generator is ``VitsModel(VitsConfig())`` — transformers' defaults are the MMS-TTS
architecture (hidden 192, 6 text-encoder layers, 16-layer posterior WaveNet, HiFi-GAN
512→ with rates 8·8·2·2) — with random weights, plus the full-size discriminator. Inputs
are synthetic but realistically sized: ~100 tokens and 5–8 s of 16 kHz audio per item,
32-frame decoder windows. One step is what the trainer does per batch: the shared
forward pass, the discriminator loss + backward + AdamW step, the generator loss +
backward + AdamW step (with a GradScaler under fp16, fresh per batch size; its scale after the
steps and the steps it skipped for inf/NaN gradients are in the JSON).

Memory: on CUDA the peak of ``torch.cuda.max_memory_allocated`` per batch size; on the
CPU the growth of the process's peak RSS over its size after building the models; the
peak never falls, so list batch sizes ascending and each row reads as that batch's peak.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import resource
import statistics
import time
from pathlib import Path

import torch
from transformers import VitsConfig, VitsModel

from fintts.tts.spectrogram import Spectrogram, SpectrogramConfig
from fintts.tts.vits.alignment import monotonic_alignment_search
from fintts.tts.vits.discriminator import VitsDiscriminator
from fintts.tts.vits.generator import discriminator_loss_terms, generator_loss_terms, train_forward
from fintts.tts.vits.settings import CHECKPOINTABLE_BLOCKS

AUTOCAST_DTYPES = {"fp32": None, "fp16": torch.float16, "bf16": torch.bfloat16}


def synthetic_batch(config: VitsConfig, batch: int, tokens: int, seconds: tuple[float, float], rng: torch.Generator, device):
    hop = math.prod(config.upsample_rates)
    durations = seconds[0] + (seconds[1] - seconds[0]) * torch.rand(batch, generator=rng)
    frame_lengths = (durations * config.sampling_rate / hop).long()
    text_lengths = (tokens * (0.8 + 0.2 * torch.rand(batch, generator=rng))).long()
    num_frames, num_tokens = int(frame_lengths.max()), int(text_lengths.max())
    input_mask = torch.arange(num_tokens)[None] < text_lengths[:, None]
    spec_mask = torch.arange(num_frames)[None] < frame_lengths[:, None]
    tensors = dict(
        input_ids=torch.randint(1, config.vocab_size, (batch, num_tokens), generator=rng) * input_mask,
        input_mask=input_mask.long(),
        spec=torch.rand(batch, config.spectrogram_bins, num_frames, generator=rng) * spec_mask.unsqueeze(1),
        spec_mask=spec_mask.long(),
        wav=0.1 * torch.randn(batch, 1, num_frames * hop, generator=rng),
    )
    return {name: tensor.to(device) for name, tensor in tensors.items()}


def parameter_count(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def autocast(device: torch.device, precision: str):
    dtype = AUTOCAST_DTYPES[precision]
    return contextlib.nullcontext() if dtype is None else torch.autocast(device.type, dtype=dtype)


def time_text_encoder(args, generator_model, batch_size: int, device: torch.device) -> float:
    """Seconds of the text encoder's forward and backward alone, on batches like the step's.

    Its self-attention is all that SDPA could speed up (transformers' ``VitsModel`` refuses
    ``attn_implementation="sdpa"``), so this bounds what a replacement could gain.
    """
    rng = torch.Generator().manual_seed(1)
    times = []
    for step in range(args.warmup + args.steps):
        batch = synthetic_batch(generator_model.config, batch_size, args.tokens, tuple(args.seconds), rng, device)
        synchronize(device)
        start = time.perf_counter()
        with autocast(device, args.precision):
            encoded = generator_model.text_encoder(
                input_ids=batch["input_ids"], padding_mask=batch["input_mask"].unsqueeze(-1).float(),
                attention_mask=batch["input_mask"],
            )
        (encoded.last_hidden_state.float().square().mean() + encoded.prior_means.float().square().mean()).backward()
        synchronize(device)
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
    generator_model.zero_grad(set_to_none=True)
    return statistics.mean(times)


def time_training_steps(
    args, generator_model, discriminator, batch_size: int, device: torch.device, rss_baseline: int
) -> dict:
    config = generator_model.config
    # a LoRA generator (benchmarks/lora_step.py) trains its adapter only
    g_params = [p for p in generator_model.parameters() if p.requires_grad]
    g_optimizer = torch.optim.AdamW(g_params, lr=2e-4, betas=(0.8, 0.99), eps=1e-9)
    d_optimizer = torch.optim.AdamW(discriminator.parameters(), lr=2e-4, betas=(0.8, 0.99), eps=1e-9)
    scaler = torch.amp.GradScaler(device.type, enabled=args.precision == "fp16")
    log_mel = Spectrogram(SpectrogramConfig.from_vits_config(config)).mel
    rng = torch.Generator().manual_seed(0)
    device_rng = torch.Generator(device=device).manual_seed(0)
    d_params = list(discriminator.parameters())

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    times, skipped = [], []
    for step in range(args.warmup + args.steps):
        batch = synthetic_batch(config, batch_size, args.tokens, tuple(args.seconds), rng, device)
        synchronize(device)
        start = time.perf_counter()
        with autocast(device, args.precision):
            output = train_forward(
                generator_model, **batch, segment_frames=args.segment_frames, generator=device_rng,
                checkpointing=args.checkpointing,
            )
            d_loss = discriminator_loss_terms(discriminator, output)["loss"]
        d_optimizer.zero_grad(set_to_none=True)
        scaler.scale(d_loss).backward(inputs=d_params)
        scaler.step(d_optimizer)
        with autocast(device, args.precision):
            g_loss = generator_loss_terms(discriminator, output, log_mel)["loss"]
        g_optimizer.zero_grad(set_to_none=True)
        scaler.scale(g_loss).backward(inputs=g_params)
        scaler.step(g_optimizer)
        scale = scaler.get_scale() if scaler.is_enabled() else None
        scaler.update()
        if scale is not None and scaler.get_scale() < scale:  # the scaler found inf/NaN gradients and skipped the step
            skipped.append(step)
        synchronize(device)
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
        if not (torch.isfinite(d_loss) and torch.isfinite(g_loss)):
            raise RuntimeError(f"non-finite loss at step {step}: d {float(d_loss)}, g {float(g_loss)}")
    result = {
        "batch": batch_size,
        "seconds_per_step": statistics.mean(times),
        "seconds_per_step_min": min(times),
        "timed_steps": len(times),
    }
    if scaler.is_enabled():  # fp16: the loss scale after this batch size's steps, and which of them it skipped (from 0)
        result |= {"loss_scale": scaler.get_scale(), "skipped_steps": skipped, "steps": args.warmup + args.steps}
    if device.type == "cuda":
        result["peak_memory_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
    else:
        result["peak_rss_growth_gib"] = (peak_rss_bytes() - rss_baseline) / 2**30
    return result


def time_alignment(device: torch.device, batch: int, tokens: int = 400, frames: int = 1000, repeats: int = 3) -> float:
    scores = torch.randn(batch, tokens, frames, device=device)
    text_mask = torch.ones(batch, tokens, dtype=torch.bool, device=device)
    frame_mask = torch.ones(batch, frames, dtype=torch.bool, device=device)
    monotonic_alignment_search(scores, text_mask, frame_mask)  # warm-up
    synchronize(device)
    start = time.perf_counter()
    for _ in range(repeats):
        monotonic_alignment_search(scores, text_mask, frame_mask)
    synchronize(device)
    return (time.perf_counter() - start) / repeats


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--precision", choices=sorted(AUTOCAST_DTYPES), default="fp32")
    parser.add_argument("--batch", type=int, nargs="+", default=[8, 16])
    parser.add_argument("--steps", type=int, default=3, help="timed steps per batch size")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps first")
    parser.add_argument("--tokens", type=int, default=100, help="longest text per batch, in tokens")
    parser.add_argument("--seconds", type=float, nargs=2, default=[5.0, 8.0], help="audio length range")
    parser.add_argument("--segment-frames", type=int, default=32)
    parser.add_argument("--checkpointing", nargs="*", default=[], choices=CHECKPOINTABLE_BLOCKS,
                        help="blocks to recompute in the backward pass (gradient checkpointing)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)

    device = torch.device(args.device)
    torch.manual_seed(0)
    generator_model = VitsModel(VitsConfig(layerdrop=0.0)).to(device).train()
    discriminator = VitsDiscriminator().to(device).train()
    report = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu ({torch.get_num_threads()} threads)",
        "precision": args.precision,
        "torch": torch.__version__,
        "generator_parameters": parameter_count(generator_model),
        "discriminator_parameters": parameter_count(discriminator),
        "settings": {k: v for k, v in vars(args).items() if k != "json"},
        "steps": [],
        "alignment_400x1000_seconds": {},
    }
    print(f"{report['device']}, {args.precision}, torch {torch.__version__}")
    print(f"generator {report['generator_parameters'] / 1e6:.1f}M parameters, "
          f"discriminator {report['discriminator_parameters'] / 1e6:.1f}M")

    rss_baseline = peak_rss_bytes()
    for batch_size in args.batch:
        report["steps"].append(time_training_steps(args, generator_model, discriminator, batch_size, device, rss_baseline))
        report["steps"][-1]["text_encoder_seconds"] = time_text_encoder(args, generator_model, batch_size, device)
    for batch_size in (1, 16):
        report["alignment_400x1000_seconds"][str(batch_size)] = time_alignment(device, batch_size)

    memory_key = "peak_memory_gib" if device.type == "cuda" else "peak_rss_growth_gib"
    print(f"\n{'batch':>5}  {'s/step':>8}  {'min s':>8}  {memory_key:>20}  {'text encoder fwd+bwd':>21}")
    for row in report["steps"]:
        share = row["text_encoder_seconds"] / row["seconds_per_step"]
        print(f"{row['batch']:>5}  {row['seconds_per_step']:>8.2f}  {row['seconds_per_step_min']:>8.2f}  {row[memory_key]:>20.2f}"
              f"  {row['text_encoder_seconds']:>8.3f} s ({share:.1%})")
    for batch_size, seconds in report["alignment_400x1000_seconds"].items():
        print(f"MAS 400 tokens × 1000 frames, batch {batch_size:>2}: {seconds * 1000:.0f} ms")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
