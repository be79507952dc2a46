"""Fine-tuning Chatterbox Multilingual's T3 for Finnish, as a task of the session trainer (``task: chatterbox``).

What trains is T3 (:mod:`fintts.tts.chatterbox.t3`): text ids in, speech tokens out. Each item
is a clip's text and speech tokens, conditioned on *another* clip of the same speaker (its
speaker embedding and its first 150 speech tokens): conditioned on the target itself, T3 learns
to copy the prompt instead of reading the text (the lesson of the community's fine-tuning
scripts). The loss is next-token cross-entropy on ``[t_1 … t_S, stop]`` from ``[start, t_1 … t_S]``,
computed in fp32 whatever the autocast (:func:`fintts.tts.chatterbox.t3.speech_loss`), plus
``text_loss_weight`` times the text head's on the text ids, as upstream's ``T3.loss`` and the
community's scripts sum both (docs/chatterbox.md, "What a step computes").

Phases, as the seeds' workflow goes: ``fi`` (the whole T3 on the Finnish corpus; optional) then
``voice`` (``lora: {r: 16}`` and ``speaker:``; a LoRA on the Llama's projections, the rest frozen),
whose export folds the adapter into T3 (:mod:`fintts.tts.chatterbox.adapter`).

Tokens, text ids and speaker embeddings come from the token cache (:mod:`fintts.tts.chatterbox.cache`),
made once per clip. Validation is ``val/loss`` on held-out clips (the monitored metric), with the argmax's
``val/token_accuracy``; a few held-out clips are spoken (T3 greedily, then the frozen S3Gen) into the checkpoint's
``samples/``, whence TensorBoard, the Hub and the notebook's summary, with ``val/length_ratio`` of their tokens.

The export is the folder upstream's ``ChatterboxMultilingualTTS.from_local`` reads
(:mod:`fintts.tts.chatterbox.export`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file
from torch import nn

from fintts.train.config import ConfigError
from fintts.train.run.layout import SAMPLES_DIR
from fintts.train.task import BoardEntry, Card, DataFingerprint, Evaluation, OptimizerGroup, Task, TrainData, unwrap
from fintts.tts.audio import load_audio
from fintts.tts.chatterbox.adapter import add_lora, merged_weights
from fintts.tts.chatterbox.cache import ClipTokens, TokenCache
from fintts.tts.chatterbox.export import card_fields, model_card, write_voice
from fintts.tts.chatterbox.frozen import (
    DECODER_RATE,
    FROZEN_FILES,
    SPEECH_CODES,
    TOKENS_PER_SECOND,
    RandomParts,
    ReleasedParts,
    files_fingerprint,
)
from fintts.tts.chatterbox.release import RANDOM
from fintts.tts.chatterbox.settings import ChatterboxTaskConfig
from fintts.tts.chatterbox.t3 import IGNORE, T3, T3Settings, speech_loss
from fintts.tts.chatterbox.text import VOCAB_FILE, ChatterboxText
from fintts.tts.corpus import Item
from fintts.tts.corpus.selection import data_size, select_corpus
from fintts.tts.hub_inputs import snapshot
from fintts.tts.wav import wav_bytes


@dataclasses.dataclass
class ChatterboxBatch:
    text: torch.Tensor  # (B, T) with start and stop tokens, right-padded
    text_lens: torch.Tensor
    speech: torch.Tensor  # (B, S) right-padded
    speech_lens: torch.Tensor
    speaker: torch.Tensor  # (B, speaker size): the conditioning clip's embedding
    prompt: torch.Tensor  # (B, P): the conditioning clip's first speech tokens
    prompt_mask: torch.Tensor  # (B, P) bool
    emotion: torch.Tensor  # (B,)

    def pin_memory(self) -> ChatterboxBatch:
        """In page-locked memory, so the trainer's ``non_blocking`` copies run asynchronously (see VitsBatch)."""
        return dataclasses.replace(self, **{f.name: getattr(self, f.name).pin_memory() for f in dataclasses.fields(self)})


