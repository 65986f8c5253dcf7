"""The commit a result was produced at (stamps, manifests, training summaries)."""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from qrlib.core.io import REPO_ROOT

__all__ = ["commit_info"]


def commit_info(root: Path | None = None) -> dict[str, Any]:
    """Short commit of ``root`` and whether sources differ from it (``dirty``)."""
    root = Path(root or REPO_ROOT)
    try:
        sha = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=10", "HEAD"],
                             capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--",
                                "qrlib", "notebooks/src", "params"],
                               capture_output=True, text=True, check=True).stdout.strip() != ""
    except (OSError, subprocess.CalledProcessError):
        return {"commit": "unknown", "dirty": False}
    return {"commit": sha, "dirty": dirty}
