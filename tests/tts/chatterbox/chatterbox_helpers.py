"""A tiny random Chatterbox run on the shipped demo corpus, and the release's T3 layout as upstream's code makes it."""

from __future__ import annotations

import yaml

TASK = "fintts.tts.chatterbox.task:ChatterboxTask"  # the import path: a checkout's tests run before `pip install -e` registers the name
TINY_MODEL = {
    "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2, "head_dim": 8, "intermediate_size": 32,
    "text_vocab_size": 256, "speech_vocab_size": 6563, "max_text_tokens": 300, "max_speech_tokens": 400,
    "perceiver_queries": 4, "perceiver_heads": 2, "speech_cond_prompt_len": 20,
}
TINY = {
    "task": TASK, "data": "demo", "weights": "random", "speakers": ["espeak_f2", "espeak_m3"], "max_steps": 4,
    "batch_size": 2, "eval_every": 2, "num_workers": 0, "val_items": 2, "model": TINY_MODEL, "lr": 0.001,
}
#: a full phase on both speakers, then an adapter on the best one (no validation: model/ is the adapter phase's)
PHASES = [
    {"name": "fi", "steps": 2},
    {"name": "voice", "settings": {"speaker": "best", "eval_every": 0, "lr": 0.01, "lora": {"r": 4, "alpha": 8, "dropout": 0.0}}},
]


def tiny_config(folder, **settings):
    path = folder / "tiny.yaml"
    path.write_text(yaml.safe_dump({**TINY, **settings}, allow_unicode=True))
    return path


def release_layout() -> dict[str, tuple[int, ...]]:
    """``t3_mtl23ls_v2.safetensors``'s names and shapes, written out from upstream's modules (resemble-ai/chatterbox,
    src/chatterbox/models/t3/): T3Config.multilingual() (text vocabulary 2454, speech 8194, max text 2048, max speech
    4096, speaker embedding 256), LLAMA_520M_CONFIG_DICT (width 1024, 30 layers, MLP 4096, vocabulary 8), the perceiver's
    32 queries and one AttentionBlock2, LearnedPositionEmbeddings of max + 2 (text) and max + 4 (speech) rows."""
    width, mlp = 1024, 4096
    layout = {"tfmr.embed_tokens.weight": (8, width), "tfmr.norm.weight": (width,)}
    for n in range(30):
        prefix = f"tfmr.layers.{n}"
        layout.update({f"{prefix}.self_attn.{p}_proj.weight": (width, width) for p in "qkvo"})
        layout.update({f"{prefix}.mlp.gate_proj.weight": (mlp, width), f"{prefix}.mlp.up_proj.weight": (mlp, width),
                       f"{prefix}.mlp.down_proj.weight": (width, mlp), f"{prefix}.input_layernorm.weight": (width,),
                       f"{prefix}.post_attention_layernorm.weight": (width,)})
    layout.update({
        "cond_enc.spkr_enc.weight": (width, 256), "cond_enc.spkr_enc.bias": (width,), "cond_enc.emotion_adv_fc.weight": (width, 1),
        "cond_enc.perceiver.pre_attention_query": (1, 32, width),
        "cond_enc.perceiver.attn.norm.weight": (width,), "cond_enc.perceiver.attn.norm.bias": (width,),
        **{f"cond_enc.perceiver.attn.{p}.{k}": (width, width) if k == "weight" else (width,)
           for p in ("to_q", "to_k", "to_v", "proj_out") for k in ("weight", "bias")},
        "text_emb.weight": (2454, width), "speech_emb.weight": (8194, width),
        "text_pos_emb.emb.weight": (2048 + 2, width), "speech_pos_emb.emb.weight": (4096 + 4, width),
        "text_head.weight": (2454, width), "speech_head.weight": (8194, width),
    })
    return layout


def short_speaking_t3(tokens: int, seed: int = 0) -> dict:
    """A real-size T3's state dict from random weights (normal, std 0.02; norms one), changed so that upstream's
    ``generate`` ends after about ``tokens`` speech tokens, each one S3Gen has (a random T3 never says stop: generate
    would run its 1000 tokens, seconds each on a CPU, and would pick ids 6561-8193 that S3Gen's token table lacks, as
    a trained one does not).

    The Llama's layers are silenced (``o_proj`` and ``down_proj`` zero: they compute, and add nothing), so the last
    hidden state of a speech position is its token's embedding plus its position's. Two of its columns are then set:
    one constant (30), one a ramp over positions (5 per position, 0 at ``tokens``); the stop token's head row reads
    the ramp (x10: far below the random rows before ``tokens``, far above after) and the rows of the ids S3Gen lacks
    read the constant negatively."""
    import torch

    from fintts.tts.chatterbox.t3 import T3, T3Settings

    settings = T3Settings()
    with torch.device("meta"):  # the names and shapes only: T3's own init costs ~15 s of a CPU (Linear's, then Llama's)
        shapes = {name: value.shape for name, value in T3(settings).state_dict().items()}
    generator = torch.Generator().manual_seed(seed)
    weights = {name: torch.ones(shape) if name.endswith("norm.weight") else torch.zeros(shape) if name.endswith(".bias")
               else torch.empty(shape).normal_(std=0.02, generator=generator) for name, shape in shapes.items()}
    constant, ramp = settings.hidden_size - 2, settings.hidden_size - 1
    with torch.no_grad():
        for n in range(settings.num_hidden_layers):
            weights[f"tfmr.layers.{n}.self_attn.o_proj.weight"].zero_()
            weights[f"tfmr.layers.{n}.mlp.down_proj.weight"].zero_()
        positions = weights["speech_pos_emb.emb.weight"]
        weights["speech_emb.weight"][:, [constant, ramp]] = 0.0
        positions[:, constant] = 30.0
        positions[:, ramp] = 5.0 * (torch.arange(len(positions)) - tokens)
        head = weights["speech_head.weight"]
        head[settings.start_speech_token:] = 0.0
        head[settings.start_speech_token:, constant] = -10.0
        head[settings.stop_speech_token, constant] = 0.0
        head[settings.stop_speech_token, ramp] = 10.0
    return weights