class _Pairs(torch.utils.data.Dataset):
    """(target clip, conditioning clip) pairs, already tokenised: nothing is read from disk while training."""

    def __init__(self, pairs: list[tuple[ClipTokens, ClipTokens]]):
        self.pairs = pairs

    def __len__(self) -> int:
        return len(self.pairs)

    def __getitem__(self, index: int):
        return self.pairs[index]


class _Collate:
    """Pads a micro-batch; a class (not a closure) so DataLoader workers can pickle it."""

    def __init__(self, settings: T3Settings, emotion: float):
        self.settings, self.emotion = settings, emotion

    def __call__(self, pairs) -> ChatterboxBatch:
        s, n = self.settings, len(pairs)
        texts = [torch.cat([torch.tensor([s.start_text_token]), target.text_ids, torch.tensor([s.stop_text_token])])
                 for target, _ in pairs]
        prompts = [cond.speech_tokens[: s.speech_cond_prompt_len] for _, cond in pairs]
        pad = nn.utils.rnn.pad_sequence
        return ChatterboxBatch(
            text=pad(texts, batch_first=True, padding_value=s.stop_text_token),
            text_lens=torch.tensor([len(t) for t in texts]),
            speech=pad([target.speech_tokens for target, _ in pairs], batch_first=True, padding_value=s.stop_speech_token),
            speech_lens=torch.tensor([len(target.speech_tokens) for target, _ in pairs]),
            speaker=torch.stack([cond.speaker for _, cond in pairs]),
            prompt=pad(prompts, batch_first=True, padding_value=s.stop_speech_token),
            prompt_mask=pad([torch.ones(len(p), dtype=torch.bool) for p in prompts], batch_first=True),
            emotion=torch.full((n,), self.emotion),
        )


