"""``fintts kaggle``: the command line's Kaggle commands, a thin shell over :mod:`fintts.kaggle` as :mod:`fintts.cli` is.

:func:`add_kaggle_commands` adds ``fintts kaggle wheels|push|corpus|token|run|status`` to the command
line; :func:`fintts.cli.main` runs them, so they end with its exit codes (its docstring's table).
They follow :mod:`fintts.cli`'s rule: each command imports the library modules it uses inside
its function (``tests/test_layers.py`` counts this module as part of the shell), so building the
parser for ``fintts say`` loads neither the ``kaggle`` client (it authenticates when imported)
nor torch nor the trainer.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fintts.cli import args as cli_args
from fintts.cli.args import EXIT_OK
from fintts.errors import UsageError

#: The owner a dry run stages without credentials (kernel-metadata.json's id and the wheels dataset); the person replaces it.
OWNER_PLACEHOLDER = "YOUR-KAGGLE-NAME"


def _kernel_settings(args):
    from fintts.kaggle.kernel import KernelSettings

    return KernelSettings(
        config=args.config, corpus=args.corpus or "", data=args.data or "", hub_repo=args.hub_repo or "",
        store=args.store or "", budget=args.budget or "", internet=not args.no_internet, wheels=args.wheels or "",
    )


def _kernel_options(p: argparse.ArgumentParser) -> None:
    """The notebook's settings, the same for ``fintts kaggle push`` and ``run`` (read back by :func:`_kernel_settings`)."""
    cli_args.add_config_arguments(p, default="mms-fin.yaml", overrides=False, example="mine.yaml (your file: its text goes "
                                  "into the notebook) or mms-fin.yaml (one of fintts's configs/ by name)",
                                  data_help="the corpus folder in the session (default: where Kaggle mounted --corpus, either layout)")
    p.add_argument("--corpus", metavar="OWNER/SLUG", help="your corpus as a Kaggle dataset, attached to the notebook")
    p.add_argument("--hub-repo", metavar="USER/NAME", help="the Hugging Face repo that keeps the run")
    p.add_argument("--store", help="the run's local folder in the session "
                   "(default runs/<repo name> with --hub-repo, else runs/<config name>, or runs/<config name>-<corpus "
                   "folder's name> where that is not the config's data)")
    p.add_argument("--budget", help="each session's length, e.g. 11h30m (default: until Kaggle's 12 h limit)")
    p.add_argument("--no-internet", action="store_true", help="sessions without internet (needs wheels built with --offline)")
    p.add_argument("--wheels", metavar="OWNER/SLUG", help="the wheels dataset (default <you>/fintts-wheels)")


def _dry_run_owner(metadata: str) -> tuple[str, str]:
    """The owner a dry run writes into ``metadata``, and what to tell of it: the credentials' user, else the placeholder.

    A dry run reads nothing of Kaggle's but that name, so it goes on without it: with no credentials, and with an
    API token Kaggle could not be asked about (offline), which the client cannot name without asking.
    """
    from fintts.kaggle.client import KaggleUnreachable, NoKaggleCredentials, connect, user_of

    try:
        return user_of(connect()), ""
    except NoKaggleCredentials:
        why = "no Kaggle credentials here"
    except KaggleUnreachable:
        why = "Kaggle could not be reached to say whose the credentials are"
    return OWNER_PLACEHOLDER, (f"; {why}, so the owner is written {OWNER_PLACEHOLDER}: put your Kaggle name in its place in "
                               f"{metadata} before pushing it")


def cmd_kaggle_wheels(args) -> int:
    import tempfile

    from fintts.kaggle import wheels
    from fintts.kaggle.kernel import KAGGLE_PYTHON

    args.python_version = args.python_version or KAGGLE_PYTHON
    if args.dry_run:
        if not args.out:
            raise UsageError("fintts kaggle wheels --dry-run needs --out DIR (the folder to build the dataset in)")
        user, told = _dry_run_owner(wheels.METADATA)
        wheels.prepare(Path(args.out), user=user, offline=args.offline, python=args.python_version)
        print(f"dataset folder ready in {args.out} (kaggle datasets create -p {args.out} would upload it){told}")
        return EXIT_OK
    from fintts.kaggle.client import connect, user_of

    api = connect()
    with tempfile.TemporaryDirectory(prefix="fintts-wheels-") as tmp:
        folder = wheels.prepare(Path(args.out or tmp), user=user_of(api), offline=args.offline, python=args.python_version)
        ref = wheels.upload(folder, api)
    print(f"uploaded the private dataset {ref}: attach it to the notebook (fintts kaggle push does)")
    return EXIT_OK


