"""The README's demo picture and table, from a finished ``fintts demo`` run.

    python benchmarks/demo_report.py runs/demo runs/demo/demo.wav --png docs/demo-spectrogram.png

Prints a markdown table of every validation of the run (step, minutes of training to reach
it, ``val/mcd``, ``val/identified``, ``val/floor_db``; the recordings' floor below it) and
a line on the run (steps, sessions, s/step, the machine), the noise floor speaker by speaker
(the exported voice on each speaker's held-out sentences, as validation synthesises them, beside
that speaker's recordings: ``val/floor_db`` is their mean over all speakers, and the espeak-ng
voices differ: some put digital silence in their pauses, some do not), and draws the log-spectrogram of
the demo's wav under espeak-ng saying the same words with the same speaker's settings (the
voice the demo imitates; the numbers as fintts reads them), on one dB scale, each titled
with its noise floor.

Minutes at a step are the wall-clock time its validation was logged (the run's TensorBoard
events) from its session's start, plus the sessions before it, so they include start-up,
validation and saving, as a user's clock does. Needs
espeak-ng for the reference (``apt-get install espeak-ng``).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

import numpy as np
import soundfile as sf
import yaml

from fintts.train.run import checkpoint
from fintts.train.run.layout import MODEL_DIR, STATUS
from fintts.tts.corpus import Item
from fintts.tts.corpus.data_names import data_root
from fintts.tts.corpus.selection import read_heldout_files
from fintts.tts.demo import make_corpus
from fintts.tts.demo.run import DEMO_SENTENCE, speech_only
from fintts.tts.eval import noise_floor_db
from fintts.tts.vits.heldout import score_heldout
from fintts.tts.vits.task import PUNCTUATION_MARKS, scratch_front_end
from fintts.tts.voice import load_voice
from fintts.tts.voice_format import SPEAKERS_FILE

METRICS = (("val/mcd", "`val/mcd` (dB)", "{:.2f}"), ("val/identified", "`val/identified`", "{:.2g}"),
           ("val/floor_db", "`val/floor_db` (dB)", "{:.1f}"))


def minutes_at(step: int, sessions: list[dict], reached: dict[int, float]) -> float:
    """Training minutes (all sessions, saving and validation included) when ``step`` was reached.

    ``reached``: the wall-clock time at which each validated step was logged (TensorBoard's
    ``val/mcd`` events), counted from the start of its session plus the sessions before it.
    Without one, the step's session time is spread evenly over its steps.
    """
    seconds = 0.0
    for session in sessions:
        start, end = session["start_step"], session["end_step"]
        if end <= start:
            continue
        if step <= end:
            if step in reached:
                return (seconds + reached[step] - session["started"]) / 60
            return (seconds + session_seconds(session) * max(0, step - start) / (end - start)) / 60
        seconds += session_seconds(session)
    return seconds / 60


def validation_times(run: Path) -> dict[int, float]:
    """Step → wall time of its ``val/mcd`` in the run's TensorBoard logs (empty without them)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    times: dict[int, float] = {}
    for events in sorted((run / "tb").glob("events.out.tfevents.*")):
        accumulator = EventAccumulator(str(events))
        accumulator.Reload()
        if "val/mcd" in accumulator.Tags().get("scalars", []):
            times.update({event.step: event.wall_time for event in accumulator.Scalars("val/mcd")})
    return times


def session_seconds(session: dict) -> float:
    return (session.get("ended") or session["started"]) - session["started"]


def markdown_table(evals: list[dict], sessions: list[dict], reached: dict[int, float]) -> str:
    steps = [e["step"] for e in evals]
    rows = [["step", *map(str, steps)], ["minutes", *(f"{minutes_at(s, sessions, reached):.1f}" for s in steps)]]
    for key, label, fmt in METRICS:
        rows.append([label, *(fmt.format(e[key]) if key in e else "–" for e in evals)])
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows[1:]])


def floors_by_speaker(model: Path, heldout: list[Item]) -> str:
    """A markdown table: per speaker, the mean floor of the voice and of the recordings on its ``heldout`` clips.

    Scored by validation's own :func:`~fintts.tts.vits.heldout.score_heldout`, the voice on torch with seed 0.
    """
    scores = score_heldout(load_voice(model, backend="torch", seed=0), heldout)
    rows: dict[str, tuple[list[float], list[float]]] = {}
    for item, floor, floor_ref in zip(heldout, scores.floor, scores.floor_ref):
        synth, recorded = rows.setdefault(item.speaker, ([], []))
        synth.append(floor)
        recorded.append(floor_ref)
    lines = ["| speaker | held-out clips | voice floor (dB) | recordings' floor (dB) | recordings, clip by clip (dB) |",
             "|---|---|---|---|---|"]
    for speaker, (synth, recorded) in rows.items():
        lines.append(f"| {speaker} | {len(synth)} | {np.mean(synth):.1f} | {np.mean(recorded):.1f} | "
                     + ", ".join(f"{v:.0f}" for v in recorded) + " |")
    return "\n".join(lines)


