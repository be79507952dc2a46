"""Each name of a run's folder and of a checkpoint's files is written once, in its home module, and imported elsewhere.

Read from the source with :mod:`ast` (nothing is imported): a string constant that is one of the
names, or a path made of one (``root / "model"``, ``"checkpoints/"``, ``f"{prefix}optim.pt"``), in
any module of ``fintts/`` other than the name's home fails. Docstrings are prose and are skipped.
A name with a dot (``status.json``) is found wherever it is a whole string or a path's part; a
plain word (``model``, ``cache``) only where it is a path's part or a constant's value, since
``models["model"]`` names a task's model, not a folder.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "fintts"
LAYOUT = "fintts/train/run/layout.py"
CHECKPOINT = "fintts/train/run/checkpoint.py"
#: every name → the one module that may write it as a string
HOMES = {
    **dict.fromkeys(["checkpoints", "latest", "status.json", "model", "cache", "README.md", "loss.png", "samples", "tb", "logs",
                     "lease.json", "pushes.json", ".hub", "repo.json", "writer.lock", "bench.json"], LAYOUT),
    **dict.fromkeys(["MANIFEST.json", "optim.pt", "sched.pt", "scaler.pt", "state.json", "config.yaml"], CHECKPOINT),
    "model.safetensors": "fintts/tts/voice_format.py",  # a voice's weights, and a VITS checkpoint's generator's
}
#: Where a name is written again, and why. The laptop voice loads without the trainer (tests/test_layers.py,
#: tests/tts/test_voice.py), so what it reads of a voice folder is named in its own names module; the test below
#: checks that those names agree with the run's.
AGAIN = {
    ("fintts/tts/voice_format.py", "model"): "the voice's folder in a run, for the laptop voice (imports nothing of the trainer)",
    ("fintts/tts/hub_voice.py", "README.md"): "a Hub voice repo's card, downloaded by the laptop voice with the voice",
    ("fintts/tts/families.py", "status.json"): "a run's status, whose task names its voice family; read by the voice lookup "
                                               "(imports nothing of the trainer)",
    # the same words, other things:
    ("fintts/tts/vits/settings.py", "model"): "the generator's name among the VITS task's models (its weights: model.safetensors)",
    ("fintts/train/run/state.py", "checkpoints"): "a part of a session's time (state.PHASES), spent saving checkpoints",
    ("fintts/train/session/launcher.py", "config.yaml"): "the launched processes' config, in a temporary folder of the launcher's",
    ("fintts/train/tools/bench.py", "samples"): "samples/s, a unit in fintts bench's table",
    ("fintts/kaggle/wheels.py", "README.md"): "the source tree's README, packed with the wheels",
    ("fintts/tts/demo/make_corpus.py", "README.md"): "the demo corpus's README",
}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                found.add(id(first.value))
    return found


def _path_parts(text: str) -> list[str]:
    """The parts of ``text`` that a ``/`` separates (a glob's parts included); none for prose."""
    return text.split("/") if "/" in text and " " not in text else []


def names_written(source: str) -> list[tuple[int, str]]:
    """(line, name) of every name of :data:`HOMES` that ``source`` writes as a string."""
    tree = ast.parse(source)
    skipped = _docstrings(tree)
    in_path = set()  # the constants that are an operand of `/` (a path made with pathlib)
    defined = set()  # the constants assigned to a name (a definition of the name)
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            in_path |= {id(side) for side in (node.left, node.right) if isinstance(side, ast.Constant)}
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            values = node.value.elts if isinstance(node.value, (ast.Tuple, ast.List)) else [node.value]
            defined |= {id(value) for value in values if isinstance(value, ast.Constant)}
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or id(node) in skipped:
            continue
        text = node.value
        for name in HOMES:
            whole = text == name and ("." in name or id(node) in in_path or id(node) in defined)
            if whole or name in _path_parts(text):
                found.append((node.lineno, name))
    return found


def test_a_run_folders_and_a_checkpoints_names_are_written_only_in_their_home():
    strays = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for line, name in names_written(path.read_text(encoding="utf-8")):
            if HOMES[name] != rel and (rel, name) not in AGAIN:
                strays.append(f"{rel}:{line}: {name!r} (its home: {HOMES[name]})")
    assert not strays, "import these names from their home instead of writing them again:\n" + "\n".join(strays)


def test_every_name_is_written_in_its_home():
    missing = [f"{name!r} in {home}" for name, home in HOMES.items()
               if name not in {n for _, n in names_written((ROOT / home).read_text(encoding="utf-8"))}]
    assert not missing, "not defined where this test looks for them:\n" + "\n".join(missing)


def test_the_laptop_voices_names_agree_with_the_runs():
    from fintts.train.run import checkpoint, layout
    from fintts.tts import voice_format
    from fintts.tts.vits.settings import GENERATOR

    assert voice_format.VOICE_DIR == layout.MODEL_DIR
    # `init` takes a VITS checkpoint or a voice folder alike: the generator's weights have the voice's name
    assert checkpoint.weights_file(GENERATOR) == voice_format.WEIGHTS_FILE


def test_the_scan_finds_a_name_in_each_way_it_is_written():
    source = '"""status.json in a docstring is prose."""\nA = root / "model"\nB = f"{p}optim.pt"\nC = "checkpoints/*/samples/*.wav"\n' \
             'D = models["model"]\nE = "the status.json says"\n'
    assert sorted(names_written(source)) == [(2, "model"), (3, "optim.pt"), (4, "checkpoints"), (4, "samples")]
