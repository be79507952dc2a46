"""LoRA voices with peft: a small adapter for one speaker on a shared VITS base, and folding it in.

**Targets.** :data:`fintts.tts.vits.settings.DEFAULT_TARGETS` adapt what carries a voice: the attention projections
of the text encoder, and the convolutions of the flow (its coupling layers and WaveNets)
and of the HiFi-GAN decoder. Targets are regular expressions matched against whole module
names; peft is given the list of names they match, never a pattern: a saved
``adapter_config.json`` may come from the Hub, and peft would use a string
``target_modules`` in it as a regular expression, so :func:`load_adapter` accepts only a list
of names. The decoder's upsampling layers
are ``ConvTranspose1d``, which peft (0.21) cannot adapt, so they stay frozen; a target that
matches one is refused by name.

**Weight norm.** transformers' VITS keeps the flow's and the posterior encoder's WaveNet
convolutions under a ``weight_norm`` parametrization, which peft refuses to wrap. Before
wrapping, the targeted ones are folded: the parametrization is removed and the weight it
computes kept as a plain weight (:func:`fold_weight_norm`), so the model computes the same
function (tested). Whatever leaves training — the base voice in ``model/``, a merged voice —
gets its weight norm back (:func:`standard_model`), because ``VitsModel.from_pretrained``
expects the parametrized layout.

**Layouts.** During an adapter phase the generator's checkpoint holds the folded base and
the adapter (peft's module names), enough to resume on its own. The exported voice is the
base in transformers' layout plus ``adapters/<speaker>/`` in peft's ``save_pretrained``
layout (``adapter_config.json``, ``adapter_model.safetensors``), which
:func:`load_adapter` (fold, then ``PeftModel.from_pretrained``) puts back on the base.

**Merging.** :func:`merged_voice` folds the adapter into the weights and, for a
multi-speaker base, makes the adapted speaker's voice a model of its own
(:func:`speaker_voice`), so plain transformers speaks it with no ``speaker_id``.
"""

from __future__ import annotations

import copy
import json
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from peft.tuners.lora.layer import _ConvNd as LoraConv
from peft.utils import get_peft_model_state_dict
from torch import Tensor, nn
from torch.nn.utils import parametrizations, parametrize
from transformers import VitsModel

from fintts.errors import ConfigError
from fintts.tts.lora_settings import matching_names
from fintts.tts.text import FinnishText
from fintts.tts.vits.base_voice import no_progress_bars
from fintts.tts.vits.export import save_voice
from fintts.tts.vits.inference import fold_weight_norm
from fintts.tts.vits.settings import VitsLora
from fintts.tts.voice_format import ADAPTERS_DIR, SPEAKERS_FILE, VoiceError

_ADAPTABLE = (nn.Linear, nn.Conv1d)


def target_names(vits: nn.Module, targets: list[str]) -> list[str]:
    """Names of the modules ``targets`` match, refusing a match peft cannot adapt and a list that matches nothing."""
    names = matching_names((name for name, _ in vits.named_modules()), targets)
    if not names:
        raise ConfigError(f"lora.targets: {targets} match no module of the model (names look like "
                         "'text_encoder.encoder.layers.0.attention.q_proj' or 'decoder.resblocks.0.convs1.0')")
    modules = dict(vits.named_modules())
    for name in names:
        if not isinstance(modules[name], _ADAPTABLE) or getattr(modules[name], "groups", 1) != 1:
            raise ConfigError(f"lora.targets: {name} is a {type(modules[name]).__name__}"
                             f"{' with groups' if isinstance(modules[name], _ADAPTABLE) else ''}, which peft cannot adapt "
                             "(Linear and ungrouped Conv1d only); narrow the pattern that matches it")
    return names


def add_adapter(vits: VitsModel, settings: VitsLora, name: str) -> PeftModel:
    """Wrap ``vits`` in place with a trainable adapter ``name``; everything else in it is frozen."""
    names = target_names(vits, settings.targets)
    fold_weight_norm(vits, names)
    return _dilated(get_peft_model(vits, LoraConfig(r=settings.r, lora_alpha=settings.alpha, lora_dropout=settings.dropout,
                                                target_modules=names), adapter_name=name))


