"""The parts of ``benchmarks/gpu_check.py``, each run in a process of its own (``gpu_check.py --part NAME``).

A part measures through what a user runs — the benchmarks beside this file (``vits_step``,
``mas``, ``step_share``, ``stand_ins``), ``fintts train`` on the command line, and the
package's API (:func:`fintts.train.train`, :func:`fintts.train.tools.bench.bench`) — and writes
``DIR/parts/NAME.json``: its figures, its checks (a target, the figure against it, met or
not, or not judged and why) and the commands a person would type for the same figures. It
writes that file as it goes, so a part stopped at its time limit leaves what it had measured.

Targets judged on CUDA only (speed, memory, the share of a session) are not judged in the dry
run: a toy voice on a shared CPU says nothing about them. Those that hold on any device (no
NaN, the loss scaler, a session stopping inside its budget, resume) are judged everywhere.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import statistics
import sys
import time
import traceback
import warnings
from pathlib import Path

import torch
import yaml

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

import mas as mas_bench  # noqa: E402
import step_share as share_bench  # noqa: E402
import vits_step  # noqa: E402
from gpu_judging import MAX_SKIPPED_SHARE, is_oom, release, scaler_story  # noqa: E402
from stand_ins import SMALL_DISCRIMINATOR, SMALL_VOICE, make_corpus, make_init  # noqa: E402

MMS_CONFIG = ROOT / "configs" / "mms-fin.yaml"
#: sizes of the check on a GPU (the MMS-sized voice, configs/mms-fin.yaml) and of the dry run (a toy voice, on the CPU).
SIZES = {
    "gpu": dict(clips=200, clip_seconds=6.0, rate=22050, step_batches=[8, 16], step_steps=18, step_warmup=2, tokens=100,
                audio=[5.0, 8.0], segment_frames=32, mas_batches=[1, 8, 16], mas_repeats=5, budget=30, resume_more=4,
                eval_at=12, share_steps=60, share_validations=2, bench_steps=2),
    "dry": dict(clips=24, clip_seconds=1.5, rate=16000, step_batches=[4], step_steps=11, step_warmup=1, tokens=20,
                audio=[1.0, 1.5], segment_frames=16, mas_batches=[1, 2], mas_repeats=1, budget=25, resume_more=3,
                eval_at=3, share_steps=2, share_validations=2, bench_steps=1),
}
#: the dry run's settings over configs/mms-fin.yaml: one micro-batch of 4, no loader workers, short validations, and
#: no ONNX graphs but in part_background_export, whose subject they are (it sets them itself): each is a process of
#: ~10 s of CPU that no other part's check reads.
TOY_SETTINGS = {
    "batch_size": 4, "micro_batch_size": 4, "num_workers": 0, "persistent_workers": False, "segment_frames": 16,
    "discriminator_config": SMALL_DISCRIMINATOR, "mcd_items": 2, "eval_speakers": 1, "eval_sentences": ["Kello on 7.30."],
    "warmup_steps": 0, "export_onnx": False,
}
#: the fp16 targets of benchmarks/README.md.
FP16_SPEED_UP, FP16_MEMORY_SAVING = 1.5, 0.40
#: micro_batch_size 8 fits "with room": the largest that fits is at least this.
ROOM_MICRO_BATCH = 12
#: MAS on the device, both copies included, at most this share of the frame loop's time.
MAS_SHARE_OF_FRAME_LOOP = 0.5
#: steps while the ONNX export runs in the background at most this much slower than without it.
EXPORT_SLOWDOWN = 1.10
#: the share of a 12-hour session in optimizer steps.
STEP_SHARE = 0.97


@dataclasses.dataclass
class Part:
    """One part's process: where it works, on what, and what it found."""

    name: str
    out: Path
    dry_run: bool
    cap_gib: float
    figures: dict = dataclasses.field(default_factory=dict)
    checks: list = dataclasses.field(default_factory=list)
    summary: str = ""
    commands: list = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        cuda = torch.cuda.is_available() and not self.dry_run  # an index: set_per_process_memory_fraction refuses a bare "cuda"
        self.device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
        self.cuda = self.device.type == "cuda"
        self.sizes = SIZES["dry" if self.dry_run else "gpu"]
        self.stand_ins = self.out / "stand-ins"
        self.work = self.out / "work" / self.name
        self.env = self._environment()

    def _environment(self) -> dict:
        import transformers

        from fintts.train.machine.platform import device_label

        env = {
            "device_type": self.device.type, "device": device_label(self.device, 1), "torch": torch.__version__,
            "cuda": torch.version.cuda, "transformers": transformers.__version__, "threads": torch.get_num_threads(),
            "cpus": os.cpu_count(),
        }
        if self.cuda:
            total = torch.cuda.get_device_properties(self.device).total_memory
            fraction = min(1.0, self.cap_gib * 2**30 / total)
            torch.cuda.set_per_process_memory_fraction(fraction, self.device)
            env |= {"cudnn": torch.backends.cudnn.version(), "gpu_memory_gib": round(total / 2**30, 2), "cap_gib": self.cap_gib,
                    "cap_fraction": round(fraction, 4)}
        return env

    # -------------------------------------------------------------- what the parts share
    @property
    def config_label(self) -> str:
        return "OUT/toy.yaml" if self.dry_run else "configs/mms-fin.yaml"

    @property
    def config(self) -> Path:
        return self.stand_ins / "toy.yaml" if self.dry_run else MMS_CONFIG

    def overrides(self, *more: str) -> list[str]:
        """The config's overrides for this check: the stand-ins, no Hub, fp16 (a T4's precision, also on a bf16 GPU)."""
        return [f"data={self.stand_ins / 'corpus'}", f"init={self.stand_ins / 'mms-sized'}", "hub_repo=", "precision=fp16", *more]

    def fresh_store(self, name: str) -> Path:
        """An empty run folder whose feature cache is shared with the part's other runs (as fintts bench does)."""
        store = self.work / name
        shutil.rmtree(store, ignore_errors=True)
        store.mkdir(parents=True)
        (self.work / "cache").mkdir(exist_ok=True)
        (store / "cache").symlink_to(self.work / "cache", target_is_directory=True)
        return store

    def check(self, target: str, value: str, met: bool | None, *, cuda_only: bool = False, why: str = "") -> None:
        if cuda_only and not self.cuda:
            met, why = None, "judged on CUDA only"
        self.checks.append({"target": target, "value": value, "met": None if met is None else bool(met), "why": why})

    def save(self, status: str = "running", error: str | None = None) -> None:
        path = self.out / "parts" / f"{self.name}.json"
        data = {"name": self.name, "status": status, "error": error, "env": self.env, "summary": self.summary,
                "figures": self.figures, "checks": self.checks, "commands": self.commands}
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1, default=str))
        os.replace(tmp, path)


