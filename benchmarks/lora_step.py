"""Step time of a LoRA voice against full fine-tuning, measured in the same process, interleaved.

    python benchmarks/lora_step.py                         # demo architecture, 3 rounds of 4 steps
    python benchmarks/lora_step.py --arch mms --batch 8 --rounds 2 --steps 2 --json out.json

One step is :func:`benchmarks.vits_step.time_training_steps`'s: the shared generator forward
pass, the discriminator's loss, backward and AdamW step, the generator's loss, backward and
AdamW step, on synthetic batches (the same ones for both variants). ``lora`` wraps the
generator with ``lora: {r: 8}``'s adapter (default targets, weight norm folded): the
generator's backward pass still runs through the whole frozen network, but computes no
weight gradients for it and AdamW updates the adapter only. The variants alternate round by
round in one process, so a busy machine (2 shared cores here) slows both alike; the load
average is printed with each row. ``demo`` is ``configs/demo.yaml``'s generator and
discriminator; ``mms`` is ``VitsConfig()`` and the full-size discriminator.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import torch
import yaml
from transformers import VitsConfig, VitsModel

from fintts.tts.vits.discriminator import DiscriminatorConfig, VitsDiscriminator
from fintts.tts.vits.lora import add_adapter
from fintts.tts.vits.settings import VitsLora
from vits_step import peak_rss_bytes, time_training_steps

DEMO_CONFIG = Path(__file__).resolve().parent.parent / "configs" / "demo.yaml"


def models(arch: str, lora: bool) -> tuple[VitsModel, VitsDiscriminator]:
    torch.manual_seed(0)
    if arch == "demo":
        demo = yaml.safe_load(DEMO_CONFIG.read_text(encoding="utf-8"))
        generator = VitsModel(VitsConfig(**demo["model"], layerdrop=0.0))
        discriminator = VitsDiscriminator(DiscriminatorConfig(**demo["discriminator_config"]))
    else:
        generator, discriminator = VitsModel(VitsConfig(layerdrop=0.0)), VitsDiscriminator()
    if lora:
        generator = add_adapter(generator, VitsLora(r=8), "voice").get_base_model()
    return generator.train(), discriminator.train()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arch", choices=["demo", "mms"], default="demo")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=4, help="timed steps per variant per round")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--tokens", type=int, default=60)
    parser.add_argument("--seconds", type=float, nargs=2, default=[2.0, 4.0], help="audio length range (the demo's clips)")
    parser.add_argument("--segment-frames", type=int, default=16)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    args.checkpointing, args.precision = [], "fp32"
    built = {variant: models(args.arch, variant == "lora") for variant in ("full", "lora")}
    rows = []
    for round_ in range(args.rounds):
        for variant, (generator, discriminator) in built.items():
            result = time_training_steps(args, generator, discriminator, args.batch, torch.device("cpu"), peak_rss_bytes())
            load = Path("/proc/loadavg").read_text().split()[:3]
            rows.append({"round": round_, "variant": variant, "seconds_per_step": round(result["seconds_per_step"], 3),
                         "loadavg": " ".join(load)})
            print(f"round {round_}  {variant:4s}  {result['seconds_per_step']:.3f} s/step   load average {' '.join(load)}",
                  flush=True)
    for variant in built:
        times = [row["seconds_per_step"] for row in rows if row["variant"] == variant]
        print(f"{variant:4s}  median {statistics.median(times):.3f} s/step over {len(times)} rounds of {args.steps} steps")
    if args.json:
        args.json.write_text(json.dumps({"settings": {k: str(v) for k, v in vars(args).items()}, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