def cmd_kaggle_push(args) -> int:
    from fintts.kaggle import kernel

    settings = _kernel_settings(args)
    if args.dry_run:
        if not args.out:
            raise UsageError("fintts kaggle push --dry-run needs --out DIR (the folder to stage the notebook in)")
        user, told = _dry_run_owner(kernel.METADATA)
        kernel.stage(Path(args.out), user, settings)
        print(f"staged {args.out}: kernel-metadata.json and {kernel.NOTEBOOK.name} (kaggle kernels push -p {args.out}){told}")
        return EXIT_OK
    from fintts.kaggle.client import connect
    from fintts.kaggle.kernels import kernel_state
    from fintts.kaggle.secret import token_dataset
    from fintts.kaggle.sessions import create_notebook, kernel_id, push_session

    api = connect()
    name = kernel_id(api, settings.hub_repo)
    if settings.hub_repo and kernel_state(api, name) is None and not token_dataset(api):  # saved without running, for its secret
        create_notebook(settings, api, name, sys.stdout)
        return EXIT_OK
    pushed = push_session(settings, api, say=print)
    print(f"pushed version {pushed.version} of {pushed.kernel}: Kaggle runs it now ({pushed.url})")
    return EXIT_OK


def cmd_kaggle_corpus(args) -> int:
    from fintts.kaggle import corpus
    from fintts.kaggle.client import connect, user_of

    if str(args.data).startswith("hf://") or args.data == "demo":
        raise UsageError(f"{args.data} needs no upload: a session reads it as it is (data: {args.data})")
    api = connect()
    corpus.check_ref(args.dataset, user_of(api))  # before a long check, not after it
    report = cli_args.checked_corpus(args)  # the check of `fintts check`, with its options
    print(report.format_text())
    if not report.items:
        raise UsageError(f"{args.data} has no usable clip (see above): nothing was uploaded")
    url = corpus.upload(args.data, args.dataset, notes=f"{len(report.items)} clips, {report.hours:.2f} h ({report.format})", api=api,
                        report=report, hard_links=args.allow_hard_links)
    print(f"uploaded {args.data} as {args.dataset} ({url}): pass --corpus {args.dataset} to fintts kaggle run")
    return EXIT_OK


def _token_from_stdin() -> str:
    """The token piped in (a password manager, a file), or typed at a prompt that does not echo it.

    Never an option's value: a token on the command line lands in the shell's history, and in every local user's
    ``ps`` while the command runs.
    """
    import getpass

    token = (getpass.getpass("Hugging Face token (not shown): ") if sys.stdin.isatty() else sys.stdin.readline()).strip()
    if not token:
        raise UsageError("--token-stdin: no token came on stdin; pipe it in (e.g. from your password manager) or paste it "
                         "at the prompt")
    return token


def cmd_kaggle_token(args) -> int:
    from fintts.kaggle import hub_token
    from fintts.kaggle.client import connect
    from fintts.kaggle.secret import store_token

    token, source = (_token_from_stdin(), "from stdin") if args.token_stdin else hub_token.found_token()  # never printed
    print(hub_token.check(hub_token.whoami(token, source), source, args.hub_repo or ""))
    ref = store_token(connect(), token)
    print(f"stored it as the private dataset {ref} (no earlier version of it kept): fintts kaggle run attaches it to every "
          "version, and the notebook reads it when Kaggle passes no HF_TOKEN secret. Anyone you share that dataset with can "
          "read it. Run this again after you change the token")
    return EXIT_OK


def cmd_kaggle_run(args, clock=None) -> int:
    """``fintts kaggle run``; ``clock`` (:class:`fintts.kaggle.clock.Clock`, the system's when ``None``) is where a test
    plays the chain's hours in seconds through the command as a person runs it (fintts_stand_ins.played_time)."""
    from fintts.kaggle.clock import SYSTEM_CLOCK
    from fintts.kaggle.sessions import run_sessions

    return run_sessions(_kernel_settings(args), max_sessions=args.max_sessions, gpu_hours=args.gpu_hours, poll=args.poll,
                        request_timeout=args.request_timeout, clock=clock or SYSTEM_CLOCK)


