"""The GPU check's Chatterbox part: real-size T3 training steps (random weights) in fp16 under a T4's memory cap.

    python benchmarks/gpu_check.py --out DIR --only chatterbox          # on a CUDA GPU, capped at a T4's memory
    python benchmarks/gpu_check.py --out DIR --part chatterbox --dry-run  # a tiny T3 on the CPU (CI)

Three ways to train T3, the most wanted first (a mode that runs out of memory is that mode's
figure, the next still runs): the full T3 with gradient checkpointing (phase ``fi`` on a T4),
a LoRA on the Llama's projections (phase ``voice``), and the full T3 without checkpointing. Each
times ``steps`` optimizer steps after ``warmup`` on batches shaped like a corpus's (text ids,
speech tokens, a prompt of the conditioning clip) through the task's own forward pass and loss
(:mod:`fintts.tts.chatterbox.t3`), fp16 autocast with a GradScaler and fp32 master weights as
the trainer runs them, and reports seconds per step, peak GPU memory, the steps the loss scaler
skipped, and its final scale. Random weights say nothing of Finnish quality nor of how fp16
treats the released weights; those wait for a run on the release.
"""

from __future__ import annotations

import statistics
import time

import torch

from fintts.tts.chatterbox.adapter import add_lora
from fintts.tts.chatterbox.settings import ChatterboxLora
from fintts.tts.chatterbox.t3 import T3, T3Settings, speech_loss
from gpu_judging import MAX_SKIPPED_SHARE, is_oom, release, scaler_story
from vits_step import autocast, synchronize

#: sizes on a GPU (the release's T3; a batch of 4 clips of 12 s, 100 text ids each) and in the dry run (a tiny T3)
SIZES = {
    "gpu": dict(model={}, batch=4, text=100, speech=300, prompt=150, warmup=2, steps=8),
    "dry": dict(model={"hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2, "head_dim": 8, "intermediate_size": 32,
                       "text_vocab_size": 256, "max_text_tokens": 64, "max_speech_tokens": 64, "perceiver_queries": 4,
                       "perceiver_heads": 2}, batch=2, text=12, speech=24, prompt=8, warmup=1, steps=3),
}
MODES = [("full, checkpointing", False, True), ("lora r=16", True, False), ("full", False, False)]


def _batch(settings: T3Settings, s: dict, generator: torch.Generator, device: torch.device) -> dict:
    n = s["batch"]
    text = torch.randint(1, settings.text_vocab_size, (n, s["text"] + 2), generator=generator)
    text[:, 0], text[:, -1] = settings.start_text_token, settings.stop_text_token
    speech_lens = torch.randint(s["speech"] // 2, s["speech"] + 1, (n,), generator=generator)
    speech_lens[0] = s["speech"]
    batch = dict(
        speaker=torch.nn.functional.normalize(torch.randn(n, settings.speaker_embed_size, generator=generator), dim=-1),
        prompt=torch.randint(0, 6561, (n, s["prompt"]), generator=generator), prompt_mask=torch.ones(n, s["prompt"], dtype=torch.bool),
        emotion=torch.full((n,), 0.5), text=text, text_lens=torch.full((n,), s["text"] + 2),
        speech=torch.randint(0, 6561, (n, s["speech"]), generator=generator), speech_lens=speech_lens,
    )
    return {key: value.to(device) for key, value in batch.items()}


def time_mode(settings: T3Settings, s: dict, device: torch.device, *, lora: bool, checkpointing: bool) -> dict:
    torch.manual_seed(0)
    with torch.device(device):
        model = T3(settings)
    model.set_checkpointing(checkpointing)
    if lora:
        model = add_lora(model, ChatterboxLora(r=16), "voice")
    model.train()
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=5e-5)
    scaler = torch.amp.GradScaler(device.type)
    generator = torch.Generator().manual_seed(0)
    t3 = model.get_base_model() if lora else model
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    times, skipped, losses = [], [], []
    for step in range(s["warmup"] + s["steps"]):
        batch = _batch(settings, s, generator, device)
        synchronize(device)
        start = time.perf_counter()
        with autocast(device, "fp16"):
            logits = model(**batch)
        loss = speech_loss(logits, t3.targets(batch["speech"], batch["speech_lens"]))
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        scale = scaler.get_scale()
        scaler.step(optimizer)
        scaler.update()
        if scaler.get_scale() < scale:  # inf/NaN gradients: the scaler skipped this step and halved its scale
            skipped.append(step)
        synchronize(device)
        if step >= s["warmup"]:
            times.append(time.perf_counter() - start)
        losses.append(float(loss.detach()))
    row = {"seconds_per_step": statistics.mean(times), "steps": s["warmup"] + s["steps"], "skipped_steps": skipped,
           "loss_scale": scaler.get_scale(), "losses": [round(v, 4) for v in losses],
           "trainable_parameters": sum(p.numel() for p in trainable), "parameters": sum(p.numel() for p in model.parameters())}
    if device.type == "cuda":
        row["peak_memory_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
    return row


def part_chatterbox(p) -> None:
    """``p``: gpu_parts.Part (device, the T4 cap, where the figures go, checks)."""

    s = SIZES["dry" if p.dry_run else "gpu"]
    settings = T3Settings.from_overrides(s["model"])
    p.figures["shape"] = {k: s[k] for k in ("batch", "text", "speech", "prompt")}
    rows = p.figures.setdefault("rows", [])
    for name, lora, checkpointing in MODES:
        release()
        try:
            row = time_mode(settings, s, p.device, lora=lora, checkpointing=checkpointing)
        except Exception as err:  # noqa: BLE001 - out of memory is a figure here
            if not is_oom(err):
                raise
            row = {"error": str(err).strip().splitlines()[0][:200], "out_of_memory": True}
        rows.append({"mode": name, **row})
        p.save()
    release()
    ran = [r for r in rows if "error" not in r]
    nan = [r["mode"] for r in ran if not all(v == v and abs(v) != float("inf") for v in r["losses"])]
    p.check("no NaN or inf loss in the fp16 T3 steps", f"{sum(r['steps'] for r in ran)} steps, non-finite in: {nan or 'none'}",
            bool(ran) and not nan)
    stories = [(r["mode"], scaler_story({"batch": s["batch"], **r})) for r in ran]
    p.check(f"loss scaler: ≤ {MAX_SKIPPED_SHARE:.0%} of the fp16 steps skipped after its search, scale ≥ 1",
            "; ".join(f"{mode}: {story}" for mode, (story, _) in stories) or "no mode ran",
            bool(stories) and all(ok for _, (_, ok) in stories))
    by = {r["mode"]: r for r in rows}
    for mode in ("full, checkpointing", "lora r=16"):
        row = by[mode]
        p.check(f"T3 {mode} fits a T4 (GPU memory capped at {p.cap_gib:g} GiB), batch {s['batch']}",
                row.get("error") or (f"peak {row['peak_memory_gib']:.2f} GiB" if "peak_memory_gib" in row else "ran"),
                "error" not in row, cuda_only=True)
    p.summary = "; ".join(f"{r['mode']}: " + (r["error"][:60] if "error" in r else f"{r['seconds_per_step']:.3f} s/step"
                                              + (f", peak {r['peak_memory_gib']:.2f} GiB" if "peak_memory_gib" in r else "")
                                              + f", {len(r['skipped_steps'])} skipped") for r in rows)
    p.commands = ["python benchmarks/gpu_check.py --out DIR --only chatterbox"]
