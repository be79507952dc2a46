"""``fintts`` on the command line: a thin shell over the library's public API.

Exit codes (stable, for scripts and notebooks):

==  ==========================================================================
0   done: the session ended cleanly (paused for the next session, or finished)
1   training failed, or its final checkpoint is not safe in the store (the message says why and what to do)
2   usage, config or data error (unknown setting, missing file, bad value)
3   the run's settings drifted from its checkpoint (see --allow-config-change)
4   the store (or Kaggle) is unusable, or held by another session (see --force)
130 interrupted twice with Ctrl-C, or by a signal before training began (the run is unchanged)
141 the output's reader went away (``fintts check DIR | head``): the command stopped quietly
==  ==========================================================================

Every command that reads a config takes it the same ways (:mod:`fintts.cli.args`): ``CONFIG``
or ``--config CONFIG``, ``--data DIR``, and ``key=value`` overrides anywhere among the options.

Exit 2, 3 and 4 come from fintts's own error types (:mod:`fintts.errors`); any other
exception is a bug and ends with its traceback. Each command imports the library modules it
uses inside its function: the base install runs ``fintts say`` and ``fintts pull`` without
torch, and they load nothing of the trainer. The Kaggle commands (``fintts kaggle …``) are in
:mod:`fintts.cli.kaggle`, under the same rule; what several commands share, in :mod:`fintts.cli.args`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
import time
from pathlib import Path

from fintts.cli import args as cli_args
from fintts.cli.args import EXIT_DRIFT, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_STORE, EXIT_USAGE
from fintts.cli.kaggle import add_kaggle_commands
from fintts.errors import ConfigDrift, ConfigError, StoreError, UsageError

#: What the base install leaves out (pyproject's [torch] and [train] extras): a command that
#: needs it says which extra to install instead of showing a traceback.
TRAINING_STACK = {"torch", "transformers", "accelerate", "peft", "safetensors", "onnx", "scipy", "matplotlib", "tensorboard", "kaggle"}

#: Options of ``fintts train`` that are config settings: each becomes the override ``key=value``.
TRAIN_OPTIONS = {
    "store": "store", "hub_repo": "hub_repo", "max_steps": "max_steps", "budget": "budget",
    "push_every": "push_every", "storage_cap_gb": "storage_cap_gb",
}


def _store_settings(args):
    """``--store``/``--hub-repo`` of the commands without a config, checked as the same config keys."""
    from fintts.train.config import TrainConfig, check_train_config

    if not (args.store or getattr(args, "hub_repo", None)):
        raise ConfigError(f"fintts {args.command} needs --store PATH or --hub-repo USER/NAME")
    hub_repo = getattr(args, "hub_repo", None) or ""
    settings = TrainConfig(store=args.store or "", hub_repo=hub_repo, run_name=hub_repo.split("/")[-1])
    check_train_config(settings)
    return settings


def cmd_train(args) -> int:
    from fintts.train.session.launcher import LaunchFailed, end_process, launch

    options = [f"{key}={getattr(args, flag)}" for flag, key in TRAIN_OPTIONS.items() if getattr(args, flag) is not None]
    try:
        summary = launch(
            args.config,
            overrides=list(args.overrides) + options,
            num_processes=args.num_processes,
            allow_config_change=args.allow_config_change,
            force=args.force,
            progress=not args.no_progress,
            summary_json=args.summary_json,  # written before a launched process leaves its process group
            # the fintts command: --budget counts from this process's start, its imports are part of the session; a call of
            # main([...]) inside a program that has run for a while counts from the call
            own_process=args.own_process,
        )
    except LaunchFailed as err:
        print(f"error: {err}", file=sys.stderr)
        return err.exit_code
    return end_process(EXIT_OK if summary.succeeded else EXIT_FAILED)


def cmd_bench(args) -> int:
    from accelerate import PartialState

    from fintts.train.config import load_config
    from fintts.train.tools import bench

    config = load_config(args.config, list(args.overrides) + ([f"store={args.store}"] if args.store else []))
    report = bench.bench(
        config, compare=args.compare, steps=args.steps, warmup=args.warmup, search=args.search,
        log=(lambda message: print(message, file=sys.stderr)) if args.json else print,
    )
    if not PartialState().is_main_process:
        return EXIT_OK
    kept = bench.save(config, report)
    if args.json:
        print(json.dumps(report.to_dict(), indent=1))
    else:
        print(bench.format_report(report))
        print(f"kept in {kept} for fintts plan")
    return EXIT_OK


def cmd_plan(args) -> int:
    from fintts.train.config import load_config
    from fintts.train.tools import plan

    overrides = list(args.overrides) + ([f"store={args.store}"] if args.store else [])
    if args.session_hours is not None:
        print(f"note: --session-hours is now --budget (e.g. --budget {args.session_hours:g}h); the old option is still read, "
              "but not for ever", file=sys.stderr)
        overrides.append(f"budget={args.session_hours * 3600:g}")
    overrides += [f"budget={args.budget}"] if args.budget else []
    config = load_config(args.config, overrides)
    assumptions = plan.Assumptions(quota_hours=args.quota_hours, install_seconds=args.install_seconds, price_per_hour=args.price)
    items, items_source = plan.count_items(config, args.samples, log=lambda message: print(message, file=sys.stderr))
    first = None
    if args.step_seconds is not None:
        step = plan.Figure(args.step_seconds, "given: --step-seconds")
    else:
        from fintts.train.tools import bench

        try:
            report = bench.for_plan(config, file=args.bench, device=args.device, log=lambda message: print(message, file=sys.stderr))
        except UsageError as err:  # e.g. offline, without the model to bench: a plan needs only a step's time
            if args.bench or "--step-seconds" in str(err):
                raise
            raise UsageError(f"{err} Or plan without a bench here: --step-seconds S, a step's time on the GPU that will "
                             "train (1-2 s for configs/mms-fin.yaml on a T4: docs/planning-and-speed.md)") from None
        step = plan.Figure(report.base.seconds_per_step, f"measured: bench on {report.device}, "
                                                         f"{time.strftime('%Y-%m-%d', time.localtime(report.measured))}")
        first = dataclasses.asdict(report.first)
    result = plan.plan_run(
        config.train, config_name=args.config, items=items, items_source=items_source, step=step,
        first_session=first, assumptions=assumptions,
    )
    print(json.dumps(result.to_dict(), indent=1) if args.json else plan.format_plan(result))
    return EXIT_OK


def cmd_status(args) -> int:
    from fintts.train.report.summary import format_status
    from fintts.train.session.store_choice import store_for
    from fintts.train.tools import plan

    store = store_for(_store_settings(args), read_only=True)
    status = plan.run_status(store, plan.Assumptions(quota_hours=args.quota_hours))
    if status is None:
        print(f"no run in {store.url} (no status.json): nothing has been trained there yet", file=sys.stderr)
        return EXIT_STORE
    if args.json:
        print(json.dumps(status, indent=1, sort_keys=True))
        return EXIT_OK
    print(format_status(status, args.quota_hours))
    return EXIT_OK


def cmd_push(args) -> int:
    from fintts.train.stores.hub import push

    settings = _store_settings(args)
    url = push(settings.local_dir(), settings.hub_repo, force=args.force)
    print(f"pushed {args.store} to {args.hub_repo}: {url}")
    return EXIT_OK


def cmd_pull(args) -> int:
    if args.samples:
        from fintts.train.config import TrainConfig, check_train_config
        from fintts.train.run.layout import TENSORBOARD_DIR
        from fintts.train.stores.hub import pull

        if args.full:
            raise UsageError("--samples and --full pull different things: choose one")
        check_train_config(TrainConfig(hub_repo=args.repo))
        where = pull(args.repo, args.out, checkpoint=args.checkpoint, samples=True)
        print(f"pulled {args.repo}'s samples into {where} (listen to its .wav files); the curves, with each validation's "
              f"audio: tensorboard --logdir {Path(args.out) / TENSORBOARD_DIR}")
        return EXIT_OK
    if args.checkpoint == "model" and not args.full:  # the voice: needs no torch, and comes with model.onnx
        from fintts.tts.hub_voice import pull_voice

        where = pull_voice(args.repo, args.out, onnx=not args.no_onnx)
    else:
        from fintts.train.config import TrainConfig, check_train_config
        from fintts.train.stores.hub import pull

        check_train_config(TrainConfig(hub_repo=args.repo))
        where = pull(args.repo, args.out, checkpoint=args.checkpoint, full=args.full)
    print(f"pulled {args.repo} ({args.checkpoint}{', full run' if args.full else ''}) into {where}")
    return EXIT_OK


def cmd_publish(args) -> int:
    from fintts.tts.families import family_of_store

    family = family_of_store(args.store)
    private = False if args.public else True if args.private else None  # None, True: private, an existing public repo refused
    published = family.operation("publish")(
        args.store, args.hub_repo, private=private, checkpoint=args.checkpoint, onnx=not args.no_onnx, speaker=args.speaker,
        say=lambda message: print(f"note: {message}", file=sys.stderr))
    print(published.format())
    return EXIT_OK


def cmd_check(args) -> int:
    from fintts.tts.corpus.enough import too_few_to_check

    report = cli_args.checked_corpus(args)
    print(json.dumps(report.to_json(), indent=1) if args.json else report.format_text())
    note = too_few_to_check({name: stats.clips for name, stats in report.speakers.items()})
    if note:
        print(f"note: {note}", file=sys.stderr)
    return EXIT_OK if report.items else EXIT_USAGE


def cmd_prepare(args) -> int:
    from fintts.tts.corpus.prepare import SplitSettings, prepare_corpus

    settings = SplitSettings(min_pause=args.min_pause, keep_silence=args.keep_silence, min_seconds=args.min_seconds,
                             max_seconds=args.max_seconds, threshold_db=args.threshold_db)
    print(prepare_corpus(args.recordings, args.out, settings=settings, script=args.script, force=args.force).format_text())
    return EXIT_OK


def cmd_transcribe(args) -> int:
    from fintts.tts.corpus.transcribe import transcribe_corpus

    print(transcribe_corpus(args.corpus, args.model, device=args.device, redo=args.redo).format_text())
    return EXIT_OK


def cmd_speakers(args) -> int:
    from fintts.tts.corpus.speakers import analyse_speakers

    analysis = analyse_speakers(cli_args.checked_corpus(args))
    print(json.dumps(analysis.to_json(), indent=1) if args.json else analysis.format_text())
    return EXIT_OK if analysis.best else EXIT_USAGE


def cmd_eval(args) -> int:
    from fintts.tts.evaluation import evaluate_run

    scores = evaluate_run(store=args.store, model=args.model, config=args.config, overrides=args.overrides)
    print(json.dumps(scores.figures, indent=1) if args.json else scores.text)
    return EXIT_OK


def cmd_say(args) -> int:
    from fintts.tts.say import say

    report = say(
        args.text, file=args.file, out=args.out, voice=args.voice, store=args.store, hub_repo=args.hub_repo,
        speaker=args.speaker, backend=args.backend, int8=False if args.fp32 else None, speed=args.speed, noise=args.noise,
        seed=args.seed, play=args.play, warn=lambda message: print(f"note: {message}", file=sys.stderr),
    )
    print(report.format())
    return EXIT_OK


def cmd_normalize(args) -> int:
    """What the voice will say: the text split as the voice splits it, each sentence normalised, one a line."""
    from fintts.tts.say import read_text
    from fintts.tts.text import FinnishText, split_sentences
    from fintts.tts.voice import voice_folder

    said = read_text(args.text, args.file, sys.stdin)
    text = FinnishText.from_folder(voice_folder(args.voice)) if args.voice else FinnishText.default()
    unknown = text.unknown_chars(said)
    if unknown:
        print(f"note: left out characters this voice cannot say: {', '.join(repr(c) for c in sorted(unknown))}", file=sys.stderr)
    for chunk in split_sentences(said):
        if spoken := text.normalize(chunk.text):
            print(spoken)
    return EXIT_OK


def cmd_export(args) -> int:
    from fintts.tts.voice import find_voice
    from fintts.tts.voice_format import VOICE_DIR, VoiceError

    if bool(args.voice) == bool(args.store):
        raise VoiceError("fintts export needs exactly one of --voice DIR or --store RUN")
    if args.onnx == args.piper:
        raise VoiceError("fintts export needs exactly one of --onnx (fintts's own graphs) or --piper (a Piper voice)")
    if args.out and not args.piper:
        raise VoiceError("--out names a Piper voice's file: use it with --piper")
    started = time.perf_counter()
    folder, family = find_voice(args.voice or Path(args.store) / VOICE_DIR)
    written = family.operation("export")(folder, piper=args.piper, out=Path(args.out) if args.out else None, int8=not args.fp32)
    print(f"wrote {', '.join(str(path) for path in written)} in {time.perf_counter() - started:.1f} s")
    return EXIT_OK


def cmd_env(args) -> int:
    from fintts.train.tools.environment import describe, format_text

    facts = describe(args.store, hub=not args.no_hub)
    if args.gpus:
        from fintts.train.processes.collective_check import check_devices

        facts["collectives"] = dataclasses.asdict(check_devices(args.num_processes))
    print(json.dumps(facts, indent=1) if args.json else format_text(facts))
    return EXIT_FAILED if not facts.get("collectives", {"ok": True})["ok"] else EXIT_OK


def cmd_merge(args) -> int:
    from fintts.tts.voice import find_voice

    started = time.perf_counter()
    folder, family = find_voice(args.voice)
    speaker, speakers = family.operation("merge")(folder, Path(args.out), args.speaker, onnx=not args.no_onnx)
    print(f"wrote {args.out}: the voice of {speaker}'s adapter folded in (speakers: {', '.join(speakers) or '-'}) "
          f"in {time.perf_counter() - started:.1f} s")
    return EXIT_OK


def cmd_demo(args) -> int:
    from fintts.train.config import find_config
    from fintts.tts.demo.run import DEFAULT_BUDGET, DEFAULT_CONFIG, DemoSessionFailed, run_demo

    try:
        run_demo(store=Path(args.store) if args.store else None, budget=args.budget or DEFAULT_BUDGET,
                 out=Path(args.out) if args.out else None, config=find_config(args.config) if args.config else DEFAULT_CONFIG,
                 overrides=list(args.overrides), extra=["--no-progress"] if args.no_progress else [])
    except DemoSessionFailed as err:  # the session said why on its own lines: one more, without a traceback
        print(f"error: {err}", file=sys.stderr)
        return err.exit_code
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fintts", description="Fine-tune a Finnish VITS voice across GPU sessions.")
    cli_args.add_version(parser)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("train", help="train one session of a run (resumes automatically)")
    cli_args.add_config_arguments(p)
    p.add_argument("--store", help="the run's local folder (store=; default runs/<run_name>, with --hub-repo runs/<repo name>)")
    p.add_argument("--hub-repo", metavar="USER/NAME", help="keep the run in this Hugging Face Hub repo (hub_repo=)")
    p.add_argument("--max-steps", help="stop the run at this step (max_steps=)")
    p.add_argument("--budget", help="this session's length, e.g. 11h30m or 90s (budget=)")
    p.add_argument("--allow-config-change", action="store_true", help="resume although math-changing settings differ")
    p.add_argument("--force", action="store_true", help="take the run over from another session")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (logs only)")
    p.add_argument("--push-every", help="with --hub-repo: push a full checkpoint at most this often "
                   "(push_every=; default 1h; a session's end always pushes)")
    p.add_argument("--storage-cap-gb", help="with --hub-repo: warn before the repo's storage passes this (storage_cap_gb=)")
    p.add_argument("--num-processes", type=int, metavar="N",
                   help="training processes, one per device (default: one per visible GPU, 1 on the CPU)")
    p.add_argument("--summary-json", metavar="PATH", help="also write the session's summary to PATH as JSON")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("bench", help="time real training steps of a config on this machine (and its speed switches)")
    cli_args.add_config_arguments(p, example="configs/mms-fin.yaml")
    p.add_argument("--compare", action="store_true", help="also each speed switch, one at a time, as one table")
    p.add_argument("--steps", type=int, default=3, help="timed optimizer steps per configuration (default 3)")
    p.add_argument("--warmup", type=int, default=1, help="untimed steps first (default 1)")
    search = p.add_mutually_exclusive_group()
    search.add_argument("--no-search", dest="search", action="store_false", default=None,
                        help="on CUDA: skip the search for the largest micro-batch")
    search.add_argument("--search", dest="search", action="store_true",
                        help="search for the largest micro-batch on any device (by default on CUDA only)")
    p.add_argument("--store", help="the run's folder, where the result is kept for fintts plan (default runs/<run_name>)")
    p.add_argument("--json", action="store_true", help="the report as JSON on stdout (progress on stderr)")
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("status", help="where a run stands")
    p.add_argument("--store", help="run folder (with --hub-repo: its local mirror, default runs/<name>)")
    p.add_argument("--hub-repo", metavar="USER/NAME", help="the run's Hugging Face Hub repo (what fintts train --hub-repo named)")
    p.add_argument("--json", action="store_true",
                   help="machine-readable (keys: state, step, epoch, latest_checkpoint, sessions, estimate, ...)")
    p.add_argument("--quota-hours", type=float, default=30.0, help="GPU hours a week, for the estimate (default 30: Kaggle)")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("plan", help="steps, epochs, sessions and weeks of GPU quota a run needs, from a measured bench")
    items = p.add_mutually_exclusive_group()
    cli_args.add_config_arguments(p, example="configs/mms-fin.yaml", data_group=items,
                                  data_help="count the training items of this corpus (data=)")
    items.add_argument("--samples", type=int, help="plan for this many training items")
    p.add_argument("--quota-hours", type=float, default=30.0, help="GPU hours a week (default 30: Kaggle's weekly quota)")
    p.add_argument("--budget", help="length of one session, e.g. 11h30m (budget=; default: the config's, auto: Kaggle's 12 h)")
    p.add_argument("--session-hours", type=float, help=argparse.SUPPRESS)  # the old name of --budget, in hours
    p.add_argument("--price", type=float, help="price of one GPU hour, for a cost")
    p.add_argument("--install-seconds", type=float, default=180.0,
                   help="a fresh session's install and model download before training (assumed; default 180)")
    p.add_argument("--device", help="use the kept bench of the device whose name contains this (e.g. T4); default: this machine")
    p.add_argument("--bench", help="a bench from elsewhere: the output of fintts bench --json")
    p.add_argument("--step-seconds", type=float, help="plan with this step time instead of a bench (an expectation, not a measurement)")
    p.add_argument("--store", help="the run's folder with the kept benches (default runs/<run_name>)")
    p.add_argument("--json", action="store_true", help="keys: steps_per_epoch, total_steps, epochs, sessions, weeks, gpu_hours, ...")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("push", help="upload a local run's newest checkpoint to its Hub repo now")
    p.add_argument("--store", required=True, help="the local run folder")
    p.add_argument("--hub-repo", required=True, metavar="USER/NAME", help="the run's Hugging Face Hub repo to push to")
    p.add_argument("--force", action="store_true", help="take the lease / move the Hub's latest backwards")
    p.set_defaults(func=cmd_push)

    p = sub.add_parser("pull", help="download a voice (default) or a checkpoint from a Hub run")
    p.add_argument("repo", metavar="USER/NAME", help="the run's Hugging Face Hub repo (what fintts train --hub-repo named)")
    p.add_argument("--out", required=True, help="folder to write")
    p.add_argument("--checkpoint", default="model", help="model (the laptop-ready voice), latest, best or step-N")
    p.add_argument("--full", action="store_true", help="the whole run (every checkpoint), usable as --store")
    p.add_argument("--no-onnx", action="store_true", help="with the voice: do not export model.onnx here when the run has none")
    p.add_argument("--samples", action="store_true", help="only the newest checkpoint's samples (or --checkpoint's), tb/, "
                   "loss.png and status.json, no weights: listen and read the curves while the run trains")
    p.set_defaults(func=cmd_pull)

    p = sub.add_parser("publish", help="put a run's voice at the root of a Hub repo of its own, with a model card "
                                       "(pipeline(\"text-to-speech\"), the Hub's widget, Piper)")
    p.add_argument("--store", required=True, help="the run: its local folder, or hf://USER/RUN for a Hub run")
    p.add_argument("--hub-repo", required=True, metavar="USER/NAME", help="the repo to publish to (created when new; "
                   "a re-publish replaces its files)")
    visibility = p.add_mutually_exclusive_group()
    visibility.add_argument("--private", action="store_true", help="the default, said aloud: a new repo is private and an "
                            "existing public one is refused")
    visibility.add_argument("--public", action="store_true", help="publish publicly: a new repo is created public, an existing "
                            "public one is used (default: private, and an existing public repo refused; the voice reproduces a person)")
    p.add_argument("--checkpoint", metavar="step-N", help="publish this checkpoint's weights (or latest, best) instead of "
                   "the run's best voice (model/)")
    p.add_argument("--no-onnx", action="store_true", help="do not make model.onnx and model.int8.onnx when the voice has none")
    p.add_argument("--speaker", help="a voice of several speakers: the one the repo's root speaks (default: the first); "
                   "all of them go to all-speakers/")
    p.set_defaults(func=cmd_publish)

    p = sub.add_parser("say", help="speak Finnish text into a wav file (and the speakers) with a trained voice")
    p.add_argument("text", nargs="?", help='the text ("Hyvää huomenta!"); or -f FILE, or pipe it in')
    p.add_argument("-f", "--file", help="read the text from this UTF-8 file (- for standard input)")
    p.add_argument("-o", "--out", help="wav file to write")
    p.add_argument("--voice", help="a voice folder (a run's model/, or what fintts pull wrote) or a run folder")
    p.add_argument("--store", help="a run folder: its model/")
    p.add_argument("--hub-repo", metavar="USER/NAME", help="a Hub run: its model/, downloaded once and cached")
    p.add_argument("--speaker", help="name or number of the speaker of a multi-speaker voice (default: the first)")
    p.add_argument("--speed", type=float, help="speaking rate, 1 = the voice's own (default)")
    p.add_argument("--noise", type=float, help="sampling temperature of the sound (default: the voice's, 0.667 for MMS)")
    p.add_argument("--seed", type=int, help="the same seed and text give the same audio")
    p.add_argument("--backend", choices=["onnx", "torch"], help="default: onnx when the voice has model.onnx")
    p.add_argument("--fp32", action="store_true", help="ONNX: the float32 model.onnx instead of model.int8.onnx")
    p.add_argument("--play", action="store_true", help="also play it as it is synthesised (aplay, paplay, SoX play or afplay)")
    p.set_defaults(func=cmd_say)

    p = sub.add_parser("normalize", help="print what a voice will say for Finnish text, one sentence a line")
    p.add_argument("text", nargs="?", help='the text ("Lipun saa 12 €:lla."); or -f FILE, or pipe it in')
    p.add_argument("-f", "--file", help="read the text from this UTF-8 file (- for standard input)")
    p.add_argument("--voice", help="use this voice's characters (a voice or run folder, or a Hub repo); default: the built-in set")
    p.set_defaults(func=cmd_normalize)

    p = sub.add_parser("export", help="write model.onnx and model.int8.onnx, or a Piper voice, from a voice folder (needs torch)")
    p.add_argument("--onnx", action="store_true", help="fintts's ONNX graphs and the Piper voice, into the voice folder")
    p.add_argument("--piper", action="store_true", help="a Piper voice: NAME.onnx + NAME.onnx.json (Piper, Home Assistant)")
    p.add_argument("--out", help="--piper: the voice's NAME.onnx (default: fi_FI-fintts.onnx in the voice folder)")
    p.add_argument("--voice", help="a voice folder (save_pretrained layout)")
    p.add_argument("--store", help="a run folder: its model/")
    p.add_argument("--fp32", action="store_true", help="model.onnx only, no int8 graph")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("merge", help="fold a LoRA adapter into its base: a standalone voice (plain transformers loads it)")
    p.add_argument("voice", help="a voice folder with adapters/<speaker>/ (a run's model/) or its run folder")
    p.add_argument("--speaker", help="whose adapter (default: the only one)")
    p.add_argument("--out", required=True, help="folder to write")
    p.add_argument("--no-onnx", action="store_true", help="leave out model.onnx and model.int8.onnx")
    p.set_defaults(func=cmd_merge)

    p = sub.add_parser("prepare", help="cut long recordings at their pauses into a corpus: clips and a transcript table to fill in")
    p.add_argument("recordings", nargs="+", help="audio files (wav, flac, ogg, mp3) or folders of them")
    p.add_argument("--out", required=True, help="corpus folder to write (wavs/, metadata.csv, clips.tsv)")
    p.add_argument("--script", help="the text you read aloud: each sentence that lines up in time with a stretch of speech "
                   "is a clip with its text; the others are named")
    p.add_argument("--min-pause", type=float, default=0.35, help="seconds of silence that end a clip (default 0.35)")
    p.add_argument("--keep-silence", type=float, default=0.2, help="seconds of the pause kept at each end of a clip (default 0.2)")
    p.add_argument("--min-seconds", type=float, default=1.0, help="a shorter stretch joins the neighbour nearer in time (default 1)")
    p.add_argument("--max-seconds", type=float, default=15.0,
                   help="a longer one is cut at its longest shorter pause, never inside a word: without one it is left out "
                   "and named (default 15)")
    p.add_argument("--threshold-db", type=float, help="silence below this level in dBFS (default: from each recording's own levels)")
    p.add_argument("--force", action="store_true",
                   help="replace the corpus already in --out (its clips and tables; the old metadata.csv is kept as a .bak)")
    p.set_defaults(func=cmd_prepare)

    p = sub.add_parser("transcribe", help="a speech recogniser's draft of a prepared corpus's empty transcripts, to correct ([train])")
    p.add_argument("corpus", help="the folder fintts prepare wrote (its metadata.csv is filled in place)")
    p.add_argument("--model", required=True, help="a Finnish-capable recogniser on the Hub or a local folder: a Whisper "
                   "checkpoint (told the language is Finnish) or a wav2vec2-style CTC model")
    p.add_argument("--device", help="where it runs, e.g. cuda (default: the CPU, slow)")
    p.add_argument("--redo", action="store_true", help="draft every line again, replacing transcripts already written")
    p.set_defaults(func=cmd_transcribe)

    p = sub.add_parser("check", help="check a corpus: clips, hours, speakers, and every bad item with the reason")
    cli_args.add_corpus_arguments(p)
    p.add_argument("--sample-rate", type=int, default=16000, help="the model's rate (clips below it are flagged)")
    p.add_argument("--json", action="store_true", help='{"format", "looked_for", "clips", "hours", "speakers", '
                                                       '"sample_rates", "problems": [{"path", "reason"}], ...}')
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("speakers", help="per speaker: usable clips and minutes, bad clips, clip length, sample rates; the best one")
    cli_args.add_corpus_arguments(p)
    p.add_argument("--json", action="store_true", help='{"speakers": [{"name", "clips", "minutes", "bad", ...}], "best": NAME}')
    p.set_defaults(func=cmd_speakers)

    p = sub.add_parser("eval", help="mel-cepstral distortion of a voice on its run's held-out clips")
    p.add_argument("--store", help="a run folder: its model/ and its settings")
    p.add_argument("--model", help="an exported voice folder (default: <store>/model)")
    cli_args.add_config_arguments(p, required=False, data_help="corpus to take held-out clips from (data=; default: the run's)")
    p.add_argument("--json", action="store_true", help="the scores as JSON (per clip and the means), for a script")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("env", help="what a session runs on: platform, time left, GPUs, disk, Hub token and Hub")
    p.add_argument("--store", default="runs", help="where checkpoints go, for the free space (default runs)")
    p.add_argument("--no-hub", action="store_true", help="do not contact the Hub")
    p.add_argument("--gpus", action="store_true",
                   help="also check that the training processes can talk: one all-reduce and a barrier on NCCL "
                        "(one process per GPU; gloo without GPUs), failing within a minute with the ways out")
    p.add_argument("--num-processes", type=int, metavar="N", help="with --gpus: check N processes (default: one per GPU, 2 on a CPU)")
    p.add_argument("--json", action="store_true", help="the facts as JSON, for a script")
    p.set_defaults(func=cmd_env)

    add_kaggle_commands(sub)

    p = sub.add_parser("demo", help="train the embedded demo voice in two short sessions and write a wav")
    p.add_argument("--store", help="the demo run's folder (default runs/demo; with --data DIR runs/demo-<DIR's name>); "
                   "again: trains it further")
    p.add_argument("--budget", help="length of each of the two sessions (default 15m)")
    p.add_argument("--out", help="the wav the voice says its sentence into (default: demo.wav in the run's folder)")
    cli_args.add_config_arguments(p, required=False, example="configs/demo.yaml (default: this checkout's)",
                                  data_help="train the demo on this corpus instead of the embedded one (data=)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (logs only)")
    p.set_defaults(func=cmd_demo)
    return parser


@cli_args.quiet_on_closed_pipe
def main(argv: list[str] | None = None) -> int:
    # fintts's own lines; of the libraries' only warnings (whatever their loggers are named: no request logs)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logging.getLogger("fintts").setLevel(logging.INFO)
    # huggingface_hub gives its logger a handler of its own and lets it propagate to the root's as well
    # (huggingface_hub/utils/logging.py, _configure_library_root_logger): each warning would show twice
    logging.getLogger("huggingface_hub").propagate = False
    args = cli_args.parse(build_parser(), argv)
    args.own_process = argv is None  # the process's own command line (the fintts command, python -m fintts)
    try:
        return args.func(args)
    except ConfigDrift as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_DRIFT
    except (FileNotFoundError, UsageError) as err:  # a file named on the command line or in a config is missing
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except StoreError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_STORE
    except ModuleNotFoundError as err:
        if (err.name or "").split(".")[0] not in TRAINING_STACK:
            raise
        print(f"error: fintts {args.command} needs {err.name}, which the base (laptop) install leaves out: "
              "pip install 'fintts[train]'", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt as err:
        print(f"interrupted: {err}" if str(err) else "interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def run() -> None:
    """The ``fintts`` command: :func:`main`, then the process ends at once (:mod:`fintts.process_exit` says why)."""
    from fintts.process_exit import exit_process  # imports nothing but the standard library

    exit_process(main())


if __name__ == "__main__":
    run()
