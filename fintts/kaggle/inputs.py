"""Where a Kaggle session finds an attached dataset, under either of the layouts Kaggle has used.

Kaggle mounts a notebook's datasets read-only under ``/kaggle/input``. Until 2026 a dataset
was at ``/kaggle/input/<slug>``; diagnostic kernels of 2026-06 and 2026-09 show
``os.listdir('/kaggle/input') == ['datasets']`` and the dataset at
``/kaggle/input/datasets/<owner>/<slug>``, while some attachments still show the old path
(issue 41). Neither is documented as permanent, so a session finds each dataset from its
``owner/slug`` under both, the new layout first; a path written into a config by hand would
be right under one of them only.

Imported by the notebook's cells and by nothing that needs torch: it stays plain Python.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

#: Where Kaggle mounts a notebook's inputs.
INPUT = "/kaggle/input"


def candidates(ref: str, root: str | Path = INPUT) -> list[Path]:
    """Where dataset ``owner/slug`` may be mounted under ``root``: the 2026 layout, then the one before."""
    owner, _, slug = ref.partition("/")
    return [Path(root) / "datasets" / owner / slug, Path(root) / slug]


def find_input(ref: str, root: str | Path = INPUT) -> Path:
    """The folder dataset ``ref`` is mounted at; :class:`FileNotFoundError` saying where it looked and what is there."""
    if ref.count("/") != 1:
        raise ValueError(f"{ref!r} is not a Kaggle dataset: write OWNER/SLUG (e.g. alice/my-voice)")
    for folder in candidates(ref, root):
        if folder.is_dir():
            return folder
    there = sorted(str(p.relative_to(root)) for p in Path(root).glob("*")) + sorted(
        str(p.relative_to(root)) for p in Path(root).glob("datasets/*/*")) if Path(root).is_dir() else []
    raise FileNotFoundError(
        f"the dataset {ref} is not attached to this session: looked in {' and '.join(map(str, candidates(ref, root)))}; "
        f"{root} holds {', '.join(there) or 'nothing'}. Attach it (the notebook's Input panel → Add Input), or push the "
        "notebook again with fintts kaggle run, which attaches it")


def relocate(path: str, root: str | Path = INPUT) -> str:
    """``path`` under ``root`` as this session mounts it: the other layout's path when only that one exists.

    A config written for one layout (``data: /kaggle/input/my-voice``, ``init: /kaggle/input/mms-tts-fin``, a
    discriminator's file under a dataset) still reads in a session mounted the other way; a path outside
    ``root``, or one that exists, is returned as it is.
    """
    base = str(root).rstrip("/")
    if not path.startswith(base + "/") or Path(path).exists():
        return path
    parts = PurePosixPath(path[len(base) + 1:]).parts
    if parts[0] == "datasets" and len(parts) >= 3:  # 2026's layout asked for, the older one mounted
        found = [Path(base, *parts[2:])]
    else:  # the older layout asked for: any owner's dataset of that slug
        found = [Path(owner, *parts) for owner in sorted(Path(base, "datasets").glob("*"))]
    return next((str(candidate) for candidate in found if candidate.exists()), path)
