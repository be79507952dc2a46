"""The ``parameters`` cell of a notebook: read it, and write values into it.

A notebook's settings live in one cell tagged ``parameters`` (papermill's convention), one
``NAME = value  # what it means`` per line. Kaggle runs a notebook as it is, without
papermill, so ``fintts kaggle push`` writes the values into that cell itself before it
pushes; tests do the same before they execute a notebook. Only the values change: the
names, their order and their comments stay as the notebook's author wrote them.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

TAG = "parameters"


def parameters_cell(notebook: dict[str, Any]) -> dict[str, Any]:
    """The notebook's cell tagged ``parameters``."""
    cells = [c for c in notebook["cells"] if TAG in c.get("metadata", {}).get("tags", [])]
    if len(cells) != 1:
        raise ValueError(f"the notebook needs exactly one cell tagged {TAG!r}, found {len(cells)}")
    return cells[0]


def _source(cell: dict[str, Any]) -> str:
    return cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])


def _assignments(source: str) -> dict[str, ast.expr]:
    found = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            found[node.targets[0].id] = node.value
    return found


def read_parameters(notebook: dict[str, Any]) -> dict[str, Any]:
    """``{NAME: value}`` of the parameters cell (values are Python literals)."""
    return {name: ast.literal_eval(value) for name, value in _assignments(_source(parameters_cell(notebook))).items()}


def with_parameters(notebook: dict[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``notebook`` whose parameters cell assigns ``values`` (names it does not have are an error)."""
    notebook = json.loads(json.dumps(notebook))
    cell = parameters_cell(notebook)
    source = _source(cell)
    found = _assignments(source)
    unknown = sorted(set(values) - set(found))
    if unknown:
        raise ValueError(f"the parameters cell has no {', '.join(unknown)}; it sets {', '.join(found)}")
    lines = source.splitlines(keepends=True)
    # right to left within the source, so earlier positions stay valid
    for name in sorted(values, key=lambda n: (found[n].lineno, found[n].col_offset), reverse=True):
        node = found[name]
        if node.lineno != node.end_lineno:
            raise ValueError(f"parameter {name} spans several lines; keep each parameter on one line")
        line = lines[node.lineno - 1]
        start, end = _char_offset(line, node.col_offset), _char_offset(line, node.end_col_offset)
        lines[node.lineno - 1] = line[:start] + repr(values[name]) + line[end:]
    cell["source"] = "".join(lines)
    return notebook


def _char_offset(line: str, byte_offset: int) -> int:
    """ast counts UTF-8 bytes; strings count characters."""
    return len(line.encode("utf-8")[:byte_offset].decode("utf-8"))


def load(path: str | Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def save(notebook: dict[str, Any], path: str | Path) -> None:
    Path(path).write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
