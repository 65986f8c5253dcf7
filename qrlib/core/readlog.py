"""The runner's read log: which files under watched folders a notebook opened, and how.

The runner sets ``QRLIB_READ_LOG`` (a file) and ``QRLIB_READ_WATCH`` (folders joined by
``os.pathsep``) and puts a first cell calling :func:`start` into the notebook; an audit hook
(PEP 578, event ``open``) then appends ``r<TAB>path`` or ``w<TAB>path`` once per file. Files
renamed onto a path (``os.replace``, as atomic writes do) count as written there. Files
opened by native code without Python's ``open`` (e.g. safetensors weights) are not seen;
the JSON or CSV files beside them are.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

_state: dict[str, object] = {}


def _mode(args: tuple) -> str:
    mode, flags = (args + (None, None))[1:3]
    if isinstance(mode, str):
        return "w" if any(c in mode for c in "wax+") else "r"
    if isinstance(flags, int):
        return "r" if flags & os.O_ACCMODE == os.O_RDONLY else "w"
    return "r"


def _hook(event: str, args: tuple) -> None:
    if event not in ("open", "os.rename") or _state.get("busy") or not args:
        return
    if event == "os.rename":  # atomic writes: a temporary file renamed onto the artifact
        args = (args[1], "w")
    path = args[0]
    if not isinstance(path, (str, bytes, os.PathLike)):
        return
    _state["busy"] = True
    try:
        p = os.path.abspath(os.fsdecode(path))
        if p.startswith(_state["watch"]):  # type: ignore[arg-type]
            key = (_mode(args), p)
            seen: set = _state["seen"]  # type: ignore[assignment]
            if key not in seen:
                seen.add(key)
                os.write(_state["fd"], f"{key[0]}\t{p}\n".encode())  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001 - an audit hook must never break the notebook
        pass
    finally:
        _state["busy"] = False


def start() -> bool:
    """Install the hook if the runner asked for a read log (idempotent); True if active."""
    log, watch = os.environ.get("QRLIB_READ_LOG"), os.environ.get("QRLIB_READ_WATCH")
    if not log or not watch or _state.get("fd") is not None:
        return _state.get("fd") is not None
    Path(log).parent.mkdir(parents=True, exist_ok=True)
    _state.update(fd=os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644), seen=set(),
                  busy=False,
                  watch=tuple(os.path.abspath(w) + os.sep for w in watch.split(os.pathsep) if w))
    sys.addaudithook(_hook)
    return True


def read_log(path: str | os.PathLike) -> list[tuple[str, str]]:
    """The ``(mode, absolute path)`` pairs of a read log, in order, each once."""
    p = Path(path)
    if not p.exists():
        return []
    out: dict[tuple[str, str], None] = {}
    for line in p.read_text(encoding="utf-8").splitlines():
        mode, _, path_ = line.partition("\t")
        if path_:
            out[(mode, path_)] = None
    return list(out)
