"""Without the MMS voice and without the Hub, ``fintts train`` and ``fintts plan`` say so in one line, at once.

As a person meets it: ``configs/mms-fin.yaml`` as shipped (``init: facebook/mms-tts-fin``), an empty Hugging Face
cache, and either no network (``HF_ENDPOINT`` at a closed local port: huggingface_hub's downloads would retry the
refused connection five times per file, each retry logged twice) or ``HF_HUB_OFFLINE=1``.
"""

from __future__ import annotations

import socket
import time

import pytest

from trainer_helpers import ROOT, cli

MMS = str(ROOT / "configs" / "mms-fin.yaml")


def closed_port() -> int:
    """A local port nothing listens on: bound, then released."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("network", ["closed port", "HF_HUB_OFFLINE"])
@pytest.mark.parametrize("command", ["train", "plan"])
def test_without_the_base_voice_train_and_plan_say_what_is_missing_and_how_to_get_it(tmp_path, monkeypatch, network, command):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))  # an empty cache: the voice was never downloaded
    if network == "closed port":
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{closed_port()}")
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    else:
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    args = ["--data", "demo", "--store", str(tmp_path / "run")] + (["--no-progress"] if command == "train" else [])
    started = time.monotonic()
    result = cli(command, MMS, *args, cwd=tmp_path, timeout=200)
    took = time.monotonic() - started
    output = result.stdout + result.stderr
    assert result.returncode == 2, output[-3000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "facebook/mms-tts-fin" in errors[0], output[-3000:]
    assert "hf download facebook/mms-tts-fin --local-dir" in errors[0] and "init=" in errors[0]
    assert ("HF_HUB_OFFLINE" in errors[0]) == (network == "HF_HUB_OFFLINE")
    assert "huggingface-cli" not in output and "Traceback" not in output and "Retrying" not in output, output[-3000:]
    assert took < 60, f"{took:.0f} s: the Hub's retries were waited out"  # imports and the corpus take ~10 s
