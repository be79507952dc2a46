"""The memory model of a Chatterbox run on a T4: each phase's peak per GPU at the config's shapes (issue #55).

    python benchmarks/chatterbox_memory.py                          # configs/chatterbox-fi.yaml, measured on the CPU
    python benchmarks/chatterbox_memory.py CONFIG --budget-gib 14.25

What is measured (on the CPU, at the release's width): the bytes autograd keeps for the backward
pass, per position and per Llama layer, by a real forward of T3 (width 1024, MLP 4096, 16 heads of
64, the real vocabularies) with one and two layers at two sequence lengths, under bf16 autocast
(2-byte activations, as fp16 on a T4), with and without a LoRA (r, dropout from the config).
Autograd's saved tensors are summed through ``torch.autograd.graph.saved_tensors_hooks``, each
storage once: what the caching allocator must hold at the end of the forward pass, independent
of the allocator. Two layers minus one is a layer (the fp16 copies of its weights are the part
that does not grow with the positions); the slope over the two lengths is the per-position cost.
The 30 layers and the micro-batch's positions are then scaled linearly: a Llama layer's saved
tensors are linear in the positions with SDPA (no L² attention matrix: CUDA's memory-efficient
kernel on a T4, the CPU's flash kernel here).

What is estimated (counted from the sizes, not measured): fp32 weights, fp32 gradients, AdamW's
two fp32 moments, the optimizer step's temporaries (torch's foreach AdamW makes one fp32 copy of
the trainable parameters, ``_foreach_sqrt`` of the second moments; the fused one none), DDP's
gradient buckets (one fp32 copy of the gradients unless ``gradient_as_bucket_view``), the
checkpointed layers' inputs (the fp32 residual stream, 4 bytes × width per position per layer)
and the LoRA export (every delta and merged weight at once before issue #55; one projection now).
The CUDA context (~0.4 GiB on a T4, outside the allocator's figure) is left to the cap's margin:
the budget is the GPU check's cap, 14.25 GiB of the T4's 15.

A packed item is ``[conditioning | text | speech]``: 34 conditioning rows (speaker, 32 perceiver
queries, emotion), the text ids with start and stop, the speech tokens plus start. Text length
is taken at ``--text-per-second`` ids per second of speech (Finnish read speech: ~15 letters and
spaces a second), so a 30-s clip is 34 + 452 + 751 = 1,237 positions.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from fintts.tts.chatterbox.adapter import add_lora  # noqa: E402
from fintts.tts.chatterbox.frozen import TOKENS_PER_SECOND  # noqa: E402
from fintts.tts.chatterbox.settings import ChatterboxLora  # noqa: E402
from fintts.tts.chatterbox.t3 import T3, T3Settings, speech_loss  # noqa: E402
from gpu_check import T4_CAP_GIB  # noqa: E402  (imports no torch)

GIB = 2**30
#: text ids per second of speech: Finnish read speech, ~15 letters and spaces a second
TEXT_PER_SECOND = 15.0
#: the conditioning rows of a packed item: the speaker, the perceiver's 32 queries, the emotion
CONDITIONING_ROWS = 34


def saved_bytes(model: torch.nn.Module, batch: dict, t3: T3) -> int:
    """Bytes of the tensors autograd saves for backward in one forward pass and loss, each storage once."""
    seen: dict[int, int] = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(**batch)
        loss = speech_loss(logits, t3.targets(batch["speech"], batch["speech_lens"]))
    del loss, logits
    return sum(seen.values())


def _batch(text: int, speech: int) -> dict:
    generator = torch.Generator().manual_seed(0)
    return dict(speaker=torch.randn(1, 256, generator=generator), prompt=torch.randint(0, 6561, (1, 150), generator=generator),
                prompt_mask=torch.ones(1, 150, dtype=torch.bool), emotion=torch.tensor([0.5]),
                text=torch.randint(1, 255, (1, text), generator=generator), text_lens=torch.tensor([text]),
                speech=torch.randint(0, 6561, (1, speech), generator=generator), speech_lens=torch.tensor([speech]))


def measure(lora: ChatterboxLora | None, lengths: tuple[int, int] = (120, 360), text_share: float = 0.6) -> dict:
    """Per layer: fixed bytes (weight copies) and bytes per position; outside the layers: bytes per speech position."""
    figures = {}
    for layers in (1, 2):
        torch.manual_seed(0)
        t3 = T3(T3Settings(num_hidden_layers=layers, max_text_tokens=512, max_speech_tokens=512))
        model = add_lora(t3, lora, "voice") if lora else t3
        model.train()
        for speech in lengths:
            text = round(speech * text_share)
            figures[layers, speech] = (saved_bytes(model, _batch(text, speech), t3), CONDITIONING_ROWS + text + 2 + speech + 1)
    (b1a, pa), (b1b, pb) = figures[1, lengths[0]], figures[1, lengths[1]]
    (b2a, _), (b2b, _) = figures[2, lengths[0]], figures[2, lengths[1]]
    layer_a, layer_b = b2a - b1a, b2b - b1b
    per_position = (layer_b - layer_a) / (pb - pa)
    outside = (b1b - layer_b - (b1a - layer_a)) / (lengths[1] - lengths[0])  # embeddings, head, logits, loss
    return {"layer_fixed": layer_a - per_position * pa, "layer_per_position": per_position, "outside_per_speech": outside}


def sizes(settings: T3Settings, lora: ChatterboxLora | None) -> dict:
    with torch.device("meta"):
        t3 = T3(settings)
    total = sum(p.numel() for p in t3.parameters())
    frozen = t3.tfmr.embed_tokens.weight.numel() + t3.text_head.weight.numel()  # the task freezes both
    projections = [m for name, m in t3.named_modules() if isinstance(m, torch.nn.Linear) and ".layers." in name]
    largest = max(m.weight.numel() for m in projections)
    adapted = sum(m.weight.numel() for m in projections)
    if lora:
        trainable = sum(lora.r * (m.in_features + m.out_features) for m in projections)
    else:
        trainable = total - frozen
    return {"total": total, "trainable": trainable, "adapted": adapted, "largest": largest}


def item_positions(seconds: float, text_per_second: float) -> int:
    speech = round(seconds * TOKENS_PER_SECOND)
    return CONDITIONING_ROWS + round(seconds * text_per_second) + 2 + speech + 1


def phase_rows(name: str, phase: dict, settings: T3Settings, measured: dict, args) -> list[dict]:
    lora = ChatterboxLora(**phase["lora"]) if phase.get("lora", {}).get("r") else None
    size = sizes(settings, lora)
    seconds = phase["max_speech_tokens"] / TOKENS_PER_SECOND
    positions = phase["micro_batch_size"] * item_positions(seconds, args.text_per_second)
    per = measured["lora" if lora else "full"]
    layers = settings.num_hidden_layers
    weights, grads, moments = 4 * size["total"], 4 * size["trainable"], 8 * size["trainable"]
    item = item_positions(seconds, args.text_per_second)

    def activations(checkpointing: bool, positions: int) -> float:
        layer_full = per["layer_fixed"] + per["layer_per_position"] * positions
        if checkpointing:  # each layer's input kept; one layer recomputed at a time in the backward pass, and autocast's
            # cache holds every trained weight's fp16 copy until the forward ends (frozen ones are cast per use)
            cached = 0 if lora else per["layer_fixed"] * (layers - 1)
            held = layers * 4 * settings.hidden_size * positions + layer_full + cached
        else:
            held = layers * layer_full
        return held + per["outside_per_speech"] * positions * (phase["max_speech_tokens"] + 1) / item

    bound = phase.get("checkpoint_over_positions", 0)
    modes = [("off", activations(False, positions)), ("on", activations(True, positions))]
    if bound and not phase.get("checkpointing"):  # the worst micro-batch under the bound runs without, the longest with
        worst = activations(False, min(positions, bound))
        modes.append((f"> {bound}", max(worst, activations(True, positions)) if positions > bound else worst))
    rows = []
    for checkpointing, activations_bytes in modes:
        for fused, bucket_view in ((False, False), (True, True)):
            buckets = 0 if bucket_view else grads
            temporaries = 0 if fused else 4 * size["trainable"]
            persistent = weights + moments + buckets
            backward = persistent + grads + activations_bytes  # the last micro-batch: the earlier ones' gradients are held
            step = persistent + grads + temporaries
            merge_at_once = 8 * size["adapted"] if lora else 0
            merge_layer = 8 * size["largest"] if lora else 0
            export = persistent + merge_layer  # the export runs between steps: gradients freed (zero_grad set_to_none)
            peak = max(backward, step, export)
            rows.append({
                "phase": name, "checkpointing": checkpointing, "fused_adamw+bucket_view": fused,
                "weights": weights, "grads": grads, "adam": moments, "buckets": buckets, "step_temporaries": temporaries,
                "activations": activations_bytes, "positions": positions, "merge_at_once": merge_at_once, "merge_by_layer": merge_layer,
                "peak": peak, "peak_with_old_merge": max(peak, persistent + merge_at_once), "fits": peak / GIB <= args.budget_gib,
            })
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", nargs="?", type=Path, default=ROOT / "configs" / "chatterbox-fi.yaml")
    parser.add_argument("--budget-gib", type=float, default=T4_CAP_GIB)
    parser.add_argument("--text-per-second", type=float, default=TEXT_PER_SECOND)
    args = parser.parse_args(argv)
    config = yaml.safe_load(args.config.read_text())
    base = {key: value for key, value in config.items() if key != "phases"}
    base.setdefault("max_speech_tokens", 750)
    base.setdefault("micro_batch_size", base.get("batch_size", 1))
    phases = config.get("phases") or [{"name": "run"}]
    settings = T3Settings()
    lora_settings = next((ChatterboxLora(**p["settings"]["lora"]) for p in phases if p.get("settings", {}).get("lora", {}).get("r")),
                         None)
    torch.set_num_threads(min(2, torch.get_num_threads()))
    measured = {"full": measure(None)}
    if lora_settings:
        measured["lora"] = measure(lora_settings)
    print(f"{args.config}: per GPU at micro-batch {base['micro_batch_size']} (or the phase's) of clips of max_speech_tokens")
    print(f"measured at width {settings.hidden_size} (bf16 autocast on the CPU, autograd's saved tensors):")
    for kind, per in measured.items():
        print(f"  {kind:4}: {per['layer_per_position'] / 1024:.1f} KiB per position per layer, {per['layer_fixed'] / 2**20:.1f} MiB "
              f"per layer fixed (fp16 weight copies), {per['outside_per_speech'] / 1024:.1f} KiB per speech position outside the layers")
    fitting = {}
    for phase in phases:
        merged = {**base, **phase.get("settings", {})}
        for micro in range(1, merged.get("batch_size", merged["micro_batch_size"]) + 1):
            for row in phase_rows(phase["name"], {**merged, "micro_batch_size": micro}, settings, measured, args):
                if row["fits"]:
                    fitting[row["phase"], row["checkpointing"], row["fused_adamw+bucket_view"]] = micro
    header = (f"{'phase':6} {'ckpt':7} {'fused':5} {'positions':>9} {'weights':>7} {'grads':>6} {'adam':>6} {'buckets':>7} "
              f"{'step tmp':>8} {'activ.':>7} {'peak':>6} {'old merge':>9}  fits {args.budget_gib:g} GiB")
    print(header)
    for phase in phases:
        merged = {**base, **phase.get("settings", {})}
        for row in phase_rows(phase["name"], merged, settings, measured, args):
            g = {key: value / GIB for key, value in row.items() if isinstance(value, (int, float)) and not isinstance(value, bool)}
            print(f"{row['phase']:6} {row['checkpointing']:7} {str(row['fused_adamw+bucket_view']):5} {row['positions']:9d} "
                  f"{g['weights']:7.2f} {g['grads']:6.2f} {g['adam']:6.2f} {g['buckets']:7.2f} {g['step_temporaries']:8.2f} "
                  f"{g['activations']:7.2f} {g['peak']:6.2f} {g['peak_with_old_merge']:9.2f}  {'yes' if row['fits'] else 'NO':3}  "
                  f"largest micro-batch of {merged['max_speech_tokens'] / TOKENS_PER_SECOND:g}-s clips that fits: "
                  f"{fitting.get((row['phase'], row['checkpointing'], row['fused_adamw+bucket_view']), 'none')}")
    print("(GiB per GPU; peak = the largest of the last micro-batch's backward, the optimizer step and an export between steps;"
          " 'old merge' = with every LoRA delta and merged weight made at once)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
