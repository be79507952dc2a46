"""How fintts is built, kept so: its import graph, read from the source.

The graph is every ``import`` statement in ``fintts/``, read with :mod:`ast` (nothing is
imported to build it), those inside functions and those under ``if TYPE_CHECKING`` included: a
type-only import never runs, but its module still depends on the one it names (what a module
loads leaves them out). It must have no circle; the session trainer must not reach the task;
what the laptop voice imports when it loads must not import torch or the trainer; and an import
inside a function must say on its line why it is there.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "fintts"
TRAINER = PACKAGE / "train"
#: What the base install leaves out: the laptop voice must load without any of it.
TRAINING_STACK = {"torch", "transformers", "accelerate", "peft", "safetensors", "onnx", "scipy", "matplotlib", "tensorboard", "kaggle"}
#: The laptop's entry points: `import fintts`, `fintts.load_voice`, `fintts say`, `fintts pull`; and the families' faces,
#: which the voice lookup loads through their entry points (an import the graph cannot see).
LAPTOP = ("fintts", "fintts.tts.voice", "fintts.tts.say", "fintts.tts.hub_voice", "fintts.tts.vits.family",
          "fintts.tts.chatterbox.family")
#: What the commands that read a run, a corpus or Kaggle load (`fintts status`, `check`, `speakers`, `plan --samples`,
#: `push`, every `fintts kaggle` command): a laptop runs them often, and torch with transformers costs seconds to import.
LIGHT_COMMANDS = ("fintts.train.report.summary", "fintts.train.stores", "fintts.train.session.store_choice",
                  "fintts.train.stores.hub", "fintts.train.tools.plan",
                  "fintts.tts.corpus", "fintts.tts.corpus.speakers", "fintts.kaggle.kernel", "fintts.kaggle.sessions",
                  "fintts.kaggle.corpus", "fintts.kaggle.wheels", "fintts.kaggle.quota", "fintts.kaggle.secret")
#: The command line imports the library inside each command (fintts.cli's docstring says why), so that
#: `fintts say` loads neither torch nor the trainer; its imports need no reason line by line. The
#: Kaggle commands are part of it, in a module of their own.
SHELL = ("fintts.cli", "fintts.cli.commands", "fintts.cli.kaggle")


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # the imported module, ours or the top-level name of another package
    line: int
    in_function: bool
    type_only: bool  # under ``if TYPE_CHECKING``: never run, so it loads nothing
    has_reason: bool  # a comment on the statement's lines or the line above, or one for the import right above


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imports_of(module: str, source: str) -> list[Import]:
    tree = ast.parse(source)
    commented = {token.start[0] for token in tokenize.generate_tokens(iter(source.splitlines(keepends=True)).__next__)
                 if token.type == tokenize.COMMENT}
    functions = [(n.lineno, n.end_lineno) for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    never_run = [(n.lineno, n.end_lineno) for n in ast.walk(tree) if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test)]
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    found = []
    reasoned_until = -1  # the last line of a commented import: the one right under it shares its reason
    for node in sorted((n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))), key=lambda n: n.lineno):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:  # relative: from the package of this module, up level - 1
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        in_function = any(a <= node.lineno <= b for a, b in functions)
        type_only = any(a <= node.lineno <= b for a, b in never_run)
        has_reason = bool(commented & set(range(node.lineno - 1, node.end_lineno + 1))) or reasoned_until == node.lineno - 1
        reasoned_until = node.end_lineno if has_reason else -1
        for target in dict.fromkeys(targets):
            ours = target in MODULES or target.split(".")[0] == "fintts"
            found.append(Import(module, target if ours else target.split(".")[0], node.lineno, in_function, type_only, has_reason))
    return found


def import_graph(modules: dict[str, Path] = MODULES) -> list[Import]:
    return [imp for module, path in modules.items() for imp in imports_of(module, path.read_text(encoding="utf-8"))]


def circles(imports: list[Import]) -> list[list[str]]:
    """Every strongly connected group of our modules (Tarjan), each as one circle through it."""
    edges: dict[str, set[str]] = {}
    for imp in imports:
        if imp.target in MODULES and imp.target != imp.module:
            edges.setdefault(imp.module, set()).add(imp.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(_one_circle(sorted(group), edges))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return groups


def _one_circle(group: list[str], edges: dict[str, set[str]]) -> list[str]:
    """A path from the group's first module back to it, inside the group: what to show a person."""
    start, members = group[0], set(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        node = frontier.pop(0)
        for nxt in sorted(edges.get(node, set()) & members):
            if nxt == start:
                return paths[node] + [start]
            if nxt not in paths:
                paths[nxt] = paths[node] + [nxt]
                frontier.append(nxt)
    return group


def reachable(start: tuple[str, ...], imports: list[Import], *, loading_only: bool) -> dict[str, list[str]]:
    """Module (or other package) → the chain of imports that reaches it from ``start``."""
    by_module: dict[str, list[Import]] = {}
    for imp in imports:
        if not (loading_only and (imp.in_function or imp.type_only)):
            by_module.setdefault(imp.module, []).append(imp)
    chains = {name: [name] for name in start}
    frontier = list(start)
    while frontier:
        node = frontier.pop(0)
        for imp in by_module.get(node, []):
            if imp.target not in chains:
                chains[imp.target] = chains[node] + [f"{imp.target} (line {imp.line})"]
                frontier.append(imp.target)
    return chains


def test_the_package_has_no_import_circle():
    found = circles(import_graph())
    assert not found, "import circles:\n" + "\n".join(" -> ".join(circle) for circle in found)


def circles_of_two(tmp_path, b_source: str) -> list[list[str]]:
    """The circles of a package of two modules: ``fintts.a`` imports ``fintts.b``, whose source is ``b_source``."""
    a, b = tmp_path / "fintts" / "a.py", tmp_path / "fintts" / "b.py"
    a.parent.mkdir()
    a.write_text("import fintts.b\n")
    b.write_text(b_source)
    modules = {"fintts.a": a, "fintts.b": b}
    MODULES.update(modules)
    try:
        return circles(import_graph(modules))
    finally:
        for name in modules:
            MODULES.pop(name)


def test_the_graph_sees_a_circle_made_inside_a_function(tmp_path):
    # the check itself: two modules importing each other, one of them lazily, are a circle
    found = circles_of_two(tmp_path, "def f():\n    from fintts import a  # a reason does not make it right\n")
    assert found == [["fintts.a", "fintts.b", "fintts.a"]]


def test_the_graph_sees_a_circle_made_for_the_type_checker_alone(tmp_path):
    # a type-only import never runs, but its module still depends on the one it names: two modules that name each
    # other's types are one idea in two files
    found = circles_of_two(tmp_path, "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from fintts.a import A\n")
    assert found == [["fintts.a", "fintts.b", "fintts.a"]]


def test_the_session_trainer_never_reaches_the_task():
    chains = reachable(tuple(m for m in MODULES if m.startswith("fintts.train")), import_graph(), loading_only=False)
    task = ("fintts.tts", "fintts_stand_ins")
    leaks = [" -> ".join(chain) for name, chain in chains.items() if name.startswith(task) and not chain[-2].startswith(task)]
    assert not leaks, "the trainer imports the task:\n" + "\n".join(leaks)


#: The trainer's rooms below a session: none of them reaches up into one (a session is made of them, not they of it).
BELOW_THE_SESSION = ("step", "run", "processes", "report", "machine", "stores")
#: What only a session, or a tool that runs sessions, may import.
ABOVE = ("fintts.train.session", "fintts.train.tools")


def test_the_trainers_rooms_below_a_session_never_import_it():
    lower = [m for m in MODULES if m.startswith(tuple(f"fintts.train.{room}" for room in BELOW_THE_SESSION))]
    lower += ["fintts.train.config", "fintts.train.task", "fintts.train.decision", "fintts.train.phases", "fintts.train.repo_id"]
    up = [f"{imp.module}:{imp.line} imports {imp.target}" for imp in import_graph({m: MODULES[m] for m in lower})
          if imp.target.startswith(ABOVE)]
    assert not up, "a room below the session imports it (or a tool):\n" + "\n".join(up)


def folder_ties(folder: str, imports: list[Import], modules: dict[str, Path]) -> dict[tuple[str, str], list[str]]:
    """The ties between the parts of ``folder``: its own files (one part, named ``<folder> (own files)``) and each
    immediate sub-folder with everything under it (one part each). (part, part) → the imports that tie them,
    ``module:line -> module``. An import of one of the folder's own files that imports nothing of ours (its errors,
    its constants: the floor its sub-folders stand on) ties nothing."""
    own = f"{folder} (own files)"
    subs = [m for m, path in modules.items() if path.name == "__init__.py" and m.rpartition(".")[0] == folder]

    def part(module: str) -> str | None:
        if module != folder and not module.startswith(folder + "."):
            return None
        return next((sub for sub in subs if module == sub or module.startswith(sub + ".")), own)

    floor = set(modules) - {imp.module for imp in imports if imp.target in modules and imp.target != imp.module}
    ties: dict[tuple[str, str], list[str]] = {}
    for imp in imports:
        a, b = part(imp.module), part(imp.target) if imp.target in modules else None
        if a and b and a != b and not (b == own and imp.target in floor):
            ties.setdefault((a, b), []).append(f"{imp.module}:{imp.line} -> {imp.target}")
    return ties


def folder_circles(imports: list[Import], modules: dict[str, Path] = MODULES) -> dict[tuple[str, frozenset[str]], list[str]]:
    """Every group of parts of a folder (see :func:`folder_ties`) that reach each other through their ties:
    (folder, the group) → the ties inside it, each ``part -> part: module:line -> module``."""
    found = {}
    for folder in sorted(m for m, path in modules.items() if path.name == "__init__.py"):
        ties = folder_ties(folder, imports, modules)
        reach: dict[str, set[str]] = {}
        for a, b in ties:
            reach.setdefault(a, set()).add(b)
        changed = True
        while changed:  # a handful of parts: the transitive closure by repetition is plain enough
            changed = False
            for a in list(reach):
                more = set().union(*(reach.get(b, set()) for b in reach[a])) - reach[a]
                if more:
                    reach[a] |= more
                    changed = True
        done: set[str] = set()
        for a in sorted(reach):
            group = frozenset({a} | {b for b in reach[a] if a in reach.get(b, set())})
            if len(group) > 1 and a not in done:
                done |= group
                found[(folder, group)] = [f"{x} -> {y}: {tie}" for (x, y), each in sorted(ties.items())
                                          if x in group and y in group for tie in each]
    return found




def test_no_two_folders_import_each_other():
    # in each folder, its own files and each sub-folder (all of it) are one part; no two parts may reach each other:
    # a room that imports a room that imports it back is one idea in two places
    found = folder_circles(import_graph())
    assert not found, "folders that import each other:\n" + "\n".join(
        f"in {folder}: {' <-> '.join(sorted(group))}\n  " + "\n  ".join(ties) for (folder, group), ties in found.items())


def test_the_folder_check_sees_two_sub_folders_that_import_each_other(tmp_path):
    # the check itself: x.py in sub-folder a imports y.py in sub-folder b, which imports a's z.py back (lazily);
    # the folder's own c.py imports nothing of ours, so a's x.py importing it ties nothing
    files = {"__init__.py": "", "c.py": "import os\n", "a/__init__.py": "", "a/x.py": "import fintts.zz.b.y\nimport fintts.zz.c\n",
             "a/z.py": "", "b/__init__.py": "", "b/y.py": "def f():\n    from fintts.zz.a import z  # late\n"}
    modules = {}
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
        modules[".".join(["fintts", "zz", *Path(name).with_suffix("").parts]).removesuffix(".__init__")] = path
    MODULES.update(modules)
    try:
        found = folder_circles(import_graph(modules), modules)
    finally:
        for name in modules:
            MODULES.pop(name)
    assert found == {("fintts.zz", frozenset({"fintts.zz.a", "fintts.zz.b"})): [
        "fintts.zz.a -> fintts.zz.b: fintts.zz.a.x:1 -> fintts.zz.b.y",
        "fintts.zz.b -> fintts.zz.a: fintts.zz.b.y:2 -> fintts.zz.a.z",
    ]}


#: What several rooms share, each in a module that imports nothing of ours, so that no room reaches into another's for it.
LEAVES = ("fintts.errors", "fintts.train.retry", "fintts.train.machine.platform")


def test_what_the_rooms_share_imports_nothing_of_ours():
    ours = [f"{imp.module}:{imp.line} imports {imp.target}" for imp in import_graph({m: MODULES[m] for m in LEAVES})
            if imp.target in MODULES or imp.target.startswith("fintts")]
    assert not ours, "a shared module imports fintts:\n" + "\n".join(ours)


def test_the_trainers_top_level_is_its_rooms_and_a_few_modules():
    top = sorted(p.name for p in TRAINER.glob("*.py"))
    assert len(top) <= 14, top
    assert {p.name for p in TRAINER.iterdir() if p.is_dir() and (p / "__init__.py").is_file()} == {*BELOW_THE_SESSION, "session", "tools"}


def test_no_module_is_over_600_lines():
    long = [f"{path.relative_to(ROOT)}: {n} lines" for path in sorted(PACKAGE.rglob("*.py"))
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > 600]
    assert not long, "split these:\n" + "\n".join(long)


def test_the_laptop_voice_loads_without_torch_or_the_trainer():
    chains = reachable(LAPTOP, import_graph(), loading_only=True)
    leaks = [" -> ".join(chain) for name, chain in chains.items() if name in TRAINING_STACK or name.startswith("fintts.train")]
    assert not leaks, "loading the laptop voice imports:\n" + "\n".join(leaks)


def test_the_commands_that_read_a_run_a_corpus_or_kaggle_load_without_torch():
    chains = reachable(LIGHT_COMMANDS, import_graph(), loading_only=True)
    leaks = [" -> ".join(chain) for name, chain in chains.items() if name in ("torch", "transformers")]
    assert not leaks, "loading these commands imports:\n" + "\n".join(leaks)


def test_every_import_inside_a_function_says_why():
    silent = [f"{MODULES[imp.module].relative_to(ROOT)}:{imp.line}: {imp.target}"
              for imp in import_graph() if imp.in_function and not imp.has_reason and imp.module not in SHELL]
    assert not silent, "imports inside functions without a reason (a comment on the line):\n" + "\n".join(sorted(set(silent)))


def test_the_session_trainer_names_no_speech_task():
    words = re.compile(r"\b(tts|vits|finnish|mcd)\b", re.IGNORECASE)
    offenders = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sorted(TRAINER.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if words.search(line)
    ]
    assert not offenders, "\n".join(offenders)


@pytest.mark.process
def test_importing_the_trainer_and_its_stores_imports_no_task():
    code = (
        "import sys, fintts.train, fintts.train.stores.hub, fintts.cli\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(('fintts.tts', 'fintts_stand_ins')))\n"
        "assert not loaded, loaded\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


#: The voice families: each a folder of fintts/tts with a face (family.py) registered in the fintts.families entry points.
FAMILIES = tuple(sorted(p.parent.name for p in (PACKAGE / "tts").glob("*/family.py")))
#: What dispatches to the families and so may name none: the command line, `say`, the voice lookup, the evaluation's figures.
DISPATCHERS = ("fintts.cli", "fintts.cli.commands", "fintts.tts.say", "fintts.tts.voice", "fintts.tts.hub_voice", "fintts.tts.eval")


def _family_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["fintts", "tts"] and parts[2] in FAMILIES else None


def test_the_families_are_found_and_each_has_its_face():
    assert {"vits", "chatterbox"} <= set(FAMILIES)


def test_no_family_imports_another():
    crossing = [f"{imp.module}:{imp.line} imports {imp.target}" for imp in import_graph()
                if (own := _family_of(imp.module)) and (other := _family_of(imp.target)) and other != own]
    assert not crossing, "a family imports another (what they share belongs below them, in fintts/tts):\n" + "\n".join(crossing)


def test_shared_speech_code_and_the_dispatchers_import_no_family():
    shared = [m for m in MODULES if m.startswith("fintts.tts") and _family_of(m) is None] + list(DISPATCHERS)
    named = [f"{imp.module}:{imp.line} imports {imp.target}" for imp in import_graph({m: MODULES[m] for m in shared})
             if _family_of(imp.target)]
    assert not named, "shared speech code or a dispatcher imports a family (ask fintts.tts.families instead):\n" + "\n".join(named)
