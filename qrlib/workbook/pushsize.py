"""How many bytes a push moves: every file each commit since a base adds, changes or
removes, counted whole (``python -m qrlib push-size --since REF``).

Hosts limit a push by its pack and by its diffs; a binary archive counts in full where it is
added and again where it is removed (a park replaced by the finished run counts both), and a
move counts twice when renames are not detected. This sums the worst case from ``git log
--raw`` without rename detection, so a park, a carry and its cleanup can be spread over
pushes before one is refused (README, "Sizes")."""
from __future__ import annotations

import subprocess
from pathlib import Path

from qrlib.core.errors import QrlibError

__all__ = ["push_bytes", "push_size_main"]

_ZERO = "0" * 40


def _git(root: Path, *args: str, stdin: str | None = None) -> str:
    r = subprocess.run(["git", "-C", str(root), *args], input=stdin, capture_output=True,
                       text=True)
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["failed"])[-1]
        raise QrlibError(f"git {args[0]}: {last}")
    return r.stdout


def push_bytes(root: Path, since: str) -> list[dict]:
    """Per commit in ``since..HEAD`` (oldest first): ``{"commit", "added", "removed",
    "files"}`` where ``added`` sums the new blobs' sizes of added and modified files and
    ``removed`` the old blobs' sizes of removed and modified ones (one ``git log --raw`` and
    one ``git cat-file --batch-check`` for the whole range)."""
    try:
        _git(root, "rev-parse", "--verify", "--quiet", f"{since}^{{commit}}")
    except QrlibError:
        raise QrlibError(f"--since {since!r}: not a commit of this repository; give a "
                         f"branch, tag or commit (e.g. origin/main)") from None
    log = _git(root, "log", "--reverse", "--raw", "--no-renames", "--no-abbrev",
               "--format=commit %H", f"{since}..HEAD")
    commits: list[tuple[str, list[list[str]]]] = []  # (commit, [old oid, new oid] per file)
    for ln in log.splitlines():
        if ln.startswith("commit "):
            commits.append((ln.split()[1], []))
        elif ln.startswith(":"):
            commits[-1][1].append(ln.split("\t", 1)[0].split()[2:4])
    blobs = {oid for _, files in commits for pair in files for oid in pair if oid != _ZERO}
    sizes = {oid: int(n) for oid, n in (ln.split() for ln in _git(
        root, "cat-file", "--batch-check=%(objectname) %(objectsize)",
        stdin="\n".join(blobs) + "\n").splitlines() if ln and not ln.endswith("missing"))
    } if blobs else {}
    return [{"commit": c[:10], "added": sum(sizes.get(new, 0) for _, new in files),
             "removed": sum(sizes.get(old, 0) for old, _ in files), "files": len(files)}
            for c, files in commits]


def push_size_main(since: str, root: Path, limit_mib: float = 256.0) -> int:
    """Print each commit's bytes and the total against ``limit_mib``; 1 when above it."""
    rows = push_bytes(root, since)
    total = sum(r["added"] + r["removed"] for r in rows)
    for r in rows:
        print(f"{r['commit']}  +{r['added'] / 1e6:8.1f} MB  -{r['removed'] / 1e6:8.1f} MB  "
              f"{r['files']} file(s)")
    print(f"{len(rows)} commit(s) since {since}: {total / 2**20:.1f} MiB moved "
          f"(added + removed, no rename detection) of a {limit_mib:g} MiB limit")
    return int(total > limit_mib * 2**20)
