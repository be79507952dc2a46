"""Where a VITS generator starts: a pretrained MMS voice, a local folder, or random weights.

Fine-tuning ``facebook/mms-tts-fin`` is the normal case; ``scratch`` exists for tests and
for people with many hours of data. A single-speaker checkpoint can become a
multi-speaker model: the speaker conditioning VITS adds is initialised so that the
extended model starts out producing exactly what the checkpoint produced.
"""

from __future__ import annotations

import copy
import difflib
import inspect
import logging
import math
from pathlib import Path
from typing import Any

import torch
from huggingface_hub import HfApi
from huggingface_hub.errors import RevisionResolutionError
from torch import nn
from torch.nn.utils import parametrize
from transformers import VitsConfig, VitsModel, VitsTokenizer
from transformers.models.vits.modeling_vits import VitsAttention, VitsConvFlow, VitsResidualCouplingLayer

from fintts.errors import ConfigError
from fintts.tts.hub_inputs import FetchFirst, pinned
from fintts.tts.vits.base_voice import no_progress_bars, unavailable, why_not_downloadable

log = logging.getLogger(__name__)

#: Settings applied under the caller's ``config_overrides`` for training. transformers'
#: text encoder adds LayerDrop (default 0.1), which the original VITS never used; the
#: MMS voices were trained without it, so fine-tuning with it would randomly drop layers
#: the weights rely on. It only acts in training mode.
TRAINING_CONFIG_DEFAULTS: dict[str, Any] = {"layerdrop": 0.0}


#: Speaker embedding width VITS uses for its multi-speaker (VCTK) model (``gin_channels``).
DEFAULT_SPEAKER_EMBEDDING_SIZE = 256


