"""``fintts`` on the command line: a thin shell over the library's public API.

Exit codes (stable, for scripts and notebooks):

==  ==========================================================================
0   done: the session ended cleanly (paused for the next session, or finished)
1   training failed (the message says why; the store keeps the last checkpoint)
2   usage, config or data error (unknown setting, missing file, bad value)
3   the run's settings drifted from its checkpoint (see --allow-config-change)
4   the store is unusable or held by another session (see --force)
130 interrupted twice with Ctrl-C (no checkpoint written for the partial step)
==  ==========================================================================
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

from fintts.config import ConfigError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_DRIFT, EXIT_STORE, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130


def _open_store(args, *, required: bool = False):
    """``--hub-repo`` is the Hub store (``--store`` then names its local mirror); ``--store`` alone a folder."""
    from fintts.config import parse_duration
    from fintts.train.stores import open_store

    if getattr(args, "hub_repo", None):
        options = {"root": args.store} if args.store else {}
        if getattr(args, "push_every", None) is not None:
            options["push_every"] = parse_duration(args.push_every, key="--push-every") or 0.0
        if getattr(args, "storage_cap_gb", None) is not None:
            options["storage_cap_gb"] = args.storage_cap_gb
        return open_store(f"hf://{args.hub_repo}", **options)
    if args.store:
        return open_store(args.store)
    if required:
        raise ConfigError(f"fintts {args.command} needs --store PATH or --hub-repo USER/NAME")
    return None


def cmd_train(args) -> int:
    from fintts.train import train

    summary = train(
        args.config,
        overrides=args.overrides,
        store=_open_store(args),
        budget=args.budget,
        max_steps=args.max_steps,
        allow_config_change=args.allow_config_change,
        force=args.force,
        progress=not args.no_progress,
    )
    return EXIT_OK if summary.durable else EXIT_FAILED


def cmd_status(args) -> int:
    store = _open_store(args, required=True)
    status = store.read_status()
    if status is None:
        print(f"no run in {store.url} (no status.json): nothing has been trained there yet", file=sys.stderr)
        return EXIT_STORE
    status = {**status, "store_facts": store.describe()}
    if args.json:
        print(json.dumps(status, indent=1, sort_keys=True))
        return EXIT_OK
    print(format_status(status))
    return EXIT_OK


def format_status(status: dict) -> str:
    from fintts.train.summary import hms

    best = status.get("best")
    lines = [
        f"run         {status.get('run_name')}   ({status.get('task')})   store: {status.get('store')}",
        f"state       {status.get('state')}" + (f"   ({status['reason']})" if status.get("reason") else ""),
        f"step        {status.get('step')} of {status.get('max_steps')}   epoch {status.get('epoch')}",
    ]
    if best:
        lines.append(f"best        {status.get('monitor')} {best['value']:.4g} at step {best['step']}")
    if status.get("loss"):
        loss = {k: v for k, v in status["loss"].items() if k not in {"step", "lr"}}
        lines.append("loss        " + ", ".join(f"{k} {v:.4g}" for k, v in loss.items()))
    lines.append(f"checkpoint  {status.get('latest_checkpoint')}")
    lines.append(f"time used   {hms(status.get('time_used_seconds') or 0)} in {len(status.get('sessions', []))} session(s)")
    facts = {k: v for k, v in status.get("store_facts", {}).items() if k != "store"}
    for key, value in facts.items():
        lines.append(f"{key:<11} {value}")
    lines.append("sessions    started              host                 devices          steps          reason")
    for s in status.get("sessions", []):
        started = time.strftime("%Y-%m-%d %H:%M", time.localtime(s["started"]))
        lines.append(
            f"            {started:<20} {s['host'][:20]:<20} {s['devices'][:16]:<16} "
            f"{s['start_step']:>6} → {s['end_step']:<6} {s['reason']}"
        )
    return "\n".join(lines)


def cmd_push(args) -> int:
    from fintts.train.stores.hub import push

    url = push(args.store, args.hub_repo, force=args.force)
    print(f"pushed {args.store} to {args.hub_repo}: {url}")
    return EXIT_OK


def cmd_pull(args) -> int:
    from fintts.train.stores.hub import pull

    where = pull(args.repo, args.out, checkpoint=args.checkpoint, full=args.full)
    print(f"pulled {args.repo} ({args.checkpoint}{', full run' if args.full else ''}) into {where}")
    return EXIT_OK


def cmd_check(args) -> int:
    from fintts.tts.corpus import check_corpus

    report = check_corpus(Path(args.data), format=args.format, sample_rate=args.sample_rate, progress=not args.no_progress)
    print(report.format_text())
    return EXIT_OK if report.items else EXIT_USAGE


def cmd_eval(args) -> int:
    from fintts.config import load_config
    from fintts.train import checkpoint
    from fintts.tts.vits.task import evaluate_voice

    overrides = [f"data={args.data}"] if args.data else []
    if args.store:
        folder = checkpoint.latest_complete(Path(args.store), log=lambda _: None)
        if folder is None:
            raise ConfigError(f"--store {args.store} holds no complete checkpoint to take the run's settings from")
        config = load_config(folder / "config.yaml", overrides)
        model = Path(args.model or Path(args.store) / "model")
    else:
        if not args.model:
            raise ConfigError("fintts eval needs --store PATH (a run) or --model DIR with --config/--data")
        config = load_config(args.config, overrides)
        model = Path(args.model)
    result = evaluate_voice(model, config.task)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print("    MCD  floor (recording)  sentence")
        for clip in result["clips"]:
            said = "said" if clip["identified"] else "NOT identified"
            print(f"{clip['mcd_db']:7.2f} dB  {clip['floor_db']:5.1f} ({clip['floor_ref_db']:5.1f}) dB  "
                  f"{said} (among {clip['candidates']})  {clip['id']}")
        print(f"mean MCD {result['mcd_mean_db']:.2f} dB over {len(result['clips'])} held-out clips ({model})")
        print(f"sentence identified by its nearest recording: {result['identified']} of {len(result['clips'])} "
              f"(chance: {result['chance']:.1f})")
        print(f"noise floor (loudest vs quietest tenth of 20 ms frames): {result['floor_mean_db']:.1f} dB, "
              f"the recordings {result['floor_ref_mean_db']:.1f} dB (higher is cleaner)")
    return EXIT_OK


def cmd_demo(args) -> int:
    from fintts.tts.demo.run import DEFAULT_BUDGET, DEFAULT_CONFIG, run_demo

    run_demo(store=Path(args.store), budget=args.budget or DEFAULT_BUDGET, out=Path(args.out), config=Path(args.config or DEFAULT_CONFIG),
             extra=["--no-progress"] if args.no_progress else [])
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fintts", description="Fine-tune a Finnish VITS voice across GPU sessions.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("train", help="train one session of a run (resumes automatically)")
    p.add_argument("config", help="YAML config, e.g. configs/demo.yaml")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="override settings, e.g. max_steps=500 data=/kaggle/input/x")
    p.add_argument("--store", help="run folder (default runs/<run_name>)")
    p.add_argument("--hub-repo", metavar="USER/NAME", help="keep the run in this Hugging Face Hub repo")
    p.add_argument("--max-steps", type=int)
    p.add_argument("--budget", help="session length, e.g. 11h30m or 90s (overrides session_limit)")
    p.add_argument("--allow-config-change", action="store_true", help="resume although math-changing settings differ")
    p.add_argument("--force", action="store_true", help="take the run over from another session")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (logs only)")
    p.add_argument("--push-every", help="with --hub-repo: push a full checkpoint at most this often (default 1h; session ends always push)")
    p.add_argument("--storage-cap-gb", type=float, help="with --hub-repo: warn before the repo's storage passes this")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("status", help="where a run stands")
    p.add_argument("--store", help="run folder")
    p.add_argument("--hub-repo", metavar="USER/NAME")
    p.add_argument("--json", action="store_true", help="machine-readable (keys: state, step, epoch, latest_checkpoint, sessions, ...)")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("push", help="upload a local run's newest checkpoint to its Hub repo now")
    p.add_argument("--store", required=True, help="the local run folder")
    p.add_argument("--hub-repo", required=True, metavar="USER/NAME")
    p.add_argument("--force", action="store_true", help="take the lease / move the Hub's latest backwards")
    p.set_defaults(func=cmd_push)

    p = sub.add_parser("pull", help="download a voice (default) or a checkpoint from a Hub run")
    p.add_argument("repo", metavar="USER/NAME")
    p.add_argument("--out", required=True, help="folder to write")
    p.add_argument("--checkpoint", default="model", help="model (the laptop-ready voice), latest, best or step-N")
    p.add_argument("--full", action="store_true", help="the whole run (every checkpoint), usable as --store")
    p.set_defaults(func=cmd_pull)

    p = sub.add_parser("check", help="check a corpus: clips, hours, speakers, and every bad item with the reason")
    p.add_argument("data", help="corpus folder")
    p.add_argument("--format", choices=["ljspeech", "ljspeech-speaker", "pairs", "speakers"], help="force a layout")
    p.add_argument("--sample-rate", type=int, default=16000, help="the model's rate (clips below it are flagged)")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("eval", help="mel-cepstral distortion of a voice on its run's held-out clips")
    p.add_argument("--store", help="a run folder: its model/ and its settings")
    p.add_argument("--model", help="an exported voice folder (default: <store>/model)")
    p.add_argument("--config", help="the run's config, when no --store is given")
    p.add_argument("--data", help="corpus to take held-out clips from (default: the run's)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("demo", help="train the embedded demo voice in two short sessions and write a wav")
    p.add_argument("--store", default="runs/demo")
    p.add_argument("--budget", help="length of each of the two sessions (default 15m)")
    p.add_argument("--out", default="demo.wav")
    p.add_argument("--config", help="default: configs/demo.yaml of this checkout")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    from fintts.train import ConfigDrift
    from fintts.train.stores import StoreError

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for noisy in ("httpx", "httpcore", "huggingface_hub", "urllib3", "filelock"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    # key=value overrides may stand anywhere among train's options
    stray = [item for item in extra if item.startswith("-") or "=" not in item or args.command != "train"]
    if stray:
        parser.error(f"unrecognized arguments: {' '.join(stray)}")
    if extra:
        args.overrides = list(args.overrides) + extra
    try:
        return args.func(args)
    except ConfigDrift as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_DRIFT
    except (ConfigError, FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except StoreError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_STORE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
