"""fintts's Chatterbox export against upstream's own classes: chatterbox-light 1.0.2 (MIT), in a venv of its own.

The venv is made once per machine under pytest's cache, with this interpreter's packages visible
(``--system-site-packages``: our torch 2.13+cpu, transformers, scipy, soundfile, tokenizers, fintts's
dependencies) and, installed without their dependencies (pip would bring a CUDA torch, ~2.6 GB):
chatterbox-light, einops, diffusers and s3tokenizer (what S3Gen is built of) and **torchaudio 2.11.0 without
its C++ extension**. The registry's torchaudio is a CUDA build: its ``lib/*.so`` link
``libtorch_cuda.so`` and ``libc10_cuda.so``, which a CPU torch lacks ("Could not load this library"). Without
those files torchaudio imports as it does when deployed without them (``torchaudio/_extension/utils.py``
``_load_lib`` returns False when the library file is absent), and what chatterbox calls of it is its pure-torch
Python: ``functional.resample``, ``transforms.Resample``, ``functional.melscale_fbanks`` and
``compliance.kaldi.fbank``. What needs the extension (lfilter's compiled loop, forced alignment, RNN-T loss, the
CUDA CTC decoder) chatterbox never calls. So every module below is upstream's or torchaudio's real code; only
the weights are random (the release is on the Hub, out of reach here).

The T3 tests import ``chatterbox.models.t3`` alone (the package's ``__init__`` imports S3Gen, diffusers and
torchaudio: ~10 s a process, which they do not need); the folder test imports the package as a person does.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fintts.tts.chatterbox.export import write_voice
from fintts.tts.chatterbox.t3 import T3, T3Settings

#: every test here starts a process (a fintts command, a server's session, espeak-ng or ffmpeg): not the unit tier
pytestmark = pytest.mark.process

#: installed with --no-deps beside this interpreter's packages (the module's docstring says why)
ROOT = Path(__file__).resolve().parents[3]
LIGHT = ["chatterbox-light==1.0.2", "einops==0.8.1", "diffusers==0.42.1", "s3tokenizer==0.3.0", "torchaudio==2.11.0"]
VENV = "chatterbox-light-1.0.2-torchaudio-2.11.0"
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
    venv = Path(cache.mkdir(VENV)) if cache else request.getfixturevalue("tmp_path_factory").mktemp("light")
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
            for library in venv.glob("lib/python*/site-packages/torchaudio/lib/*.so"):
                library.unlink()  # the CUDA-linked extension (the module's docstring)
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
                weights_from="random", release=None, t3_file="t3_mtl23ls_v2.safetensors", reference_id="x", clip=clip,
                emotion=0.5, gen={}, card="")
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


#: in the venv, as fintts's export runs on Kaggle: the release's frozen parts (upstream's own S3Gen and VoiceEncoder,
#: random weights, saved under the release's names), fintts's ReleasedParts on a 1 s clip (speech tokens, speaker
#: embedding and S3Gen's reference, through torchaudio's real code), then fintts's write_voice with a real-size T3
BUILD = """
import json
from pathlib import Path
import numpy as np, torch
from chatterbox.models.s3gen import S3Gen
from chatterbox.models.tokenizers import MTLTokenizer
from chatterbox.models.voice_encoder import VoiceEncoder
from chatterbox.mtl_tts import punc_norm
from chatterbox_helpers import short_speaking_t3
from fintts.tts.audio import load_audio
from fintts.tts.chatterbox.cache import ClipTokens
from fintts.tts.chatterbox.export import write_voice
from fintts.tts.chatterbox.frozen import ReleasedParts
from fintts.tts.chatterbox.t3 import T3Settings
from fintts.tts.chatterbox.text import VOCAB_FILE, ChatterboxText, finnish_normaliser
from fintts.tts.wav import save_wav

