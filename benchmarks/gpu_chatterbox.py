"""The GPU check's Chatterbox part: real-size T3 training steps (random weights) in fp16 under a T4's memory cap.

    python benchmarks/gpu_check.py --out DIR --only chatterbox             # on a CUDA GPU, capped at a T4's memory
    python benchmarks/gpu_check.py --out DIR --dry-run --only chatterbox   # a tiny T3 on the CPU (CI)

Three ways to train T3, the most wanted first (a mode that runs out of memory is that mode's
figure, the next still runs): phase ``fi`` as configs/chatterbox-fi.yaml ships it (the full T3 with
gradient checkpointing, its micro-batch), phase ``voice`` as shipped (a LoRA on the Llama's
projections, its micro-batch, checkpointing and ``checkpoint_over_positions``), and the full T3 without checkpointing. Each
batch is the config's worst: every item a clip of ``max_speech_tokens`` (30 s) with its text at
15 ids a second and a 150-token prompt, the shapes benchmarks/chatterbox_memory.py models. The
model is wrapped in DDP (a process group of one, the trainer's default buckets), so each figure
holds what one of a two-T4 session's processes holds, its gradient buckets included (the
all-reduce between two GPUs is not measured). After the LoRA mode's steps the export's merge
(:func:`fintts.tts.chatterbox.adapter.merged_weights`) runs beside what training holds, and its
extra peak is a figure. Each mode times ``steps`` optimizer steps after ``warmup`` through the
task's own forward pass and loss (:mod:`fintts.tts.chatterbox.t3`), fp16 autocast with a
GradScaler and fp32 master weights as the trainer runs them, and reports seconds per step, peak
GPU memory (to set against the memory model's prediction), the steps the loss scaler skipped, and
its final scale. Random weights say nothing of Finnish quality nor of how fp16 treats the released
weights; those wait for a run on the release.
"""

from __future__ import annotations

import contextlib
import statistics
import tempfile
import time
from pathlib import Path

import torch
import yaml

from chatterbox_memory import TEXT_PER_SECOND
from fintts.tts.chatterbox.adapter import add_lora, merged_weights
from fintts.tts.chatterbox.frozen import TOKENS_PER_SECOND
from fintts.tts.chatterbox.settings import ChatterboxLora
from fintts.tts.chatterbox.t3 import T3, T3Settings, speech_loss
from gpu_judging import MAX_SKIPPED_SHARE, is_oom, release, scaler_story
from vits_step import autocast, synchronize

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "chatterbox-fi.yaml"


def _shipped() -> dict:
    """The shipped config's phases: (micro-batch, checkpointing, LoRA rank) of ``fi`` and ``voice``, and the longest clip."""
    config = yaml.safe_load(CONFIG.read_text())
    base = {key: value for key, value in config.items() if key != "phases"}
    phases = {phase["name"]: {**base, **phase.get("settings", {})} for phase in config["phases"]}
    return {"speech": base["max_speech_tokens"], "fi": phases["fi"], "voice": phases["voice"]}


def _sizes(dry_run: bool) -> dict:
    if dry_run:
        return dict(model={"hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2, "head_dim": 8,
                           "intermediate_size": 32, "text_vocab_size": 256, "max_text_tokens": 64, "max_speech_tokens": 64,
                           "perceiver_queries": 4, "perceiver_heads": 2},
                    text=12, speech=24, prompt=8, warmup=1, steps=3,
                    modes=[("full, checkpointing", 0, True, 2, 0), ("lora r=16", 16, False, 1, 0), ("full", 0, False, 2, 0)])
    shipped = _shipped()
    fi, voice = shipped["fi"], shipped["voice"]
    return dict(model={}, text=round(shipped["speech"] / TOKENS_PER_SECOND * TEXT_PER_SECOND), speech=shipped["speech"],
                prompt=150, warmup=2, steps=6,
                modes=[("full, checkpointing", 0, True, fi["micro_batch_size"], 0),
                       (f"lora r={voice['lora']['r']}", voice["lora"]["r"], bool(voice.get("checkpointing")), voice["micro_batch_size"],
                        voice.get("checkpoint_over_positions", 0)),
                       ("full", 0, False, fi["micro_batch_size"], 0)])


def _batch(settings: T3Settings, s: dict, n: int, generator: torch.Generator, device: torch.device) -> dict:
    """``n`` items, each as long as the config lets a clip be: the micro-batch that needs the most memory."""
    text = torch.randint(1, settings.text_vocab_size, (n, s["text"] + 2), generator=generator)
    text[:, 0], text[:, -1] = settings.start_text_token, settings.stop_text_token
    batch = dict(
        speaker=torch.nn.functional.normalize(torch.randn(n, settings.speaker_embed_size, generator=generator), dim=-1),
        prompt=torch.randint(0, 6561, (n, s["prompt"]), generator=generator), prompt_mask=torch.ones(n, s["prompt"], dtype=torch.bool),
        emotion=torch.full((n,), 0.5), text=text, text_lens=torch.full((n,), s["text"] + 2),
        speech=torch.randint(0, 6561, (n, s["speech"]), generator=generator), speech_lens=torch.full((n,), s["speech"]),
    )
    return {key: value.to(device) for key, value in batch.items()}


