"""``python -m qrlib data fetch [NAME ...]``: download, verify, build, move into place.

For each set of :data:`~qrlib.data.build.sources.SOURCES`:

1. every piece is downloaded from ``<base>/<repo>/<commit>/<path>`` into a cache folder
   (``<dest>/.sources/``) as ``<file>.part``, resumed with an HTTP ``Range`` request when a
   ``.part`` is already there, and renamed only once its sha256 is the pinned one (a file
   whose sha256 differs is deleted: nothing half-written or wrong is kept);
2. the set's builder (:mod:`qrlib.data.build.scifact`, ...) writes the layout the loaders
   read into a temporary folder beside the destination, with a ``PROVENANCE.md``
   (sources, license, citation, transformations, sha256 of every written file);
3. the temporary folder is renamed to ``<dest>/<name>``.

A missing network is one line naming the set, the URL and the reason.
"""
from __future__ import annotations

import http.client
import importlib
import os
import shutil
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from qrlib.core.errors import QrlibError
from qrlib.data.build.sources import RAW_BASE, SOURCES, DataSet
from qrlib.generation.policy import sha256_file  # the project's one file hash

__all__ = ["sha256_file", "download", "fetch_set", "fetch", "default_dest", "buildable",
           "present"]

CHUNK = 1 << 16


def default_dest() -> Path:
    """``$QRLIB_DATA`` when set, else ``./data`` of the repository."""
    env = os.environ.get("QRLIB_DATA")
    if env:
        return Path(env)
    from qrlib.data.datasets import REPO_ROOT

    return Path(REPO_ROOT) / "data"


def buildable() -> list[str]:
    return [n for n, s in SOURCES.items() if s.builder]


def download(url: str, dest: Path, sha256: str, *, what: str, timeout: float = 60.0) -> Path:
    """``dest`` holding the bytes at ``url`` whose sha256 is ``sha256``; resumes a
    ``dest.part`` left by an interrupted download; a file that does not match is removed."""
    if dest.exists() and sha256_file(dest) == sha256:
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    offset = part.stat().st_size if part.exists() else 0
    headers = {"Range": f"bytes={offset}-"} if offset else {}
    total = None
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                    timeout=timeout) as resp:
            resumed = offset and getattr(resp, "status", 200) == 206
            length = resp.headers.get("Content-Length")
            total = (offset if resumed else 0) + int(length) if length else None
            with open(part, "ab" if resumed else "wb") as fh:
                shutil.copyfileobj(resp, fh, CHUNK)
    except urllib.error.HTTPError as exc:
        if not (exc.code == 416 and offset):  # 416 after a whole .part: nothing left to send
            raise QrlibError(f"{what}: cannot download {url} (HTTP {exc.code} {exc.reason})"
                             ) from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        reason = getattr(exc, "reason", None) or type(exc).__name__
        if part.exists() and part.stat().st_size:
            raise QrlibError(f"{what}: the download of {url} stopped ({reason}) after "
                             f"{part.stat().st_size} bytes; run again to resume it") from None
        raise QrlibError(f"{what}: cannot download {url} ({reason}); no network?") from None
    if total is not None and part.stat().st_size < total:
        raise QrlibError(f"{what}: the download of {url} stopped after "
                         f"{part.stat().st_size} of {total} bytes; run again to resume it")
    got = sha256_file(part)
    if got != sha256:
        part.unlink(missing_ok=True)
        raise QrlibError(f"{what}: {url} has sha256 {got[:16]}..., expected "
                         f"{sha256[:16]}...; the file was deleted")
    os.replace(part, dest)
    return dest


def _provenance(ds: DataSet, builder: object, out: Path) -> str:
    rows = [f"| {p.repo} @ {p.commit} | {p.path} | `{p.sha256}` |" for p in ds.pieces]
    files = sorted(f for f in out.rglob("*") if f.is_file() and f.name != "PROVENANCE.md")
    sums = [f"| {f.relative_to(out).as_posix()} | {f.stat().st_size} | `{sha256_file(f)}` |"
            for f in files]
    lines = [f"# {ds.name}", "",
             f"Built by `python -m qrlib data fetch {ds.name}` "
             f"(qrlib.data.build.{ds.builder}) from the public sources below.", "",
             f"**Citation:** {ds.citation}", f"**License:** {ds.license}", "",
             "## Sources", "", "| repository @ commit | path | sha256 |", "| --- | --- | --- |",
             *rows, "", "## Transformations", "",
             *(f"- {t}" for t in getattr(builder, "TRANSFORMATIONS", [])), "",
             "## Files (sha256)", "", "| file | bytes | sha256 |", "| --- | --- | --- |",
             *sums, ""]
    return "\n".join(lines)


def fetch_set(name: str, dest: Path, *, base_url: str = RAW_BASE,
              force: bool = False) -> Path:
    """Download, verify and build one set into ``dest/<name>``; returns that folder. An
    existing folder is kept unless ``force``."""
    if name not in SOURCES:
        raise QrlibError(f"unknown data set {name!r}; known: {', '.join(SOURCES)}")
    ds = SOURCES[name]
    if ds.builder is None:
        raise QrlibError(f"{name}: no builder yet (its sources are listed in "
                         f"qrlib.data.build.sources); buildable now: {', '.join(buildable())}")
    target = dest / name
    if target.exists() and not force:
        print(f"{name}: {target} exists, kept (force to rebuild)")
        return target
    cache = dest / ".sources"
    files: dict[str, Path] = {}
    for p in ds.pieces:
        files[p.path] = download(p.url(base_url), cache / p.local(), p.sha256, what=name)
    builder = importlib.import_module(f"qrlib.data.build.{ds.builder}")
    tmp = dest / f".{name}.building-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        builder.build(files, tmp)
        (tmp / "PROVENANCE.md").write_text(_provenance(ds, builder, tmp), encoding="utf-8")
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def present(name: str) -> Path | None:
    """Where the loaders already find set ``name`` (:func:`qrlib.data.datasets.candidate_dirs`),
    or None."""
    from qrlib.data.datasets import candidate_dirs

    return next((p for p in candidate_dirs(name) if p.is_dir() and any(p.iterdir())), None)


def fetch(names: Sequence[str] = (), dest: str | os.PathLike | None = None, *,
          base_url: str = RAW_BASE, force: bool = False, missing: bool = False) -> list[Path]:
    """:func:`fetch_set` for each name (every buildable set when none is given). With
    ``missing``, only the sets the loaders do not find yet; a missing set without a builder
    is named in one line and left out."""
    dest = Path(dest) if dest is not None else default_dest()
    out = []
    for name in (list(names) or (list(SOURCES) if missing else buildable())):
        if missing and (where := present(name)) is not None:
            print(f"{name}: found at {where}")
            continue
        if missing and SOURCES.get(name) and SOURCES[name].builder is None:
            print(f"{name}: missing, and no builder yet (sources in "
                  f"qrlib.data.build.sources); the notebooks that read it will say so")
            continue
        out.append(fetch_set(name, dest, base_url=base_url, force=force))
        print(f"{name}: built at {out[-1]}")
    return out


def fetch_main(names: Sequence[str], dest: str | None, base_url: str, force: bool,
               missing: bool = False) -> int:
    fetch(names, dest, base_url=base_url, force=force, missing=missing)
    return 0