def _dilated(adapter: PeftModel) -> PeftModel:
    """Give each adapted convolution's LoRA ``A`` the dilation of the layer it adapts.

    peft (0.21) builds ``A`` with the layer's kernel, stride and padding but not its
    dilation, so on HiFi-GAN's dilated residual convolutions its output would not even have
    the layer's length. With the dilation, ``B(A(x))`` is exactly the convolution by the
    merged weight ``B·A`` that peft's merge adds to the layer (tested).
    """
    for module in adapter.modules():
        if isinstance(module, LoraConv):
            for conv in module.lora_A.values():
                conv.dilation = module.get_base_layer().dilation
    return adapter


def adapter_files(adapter: PeftModel, name: str) -> dict[str, bytes]:
    """The adapter as ``save_pretrained`` writes it: ``<name>/adapter_config.json``, ``<name>/adapter_model.safetensors``..."""
    with tempfile.TemporaryDirectory() as folder:
        adapter.save_pretrained(folder, selected_adapters=[name])
        return {path.relative_to(folder).as_posix(): path.read_bytes() for path in sorted(Path(folder).rglob("*")) if path.is_file()}


def adapter_size(adapter: PeftModel, name: str) -> dict[str, float]:
    """Trainable and total parameters of the adapted generator, and the adapter's size in MB (as saved)."""
    weights = get_peft_model_state_dict(adapter, adapter_name=name)
    return {
        "trainable_parameters": sum(p.numel() for p in adapter.parameters() if p.requires_grad),
        "generator_parameters": sum(p.numel() for p in adapter.parameters()),
        "adapter_mb": round(sum(t.numel() * t.element_size() for t in weights.values()) / 1e6, 3),
    }