def run(name: str, *, out: Path, dry_run: bool, cap_gib: float) -> int:
    part = Part(name, Path(out).resolve(), dry_run, cap_gib)
    part.save()
    try:
        PARTS[name](part)
    except BaseException as err:  # the part's error is its result; the driver goes on with the next part
        part.save("error", f"{type(err).__name__}: {str(err).strip()[:600]}")
        traceback.print_exc()
        return 1
    part.save("ok")
    return 0


# ---------------------------------------------------------------------- stand-ins


def part_stand_ins(p: Part) -> None:
    from fintts.train.registry import registered_tasks

    if "vits" not in registered_tasks():  # the configs name the task by its entry point, which only an install registers
        raise RuntimeError("fintts is not installed here: pip install --no-deps --no-build-isolation -e . (no network needed)")
    s = p.sizes
    shutil.rmtree(p.stand_ins, ignore_errors=True)
    make_corpus(p.stand_ins / "corpus", s["clips"], s["clip_seconds"], s["rate"])
    make_init(p.stand_ins / "mms-sized", **(SMALL_VOICE if p.dry_run else {}))
    if p.dry_run:
        config = yaml.safe_load(MMS_CONFIG.read_text()) | TOY_SETTINGS
        (p.stand_ins / "toy.yaml").write_text(yaml.safe_dump(config, allow_unicode=True))
    from safetensors import safe_open

    with safe_open(p.stand_ins / "mms-sized" / "model.safetensors", "pt") as weights:
        parameters = sum(_numel(weights.get_slice(key).get_shape()) for key in weights.keys())
    p.figures = {"clips": s["clips"], "clip_seconds": s["clip_seconds"], "rate": s["rate"], "generator_parameters": parameters,
                 "config": str(p.config.relative_to(ROOT) if p.config.is_relative_to(ROOT) else p.config)}
    p.summary = (f"{s['clips']} clips of ~{s['clip_seconds']:g} s at {s['rate']} Hz; a random-weight voice of "
                 f"{parameters / 1e6:.2f}M parameters{' (toy)' if p.dry_run else ' (MMS-sized)'}")
    p.commands = [f"python benchmarks/stand_ins.py OUT --clips {s['clips']} --seconds {s['clip_seconds']:g} --rate {s['rate']}"]
    (p.stand_ins / "done").write_text(p.summary + "\n")


def _numel(shape) -> int:
    count = 1
    for size in shape:
        count *= size
    return count


# ---------------------------------------------------------------------- the fp16 step


def part_fp16_step(p: Part) -> None:
    """vits_step's training step on the stand-in voice, fp32 then fp16, each batch size from the same weights."""
    from transformers import VitsModel

    from fintts.tts.vits.discriminator import DiscriminatorConfig, VitsDiscriminator

    s = p.sizes
    torch.manual_seed(0)
    generator = VitsModel.from_pretrained(p.stand_ins / "mms-sized", layerdrop=0.0).to(p.device).train()
    sizes = {k: tuple(v) for k, v in SMALL_DISCRIMINATOR.items()} if p.dry_run else {}
    discriminator = VitsDiscriminator(DiscriminatorConfig(**sizes)).to(p.device).train()
    start = [{k: v.detach().clone() for k, v in m.state_dict().items()} for m in (generator, discriminator)]
    rows = p.figures.setdefault("rows", [])
    for precision in ("fp32", "fp16"):
        for batch in s["step_batches"]:
            for model, state in zip((generator, discriminator), start):
                model.load_state_dict(state)
                model.zero_grad(set_to_none=True)
            release()
            args = argparse.Namespace(precision=precision, warmup=s["step_warmup"], steps=s["step_steps"], tokens=s["tokens"],
                                      seconds=s["audio"], segment_frames=s["segment_frames"], checkpointing=[])
            try:
                row = vits_step.time_training_steps(args, generator, discriminator, batch, p.device, vits_step.peak_rss_bytes())
            except Exception as err:  # noqa: BLE001 - out of memory and NaN are figures here
                if not (is_oom(err) or "non-finite loss" in str(err)):
                    raise
                row = {"batch": batch, "error": str(err).strip().splitlines()[0][:200], "out_of_memory": is_oom(err)}
            rows.append({"precision": precision, **row})
            p.save()
    for model in (generator, discriminator):
        model.zero_grad(set_to_none=True)
    release()
    first = s["step_batches"][0]
    args = argparse.Namespace(precision="fp16", warmup=1, steps=s["step_steps"], tokens=s["tokens"], seconds=s["audio"])
    try:
        encoder = vits_step.time_text_encoder(args, generator, first, p.device)
        fp16_first = next((r for r in rows if r["precision"] == "fp16" and r["batch"] == first and "error" not in r), None)
        p.figures["text_encoder"] = {"batch": first, "seconds": encoder,
                                     "share_of_step": encoder / fp16_first["seconds_per_step"] if fp16_first else None}
    except Exception as err:  # noqa: BLE001
        p.figures["text_encoder"] = {"batch": first, "error": str(err).strip().splitlines()[0][:200]}
    _judge_step(p, rows)


