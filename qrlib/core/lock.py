"""One process at a time per run folder: ``run.lock`` holds the PID (flock'ed).

Used by the notebook runner (one ``qrlib run`` per ``runs/<name>``) and by the trainer
(one trainer per run folder).
"""
from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from qrlib.core.errors import QrlibError
from qrlib.core.io import current_umask

LOCK_NAME = "run.lock"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def _lock_holder(path: Path) -> dict[str, Any]:
    try:
        info = json.loads(path.read_text(encoding="utf-8") or "{}")
        return info if isinstance(info, dict) else {}
    except (OSError, ValueError):
        return {}


@contextlib.contextmanager
def run_lock(run_dir: str | os.PathLike, what: str = "qrlib run") -> Iterator[Path]:
    """Hold ``run_dir/run.lock`` (an flock'ed file naming this PID) while a run uses
    ``run_dir``; a second holder gets a one-line :class:`QrlibError` naming the first.

    The kernel drops the flock when its holder dies, so the lock file of a killed run is
    taken over (with a note naming the dead PID).
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        fcntl = None
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / LOCK_NAME
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666 & ~current_umask())
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            else:  # pragma: no cover
                old = _lock_holder(path).get("pid")
                if old and old != os.getpid() and _pid_alive(int(old)):
                    raise BlockingIOError
        except BlockingIOError:
            os.close(fd)
            h = _lock_holder(path)
            who = f"PID {h['pid']}" if h.get("pid") else "another process"
            if h.get("host") and h.get("host") != socket.gethostname():
                who += f" on {h['host']}"
            since = f" since {h['started']}" if h.get("started") else ""
            raise QrlibError(f"run folder {run_dir} is in use by {who} (`{what}`{since}; "
                             f"lock file {path}); wait for it to finish or stop it, then "
                             "run again") from None
        # the file may have been removed and re-created by a holder that just finished
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    old = _lock_holder(path)
    if old.get("pid") and old.get("pid") != os.getpid():
        state = "no longer running" if not _pid_alive(int(old["pid"])) else "not holding it"
        print(f"[qrlib] took over the stale lock {path} of PID {old['pid']} ({state})",
              flush=True)
    info = {"pid": os.getpid(), "host": socket.gethostname(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%S"), "argv": sys.argv}
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
    try:
        yield path
    finally:
        with contextlib.suppress(OSError):
            path.unlink()
        os.close(fd)
