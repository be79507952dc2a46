"""Where a VITS voice's noise floor comes from: the decoder, the prior, or the sampling noise.

    python benchmarks/noise_sources.py runs/demo/checkpoints/step-00002600 [more checkpoints...]

For every held-out clip of the run, the voice of a checkpoint renders the clip's sentence
in ways that each leave out one source of noise, and :func:`fintts.tts.eval.noise_floor_db`
measures each (higher is cleaner):

- ``recording``: the clip itself, the floor to reach.
- ``decoder(posterior)``: the HiFi-GAN decoder on the posterior mean of the recording's
  own spectrogram, what the mel loss trains it on. Noisy here: the decoder is the source.
- ``decoder(posterior, sampled)``: the same with the posterior's sampling noise, as in training.
- ``prior, true durations, noise 0`` / ``0.667``: the text prior expanded by the
  recording's own alignment (monotonic alignment search, as in training), through the
  inverse flow to the decoder, without and with the inference sampling noise. Clean
  posterior but noisy here: the prior/flow does not match the posterior yet.
- ``synthesis, noise 0`` / ``synthesis``: plain inference (predicted durations) with no
  sampling noise and with the voice's own noise scales (what validation and the demo use).

For the renderings aligned frame by frame with the recording (all but plain synthesis) it
also gives the rendering's output where the recording is digitally silent (20 ms frames
below -90 dBFS): its level about each frame's mean (what the floor counts) and the frame
means themselves, a constant offset (DC) that the floor does not count, both as the mean
power over those frames in dB re full scale.

The checkpoint's run supplies the architecture and held-out clips (``init: CHECKPOINT``,
as for ``fintts train``). Prints one table per checkpoint and ``/proc/loadavg``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

import numpy as np
import torch
import yaml

from fintts.train.config import load_config
from fintts.train.run.rng import isolated_rng
from fintts.train.task import TaskContext
from fintts.tts.audio import load_audio
from fintts.tts.eval import noise_floor_db
from fintts.tts.vits.alignment import monotonic_alignment_search, prior_log_likelihood
from fintts.tts.vits.task import VitsTask

FRAME = 320  # 20 ms at 16 kHz, as noise_floor_db frames
SILENT_DBFS = -90.0


def frames(audio: np.ndarray) -> np.ndarray:
    count = len(audio) // FRAME
    return audio[: count * FRAME].reshape(count, FRAME)


def dbfs(power) -> float:
    return float(10 * np.log10(max(float(np.mean(power)), 1e-10)))


def renderings(task: VitsTask, vits, item, recording: torch.Tensor) -> dict[str, np.ndarray]:
    """The clip's sentence rendered with each source of noise switched on in turn."""
    speaker = torch.tensor([task.speakers.index(item.speaker)]) if vits.config.num_speakers > 1 else None
    embedding = vits.embed_speaker(speaker).unsqueeze(-1) if speaker is not None else None
    hop = int(np.prod(vits.config.upsample_rates))
    frames = len(recording) // hop
    spec = task.spectrogram.linear(recording[: frames * hop]).unsqueeze(0)
    frame_mask = torch.ones(1, 1, spec.shape[-1])
    _, m_q, logs_q = vits.posterior_encoder(spec, frame_mask, embedding)
    out = {
        "decoder(posterior)": vits.decoder(m_q, embedding),
        "decoder(posterior, sampled)": vits.decoder(m_q + torch.randn_like(m_q) * torch.exp(logs_q), embedding),
    }
    ids = torch.tensor([task.text.encode(item.text, warn=None)])
    text_mask = torch.ones_like(ids)
    encoded = vits.text_encoder(input_ids=ids, padding_mask=text_mask.unsqueeze(-1).float(), attention_mask=text_mask)
    m_p, logs_p = encoded.prior_means.transpose(1, 2), encoded.prior_log_variances.transpose(1, 2)
    z_p = vits.flow(m_q + torch.randn_like(m_q) * torch.exp(logs_q), frame_mask, embedding)
    alignment = monotonic_alignment_search(prior_log_likelihood(z_p, m_p, logs_p), text_mask.bool(), frame_mask[:, 0].bool())
    m_frames, logs_frames = torch.matmul(m_p, alignment), torch.matmul(logs_p, alignment)
    for scale in (0.0, vits.config.noise_scale):
        prior = m_frames + torch.randn_like(m_frames) * torch.exp(logs_frames) * scale
        out[f"prior, true durations, noise {scale:g}"] = vits.decoder(vits.flow(prior, frame_mask, embedding, reverse=True), embedding)
    saved = vits.noise_scale, vits.noise_scale_duration
    vits.noise_scale = vits.noise_scale_duration = 0.0
    out["synthesis, noise 0"] = vits(input_ids=ids, speaker_id=None if speaker is None else int(speaker)).waveform
    vits.noise_scale, vits.noise_scale_duration = saved
    out["synthesis"] = vits(input_ids=ids, speaker_id=None if speaker is None else int(speaker)).waveform
    return {name: wav.reshape(-1).numpy() for name, wav in out.items()}