def _judge_step(p: Part, rows: list[dict]) -> None:
    s = p.sizes
    by = {(r["precision"], r["batch"]): r for r in rows}
    memory = "peak_memory_gib" if p.cuda else "peak_rss_growth_gib"
    parts = []
    for batch in s["step_batches"]:
        fp32, fp16 = by[("fp32", batch)], by[("fp16", batch)]
        if "error" in fp32 or "error" in fp16:
            why = f"fp32: {fp32.get('error', 'ran')}; fp16: {fp16.get('error', 'ran')}"
            p.check(f"fp16 ≥ {FP16_SPEED_UP:g}× faster than fp32 at batch {batch}", why, None if fp32.get("out_of_memory") else False,
                    cuda_only=True, why="fp32 does not fit the cap" if fp32.get("out_of_memory") else "")
            continue
        speed = fp32["seconds_per_step"] / fp16["seconds_per_step"]
        saving = 1 - fp16[memory] / fp32[memory] if fp32[memory] > 0 else 0.0
        parts.append(f"batch {batch}: {fp32['seconds_per_step']:.3f} → {fp16['seconds_per_step']:.3f} s/step ({speed:.2f}×)"
                     + (f", peak {fp32[memory]:.2f} → {fp16[memory]:.2f} GiB" if p.cuda else ""))
        p.check(f"fp16 ≥ {FP16_SPEED_UP:g}× faster than fp32 at batch {batch}",
                f"{speed:.2f}× ({fp32['seconds_per_step']:.3f} → {fp16['seconds_per_step']:.3f} s/step)", speed >= FP16_SPEED_UP,
                cuda_only=True)
        p.check(f"fp16 ≥ {FP16_MEMORY_SAVING:.0%} less peak memory than fp32 at batch {batch}",
                f"{saving:.0%} less ({fp32[memory]:.2f} → {fp16[memory]:.2f} GiB)" if p.cuda else
                "not measured on a CPU (a process's peak RSS never falls, so the later rows' growth is not theirs)",
                saving >= FP16_MEMORY_SAVING, cuda_only=True)
    batch = 8 if 8 in s["step_batches"] else s["step_batches"][0]
    row = by[("fp16", batch)]
    p.check(f"fp16 at batch {batch} fits a T4 (GPU memory capped at {p.cap_gib:g} GiB)",
            row.get("error") or f"peak {row[memory]:.2f} GiB", "error" not in row, cuda_only=True)
    fp16_rows = [r for r in rows if r["precision"] == "fp16"]
    nan = [r for r in fp16_rows if "non-finite" in r.get("error", "")]
    steps = sum(r.get("steps", 0) for r in fp16_rows)
    p.check("no NaN or inf loss in the fp16 steps", f"{steps} fp16 steps, {len(nan)} batch size(s) with a non-finite loss", not nan)
    ran = [r for r in fp16_rows if "loss_scale" in r]
    p.check(f"loss scaler: once it found its scale, ≤ {MAX_SKIPPED_SHARE:.0%} of the later fp16 steps skipped, scale ≥ 1 "
            "(no skipped-step storm)", "; ".join(scaler_story(r)[0] for r in ran) or "no fp16 row ran",
            bool(ran) and all(scaler_story(r)[1] for r in ran))
    encoder = p.figures.get("text_encoder", {})
    if encoder.get("share_of_step") is not None:
        parts.append(f"text encoder fwd+bwd {encoder['share_of_step']:.0%} of an fp16 step (all SDPA could speed up)")
    p.summary = "; ".join(parts)
    batches = " ".join(map(str, s["step_batches"]))
    p.commands = [f"python benchmarks/vits_step.py --device {p.device.type} --precision {precision} --batch {batches} "
                  f"--steps {s['step_steps']} --warmup {s['step_warmup']}" for precision in ("fp32", "fp16")]


# ---------------------------------------------------------------------- MAS


