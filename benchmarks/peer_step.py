"""One MMS-sized VITS training step, fintts's against finetune-hf-vits's, on the CPU in fp32.

    git --git-dir=MIRROR archive HEAD | tar -x -C /tmp/hfvits      # github.com/ylacombe/finetune-hf-vits
    (cd /tmp/hfvits/monotonic_align && mkdir -p monotonic_align && python setup.py build_ext --inplace)  # needs Cython
    python benchmarks/peer_step.py --peer /tmp/hfvits --rounds 4 --json out.json

``--rounds 4`` runs the sides in ABBA order (peer ours ours peer peer ours ours peer); each run
is a fresh subprocess (``--threads`` torch threads, 2 by default) that builds its side's models,
takes ``--warmup`` untimed steps and ``--steps`` timed ones. Per side: the median and minimum
of all its timed steps, and the peak RSS growth of its processes over their size once the
models were built (optimizer state, activations, gradients); the load average before and after.
Prints a table and one JSON object.

Both sides train ``VitsConfig()``'s defaults (the MMS-TTS architecture: generator 36.3M
parameters, discriminator 46.7M) from random weights, on the same synthetic batches
(``vits_step.synthetic_batch``: ``--batch`` items of ~``--tokens`` tokens and 5-8 s of 16 kHz audio)
with 32-frame (8192-sample) decoder windows, which both use.

**ours** is what fintts's trainer does for one batch:
:func:`fintts.train.step.optimizer_step.optimizer_step` with a
:class:`~fintts.tts.vits.task.VitsTask` (``init: scratch``, every other setting its default):
the generator's forward and losses (the discriminator's pass on the real window made once, with
gradients, and reused by the discriminator's step) and backward, the discriminator's loss and
backward, both groups' gradient norms brought to the host in one sync, both AdamW steps (``lr``
2e-4, betas 0.8/0.99, eps 1e-9, weight decay 0.01, no clipping: the defaults), the schedules.
Models in train mode, LayerDrop 0.

**peer** is the body of ``run_vits_finetuning.py``'s training loop (commit 6f3f51f), called
as it calls it, with their modules imported from ``--peer``: ``VitsModelForPreTraining`` with
weight norm put on the decoder and the flows' outer convs and on the discriminator, as their
script does; the forward with labels and their Cython alignment; the log-mel of the
generated window (``VitsFeatureExtractor._torch_extract_fbank_features``; the targets' mel is
computed by their data collator, so here before the timer); the discriminator on the real
and the detached generated window, their ``discriminator_loss`` × ``weight_disc``, backward,
``clip_grad_norm_`` (TrainingArguments' ``max_grad_norm`` 1.0), step, ``zero_grad``; the
discriminator again on both windows, duration + 35 × mel L1 + 1.5 × KL + feature matching
(their ``feature_loss``, ×2 inside) + adversarial (``training_config_examples/finetune_mms.json``'s
weights, their defaults too), one backward into every parameter, clipping, step, ``zero_grad``;
their nine losses ``.item()``-ed for the log. AdamW with their recipe's betas 0.8/0.99 and
TrainingArguments' eps 1e-8, torch's default weight decay 0.01. Their script never calls
``train()`` and ``from_pretrained`` leaves a model in eval mode, so their step runs without
dropout or LayerDrop: so here. Not reproduced: accelerate (one process: its ``backward``,
``clip_grad_norm_`` and ``gather`` reduce to torch's), fp16 (this is fp32), their schedules'
step (``do_step_schedule_per_epoch``: once an epoch).

Shims for transformers 5.x (their code targets 4.35), installed in the peer's process only:
``transformers.modeling_attn_mask_utils._prepare_4d_attention_mask`` (removed) re-made as
transformers 4.36's ``AttentionMaskConverter._expand_mask``; ``VitsConfig(pad_token_id=None)``
(4.x's ``PretrainedConfig`` defaulted it, 5.x has none); ``transformers.utils.send_example_telemetry``
(removed; called only in their ``main``) and a stand-in ``datasets`` module (not installed;
imported by their script, not used by its loss functions) so that the losses import from
``run_vits_finetuning.py``.

``--sides`` adds fintts variants measured in the same ABBA run (:data:`VARIANTS`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

import torch

from vits_step import parameter_count, peak_rss_bytes, synthetic_batch

#: fintts variants a run can measure beside ``ours`` (the checkout as it is) and ``peer``.
VARIANTS = {
    "ours": "fintts's step as this checkout has it",
    "base": "fintts's step as the checkout at --base has it (imported from there)",
    "ours-compiled-discriminator": "fintts's step with torch.compile of the discriminator (fixed windows; the compile "
                                   "is in the first warm-up step)",
}


def install_peer_shims() -> None:
    """What finetune-hf-vits needs of transformers 4.x and of ``datasets`` to import under transformers 5.x."""
    import transformers.utils

    masks = types.ModuleType("transformers.modeling_attn_mask_utils")

    def _prepare_4d_attention_mask(mask: torch.Tensor, dtype: torch.dtype, tgt_len: int | None = None) -> torch.Tensor:
        # transformers 4.36, modeling_attn_mask_utils.AttentionMaskConverter._expand_mask
        batch, source = mask.size()
        target = tgt_len if tgt_len is not None else source
        inverted = 1.0 - mask[:, None, None, :].expand(batch, 1, target, source).to(dtype)
        return inverted.masked_fill(inverted.to(torch.bool), torch.finfo(dtype).min)

    masks._prepare_4d_attention_mask = _prepare_4d_attention_mask
    sys.modules[masks.__name__] = masks
    transformers.utils.send_example_telemetry = lambda *args, **kwargs: None
    if "datasets" not in sys.modules:
        try:
            import datasets  # noqa: F401
        except ImportError:
            stand_in = types.ModuleType("datasets")
            stand_in.DatasetDict = stand_in.load_dataset = None
            sys.modules["datasets"] = stand_in


def batches(config, args) -> list[dict[str, torch.Tensor]]:
    """The run's batches: the same for every side (seeded), made before anything is timed."""
    rng = torch.Generator().manual_seed(0)
    return [synthetic_batch(config, args.batch, args.tokens, tuple(args.seconds), rng, "cpu")
            for _ in range(args.warmup + args.steps)]


