"""Key numbers of a run, recorded by the notebooks and read back by tests and reports.

Each notebook records the few numbers its conclusions rest on (in the spirit of
recommenders' ``store_metadata``)::

    from qrlib.eval.record import Recorder
    record = Recorder(run_dir, "02_index_build")
    record("bm25.scifact.ndcg10", baseline_ndcg)         # returns the value

Values go to ``<run_dir>/records/<notebook>.json`` (one JSON object of name -> value,
rewritten atomically on each call, so a crash never leaves half a file) and are printed
as ``[record] name = value`` so the executed notebook shows them too. The smoke tests read
them back with :func:`read_records` and assert them with tolerances; a value must be JSON
(numbers, strings, booleans, lists and dicts of them; numpy scalars are converted).
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from qrlib.core.errors import QrlibError
from qrlib.core.io import atomic_write


def _plain(value: Any) -> Any:
    """numpy/pandas scalars and arrays -> Python; NaN -> None (JSON has no NaN)."""
    if hasattr(value, "item") and getattr(value, "ndim", 0) == 0:
        value = value.item()
    elif hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise QrlibError(f"record: value of type {type(value).__name__} is not JSON "
                     "(use numbers, strings, booleans, lists or dicts)")


def records_path(run_dir: str | os.PathLike, notebook: str) -> Path:
    return Path(run_dir) / "records" / f"{notebook}.json"


def record(name: str, value: Any, run_dir: str | os.PathLike, notebook: str, *,
           quiet: bool = False) -> Any:
    """Store ``name = value`` for ``notebook`` under ``run_dir``; returns ``value``."""
    if not isinstance(name, str) or not name.strip():
        raise QrlibError(f"record: name must be a non-empty string, got {name!r}")
    path = records_path(run_dir, notebook)
    data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    data[name] = _plain(value)
    atomic_write(path, json.dumps(data, indent=1, sort_keys=True) + "\n")
    if not quiet:
        shown = f"{data[name]:.4g}" if isinstance(data[name], float) else repr(data[name])
        print(f"[record] {name} = {shown}")
    return value


class Recorder:
    """``record = Recorder(run_dir, "NN_name")``; then ``record(name, value)``.

    A new Recorder starts the notebook's record file afresh, so numbers of an earlier
    run with other parameters never mix with this run's.
    """

    def __init__(self, run_dir: str | os.PathLike, notebook: str, *, fresh: bool = True,
                 quiet: bool = False) -> None:
        self.run_dir, self.notebook, self.quiet = Path(run_dir), notebook, quiet
        path = records_path(run_dir, notebook)
        if fresh and path.exists():
            path.unlink()

    def __call__(self, name: str, value: Any) -> Any:
        return record(name, value, self.run_dir, self.notebook, quiet=self.quiet)

    def read(self) -> dict[str, Any]:
        return read_records(self.run_dir, self.notebook)


def read_records(run_dir: str | os.PathLike, notebook: str | None = None) -> dict[str, Any]:
    """The recorded numbers of one notebook (``{name: value}``) or of every notebook
    (``{notebook: {name: value}}``) of a run. A missing notebook is a one-line error."""
    folder = Path(run_dir) / "records"
    if notebook is not None:
        path = records_path(run_dir, notebook)
        if not path.exists():
            have = sorted(p.stem for p in folder.glob("*.json")) if folder.exists() else []
            raise QrlibError(f"no records of notebook {notebook} under {folder}; recorded: {have}")
        return json.loads(path.read_text(encoding="utf-8"))
    if not folder.exists():
        return {}
    return {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.json"))}