def part_mas(p: Part) -> None:
    s = p.sizes
    options = ["--batch", *map(str, s["mas_batches"]), "--repeats", str(s["mas_repeats"])]
    p.commands = [f"python benchmarks/mas.py --device {device} {' '.join(options)}" for device in dict.fromkeys([p.device.type, "cpu"])]
    try:
        on_device = mas_bench.main(["--device", p.device.type, *options])
        on_cpu = mas_bench.main(["--device", "cpu", *options]) if p.cuda else on_device
    except AssertionError as err:  # mas.py checks every path against the frame loop's
        p.check("the path equals the frame loop's", str(err), False)
        return
    p.check("the path equals the frame loop's (every shape and batch, on the device)", f"{len(on_device)} calls equal", True)
    rows = []
    for dev, cpu in zip(on_device, on_cpu):
        rows.append({"shape": dev["shape"], "batch": dev["batch"], "fintts_device_ms": dev["fintts_ms"], "fintts_cpu_ms": cpu["fintts_ms"],
                     "copies_ms": dev["fintts_ms"] - cpu["fintts_ms"], "frame_loop_device_ms": dev["frame_loop_ms"],
                     "vits_port_cpu_ms": cpu["vits_port_cpu_ms"]})
    p.figures["rows"] = rows
    worst = max(rows, key=lambda r: r["fintts_device_ms"] / r["frame_loop_device_ms"])
    share = worst["fintts_device_ms"] / worst["frame_loop_device_ms"]
    p.check(f"fintts's MAS on the device (both host copies counted) ≤ {MAS_SHARE_OF_FRAME_LOOP:g}× the frame loop's, every row",
            f"at most {share:.2f}× ({worst['shape']} batch {worst['batch']}: {worst['fintts_device_ms']:.2f} against "
            f"{worst['frame_loop_device_ms']:.2f} ms)", share <= MAS_SHARE_OF_FRAME_LOOP, cuda_only=True)
    big = max((r for r in rows if r["shape"] == "400x1000"), key=lambda r: r["batch"])
    p.summary = (f"400×1000 batch {big['batch']}: {big['fintts_device_ms']:.2f} ms on {p.device.type} "
                 f"(CPU path {big['fintts_cpu_ms']:.2f} ms, so the copies ~{big['copies_ms']:.2f} ms), frame loop "
                 f"{big['frame_loop_device_ms']:.2f} ms")


# ---------------------------------------------------------------------- budget, save, resume


def part_resume(p: Part) -> None:
    """Session A with a budget, B resumes it a few steps on, C trains the same steps unbroken; B's weights against C's."""
    from fintts.cli import main as fintts

    s = p.sizes
    if p.cuda:  # bit-identical where CUDA allows: its deterministic kernels, warned where an operation has none
        torch.use_deterministic_algorithms(True, warn_only=True)
    broken, whole = p.fresh_store("broken"), p.fresh_store("whole")
    config = str(p.config)

    def session(store: Path, label: str, *options: str) -> dict:
        summary = p.work / f"summary-{label}.json"
        code = fintts(["train", config, *p.overrides(), "--store", str(store), "--no-progress", "--summary-json", str(summary), *options])
        found = json.loads(summary.read_text()) if summary.is_file() else {}
        p.figures[f"session_{label}"] = {"exit_code": code, **{k: found.get(k) for k in (
            "state", "reason", "start_step", "end_step", "session_seconds", "durable", "latest_checkpoint", "resumed_from")}}
        p.save()
        if code != 0:
            raise RuntimeError(f"session {label}: fintts train exited {code} ({found.get('reason')}); see the part's log")
        return found

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        started = time.time()  # the session clock's origin off Kaggle for main([...]) in a running program: the call
        a = session(broken, "a", "--budget", f"{s['budget']}s", "--max-steps", "100000")
        ended = time.time() - started
        stop = a["end_step"]
        p.check(f"a {s['budget']} s session stops inside its budget (the call to its return)", f"{ended:.1f} s, stopped by "
                f"{a['reason']} at step {stop}", ended <= s["budget"] and a["reason"] == "deadline")
        p.check("it saves: a complete checkpoint of its last step, safe in the store",
                f"{Path(a['latest_checkpoint'] or '-').name}, durable: {a['durable']}",
                stop > 0 and a["durable"] and (a["latest_checkpoint"] or "").endswith(f"step-{stop:08d}"))
        target = stop + s["resume_more"]
        b = session(broken, "b", "--max-steps", str(target))
        p.check("a second session resumes it from that step", f"from step {b['start_step']} to {b['end_step']}",
                b["start_step"] == stop and b["end_step"] == target)
        session(whole, "c", "--max-steps", str(target))
    nondeterministic = sorted({str(w.message).split(".")[0][:160] for w in caught if "deterministic" in str(w.message)})
    difference = _compare_runs(broken, whole)
    p.figures |= {"compare": difference, "nondeterministic_operations": nondeterministic}
    same = difference["identical"]
    text = ("bit-identical weights, optimizer moments not compared" if same else
            f"{difference['differing']} of {difference['tensors']} tensors differ: max |Δ| {difference['max_abs']:.3g}, "
            f"largest relative L2 difference {difference['max_relative']:.3g} ({difference['worst']})")
    text += f"; loss scale {difference['scale_broken']} against {difference['scale_whole']}"
    if p.cuda:
        text += (f"; CUDA's deterministic algorithms on, {len(nondeterministic)} operation(s) without one"
                 + (f": {'; '.join(nondeterministic)}" if nondeterministic else ""))
    stated = not same and p.cuda  # CUDA may allow no bit-identity: then the difference is the figure, not a failure
    p.check(f"resumed at step {stop} and trained to {target}: the weights equal the unbroken run's", text,
            None if stated else same, why="not bit-identical on CUDA: the difference is stated" if stated else "")
    outcome = "bit-identical" if same else f"max |Δ| {difference['max_abs']:.3g}"
    p.summary = (f"{s['budget']} s budget: stopped at step {stop} after {ended:.1f} s from the call, saved, resumed to "
                 f"{target}; against the unbroken run: {outcome}")
    fintts_cmd = f"fintts train {p.config_label} data=OUT/corpus init=OUT/mms-sized precision=fp16"
    p.commands = [f"{fintts_cmd} --store /tmp/broken --budget {s['budget']}s --max-steps 100000",
                  f"{fintts_cmd} --store /tmp/broken --max-steps STEP+{s['resume_more']}",
                  f"{fintts_cmd} --store /tmp/whole --max-steps STEP+{s['resume_more']}"]


