"""What the package asks pip for: nothing that loads checkpoints may run on a torch whose safe loading can be bypassed."""

from __future__ import annotations

import pytest
from packaging.requirements import Requirement

from notebook_helpers import ROOT


def test_every_extra_that_brings_torch_asks_for_a_torch_whose_weights_only_loading_holds():
    # torch.load(weights_only=True) runs code from a crafted file before torch 2.6 (CVE-2025-32434)
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = [r for extra in project["optional-dependencies"].values() for r in extra]
    wanted = [Requirement(r) for r in [*project["dependencies"], *extras]]
    torches = [r for r in wanted if r.name == "torch"]
    assert torches, "no extra asks for torch"
    for requirement in torches:
        assert not any(requirement.specifier.contains(v) for v in ("2.3.0", "2.5.1", "2.6.0rc1")), str(requirement)
        assert requirement.specifier.contains("2.6.0"), str(requirement)
