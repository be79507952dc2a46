"""The two layers stay apart: the session trainer knows nothing of the task it trains."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRAINER = ROOT / "fintts" / "train"


def test_the_session_trainer_names_no_speech_task():
    words = re.compile(r"\b(tts|vits|finnish|mcd)\b", re.IGNORECASE)
    offenders = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sorted(TRAINER.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if words.search(line)
    ]
    assert not offenders, "\n".join(offenders)


def test_importing_the_trainer_and_its_stores_imports_no_task():
    code = (
        "import sys, fintts.train, fintts.train.stores.hub, fintts.cli\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(('fintts.tts', 'fintts.examples')))\n"
        "assert not loaded, loaded\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
