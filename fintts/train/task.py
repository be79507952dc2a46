"""The seam between the session trainer and whatever it trains.

The trainer owns time, devices, precision, accumulation, data order, checkpoints and
stores. A task owns everything about the model: what the modules are, how a batch
becomes losses, how quality is measured, what the user-facing artefact is and how the
run's page describes it. Nothing in :mod:`fintts.train` imports a task's modules; a config
names its task (a name registered in the ``fintts.tasks`` entry points, or
``package.module:Class``) and :func:`fintts.train.registry.resolve_task` finds it.

A GAN is two optimizer groups. For every micro-batch the loop calls :meth:`Task.step`
once per group, in the order :meth:`Task.build_optimizers` returns them, and backwards
each returned ``loss`` into that group's parameters only; after the last micro-batch of
an optimizer step every group's optimizer steps. A task that shares work between its
groups (the generator forward pass that both the discriminator and the generator loss
need) keeps it on ``self`` between the calls for the same batch.

A run in phases (:mod:`fintts.train.phases`) builds a new task for each phase, from that
phase's config, and hands :meth:`Task.build_models` the previous phase's final weights:
a task whose phases differ in structure (an adapter wrapped around the model in a later
phase) maps them onto its new modules there.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from fintts.train.run.layout import CARRIED_DIR

if TYPE_CHECKING:  # torch only in annotations: the Card and the interface's names are read where torch is not
    import torch  # (the Hub client, `fintts kaggle`, the laptop), and importing torch costs a second there
    from torch import nn

#: Weights by model name (``Task.build_models``'s keys), each a module's ``state_dict()``.
Weights = Mapping[str, Mapping[str, "torch.Tensor"]]


@dataclasses.dataclass
class OptimizerGroup:
    """One optimizer and the models whose parameters it updates.

    ``models`` names entries of :meth:`Task.build_models`; the loop restricts each
    group's backward pass to those parameters, clips their gradient norm to
    ``clip_grad_norm`` (``None``: no clipping) and checkpoints ``optimizer`` under ``name``.
    """

    name: str
    optimizer: torch.optim.Optimizer
    models: Sequence[str]
    clip_grad_norm: float | None = None


@dataclasses.dataclass
class TrainData:
    """A map-style dataset and how to batch it.

    ``lengths`` (one number per item, e.g. frames) lets the trainer's sampler put items of
    similar length into the same batch; ``None`` means plain shuffling. The trainer, not
    the task, decides the order, so that resuming mid-epoch is exact.

    ``seconds`` (one number per item: how long its recording, video... lasts) lets the
    trainer report throughput as seconds of data trained on per second, which compares
    across batch sizes and corpora better than items per second.
    """

    dataset: torch.utils.data.Dataset
    collate: Callable[[list[Any]], Any]
    lengths: Sequence[int] | None = None
    seconds: Sequence[float] | None = None


#: What a task may put on TensorBoard besides scalars: the ``SummaryWriter.add_<kind>`` it goes through.
BOARD_KINDS = ("audio", "image", "text", "histogram", "figure")


@dataclasses.dataclass(frozen=True)
class BoardEntry:
    """One thing for TensorBoard besides a scalar, as the task knows it; the trainer only passes it on.

    ``kind`` is one of :data:`BOARD_KINDS` (``SummaryWriter.add_<kind>``), ``value`` its data, and
    ``options`` its other keyword arguments: ``BoardEntry("audio", samples, {"sample_rate": 16000})``
    (mono float samples in [-1, 1], as ``add_audio`` takes them).
    """

    kind: str
    value: Any
    options: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Evaluation:
    """What one validation produced.

    ``metrics`` are logged and may be monitored for early stopping (e.g. ``val/loss``).
    ``files`` maps a relative path (``samples/0.wav``) to bytes; they are kept in the
    checkpoint folder so a person can listen to what this step sounds like.
    ``board`` maps a TensorBoard tag to a :class:`BoardEntry` logged at the validation's step
    (the samples as audio, so the curves and the sound of each step are side by side).
    """

    metrics: dict[str, float]
    files: dict[str, bytes] = dataclasses.field(default_factory=dict)
    board: dict[str, BoardEntry] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Card:
    """What a task says about its model on a card: the run's page (``README.md``, the Hub repo's card), and
    the card of the model on its own (an exported folder, a published repo), both written by :mod:`fintts.train.report.card`.

    On the run's page the trainer adds what it knows — the run's state, best metric, loss plot and
    sessions — around these. ``metadata`` becomes the card's YAML front matter through
    ``huggingface_hub.ModelCardData`` (the Hub reads ``language``, ``pipeline_tag``, ``tags``,
    ``base_model``, ``license``, ``library_name`` from it); ``summary`` is the paragraph under the
    title; ``facts`` are Markdown bullet items; ``results`` the quality figures as the Hub's
    ``model-index`` (each a dict of ``EvalResult`` fields: ``metric_type``, ``metric_value``,
    ``metric_name``, ``dataset_name``, ...; ``task_type`` defaults to the ``pipeline_tag``);
    ``usage`` is Markdown telling a person what to do with the model.
    """

    title: str
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)
    facts: list[str] = dataclasses.field(default_factory=list)
    usage: list[str] = dataclasses.field(default_factory=list)
    summary: str = ""
    results: list[dict[str, Any]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class DataFingerprint:
    """What a task trains and validates on, so that a resumed run notices when it changed.

    ``items`` and ``heldout``: item id → size in bytes of its data (a clip's audio file);
    ``labels``: the names the model has a slot for (speakers, classes), in the model's order.
    The trainer keeps it in every checkpoint and compares it when a run resumes: changed
    items are a warning (the epoch plan follows the data; the resume is not exact); changed
    held-out items are a warning and reset the best validation (its value is no longer
    comparable); changed labels are refused, naming them (the model's slots would mean other
    things, or not fit). Where the data lives is not part of it: the same data mounted at
    another path is the same data.
    """

    items: dict[str, int]
    heldout: dict[str, int] = dataclasses.field(default_factory=dict)
    labels: list[str] = dataclasses.field(default_factory=list)


def fetch_here(name: str, fetch: Callable[[], Any]) -> Any:
    """:attr:`TaskContext.fetch_first` of a process on its own (one process, ``fintts plan``): ``fetch()``, here."""
    return fetch()


@dataclasses.dataclass(frozen=True)
class TaskContext:
    """What the trainer tells a task about where it runs."""

    seed: int
    device: torch.device
    #: autocast dtype of this run (``None`` = fp32); a task keeps overflow-prone parts in fp32.
    autocast_dtype: torch.dtype | None
    #: folder kept beside the checkpoints (in the store), for caches worth reusing next session.
    cache_dir: Path
    is_main_process: bool = True
    log: Callable[[str], None] = print
    #: show progress bars (the main process of a run started with progress on).
    progress: bool = True
    #: something a person must know that does not stop training (pretrained weights that could not be had):
    #: logged and kept in the session's warnings, which its summary and status.json show.
    warn: Callable[[str], None] = print
    #: the session resumes from a checkpoint, whose weights replace the ones built: nothing to fetch for them.
    resuming: bool = False
    #: ``fetch_first(name, fetch)``: how the task gets what it reads from the Hub (its data, the weights it starts
    #: from). ``fetch`` runs in the main process alone, the only one that holds the Hugging Face token (a private
    #: input needs it): it puts the files in the cache the processes share and returns what finds them there (JSON:
    #: the commit it resolved). Every process gets that value (the others wait for it off the device, within the
    #: session's time) and reads the files from the cache, the network untouched. ``name`` says what is fetched, once
    #: per phase. Alone: ``fetch()``.
    fetch_first: Callable[[str, Callable[[], Any]], Any] = fetch_here

    @property
    def carried_dir(self) -> Path:
        """The part of :attr:`cache_dir` the run's store carries between sessions on fresh disks (a Kaggle session's
        starts empty): what took a device minutes to make, worth the upload. Its files must be named by their content
        and never rewritten: a store adds those it lacks and fetches them all at resume, before the task is built."""
        return self.cache_dir / CARRIED_DIR


class Task(abc.ABC):
    """Base class of everything the session trainer can train.

    Subclasses set ``config_class`` to a dataclass of their settings. Its fields are the
    config's top-level keys that are not the trainer's own; a field whose metadata has
    ``math=False`` (e.g. ``num_eval_samples``) may change between sessions of one run. The
    dataclass may refuse a sequence of phases it cannot go through: a classmethod
    ``check_phases(configs)`` raising ``ValueError`` (or ConfigError), called with each phase's
    settings when a config with ``phases`` loads — on the settings, so that a config is checked
    without importing the task (:mod:`fintts.train.config`).
    """

    config_class: ClassVar[type]
    #: metric watched for early stopping and "best", and whether lower is better.
    monitor: ClassVar[str | None] = None
    monitor_mode: ClassVar[str] = "min"
    #: the task's own speed and memory switches, by name → the settings that turn them on, which
    #: ``fintts bench --compare`` measures one at a time against a config (the trainer adds its own).
    speed_switches: ClassVar[dict[str, dict[str, Any]]] = {}

    def __init__(self, config: Any, context: TaskContext):
        self.config = config
        self.context = context

    @abc.abstractmethod
    def build_models(self, start: Weights | None = None) -> dict[str, nn.Module]:
        """The trainable modules by name; each is saved as ``<name>.safetensors``.

        ``start``: the weights to start from — the previous phase's final ones (its models'
        state dicts, in that phase's layout), ``None`` for a run's first phase. When a session
        resumes, the checkpoint's weights are loaded into the built modules afterwards.
        """

    @abc.abstractmethod
    def build_optimizers(self, models: Mapping[str, nn.Module]) -> list[OptimizerGroup]:
        """Optimizer groups in the order they step on each batch."""

    @abc.abstractmethod
    def train_data(self) -> TrainData:
        """The training items. Called once per session; a task checks its data here."""

    def count_items(self) -> int:
        """How many training items the data holds, for ``fintts plan``. This prepares the data;
        a task that can count its items more cheaply (without features, say) overrides it."""
        return len(self.train_data().dataset)

    @abc.abstractmethod
    def step(self, models: Mapping[str, nn.Module], batch: Any, group: str) -> dict[str, torch.Tensor]:
        """Forward one micro-batch for ``group``; return named losses, ``loss`` being the one to backward.

        ``models`` may be wrapped for data parallelism; use :func:`unwrap` to call a
        module without synchronising its gradients (a discriminator inside the
        generator's loss, say).
        """

    def evaluate(self, models: Mapping[str, nn.Module], step: int) -> Evaluation:
        """Validate; runs in every process (same weights, same fixed RNG) under ``torch.no_grad``.

        The main process's result is the one kept; an error in any process ends the session
        as failed, naming that process, in the same step in all of them.
        """
        return Evaluation(metrics={})

    def export(self, models: Mapping[str, nn.Module], out_dir: Path) -> None:
        """Write the user-facing artefact (the best model so far) into ``out_dir``: its quick part (the weights)."""

    def export_later(self) -> Callable[[Path], None] | None:
        """The slow part of :meth:`export` (ONNX graphs, say), or ``None``: a function that adds its files to a folder
        :meth:`export` wrote, from that folder's files alone.

        The trainer runs it in a child process of the main process while training goes on (a
        process can be ended when the session's clock leaves no time for it; a thread inside torch
        or onnxruntime cannot), on a hard-linked copy of the folder, and puts the result in place
        only if the folder still holds the same export. The child imports it by name: a module-level
        function, or a ``functools.partial`` of one with JSON arguments. It must write new files
        (never rewrite one in place: they are hard links) and nothing outside the folder it is given.
        """
        return None

    def resolved_settings(self) -> dict[str, Any]:
        """Config values this task decided from its data when it was built (e.g. ``speaker: best`` → a name).

        The trainer records them when the run (or phase) starts and applies them as overrides
        in every later session, so a choice made once holds for the whole run even if the
        data changes between sessions.
        """
        return {}

    def checkpoint_files(self, models: Mapping[str, nn.Module]) -> dict[str, bytes]:
        """Files kept in each checkpoint beside the weights, for people and other tools (e.g. an
        adapter in its library's own layout); relative path → bytes. Resuming does not read them.
        """
        return {}

    def describe(self) -> dict[str, Any]:
        """Facts about the data and model for the run's status (hours, speakers...); JSON-serialisable."""
        return {}

    def data_fingerprint(self) -> DataFingerprint | None:
        """What :meth:`train_data` and validation use (called after it); ``None``: nothing to compare between sessions."""
        return None

    def memory_advice(self) -> list[str]:
        """This task's settings that trade speed for memory, as ``key=value (why)`` lines for an out-of-memory message.

        The trainer suggests a smaller ``micro_batch_size`` itself; a task adds what only it
        knows (e.g. gradient checkpointing of its largest part).
        """
        return []

    def card(self, status: Mapping[str, Any], repo: str | None) -> Card:
        """How the run's page presents this task's model; ``repo`` is the Hub repo id, ``None`` for a local run."""
        return Card(title="a model trained with fintts")


def unwrap(module: nn.Module) -> nn.Module:
    """The module inside a DistributedDataParallel (or similar) wrapper."""
    from torch import nn  # a task's process has torch imported already

    while hasattr(module, "module") and isinstance(module.module, nn.Module):
        module = module.module
    return module