def run_steps(step, prepared: list, args, rss_baseline: int) -> dict:
    times, first_losses = [], None
    for batch in prepared:
        start = time.perf_counter()
        losses = step(batch)
        times.append(time.perf_counter() - start)
        first_losses = first_losses or losses
    return {"times": times[args.warmup:], "warmup_times": times[:args.warmup],
            "peak_rss_growth_gib": (peak_rss_bytes() - rss_baseline) / 2**30, "first_losses": first_losses}


# ---------------------------------------------------------------------------------------------- peer
def peer_side(args) -> dict:
    sys.path.insert(0, str(args.peer))
    install_peer_shims()
    import numpy as np
    import run_vits_finetuning as theirs
    from monotonic_align import maximum_path
    from utils import VitsConfig, VitsFeatureExtractor, VitsModelForPreTraining, slice_segments

    torch.manual_seed(0)
    np.random.seed(0)
    config = VitsConfig(pad_token_id=None)
    model = VitsModelForPreTraining(config).eval()  # from_pretrained's mode, never changed by their script
    # run_vits_finetuning.py, "apply weight norms" and "hack to be able to train on multiple device"
    model.decoder.apply_weight_norm()
    for flow in model.flow.flows:
        torch.nn.utils.weight_norm(flow.conv_pre)
        torch.nn.utils.weight_norm(flow.conv_post)
    discriminator = model.discriminator
    for disc in discriminator.discriminators:
        disc.apply_weight_norm()
    del model.discriminator
    feature_extractor = VitsFeatureExtractor(
        feature_size=80, sampling_rate=config.sampling_rate, hop_length=config.hop_length, n_fft=(config.spectrogram_bins - 1) * 2
    )
    weights = {"disc": 3.0, "duration": 1.0, "mel": 35.0, "kl": 1.5, "fmaps": 1.0, "gen": 1.0}  # finetune_mms.json
    max_grad_norm = 1.0  # TrainingArguments' default
    gen_optimizer = torch.optim.AdamW(model.parameters(), 2e-5, betas=[0.8, 0.99], eps=1e-8)
    disc_optimizer = torch.optim.AdamW(discriminator.parameters(), 2e-5, betas=[0.8, 0.99], eps=1e-8)
    model_segment_size = model.segment_size
    config_segment_size = model.config.segment_size
    facts = {"generator_parameters": parameter_count(model), "discriminator_parameters": parameter_count(discriminator)}

    def their_batch(batch: dict) -> dict:
        """Their collator's output for our batch: the waveform ``[B, T, 1]`` and the targets' log-mel, made here."""
        return {
            "input_ids": batch["input_ids"], "attention_mask": batch["input_mask"], "labels": batch["spec"],
            "labels_attention_mask": batch["spec_mask"], "speaker_id": None,
            "waveform": batch["wav"].transpose(1, 2),
            "mel_scaled_input_features": feature_extractor._torch_extract_fbank_features(batch["wav"].squeeze(1))[1],
        }

    def step(batch: dict) -> dict:
        # run_vits_finetuning.py, the body of `with accelerator.accumulate(model, discriminator):`
        model_outputs = model(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"],
            labels_attention_mask=batch["labels_attention_mask"], speaker_id=batch["speaker_id"], return_dict=True,
            monotonic_alignment_function=maximum_path,
        )
        mel_scaled_labels = batch["mel_scaled_input_features"]
        mel_scaled_target = slice_segments(mel_scaled_labels, model_outputs.ids_slice, model_segment_size)
        mel_scaled_generation = feature_extractor._torch_extract_fbank_features(model_outputs.waveform.squeeze(1))[1]
        target_waveform = batch["waveform"].transpose(1, 2)
        target_waveform = slice_segments(
            target_waveform, model_outputs.ids_slice * feature_extractor.hop_length, config_segment_size
        )

        discriminator_target, _ = discriminator(target_waveform)
        discriminator_candidate, _ = discriminator(model_outputs.waveform.detach())
        loss_disc, loss_real_disc, loss_fake_disc = theirs.discriminator_loss(discriminator_target, discriminator_candidate)
        (loss_disc * weights["disc"]).backward()
        torch.nn.utils.clip_grad_norm_(discriminator.parameters(), max_grad_norm)
        disc_optimizer.step()
        disc_optimizer.zero_grad()

        _, fmaps_target = discriminator(target_waveform)
        discriminator_candidate, fmaps_candidate = discriminator(model_outputs.waveform)
        loss_duration = torch.sum(model_outputs.log_duration)
        loss_mel = torch.nn.functional.l1_loss(mel_scaled_target, mel_scaled_generation)
        loss_kl = theirs.kl_loss(
            model_outputs.prior_latents, model_outputs.posterior_log_variances, model_outputs.prior_means,
            model_outputs.prior_log_variances, model_outputs.labels_padding_mask,
        )
        loss_fmaps = theirs.feature_loss(fmaps_target, fmaps_candidate)
        loss_gen, _ = theirs.generator_loss(discriminator_candidate)
        total_generator_loss = (
            loss_duration * weights["duration"] + loss_mel * weights["mel"] + loss_kl * weights["kl"]
            + loss_fmaps * weights["fmaps"] + loss_gen * weights["gen"]
        )
        total_generator_loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        gen_optimizer.step()
        gen_optimizer.zero_grad()

        losses = torch.stack([loss_duration + loss_mel + loss_kl + loss_fmaps + loss_gen, loss_duration, loss_mel,
                              loss_kl, loss_fmaps, loss_gen, loss_disc, loss_real_disc, loss_fake_disc])
        values = [losses[i].item() for i in range(len(losses))]
        return dict(zip(["total", "duration", "mel", "kl", "fmaps", "gen", "disc", "real_disc", "fake_disc"], values))

    from transformers import VitsConfig as FinttsVitsConfig  # the batches' sizes: the same config's

    prepared = [their_batch(b) for b in batches(FinttsVitsConfig(), args)]
    rss_baseline = peak_rss_bytes()
    return facts | run_steps(step, prepared, args, rss_baseline)


