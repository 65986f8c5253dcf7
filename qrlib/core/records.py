"""Typed records that notebooks pass to each other.

A record is a frozen dataclass one notebook saves with :func:`save_record` and a later
notebook loads with :func:`load_record`, which checks the file against the dataclass's
fields: a missing or unknown field is a one-line error naming the file and the notebook to
rerun, instead of a ``KeyError`` deep in the reader. The notebook that loads a record declares
the writer in its source header (``reads: [...]``; :mod:`qrlib.workbook.freshness`).
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, TypeVar

from qrlib.core.errors import QrlibError
from qrlib.core.io import load_json, save_json

R = TypeVar("R")


def save_record(record: Any, path: str | os.PathLike) -> Path:
    """Write a dataclass instance as JSON (atomically) and return the path."""
    if not dataclasses.is_dataclass(record) or isinstance(record, type):
        raise QrlibError(f"save_record: expected a dataclass instance, got {type(record).__name__}")
    return save_json(dataclasses.asdict(record), path)


def load_record(cls: type[R], path: str | os.PathLike, *, writer: str = "the notebook that "
                "writes it") -> R:
    """Read ``path`` back as ``cls``; one-line errors when the file is absent, is not a JSON
    object, lacks a field without default, or holds a field ``cls`` does not declare."""
    path = Path(path)
    try:
        data = load_json(path)
    except FileNotFoundError:
        raise QrlibError(f"{path}: no {cls.__name__} here; run {writer} first") from None
    except ValueError as exc:
        raise QrlibError(f"{path}: not JSON ({exc}); rerun {writer}") from None
    if not isinstance(data, dict):
        raise QrlibError(f"{path}: a {cls.__name__} is a JSON object, found "
                         f"{type(data).__name__}; rerun {writer}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    missing = [n for n, f in fields.items() if n not in data
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    unknown = sorted(set(data) - set(fields))
    if missing or unknown:
        what = "; ".join(x for x in (f"lacks {', '.join(missing)}" if missing else "",
                                     f"has undeclared {', '.join(unknown)}" if unknown else "") if x)
        raise QrlibError(f"{path}: not a {cls.__name__} of this qrlib ({what}); rerun {writer}")
    return cls(**data)
