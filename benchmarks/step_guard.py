"""What the step guard adds to a training step: the gradient norms it judges each step by.

Before any optimizer steps, the trainer computes every group's gradient norm
(:func:`fintts.train.step.guard.gradient_norm`) and brings it to the host with the losses, so that a
step with NaN/inf gradients or a spiking loss is skipped. This measures that norm on an
MMS-sized VITS generator and discriminator with random gradients, beside the AdamW update
the step does anyway:

    python benchmarks/step_guard.py                   # CPU
    python benchmarks/step_guard.py --device cuda --repeats 50 --json out.json

Each figure is the median of ``--repeats`` timings (CUDA synchronised around each one).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from transformers import VitsConfig, VitsModel

from fintts.train.step.guard import gradient_norm
from fintts.tts.vits.discriminator import VitsDiscriminator


def timed(call, device: torch.device, repeats: int) -> float:
    seconds = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        started = time.perf_counter()
        call()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    device = torch.device(args.device)
    torch.manual_seed(0)
    models = {"generator": VitsModel(VitsConfig()).to(device), "discriminator": VitsDiscriminator().to(device)}
    rows = {}
    for name, model in models.items():
        params = [p for p in model.parameters() if p.requires_grad]
        for p in params:
            p.grad = torch.randn_like(p)
        optimizer = torch.optim.AdamW(params, lr=1e-9)
        optimizer.step()  # allocate the moments outside the timing
        norm = timed(lambda: gradient_norm(params, device).item(), device, args.repeats)
        update = timed(optimizer.step, device, args.repeats)
        rows[name] = {
            "parameters": sum(p.numel() for p in params), "tensors": len(params),
            "guard_norm_s": norm, "adamw_step_s": update, "norm_vs_adamw": norm / update,
        }
        print(f"{name:13s} {rows[name]['parameters'] / 1e6:6.1f}M params in {len(params):4d} tensors: "
              f"gradient norm {norm * 1e3:8.2f} ms, AdamW step {update * 1e3:8.2f} ms ({norm / update:.0%} of it)")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"device": str(device), "repeats": args.repeats, "models": rows}, handle, indent=1)


if __name__ == "__main__":
    main()