# ---------------------------------------------------------------------------------------------- ours
def ours_side(args, variant: str) -> dict:
    from transformers import VitsConfig, VitsModel

    from fintts.train.config import TrainConfig
    from fintts.train.step.building import BuiltPhase
    from fintts.train.step.guard import StepGuard
    from fintts.train.step.optimizer_step import optimizer_step
    from fintts.train.step.stepping import lr_factor
    from fintts.train.task import TaskContext
    from fintts.tts.spectrogram import Spectrogram, SpectrogramConfig
    from fintts.tts.vits.discriminator import VitsDiscriminator
    from fintts.tts.vits.generator import VitsTrainingForward
    from fintts.tts.vits.init import TRAINING_CONFIG_DEFAULTS
    from fintts.tts.vits.settings import GENERATOR, VitsTaskConfig
    from fintts.tts.vits.task import VitsBatch, VitsTask

    torch.manual_seed(0)
    device = torch.device("cpu")
    cfg = VitsTaskConfig(init="scratch", discriminator="")
    train_cfg = TrainConfig()
    config = VitsConfig(**TRAINING_CONFIG_DEFAULTS)
    task = VitsTask(cfg, TaskContext(seed=0, device=device, autocast_dtype=None, cache_dir=Path(tempfile.mkdtemp())))
    task.spectrogram = Spectrogram(SpectrogramConfig.from_vits_config(config))  # what build_models sets, without a corpus
    models = {GENERATOR: VitsTrainingForward(VitsModel(config), cfg.segment_frames).train(),
              "discriminator": VitsDiscriminator().train()}
    groups = task.build_optimizers(models)
    if variant == "ours-compiled-discriminator":
        models["discriminator"] = torch.compile(models["discriminator"])
    group_params = {g.name: [p for name in g.models for p in models[name].parameters() if p.requires_grad] for g in groups}
    built = BuiltPhase(
        config=None, task=task, raw_models=models, models=models, groups=groups, group_params=group_params,
        schedulers={g.name: torch.optim.lr_scheduler.LambdaLR(g.optimizer, lambda s: lr_factor(train_cfg, s)) for g in groups},
        scaler=torch.amp.GradScaler("cpu", enabled=False), micro=args.batch, accumulation=1, data=None, plan=None,
        max_steps=0, data_fingerprint=None, monitor="val/mcd", monitor_mode="min", main_loss="generator/loss", resolved={},
    )
    guard = StepGuard(max_skipped=train_cfg.max_skipped_steps, min_loss_scale=train_cfg.min_loss_scale,
                      spike_factor=train_cfg.spike_factor, spike_window=train_cfg.spike_window)
    facts = {"generator_parameters": parameter_count(models[GENERATOR]),
             "discriminator_parameters": parameter_count(models["discriminator"]),
             "optimizer": {g.name: {k: g.optimizer.defaults.get(k) for k in ("foreach", "fused")} for g in groups}}

    def step(batch: VitsBatch) -> dict:
        losses, skipped, out_of_memory = optimizer_step(built, iter([batch]), accelerator=None, guard=guard,
                                                        precision="fp32", device=device, rank=0, world=1)
        if skipped or out_of_memory:
            raise RuntimeError(f"the step was not applied: {skipped or out_of_memory}")
        return losses

    prepared = [VitsBatch(**b, speaker_ids=None) for b in batches(config, args)]
    rss_baseline = peak_rss_bytes()
    return facts | run_steps(step, prepared, args, rss_baseline)


