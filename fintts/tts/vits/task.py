"""Fine-tuning a Finnish VITS voice, as a task of the session trainer.

Two optimizer groups, as in VITS: ``generator`` (the whole ``VitsModel``) and
``discriminator``. For each micro-batch the trainer calls :meth:`VitsTask.step` for the
generator first — one forward pass, all of VITS eq. 11 — and keeps the generated audio;
the discriminator's step then scores that audio detached against the recording. Both
optimizers step after the batch (simultaneous updates, which keeps gradient accumulation
exact; the original alternates within a batch).

Data: the corpus is checked once per session (bad clips are listed and skipped, never a
crash hours later), items are bucketed by length (read from the audio headers) by the
trainer's sampler, and features are computed the first time the data loader reads a clip —
in its workers, while the model trains — into a content-hashed cache in the run's store. A
fresh session (a Kaggle disk starts empty) so starts training at once instead of waiting
for every clip's features (about 1.5 minutes for 2000 clips on one core; benchmarks/README.md).

Validation synthesises held-out sentences and scores them against their recordings with
mel-cepstral distortion (``val/mcd``, lower is better: the monitored metric), by whether
each is nearest to its own recording among its speaker's held-out clips (``val/identified``,
a content check MCD alone is not) and by how far below the voice's loudest moments its
quietest lie (``val/floor_db``, beside the same for the recordings, ``val/floor_db_ref``:
the hiss MCD cannot hear), and renders a few fixed sentences as wavs kept with the
checkpoint.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import load_model
from torch import nn
from tqdm.auto import tqdm

from fintts.train.config import ConfigError
from fintts.train.report.card import render_model
from fintts.train.run import checkpoint
from fintts.train.run.layout import MODEL_DIR, SAMPLES_DIR
from fintts.train.task import BoardEntry, Card, DataFingerprint, Evaluation, OptimizerGroup, Task, TrainData, unwrap
from fintts.tts.audio import Span, resampled_length
from fintts.tts.corpus.enough import too_few_to_judge
from fintts.tts.corpus.selection import data_size, select_corpus
from fintts.tts.corpus.speakers import BEST
from fintts.tts.features import FeatureCache
from fintts.tts.spectrogram import Spectrogram, SpectrogramConfig
from fintts.tts.text import FALLBACK_VOCAB, FinnishText
from fintts.tts.vits.card import run_card, voice_license
from fintts.tts.vits.discriminator import DiscriminatorConfig
from fintts.tts.vits.export import export_folder, save_voice
from fintts.tts.vits.generator import VitsTrainingForward, discriminator_loss_terms, generator_loss_terms, judge_real
from fintts.tts.vits.heldout import score_heldout
from fintts.tts.vits.init import build_generator, check_model_fields
from fintts.tts.vits.lora import ADAPTERS_DIR, adapter_files, adapter_size, add_adapter, base_weights, is_adapted, standard_model
from fintts.tts.vits.mms_discriminator import starting_discriminator
from fintts.tts.vits.settings import CHECKPOINTABLE_BLOCKS, GENERATOR, PUNCTUATION_MARKS, VitsTaskConfig
from fintts.tts.vits.torch_backend import TorchBackend
from fintts.tts.vits.voice import VitsVoice, VoiceConfig
from fintts.tts.voice_format import WEIGHTS_FILE
from fintts.tts.wav import wav_bytes


@dataclasses.dataclass
class VitsBatch:
    input_ids: torch.Tensor
    input_mask: torch.Tensor
    spec: torch.Tensor
    spec_mask: torch.Tensor
    wav: torch.Tensor
    speaker_ids: torch.Tensor | None

    def pin_memory(self) -> VitsBatch:
        """The batch in page-locked memory. A DataLoader with ``pin_memory`` calls this on what it
        cannot pin itself (a dataclass); the trainer's ``non_blocking`` copies to the GPU then run
        asynchronously, and from pageable memory they would not."""
        return dataclasses.replace(
            self, **{f.name: value.pin_memory() for f in dataclasses.fields(self) if (value := getattr(self, f.name)) is not None}
        )


class _Clips(torch.utils.data.Dataset):
    """Encoded text and features per clip, computed into the cache on a clip's first read;
    deterministic, so workers add no randomness."""

    def __init__(self, items: list[tuple[list[int], Path, Path, Span | None, int]], cache: FeatureCache):
        self.items, self.cache = items, cache

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int):
        ids, entry, audio, span, speaker = self.items[index]
        features = self.cache.load(entry, audio, span)
        return torch.tensor(ids, dtype=torch.long), features.spec, features.wav, speaker


class _Collate:
    """Pads a micro-batch; a class (not a closure) so DataLoader workers can pickle it."""

    def __init__(self, hop: int, multi_speaker: bool):
        self.hop, self.multi_speaker = hop, multi_speaker

    def __call__(self, items) -> VitsBatch:
        ids, specs, wavs, speakers = zip(*items)
        n, max_text = len(items), max(len(i) for i in ids)
        max_frames = max(s.shape[-1] for s in specs)
        input_ids = torch.zeros(n, max_text, dtype=torch.long)
        input_mask = torch.zeros(n, max_text)
        spec = torch.zeros(n, specs[0].shape[0], max_frames)
        spec_mask = torch.zeros(n, max_frames)
        wav = torch.zeros(n, 1, max_frames * self.hop)
        for b, (i, s, w) in enumerate(zip(ids, specs, wavs)):
            input_ids[b, : len(i)], input_mask[b, : len(i)] = i, 1
            spec[b, :, : s.shape[-1]], spec_mask[b, : s.shape[-1]] = s, 1
            w = w[: s.shape[-1] * self.hop]
            wav[b, 0, : len(w)] = w
        speaker_ids = torch.tensor(speakers, dtype=torch.long) if self.multi_speaker else None
        return VitsBatch(input_ids, input_mask, spec, spec_mask, wav, speaker_ids)


class _UpdateCounter:
    """How many updates an optimizer has applied: the trainer's step, read from the optimizer's
    own state, so it is exact after a resume (the state is checkpointed) without the task
    keeping a counter of its own. An fp16 step the GradScaler skipped does not count."""

    def __init__(self, optimizer: torch.optim.Optimizer):
        self.optimizer = optimizer
        self.parameter = optimizer.param_groups[0]["params"][0]

    def __call__(self) -> int:
        state = self.optimizer.state.get(self.parameter)
        return int(state["step"]) if state else 0


def resting_discriminator_loss(discriminator: nn.Module) -> dict[str, torch.Tensor]:
    """The discriminator's loss before the GAN starts: zero, with zero gradients for every
    parameter (the trainer backwards every group's loss). AdamW then moves nothing but its
    decoupled weight decay (lr × weight_decay per step: 5e-6 for the demo)."""
    loss = sum(parameter.sum() for parameter in discriminator.parameters()) * 0.0
    return {"loss": loss, "discriminator": loss.detach()}


def scratch_front_end(punctuation: str = "") -> FinnishText:
    """The text front end of a model trained from scratch: the built-in vocabulary plus
    ``punctuation`` marks appended as tokens of their own (existing ids unchanged)."""
    vocab = dict(FALLBACK_VOCAB)
    for mark in punctuation:
        if mark not in PUNCTUATION_MARKS:
            raise ConfigError(f"punctuation_tokens: {mark!r} is not one of the marks that can become a token ({PUNCTUATION_MARKS})")
        vocab.setdefault(mark, len(vocab))
    return FinnishText(vocab)


def resolve_init(init: str) -> tuple[str, Path | None]:
    """Where the generator comes from, and a fintts checkpoint whose weights replace it.

    ``init`` may also name a fintts run folder (its ``model/``, the best voice) or one of
    its checkpoint folders (the architecture of the run's ``model/``, that checkpoint's
    generator and discriminator weights): a new run can start from an older run.
    """
    path = Path(init).expanduser()
    if (path / checkpoint.MANIFEST).is_file():
        checkpoint.verify(path)
        architecture = path.parent.parent / MODEL_DIR
        if not (architecture / "config.json").is_file():
            raise ConfigError(f"init: {path} is a checkpoint, but its run has no {architecture} to read the architecture from")
        return str(architecture), path
    if (path / MODEL_DIR / "config.json").is_file():
        return str(path / MODEL_DIR), None
    return init, None


class VitsTask(Task):
    config_class = VitsTaskConfig
    monitor = "val/mcd"
    monitor_mode = "min"
    speed_switches = {
        "checkpointing=decoder": {"checkpointing": ["decoder"]},
        "checkpointing=all": {"checkpointing": list(CHECKPOINTABLE_BLOCKS)},
    }

    # ------------------------------------------------------------------ models
    def build_models(self, start=None) -> dict[str, nn.Module]:
        cfg = self.config
        check_model_fields(cfg.model)  # a typo in model: is refused before the corpus is read, not after
        self._prepare_corpus()
        overrides = dict(cfg.model)
        scratch_text = scratch_front_end(cfg.punctuation_tokens)
        if cfg.init == "scratch":
            overrides.setdefault("vocab_size", scratch_text.vocab_size)
        init, weights = resolve_init(cfg.init)
        vits, tokenizer = build_generator(init, config_overrides=overrides, num_speakers=max(1, len(self.speakers)),
                                          fetch_first=self.context.fetch_first)
        self.text = FinnishText.from_tokenizer(tokenizer) if tokenizer is not None else scratch_text
        missing = sorted(set(cfg.punctuation_tokens) - set(self.text.vocab))
        if missing:
            raise ConfigError(
                f"punctuation_tokens: the vocabulary of init {cfg.init!r} has no {' '.join(missing)}; a pretrained "
                "voice's characters are fixed by its tokenizer, so remove them from punctuation_tokens"
            )
        if self.text.vocab_size > vits.config.vocab_size:
            raise ConfigError(
                f"init: {cfg.init!r} has vocab_size {vits.config.vocab_size} but the text front end needs "
                f"{self.text.vocab_size}; set model.vocab_size or use a matching tokenizer"
            )
        self.spectrogram_config = SpectrogramConfig.from_vits_config(vits.config)
        self.spectrogram = Spectrogram(self.spectrogram_config)
        self.sample_rate = vits.config.sampling_rate
        discriminator, self.discriminator_source = starting_discriminator(
            cfg.discriminator, cfg.init, DiscriminatorConfig(**{k: tuple(v) if isinstance(v, list) else v
                                                                for k, v in cfg.discriminator_config.items()}),
            cache_dir=self.context.cache_dir, init_checkpoint=weights, replaced=start is not None or self.context.resuming,
            fetch=self.context.is_main_process, log=self.context.log, warn=self.context.warn,
        )
        generator = VitsTrainingForward(vits, cfg.segment_frames, checkpointing=cfg.checkpointing)
        if weights is not None:
            with safe_open(str(weights / WEIGHTS_FILE), "pt") as saved:
                if is_adapted(dict.fromkeys(saved.keys())):
                    raise ConfigError(f"init: {weights} is a checkpoint of an adapter phase; init from the checkpoint that "
                                     "ended the full phase, or from a voice folder (its run's model/, or fintts merge's)")
            load_model(generator, str(weights / WEIGHTS_FILE), strict=True)
        if start is not None:  # the previous phase's final weights (a full phase: check_phases refuses the others)
            generator.load_state_dict(start[GENERATOR])
            discriminator.load_state_dict(start["discriminator"])
        self.adapter = None
        if cfg.lora.r:
            self._add_adapter(vits)
        return {GENERATOR: generator, "discriminator": discriminator}

    def _add_adapter(self, vits) -> None:
        if not self.speaker and len(self.speakers) > 1:
            raise ConfigError(f"lora: an adapter is one speaker's voice; set speaker: NAME or best (the model has "
                             f"{', '.join(self.speakers)})")
        self.adapter_name = self.speaker or self.speakers[0]
        self.adapter = add_adapter(vits, self.config.lora, self.adapter_name)
        self.adapter_facts = adapter_size(self.adapter, self.adapter_name)
        facts = self.adapter_facts
        self.context.log(
            f"LoRA r={self.config.lora.r} for {self.adapter_name}: {facts['trainable_parameters']:,} trainable parameters "
            f"of {facts['generator_parameters']:,} in the generator "
            f"({100 * facts['trainable_parameters'] / facts['generator_parameters']:.2f}%), adapter {facts['adapter_mb']:.2f} MB"
        )

    def build_optimizers(self, models: Mapping[str, nn.Module]) -> list[OptimizerGroup]:
        cfg = self.config

        def adamw(module: nn.Module) -> torch.optim.Optimizer:
            trainable = [p for p in module.parameters() if p.requires_grad]  # an adapter phase freezes the base
            return torch.optim.AdamW(trainable, lr=cfg.lr, betas=tuple(cfg.betas), eps=cfg.eps, weight_decay=cfg.weight_decay)

        clip = cfg.clip_grad_norm or None
        generator = adamw(models[GENERATOR])
        self._updates = _UpdateCounter(generator)
        return [
            OptimizerGroup("generator", generator, [GENERATOR], clip),
            OptimizerGroup("discriminator", adamw(models["discriminator"]), ["discriminator"], clip),
        ]

    # ------------------------------------------------------------------ data
    def _prepare_corpus(self) -> None:
        selection = select_corpus(self.config, log=self.context.log, progress=self.context.progress,
                                  cache_dir=self.context.cache_dir / "datasets", fetch_first=self.context.fetch_first)
        self.speakers, self.items, self.heldout = selection.speakers, selection.items, selection.heldout
        self.hours, self.speaker = selection.hours, selection.speaker
        self.heldout_minutes = selection.heldout_minutes
        small = too_few_to_judge(len(self.items), len(self.heldout))
        if small:  # kept in the session's warnings: its summary says it again at the end
            self.context.warn(small)

    def count_items(self) -> int:
        """The corpus's good clips less the held-out ones: checking the corpus, no features. Said on the log: the
        split (a plan's items are fewer than ``fintts check``'s clips by the held-out ones), and a corpus too small."""
        selection = select_corpus(self.config, log=self.context.log, progress=self.context.progress,
                                  cache_dir=self.context.cache_dir / "datasets", fetch_first=self.context.fetch_first)
        train, heldout = len(selection.items), len(selection.heldout)
        self.context.log(too_few_to_judge(train, heldout) or f"{train + heldout} clips: {train} train + {heldout} held out")
        return train

    def train_data(self) -> TrainData:
        cache = FeatureCache(self.context.cache_dir / "features", self.spectrogram_config)
        hop = self.spectrogram_config.hop_length
        encoded, lengths, cached = [], [], 0
        for item in tqdm(self.items, desc="indexing clips", disable=not self.context.progress, leave=False):
            entry = cache.entry(item.audio, item.span)
            cached += entry.is_file()
            encoded.append((self.text.encode(item.text, warn=None), entry, item.audio, item.span,
                            self.speakers.index(item.speaker)))
            lengths.append(resampled_length(item.audio, self.sample_rate, item.span) // hop)  # the spectrogram's frames
        if cached < len(encoded):
            self.context.log(f"features: {cached} of {len(encoded)} clips cached in {cache.folder}; "
                             "the data loader computes the others as training first reads them")
        seconds = [frames * hop / self.sample_rate for frames in lengths]
        collate = _Collate(hop, len(self.speakers) > 1)
        return TrainData(_Clips(encoded, cache), collate, lengths, seconds)

    # ------------------------------------------------------------------ training
    def step(self, models, batch: VitsBatch, group: str):
        gan = self._updates() >= self.config.gan_start_step
        if group == "generator":
            output = models[GENERATOR](
                batch.input_ids, batch.input_mask, batch.spec, batch.spec_mask, batch.wav, batch.speaker_ids
            )
            discriminator = unwrap(models["discriminator"]) if gan else None
            real = judge_real(discriminator, output) if gan else None  # the discriminator's step reuses it
            self._last_output, self._last_real = output, real
            return generator_loss_terms(discriminator, output, self.spectrogram.mel, self.config.loss, real=real)
        output, real, self._last_output, self._last_real = self._last_output, self._last_real, None, None
        if not gan:
            return resting_discriminator_loss(models["discriminator"])
        return discriminator_loss_terms(models["discriminator"], output, real=real)

    # ------------------------------------------------------------------ validation
    def _voice(self, models) -> VitsVoice:
        """The model being trained as a voice; the same noise every validation, so scores move with the weights only."""
        vits = unwrap(models[GENERATOR]).model
        return VitsVoice(TorchBackend(vits), VoiceConfig.from_dict(vits.config.to_dict()), self.text, self.speakers,
                     seed=self.context.seed)

    def evaluate(self, models, step: int) -> Evaluation:
        voice = self._voice(models)
        files: dict[str, bytes] = {}
        board: dict[str, BoardEntry] = {}
        speakers = [self.speaker] if self.speaker else self.speakers[: max(1, self.config.eval_speakers)]
        for speaker in speakers or [None]:
            for n, sentence in enumerate(self.config.eval_sentences):
                wav, _ = voice.synthesize(sentence, speaker=speaker, warn=None)
                files[f"{SAMPLES_DIR}/{n}-{speaker or 'voice'}.wav"] = wav_bytes(wav, self.sample_rate)
                # TensorBoard's AUDIO tab: each step's sample beside the curves (tag: the file's name, stable across steps)
                board[f"{SAMPLES_DIR}/{n}-{speaker or 'voice'}"] = BoardEntry("audio", wav, {"sample_rate": self.sample_rate})
        metrics = score_heldout(voice, self.heldout[: self.config.mcd_items]).metrics()
        if not metrics:
            self.context.log("no held-out clips: val/mcd cannot be computed (add heldout.csv or more clips per speaker)")
        return Evaluation(metrics, files, board)

    # ------------------------------------------------------------------ export
    def export(self, models, out_dir: Path) -> None:
        """The voice folder; in an adapter phase the base voice (no ONNX: it would not speak the adapted voice) and
        ``adapters/<speaker>/`` — ``fintts merge`` makes the adapted voice a folder of its own, with its graphs."""
        vits = unwrap(models[GENERATOR]).model
        if self.adapter is None:
            save_voice(vits, out_dir, self.text, self.speakers, card=self._model_card(vits), onnx=False)  # graphs: export_later
            return
        base = standard_model(vits.config, base_weights(vits.state_dict()))
        save_voice(base, out_dir, self.text, self.speakers, card=self._model_card(base), onnx=False)
        for rel, data in self.checkpoint_files(models).items():
            (out_dir / rel).parent.mkdir(parents=True, exist_ok=True)
            (out_dir / rel).write_bytes(data)

    def export_later(self):
        """The ONNX graphs, made from the voice folder :meth:`export` wrote (an adapter phase's base voice gets none)."""
        return export_folder if self.config.export_onnx and self.adapter is None else None

    def checkpoint_files(self, models) -> dict[str, bytes]:
        if self.adapter is None:
            return {}
        return {f"{ADAPTERS_DIR}/{rel}": data for rel, data in adapter_files(self.adapter, self.adapter_name).items()}

    def _model_card(self, vits) -> str:
        """The exported folder's ``README.md``: the card ``fintts publish`` also writes, from this run's facts so far."""
        card = run_card({"about": self.describe()}, self.config.init, where="folder", sample_rate=vits.config.sampling_rate)
        return render_model(card, name="Finnish VITS voice (fintts)")

    def describe(self) -> dict[str, Any]:
        return {
            "data": self.config.data, "hours": round(getattr(self, "hours", 0.0), 3),
            "clips": len(getattr(self, "items", [])), "speakers": getattr(self, "speakers", []),
            "heldout_clips": len(getattr(self, "heldout", [])), "init": self.config.init,
            "validated_on": self._validated_on(),
            "license": voice_license(self.config.init, self.config.license),
            **({"speaker": self.speaker} if getattr(self, "speaker", None) else {}),
            **({"discriminator": self.discriminator_source} if getattr(self, "discriminator_source", None) else {}),
            **({"lora": {"r": self.config.lora.r, **self.adapter_facts}} if getattr(self, "adapter", None) else {}),
        }

    def _validated_on(self) -> str:
        """The session summary's line on the held-out set: its size decides how far its scores can be trusted."""
        heldout = getattr(self, "heldout", [])
        if not heldout:
            return "no held-out clips: no val/mcd (add heldout.csv or more clips per speaker)"
        speakers = len({i.speaker for i in heldout})
        scored = min(len(heldout), self.config.mcd_items)
        return (f"{len(heldout)} held-out clips ({getattr(self, 'heldout_minutes', 0.0):.1f} min) of {speakers} speaker(s), "
                f"{scored} scored each validation")

    def data_fingerprint(self) -> DataFingerprint:
        """Clip ids and audio sizes; the speakers are labels only when the model has a slot per speaker."""
        return DataFingerprint(
            items={i.id: data_size(i) for i in self.items},
            heldout={i.id: data_size(i) for i in self.heldout},
            labels=list(self.speakers) if len(self.speakers) > 1 else [],
        )

    def memory_advice(self) -> list[str]:
        """Gradient checkpointing of every block, when some are not yet.

        The one retry after an out-of-memory stop should fit then, at a cost in time only.
        """
        if set(CHECKPOINTABLE_BLOCKS) <= set(self.config.checkpointing):
            return []
        every = ",".join(CHECKPOINTABLE_BLOCKS)
        return [f"checkpointing=[{every}] (recomputes those blocks in the backward pass: less memory, same gradients, slower steps)"]

    def resolved_settings(self) -> dict[str, Any]:
        return {"speaker": self.speaker} if self.config.speaker == BEST else {}

    def card(self, status: Mapping[str, Any], repo: str | None) -> Card:
        return run_card(status, self.config.init)
