"""Without the MMS voice and without the Hub, ``fintts train`` and ``fintts plan`` say so in one line, at once.

As a person meets it: ``configs/mms-fin.yaml`` as shipped (``init: facebook/mms-tts-fin``), an empty Hugging Face
cache, and either no network or ``HF_HUB_OFFLINE=1``. No network is ``HF_ENDPOINT`` at a local port that drops every
connection it is offered (a reset, which huggingface_hub retries as it retries a refused one: five times per file with
1 to 8 s between, ``_http_backoff_base`` in huggingface_hub 2.4.0's ``utils/_http.py``). "At once" is counted, not
timed: the requests for the voice's files the command made, one where the Hub's retries would make six or more
(huggingface_hub also asks once a day for ``/api/agent-harnesses``, ``utils/_detect_agent.py``: not counted).
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Iterator

import pytest

from trainer_helpers import ROOT, cli

#: every test here starts a process (a fintts command, a server's session, espeak-ng or ffmpeg): not the unit tier
pytestmark = pytest.mark.process

MMS = str(ROOT / "configs" / "mms-fin.yaml")


@pytest.fixture
def dropping_port() -> Iterator[tuple[int, list[int]]]:
    """A local port that reads each request it is sent and resets its connection, and how many of them asked for a
    model's file (a list of one number)."""
    counted = [0]
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)

        def drop_each() -> None:
            while True:
                try:
                    connection, _ = server.accept()
                except OSError:  # the test is over: the socket is closed
                    return
                connection.settimeout(5)
                with contextlib.suppress(OSError):
                    counted[0] += b"/resolve/" in connection.recv(4096).split(b"\r\n", 1)[0]
                connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close = reset
                connection.close()

        thread = threading.Thread(target=drop_each, daemon=True)
        thread.start()
        yield server.getsockname()[1], counted
        server.shutdown(socket.SHUT_RDWR)
    thread.join(timeout=10)


@pytest.mark.parametrize("network", ["no network", "HF_HUB_OFFLINE"])
@pytest.mark.parametrize("command", ["train", "plan"])
def test_without_the_base_voice_train_and_plan_say_what_is_missing_and_how_to_get_it(tmp_path, monkeypatch, dropping_port, network,
                                                                                       command):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))  # an empty cache: the voice was never downloaded
    port, requests = dropping_port
    if network == "no network":
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    else:
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    args = ["--data", "demo", "--store", str(tmp_path / "run")] + (["--no-progress"] if command == "train" else [])
    result = cli(command, MMS, *args, cwd=tmp_path, timeout=200)
    output = result.stdout + result.stderr
    assert result.returncode == 2, output[-3000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "facebook/mms-tts-fin" in errors[0], output[-3000:]
    assert "hf download facebook/mms-tts-fin --local-dir" in errors[0] and "init=" in errors[0]
    assert ("HF_HUB_OFFLINE" in errors[0]) == (network == "HF_HUB_OFFLINE")
    assert "huggingface-cli" not in output and "Traceback" not in output and "Retrying" not in output, output[-3000:]
    assert requests[0] == (1 if network == "no network" else 0), f"{requests[0]} requests: the Hub's retries were made"
