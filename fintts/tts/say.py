"""``fintts say``: Finnish text to a WAV file and/or the speakers, one sentence at a time.

The text comes from the command line, a file or standard input. The voice says it
sentence by sentence (:meth:`fintts.tts.family.Voice.stream`; a family whose model speaks
the whole text at once yields it whole): each sentence is written to the file, and piped to
the player, as soon as it is ready, so the first words play while the rest is still being
synthesised and memory does not grow with the text. Whatever the voice's family, it is opened
through :func:`fintts.tts.voice.load_voice`, which dispatches to the family: this module names none.

Playing needs a program that plays raw PCM from a pipe (``aplay`` of ALSA, ``paplay`` of
PulseAudio/PipeWire, or ``play`` of SoX), or ``afplay`` on macOS, which plays the finished
file. Without one, ``--play`` says which it looked for; the WAV file is still written.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from fintts.tts.family import Voice
from fintts.tts.voice import load_voice
from fintts.tts.voice_format import VOICE_DIR, VoiceError
from fintts.tts.wav import WavWriter, pcm16

#: Players that read 16-bit mono PCM from standard input, as argument lists for a sample rate.
STREAM_PLAYERS: dict[str, Callable[[int], list[str]]] = {
    "aplay": lambda rate: ["aplay", "-q", "-t", "raw", "-f", "S16_LE", "-c", "1", "-r", str(rate), "-"],
    "paplay": lambda rate: ["paplay", "--raw", "--format=s16le", "--channels=1", f"--rate={rate}"],
    "play": lambda rate: ["play", "-q", "-t", "raw", "-e", "signed-integer", "-b", "16", "-c", "1", "-r", str(rate), "-"],
}
#: Players that need a finished file.
FILE_PLAYERS: dict[str, Callable[[Path], list[str]]] = {"afplay": lambda path: ["afplay", str(path)]}


@dataclasses.dataclass
class SpeechReport:
    """What one ``fintts say`` did, with its timings (seconds, from the call's start)."""

    out: Path | None
    seconds: float
    chunks: int
    loaded: float
    first_audio: float
    elapsed: float
    backend: str

    def format(self) -> str:
        where = f"wrote {self.out}: " if self.out else ""
        rtf = (self.elapsed - self.loaded) / self.seconds if self.seconds else float("nan")
        return (f"{where}{self.seconds:.1f} s of speech in {self.chunks} chunk(s) with {self.backend}; voice loaded in "
                f"{self.loaded:.2f} s, first audio after {self.first_audio:.2f} s, all done after {self.elapsed:.2f} s "
                f"(real-time factor {rtf:.2f})")


def read_text(text: str | None, file: str | None, stdin: TextIO) -> str:
    """The text to say: the argument, else the file (``-`` is standard input), else piped standard input."""
    if text is not None and file is not None:
        raise VoiceError("give the text as an argument or with -f FILE, not both")
    if file == "-" or (text is None and file is None and not stdin.isatty()):
        said = stdin.read()
    elif file is not None:
        try:
            said = Path(file).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise VoiceError(f"-f {file}: no such file") from None
        except UnicodeDecodeError:
            raise VoiceError(f"-f {file}: not UTF-8 text; save it as UTF-8") from None
    elif text is not None:
        said = text
    else:
        raise VoiceError('nothing to say: give the text ("Hyvää huomenta!"), -f FILE, or pipe it in')
    if not said.strip():
        raise VoiceError("nothing to say: the text is empty")
    return said


def voice_location(voice: str | None, store: str | None, hub_repo: str | None) -> str:
    """Where the voice is: ``--voice DIR``, ``--store RUN`` (its ``model/``) or ``--hub-repo USER/NAME``."""
    given = [option for option in (voice, store, hub_repo) if option]
    if len(given) != 1:
        raise VoiceError("say which voice: exactly one of --voice DIR (a voice or run folder), --store RUN, "
                         "--hub-repo USER/NAME")
    if store:
        return str(Path(store) / VOICE_DIR)
    return given[0]


def find_player() -> str | None:
    """The first player of :data:`STREAM_PLAYERS`, then :data:`FILE_PLAYERS`, on the PATH; ``None`` if none."""
    return next((name for name in [*STREAM_PLAYERS, *FILE_PLAYERS] if shutil.which(name)), None)


def speak(voice: Voice, text: str, out: Path | None, *, play: bool = False, started: float | None = None,
          warn: Callable[[str], None] | None = None) -> SpeechReport:
    """Say ``text`` into ``out`` (a WAV file) and/or the speakers; ``started``: when loading the voice began."""
    started = time.perf_counter() if started is None else started
    loaded = time.perf_counter() - started
    player = find_player() if play else None
    if play and player is None:
        names = ", ".join([*STREAM_PLAYERS, *FILE_PLAYERS])
        raise VoiceError(f"--play: no audio player found (looked for {names}); install one (e.g. alsa-utils) "
                         "or leave out --play and open the WAV file")
    if out is None and player in FILE_PLAYERS:
        out = Path(tempfile.mkdtemp(prefix="fintts-say-")) / "say.wav"
    speech = voice.stream(text, warn=warn)
    opening = next(speech)  # before any file or player: text with nothing to say fails here
    pipe = subprocess.Popen(STREAM_PLAYERS[player](voice.sample_rate), stdin=subprocess.PIPE) if player in STREAM_PLAYERS else None
    writer = WavWriter(out, voice.sample_rate) if out is not None else None
    samples, chunks, first = 0, 0, None
    try:
        for audio in itertools.chain([opening], speech):
            pcm = pcm16(audio)
            if writer is not None:
                writer.write(pcm)
            if pipe is not None and pipe.poll() is None:
                try:
                    pipe.stdin.write(pcm.tobytes())
                    pipe.stdin.flush()
                except BrokenPipeError:  # the player quit (no audio device, say); its exit code tells below
                    pass
            first = time.perf_counter() - started if first is None else first
            samples, chunks = samples + len(pcm), chunks + 1
    finally:
        if writer is not None:
            writer.close()
        if pipe is not None:
            with contextlib.suppress(BrokenPipeError):
                pipe.stdin.close()
            pipe.wait()
    played = subprocess.run(FILE_PLAYERS[player](out), check=False) if player in FILE_PLAYERS else pipe
    if played is not None and played.returncode != 0:
        failed = f"--play: {player} failed (exit code {played.returncode}; its message is above)"
        if out is None or out.parent.name.startswith("fintts-say-"):  # nothing else was asked for: the command failed
            raise VoiceError(failed + "; check the sound device, or write a file with -o FILE.wav")
        # the file asked for is whole: playing it was the extra, so its failure is said, not the command's end
        (warn or print)(f"{failed}; {out} is complete: play it with any player")
    return SpeechReport(out, samples / voice.sample_rate, chunks, loaded, first or 0.0, time.perf_counter() - started,
                        voice.backend_name)


def say(text: str | None, *, file: str | None = None, out: str | None = None, voice: str | None = None,
        store: str | None = None, hub_repo: str | None = None, speaker: str | None = None, backend: str | None = None,
        int8: bool | None = None, speed: float | None = None, noise: float | None = None, seed: int | None = None,
        play: bool = False, stdin: TextIO = sys.stdin, warn: Callable[[str], None] | None = None) -> SpeechReport:
    """``fintts say`` from its options: read the text, open the voice, speak."""
    if out is None and not play:
        raise VoiceError("say where: -o FILE.wav, --play, or both")
    said = read_text(text, file, stdin)
    started = time.perf_counter()
    spoken = load_voice(voice_location(voice, store, hub_repo), speaker, backend=backend, int8=int8, speed=speed,
                        noise=noise, seed=seed)
    return speak(spoken, said, Path(out) if out else None, play=play, started=started, warn=warn)
