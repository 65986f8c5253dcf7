"""The data sets' sources read from local git clones, and served as the raw URLs serve them.

A folder of clones (``$QRLIB_DATA_SOURCES``) holds one git repository per source, found as
``<owner>/<name>``, ``<owner>+<name>`` or ``<owner>+<name>/repo`` (a bare mirror works:
files are read with ``git show <commit>:<path>``, no work tree needed). :func:`serve`
answers ``GET /<owner>/<name>/<commit>/<path>`` from them on 127.0.0.1, with ``Range``
support, so ``python -m qrlib data fetch --base-url http://127.0.0.1:PORT`` rebuilds every
set on a machine without the internet, and the tests check the whole download path.
"""
from __future__ import annotations

import contextlib
import http.server
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

from qrlib.core.errors import QrlibError

__all__ = ["clone_dir", "read_piece", "serve"]


def clone_dir(root: str | os.PathLike, repo: str) -> Path:
    """The git directory of ``repo`` (owner/name) under ``root``."""
    owner, name = repo.split("/", 1)
    root = Path(root)
    for cand in (root / owner / name, root / f"{owner}+{name}" / "repo", root / f"{owner}+{name}"):
        if (cand / ".git").exists() or (cand / "HEAD").exists():
            return cand
    raise QrlibError(f"no clone of {repo} under {root} (looked for {owner}/{name}, "
                     f"{owner}+{name}, {owner}+{name}/repo)")


def read_piece(root: str | os.PathLike, repo: str, commit: str, path: str) -> bytes:
    """The bytes of ``path`` at ``commit`` in the clone of ``repo``."""
    git = clone_dir(root, repo)
    res = subprocess.run(["git", "-C", str(git), "show", f"{commit}:{path}"],
                         capture_output=True, check=False)
    if res.returncode != 0:
        raise QrlibError(f"{repo} @ {commit[:12]}: no {path} "
                         f"({res.stderr.decode(errors='replace').strip()[:200]})")
    return res.stdout


class _Handler(http.server.BaseHTTPRequestHandler):
    root: Path
    fail_after: dict[str, int] = {}  # path -> bytes to send before dropping (tests)
    requests: list[tuple[str, int]] = []  # (path, first byte asked for), in order

    def log_message(self, *args: object) -> None:  # quiet
        return

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        parts = self.path.lstrip("/").split("/", 3)
        if len(parts) < 4:
            self.send_error(404)
            return
        owner, name, commit, path = parts
        try:
            data = read_piece(self.root, f"{owner}/{name}", commit, path)
        except QrlibError:
            self.send_error(404)
            return
        start = 0
        rng = self.headers.get("Range", "")
        if rng.startswith("bytes="):
            start = int(rng[6:].split("-", 1)[0] or 0)
        self.requests.append((self.path, start))
        if start:
            if start >= len(data):
                self.send_error(416)
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        body = data[start:]
        cut = self.fail_after.pop(self.path, None)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if cut is not None:  # an interrupted transfer: part of the body, then the socket closes
            self.wfile.write(body[:cut])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)


@contextlib.contextmanager
def serve(root: str | os.PathLike) -> Iterator[tuple[str, type]]:
    """A loopback HTTP server over the clones under ``root``; yields ``(base_url,
    handler class)`` (the handler's ``fail_after`` makes the next answer for a path stop
    after that many bytes; ``requests`` lists what was asked)."""
    handler = type("Handler", (_Handler,), {"root": Path(root), "fail_after": {},
                                            "requests": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()
