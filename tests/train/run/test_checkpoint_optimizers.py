"""A checkpoint's optimizers load into the optimizers built now: their state from the checkpoint, their kernels as built."""

from __future__ import annotations

import pytest
import torch

from fintts.train.run import checkpoint
from fintts.train.run.state import TrainerState


def _trained(seed: int, **kernels) -> tuple[torch.nn.Module, torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    torch.manual_seed(seed)
    model = torch.nn.Linear(4, 3)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.8, 0.99), eps=1e-9, **kernels)
    for _ in range(2):
        model(torch.randn(5, 4)).square().mean().backward()
        optimizer.step()
        optimizer.zero_grad()
    return model, optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)


@pytest.mark.parametrize(("saved", "built"), [({"fused": True}, {"foreach": False}), ({"foreach": False}, {"fused": True})],
                         ids=["fused_into_for_loop", "for_loop_into_fused"])
def test_a_checkpoints_optimizer_keeps_the_kernels_it_was_built_with(tmp_path, saved, built):
    """torch's load_state_dict would take the saved ones: a run saved before the CPU's fused AdamW would never get it."""
    model, optimizer, scheduler = _trained(0, **saved)
    checkpoint.write_files(tmp_path, models={"m": model}, optimizers={"m": optimizer}, schedulers={"m": scheduler},
                           scaler=torch.amp.GradScaler("cpu", enabled=False), state=TrainerState(run_name="r"), config={},
                           files={}, loss_plot=None)
    model_now, optimizer_now, scheduler_now = _trained(1, **built)
    checkpoint.load_files(tmp_path, models={"m": model_now}, optimizers={"m": optimizer_now},
                          schedulers={"m": scheduler_now}, device=torch.device("cpu"))

    group = optimizer_now.param_groups[0]
    assert (group["fused"], group["foreach"]) == (built.get("fused"), built.get("foreach"))
    assert group["betas"] == (0.8, 0.99) and group["lr"] == 1e-2
    for parameter, parameter_now in zip(model.parameters(), model_now.parameters(), strict=True):
        torch.testing.assert_close(parameter_now, parameter)
        state, state_now = optimizer.state[parameter], optimizer_now.state[parameter_now]
        assert state_now["step"].device.type == "cpu" and float(state_now["step"]) == 2
        for key in ("exp_avg", "exp_avg_sq"):
            torch.testing.assert_close(state_now[key], state[key])