def _compare_runs(broken: Path, whole: Path) -> dict:
    from safetensors.torch import load_file

    from fintts.train.run import checkpoint

    folders = [checkpoint.latest_complete(store, log=lambda _: None) for store in (broken, whole)]
    weights = []
    for folder in folders:
        weights.append({f"{path.stem}.{k}": v for path in sorted(folder.glob("*.safetensors")) for k, v in load_file(path).items()})
    a, b = weights
    if a.keys() != b.keys():
        raise RuntimeError(f"the two runs saved different tensors: {sorted(a.keys() ^ b.keys())[:5]}")
    differing, max_abs, worst, max_relative = 0, 0.0, "", 0.0
    for key in a:
        if torch.equal(a[key], b[key]):
            continue
        differing += 1
        delta = (a[key].double() - b[key].double())
        max_abs = max(max_abs, float(delta.abs().max()))
        relative = float(delta.norm() / b[key].double().norm().clamp_min(1e-30))
        if relative > max_relative:
            max_relative, worst = relative, key
    scales = [torch.load(folder / "scaler.pt", weights_only=True).get("scale") for folder in folders]
    return {"identical": differing == 0, "tensors": len(a), "differing": differing, "max_abs": max_abs, "max_relative": max_relative,
            "worst": worst, "scale_broken": scales[0], "scale_whole": scales[1], "checkpoints": [f.name for f in folders]}


# ---------------------------------------------------------------------- the background export


def part_background_export(p: Part) -> None:
    """Two sessions, one validation each (a new best, so an export), with the ONNX export on and off; the steps after it."""
    from fintts.train import train

    at = p.sizes["eval_at"]
    runs = {}
    for export in (False, True):
        label = "with_export" if export else "without_export"
        store = p.fresh_store(label)
        settings = [f"max_steps={2 * at - 1}", f"eval_every={at}", "patience=0", "log_every=1", f"export_onnx={str(export).lower()}",
                    "checkpoint_every=none", "budget=none", "mcd_items=2", "eval_speakers=1"]
        train(p.config, overrides=p.overrides(f"store={store}", *settings), progress=False)
        p.commands.append(f"fintts train {p.config_label} {' '.join(p.overrides(*settings)[2:])} data=OUT/corpus init=OUT/mms-sized "
                          f"--store /tmp/{label}")
        folder = json.loads((store / "status.json").read_text())
        history = json.loads((store / "checkpoints" / f"step-{2 * at - 1:08d}" / "state.json").read_text())["history"]
        seconds = {entry["step"]: entry["step_seconds"] for entry in history}
        runs[label] = {
            "after_validation": statistics.mean(seconds[n] for n in range(at + 1, 2 * at)),
            "before_validation": statistics.mean(seconds[n] for n in range(2, at + 1)) if at > 2 else None,
            "phases": folder["sessions"][-1]["phases"], "onnx": sorted(f.name for f in (store / "model").glob("*.onnx")),
        }
        p.figures = runs
        p.save()
    on, off = runs["with_export"], runs["without_export"]
    ratio = on["after_validation"] / off["after_validation"]
    p.check("the export made the voice's ONNX graphs beside training", ", ".join(on["onnx"]) or "none", bool(on["onnx"]))
    p.check(f"steps while the export runs ≤ {EXPORT_SLOWDOWN:g}× those without it (steps {at + 1}–{2 * at - 1})",
            f"{ratio:.2f}× ({off['after_validation']:.3f} → {on['after_validation']:.3f} s/step); the session's end waited "
            f"{on['phases'].get('final', 0):.1f} s (with the export) against {off['phases'].get('final', 0):.1f} s",
            ratio <= EXPORT_SLOWDOWN, cuda_only=True)
    p.summary = (f"{off['after_validation']:.3f} s/step without, {on['after_validation']:.3f} with the export running "
                 f"({ratio:.2f}×); final save with the export's wait {on['phases'].get('final', 0):.1f} s")


# ---------------------------------------------------------------------- a hung process on NCCL

#: the stand-in task whose ``hang`` fault makes one process sleep in a step (tests/stand_ins, installed for its entry point).
FAULTY = "faulty-toy"
#: the hung process's step; checkpoints every 4 steps: the newest before the hang is step 8.
HANG_AT, NEWEST = 10, "step-00000008"