def base_weights(adapted: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """The weights under the adapters (an adapted model's state dict), with the names they have without peft.

    Folded weights stay folded (:func:`standard_model` restores their weight norm).
    """
    return {key.replace(".base_layer.", "."): value for key, value in adapted.items() if ".lora_" not in key}


def is_adapted(weights: Mapping[str, Tensor]) -> bool:
    """Whether a generator's weights are an adapter phase's (peft's names)."""
    return any(".lora_" in key or ".base_layer." in key for key in weights)


def standard_model(config, weights: Mapping[str, Tensor]) -> VitsModel:
    """A ``VitsModel`` in transformers' layout from weights whose weight-norm convolutions may be folded.

    A folded weight ``W`` becomes the parametrization ``g = |W|``, ``v = W``, which computes
    ``W`` again up to float rounding. The new model's random initialisation draws from a
    forked generator: exporting during training leaves the run's random stream alone.
    """
    with torch.random.fork_rng(devices=[]):
        model = VitsModel(copy.deepcopy(config))
    modules = dict(model.named_modules())
    folded = [name for name, module in modules.items()
              if parametrize.is_parametrized(module, "weight") and f"{name}.weight" in weights]
    fold_weight_norm(model, folded)
    model.load_state_dict(dict(weights), strict=True)
    for name in folded:
        parametrizations.weight_norm(modules[name])
    return model.eval()


def load_adapter(base: VitsModel, folder: Path, name: str | None = None) -> PeftModel:
    """``base`` with the adapter saved in ``folder`` on it (not merged): fold its targets' weight norm, then peft loads it."""
    path = folder / "adapter_config.json"
    names = json.loads(path.read_text(encoding="utf-8")).get("target_modules")
    if not (isinstance(names, list) and names and all(isinstance(name, str) for name in names)):
        raise VoiceError(f"{path}: target_modules must be a list of module names, not {type(names).__name__} {names!r:.80}; "
                         "a string would be used as a regular expression, so fintts does not load it (an adapter exported "
                         "by an older fintts: export the voice again from its run)")
    fold_weight_norm(base, target_names(base, [re.escape(name) for name in names]))
    return _dilated(PeftModel.from_pretrained(base, str(folder), adapter_name=name or folder.name))


def merged_voice(base: VitsModel, folder: Path, speakers: list[str]) -> tuple[VitsModel, list[str]]:
    """The voice of the adapter in ``folder`` (named after its speaker) as a plain model, in transformers' layout."""
    speaker = folder.name
    merged = load_adapter(base, folder).merge_and_unload()
    if merged.config.num_speakers <= 1:
        return standard_model(merged.config, merged.state_dict()), speakers
    if speaker not in speakers:
        raise VoiceError(f"the adapter {folder} is named for speaker {speaker!r}, which the base voice does not have "
                         f"({', '.join(speakers)})")
    return speaker_voice(merged, speakers.index(speaker), speakers)


def speaker_voice(vits: VitsModel, index: int, speakers: list[str]) -> tuple[VitsModel, list[str]]:
    """One speaker of a multi-speaker model as a model of its own, and its speaker list.

    VITS conditions on the speaker by adding a projection of its embedding — a constant per
    channel — to the output of a convolution: the decoder's first one, the stochastic
    duration predictor's first one, and each WaveNet layer's input convolution. Added to
    those convolutions' biases instead, it needs no speaker at all: the result is a
    single-speaker model (plain transformers speaks it without ``speaker_id``). The
    deterministic duration predictor adds it *before* a convolution, where no bias can
    take it; such a model keeps its speakers, with this one moved first (the default).
    """
    if not vits.config.use_stochastic_duration_prediction:
        order = [index] + [i for i in range(len(speakers)) if i != index]
        weights = dict(vits.state_dict())
        weights["embed_speaker.weight"] = weights["embed_speaker.weight"][order]
        return standard_model(vits.config, weights), [speakers[i] for i in order]
    with torch.no_grad():
        condition = vits.embed_speaker(torch.tensor([index])).unsqueeze(-1)
        weights = dict(vits.state_dict())
        shifts = {"decoder.conv_pre": vits.decoder.cond(condition), "duration_predictor.conv_pre": vits.duration_predictor.cond(condition)}
        wavenets = {"posterior_encoder.wavenet": vits.posterior_encoder.wavenet}
        wavenets.update({f"flow.flows.{i}.wavenet": flow.wavenet for i, flow in enumerate(vits.flow.flows)})
        for prefix, wavenet in wavenets.items():
            per_layer = wavenet.cond_layer(condition).split(2 * wavenet.hidden_size, dim=1)
            shifts.update({f"{prefix}.in_layers.{i}": shift for i, shift in enumerate(per_layer)})
        for prefix, shift in shifts.items():
            weights[f"{prefix}.bias"] = weights[f"{prefix}.bias"] + shift[0, :, 0]
    config = copy.deepcopy(vits.config)
    config.num_speakers, config.speaker_embedding_size = 1, 0
    conditioning = re.compile(r"^embed_speaker\.|\.cond\.|\.cond_layer\.")
    return standard_model(config, {k: v for k, v in weights.items() if not conditioning.search(k)}), [speakers[index]]


def merge_folder(voice: Path, out: Path, speaker: str | None = None, *, onnx: bool = True) -> tuple[str, list[str]]:
    """``fintts merge``: the voice of ``voice``'s adapter for ``speaker`` as a standalone voice folder in ``out``.

    ``speaker`` may be left out when the voice has one adapter. Returns the adapter's
    speaker and the merged voice's speakers.
    """
    adapters = sorted(p.parent.name for p in (voice / ADAPTERS_DIR).glob("*/adapter_config.json"))
    if speaker is None and len(adapters) != 1:
        raise VoiceError(f"{voice} has {len(adapters)} adapters ({', '.join(adapters) or 'none'} in {voice / ADAPTERS_DIR}); "
                         + ("name one with --speaker" if adapters else "train a phase with lora: {r: 8} first"))
    speaker = speaker or adapters[0]
    if speaker not in adapters:
        raise VoiceError(f"{voice} has no adapter for {speaker!r} (it has: {', '.join(adapters) or 'none'})")
    speakers_file = voice / SPEAKERS_FILE
    speakers = json.loads(speakers_file.read_text(encoding="utf-8")) if speakers_file.is_file() else []
    with no_progress_bars():
        base = VitsModel.from_pretrained(voice, use_safetensors=True).eval()
    merged, speakers = merged_voice(base, voice / ADAPTERS_DIR / speaker, speakers)
    save_voice(merged, out, FinnishText.from_folder(voice), speakers, onnx=onnx)
    return speaker, speakers