def log_spectrogram(audio: np.ndarray, n_fft: int = 512, hop: int = 128) -> np.ndarray:
    """dB re full scale, [bins, frames], Hann window; -120 dB where the signal is digital silence."""
    audio = np.pad(audio, (n_fft // 2, n_fft // 2))
    frames = np.lib.stride_tricks.sliding_window_view(audio, n_fft)[::hop]
    window = np.hanning(n_fft)
    power = np.abs(np.fft.rfft(frames * window, axis=1)) ** 2 / (window**2).sum() * 2
    return (10 * np.log10(np.maximum(power, 1e-12))).T


def draw(reference: np.ndarray, voice: np.ndarray, rate: int, labels: tuple[str, str], out: Path) -> None:
    """The two spectrograms on one dB scale, each titled with its noise floor (the voice's over its speech
    alone: the pause fintts puts between sentences is digital silence it did not make)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    seconds = max(len(reference), len(voice)) / rate
    figure = Figure(figsize=(8, 5), dpi=100)
    axes = figure.subplots(2, 1, sharex=True)
    floors = (noise_floor_db(reference, rate), noise_floor_db(speech_only(voice, rate), rate))
    for axis, audio, label, floor in zip(axes, (reference, voice), labels, floors):
        image = axis.imshow(log_spectrogram(audio), origin="lower", aspect="auto", cmap="magma", vmin=-100, vmax=-20,
                            extent=(0, len(audio) / rate, 0, rate / 2000))
        axis.set_xlim(0, seconds)
        axis.set_ylabel("kHz")
        axis.set_title(f"{label}: noise floor {floor:.0f} dB", fontsize=9)
    axes[-1].set_xlabel("seconds")
    figure.colorbar(image, ax=list(axes), label="dB re full scale")
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="the demo's store, e.g. runs/demo")
    parser.add_argument("wav", type=Path, help="the wav fintts demo wrote, e.g. runs/demo/demo.wav")
    parser.add_argument("--png", type=Path, help="write the spectrogram picture here")
    parser.add_argument("--sentence", default=DEMO_SENTENCE, help="what the wav says (fintts demo's sentence)")
    parser.add_argument("--speaker", help="the demo speaker who says it (default: the voice's first, as fintts demo)")
    args = parser.parse_args(argv)

    latest = checkpoint.latest_complete(args.run, log=lambda _: None)
    if latest is None:
        raise SystemExit(f"{args.run} holds no complete checkpoint: is it a fintts run folder?")
    state = json.loads((latest / "state.json").read_text())
    status = json.loads((args.run / STATUS).read_text())
    evals = [e for e in state["evals"] if "val/mcd" in e]
    sessions = state["sessions"]
    print(markdown_table(evals, sessions, validation_times(args.run)))
    if evals and "val/floor_db_ref" in evals[-1]:
        print(f"\nThe held-out recordings' own floor (`val/floor_db_ref`): {evals[-1]['val/floor_db_ref']:.1f} dB.")
    heldout = read_heldout_files(data_root(yaml.safe_load((latest / "config.yaml").read_text())["data"]))
    if heldout:  # a corpus with heldout.csv tables, as the demo's
        print("\n" + floors_by_speaker(args.run / MODEL_DIR, heldout))
    seconds = sum(map(session_seconds, sessions))
    print(f"\n{state['step']:,} steps in {len(sessions)} session(s), {seconds / 60:.1f} min, "
          f"{seconds / max(1, state['step']):.2f} s/step incl. validation and saving; best val/mcd "
          f"{status['best']['value']:.2f} dB at step {status['best']['step']}; "
          f"{os.cpu_count()} CPU(s), loadavg now {Path('/proc/loadavg').read_text().split()[:3]}")

    if args.png:
        voice, rate = sf.read(args.wav, dtype="float64")
        speakers = json.loads((args.run / MODEL_DIR / SPEAKERS_FILE).read_text())
        name = args.speaker or speakers[0]
        speaker = next(s for s in make_corpus.DEMO_SPEAKERS if s.name == name)
        # the words the voice says (numbers read by fintts' front end, not espeak-ng's), punctuation kept
        words = scratch_front_end(PUNCTUATION_MARKS).normalize(args.sentence)
        with tempfile.TemporaryDirectory() as tmp:
            audio, native = make_corpus.synthesize(words, speaker, Path(tmp))
        reference = make_corpus.trim_silence(make_corpus.resample(audio, native, rate), rate)
        draw(reference, voice, rate, (f"espeak-ng ({name})", f"the demo voice, step {status['best']['step']:,}"), args.png)
        print(f"\n![]({args.png})")


if __name__ == "__main__":
    main()