def part_nccl_failure(p: Part) -> None:
    """Two processes, the second hung in its step 10: the first one's next vote times out and, under the NCCL settings
    the launcher gives (fintts.train.processes.collective.NCCL_ERROR_HANDLING), raises in the process, which ends the
    session itself: ``failed`` status, its newest checkpoint kept and said, instead of NCCL's watchdog killing it. On
    NCCL where two GPUs exist (NCCL refuses two ranks on one GPU); elsewhere on gloo, the same path under the same
    settings, and it says so."""
    from fintts.train.processes.collective import NCCL_ERROR_HANDLING

    gpus = torch.cuda.device_count() if p.cuda else 0
    backend = "nccl" if gpus >= 2 else "gloo"
    p.figures["gpus"], p.figures["backend"] = gpus, backend
    store = p.fresh_store("hung")
    config = p.work / "hung.yaml"
    config.write_text(yaml.safe_dump({
        "task": FAULTY, "max_steps": 100_000, "eval_every": 0, "checkpoint_every_steps": 4, "fault": "hang", "fault_at": HANG_AT,
        "fault_rank": 1, "collective_timeout": "20s", "exit_grace": "5s", "num_workers": 0,
    }))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests" / "stand_ins"), os.environ.get("PYTHONPATH", "")])}
    if backend == "gloo":
        env["CUDA_VISIBLE_DEVICES"] = ""
    _stand_in_task(p, env)
    command = [sys.executable, "-m", "fintts", "train", str(config), "--store", str(store), "--num-processes", "2", "--no-progress"]
    p.commands.append(f"{'CUDA_VISIBLE_DEVICES= ' if backend == 'gloo' else ''}fintts train OUT/hung.yaml --store /tmp/hung "
                      "--num-processes 2   # hung.yaml: task faulty-toy, fault hang, fault_at 10, fault_rank 1")
    seen, out, exit_code, seconds = _launch_two(p, command, env, "hung.log")
    reached = [{name: env.get(name) for name in NCCL_ERROR_HANDLING} for env in seen]
    p.figures |= {"settings_seen": reached, "exit_code": exit_code, "seconds": round(seconds, 1)}
    status = json.loads((store / "status.json").read_text()) if (store / "status.json").is_file() else {}
    latest = (store / "latest").read_text().strip() if (store / "latest").is_file() else None
    p.figures |= {"state": status.get("state"), "step": status.get("step"), "latest": latest}
    p.save()
    p.check("the launcher's NCCL error handling reaches both training processes", json.dumps(reached),
            len(reached) == 2 and all(found == NCCL_ERROR_HANDLING for found in reached))
    kept = f"{NEWEST} is safe in" in out
    p.check(f"a process hung in step {HANG_AT}: the session ends `failed` by its own failure path, its newest checkpoint "
            f"kept and said ({backend})", f"exit {exit_code}, status {status.get('state')} at step {status.get('step')}, "
            f"latest {latest}, said: {kept}, {seconds:.0f} s", exit_code == 1 and status.get("state") == "failed"
            and latest == NEWEST and kept)
    p.check("the same on NCCL (two GPUs)", backend, True if backend == "nccl" else None,
            why="" if backend == "nccl" else f"{gpus} GPU(s) here: NCCL refuses two ranks on one GPU; ran on gloo")
    p.summary = (f"{backend}: hung process 1 at step {HANG_AT}; the session ended {status.get('state')} at step {status.get('step')} "
                 f"with {latest} kept, {seconds:.0f} s from launch" + ("" if backend == "nccl" else f" (NCCL not run: {gpus} GPU(s))"))


#: torchrun's part: the second process ends in its step 5 (``fault: vanish``); checkpoints every 2 steps: the newest is 4.
LOST_AT, NEWEST_BEFORE_LOST = 5, "step-00000004"