def cmd_kaggle_status(args) -> int:
    from fintts.kaggle.sessions import describe

    print(describe(args.hub_repo or ""))
    return EXIT_OK


def add_kaggle_commands(sub) -> None:
    """``fintts kaggle`` and its commands, added to ``sub`` (the command line's subparsers)."""
    kaggle = sub.add_parser("kaggle", help="the Kaggle notebook: wheels dataset, push, chained sessions, status").add_subparsers(
        dest="kaggle_command", required=True
    )
    p = kaggle.add_parser("wheels", help="build fintts's wheel (and configs) and upload them as the private dataset fintts-wheels")
    p.add_argument("--offline", action="store_true", help="add every dependency's wheel but torch's, for sessions without internet")
    p.add_argument("--python-version", help="Kaggle's Python, for --offline (default: fintts.kaggle.kernel.KAGGLE_PYTHON, 3.12)")
    p.add_argument("--dry-run", action="store_true", help="build the dataset folder (--out) without uploading it")
    p.add_argument("--out", help="folder to build the dataset in (new or empty)")
    p.set_defaults(func=cmd_kaggle_wheels)

    p = kaggle.add_parser("push", help="push the training notebook with these settings; Kaggle runs it on GPU T4 x2")
    _kernel_options(p)
    p.add_argument("--dry-run", action="store_true", help="stage the folder (--out) that would be pushed, without pushing")
    p.add_argument("--out", help="folder to stage kernel-metadata.json and the notebook in")
    p.set_defaults(func=cmd_kaggle_push)

    p = kaggle.add_parser("corpus", help="check a corpus folder and upload what the check used (its tables, the clips it "
                          "accepted, README/LICENSE), folders and all, as a private Kaggle dataset; the rest is named and left out")
    cli_args.add_corpus_arguments(p)
    # --corpus, as `fintts kaggle run` names the same dataset (issue 45); --dataset, its first name, still works
    p.add_argument("--corpus", "--dataset", dest="dataset", required=True, metavar="OWNER/SLUG",
                   help="your corpus as a private Kaggle dataset, the name `fintts kaggle run --corpus` takes "
                   "(a new version when it exists)")
    p.add_argument("--sample-rate", type=int, default=16000, help="the model's rate (clips below it are flagged)")
    p.add_argument("--allow-hard-links", action="store_true", help="send the files the check used that are hard links (left "
                   "out by default: their bytes have another name, which may be anywhere on this machine)")
    p.set_defaults(func=cmd_kaggle_corpus)

    p = kaggle.add_parser("token", help="keep your Hugging Face token (HF_TOKEN, or hf auth login) as your private Kaggle "
                          "dataset fintts-token, which every push attaches: sessions have it though Kaggle drops a secret")
    # no --token VALUE: a token on the command line lands in the shell's history (and in `ps` while it runs)
    p.add_argument("--token-stdin", action="store_true", help="read the token from stdin (piped in, or pasted at a prompt that "
                   "does not show it) instead of HF_TOKEN or your hf auth login: e.g. a fine-grained token for this run only")
    p.add_argument("--hub-repo", metavar="USER/NAME", help="the run's Hugging Face repo: a token that may not write it is refused")
    p.set_defaults(func=cmd_kaggle_token)

    p = kaggle.add_parser("run", help="push sessions one after another until the run is finished (or fails twice)")
    _kernel_options(p)
    p.add_argument("--max-sessions", type=int, default=0, help="stop after this many sessions (default: no limit)")
    p.add_argument("--gpu-hours", type=float, default=0.0,
                   help="stop once the run has used this many GPU hours on Kaggle, counted from its status.json "
                   "(a rerun goes on counting; default: no limit)")
    p.add_argument("--poll", type=float, default=60.0, help="seconds between looks at the session (default 60)")
    p.add_argument("--request-timeout", type=float, default=60.0,
                   help="seconds one look at Kaggle or the Hub may take before it is tried again (default 60)")
    p.set_defaults(func=cmd_kaggle_run)

    p = kaggle.add_parser("status", help="the notebook's state on Kaggle, the run's on the Hub, the weekly GPU quota")
    p.add_argument("--hub-repo", metavar="USER/NAME", help="the run's Hugging Face repo")
    p.set_defaults(func=cmd_kaggle_status)
