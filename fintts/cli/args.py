"""One command line for every ``fintts`` command that reads a config.

Whatever the command (``train``, ``bench``, ``plan``, ``eval``, ``demo``, ``kaggle push``,
``kaggle run``), a config is named the same ways and settings are changed the same ways:

- the config is the first positional argument *or* ``--config PATH``; both at once is
  allowed only when they name the same file (anything else is an error, not a silent choice);
- ``--data DIR`` is the override ``data=DIR`` (a ``data=`` override that disagrees is an error);
- ``key=value`` overrides may stand anywhere among the options (``fintts train --budget 1h
  configs/demo.yaml max_steps=500``). A first positional that reads ``key=value`` is an
  override, not a config: ``fintts train --config mine.yaml speaker=anna`` works as written.
  The Kaggle commands take no overrides: the notebook runs the config's text as it is (put
  the settings in the config file); they say so instead of ignoring them.

Every command that reads a corpus (``check``, ``speakers``, ``kaggle corpus``) takes it the same
ways too: ``DATA`` and the options of :func:`add_corpus_arguments`, read by :func:`checked_corpus`.

Also here, because every command shares them: the exit codes (:mod:`fintts.cli`'s table),
``fintts --version`` and a closed pipe (``fintts check … | head``), which ends the command
quietly with 141 (128 + SIGPIPE, what a shell reports for any program whose reader went away),
not with a traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import re
import sys
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from fintts.version import __version__

#: ``fintts``'s exit codes (the table in :mod:`fintts.cli`'s docstring), here for every module of commands.
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_DRIFT, EXIT_STORE, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130
#: the exit status of a command whose standard output was closed by its reader.
EXIT_CLOSED_PIPE = 141
#: ``key=value`` as an override reads: a dotted name, then ``=`` (a path such as ``runs/a=b.yaml`` is not one).
OVERRIDE = re.compile(r"^[A-Za-z_][\w.-]*=")


@dataclasses.dataclass(frozen=True)
class ConfigArguments:
    """How one subcommand takes its config, kept on its parsed arguments for :func:`resolve`."""

    parser: argparse.ArgumentParser
    required: bool
    default: str | None
    #: the command applies ``key=value`` overrides (and ``--data`` as ``data=``) itself
    overrides: bool


def add_config_arguments(
    p: argparse.ArgumentParser, *, required: bool = True, default: str | None = None, overrides: bool = True,
    example: str = "configs/demo.yaml", data_help: str = "the corpus folder (data=)", data_group=None,
) -> None:
    """Add ``CONFIG``, ``--config``, ``key=value`` overrides and ``--data`` to the subcommand ``p``.

    ``data_group``: where ``--data`` goes (e.g. a mutually exclusive group of ``p``).
    After parsing, :func:`resolve` leaves the config in ``args.config`` and the overrides
    (``--data`` folded in) in ``args.overrides``.
    """
    shown = f"default {default}" if default else ("required" if required else "optional")
    p.add_argument("config", nargs="?", metavar="CONFIG", help=f"YAML config, e.g. {example} ({shown}; or --config)")
    p.add_argument("--config", dest="config_option", metavar="CONFIG", help="the same as the positional CONFIG")
    if overrides:
        p.add_argument("overrides", nargs="*", metavar="key=value",
                       help="override settings anywhere among the options, e.g. max_steps=500 data=DIR")
    (data_group or p).add_argument("--data", metavar="DIR", help=data_help)
    p.set_defaults(config_arguments=ConfigArguments(p, required, default, overrides))


def parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """``argv`` parsed as ``fintts`` does: overrides anywhere, the config's two spellings reconciled.

    Errors exit 2 with the subcommand's usage, as argparse's own do.
    """
    args, extra = parser.parse_known_args(argv)
    spec: ConfigArguments | None = getattr(args, "config_arguments", None)
    error = spec.parser.error if spec else parser.error
    stray = [item for item in extra if item.startswith("-") or not OVERRIDE.match(item)]
    if stray:
        error(f"unrecognized arguments: {' '.join(stray)}")
    if spec is None:
        if extra:
            error(f"unrecognized arguments: {' '.join(extra)}")
        return args
    overrides = list(getattr(args, "overrides", None) or []) + extra
    positional, option = args.config, args.config_option
    if positional and OVERRIDE.match(positional):  # `fintts train --config mine.yaml speaker=anna`
        overrides.insert(0, positional)
        positional = None
    if overrides and not spec.overrides:
        error(f"{spec.parser.prog} takes no key=value settings ({' '.join(overrides)}): the notebook runs the config "
              "as it is, so put them in your config file and pass it with --config PATH")
    if positional and option and not _same_file(positional, option):
        error(f"two configs: {positional} and --config {option}; give one")
    args.config = positional or option or spec.default
    if args.config is None and spec.required:
        error(f"the config is missing: {spec.parser.prog} CONFIG (or --config CONFIG), e.g. {spec.parser.prog} configs/demo.yaml")
    if spec.overrides and args.data is not None:
        given = [item.partition("=")[2] for item in overrides if item.partition("=")[0].strip() == "data"]
        if any(value != args.data for value in given):
            error(f"--data {args.data} and data={given[-1]} disagree; give one")
        overrides.append(f"data={args.data}")
    args.overrides = overrides
    return args


def add_corpus_arguments(p: argparse.ArgumentParser) -> None:
    """``DATA`` and how to read it, the same for ``fintts check``, ``speakers`` and ``kaggle corpus``: :func:`checked_corpus` reads them."""
    p.add_argument("data", help="corpus folder, hf://datasets/USER/NAME (a Hub dataset), or demo (the embedded one)")
    p.add_argument("--format", help="force a layout: ljspeech, ljspeech-speaker, pairs, speakers, css10, commonvoice, "
                                    "audiofolder, kaldi or hub (default: detected)")
    p.add_argument("--split", help="Common Voice table (default validated), audiofolder/Hub split (default train)")
    p.add_argument("--text-column", help="audiofolder/Hub transcript column (default transcription, text or sentence)")
    p.add_argument("--speaker-column", help="audiofolder/Hub speaker column (default speaker_id or speaker)")
    p.add_argument("--audio-column", help="Hub dataset audio column (default audio)")
    p.add_argument("--cache", help="where a Hub dataset is downloaded and unpacked (default: the Hugging Face cache)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar while the clips are read")
    # The config's limits are the session's to apply; these are the check's. A Chatterbox config takes clips up to 30 s
    # (tts/chatterbox/settings.py), so its corpus is checked, and uploaded by `fintts kaggle corpus`, with --max-seconds 30.
    p.add_argument("--min-seconds", type=float, default=0.5, help="a shorter clip is a problem (default 0.5)")
    p.add_argument("--max-seconds", type=float, default=20.0,
                   help="a longer clip is a problem (default 20, VITS's limit; 30 for a Chatterbox corpus)")


def checked_corpus(args):
    """The corpus ``DATA`` names, read and checked with the options :func:`add_corpus_arguments` added."""
    from fintts.tts.corpus import ReadOptions, check_corpus  # the task's corpus reader: only the commands that read a corpus load it
    from fintts.tts.corpus.data_names import data_root

    options = ReadOptions(split=args.split or "", text_column=args.text_column or "", speaker_column=args.speaker_column or "",
                          audio_column=args.audio_column or "", cache_dir=Path(args.cache) if args.cache else None)
    sample_rate = getattr(args, "sample_rate", 16000)
    return check_corpus(data_root(args.data), format=args.format, options=options, sample_rate=sample_rate,
                        min_seconds=args.min_seconds, max_seconds=args.max_seconds, progress=not args.no_progress)


def _same_file(a: str, b: str) -> bool:
    return a == b or Path(a).expanduser().resolve() == Path(b).expanduser().resolve()


def add_version(parser: argparse.ArgumentParser) -> None:
    """``fintts --version``: the installed package's version (what ``pip show fintts`` says)."""
    try:
        installed = version("fintts")
    except PackageNotFoundError:  # run from a source tree that was never installed
        installed = __version__
    parser.add_argument("--version", action="version", version=f"fintts {installed}")


def quiet_on_closed_pipe(main: Callable[..., int]) -> Callable[..., int]:
    """``main``, ending with :data:`EXIT_CLOSED_PIPE` and no traceback when its reader closes standard output.

    Python's own recipe: the output is flushed inside, so a late failure is caught too, and
    standard output then points at ``os.devnull`` so that the interpreter's last flush at
    exit cannot fail again ("Exception ignored ... BrokenPipeError").
    """

    @functools.wraps(main)
    def wrapped(*args, **kwargs) -> int:
        try:
            code = main(*args, **kwargs)
            sys.stdout.flush()
            return code
        except BrokenPipeError:
            try:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())
            except (OSError, ValueError):  # no file descriptor (a test's captured stdout): nothing is flushed at exit
                pass
            return EXIT_CLOSED_PIPE

    return wrapped
