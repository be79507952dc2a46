"""Every ``fintts`` command the README and docs/*.md show parses with the command line as it is: docs and CLI cannot drift.

What counts as a command, and how strictly it is checked:

- a line of a shell code block (```bash, or any block's ``$ fintts ...`` lines; comments and
  ``&&``/``;``/``|`` chains as a shell reads them), and an inline ```fintts ...``` in a table
  row: what a reader copies and runs. It must parse exactly as ``fintts`` parses it
  (:func:`fintts.cli.args.parse`, without running it); placeholders (``DIR``, ``…``) are fine.
  Table notation is read as meant: ``[--json]`` both with and without, ``wheels / push / run``
  each alternative.
- an inline ```fintts ...``` in prose: often a reference (```fintts check --json```'s output), so its
  command must exist and every option it names must be one of that command's.
- a mention that is only a command's name (```fintts push```) must name a command.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import re
import shlex
from pathlib import Path

import pytest

from fintts.cli import build_parser
from fintts.cli.args import parse

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_BLOCKS = {"bash", "sh", "shell", "console", "zsh"}
CHAINS = {"&&", "||", "|", ";", "&"}


@dataclasses.dataclass(frozen=True)
class Mention:
    page: str
    line: int
    text: str
    kind: str  # "run" (a code block's line, a table cell) or "prose"

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {self.text}"


def mentions(page: Path) -> list[Mention]:
    found: list[Mention] = []
    name = str(page.relative_to(ROOT))
    lines = page.read_text(encoding="utf-8").splitlines()
    fence: str | None = None
    number = 0
    while number < len(lines):
        line = lines[number]
        number += 1
        stripped = line.strip()
        if stripped.startswith("```"):
            fence = None if fence is not None else stripped[3:].strip().lower()
            continue
        if fence is not None:
            start = number
            while line.rstrip().endswith("\\") and number < len(lines):  # a continued shell line
                line = line.rstrip()[:-1] + " " + lines[number].strip()
                number += 1
            if fence in SHELL_BLOCKS or stripped.startswith("$ "):
                found += [Mention(name, start, command, "run") for command in shell_commands(line)]
            continue
        kind = "run" if stripped.startswith("|") else "prose"
        found += [Mention(name, number, text.strip(), kind) for text in re.findall(r"`(fintts\s[^`]*)`", line)]
    return found


def shell_commands(line: str) -> list[str]:
    """The ``fintts`` commands of one shell line, each as the shell would run it."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.commenters = "#"
    lexer.wordchars += ":@+%,"  # hf://me/run, me@host, 11h30m+: one word each, as the shell reads them
    tokens = list(lexer)
    commands, current = [], []
    for token in [*tokens, ";"]:
        if token in CHAINS:
            if current[:1] == ["$"]:
                current = current[1:]
            if current[:1] == ["fintts"]:
                commands.append(shlex.join(current))
            current = []
        else:
            current.append(token)
    return commands


def variants(text: str) -> list[list[str]]:
    """The command lines a table's notation stands for: ``[x]`` with and without, ``a / b`` each."""
    optional = re.search(r"\[([^\]]*)\]", text)
    if optional:
        return [*variants(text[:optional.start()] + text[optional.end():]),
                *variants(text[:optional.start()] + optional.group(1) + text[optional.end():])]
    words = shlex.split(text)
    if "/" in words:  # fintts kaggle wheels / push / run / status
        first = words.index("/")
        prefix, choices = words[:first - 1], words[first - 1::2]
        return [[*prefix, choice] for choice in choices]
    # `key=value ...`: the dots say "as many as you like", they are not an argument
    return [[word for i, word in enumerate(words) if not (word in ("...", "…") and i and "=" in words[i - 1])]]


def command_parser(words: list[str]):
    """The (sub)parser that ``fintts WORDS...`` reaches, and how many words named it; (None, n) if a name is unknown."""
    parser, used = build_parser(), 1
    while True:
        choices = {name: sub for action in parser._actions if action.choices and hasattr(action, "_name_parser_map")
                   for name, sub in action.choices.items()}
        if not choices:
            return parser, used
        if used >= len(words) or words[used] not in choices:
            return (None, used) if used < len(words) and not words[used].startswith("-") else (parser, used)
        parser, used = choices[words[used]], used + 1


def problem(mention: Mention) -> str | None:
    """What is wrong with ``mention`` against the command line, or ``None``."""
    for words in variants(mention.text):
        parser, used = command_parser(words)
        if parser is None:
            return f"no command {' '.join(words[:used + 1])}"
        options = [word.split("=")[0] for word in words[used:] if word.startswith("-") and word not in ("-", "--")]
        unknown = [option for option in options if option not in parser._option_string_actions]
        if unknown:
            return f"{parser.prog} has no option {', '.join(unknown)}"
        if mention.kind == "prose" or len(words) == used:
            continue  # a reference to a command or its options, or only the command's name
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            try:
                parse(build_parser(), words[1:])
            except SystemExit as exit:
                if exit.code:
                    return f"{' '.join(words)}: {stderr.getvalue().strip().splitlines()[-1]}"
    return None


ALL = [mention for page in PAGES for mention in mentions(page)]


def test_the_docs_show_commands_of_each_kind():
    """The extraction itself: a change of the docs' layout must not leave this test checking nothing."""
    kinds = {(Path(m.page).name, m.kind) for m in ALL}
    assert {("README.md", "run"), ("README.md", "prose"), ("training.md", "run")} <= kinds
    assert len([m for m in ALL if m.kind == "run"]) >= 30


@pytest.mark.parametrize("mention", ALL, ids=str)
def test_a_documented_command_parses_as_written(mention):
    assert problem(mention) is None, f"{mention}: {problem(mention)}"


@pytest.mark.parametrize("text, wrong", [
    ("fintts train --config mine.yaml --data DIR --budget 1h speaker=anna", None),
    ("fintts train mine.yaml --no-such-option", "fintts train has no option --no-such-option"),
    ("fintts trian mine.yaml", "no command fintts trian"),
    ("fintts pull me/voice", "the following arguments are required: --out"),
    ("fintts kaggle wheels / push / run / status", None),
    ("fintts speakers DIR [--json]", None),
    ("fintts bench CONFIG [key=value ...] --compare", None),
])
def test_a_wrong_command_is_caught(text, wrong):
    found = problem(Mention("example.md", 1, text, "run"))
    assert (found is None) if wrong is None else (wrong in (found or "")), found