# ---------------------------------------------------------------------------------------------- the run
def child(args) -> None:
    torch.set_num_threads(args.threads)
    result = peer_side(args) if args.side == "peer" else ours_side(args, args.side)
    import fintts

    print(json.dumps(result | {"side": args.side, "threads": torch.get_num_threads(), "fintts": str(Path(fintts.__file__).parent)}))


def abba(sides: list[str], rounds: int) -> list[str]:
    """Each round runs every side, every other round backwards: A B B A A B B A for two sides and 4 rounds."""
    return [side for r in range(rounds) for side in (sides if r % 2 == 0 else sides[::-1])]


def summary(side: str, runs: list[dict]) -> dict:
    times = [t for run in runs for t in run["times"]]
    memory = [run["peak_rss_growth_gib"] for run in runs]
    return {"side": side, "runs": len(runs), "timed_steps": len(times), "median_s": statistics.median(times),
            "min_s": min(times), "peak_rss_growth_gib": max(memory), "peak_rss_growth_gib_median": statistics.median(memory),
            "times": times, "warmup_times": [t for run in runs for t in run["warmup_times"]], "first_losses": runs[0]["first_losses"],
            **{k: runs[0][k] for k in ("generator_parameters", "discriminator_parameters", "optimizer", "fintts") if k in runs[0]}}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--peer", type=Path, required=True, help="an extracted finetune-hf-vits with its Cython alignment built")
    parser.add_argument("--sides", nargs="+", default=["peer", "ours"], choices=["peer", *VARIANTS])
    parser.add_argument("--rounds", type=int, default=4, help="rounds of the ABBA order (each runs every side once)")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=3, help="timed steps per run")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps first in each run")
    parser.add_argument("--threads", type=int, default=2, help="torch threads in each side's process")
    parser.add_argument("--tokens", type=int, default=100, help="longest text per batch, in tokens")
    parser.add_argument("--seconds", type=float, nargs=2, default=[5.0, 8.0], help="audio length range")
    parser.add_argument("--base", type=Path, help="the side 'base': fintts imported from this checkout")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--side", help=argparse.SUPPRESS)  # a child: run this side once, print its JSON
    args = parser.parse_args(argv)
    if not (args.peer / "monotonic_align" / "monotonic_align").is_dir():
        parser.error(f"--peer {args.peer}: no monotonic_align/monotonic_align/ (build their Cython alignment first: see above)")
    if args.side:
        child(args)
        return {}
    if "base" in args.sides and not (args.base and (args.base / "fintts").is_dir()):
        parser.error("the side 'base' needs --base DIR, a checkout of fintts")

    passed = ["--peer", str(args.peer), "--batch", str(args.batch), "--steps", str(args.steps), "--warmup", str(args.warmup),
              "--threads", str(args.threads), "--tokens", str(args.tokens), "--seconds", *map(str, args.seconds)]
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads))
    results: dict[str, list[dict]] = {side: [] for side in args.sides}
    order = abba(args.sides, args.rounds)
    load_before, started = os.getloadavg(), time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    print(f"{started}, load average {' '.join(f'{x:.2f}' for x in load_before)}", flush=True)
    for index, side in enumerate(order, 1):
        side_env = env if side != "base" else env | {"PYTHONPATH": os.pathsep.join([str(args.base), env.get("PYTHONPATH", "")])}
        done = subprocess.run([sys.executable, __file__, *passed, "--side", side], env=side_env, check=True,
                              capture_output=True, text=True)
        run = json.loads(done.stdout.strip().splitlines()[-1])
        results[side].append(run)
        print(f"[{index}/{len(order)}] {side}: " + " ".join(f"{t:.2f}" for t in run["times"])
              + f" s, peak RSS +{run['peak_rss_growth_gib']:.2f} GiB", flush=True)

    load_after, ended = os.getloadavg(), time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    print(f"{ended}, load average {' '.join(f'{x:.2f}' for x in load_after)}", flush=True)
    sides = {side: summary(side, runs) for side, runs in results.items()}
    report = {"order": order, "torch": torch.__version__, "threads": args.threads, "sides": sides,
              "started": started, "ended": ended, "load_before": load_before, "load_after": load_after,
              "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k not in ("json", "side")}}
    if "peer" in sides:
        peer = sides["peer"]
        for side in sides.values():
            side["ratio_median"] = side["median_s"] / peer["median_s"]
            side["ratio_min"] = side["min_s"] / peer["min_s"]
            side["memory_ratio"] = side["peak_rss_growth_gib"] / peer["peak_rss_growth_gib"]
    print("\n| side | s/step median | min | × peer (median / min) | peak RSS growth | × peer |\n|---|---:|---:|---|---:|---:|")
    for side in sides.values():
        ratio = f"{side['ratio_median']:.3f} / {side['ratio_min']:.3f}" if "ratio_median" in side else ""
        memory = f"{side['memory_ratio']:.2f}" if "memory_ratio" in side else ""
        print(f"| {side['side']} | {side['median_s']:.2f} | {side['min_s']:.2f} | {ratio} "
              f"| {side['peak_rss_growth_gib']:.2f} GiB | {memory} |")
    print(json.dumps(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
