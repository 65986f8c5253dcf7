"""Atomic file I/O and the shared cache folder: the only I/O helpers science modules use.

Kept apart from the notebook runner (:mod:`qrlib.workbook`) so that a notebook's
fingerprint (:mod:`qrlib.freshness`) does not change when the runner does.
"""
from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
STAMP_PREFIX = "# qrlib:"


# --------------------------------------------------------------------------- paths
def cache_dir() -> Path:
    """Shared cache for embeddings, indexes and dequantised models.

    ``$QRLIB_CACHE`` if set, else ``<repo>/.cache/qrlib``. Shared across runs on purpose:
    encoding SciFact's corpus once is enough.
    """
    path = Path(os.environ.get("QRLIB_CACHE", REPO_ROOT / ".cache" / "qrlib"))
    path.mkdir(parents=True, exist_ok=True)
    return path


# --------------------------------------------------------------------------- atomic I/O
@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only on success.

    Nothing half-written is ever left at ``path``: a crash leaves the old file (or none).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    os.chmod(tmp_path, 0o666 & ~current_umask())  # mkstemp makes 0600; artifacts are shared
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


_UMASK_LOCK = threading.Lock()


def current_umask() -> int:
    """The process umask (read from /proc where possible, so no thread sees umask 0)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def atomic_write(path: str | os.PathLike, data: str | bytes) -> Path:
    """Write text or bytes to ``path`` atomically and return the path."""
    with atomic_path(path) as tmp:
        if isinstance(data, bytes):
            tmp.write_bytes(data)
        else:
            tmp.write_text(data, encoding="utf-8")
    return Path(path)


def save_json(obj: Any, path: str | os.PathLike) -> Path:
    """Atomically write ``obj`` as indented JSON (numpy scalars converted)."""
    return atomic_write(path, json.dumps(obj, indent=2, default=_json_default) + "\n")


def load_json(path: str | os.PathLike) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def _json_default(o: Any) -> Any:
    if hasattr(o, "item"):
        return o.item()
    if hasattr(o, "tolist"):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def save_table(df: Any, name: str, tables_dir: str | os.PathLike, *, caption: str = "",
               index: bool = False, floatfmt: str = ".4f") -> dict[str, Path]:
    """Save a DataFrame as ``<name>.csv`` and ``<name>.md`` (with caption) atomically."""
    tables_dir = Path(tables_dir)
    csv_path = tables_dir / f"{name}.csv"
    md_path = tables_dir / f"{name}.md"
    atomic_write(csv_path, df.to_csv(index=index))
    md = df.to_markdown(index=index, floatfmt=floatfmt)
    if caption:
        md = f"{md}\n\n{caption}"
    atomic_write(md_path, md + "\n")
    return {"csv": csv_path, "md": md_path}


def read_table(path: str | os.PathLike, **kwargs: Any) -> Any:
    """Read a table written by :func:`save_table`, skipping the provenance lines
    (``# qrlib: ...``) that the runner puts at the top of published CSVs."""
    import pandas as pd

    with open(path, encoding="utf-8") as fh:
        skip = 0
        for line in fh:
            if not line.startswith(STAMP_PREFIX):
                break
            skip += 1
    return pd.read_csv(path, skiprows=skip, **kwargs)
