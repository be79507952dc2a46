"""How a VITS voice does on its run's held-out clips: validation's scores and ``fintts eval``."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from fintts.train.config import ConfigError
from fintts.tts.audio import load_audio
from fintts.tts.corpus import Item
from fintts.tts.corpus.selection import select_corpus
from fintts.tts.eval import cepstral_distortion, mel_cepstra, noise_floor_db
from fintts.tts.vits.settings import VitsTaskConfig
from fintts.tts.vits.voice import VitsVoice, load_vits_voice
from fintts.tts.voice import voice_folder


@dataclasses.dataclass
class HeldoutScores:
    """How a voice does on held-out clips, one entry per clip.

    ``mcd``: dB against the clip's own recording (lower is better). ``identified``: the
    clip's own recording is the nearest, by MCD, among the held-out recordings of the same
    speaker (up to :data:`CANDIDATES`, those closest in length) — the voice said *that* sentence,
    not just something in that voice; chance is ``1 / candidates``. ``floor`` and ``floor_ref``: :func:`~fintts.tts.eval.noise_floor_db`
    of the synthesis and of its recording (higher is cleaner); MCD ignores frame energy,
    so a voice that hisses through its pauses scores well on MCD and only these show it.
    """

    mcd: list[float]
    identified: list[bool]
    candidates: list[int]
    floor: list[float]
    floor_ref: list[float]

    def metrics(self) -> dict[str, float]:
        if not self.mcd:
            return {}
        return {
            "val/mcd": _mean(self.mcd),
            "val/identified": _mean(self.identified),
            "val/floor_db": _mean(self.floor),
            "val/floor_db_ref": _mean(self.floor_ref),
        }


def _mean(values) -> float:
    return sum(values) / len(values)


#: Recordings a synthesis is told apart among: its own and the others of its speaker closest to it in length, at most
#: this many in all. Each comparison is a DTW (~0.1 s of CPU for 6 s clips); all against all would grow with the
#: square of the held-out set (24 clips: 576 comparisons, 100 s a validation on a shared 2-core CPU), while the
#: figure's noise depends on how many clips are scored, not on the candidates. The nearest in length are the
#: hardest to tell apart by MCD alone; chance is 1/8.
CANDIDATES = 8


def score_heldout(voice: VitsVoice, items: list[Item]) -> HeldoutScores:
    """Have the voice say each held-out clip's text; score it against that speaker's recordings (:data:`CANDIDATES`)."""
    multi = voice.config.num_speakers > 1
    rate = voice.sample_rate
    recordings = {item.id: load_audio(item.audio, rate, item.span).numpy() for item in items}
    cepstra = {clip: mel_cepstra(samples, rate) for clip, samples in recordings.items()}  # once each, not once a pair
    scores = HeldoutScores([], [], [], [], [])
    for item in items:
        others = [o for o in items if o.speaker == item.speaker and o is not item]
        others.sort(key=lambda o: abs(len(recordings[o.id]) - len(recordings[item.id])))
        candidates = [item, *others[: CANDIDATES - 1]]
        synthesized, _ = voice.synthesize(item.text, speaker=item.speaker if multi else None, warn=None)
        heard = mel_cepstra(synthesized, rate)
        mcds = [cepstral_distortion(cepstra[c.id], heard) for c in candidates]
        scores.mcd.append(mcds[0])
        scores.identified.append(mcds[0] <= min(mcds))
        scores.candidates.append(len(candidates))
        scores.floor.append(noise_floor_db(synthesized, rate))
        scores.floor_ref.append(noise_floor_db(recordings[item.id], rate))
    return scores


def evaluate_voice(model_dir: Path, cfg: VitsTaskConfig, *, log=print) -> dict[str, Any]:
    """Score an exported voice on its run's held-out clips (``fintts eval``: :func:`fintts.tts.evaluation.evaluate_run`)."""
    voice = load_vits_voice(voice_folder(model_dir), backend="torch", seed=0)
    heldout = select_corpus(cfg, log=log, progress=False).heldout
    if not heldout:
        raise ConfigError(f"data: {cfg.data} has no held-out clips to score (add heldout.csv or more clips per speaker)")
    scores = score_heldout(voice, heldout)
    return {
        "model": str(model_dir),
        "mcd_mean_db": _mean(scores.mcd),
        "identified": sum(scores.identified),
        "chance": sum(1 / n for n in scores.candidates),
        "floor_mean_db": _mean(scores.floor),
        "floor_ref_mean_db": _mean(scores.floor_ref),
        "clips": [
            {"id": item.id, "speaker": item.speaker, "mcd_db": mcd, "identified": hit, "candidates": n,
             "floor_db": floor, "floor_ref_db": floor_ref}
            for item, mcd, hit, n, floor, floor_ref in zip(
                heldout, scores.mcd, scores.identified, scores.candidates, scores.floor, scores.floor_ref
            )
        ],
    }


def scores_text(result: dict[str, Any]) -> str:
    """What ``fintts eval`` prints of :func:`evaluate_voice`'s result: a line per clip, then the means."""
    lines = ["    MCD  floor (recording)  sentence"]
    for clip in result["clips"]:
        said = "said" if clip["identified"] else "NOT identified"
        lines.append(f"{clip['mcd_db']:7.2f} dB  {clip['floor_db']:5.1f} ({clip['floor_ref_db']:5.1f}) dB  "
                     f"{said} (among {clip['candidates']})  {clip['id']}")
    lines.append(f"mean MCD {result['mcd_mean_db']:.2f} dB over {len(result['clips'])} held-out clips ({result['model']})")
    lines.append(f"sentence identified by its nearest recording: {result['identified']} of {len(result['clips'])} "
                 f"(a random pick among each clip's candidates would get {result['chance']:.1f} of {len(result['clips'])})")
    lines.append(f"noise floor (loudest vs quietest tenth of 20 ms frames): {result['floor_mean_db']:.1f} dB, "
                 f"the recordings {result['floor_ref_mean_db']:.1f} dB (higher is cleaner)")
    return "\n".join(lines)
