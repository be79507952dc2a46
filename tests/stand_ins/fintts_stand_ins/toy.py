"""A toy regression task (optionally adversarial) on generated data.

It exists to exercise every promise of the session trainer on a CPU in seconds: dropout
draws from the RNG, items have lengths for bucketing, ``adversarial: true`` adds a second
optimizer group (a critic) exactly as a GAN does, and ``params`` grows the model to a
given size for the checkpoint benchmarks. It is also the smallest example of the Task
interface.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Mapping
from pathlib import Path

import torch
from safetensors.torch import save_file
from torch import nn

from fintts.train.config import free_setting
from fintts.train.task import Evaluation, OptimizerGroup, Task, TrainData, unwrap


@dataclasses.dataclass
class ToyConfig:
    n_items: int = 512
    features: int = 16
    hidden: int = 64
    #: grow the hidden layers until the model has about this many parameters (0: use ``hidden``).
    params: int = 0
    dropout: float = 0.1
    lr: float = 3e-3
    adversarial: bool = False
    data_seed: int = 7
    #: seconds slept in each step, so tests can stop a run at a chosen moment.
    step_delay: float = free_setting(0.0)
    #: seconds slept in each validation, so tests can make validations long (a large held-out set, a busy machine).
    eval_delay: float = free_setting(0.0)
    #: raise in the ``fail_at_batch``-th training batch of process ``fail_on_process`` (0: never),
    #: so tests can see one process's failure end a run of several.
    fail_at_batch: int = free_setting(0)
    fail_on_process: int = free_setting(0)


class _Items(torch.utils.data.Dataset):
    def __init__(self, x: torch.Tensor, y: torch.Tensor):
        self.x, self.y = x, y

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, index: int):
        return self.x[index], self.y[index]


def _collate(items):
    xs, ys = zip(*items)
    return torch.stack(xs), torch.stack(ys)


class ToyTask(Task):
    config_class = ToyConfig
    monitor = "val/loss"
    monitor_mode = "min"

    def __init__(self, config: ToyConfig, context):
        super().__init__(config, context)
        self._batches = 0

    def _data(self, seed_offset: int, n: int):
        cfg = self.config
        generator = torch.Generator().manual_seed(cfg.data_seed + seed_offset)
        x = torch.randn(n, cfg.features, generator=generator)
        w = torch.randn(cfg.features, 1, generator=torch.Generator().manual_seed(cfg.data_seed))
        y = torch.tanh(x @ w) + 0.05 * torch.randn(n, 1, generator=generator)
        return x, y

    def _hidden(self) -> int:
        cfg = self.config
        if not cfg.params:
            return cfg.hidden
        # three layers: f*h + h*h + h*1 ≈ params
        a, b, c = 1.0, cfg.features + 1.0, -float(cfg.params)
        return max(4, int((-b + math.sqrt(b * b - 4 * a * c)) / (2 * a)))

    def build_models(self, start=None) -> dict[str, nn.Module]:
        cfg, h = self.config, self._hidden()
        models: dict[str, nn.Module] = {
            "model": nn.Sequential(
                nn.Linear(cfg.features, h), nn.GELU(), nn.Dropout(cfg.dropout),
                nn.Linear(h, h), nn.GELU(), nn.Dropout(cfg.dropout), nn.Linear(h, 1),
            )
        }
        if cfg.adversarial:
            models["critic"] = nn.Sequential(nn.Linear(cfg.features + 1, 32), nn.LeakyReLU(0.1), nn.Linear(32, 1))
        for name in set(models) & set(start or {}):  # a phase goes on from the previous phase's weights
            models[name].load_state_dict(start[name])
        return models

    def build_optimizers(self, models: Mapping[str, nn.Module]) -> list[OptimizerGroup]:
        groups = [OptimizerGroup("model", torch.optim.AdamW(models["model"].parameters(), lr=self.config.lr), ["model"], 1.0)]
        if "critic" in models:
            groups.append(OptimizerGroup("critic", torch.optim.AdamW(models["critic"].parameters(), lr=self.config.lr), ["critic"]))
        return groups

    def train_data(self) -> TrainData:
        x, y = self._data(0, self.config.n_items)
        lengths = [int(v) for v in (x.abs().sum(dim=1) * 10)]
        return TrainData(_Items(x, y), _collate, lengths)

    def step(self, models, batch, group):
        if self.config.step_delay:
            time.sleep(self.config.step_delay)
        x, y = batch
        if group == "model":
            self._batches += 1
            process = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
            if self._batches == self.config.fail_at_batch and process == self.config.fail_on_process:
                raise RuntimeError(f"toy failure in batch {self._batches} of process {process}")
            pred = models["model"](x)
            losses = {"mse": nn.functional.mse_loss(pred.float(), y)}
            if "critic" in models:
                critic = unwrap(models["critic"])
                fake = critic(torch.cat([x, pred], dim=1)).float()
                losses["adv"] = ((fake - 1) ** 2).mean()
                self._fake = (x, pred.detach())
            losses["loss"] = losses["mse"] + 0.1 * losses.get("adv", 0.0)
            return losses
        x_fake, pred = self._fake
        real = models["critic"](torch.cat([x, y], dim=1)).float()
        fake = models["critic"](torch.cat([x_fake, pred], dim=1)).float()
        loss = ((real - 1) ** 2).mean() + (fake ** 2).mean()
        return {"loss": loss, "critic": loss}

    def evaluate(self, models, step) -> Evaluation:
        if self.config.eval_delay:
            time.sleep(self.config.eval_delay)
        x, y = self._data(10_000, 128)
        model = unwrap(models["model"])
        device = next(model.parameters()).device
        loss = nn.functional.mse_loss(model(x.to(device)).float().cpu(), y).item()
        return Evaluation({"val/loss": loss}, {"samples/val.json": json.dumps({"step": step, "val_loss": loss}).encode()})

    def export(self, models, out_dir: Path) -> None:
        out_dir.mkdir(parents=True, exist_ok=True)
        state = {k: v.detach().cpu().contiguous() for k, v in unwrap(models["model"]).state_dict().items()}
        save_file(state, str(out_dir / "model.safetensors"))

    def describe(self):
        return {"items": self.config.n_items}
