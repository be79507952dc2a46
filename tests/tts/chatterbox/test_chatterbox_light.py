"""fintts's T3 against upstream's own class: chatterbox-light 1.0.2 (MIT), in a venv of its own.

The venv is made once per machine under pytest's cache (``.pytest_cache/d/chatterbox-light-1.0.2``), with this
interpreter's packages visible (``--system-site-packages``: torch, transformers, safetensors) and chatterbox-light
installed without its dependencies but einops: its torchaudio (2.11 at most on the registry, a CUDA build) does not
load beside our CPU-only torch 2.13, and pip would bring a second torch with it. So the package's ``__init__`` (which
imports torchaudio through S3Gen) is not run: the script registers ``chatterbox`` as a bare package path and imports
``chatterbox.models.t3`` alone. What is compared is T3, the part fintts trains; S3Gen and the voice encoder are the
release's, copied as they are.
"""

from __future__ import annotations

import fcntl
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fintts.tts.chatterbox.export import write_voice
from fintts.tts.chatterbox.t3 import T3, T3Settings

LIGHT = ["chatterbox-light==1.0.2", "einops==0.8.1"]
#: upstream's T3, imported without the package's __init__ (see the module's docstring)
PRELUDE = """
import importlib.util, json, sys, types
import torch
spec = importlib.util.find_spec("chatterbox")
package = types.ModuleType("chatterbox")
package.__path__ = list(spec.submodule_search_locations)
sys.modules["chatterbox"] = package
from chatterbox.models.t3.t3 import T3
from chatterbox.models.t3.modules.cond_enc import T3Cond
from chatterbox.models.t3.modules.t3_config import T3Config
"""


@pytest.fixture(scope="session")
def light_python(request) -> Path:
    cache = getattr(request.config, "cache", None)
    venv = Path(cache.mkdir("chatterbox-light-1.0.2")) if cache else request.getfixturevalue("tmp_path_factory").mktemp("light")
    python, done = venv / "bin" / "python", venv / "installed"
    with open(venv.with_name(venv.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # under pytest -n the workers share the cache: one makes the venv
        if not done.is_file():
            subprocess.run([sys.executable, "-m", "venv", "--clear", "--system-site-packages", str(venv)], check=True)
            pip = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-compile", "--disable-pip-version-check",
                                  "--no-deps", *LIGHT], capture_output=True, text=True)
            if pip.returncode != 0:
                reachable = "Could not find a version" not in pip.stderr and "NewConnectionError" not in pip.stderr
                if reachable:
                    pytest.fail(f"pip install {' '.join(LIGHT)} failed:\n{pip.stderr[-3000:]}")
                pytest.skip(f"pip cannot reach the package registry for {LIGHT[0]}: {pip.stderr.strip().splitlines()[-1]}")
            done.touch()
    return python


def _upstream(python: Path, script: str, tmp_path: Path) -> str:
    run = subprocess.run([str(python), "-c", PRELUDE + script], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout


def test_upstreams_multilingual_t3_has_our_names_and_shapes(light_python, tmp_path):
    script = """
with torch.device("meta"):
    t3 = T3(T3Config.multilingual())
print(json.dumps({name: list(value.shape) for name, value in t3.state_dict().items()}))
"""
    theirs = json.loads(_upstream(light_python, script, tmp_path))
    with torch.device("meta"):
        ours = {name: list(value.shape) for name, value in T3().state_dict().items()}
    assert ours == theirs


@pytest.mark.slow
def test_our_exported_t3_loads_strictly_in_upstreams_class_and_computes_what_ours_does(light_python, tmp_path):
    """A real-size T3 (random weights) exported as training exports it; upstream's T3 loads the file with strict=True
    and its forward pass gives our logits for the same conditioning, text and speech."""
    torch.manual_seed(0)
    ours = T3(T3Settings()).eval()
    speaker = torch.nn.functional.normalize(torch.randn(1, 256), dim=-1)
    prompt, speech = torch.randint(0, 6561, (1, 20)), torch.randint(0, 6561, (1, 12))
    text = torch.tensor([[255, 30, 41, 52, 2, 63, 0]])
    with torch.no_grad():
        logits = ours(speaker, prompt, None, torch.tensor([0.5]), text, torch.tensor([7]), speech, torch.tensor([12]))
    clip = type("Clip", (), {"speaker": speaker[0], "speech_tokens": prompt[0]})()
    from fintts.tts.chatterbox.text import ChatterboxText

    write_voice(tmp_path / "voice", weights=ours.state_dict(), settings=ours.settings, text=ChatterboxText.builtin(2454),
                release=None, t3_file="t3_mtl23ls_v2.safetensors", reference_id="x", clip=clip, emotion=0.5, gen={}, card="")
    del ours
    torch.save({"speaker": speaker, "prompt": prompt, "text": text, "speech": speech}, tmp_path / "inputs.pt")
    script = """
from safetensors.torch import load_file
t3 = T3(T3Config.multilingual())  # as from_local builds it (mtl_tts.py), then loads the file with strict load_state_dict
t3.load_state_dict(load_file("voice/t3_mtl23ls_v2.safetensors"), strict=True)
t3.eval()
x = torch.load("inputs.pt", weights_only=True)
conds = torch.load("voice/conds.pt", weights_only=True)["t3"]  # as upstream's Conditionals.load reads it
cond = T3Cond(**conds)
assert torch.equal(cond.speaker_emb, x["speaker"]) and torch.equal(cond.cond_prompt_speech_tokens, x["prompt"])
start = torch.full((1, 1), t3.hp.start_speech_token)
speech = torch.cat([start, x["speech"]], dim=1)
with torch.no_grad():
    out = t3(t3_cond=cond, text_tokens=x["text"], text_token_lens=torch.tensor([x["text"].shape[1]]),
             speech_tokens=speech, speech_token_lens=torch.tensor([speech.shape[1]]), training=True)
torch.save(out.speech_logits, "theirs.pt")
"""
    _upstream(light_python, script, tmp_path)
    theirs = torch.load(tmp_path / "theirs.pt", weights_only=True)
    torch.testing.assert_close(logits, theirs, rtol=1e-3, atol=1e-3)