def diagnose(checkpoint: Path) -> dict:
    run_config = yaml.safe_load((checkpoint / "config.yaml").read_text())
    config = load_config(None, {**run_config, "init": str(checkpoint), "model": {}})
    with tempfile.TemporaryDirectory() as cache:
        task = VitsTask(config.task, TaskContext(0, torch.device("cpu"), None, Path(cache), progress=False, log=lambda _: None))
        vits = task.build_models()["model"].model.eval()
    floors: dict[str, list[float]] = {"recording": []}
    silent_ac: dict[str, list[np.ndarray]] = {}
    silent_dc: dict[str, list[np.ndarray]] = {}
    with torch.no_grad(), isolated_rng(0):
        for item in task.heldout:
            recording = load_audio(item.audio, task.sample_rate)
            reference = recording.numpy()
            floors["recording"].append(noise_floor_db(reference, task.sample_rate))
            quiet = 10 * np.log10(np.maximum(np.mean(frames(reference) ** 2, axis=1), 1e-10)) < SILENT_DBFS
            for name, audio in renderings(task, vits, item, recording).items():
                floors.setdefault(name, []).append(noise_floor_db(audio, task.sample_rate))
                if not name.startswith("synthesis"):
                    aligned = frames(audio)[: len(quiet)][quiet[: len(frames(audio))]]
                    silent_ac.setdefault(name, []).append(np.var(aligned, axis=1))
                    silent_dc.setdefault(name, []).append(np.mean(aligned, axis=1) ** 2)
    return {
        "checkpoint": str(checkpoint), "clips": len(task.heldout),
        "silent_frames": int(sum(len(v) for v in next(iter(silent_ac.values()), []))),
        "floor_db": {name: statistics.mean(values) for name, values in floors.items()},
        "silent_ac_dbfs": {name: dbfs(np.concatenate(values)) for name, values in silent_ac.items()},
        "silent_dc_dbfs": {name: dbfs(np.concatenate(values)) for name, values in silent_dc.items()},
    }


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoints", nargs="+", type=Path, help="checkpoint folders (<store>/checkpoints/step-N)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    results = []
    for checkpoint in args.checkpoints:
        result = diagnose(checkpoint)
        results.append(result)
        print(f"{checkpoint} ({result['clips']} held-out clips, {result['silent_frames']} digitally silent frames)")
        print(f"  {'':<34} {'floor dB':>8} {'silence: AC dBFS':>17} {'DC dBFS':>8}")
        for name, floor in result["floor_db"].items():
            row = f"  {name:<34} {floor:8.1f}"
            if name in result["silent_ac_dbfs"]:
                row += f" {result['silent_ac_dbfs'][name]:17.1f} {result['silent_dc_dbfs'][name]:8.1f}"
            print(row)
    print(f"loadavg: {Path('/proc/loadavg').read_text().strip()}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