class ChatterboxTask(Task):
    config_class = ChatterboxTaskConfig
    monitor = "val/loss"
    monitor_mode = "min"
    speed_switches = {"checkpointing": {"checkpointing": True}}

    # ------------------------------------------------------------------ models
    def build_models(self, start=None) -> dict[str, nn.Module]:
        cfg = self.config
        self._prepare_corpus()
        self.release = None if cfg.weights == RANDOM else self._release_folder()
        if self.release is None:
            self.settings = T3Settings.from_overrides(cfg.model)
            self.text = ChatterboxText.builtin(self.settings.text_vocab_size, self.settings.stop_text_token,
                                               self.settings.start_text_token)
        else:
            self.settings = T3Settings()
            self.text = ChatterboxText.from_folder(self.release)
        t3 = T3(self.settings)
        if start is not None:  # the previous phase's final weights (a full phase: check_phases refuses the others)
            t3.load_state_dict(start["model"], strict=True)
        elif self.release is not None and not self.context.resuming:  # a resumed session's checkpoint replaces them
            t3.load_state_dict(load_file(str(self.release / cfg.t3_file)), strict=True)
        t3.set_checkpointing(cfg.checkpointing, over_positions=cfg.checkpoint_over_positions)
        unused = [t3.tfmr.embed_tokens.weight] + ([t3.text_head.weight] if not cfg.text_loss_weight else [])
        for weight in unused:  # no loss reaches them: frozen, kept as released
            weight.requires_grad_(False)  # (DDP refuses parameters without a gradient; AdamW's decay would shrink them)
        self.adapter_name = None
        if cfg.lora.r:
            if not self.speaker and len(self.speakers) > 1:
                raise ConfigError(f"lora: an adapter is one speaker's voice; set speaker: NAME or best (the corpus has "
                                  f"{', '.join(self.speakers)})")
            self.adapter_name = self.speaker or self.speakers[0]
            t3 = add_lora(t3, cfg.lora, self.adapter_name)
            trainable = sum(p.numel() for p in t3.parameters() if p.requires_grad)
            self.context.log(f"LoRA r={cfg.lora.r} for {self.adapter_name}: {trainable:,} trainable parameters")
        return {"model": t3}

    def _release_folder(self) -> Path:
        """The folder holding the release's files: ``weights`` itself, or its Hub repo's snapshot (downloaded once, by
        the process of the session that holds the token: :mod:`fintts.tts.hub_inputs`).

        A resumed session takes T3 from its checkpoint, so the release's T3 (2.14 GB of its 3.2) is neither needed nor
        fetched then: a Kaggle session on a fresh container downloads the frozen parts and the vocabulary alone."""
        cfg = self.config
        needed = [*([] if self.context.resuming else [cfg.t3_file]), VOCAB_FILE, *FROZEN_FILES]
        folder = Path(cfg.weights).expanduser()
        if not folder.is_dir():
            from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError  # as snapshot_download raises

            # allow_patterns as upstream's from_pretrained (src/chatterbox/mtl_tts.py), our T3 file in place of its default.
            # Offline with nothing cached, snapshot_download raises LocalEntryNotFoundError ("An error happened while trying
            # to locate the files on the Hub...", huggingface_hub/_snapshot_download.py); an unknown repo HfHubHTTPError.
            try:
                folder = snapshot(cfg.weights, allow_patterns=[*needed, "conds.pt", "Cangjie5_TC.json"],
                                  fetch_first=self.context.fetch_first)
            except (HfHubHTTPError, LocalEntryNotFoundError, ValueError, OSError) as err:
                raise ConfigError(f"weights: {cfg.weights} is no folder here and could not be had from the Hub "
                                  f"({str(err).strip().splitlines()[0][:200]}); give a folder with {', '.join(needed)}, "
                                  f"or weights: {RANDOM} for a dry run") from None
        missing = [name for name in needed if not (folder / name).is_file()]
        if missing:
            raise ConfigError(f"weights: {cfg.weights} lacks {', '.join(missing)} (a Chatterbox Multilingual release has "
                              f"them; or use weights: {RANDOM} for a dry run)")
        return folder

    def build_optimizers(self, models: Mapping[str, nn.Module]) -> list[OptimizerGroup]:
        cfg = self.config
        trainable = [p for p in models["model"].parameters() if p.requires_grad]  # an adapter phase freezes the base
        optimizer = torch.optim.AdamW(trainable, lr=cfg.lr, betas=tuple(cfg.betas), eps=cfg.eps, weight_decay=cfg.weight_decay)
        return [OptimizerGroup("t3", optimizer, ["model"], cfg.clip_grad_norm or None)]

    # ------------------------------------------------------------------ data
    def _prepare_corpus(self) -> None:
        selection = select_corpus(self.config, log=self.context.log, progress=self.context.progress,
                                  cache_dir=self.context.cache_dir / "datasets", fetch_first=self.context.fetch_first)
        self.speakers, self.items, self.heldout = selection.speakers, selection.items, selection.heldout
        self.hours, self.speaker = selection.hours, selection.speaker

    def count_items(self) -> int:
        self._prepare_corpus()
        return len(self.items)

    def _cache(self) -> TokenCache:
        if self.release is None:
            return TokenCache(self.context.carried_dir / "chatterbox", RandomParts.fingerprint, RandomParts, self.text)
        fingerprint = files_fingerprint(self.release, FROZEN_FILES)
        return TokenCache(self.context.carried_dir / "chatterbox", fingerprint,
                          lambda: ReleasedParts(self.release, self.context.device), self.text)

    def _tokens(self, items: list[Item]) -> dict[str, ClipTokens]:
        tokens = self._cache().tokens(items, progress=self.context.progress, log=self.context.log, warn=self.context.warn)
        return {item.id: clip for item, clip in zip(items, tokens)}

    def train_data(self) -> TrainData:
        tokens = self._tokens(self.items + self.heldout)
        self._clips = tokens
        long = [i.id for i in self.items if not self._fits(i.id)]
        if long:
            self.context.log(f"{len(long)} clip(s) over {self._max_speech} speech tokens or {self.settings.max_text_tokens} "
                             f"text ids left out ({', '.join(long[:5])}{'...' if len(long) > 5 else ''})")
        kept = [i for i in self.items if i.id not in set(long)]
        self.partners = partners(kept)
        if not self.partners:
            raise ConfigError(f"data: no speaker of {self.config.data} has two usable clips; each clip is conditioned on "
                              "another clip of its speaker")
        pairs = [(tokens[target], tokens[cond]) for target, cond in self.partners.items()]
        lengths = [len(t.text_ids) + len(t.speech_tokens) for t, _ in pairs]
        seconds = [len(t.speech_tokens) / TOKENS_PER_SECOND for t, _ in pairs]
        self._collate = _Collate(self.settings, self.config.emotion_adv)
        return TrainData(_Pairs(pairs), self._collate, lengths, seconds)

    @property
    def _max_speech(self) -> int:
        return min(self.config.max_speech_tokens, self.settings.max_speech_tokens)

    def _fits(self, item_id: str) -> bool:
        """Whether a clip's tokens fit ``max_speech_tokens`` and T3's position tables."""
        clip = self._clips[item_id]
        return len(clip.speech_tokens) <= self._max_speech and len(clip.text_ids) <= self.settings.max_text_tokens

    # ------------------------------------------------------------------ training
    def step(self, models, batch: ChatterboxBatch, group: str):
        weight = self.config.text_loss_weight
        logits, targets, text_logits = _forward(models["model"], batch, with_text=bool(weight))
        speech = speech_loss(logits, targets)
        if text_logits is None:
            return {"loss": speech, "speech": speech.detach()}
        text = speech_loss(text_logits, T3.text_targets(batch.text, batch.text_lens))
        return {"loss": speech + weight * text, "speech": speech.detach(), "text": text.detach()}

    def evaluate(self, models, step: int) -> Evaluation:
        """``val/loss`` (monitored) and ``val/token_accuracy`` (the argmax's share of the speech tokens right, teacher-forced)
        on the held-out clips; ``samples`` of them spoken (T3 greedily, then S3Gen), with ``val/length_ratio``.

        The trainer runs this on its own seeded random stream (``isolated_rng``): the samples are the same bytes from the
        same weights, and training's stream is untouched (a resumed run stays bit-identical)."""
        model = unwrap(models["model"])
        by_speaker: dict[str, str] = {}  # a held-out clip is conditioned on its speaker's first training clip
        for item in sorted(self.items, key=lambda i: i.id):
            if item.id in self.partners:
                by_speaker.setdefault(item.speaker, item.id)
        chosen = [i for i in self.heldout if i.speaker in by_speaker and self._fits(i.id)][: self.config.val_items]
        scored = [(self._clips[i.id], self._clips[by_speaker[i.speaker]]) for i in chosen]
        if not scored:
            self.context.log("no held-out clips: val/loss cannot be computed (add heldout.csv or more clips per speaker)")
            return Evaluation({})
        total, right, count = 0.0, 0, 0
        device = next(model.parameters()).device
        for start in range(0, len(scored), 4):
            batch = _to(self._collate(scored[start: start + 4]), device)
            logits, targets, _ = _forward(model, batch)
            real = targets != IGNORE
            total, count = total + float(speech_loss(logits, targets)) * int(real.sum()), count + int(real.sum())
            right += int(((logits.argmax(-1) == targets) & real).sum())
        metrics = {"val/loss": total / count, "val/token_accuracy": right / count}
        if not self.config.samples:
            return Evaluation(metrics)
        spoken = [(item, pair, by_speaker[item.speaker]) for item, pair in zip(chosen, scored)][: self.config.samples]
        return self._speak(model, spoken, metrics, device)

    def _speak(self, model: nn.Module, spoken: list[tuple[Item, tuple[ClipTokens, ClipTokens], str]],
               metrics: dict[str, float], device: torch.device) -> Evaluation:
        """Each clip's text spoken: T3's greedy tokens (at most 1.5 × the clip's own count, or ``max_speech_tokens``), then
        S3Gen in the voice of the clip T3 was conditioned on; ``val/length_ratio`` is their count over the clip's."""
        t3, decoded = unwrap_t3(model), []
        for _, (target, cond), _ in spoken:
            batch = _to(self._collate([(target, cond)]), device)
            conditioning = t3.conditioning(batch.speaker, batch.prompt, batch.prompt_mask, batch.emotion)
            cap = min(self._max_speech, -(-3 * len(target.speech_tokens) // 2))
            decoded.append(t3.generate(conditioning, batch.text[0], cap).cpu())
        metrics["val/length_ratio"] = sum(len(tokens) / len(target.speech_tokens)
                                          for tokens, (_, (target, _), _) in zip(decoded, spoken)) / len(spoken)
        decoder = self._decoder()
        if decoder is None:
            return Evaluation(metrics)
        files: dict[str, bytes] = {}
        board: dict[str, BoardEntry] = {}
        with decoder.on(device):
            for n, (tokens, (item, _, reference)) in enumerate(zip(decoded, spoken)):
                tokens = tokens[tokens < SPEECH_CODES]  # the special ids (start, stop...) S3Gen has no code for
                if not len(tokens):
                    self.context.log(f"sample {n} ({item.id}): T3 said stop at once; nothing to hear")
                    continue
                wav = decoder.waveform(tokens, self._decoder_conditioning(decoder, reference)).numpy()
                name = f"{SAMPLES_DIR}/{n}-{item.speaker}"
                files[f"{name}.wav"] = wav_bytes(wav, DECODER_RATE)
                files[f"{name}.txt"] = (item.text + "\n").encode()  # what it should say: how a person hears ä/ö go wrong
                board[name] = BoardEntry("audio", wav, {"sample_rate": DECODER_RATE})
        return Evaluation(metrics, files, board)

    def _decoder(self) -> RandomParts | ReleasedParts | None:
        """S3Gen (on the CPU between validations), loaded once a session; ``None``, said once, where the chatterbox
        package is not installed: the samples are skipped, the metrics are not."""
        if not hasattr(self, "_s3gen"):
            try:
                self._s3gen = RandomParts() if self.release is None else ReleasedParts(self.release, torch.device("cpu"))
            except ConfigError as err:
                self._s3gen = None
                self.context.log(f"samples: skipped this session, S3Gen cannot be loaded ({str(err).split(';')[0]})")
        return self._s3gen

    def _decoder_conditioning(self, decoder: RandomParts | ReleasedParts, clip_id: str) -> dict[str, torch.Tensor]:
        """S3Gen's reference of a conditioning clip, made once a session per clip."""
        if not hasattr(self, "_references"):
            self._references: dict[str, dict[str, torch.Tensor]] = {}
        references = self._references
        if clip_id not in references:
            item = next(i for i in self.items if i.id == clip_id)
            references[clip_id] = decoder.decoder_conditioning(load_audio(item.audio, DECODER_RATE, item.span))
        return references[clip_id]

    # ------------------------------------------------------------------ export
    def plain_weights(self, models) -> dict[str, torch.Tensor]:
        """T3's weights in the release's layout: an adapter folded in."""
        model = unwrap(models["model"])
        return merged_weights(model, self.adapter_name) if self.adapter_name else dict(model.state_dict())

    def export(self, models, out_dir: Path) -> None:
        reference = self._reference_item()
        write_voice(out_dir, weights=self.plain_weights(models), settings=self.settings, text=self.text,
                    weights_from=self.config.weights, release=self.release,
                    t3_file=self.config.t3_file, reference_id=reference.id, clip=self._clips[reference.id],
                    emotion=self.config.emotion_adv, gen=self._decoder_reference(reference),
                    card=model_card(self.describe(), self.config.weights))

    def _decoder_reference(self, reference: Item) -> dict[str, Any]:
        """S3Gen's reference for the exported voice (none with random parts): made once per session, S3Gen is a gigabyte."""
        if self.release is None:
            return {}
        if getattr(self, "_gen", (None,))[0] != reference.id:
            parts = ReleasedParts(self.release, self.context.device)
            self._gen = (reference.id, parts.decoder_conditioning(load_audio(reference.audio, 24_000, reference.span)))
        return self._gen[1]

    def _reference_item(self) -> Item:
        own = [i for i in self.items if i.speaker == (self.adapter_name or self.speaker or self.speakers[0])] or self.items
        if self.config.reference_clip:
            chosen = [i for i in own if i.id == self.config.reference_clip]
            if not chosen:
                raise ConfigError(f"reference_clip: {self.config.reference_clip!r} is not a training clip of {own[0].speaker}")
            return chosen[0]
        seconds = {i.id: len(self._clips[i.id].speech_tokens) / TOKENS_PER_SECOND for i in own}
        short = [i for i in own if seconds[i.id] <= 10.0] or own
        return max(short, key=lambda i: (seconds[i.id], i.id))

    def describe(self) -> dict[str, Any]:
        return {
            "data": self.config.data, "hours": round(getattr(self, "hours", 0.0), 3), "clips": len(getattr(self, "items", [])),
            "speakers": getattr(self, "speakers", []), "heldout_clips": len(getattr(self, "heldout", [])),
            "weights": self.config.weights, "license": "mit",
            **({"speaker": self.speaker} if getattr(self, "speaker", None) else {}),
            **({"lora": {"r": self.config.lora.r, "adapter": self.adapter_name}} if getattr(self, "adapter_name", None) else {}),
        }

    def data_fingerprint(self) -> DataFingerprint:
        return DataFingerprint(items={i.id: data_size(i) for i in self.items}, heldout={i.id: data_size(i) for i in self.heldout})

    def memory_advice(self) -> list[str]:
        if self.config.checkpointing:
            return []
        return ["checkpointing=true (recomputes each Llama layer in the backward pass: less memory, same gradients, slower steps)"]

    def resolved_settings(self) -> dict[str, Any]:
        return {"speaker": self.speaker} if self.config.speaker == "best" else {}

    def card(self, status: Mapping[str, Any], repo: str | None) -> Card:
        return Card(title="a Finnish Chatterbox voice trained with fintts", **card_fields(self.describe(), self.config.weights))


def partners(items: list[Item]) -> dict[str, str]:
    """Each clip's conditioning clip: the next of its speaker's clips by id (cyclic), never itself; a speaker with one clip has none."""
    by_speaker: dict[str, list[str]] = {}
    for item in sorted(items, key=lambda i: i.id):
        by_speaker.setdefault(item.speaker, []).append(item.id)
    return {ids[n]: ids[(n + 1) % len(ids)] for ids in by_speaker.values() if len(ids) > 1 for n in range(len(ids))}


def _forward(model: nn.Module, batch: ChatterboxBatch, with_text: bool = False):
    """The speech logits, their targets, and ``with_text`` the text head's logits (else ``None``)."""
    out = model(batch.speaker, batch.prompt, batch.prompt_mask, batch.emotion, batch.text, batch.text_lens, batch.speech,
                batch.speech_lens, with_text=with_text)
    logits, text_logits = out if with_text else (out, None)
    return logits, unwrap_t3(model).targets(batch.speech, batch.speech_lens), text_logits


def unwrap_t3(model: nn.Module) -> T3:
    """The T3 inside data-parallel and peft wrappers."""
    model = unwrap(model)
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def _to(batch: ChatterboxBatch, device: torch.device) -> ChatterboxBatch:
    return dataclasses.replace(batch, **{f.name: getattr(batch, f.name).to(device) for f in dataclasses.fields(batch)})
