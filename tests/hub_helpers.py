"""What the Hub tests share besides the fixtures: the token the local Hub accepts, a store on it, checkpoints."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from fintts.train.retry import Backoff
from fintts.train.run import checkpoint
from fintts.train.stores.hub import HubStore
from fintts_stand_ins import HubServer

#: Distinctive, so a leak cannot hide in other text.
TOKEN = "hf_fintts" + "Test" * 6 + "Q9"
REPO = "fintts-tester/finnish-voice"
FAST = Backoff(base=0.05, cap=0.3, jitter=0.5, retry_after_cap=5)


def make_store(hub: HubServer, root: Path, repo: str = REPO, **options) -> HubStore:
    settings = dict(endpoint=hub.endpoint, token=TOKEN, push_every=0, backoff=FAST, sync_attempts=3, request_timeout=5)
    settings.update(options)
    return HubStore(repo, root=root, **settings)


def save(root: Path, step: int, size: int = 4096) -> str:
    """A checkpoint like the trainer's: a safetensors file and a JSON state, reproducible from ``step``."""
    name = checkpoint.name_for_step(step)

    def write(folder: Path) -> None:
        generator = torch.Generator().manual_seed(step)
        save_file({"weight": torch.randn(size // 4, generator=generator)}, str(folder / "generator.safetensors"))
        (folder / "state.json").write_text(json.dumps({"step": step}))

    checkpoint.save(root, name, write)
    return name


def export_model(root: Path, step: int) -> None:
    model = root / "model"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text(json.dumps({"step": step}))
    save_file({"weight": torch.full((256,), float(step))}, str(model / "model.safetensors"))


def latest_on_hub(hub: HubServer, repo: str = REPO) -> str:
    return hub.files(repo)["latest"].decode().strip()
