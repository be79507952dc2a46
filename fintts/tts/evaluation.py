"""``fintts eval``: a run's voice scored with the run's own settings, or any voice with a config's, by the voice's family.

What is shared by every family is here: which settings (the run's newest complete checkpoint's, or a
config's, with overrides) and which voice folder; the task the settings name gives the family, whose
``evaluate`` does the scoring (VITS: :mod:`fintts.tts.vits.heldout`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from fintts.errors import ConfigError
from fintts.train.config import load_config
from fintts.train.run import checkpoint
from fintts.train.run.layout import MODEL_DIR
from fintts.tts.families import family_of_task
from fintts.tts.family import Scores


def evaluate_run(*, store: str | Path | None = None, model: str | Path | None = None, config: str | Path | None = None,
                 data: str | None = None, overrides: Sequence[str] = ()) -> Scores:
    """With ``store`` (a run folder) the settings are those its newest complete checkpoint was
    trained with, and the voice its ``model/`` unless ``model`` names another; without it,
    ``model`` and ``config`` are both needed. ``data`` points the held-out clips elsewhere;
    ``overrides`` (``key=value``, as ``fintts train`` takes them) change any other setting.
    """
    overrides = [*overrides, *([f"data={data}"] if data else [])]
    if store:
        folder = checkpoint.latest_complete(Path(store), log=lambda _: None)
        if folder is None:
            raise ConfigError(f"--store {store} holds no complete checkpoint to take the run's settings from")
        run = load_config(folder / checkpoint.CONFIG, overrides, registered_only=True)  # a pulled checkpoint names no module to import
        model_dir = Path(model or Path(store) / MODEL_DIR)
    else:
        if not model:
            raise ConfigError("fintts eval needs --store PATH (a run) or --model DIR with --config/--data")
        run = load_config(config, overrides)
        model_dir = Path(model)
    family = family_of_task(run.train.task)
    if family is None:
        raise ConfigError(f"task: {run.train.task!r} trains no installed voice family, so there is no voice of it to evaluate")
    return family.operation("evaluate")(model_dir, run.task)