def part_nccl_torchrun(p: Part) -> None:
    """Two processes started by torchrun, not by fintts, the second lost in its step 5 (it ends, as the OOM killer ends
    one): under NCCL the first one's collective waits for it until the process group's timeout, then raises under the
    settings fintts sets in every launched process over torchrun's own ``TORCH_NCCL_ASYNC_ERROR_HANDLING=1`` (torch/
    distributed/elastic/agent/server/local_elastic_agent.py), which would have NCCL's watchdog kill it; so the session
    ends ``failed`` by its own failure path with its newest checkpoint said, before torchrun's agent, which ends the
    workers 30 s after one failed (``_shutdown``'s timeout), kills it. On NCCL where two GPUs exist; elsewhere gloo
    (which notices the lost peer at once) runs the same path under the same settings, and it says so."""
    from fintts.train.processes.collective import NCCL_ERROR_HANDLING

    gpus = torch.cuda.device_count() if p.cuda else 0
    backend = "nccl" if gpus >= 2 else "gloo"
    p.figures["gpus"], p.figures["backend"] = gpus, backend
    store, probes = p.fresh_store("lost"), p.work / "probes"
    shutil.rmtree(probes, ignore_errors=True)
    probes.mkdir(parents=True)
    config = p.work / "lost.yaml"
    config.write_text(yaml.safe_dump({
        "task": FAULTY, "max_steps": 100_000, "eval_every": 0, "checkpoint_every_steps": 2, "fault": "vanish", "fault_at": LOST_AT,
        "fault_rank": 1, "collective_timeout": "20s", "num_workers": 0, "probe_dir": str(probes),
    }))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests" / "stand_ins"), os.environ.get("PYTHONPATH", "")])}
    env.pop("TORCH_NCCL_ASYNC_ERROR_HANDLING", None)  # torchrun's own default, 1, is what the processes must overrule
    if backend == "gloo":
        env |= {"CUDA_VISIBLE_DEVICES": "", "ACCELERATE_USE_CPU": "true"}  # as `accelerate launch --cpu`
    _stand_in_task(p, env)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m", "fintts", "train",
               str(config), "--store", str(store), "--no-progress"]
    p.commands.append(f"{'CUDA_VISIBLE_DEVICES= ACCELERATE_USE_CPU=true ' if backend == 'gloo' else ''}torchrun --standalone "
                      "--nproc-per-node 2 -m fintts train OUT/lost.yaml --store /tmp/lost   # lost.yaml: task faulty-toy, "
                      f"fault vanish, fault_at {LOST_AT}, fault_rank 1, collective_timeout 20s")
    given, out, exit_code, seconds = _launch_two(p, command, env, "lost.log")
    by_torchrun = [started_with.get("TORCH_NCCL_ASYNC_ERROR_HANDLING") for started_with in given]
    seen = [json.loads(path.read_text())["env"] for path in sorted(probes.glob("rank-*.json"))]
    running_with = [{name: holds.get(name) for name in NCCL_ERROR_HANDLING} for holds in seen]
    status = json.loads((store / "status.json").read_text()) if (store / "status.json").is_file() else {}
    latest = (store / "latest").read_text().strip() if (store / "latest").is_file() else None
    p.figures |= {"given_by_torchrun": by_torchrun, "running_with": running_with, "exit_code": exit_code,
                  "seconds": round(seconds, 1), "state": status.get("state"), "step": status.get("step"), "latest": latest}
    p.save()
    p.check("torchrun gives its workers its own TORCH_NCCL_ASYNC_ERROR_HANDLING=1", json.dumps(by_torchrun),
            None, why="what fintts overrules, not a target")
    p.check("both processes run with fintts's NCCL error handling, not torchrun's", json.dumps(running_with),
            len(running_with) == 2 and all(found == NCCL_ERROR_HANDLING for found in running_with))
    kept = f"{NEWEST_BEFORE_LOST} is safe in" in out
    p.check(f"a process lost in step {LOST_AT} under torchrun: the session ends `failed` by its own failure path, its newest "
            f"checkpoint kept and said ({backend})", f"exit {exit_code}, status {status.get('state')} at step "
            f"{status.get('step')}, latest {latest}, said: {kept}, {seconds:.0f} s", exit_code != 0
            and status.get("state") == "failed" and latest == NEWEST_BEFORE_LOST and kept)
    p.check("the same on NCCL under torchrun (two GPUs)", backend, True if backend == "nccl" else None,
            why="" if backend == "nccl" else f"{gpus} GPU(s) here: NCCL refuses two ranks on one GPU; ran on gloo")
    p.summary = (f"{backend} under torchrun: process 1 lost at step {LOST_AT}; the session ended {status.get('state')} at step "
                 f"{status.get('step')} with {latest} kept, {seconds:.0f} s from launch"
                 + ("" if backend == "nccl" else f" (NCCL not run: {gpus} GPU(s))"))


def _launch_two(p: Part, command: list[str], env: dict, log: str) -> tuple[list[dict], str, int, float]:
    """Run a two-process ``command``: the environments its two training processes started with, its output, its exit
    code and its seconds.

    The environments are read while the processes live (``/proc``), as the launcher gave them; the output goes to ``log``.
    """
    import subprocess

    started = time.time()
    launcher = subprocess.Popen(command, cwd=p.work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen: list[dict] = []
    while len(seen) < 2 and launcher.poll() is None and time.time() - started < 90:
        seen = [_environment(pid) for pid in _training_processes(launcher.pid)]
        time.sleep(0.1)
    out, _ = launcher.communicate(timeout=240)
    (p.work / log).write_text(out)
    return seen, out, launcher.returncode, time.time() - started


def _stand_in_task(p: Part, env: dict) -> None:
    """The stand-in task is found through its entry point: installed from tests/stand_ins when it is not (no network)."""
    from importlib.metadata import entry_points

    if any(point.name == FAULTY for point in entry_points(group="fintts.tasks")):
        return
    install = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "-e", str(ROOT / "tests" / "stand_ins")]
    p.commands.append(" ".join(install[2:]))
    import subprocess

    subprocess.run(install, check=True, env=env, capture_output=True)