@contextlib.contextmanager
def _one_process_group(device: torch.device):
    """A process group of one, so the model is DDP-wrapped as a session's processes have it (its gradient buckets)."""
    with tempfile.TemporaryDirectory() as folder:
        torch.distributed.init_process_group("nccl" if device.type == "cuda" else "gloo", init_method=f"file://{folder}/store",
                                             rank=0, world_size=1)
        try:
            yield
        finally:
            torch.distributed.destroy_process_group()


def time_mode(settings: T3Settings, s: dict, device: torch.device, *, lora: int, checkpointing: bool, batch_size: int,
              over_positions: int = 0) -> dict:
    """``lora``: the adapter's rank (0: the whole T3 trains); ``over_positions``: the config's checkpoint_over_positions."""
    torch.manual_seed(0)
    with torch.device(device):
        t3 = T3(settings)
    t3.set_checkpointing(checkpointing, over_positions=over_positions)
    for unused in (t3.tfmr.embed_tokens.weight, t3.text_head.weight):  # frozen, as the task freezes them
        unused.requires_grad_(False)
    adapted = add_lora(t3, ChatterboxLora(r=lora), "voice") if lora else t3
    adapted.train()
    model = torch.nn.parallel.DistributedDataParallel(adapted, device_ids=[device.index] if device.type == "cuda" else None)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=5e-5)
    scaler = torch.amp.GradScaler(device.type)
    generator = torch.Generator().manual_seed(0)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    times, skipped, losses = [], [], []
    for step in range(s["warmup"] + s["steps"]):
        batch = _batch(settings, s, batch_size, generator, device)
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
    row = {"batch": batch_size, "checkpointing": checkpointing, "seconds_per_step": statistics.mean(times),
           "steps": s["warmup"] + s["steps"], "skipped_steps": skipped,
           "loss_scale": scaler.get_scale(), "losses": [round(v, 4) for v in losses],
           "trainable_parameters": sum(p.numel() for p in trainable), "parameters": sum(p.numel() for p in model.parameters())}
    if device.type == "cuda":
        row["peak_memory_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
    if lora:  # the export's merge beside what training holds (the optimizer's state, DDP's buckets)
        held = torch.cuda.memory_allocated(device) if device.type == "cuda" else 0
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        merged = merged_weights(adapted, "voice")
        row["merged_tensors"] = len(merged)
        if device.type == "cuda":
            row["export_extra_gib"] = (torch.cuda.max_memory_allocated(device) - held) / 2**30
        del merged
    return row


def part_chatterbox(p) -> None:
    """``p``: gpu_parts.Part (device, the T4 cap, where the figures go, checks)."""

    s = _sizes(p.dry_run)
    settings = T3Settings.from_overrides(s["model"])
    p.figures["shape"] = {k: s[k] for k in ("text", "speech", "prompt")}
    rows = p.figures.setdefault("rows", [])
    for name, lora, checkpointing, batch_size, over_positions in s["modes"]:
        release()
        try:
            with _one_process_group(p.device):
                row = time_mode(settings, s, p.device, lora=lora, checkpointing=checkpointing, batch_size=batch_size,
                                over_positions=over_positions)
        except Exception as err:  # noqa: BLE001 - out of memory is a figure here
            if not is_oom(err):
                raise
            row = {"error": str(err).strip().splitlines()[0][:200], "out_of_memory": True}
        rows.append({"mode": name, "batch": batch_size, "checkpointing": checkpointing, **row})
        p.save()
    release()
    ran = [r for r in rows if "error" not in r]
    nan = [r["mode"] for r in ran if not all(v == v and abs(v) != float("inf") for v in r["losses"])]
    p.check("no NaN or inf loss in the fp16 T3 steps", f"{sum(r['steps'] for r in ran)} steps, non-finite in: {nan or 'none'}",
            bool(ran) and not nan)
    stories = [(r["mode"], scaler_story(r)) for r in ran]
    p.check(f"loss scaler: ≤ {MAX_SKIPPED_SHARE:.0%} of the fp16 steps skipped after its search, scale ≥ 1",
            "; ".join(f"{mode}: {story}" for mode, (story, _) in stories) or "no mode ran",
            bool(stories) and all(ok for _, (_, ok) in stories))
    by = {r["mode"]: r for r in rows}
    for (mode, *_), phase in zip(s["modes"], ("fi", "voice")):
        row = by[mode]
        p.check(f"T3 {mode} fits a T4 (GPU memory capped at {p.cap_gib:g} GiB), phase {phase}'s micro-batch {row['batch']} of "
                f"{s['speech']}-token clips, one process of DDP",
                row.get("error") or (f"peak {row['peak_memory_gib']:.2f} GiB" if "peak_memory_gib" in row else "ran"),
                "error" not in row, cuda_only=True)
    lora_row = by[s["modes"][1][0]]
    p.check("the LoRA export's merge beside training needs at most 0.25 GiB more (one projection at a time)",
            f"{lora_row['export_extra_gib']:.3f} GiB" if "export_extra_gib" in lora_row else lora_row.get("error", "ran"),
            lora_row.get("export_extra_gib", 0.0) <= 0.25 and "error" not in lora_row, cuda_only=True)
    p.summary = "; ".join(f"{r['mode']}: " + (r["error"][:60] if "error" in r else f"{r['seconds_per_step']:.3f} s/step"
                                              + (f", peak {r['peak_memory_gib']:.2f} GiB" if "peak_memory_gib" in r else "")
                                              + f", {len(r['skipped_steps'])} skipped") for r in rows)
    p.commands = ["python benchmarks/gpu_check.py --out DIR --only chatterbox", "python benchmarks/chatterbox_memory.py"]
