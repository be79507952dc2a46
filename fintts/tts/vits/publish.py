"""``fintts publish``: a run's voice, on its own, at the root of a Hub repo where people use voices.

A run keeps its voice in ``model/`` among checkpoints, optimizer state and a lease; the Hub's
widget and ``pipeline("text-to-speech", model="me/my-voice")`` want a repo whose root *is* the
voice. :func:`publish` writes one: the transformers files (``config.json``,
``model.safetensors``, tokenizer files, ``speakers.json``), the ONNX graphs, whatever other voice
files ``model/`` holds (a Piper voice, ``*.onnx`` + ``*.onnx.json``), and a card made by
:mod:`fintts.train.report.card` from the run's ``status.json`` (:func:`fintts.tts.vits.card.run_card`).

Decisions, for where a person might expect otherwise:

* **Which voice.** By default the run's ``model/`` (its best voice). ``checkpoint`` (``step-N``,
  ``latest``, ``best``) makes the voice from that checkpoint's generator weights instead, with the
  architecture, tokenizer and speakers of the run's ``model/`` (a checkpoint holds weights only)
  and the task's own export (:func:`~fintts.tts.vits.export.save_voice`, then the ONNX graphs); a
  Piper voice in ``model/`` is of other weights then and is left out. A voice with a LoRA adapter
  is published merged (``fintts merge``), since the repo must be a plain transformers voice.
* **The source.** A local run folder, or a Hub run as ``hf://USER/RUN``: only ``model/``,
  ``status.json`` and the named checkpoint's ``model.safetensors`` (checked against its
  manifest) are downloaded, never optimizer state.
* **One commit, idempotent.** Every file goes up in one commit that also deletes whatever else
  the repo holds (``.gitattributes`` aside): a re-publish leaves exactly the new voice. When
  nothing differs, no commit is made. A repo that holds a fintts run (``status.json``,
  ``latest``, ``checkpoints/``) is refused: publishing there would delete the run.
* **Visibility.** A voice reproduces a person: it goes public only when ``private=False``
  (``--public``) asks for it. A new repo is then created public, and otherwise private; an existing
  repo keeps its visibility (``create_repo`` does not change it), so an existing *public* repo is
  refused unless ``--public`` was given, as a training run refuses one unless ``hub_public``
  (:mod:`fintts.train.stores.hub.visibility`; issue 52, item 5: it used to take one and print
  "PUBLIC"). What is about to go where, and to whom it will be visible, is said before the upload.
* **Only the voice's files.** Hidden files and folders anywhere under ``model/`` (a ``.cache/``,
  an editor's ``.swp``) are never uploaded, nor pickled files.
* **A voice of several speakers speaks one by default.** transformers' ``VitsModel`` uses no
  speaker embedding at all when ``speaker_id`` is not given (``modeling_vits.py``: ``if
  num_speakers > 1 and speaker_id is not None``), and nothing in its config sets a default, so
  ``pipeline("text-to-speech", model=repo)`` would speak as no speaker of the corpus. The repo's
  root is therefore the voice of one speaker (``speaker``, default the first, as fintts speaks):
  that speaker's embedding is folded into the biases it conditions (the stochastic duration
  predictor's first convolution, each flow layer's WaveNet inputs, the decoder's first convolution;
  exact to float rounding) and ``num_speakers`` is 1. The full voice, every speaker, is in
  ``all-speakers/``, and the card says how to pick another.
* **Which voice it is called.** "the best voice" only when the run validated it; a ``model/`` that
  no validation ever chose is published as "the voice in model/ (never validated)".
* **The token** is a write token, from ``HF_TOKEN`` (or the cached ``hf auth login``); it is never
  printed or written anywhere (errors are scrubbed as the store's are).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch
from huggingface_hub import CommitOperationAdd, CommitOperationDelete
from safetensors.torch import load_file
from transformers import VitsConfig, VitsModel

from fintts.errors import StoreError, UsageError
from fintts.train.repo_id import repo_id_problem
from fintts.train.report.card import render_model
from fintts.train.run import checkpoint as ckpt
from fintts.train.run.layout import CARD, MODEL_DIR, SAMPLES_DIR, STATUS
from fintts.train.stores.hub.client import HubClient, checkpoint_names, json_object
from fintts.train.stores.hub.errors import HubAuthError
from fintts.train.stores.hub.visibility import refuse_public
from fintts.tts.families import HUB_RUN
from fintts.tts.hub_voice import PICKLED
from fintts.tts.text import FinnishText
from fintts.tts.vits.card import run_card
from fintts.tts.vits.export import export_folder, save_voice
from fintts.tts.vits.lora import is_adapted, merge_folder
from fintts.tts.vits.settings import GENERATOR
from fintts.tts.voice_format import ADAPTERS_DIR, ONNX_FILE, SPEAKERS_FILE, VoiceError

log = logging.getLogger(__name__)

#: What marks a repo as a fintts run (never a publish target: the publish would delete it).
RUN_MARKERS = (STATUS, ckpt.LATEST, ckpt.CHECKPOINTS + "/")
#: The folder of a published voice of several speakers that holds all of them (the root speaks one).
ALL_SPEAKERS = "all-speakers"
#: How many validation samples a published card carries.
SAMPLES = 4
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")
#: How long the upload of the voice's large files may take before the publish gives up (an MMS voice is ~145 MB).
UPLOAD_SECONDS = 3600.0


@dataclasses.dataclass
class Published:
    """What :func:`publish` did: the repo, its files (path → bytes), what it removed, and the commit (``None``: nothing changed)."""

    repo: str
    url: str
    files: dict[str, int]
    removed: list[str]
    commit: str | None
    private: bool
    voice: str

    @property
    def size(self) -> int:
        return sum(self.files.values())

    def format(self) -> str:
        what = f"commit {self.commit}" if self.commit else "nothing changed: no commit"
        removed = f", removed {len(self.removed)} stale file(s)" if self.removed else ""
        return (f"published {self.voice} to {self.url} ({'private' if self.private else 'public'}): {len(self.files)} files, "
                f"{self.size / 1e6:.1f} MB{removed}; {what}")


def publish(store: str | Path, hub_repo: str, *, private: bool | None = None, checkpoint: str | None = None,
            endpoint: str | None = None, token: str | None = None, onnx: bool = True, speaker: str | int | None = None,
            say: Callable[[str], None] = log.info) -> Published:
    """Publish the voice of the run ``store`` (a folder or ``hf://USER/RUN``) to the Hub repo ``hub_repo``; see the module.

    ``private``: ``None`` or ``True`` (a new repo is private, an existing public one is refused) or ``False`` (public
    asked for: a new repo is public, an existing one is used as it is).
    """
    problem = repo_id_problem(hub_repo)
    if problem:
        raise UsageError(f"--hub-repo: {problem}")
    try:
        client = HubClient.connect(hub_repo, endpoint=endpoint, token=token)
    except HubAuthError as err:
        raise HubAuthError(f"fintts publish writes to the Hub and needs a write token. {err}") from None
    _check_can_write(client)
    with tempfile.TemporaryDirectory(prefix="fintts-publish-") as tmp:
        run, status, source, name = _run_folder(store, checkpoint, Path(tmp) / "run", endpoint=endpoint, token=token)
        stage = Path(tmp) / "voice"
        step, voice = _stage_voice(run, name, stage, onnx=onnx, say=say, validated=_validated(status))
        speakers = _one_speaker_at_root(stage, speaker, hub_repo, onnx=onnx, say=say)
        samples = _samples(run, name or _best_checkpoint(status), stage)
        _write_card(stage, status, hub_repo, step, [(caption, f"{client.endpoint}/{hub_repo}/resolve/main/{rel}")
                                                     for caption, rel in samples], speakers)
        files = {rel: (stage / rel).stat().st_size for rel in _relative_files(stage)}
        what = f"{voice} of {source}"
        commit, removed, private = _upload(client, stage, files, private=private, message=f"Publish {what}", say=say, what=what)
    return Published(hub_repo, f"{client.endpoint}/{hub_repo}", files, removed, commit, private, what)


def _validated(status: Mapping[str, Any]) -> bool:
    """Did a validation of the run choose its ``model/`` (a best value, or any validation's figures)?"""
    best = status.get("best") or {}
    return (isinstance(best, Mapping) and best.get("value") is not None) or bool(status.get("evals"))


def _hidden(rel: str) -> bool:
    """A path with a hidden file or folder anywhere in it (``.cache/x``, ``sub/.swp``): never published."""
    return any(part.startswith(".") for part in rel.split("/"))


# -- the source --------------------------------------------------------------------------------


def _run_folder(store: str | Path, checkpoint: str | None, into: Path, *, endpoint: str | None,
                token: str | None) -> tuple[Path, dict[str, Any], str, str | None]:
    """A folder with the run's ``model/`` and (with ``checkpoint``) that checkpoint's weights; the run's status, how a person
    names the run, and the checkpoint's name."""
    where = str(store)
    if where.startswith(HUB_RUN):
        return _hub_run(where[len(HUB_RUN):].strip("/"), checkpoint, into, endpoint=endpoint, token=token)
    root = Path(where).expanduser()
    if not (root / MODEL_DIR / "config.json").is_file():
        hint = "" if root.is_dir() else f" ({root} does not exist; a Hub run is --store hf://USER/RUN)"
        raise VoiceError(f"--store {store}: no {MODEL_DIR}/config.json, so no exported voice to publish{hint}; "
                         "give the run's folder, whose model/ the trainer wrote")
    status = (json_object((root / STATUS).read_bytes()) if (root / STATUS).is_file() else None) or {}
    name = None
    if checkpoint:
        name = _checkpoint_name(checkpoint, ckpt.read_latest(root), status, where)
        folder = root / ckpt.CHECKPOINTS / name
        if not folder.is_dir():
            present = ", ".join(ckpt.list_names(root)) or "none"
            raise StoreError(f"--store {store} has no checkpoint {name}; it has {present}")
        ckpt.verify(folder)
    return root, status, where, name


def _hub_run(repo: str, checkpoint: str | None, into: Path, *, endpoint: str | None,
             token: str | None) -> tuple[Path, dict[str, Any], str, str | None]:
    problem = repo_id_problem(repo)
    if problem:
        raise UsageError(f"--store hf://{repo}: {problem}")
    client = HubClient.connect(repo, endpoint=endpoint, token=token, anonymous_ok=True)
    weights = ckpt.weights_file(GENERATOR)
    try:
        head = client.head()
        files = client.files(head)
        wanted = [p for p in files if p.startswith(MODEL_DIR + "/") and not p.endswith(PICKLED_SUFFIXES) and not _hidden(p)]
        if not any(p == f"{MODEL_DIR}/config.json" for p in wanted):
            raise StoreError(f"{client.url} has no {MODEL_DIR}/ yet: the run has not exported a voice to publish")
        status = json_object(client.read(STATUS, head)) or {}
        name = None
        if checkpoint:
            latest = client.read(ckpt.LATEST, head)
            name = _checkpoint_name(checkpoint, latest.decode(errors="replace").strip() if latest else None, status, client.url)
            prefix = f"{ckpt.CHECKPOINTS}/{name}/"
            if f"{prefix}{weights}" not in files or f"{prefix}{ckpt.MANIFEST}" not in files:
                present = ", ".join(sorted(checkpoint_names(files), key=ckpt.step_of)) or "none"
                raise StoreError(f"{client.url} has no complete checkpoint {name}; it has {present}")
            wanted += [f"{prefix}{weights}", f"{prefix}{ckpt.MANIFEST}"]
        heard = name or _best_checkpoint(status)
        heard_prefix = f"{ckpt.CHECKPOINTS}/{heard}/{SAMPLES_DIR}/"
        wanted += sorted(p for p in files if heard and p.startswith(heard_prefix) and p.endswith(".wav"))[:SAMPLES]
        client.download(wanted, head, into)
    except (StoreError, ckpt.CheckpointError, VoiceError):
        raise
    except Exception as err:
        raise client.failure(err) from None
    if name:
        folder = into / ckpt.CHECKPOINTS / name
        expected = ckpt.read_manifest(folder).get(weights)
        if expected is None or ckpt.sha256_file(folder / weights) != expected["sha256"]:
            raise ckpt.CheckpointError(f"{client.url}: {name}/{weights} does not match its {ckpt.MANIFEST}")
    return into, status, client.url, name


PICKLED_SUFFIXES = tuple(pattern.lstrip("*") for pattern in PICKLED)


def _checkpoint_name(wanted: str, latest: str | None, status: Mapping[str, Any], where: str) -> str:
    """``step-N`` (any number of digits), ``latest`` or ``best`` → a checkpoint's name."""
    if wanted == "latest":
        name = latest
    elif wanted == "best":
        best = status.get("best") or {}
        name = best.get("checkpoint") if isinstance(best, Mapping) else None
    else:
        number = wanted.removeprefix("step-")
        if not number.isdigit():
            raise UsageError(f"--checkpoint {wanted!r}: use step-N (e.g. step-00002800), latest or best")
        return ckpt.name_for_step(int(number))
    if not ckpt.is_checkpoint_name(name):
        raise StoreError(f"{where} names no {wanted} checkpoint ({name!r}); give one by its step: --checkpoint step-N")
    return str(name)


# -- the voice ---------------------------------------------------------------------------------


def _stage_voice(run: Path, name: str | None, stage: Path, *, onnx: bool, say: Callable[[str], None],
                 validated: bool = True) -> tuple[int | None, str]:
    """Write the voice to publish into ``stage``; the step whose weights it has (``None``: the run's best) and its name."""
    model = run / MODEL_DIR
    if name:
        _voice_of_checkpoint(model, run / ckpt.CHECKPOINTS / name, stage)
        if any(model.glob("*.onnx.json")):
            say(f"the Piper voice in {MODEL_DIR}/ is of the best weights, not {name}'s: it is left out")
        step, voice = ckpt.step_of(name), name
    elif (model / ADAPTERS_DIR).is_dir():
        speaker, _ = merge_folder(model, stage, onnx=onnx)
        say(f"{MODEL_DIR}/ holds a LoRA adapter: publishing the voice of {speaker}'s adapter merged into its base")
        step, voice = None, f"the best voice ({speaker}'s adapter merged)"
    else:
        for path in sorted(model.rglob("*")):
            rel = path.relative_to(model).as_posix()
            if path.is_file() and rel != CARD and not path.name.endswith(PICKLED_SUFFIXES) and not _hidden(rel):
                (stage / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, stage / rel)
        step, voice = None, "the best voice" if validated else f"the voice in {MODEL_DIR}/ (never validated)"
    if onnx and not (stage / ONNX_FILE).is_file():
        say(f"making the ONNX graphs ({ONNX_FILE}, model.int8.onnx) of the voice")
        export_folder(stage)
    return step, voice


def _voice_of_checkpoint(model: Path, folder: Path, stage: Path) -> None:
    """The voice of a checkpoint's generator, through the task's export: the run's architecture, tokenizer and speakers."""
    weights = load_file(str(folder / ckpt.weights_file(GENERATOR)))
    if is_adapted(weights):
        raise VoiceError(f"{folder.name} is a checkpoint of an adapter (LoRA) phase; publish the run's best voice (no "
                         "--checkpoint; its adapter is merged), or a checkpoint of a full phase")
    prefix = "model."  # the training wrapper (VitsTrainingForward) holds the VitsModel as .model
    vits_weights = {k[len(prefix):]: v.float() if v.is_floating_point() else v for k, v in weights.items() if k.startswith(prefix)}
    with torch.device("meta"):
        vits = VitsModel(VitsConfig.from_pretrained(model))
    try:
        vits.load_state_dict(vits_weights, strict=True, assign=True)
    except RuntimeError as err:
        raise VoiceError(f"{folder.name}'s weights do not fit the run's {MODEL_DIR}/config.json (a checkpoint of another "
                         f"architecture?): {str(err).splitlines()[0]}") from None
    speakers = json.loads((model / SPEAKERS_FILE).read_text(encoding="utf-8")) if (model / SPEAKERS_FILE).is_file() else []
    save_voice(vits.eval(), stage, FinnishText.from_folder(model), speakers, onnx=False)


def _one_speaker_at_root(stage: Path, speaker: str | int | None, repo: str, *, onnx: bool,
                         say: Callable[[str], None]) -> list[str]:
    """Make the voice at ``stage``'s root speak ``speaker`` by default, the full voice going to ``all-speakers/`` (see
    the module); the card's lines on picking a speaker (none for a voice of one speaker)."""
    config = json.loads((stage / "config.json").read_text(encoding="utf-8"))
    count = int(config.get("num_speakers") or 1)
    names = json.loads((stage / SPEAKERS_FILE).read_text(encoding="utf-8")) if (stage / SPEAKERS_FILE).is_file() else []
    names = [str(n) for n in names] if len(names) == count else [str(i) for i in range(count)]
    if count <= 1:
        if speaker not in (None, 0, "0", *names[:1]):
            raise UsageError(f"--speaker {speaker}: this voice has one speaker")
        return []
    index = _speaker_index(speaker, names)
    if not config.get("use_stochastic_duration_prediction", True):
        say(f"this voice's duration predictor cannot take a speaker into its weights: transformers users must pass "
            f"speaker_id (0-{count - 1})")
        return [f"The voice has {count} speakers ({', '.join(names)}); transformers takes one by number: "
                '`tts(text, forward_params={"speaker_id": 1})` (without it the voice is no speaker of the corpus).', ""]
    full = stage / ALL_SPEAKERS
    for path in sorted(stage.rglob("*")):
        rel = path.relative_to(stage).as_posix()
        if path.is_file() and rel != CARD and not rel.startswith((SAMPLES_DIR + "/", ALL_SPEAKERS + "/")):
            (full / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, full / rel)
    vits = VitsModel.from_pretrained(stage).eval()
    _fold_speaker(vits, index)
    vits.save_pretrained(stage)
    (stage / SPEAKERS_FILE).write_text(json.dumps([names[index]]), encoding="utf-8")
    for graph in stage.glob("*.onnx*"):  # of every speaker: made again for the one at the root (with onnx)
        graph.unlink()
    if onnx:
        export_folder(stage)
    say(f"the voice has {count} speakers: the repo's root speaks {names[index]} (--speaker picks another), "
        f"{ALL_SPEAKERS}/ holds all of them")
    others = ", ".join(f"{i}: {n}" for i, n in enumerate(names))
    return [
        f"The repo's root speaks **{names[index]}**, one of the {count} speakers the voice was trained on; "
        f"`{ALL_SPEAKERS}/` holds the voice with all of them ({others}). Pick another by number:",
        "",
        "```python",
        "import torch",
        "from transformers import AutoTokenizer, VitsModel",
        "",
        f'model = VitsModel.from_pretrained("{repo}", subfolder="{ALL_SPEAKERS}")',
        f'tokenizer = AutoTokenizer.from_pretrained("{repo}", subfolder="{ALL_SPEAKERS}")',
        "with torch.no_grad():",
        f'    speech = model(**tokenizer("hyvää huomenta", return_tensors="pt"), speaker_id={(index + 1) % count}).waveform',
        "```",
        "",
        f"With fintts: `fintts.load_voice(FOLDER, speaker=NAME)` on a download of `{ALL_SPEAKERS}/`.",
        "",
    ]


def _speaker_index(speaker: str | int | None, names: list[str]) -> int:
    if speaker is None:
        return 0
    if str(speaker) in names:
        return names.index(str(speaker))
    if str(speaker).isdigit() and int(speaker) < len(names):
        return int(speaker)
    raise UsageError(f"--speaker {speaker}: this voice's speakers are {', '.join(names)} (or 0-{len(names) - 1})")


def _fold_speaker(vits: VitsModel, index: int) -> None:
    """Fold speaker ``index``'s embedding into the biases it is added to at inference, and drop the others.

    In transformers' VITS (``modeling_vits.py``) the speaker embedding ``g`` only ever enters as
    ``conv(x) + cond(g)``: the stochastic duration predictor's ``conv_pre`` output plus ``cond(g)``, each
    flow WaveNet layer's ``in_layers[i](x)`` plus its slice of ``cond_layer(g)``, the decoder's
    ``conv_pre`` output plus ``cond(g)``; a constant per channel, so it belongs in that convolution's
    bias. (The posterior encoder also takes it, but only in training.)
    """
    g = vits.embed_speaker.weight[index].detach()[None, :, None]
    with torch.no_grad():
        predictor = vits.duration_predictor
        predictor.conv_pre.bias += predictor.cond(g)[0, :, 0]
        for layer in vits.flow.flows:
            wavenet = layer.wavenet
            shift = wavenet.cond_layer(g)[0, :, 0]
            width = 2 * wavenet.hidden_size
            for i, conv in enumerate(wavenet.in_layers):
                conv.bias += shift[i * width:(i + 1) * width]
        vits.decoder.conv_pre.bias += vits.decoder.cond(g)[0, :, 0]
    vits.config.num_speakers = 1
    del vits.embed_speaker


def _write_card(stage: Path, status: Mapping[str, Any], repo: str, step: int | None, samples: list[tuple[str, str]],
                speakers: list[str]) -> None:
    config = json.loads((stage / "config.json").read_text(encoding="utf-8"))
    about = dict(status.get("about") or {})
    # A public card names no path of the machine that trained or published: a base model that is a folder (a Kaggle
    # input, a laptop's copy) is named by its folder's name, and the corpus (model-index's dataset) likewise.
    init = str(about.get("init") or "unknown")
    if not _hub_id(init) and init != "scratch":
        init = Path(init).name or "a local model"
    if about.get("data") and not _hub_id(str(about["data"])):
        about["data"] = Path(str(about["data"])).name or "custom"
    piper = sorted(p.name[: -len(".json")] for p in stage.glob("*.onnx.json") if (stage / p.name[: -len(".json")]).is_file())
    card = run_card({**status, "about": about}, init, where="repo", repo=repo, step=step,
                    sample_rate=config.get("sampling_rate"), piper=piper[0] if piper else None)
    if speakers:  # the root speaks one speaker: how to pick another replaces the run card's speaker_id line
        card = dataclasses.replace(card, usage=[line for line in card.usage if not line.startswith("The voice has ")] + speakers)
    (stage / CARD).write_text(render_model(card, name=repo.split("/")[-1], samples=samples), encoding="utf-8")


def _hub_id(name: str) -> bool:
    """``user/name`` as the Hub spells a repo, not a path (``/kaggle/input/x``, ``./x``, ``~/x``, ``C:\\x``)."""
    return bool(_HUB_ID.fullmatch(name)) and not Path(name).expanduser().exists()


def _best_checkpoint(status: Mapping[str, Any]) -> str | None:
    best = status.get("best") or {}
    name = best.get("checkpoint") if isinstance(best, Mapping) else None
    return name if ckpt.is_checkpoint_name(name) else None


def _samples(run: Path, checkpoint: str | None, stage: Path) -> list[tuple[str, str]]:
    """Copy a few of the validation samples of ``checkpoint`` (the published voice's) into ``stage/samples``;
    (caption, path in the repo) of each."""
    folder = run / ckpt.CHECKPOINTS / checkpoint / SAMPLES_DIR if checkpoint else None
    if folder is None or not folder.is_dir():
        return []
    found = []
    for wav in sorted(p for p in folder.glob("*.wav") if p.is_file() and not p.is_symlink())[:SAMPLES]:
        rel = f"{SAMPLES_DIR}/{wav.name}"
        (stage / SAMPLES_DIR).mkdir(exist_ok=True)
        shutil.copyfile(wav, stage / rel)
        found.append((f"validation sample {wav.stem} (step {ckpt.step_of(checkpoint)})", rel))
    return found


# -- the Hub -----------------------------------------------------------------------------------


def _check_can_write(client: HubClient) -> None:
    try:
        role = client.token_role()
    except Exception as err:
        raise client.failure(err).prefixed("could not check the token with the Hub", "") from None
    if role == "read":
        raise HubAuthError("the Hugging Face token is a read token; fintts publish creates and writes a repo: set HF_TOKEN to a "
                           "*write* token (https://huggingface.co/settings/tokens)")


def _upload(client: HubClient, stage: Path, files: Mapping[str, int], *, private: bool | None, message: str,
            say: Callable[[str], None], what: str) -> tuple[str | None, list[str], bool]:
    """One commit that makes the repo hold exactly ``files``; (commit or ``None`` when nothing changed, removed, private)."""
    try:
        client.ensure_repo(private is not False)  # a new repo is private unless public was asked for
        is_private = client.is_private()
        head = client.head()
        present = client.files(head)
    except Exception as err:
        raise client.failure(err).prefixed(f"could not create or read {client.url}", "") from None
    run_files = sorted(p for p in present if p.startswith(RUN_MARKERS))
    if run_files:
        raise StoreError(f"{client.repo_id} holds a fintts run ({run_files[0]}): publishing would delete it. Publish the voice "
                         "to a repo of its own (--hub-repo USER/NEW-NAME); the run stays where it is")
    if private is not False:  # public only when asked for: an existing public repo is refused, as a training run's is
        refuse_public(client.repo_id, is_private=is_private, endpoint=client.endpoint,
                      goes="publishing puts the voice, its card and samples of the speaker",
                      allow="pass --public to publish there publicly; nothing was published")
    removed = sorted(p for p in present if p not in files and p != ".gitattributes")
    visible = "private: only you (and your organisation) can see it" if is_private else "PUBLIC: anyone can download it"
    say(f"publishing {what} to {client.url} ({visible}): {len(files)} files, {sum(files.values()) / 1e6:.1f} MB "
        f"({', '.join(sorted(files))})")
    changed = [rel for rel in files if not _same(stage / rel, present.get(rel))]
    if not changed and not removed:
        say(f"{client.repo_id} already holds this voice: nothing to commit")
        return None, [], is_private
    operations: list[Any] = [CommitOperationAdd(path_in_repo=rel, path_or_fileobj=str(stage / rel)) for rel in sorted(changed)]
    operations += [CommitOperationDelete(path_in_repo=rel) for rel in removed]
    try:
        client.upload(operations, UPLOAD_SECONDS)
        info = client.commit(operations, message, head)
    except StoreError:
        raise
    except Exception as err:
        raise client.failure(err).prefixed(f"could not publish to {client.url}", "") from None
    return getattr(info, "oid", None), removed, is_private


def _same(path: Path, remote: Any) -> bool:
    """Whether the repo's file ``remote`` has ``path``'s content, told without a download: by the sha256 of an LFS file, the
    git blob id of another."""
    if remote is None or getattr(remote, "size", None) != path.stat().st_size:
        return False
    lfs = getattr(remote, "lfs", None)
    if lfs is not None:
        sha256 = lfs.get("sha256") if isinstance(lfs, dict) else getattr(lfs, "sha256", None)
        return sha256 == ckpt.sha256_file(path)
    digest = hashlib.sha1(b"blob %d\0" % path.stat().st_size)
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest() == getattr(remote, "blob_id", None)


def _relative_files(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
