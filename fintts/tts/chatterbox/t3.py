"""T3, Chatterbox's text → speech-token model, as fintts trains it.

fintts owns this module (it is what the task trains), written from upstream's design
(resemble-ai/chatterbox, ``src/chatterbox/models/t3/``: ``t3.py``, ``modules/cond_enc.py``,
``perceiver.py``, ``learned_pos_emb.py``, ``t3_config.py``, ``llama_configs.py``) so that its
state dict has the released ``t3_mtl23ls_v2.safetensors``'s names and shapes and loads it with
``strict=True`` (tests/tts/chatterbox/test_t3.py). The release's sizes are :class:`T3Settings`'
defaults: 536.0M parameters, 503.4M of them a transformers ``LlamaModel`` (30 layers, width
1024); every width is a setting, so a test trains a tiny one on a CPU.

The sequence the transformer reads is ``[conditioning | text | speech]``, embedded here (the
Llama's own token table is unused, as upstream's): the conditioning is the speaker embedding's
projection, the perceiver's resampling of a prompt of speech tokens (another clip of the same
speaker) and the "emotion exaggeration" scalar's projection. Text and speech tokens get
learned position tables of their own, counted from 0 each (upstream's inference does the same).

Training (:meth:`T3.speech_logits`) packs each item as ``[cond | text_i | speech_i]`` and pads
at the right, so the positions RoPE sees are those inference sees; upstream pads text and
speech separately (a padded gap between them) and its ``T3.loss`` predicts each token from its
own position, not the next one.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformers import DynamicCache, LlamaConfig, LlamaModel

from fintts.errors import ConfigError

#: the ignored target of a padded position (torch's cross-entropy default).
IGNORE = -100


@dataclasses.dataclass(frozen=True)
class T3Settings:
    """T3's sizes and special tokens; the defaults are the released multilingual model's (``T3Config.multilingual()``
    with ``Llama_520M``)."""

    hidden_size: int = 1024
    num_hidden_layers: int = 30
    num_attention_heads: int = 16
    head_dim: int = 64
    intermediate_size: int = 4096
    text_vocab_size: int = 2454
    speech_vocab_size: int = 8194
    max_text_tokens: int = 2048
    max_speech_tokens: int = 4096
    speaker_embed_size: int = 256
    perceiver_queries: int = 32
    perceiver_heads: int = 4
    #: dropout in the perceiver's attention while training (upstream's ``AttentionBlock2`` default).
    perceiver_dropout: float = 0.2
    start_text_token: int = 255
    stop_text_token: int = 0
    start_speech_token: int = 6561
    stop_speech_token: int = 6562
    #: speech tokens of the conditioning clip the perceiver reads (6 s at 25 tokens/s).
    speech_cond_prompt_len: int = 150

    @classmethod
    def from_overrides(cls, overrides: Mapping[str, Any]) -> T3Settings:
        """The release's settings with ``model:`` overrides, refusing an unknown key by name."""
        fields = {field.name for field in dataclasses.fields(cls)}
        unknown = sorted(set(overrides) - fields)
        if unknown:
            raise ConfigError(f"model: {', '.join(unknown)} not T3 settings (known: {', '.join(sorted(fields))})")
        settings = cls(**overrides)
        for name in ("start_text_token", "stop_text_token"):
            if not 0 <= getattr(settings, name) < settings.text_vocab_size:
                raise ConfigError(f"model: {name} {getattr(settings, name)} is outside text_vocab_size {settings.text_vocab_size}")
        for name in ("start_speech_token", "stop_speech_token"):
            if not 0 <= getattr(settings, name) < settings.speech_vocab_size:
                raise ConfigError(f"model: {name} {getattr(settings, name)} is outside speech_vocab_size {settings.speech_vocab_size}")
        return settings

    def llama_config(self) -> LlamaConfig:
        """Upstream's ``Llama_520M`` at these widths (llama3 RoPE scaling, no biases, vocabulary 8: unused)."""
        return LlamaConfig(
            vocab_size=8, max_position_embeddings=131072, hidden_size=self.hidden_size, intermediate_size=self.intermediate_size,
            num_hidden_layers=self.num_hidden_layers, num_attention_heads=self.num_attention_heads,
            num_key_value_heads=self.num_attention_heads, head_dim=self.head_dim, tie_word_embeddings=False, hidden_act="silu",
            attention_bias=False, attention_dropout=0.0, mlp_bias=False, rms_norm_eps=1e-5, initializer_range=0.02,
            rope_scaling={"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                          "original_max_position_embeddings": 8192, "rope_type": "llama3"},
            rope_theta=500000.0, attn_implementation="sdpa", use_cache=False,
        )


class PositionTable(nn.Module):
    """A learned position table (``<name>.emb.weight`` as upstream's ``LearnedPositionEmbeddings``), GPT-2's init."""

    def __init__(self, length: int, width: int):
        super().__init__()
        self.emb = nn.Embedding(length, width)
        nn.init.normal_(self.emb.weight, std=0.02)

    def forward(self, length: int) -> Tensor:
        return self.emb(torch.arange(length, device=self.emb.weight.device))


class CrossAttention(nn.Module):
    """Pre-norm attention of ``x`` over ``context`` with a residual (upstream's ``AttentionBlock2``; one LayerNorm for both)."""

    def __init__(self, width: int, heads: int, dropout: float):
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.norm = nn.LayerNorm(width)
        self.to_q, self.to_k, self.to_v = nn.Linear(width, width), nn.Linear(width, width), nn.Linear(width, width)
        self.proj_out = nn.Linear(width, width)

    def forward(self, x: Tensor, context: Tensor, key_mask: Tensor | None = None) -> Tensor:
        x_norm, context_norm = self.norm(x), self.norm(context)
        q, k, v = self._split(self.to_q(x_norm)), self._split(self.to_k(context_norm)), self._split(self.to_v(context_norm))
        mask = None if key_mask is None else key_mask[:, None, None, :]  # padded prompt tokens are not attended to
        h = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=self.dropout if self.training else 0.0)
        h = h.transpose(1, 2).reshape(x.shape)
        return x + self.proj_out(h)

    def _split(self, x: Tensor) -> Tensor:
        batch, length, width = x.shape
        return x.view(batch, length, self.heads, width // self.heads).transpose(1, 2)


class Perceiver(nn.Module):
    """A fixed number of learned queries read the prompt (cross-attention), then themselves (self-attention, same block)."""

    def __init__(self, queries: int, width: int, heads: int, dropout: float):
        super().__init__()
        bound = (3.0 ** 0.5) * (2.0 / (queries + queries)) ** 0.5  # upstream's uniform init
        self.pre_attention_query = nn.Parameter(torch.empty(1, queries, width).uniform_(-bound, bound))
        self.attn = CrossAttention(width, heads, dropout)

    def forward(self, prompt: Tensor, mask: Tensor | None = None) -> Tensor:
        query = self.pre_attention_query.expand(prompt.shape[0], -1, -1)
        resampled = self.attn(query, prompt, mask)
        return self.attn(resampled, resampled)


class CondEncoder(nn.Module):
    """Speaker embedding, speech prompt and emotion scalar → the conditioning rows (``cond_enc.*``)."""

    def __init__(self, settings: T3Settings):
        super().__init__()
        width = settings.hidden_size
        self.spkr_enc = nn.Linear(settings.speaker_embed_size, width)
        self.emotion_adv_fc = nn.Linear(1, width, bias=False)
        self.perceiver = Perceiver(settings.perceiver_queries, width, settings.perceiver_heads, settings.perceiver_dropout)

    def forward(self, speaker: Tensor, prompt: Tensor, prompt_mask: Tensor | None, emotion: Tensor) -> Tensor:
        rows = [self.spkr_enc(speaker)[:, None], self.perceiver(prompt, prompt_mask),
                self.emotion_adv_fc(emotion.view(-1, 1, 1).to(speaker.dtype))]
        return torch.cat(rows, dim=1)


class T3(nn.Module):
    """The module whose state dict is the release's ``t3_mtl23ls_v*.safetensors``."""

    def __init__(self, settings: T3Settings | None = None):
        super().__init__()
        self.settings = settings = settings or T3Settings()
        width = settings.hidden_size
        self.tfmr = LlamaModel(settings.llama_config())
        self.cond_enc = CondEncoder(settings)
        self.text_emb = nn.Embedding(settings.text_vocab_size, width)
        self.speech_emb = nn.Embedding(settings.speech_vocab_size, width)
        self.text_pos_emb = PositionTable(settings.max_text_tokens + 2, width)
        self.speech_pos_emb = PositionTable(settings.max_speech_tokens + 2 + 2, width)
        self.text_head = nn.Linear(width, settings.text_vocab_size, bias=False)
        self.speech_head = nn.Linear(width, settings.speech_vocab_size, bias=False)
        self._checkpoint_over: int | None = None

    def set_checkpointing(self, on: bool, *, over_positions: int = 0) -> None:
        """Recompute each Llama layer in the backward pass (less memory, same gradients, slower steps): always (``on``),
        or, with ``over_positions``, in the forward passes over more than that many positions (items × the longest packed
        item) only, so a micro-batch's activations are bounded by its positions rather than its items and the short
        micro-batches keep the faster steps.

        transformers 5 renamed ``gradient_checkpointing_enable`` ``activation_checkpointing_enable`` (the old name warns
        of its removal in v6: transformers/modeling_utils.py); older releases have the old name only. Either sets
        ``gradient_checkpointing`` on every module that has the flag, the model and each decoder layer
        (transformers 5.24 modeling_utils.py ``_set_gradient_checkpointing``), read at each call (5.24
        modeling_layers.py ``GradientCheckpointingLayer.__call__``; older 4.x releases: the model's flag in
        ``LlamaModel.forward``): a pass over few positions turns those flags off for itself.
        """
        self._checkpoint_over = None if on or not over_positions else over_positions
        if not on and not over_positions:
            return
        kwargs = {"use_reentrant": False}
        if hasattr(self.tfmr, "activation_checkpointing_enable"):
            self.tfmr.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
        else:
            self.tfmr.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)

    def forward(self, speaker: Tensor, prompt: Tensor, prompt_mask: Tensor | None, emotion: Tensor, text: Tensor,
                text_lens: Tensor, speech: Tensor, speech_lens: Tensor, with_text: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        """Training's forward pass (through ``__call__``, so data-parallel and peft wrappers see it): :meth:`speech_logits`
        conditioned on :meth:`conditioning`; ``with_text`` a pair, the text head's logits second (:meth:`logits`)."""
        cond = self.conditioning(speaker, prompt, prompt_mask, emotion)
        speech_logits, text_logits = self.logits(cond, text, text_lens, speech, speech_lens, with_text=with_text)
        return (speech_logits, text_logits) if with_text else speech_logits

    def conditioning(self, speaker: Tensor, prompt: Tensor, prompt_mask: Tensor | None, emotion: Tensor) -> Tensor:
        """The conditioning rows (B, 2 + queries, width); ``prompt`` (B, P) speech tokens of the conditioning clip."""
        prompt_emb = self.speech_emb(prompt) + self.speech_pos_emb(prompt.shape[1])
        return self.cond_enc(speaker, prompt_emb, prompt_mask, emotion)

    def speech_logits(self, cond: Tensor, text: Tensor, text_lens: Tensor, speech: Tensor, speech_lens: Tensor) -> Tensor:
        """Logits (B, S + 1, speech vocabulary) predicting ``[t_1 … t_S, stop]`` from ``[start, t_1 … t_S]``.

        ``text`` (B, T) holds each item's ids with its start and stop tokens, right-padded; ``speech``
        (B, S) the speech tokens without either, right-padded. Positions past an item's length are padding.
        """
        return self.logits(cond, text, text_lens, speech, speech_lens)[0]

    def logits(self, cond: Tensor, text: Tensor, text_lens: Tensor, speech: Tensor, speech_lens: Tensor, *,
               with_text: bool = False) -> tuple[Tensor, Tensor | None]:
        """:meth:`speech_logits`, and ``with_text`` the text head's logits (B, T - 1, text vocabulary) predicting each
        item's next text id from the text before it (:meth:`text_targets`), as upstream's ``T3.loss`` scores the text
        part too (its ``loss_text``); ``None`` without."""
        s = self.settings
        start = torch.full_like(speech[:, :1], s.start_speech_token)
        speech_in = torch.cat([start, speech], dim=1)
        text_emb = self.text_emb(text) + self.text_pos_emb(text.shape[1])
        speech_emb = self.speech_emb(speech_in) + self.speech_pos_emb(speech_in.shape[1])
        rows, index = [], []
        for b in range(text.shape[0]):
            t, n = int(text_lens[b]), int(speech_lens[b]) + 1
            rows.append(torch.cat([cond[b], text_emb[b, :t], speech_emb[b, :n]]))
            index.append(cond.shape[1] + t + torch.arange(speech_in.shape[1], device=text.device).clamp(max=n - 1))
        lengths = torch.tensor([len(r) for r in rows], device=text.device)
        embeds = nn.utils.rnn.pad_sequence(rows, batch_first=True)
        mask = (torch.arange(embeds.shape[1], device=text.device)[None] < lengths[:, None]).long()
        if self._checkpoint_over is not None:
            recompute = embeds.shape[0] * embeds.shape[1] > self._checkpoint_over
            for module in self.tfmr.modules():
                if hasattr(module, "gradient_checkpointing"):
                    module.gradient_checkpointing = recompute
        hidden = self.tfmr(inputs_embeds=embeds, attention_mask=mask, use_cache=False).last_hidden_state
        picked = torch.gather(hidden, 1, torch.stack(index)[..., None].expand(-1, -1, hidden.shape[-1]))
        text_logits = self.text_head(hidden[:, cond.shape[1]: cond.shape[1] + text.shape[1] - 1]) if with_text else None
        return self.speech_head(picked), text_logits

    @torch.no_grad()
    def generate(self, cond: Tensor, text: Tensor, max_tokens: int) -> Tensor:
        """Speech tokens for one item, greedily (each step's most likely token; deterministic, no random stream used),
        until the stop token or ``max_tokens``: the validation's samples and length ratio (fintts.tts.chatterbox.task).

        ``cond`` (1, rows, width) is :meth:`conditioning`'s; ``text`` (T,) the ids with their start and stop tokens. The
        sequence is training's ``[cond | text | start, t_1 …]`` with the same position tables, read once and then one
        token a step through the Llama's key/value cache. Upstream's ``T3.inference`` samples instead (temperature,
        min-p, classifier-free guidance against an unconditioned copy): this is the plain argmax, what teacher-forced
        ``val/token_accuracy`` scores, free-running. Returns the tokens without the stop token (long, on ``text``'s device).
        """
        s = self.settings
        start = torch.full((1, 1), s.start_speech_token, device=text.device)
        prefix = torch.cat([cond, (self.text_emb(text) + self.text_pos_emb(len(text)))[None],
                            self.speech_emb(start) + self.speech_pos_emb(1)[None]], dim=1)
        # transformers 5.24 renamed LlamaModel.forward's past_key_values ``cache`` (the old name warns of its removal in
        # 5.40: modeling_llama.py, ``@deprecate_kwarg``); the 4.x releases pyproject allows know the old name only.
        name = "cache" if "cache" in inspect.signature(self.tfmr.forward).parameters else "past_key_values"
        cache = {name: DynamicCache()}
        hidden = self.tfmr(inputs_embeds=prefix, use_cache=True, **cache).last_hidden_state
        positions, tokens = self.speech_pos_emb.emb.weight, []
        for n in range(1, max_tokens + 1):
            token = self.speech_head(hidden[:, -1]).argmax(-1)  # (1,)
            if int(token) == s.stop_speech_token:
                break
            tokens.append(token)
            if n < max_tokens:
                embed = (self.speech_emb(token) + positions[n])[:, None]
                hidden = self.tfmr(inputs_embeds=embed, use_cache=True, **cache).last_hidden_state
        return torch.cat(tokens) if tokens else torch.zeros(0, dtype=torch.long, device=text.device)

    def targets(self, speech: Tensor, speech_lens: Tensor) -> Tensor:
        """``[t_1 … t_S, stop]`` per item, :data:`IGNORE` past its end."""
        targets = torch.cat([speech, torch.full_like(speech[:, :1], IGNORE)], dim=1)
        targets[torch.arange(len(speech)), speech_lens] = self.settings.stop_speech_token
        positions = torch.arange(targets.shape[1], device=speech.device)[None]
        return targets.masked_fill(positions > speech_lens[:, None], IGNORE)

    @staticmethod
    def text_targets(text: Tensor, text_lens: Tensor) -> Tensor:
        """Each item's text ids after its start token (``[x_1 … x_T, stop]``), :data:`IGNORE` past its end."""
        positions = torch.arange(1, text.shape[1], device=text.device)[None]
        return text[:, 1:].masked_fill(positions >= text_lens[:, None], IGNORE)


def speech_loss(logits: Tensor, targets: Tensor) -> Tensor:
    """Next-token cross-entropy over the real positions (of the speech tokens, or with the text head's logits and
    :meth:`T3.text_targets` the text ids), in fp32 whatever the autocast (fp16 logits overflow its softmax)."""
    return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), ignore_index=IGNORE)


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