def _training_processes(launcher: int) -> list[int]:
    """The launcher's training processes (``python -m fintts train``, given a ``RANK``), not its collective check's, nor
    a child between its fork and its own program (it shows the launcher's command line and environment until then)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == launcher and \
                    b"train" in (stat.parent / "cmdline").read_bytes().split(b"\0") and "RANK" in _environment(int(stat.parent.name)):
                found.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def _environment(pid: int) -> dict:
    try:
        pairs = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return {}
    return dict(pair.decode(errors="replace").split("=", 1) for pair in pairs if b"=" in pair)


# ---------------------------------------------------------------------- the step share


def part_step_share(p: Part) -> None:
    s = p.sizes
    argv = [str(p.stand_ins), "--device", p.device.type, "--steps", str(s["share_steps"]), "--validations", str(s["share_validations"])]
    if p.dry_run:
        argv += ["--config", str(p.config)]
    else:
        argv += ["--set", "precision=fp16"]
    p.commands = ["python benchmarks/step_share.py OUT " + " ".join(argv[1:]).replace(str(p.config), p.config_label)]
    result = share_bench.main(argv)
    projection = result["projection"]
    p.figures = result
    p.check(f"≥ {STEP_SHARE:.0%} of a 12-hour session in optimizer steps (projected from the measured session)",
            f"{projection['share_in_steps']:.1%} ({projection['seconds_per_step']:.3f} s/step, validation "
            f"{projection['seconds_per_validation']:.1f} s every {projection['eval_every']} steps)",
            projection["share_in_steps"] >= STEP_SHARE, cuda_only=True)
    p.summary = (f"{result['steps']} steps at batch {result['batch_size']} ({result['precision']}): measured "
                 f"{result['measured_share_in_steps']:.1%} in steps; 12 h projection {projection['share_in_steps']:.1%}")


# ---------------------------------------------------------------------- bench: switches, SDPA, the largest micro-batch


def part_bench(p: Part) -> None:
    from fintts.train.config import load_config
    from fintts.train.tools import bench

    config = load_config(p.config, p.overrides(f"store={p.work / 'run'}", "export_onnx=false"))
    p.figures["sdpa"] = _sdpa()
    log = p.figures.setdefault("log", [])

    def keep(message: str) -> None:
        print(message, flush=True)
        log.append(message)
        p.save()

    report = bench.bench(config, compare=True, steps=p.sizes["bench_steps"], warmup=1, log=keep)
    base = report.base
    rows = [{"label": row.label, "seconds_per_step": row.seconds_per_step, "batch_size": row.batch_size,
             "speed": report.speed(row),  # samples/s against the config's: a search row trains another batch
             "peak": _peak(row.memory), "out_of_memory": row.out_of_memory, "error": row.error, "note": row.note}
            for row in report.rows]
    p.figures |= {"rows": rows, "largest_micro_batch": report.largest_micro_batch, "search_note": report.search_note,
                  "table": bench.format_report(report)}
    failed = [row for row in report.rows if row.error and not row.out_of_memory]
    p.check("every speed switch ran (or ran out of memory under the cap)",
            "; ".join(f"{row.label}: {row.error}" for row in failed) or f"{len(report.rows)} configurations",
            not failed, cuda_only=True)
    for row in rows[1:]:
        if row["speed"] is not None:
            p.check(f"{row['label']}: samples/s against the config's (pick the defaults from it)", f"{row['speed']:.2f}× "
                    f"({row['seconds_per_step']:.3f} s/step of {row['batch_size']} samples, {row['peak']})", None,
                    why="a choice, not a target")
    largest = report.largest_micro_batch
    p.check(f"micro_batch_size 8 fits a T4 with room (the largest that fits under {p.cap_gib:g} GiB ≥ {ROOM_MICRO_BATCH})",
            f"largest {largest}" if largest is not None else (report.search_note or "not searched (CUDA only)"),
            largest is not None and largest >= ROOM_MICRO_BATCH, cuda_only=True)
    p.check("SDPA for the text encoder's attention", p.figures["sdpa"], None, why="not a switch while transformers refuses it")
    speeds = ", ".join(f"{r['label']} {r['speed']:.2f}×" for r in rows[1:] if r["speed"] is not None)
    p.summary = (f"config {base.seconds_per_step:.3f} s/step" if base.ok else f"config: {base.error}") + (
        f"; {speeds}" if speeds else "") + (f"; largest micro-batch {largest}" if largest else "")
    p.commands = [f"fintts bench {p.config_label} data=OUT/corpus init=OUT/mms-sized precision=fp16 export_onnx=false "
                  f"--compare --steps {p.sizes['bench_steps']}"]


def _peak(memory: list[dict]) -> str:
    """A bench row's peak memory (its session's status): allocated on CUDA, RSS on a CPU."""
    if not memory:
        return "no memory figure"
    if "allocated_gib" in memory[0]:
        return f"peak {max(m['allocated_gib'] for m in memory):.2f} GiB allocated"
    return f"peak RSS {max(m.get('rss_gib') or 0 for m in memory):.2f} GiB"


def _sdpa() -> str:
    """Whether transformers' VitsModel takes ``attn_implementation="sdpa"`` (a tiny one is built to ask)."""
    from transformers import VitsConfig, VitsModel

    try:
        VitsModel._from_config(VitsConfig(**{k: v for k, v in SMALL_VOICE.items()}), attn_implementation="sdpa")
    except (ValueError, ImportError) as err:
        return f"not applicable: transformers refuses it for VitsModel ({str(err).split('.')[0]})"
    return "accepted by transformers: worth a switch of its own (see the text encoder's share in fp16_step)"


PARTS = {
    "stand_ins": part_stand_ins, "fp16_step": part_fp16_step, "mas": part_mas, "resume": part_resume,
    "background_export": part_background_export, "step_share": part_step_share, "bench": part_bench,
    "nccl_failure": part_nccl_failure, "nccl_torchrun": part_nccl_torchrun,
}

# Chatterbox's part lives in a file of its own (it imports this module's judgements, so it is registered last)
from gpu_chatterbox import part_chatterbox  # noqa: E402

PARTS["chatterbox"] = part_chatterbox
