"""Where a demo training step's time goes, and what a validation costs, on this machine.

    python benchmarks/demo_profile.py                       # configs/demo.yaml, 20 timed steps
    python benchmarks/demo_profile.py segment_frames=32 model.upsample_initial_channel=96 --steps 30

Builds the demo's real task from the config (the embedded corpus, its cached features,
the same models, optimizers and batches as ``fintts train``) and runs the trainer's step
by hand, timing each part: fetching the batch, the text encoder, the posterior encoder,
the flow, monotonic alignment search, the duration predictor, the HiFi-GAN decoder, the
discriminator's forward/backward/update and the generator's loss, backward and update.
Then it times one validation (``task.evaluate``: the sample sentences plus every held-out
clip synthesised and scored). The submodules and the alignment search are timed with
forward hooks inside "generator forward+losses" (which also holds the discriminator's
forward on real and generated audio for the adversarial and feature-matching losses and
the mel loss); "discriminator fwd+bwd" is the discriminator's own step.

Threads: torch's default (one per core); set ``OMP_NUM_THREADS`` to compare.
Wall-clock numbers on a shared machine are noisy: the script prints ``/proc/loadavg`` and
the process's CPU seconds per step, which other processes barely move; with
``OMP_NUM_THREADS=1`` that is the step's cost on one idle core.
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch

import fintts.tts.vits.generator as generator_module
from fintts.train.config import load_config
from fintts.train.task import TaskContext
from fintts.tts.vits.task import VitsTask

DEMO_CONFIG = Path(__file__).resolve().parents[1] / "configs" / "demo.yaml"


class PartTimer:
    """Accumulates wall-clock seconds per named part of a step."""

    def __init__(self) -> None:
        self.seconds: dict[str, list[float]] = collections.defaultdict(list)
        self._current: dict[str, float] = collections.defaultdict(float)
        self._started: dict[str, float] = {}

    def start(self, name: str) -> None:
        self._started[name] = time.perf_counter()

    def stop(self, name: str) -> None:
        self._current[name] += time.perf_counter() - self._started.pop(name)

    def hook_module(self, name: str, module: torch.nn.Module) -> None:
        module.register_forward_pre_hook(lambda *_: self.start(name))
        module.register_forward_hook(lambda *_: self.stop(name))

    def timed(self, name: str, function):
        def wrapper(*args, **kwargs):
            self.start(name)
            try:
                return function(*args, **kwargs)
            finally:
                self.stop(name)
        return wrapper

    def end_step(self, keep: bool) -> None:
        if keep:
            for name, value in self._current.items():
                self.seconds[name].append(value)
        self._current.clear()


def load_average() -> str:
    return Path("/proc/loadavg").read_text().strip() if Path("/proc/loadavg").is_file() else "n/a"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides, as for fintts train")
    parser.add_argument("--config", type=Path, default=DEMO_CONFIG)
    parser.add_argument("--steps", type=int, default=20, help="timed steps")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    parser.add_argument("--no-validation", action="store_true", help="skip timing one validation")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)

    config = load_config(args.config, args.overrides)
    torch.manual_seed(config.train.seed)
    timer = PartTimer()
    with tempfile.TemporaryDirectory() as cache:
        context = TaskContext(config.train.seed, torch.device("cpu"), None, Path(cache), progress=False, log=lambda _: None)
        task = VitsTask(config.task, context)
        models = task.build_models()
        groups = task.build_optimizers(models)
        data = task.train_data()
        vits = models["model"].model
        for name in ("text_encoder", "posterior_encoder", "flow", "duration_predictor", "decoder"):
            timer.hook_module(name, getattr(vits, name))
        generator_module.monotonic_alignment_search = timer.timed("alignment search", generator_module.monotonic_alignment_search)
        loader = torch.utils.data.DataLoader(
            data.dataset, batch_size=config.train.batch_size, shuffle=True, collate_fn=data.collate,
            num_workers=0, generator=torch.Generator().manual_seed(0),
        )
        batches = iter(loader)
        params = {g.name: [p for m in g.models for p in models[m].parameters()] for g in groups}
        step_seconds, cpu_seconds = [], []
        for step in range(args.warmup + args.steps):
            started, cpu_started = time.perf_counter(), time.process_time()
            timer.start("batch")
            try:
                batch = next(batches)
            except StopIteration:
                batches = iter(loader)
                batch = next(batches)
            timer.stop("batch")
            for group in groups:
                if group.name == "discriminator":
                    timer.start("discriminator fwd+bwd")
                    loss = task.step(models, batch, group.name)["loss"]
                    loss.backward(inputs=params[group.name])
                    timer.stop("discriminator fwd+bwd")
                else:
                    timer.start("generator forward+losses")
                    loss = task.step(models, batch, group.name)["loss"]
                    timer.stop("generator forward+losses")
                    timer.start("generator backward")
                    loss.backward(inputs=params[group.name])
                    timer.stop("generator backward")
            timer.start("optimizer steps")
            for group in groups:
                group.optimizer.step()
                group.optimizer.zero_grad(set_to_none=True)
            timer.stop("optimizer steps")
            timer.end_step(keep=step >= args.warmup)
            if step >= args.warmup:
                step_seconds.append(time.perf_counter() - started)
                cpu_seconds.append(time.process_time() - cpu_started)

        report = {
            "config": str(args.config), "overrides": args.overrides, "threads": torch.get_num_threads(),
            "generator_parameters": sum(p.numel() for p in models["model"].parameters()),
            "discriminator_parameters": sum(p.numel() for p in models["discriminator"].parameters()),
            "seconds_per_step": statistics.mean(step_seconds), "seconds_per_step_median": statistics.median(step_seconds),
            "cpu_seconds_per_step": statistics.mean(cpu_seconds),
            "parts": {name: statistics.mean(values) for name, values in timer.seconds.items()},
        }
        if not args.no_validation:
            vits.eval()
            started = time.perf_counter()
            with torch.no_grad():
                evaluation = task.evaluate(models, 0)
            report["validation_seconds"] = time.perf_counter() - started
            report["validation_metrics"] = evaluation.metrics
        report["loadavg"] = load_average()

    print(f"{report['config']} {' '.join(args.overrides)}: {report['threads']} thread(s), generator "
          f"{report['generator_parameters'] / 1e6:.2f}M, discriminator {report['discriminator_parameters'] / 1e6:.2f}M parameters")
    print(f"step {report['seconds_per_step']:.3f} s mean, {report['seconds_per_step_median']:.3f} s median over {args.steps} steps; "
          f"{report['cpu_seconds_per_step']:.3f} CPU s/step (this process, all threads)")
    for name, seconds in sorted(report["parts"].items(), key=lambda item: -item[1]):
        print(f"  {name:<24} {seconds * 1000:7.1f} ms  {seconds / report['seconds_per_step']:6.1%}")
    if "validation_seconds" in report:
        print(f"one validation: {report['validation_seconds']:.1f} s")
    print(f"loadavg: {report['loadavg']}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
