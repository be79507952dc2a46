"""Where a VITS generator starts: a pretrained MMS voice, a local folder, or random weights.

Fine-tuning ``facebook/mms-tts-fin`` is the normal case; ``scratch`` exists for tests and
for people with many hours of data. A single-speaker checkpoint can become a
multi-speaker model: the speaker conditioning VITS adds is initialised so that the
extended model starts out producing exactly what the checkpoint produced.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import torch
from torch import nn
from transformers import VitsConfig, VitsModel, VitsTokenizer

#: Settings applied under the caller's ``config_overrides`` for training. transformers'
#: text encoder adds LayerDrop (default 0.1), which the original VITS never used; the
#: MMS voices were trained without it, so fine-tuning with it would randomly drop layers
#: the weights rely on. It only acts in training mode.
TRAINING_CONFIG_DEFAULTS: dict[str, Any] = {"layerdrop": 0.0}

#: Speaker embedding width VITS uses for its multi-speaker (VCTK) model (``gin_channels``).
DEFAULT_SPEAKER_EMBEDDING_SIZE = 256


def tiny_vits_config(**overrides: Any) -> VitsConfig:
    """A VitsConfig small enough for unit tests and demos (a few thousand parameters per part).

    16 kHz audio, hop 16 (upsample rates 4×4), 33 linear-spectrogram bins (n_fft 64).
    """
    settings: dict[str, Any] = dict(
        vocab_size=38,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        ffn_dim=32,
        flow_size=8,
        spectrogram_bins=33,
        upsample_initial_channel=32,
        upsample_rates=(4, 4),
        upsample_kernel_sizes=(8, 8),
        resblock_kernel_sizes=(3,),
        resblock_dilation_sizes=((1, 3),),
        prior_encoder_num_flows=2,
        prior_encoder_num_wavenet_layers=1,
        posterior_encoder_num_wavenet_layers=2,
        duration_predictor_num_flows=2,
        duration_predictor_filter_channels=16,
        depth_separable_num_layers=2,
        sampling_rate=16_000,
        layerdrop=0.0,
    )
    settings.update(overrides)
    return VitsConfig(**settings)


def build_generator(
    init: str | Path,
    *,
    config_overrides: dict[str, Any] | None = None,
    num_speakers: int = 1,
    speaker_embedding_size: int = DEFAULT_SPEAKER_EMBEDDING_SIZE,
    cache_dir: str | Path | None = None,
    local_files_only: bool = False,
) -> tuple[VitsModel, VitsTokenizer | None]:
    """The generator (and its tokenizer, when there is one) to train from.

    Args:
        init: ``"scratch"`` for random weights from ``VitsConfig(**config_overrides)``; a
            folder written by ``save_pretrained``; otherwise a Hugging Face Hub id such as
            ``"facebook/mms-tts-fin"`` (read from ``cache_dir`` when already downloaded).
        config_overrides: config fields to set. With a checkpoint only fields that do
            not change tensor shapes make sense (dropouts, noise scales...).
        num_speakers: speakers to train. A single-speaker checkpoint is extended with
            ``speaker_embedding_size``-wide speaker conditioning (see :func:`add_speakers`).
        local_files_only: never touch the network (a Kaggle session without internet).

    Returns:
        ``(model, tokenizer)``; the tokenizer is ``None`` for ``scratch`` and for a folder
        without ``vocab.json``.
    """
    overrides = {**TRAINING_CONFIG_DEFAULTS, **(config_overrides or {})}
    if str(init) == "scratch":
        if num_speakers > 1:
            overrides["num_speakers"] = num_speakers
            if not overrides.get("speaker_embedding_size"):
                overrides["speaker_embedding_size"] = speaker_embedding_size
        return VitsModel(VitsConfig(**overrides)), None

    folder = Path(init).expanduser()
    source = str(folder) if folder.is_dir() else str(init)
    try:
        config = VitsConfig.from_pretrained(source, cache_dir=cache_dir, local_files_only=local_files_only)
        _apply_overrides(config, overrides)
        model = VitsModel.from_pretrained(
            source, config=config, cache_dir=cache_dir, local_files_only=local_files_only, dtype=torch.float32
        )
        tokenizer = None
        if not folder.is_dir() or (folder / "vocab.json").is_file():
            tokenizer = VitsTokenizer.from_pretrained(source, cache_dir=cache_dir, local_files_only=local_files_only)
    except OSError as err:
        raise OSError(
            f"init: cannot load {str(init)!r}: it is not a local folder and it could not be read from the "
            f"Hugging Face Hub or its cache{f' ({cache_dir})' if cache_dir else ''}. Without network access, "
            "download the model once (e.g. `huggingface-cli download facebook/mms-tts-fin --local-dir PATH`, or "
            "attach it as a Kaggle dataset) and set `init: PATH`."
        ) from err

    if num_speakers != model.config.num_speakers:
        if model.config.num_speakers != 1:
            raise ValueError(
                f"init: {str(init)!r} has {model.config.num_speakers} speakers but {num_speakers} were asked for; "
                "only a single-speaker checkpoint can be given new speakers"
            )
        model = add_speakers(model, num_speakers, speaker_embedding_size)
    return model, tokenizer


def add_speakers(model: VitsModel, num_speakers: int, speaker_embedding_size: int) -> VitsModel:
    """A copy of single-speaker ``model`` with ``num_speakers`` speaker embeddings.

    ``VitsModel`` conditions on the speaker in five places once
    ``speaker_embedding_size > 0``: the posterior encoder's and every flow's WaveNet
    (``wavenet.cond_layer``, weight-normed), the HiFi-GAN decoder (``decoder.cond``) and
    the duration predictor (``duration_predictor.cond``). Each adds its output to
    activations that already exist, so zeroing those new layers (for a weight-normed
    layer: its magnitude ``g`` and its bias; its direction stays random so that ``g``
    receives gradients) makes the extended model compute exactly what the checkpoint
    computed, for every speaker. The embeddings themselves are drawn from N(0, 1) like
    the original VITS ``nn.Embedding``, so the conditioning layers' gradients are not
    starved at the start.
    """
    if model.config.num_speakers != 1:
        raise ValueError(f"add_speakers needs a single-speaker model, got {model.config.num_speakers} speakers")
    config = copy.deepcopy(model.config)
    config.num_speakers = num_speakers
    config.speaker_embedding_size = speaker_embedding_size
    extended = VitsModel(config).to(dtype=next(model.parameters()).dtype)
    result = extended.load_state_dict(model.state_dict(), strict=False)
    if result.unexpected_keys:
        raise ValueError(f"add_speakers: unexpected keys {result.unexpected_keys}")

    conditioning_layers: list[nn.Module] = [extended.decoder.cond, extended.duration_predictor.cond]
    conditioning_layers.append(extended.posterior_encoder.wavenet.cond_layer)
    conditioning_layers.extend(flow.wavenet.cond_layer for flow in extended.flow.flows)
    with torch.no_grad():
        for layer in conditioning_layers:
            parametrizations = getattr(layer, "parametrizations", None)
            if parametrizations is not None:
                parametrizations.weight.original0.zero_()
            else:
                layer.weight.zero_()
            layer.bias.zero_()
        nn.init.normal_(extended.embed_speaker.weight, 0.0, 1.0)
    return extended


def _apply_overrides(config: VitsConfig, overrides: dict[str, Any]) -> None:
    unknown = sorted(key for key in overrides if not hasattr(config, key))
    if unknown:
        raise ValueError(f"config_overrides: unknown VitsConfig fields {unknown}")
    for key, value in overrides.items():
        setattr(config, key, value)
