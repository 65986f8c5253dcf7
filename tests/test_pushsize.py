"""What a push moves, commit by commit (qrlib.workbook.pushsize)."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from qrlib.core.errors import QrlibError
from qrlib.workbook.pushsize import push_bytes, push_size_main


def _git(root: Path, *a: str) -> str:
    return subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t",
                           *a], check=True, capture_output=True, text=True).stdout.strip()


def _commit(root: Path, files: dict[str, int | None], msg: str) -> None:
    for rel, size in files.items():
        p = root / rel
        if size is None:
            p.unlink()
        else:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(bytes([len(msg)]) * size)
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", msg)


def test_a_push_counts_added_changed_removed_and_moved_files_whole(tmp_path, capsys):
    _git(tmp_path, "init", "-q")
    _commit(tmp_path, {"a/old.tar.gz": 3000}, "base")
    base = _git(tmp_path, "rev-parse", "HEAD")
    _commit(tmp_path, {"a/new.tar.gz": 1000, "b.txt": 10}, "add")       # +1010
    _commit(tmp_path, {"b.txt": 40}, "change")                           # +40 -10
    _commit(tmp_path, {"a/old.tar.gz": None}, "remove the park")         # -3000
    (tmp_path / "a" / "new.tar.gz").rename(tmp_path / "moved.tar.gz")
    _commit(tmp_path, {}, "move")                                        # +1000 -1000
    rows = push_bytes(tmp_path, base)
    assert [(r["added"], r["removed"], r["files"]) for r in rows] == [
        (1010, 0, 2), (40, 10, 1), (0, 3000, 1), (1000, 1000, 2)]
    assert push_size_main(base, tmp_path, limit_mib=6060 / 2**20) == 0  # exactly at the limit
    assert push_size_main(base, tmp_path, limit_mib=6059 / 2**20) == 1
    assert "4 commit(s)" in capsys.readouterr().out
    with pytest.raises(QrlibError, match="--since 'nope': not a commit"):
        push_bytes(tmp_path, "nope")