def build_generator(
    init: str | Path,
    *,
    config_overrides: dict[str, Any] | None = None,
    num_speakers: int = 1,
    speaker_embedding_size: int = DEFAULT_SPEAKER_EMBEDDING_SIZE,
    cache_dir: str | Path | None = None,
    local_files_only: bool = False,
    fetch_first: FetchFirst | None = None,
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
        fetch_first: which process of a session reads a Hub id from the Hub (the others read its
            commit from the cache: :mod:`fintts.tts.hub_inputs`); ``None``: this one.

    Returns:
        ``(model, tokenizer)``; the tokenizer is ``None`` for ``scratch`` and for a folder
        without ``vocab.json``.
    """
    overrides = {**TRAINING_CONFIG_DEFAULTS, **(config_overrides or {})}
    check_model_fields(overrides)
    if str(init) == "scratch":
        if num_speakers > 1:
            overrides["num_speakers"] = num_speakers
            if not overrides.get("speaker_embedding_size"):
                overrides["speaker_embedding_size"] = speaker_embedding_size
        return vits_initialisation(VitsModel(VitsConfig(**overrides))), None

    folder = Path(init).expanduser()
    if folder.is_dir():
        try:
            model, tokenizer = _load(str(folder), overrides, cache_dir, local_files_only=True,
                                     tokenizer=(folder / "vocab.json").is_file())
        except OSError as err:
            raise ConfigError(f"init: {folder} is not a voice folder of save_pretrained's layout "
                              f"({str(err).strip().splitlines()[0]})") from None
    else:
        _, (model, tokenizer) = pinned(
            f"model {init}", lambda: _fetch(str(init), overrides, cache_dir, local_files_only=local_files_only),
            lambda commit: _load(str(init), overrides, cache_dir, local_files_only=True, tokenizer=True, revision=commit),
            fetch_first,
        )

    if num_speakers != model.config.num_speakers:
        if model.config.num_speakers != 1:
            raise ConfigError(
                f"init: {str(init)!r} has {model.config.num_speakers} speakers but {num_speakers} were asked for; "
                "only a single-speaker checkpoint can be given new speakers"
            )
        model = add_speakers(model, num_speakers, speaker_embedding_size)
    return model, tokenizer


def _fetch(init: str, overrides: dict[str, Any], cache_dir: str | Path | None, *,
           local_files_only: bool) -> tuple[str, tuple[VitsModel, VitsTokenizer | None]]:
    """The voice a Hub id names, read from the cache or else downloaded, and the commit it was read at.

    The commit is resolved first and every file read at it (``HfApi.resolve_revision``: "every
    subsequent call targets the exact same commit", huggingface_hub 2.4 hf_api.py), so a session's
    other processes read the same one from the cache (:mod:`fintts.tts.hub_inputs`). From the cache,
    the branch is the commit the cache's ``refs/`` records, no request made, as ``from_pretrained``
    with ``local_files_only`` reads it (transformers 5.24, utils/hub.py ``resolve_revision``).
    """
    api = HfApi()
    try:  # the cache first: a voice downloaded once never waits on the network again
        commit = api.resolve_revision(init, cache_dir=cache_dir, local_files_only=True).resolved
        return commit, _load(init, overrides, cache_dir, local_files_only=True, tokenizer=True, revision=commit)
    except (OSError, RevisionResolutionError):  # nothing cached (RevisionResolutionError), or not all of it
        why = "the session reads only local files" if local_files_only else why_not_downloadable(init)
        if why:
            raise unavailable(init, why) from None
    log.info(f"init: downloading {init} once (the Hugging Face cache keeps it for the next runs)")
    try:
        commit = api.resolve_revision(init, cache_dir=cache_dir).resolved
        return commit, _load(init, overrides, cache_dir, local_files_only=False, tokenizer=True, revision=commit)
    except (OSError, RevisionResolutionError) as err:  # the Hub's HTTP errors are OSErrors (HfHubHTTPError)
        raise unavailable(init, f"{type(err).__name__}: {str(err).strip().splitlines()[0]}") from None


def _load(source: str, overrides: dict[str, Any], cache_dir: str | Path | None, *, local_files_only: bool,
          tokenizer: bool, revision: str | None = None) -> tuple[VitsModel, VitsTokenizer | None]:
    """The model (and its tokenizer) from a folder or a Hub id (at ``revision``), without transformers' progress bars."""
    with no_progress_bars():
        config = VitsConfig.from_pretrained(source, cache_dir=cache_dir, local_files_only=local_files_only, revision=revision)
        _apply_overrides(config, overrides)
        model = VitsModel.from_pretrained(
            source, config=config, cache_dir=cache_dir, local_files_only=local_files_only, dtype=torch.float32, revision=revision
        )
        return model, VitsTokenizer.from_pretrained(source, cache_dir=cache_dir, local_files_only=local_files_only,
                                                    revision=revision) if tokenizer else None


def vits_initialisation(model: VitsModel) -> VitsModel:
    """Re-initialise a fresh ``VitsModel`` the way the original VITS code does; returns it.

    transformers initialises every convolution with Kaiming-normal weights, which suits
    loading a checkpoint (it is overwritten) but not training from random weights: the
    HiFi-GAN decoder then starts out emitting loud broadband noise (output std ≈ 0.5)
    and the flows start far from the identity, and in our CPU demo the discriminator
    won within 300 steps while the voice stayed a buzz. The original
    (jaywalnut310/vits) uses PyTorch's default layer initialisation everywhere except:
    the HiFi-GAN upsampling and residual convolutions drawn from N(0, 0.01)
    (``commons.init_weights``), the last layer of every flow coupling zeroed so each
    flow starts as the identity (``ResidualCouplingLayer.post``, ``ConvFlow.proj``),
    token embeddings from N(0, hidden^-½) and Xavier-uniform attention projections.
    """
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (nn.Conv1d, nn.ConvTranspose1d, nn.Linear)):
                _default_init(module)
        for convs in (model.decoder.upsampler, model.decoder.resblocks):
            for module in convs.modules():
                if isinstance(module, (nn.Conv1d, nn.ConvTranspose1d)):
                    _set_weight(module, torch.randn_like(module.weight) * 0.01)
        for module in model.modules():
            if isinstance(module, VitsResidualCouplingLayer):
                _set_weight(module.conv_post, torch.zeros_like(module.conv_post.weight))
                module.conv_post.bias.zero_()
            elif isinstance(module, VitsConvFlow):
                _set_weight(module.conv_proj, torch.zeros_like(module.conv_proj.weight))
                module.conv_proj.bias.zero_()
            elif isinstance(module, VitsAttention):
                for projection in (module.q_proj, module.k_proj, module.v_proj):
                    _set_weight(projection, nn.init.xavier_uniform_(torch.empty_like(projection.weight)))
        embeddings = model.text_encoder.embed_tokens.weight
        embeddings.normal_(0.0, model.config.hidden_size**-0.5)
        if model.config.num_speakers > 1:
            model.embed_speaker.weight.normal_(0.0, 1.0)
    return model


def _default_init(module: nn.Module) -> None:
    """PyTorch's own initialisation of a conv/linear layer, weight-normed or not."""
    weight = torch.empty_like(module.weight)
    nn.init.kaiming_uniform_(weight, a=math.sqrt(5))
    _set_weight(module, weight)
    if module.bias is not None:
        fan_in = weight.shape[1] * math.prod(weight.shape[2:])  # as torch computes it, transposed convs too
        bound = 1 / math.sqrt(fan_in) if fan_in else 0.0
        module.bias.uniform_(-bound, bound)


def _set_weight(module: nn.Module, weight: torch.Tensor) -> None:
    """Assign a weight; through the weight-norm parametrization's inverse when there is one."""
    if parametrize.is_parametrized(module, "weight"):
        module.weight = weight
    else:
        module.weight.copy_(weight)


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


def check_model_fields(overrides: dict[str, Any]) -> None:
    """Refuse a ``model:`` key that is no VitsConfig field, naming the nearest one, before any model is read.

    transformers keeps whatever other keyword a config is given as an attribute (5.24, configuration_utils.py
    ``PreTrainedConfig.__post_init__``: "Additional attributes without default values", ``setattr`` for each), so
    ``VitsConfig(hiden_size=64)`` trains with the default width and writes ``hiden_size`` into ``config.json``. The
    fields are the constructor's parameters and the keys of a default config's ``to_dict()`` (what ``config.json``
    holds), whichever transformers is installed.
    """
    parameters = inspect.signature(VitsConfig.__init__).parameters.values()
    fields = {p.name for p in parameters if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)} - {"self"}
    fields |= set(VitsConfig().to_dict())
    for key in sorted(set(overrides) - fields):
        near = difflib.get_close_matches(key, sorted(fields), n=1)
        raise ConfigError(f"model.{key}: not a field of transformers' VitsConfig"
                          + (f"; did you mean model.{near[0]}?" if near else "; see VitsConfig's documentation for its fields"))


def _apply_overrides(config: VitsConfig, overrides: dict[str, Any]) -> None:
    for key, value in overrides.items():
        setattr(config, key, value)