torch.manual_seed(0)
release = Path("release")
release.mkdir()
torch.save(S3Gen().state_dict(), release / "s3gen.pt")
torch.save(VoiceEncoder().state_dict(), release / "ve.pt")
t = torch.arange(24_000) / 24_000
wav = 0.3 * torch.sin(2 * np.pi * 220 * t) * (1 + 0.5 * torch.sin(2 * np.pi * 3 * t)) + 0.01 * torch.randn(len(t))
save_wav(Path("clip.wav"), wav.numpy(), 24_000)
parts = ReleasedParts(release, torch.device("cpu"))
clip16 = load_audio(Path("clip.wav"), 16_000)
speech, speaker = parts.speech_tokens(clip16), parts.speaker_embedding(clip16)
gen = parts.decoder_conditioning(load_audio(Path("clip.wav"), 24_000))
del parts
settings = T3Settings()
text = ChatterboxText.builtin(settings.text_vocab_size)
clip = ClipTokens(text_ids=torch.tensor(text.encode("hei")), speech_tokens=speech, speaker=speaker)
write_voice(Path("voice"), weights=short_speaking_t3(4), settings=settings, text=text, weights_from=str(release),
            release=release,
            t3_file="t3_mtl23ls_v2.safetensors", reference_id="x/clip", clip=clip, emotion=0.5, gen=gen, card="card")
said = "Hyvää huomenta, 12 kissaa!"
theirs = MTLTokenizer(str(Path("voice") / VOCAB_FILE)).encode(punc_norm(finnish_normaliser().normalize(said)), language_id="fi")
print(json.dumps({"speech": list(speech.shape), "speaker_norm": float(speaker.norm()), "gen": sorted(gen),
                  "ours": text.encode(said), "theirs": theirs}))
"""


def _venv_env() -> dict[str, str]:
    """This checkout and the tests' helpers first; the Hub offline (a missing Cangjie5_TC.json is asked of it, and
    this machine reaches no Hub: upstream's tokenizer goes on without it)."""
    paths = [str(ROOT), str(ROOT / "tests" / "tts" / "chatterbox"), os.environ.get("PYTHONPATH")]
    return dict(os.environ) | {"PYTHONPATH": os.pathsep.join(filter(None, paths)), "HF_HUB_OFFLINE": "1"}


@pytest.mark.slow
def test_fintts_say_speaks_our_exported_folder_through_upstreams_from_local(light_python, tmp_path):
    """The folder fintts's export writes, read by upstream's ``ChatterboxMultilingualTTS.from_local`` (strict loads of
    T3, S3Gen and the voice encoder, the vocabulary, conds.pt) and spoken by its ``generate`` (T3's sampling with CFG,
    S3Gen's flow and vocoder) through ``fintts say``. Real: every class (upstream's, fintts's, torchaudio's Python);
    not real: the weights (random, at the release's sizes; T3 changed to say stop after a few tokens, see
    chatterbox_helpers.short_speaking_t3), so the speech is noise and only its form is checked."""
    build = subprocess.run([str(light_python), "-c", BUILD], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                           env=_venv_env())
    assert build.returncode == 0, build.stderr[-3000:]
    made = json.loads(build.stdout.strip().splitlines()[-1])
    assert made["speech"] == [25] and abs(made["speaker_norm"] - 1) < 1e-3  # 25 tokens a second; a unit embedding
    assert made["gen"] == ["embedding", "prompt_feat", "prompt_feat_len", "prompt_token", "prompt_token_len"]
    assert made["ours"] == made["theirs"]  # the ids upstream's generate reads for fintts say's text are those we train on
    out = tmp_path / "out.wav"
    said = subprocess.run([str(light_python), "-m", "fintts", "say", "Hyvää huomenta.", "--voice", "voice", "-o", str(out)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600, env=_venv_env())
    assert said.returncode == 0, said.stderr[-3000:]
    import soundfile

    wav, rate = soundfile.read(out)
    assert rate == 24_000 and 0 < len(wav) <= 10 * 960 and (wav != 0).any()  # a few tokens, 40 ms each
