"""Carry the run-folder artifacts that later notebooks read across clones (``artifacts/``).

Notebooks 15, 16 and 18 load adapters and records that 06, 07, 08 and 12 left under
``runs/<profile>/``, which git ignores. On a fresh clone those readers would first need
their producers trained again (hours, more than one session for 06 -> 07 -> 12 -> 18), and
the new draw would not be the run behind the published tables (RL here is not
bit-reproducible, README). So after a producer runs in a profile whose tables are committed,
the runner packs what it owns under the run folder into ``artifacts/<profile>/<notebook>/``:
one ``.tar.gz`` per training run, record or folder (``checkpoint-N`` folders left out) and
``carry.json`` (commit, fingerprint, sha256 and size of each archive, the notebook's write
log and done marker). Before a run it unpacks every carried notebook this clone has not run
whose fingerprint is the one the published tables carry (``tables/<profile>/manifest.json``):
readers then read exactly the adapters the tables came from, and a rerun of the producer
reuses its finished trainings (:mod:`qrlib.rl.checkpoints`) instead of drawing new ones.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Any, Iterable

from qrlib.core import readlog
from qrlib.core.errors import QrlibError
from qrlib.core.io import atomic_write, load_json, save_json
from qrlib.core.lock import LOCK_NAME
from qrlib.workbook import freshness
from qrlib.workbook.profiles import notebook_names, run_paths

__all__ = ["ARTIFACTS", "CARRY_FILE", "TABLE_READERS", "carried_notebooks", "carry_enabled",
           "owned_keys", "pack", "restore", "restore_missing"]

ARTIFACTS = "artifacts"
CARRY_FILE = "carry.json"
#: Suffix of the folder a cut-short run's trainings are parked in (:mod:`qrlib.workbook.park`).
PARKED = ".parked"
#: Notebooks whose declared reads are published tables only (``tables/<profile>/``), not
#: run folders: what they declare is not carried for them.
TABLE_READERS = ("12_acqo_vanilla_rl", "20_trained_rows")
#: What the runner itself keeps under a run folder, and the folders several notebooks share
#: (one sub-folder or file per notebook or training run).
RUNNER_FILES = ("done", "notebooks", "reads", "started", "parked", "timings.csv", "profile.json",
                LOCK_NAME)
SHARED_DIRS = ("rl", "records")
#: Git hosts refuse files above 100 MB; an archive above this is not carried.
MAX_ARCHIVE_BYTES = 95 * 2**20
#: Uncompressed bytes per archive (a training run's files are split across archives).
CHUNK_BYTES = 60 * 2**20
RUN_DIR_TOKEN = "{run_dir}"


def artifact_key(rel: Path) -> tuple[str, ...]:
    """What one notebook owns under the run folder: ``rl/<run>``, ``records/<file>``, or
    the top-level file or folder."""
    return tuple(rel.parts[:2] if rel.parts and rel.parts[0] in SHARED_DIRS else rel.parts[:1])


def carried_notebooks(root: Path) -> list[str]:
    """Notebooks whose run-folder artifacts a later notebook reads (its ``reads:`` header,
    less the :data:`TABLE_READERS`), in run order."""
    up = {u for n in notebook_names() if n not in TABLE_READERS
          for u in freshness.declared_reads(n, root)}
    return [n for n in notebook_names() if n in up]


def carry_enabled(profile: str, root: Path) -> bool:
    """Whether ``profile``'s tables are committed (``tables/<profile>`` not ignored by git):
    only those runs are carried; False outside a git work tree."""
    try:
        r = subprocess.run(["git", "-C", str(root), "check-ignore", "-q",
                            f"tables/{profile}/manifest.json"], capture_output=True)
    except OSError:
        return False
    return r.returncode == 1  # 0: ignored; 128: not a work tree


def _under(p: str, run_dir: Path) -> Path | None:
    path = Path(p)
    return path.relative_to(run_dir) if path.is_relative_to(run_dir) else None


def owned_keys(name: str, run_dir: Path) -> list[tuple[str, ...]]:
    """The artifact keys (:func:`artifact_key`) ``name`` owns under ``run_dir``, from the
    read logs: what it wrote, and training runs it read that no notebook's log wrote (a
    finished training it reused); never what another notebook's log wrote."""
    run_dir = run_dir.resolve()
    log = readlog.read_log(run_dir / "reads" / f"{name}.log")
    if not log:
        raise QrlibError(f"{name}: no read log under {run_dir / 'reads'}; run the notebook "
                         f"with `python -m qrlib run` before carrying it")
    others: set[tuple[str, ...]] = set()
    for other in (run_dir / "reads").glob("*.log"):
        if other.stem != name:
            for mode, p in readlog.read_log(other):
                rel = _under(p, run_dir)
                if mode == "w" and rel is not None:
                    others.add(artifact_key(rel))
    keys: dict[tuple[str, ...], None] = {}
    for mode, p in log:
        rel = _under(p, run_dir)
        if rel is None or not rel.parts or rel.parts[0] in RUNNER_FILES:
            continue
        key = artifact_key(rel)
        if key in others or (mode == "r" and key[0] != "rl") or key[-1].startswith("."):
            continue  # another notebook's, an input, or a hidden lock/temporary entry
        if (run_dir.joinpath(*key)).exists():
            keys[key] = None
    return sorted(keys)


def _members(base: Path, keep: str | None = None) -> Iterable[Path]:
    """Files under ``base`` (or ``base`` itself) less checkpoints (but the ``checkpoint-N``
    folder named ``keep``: a parked run's resume point) and temporary files."""
    if base.is_file():
        yield base
        return
    for p in sorted(base.rglob("*")):
        parts = p.relative_to(base).parts
        if p.is_file() and not any(s.startswith("checkpoint-") and s != keep for s in parts) \
                and not p.name.endswith(".tmp") and not p.name.startswith(".lock"):
            yield p


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _archive_name(key: tuple[str, ...], part: int = 0) -> str:
    return "__".join(key) + (f".{part + 1}" if part else "") + ".tar.gz"


def _chunks(files: list[Path]) -> list[list[Path]]:
    """``files`` in runs of at most :data:`CHUNK_BYTES` (one archive each; a run of two
    adapters is too big for one file a git host accepts)."""
    out: list[list[Path]] = [[]]
    size = 0
    for f in files:
        n = f.stat().st_size
        if out[-1] and size + n > CHUNK_BYTES:
            out.append([])
            size = 0
        out[-1].append(f)
        size += n
    return out


def _same_bytes(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def _write_archive(arc: Path, files: list[Path], run_dir: Path) -> None:
    """A ``.tar.gz`` of ``files`` that is byte-identical whenever they are (no gzip time,
    owner or group): a run packed again (parked twice, then carried) adds nothing to git."""
    with open(arc, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6,
                                               mtime=0, filename="") as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for f in files:
            tar.add(f, arcname=str(f.relative_to(run_dir)), recursive=False, filter=_same_bytes)


def pack(profile: str, name: str, root: Path, *, commit: str, fingerprint: str,
         parked: dict[str, Any] | None = None) -> Path:
    """Write ``artifacts/<profile>/<name>/`` from this clone's run folder (replacing an
    older one whole, never half-written). Returns the folder.

    With ``parked`` (:mod:`qrlib.workbook.park`): what a cut-short run wrote, each unfinished
    training with its newest complete checkpoint (one without a checkpoint left out), into
    ``<name>.parked/``."""
    run_dir = run_paths(profile, root)["run_dir"].resolve()
    keys = owned_keys(name, run_dir)
    keep: dict[tuple[str, ...], str | None] = {}
    if parked is not None:  # a training that never reached a checkpoint has nothing to keep
        keys = [k for k in keys if k[0] != "rl" or k[-1] in parked["runs"]]
        keep = {k: parked["runs"][k[-1]].get("checkpoint") for k in keys if k[0] == "rl"}
    dest = root / ARTIFACTS / profile / (name + (PARKED if parked is not None else ""))
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=dest.parent))
    try:
        archives: dict[str, Any] = {}
        for key in keys:
            members = list(_members(run_dir.joinpath(*key), keep.get(key)))
            for i, files in enumerate(_chunks(members)):
                arc = tmp / _archive_name(key, i)
                _write_archive(arc, files, run_dir)
                size = arc.stat().st_size
                if size > MAX_ARCHIVE_BYTES:
                    raise QrlibError(f"{name}: {arc.name} packs to {size / 2**20:.0f} MiB, above "
                                     f"the {MAX_ARCHIVE_BYTES // 2**20} MiB a git host accepts")
                archives[arc.name] = {"sha256": _sha256(arc), "bytes": size, "files": len(files)}
        log = [(m, RUN_DIR_TOKEN + "/" + str(rel)) for m, p in
               readlog.read_log(run_dir / "reads" / f"{name}.log")
               if (rel := _under(p, run_dir)) is not None]
        done = run_dir / "done" / f"{name}.json"
        save_json({"notebook": name, "profile": profile, "commit": commit,
                   "fingerprint": fingerprint, "archives": archives, "log": log,
                   "done": load_json(done) if done.exists() and parked is None else None,
                   **({"parked": parked} if parked is not None else {})}, tmp / CARRY_FILE)
        old = dest.with_name(f".{dest.name}.old")
        if dest.exists():
            dest.rename(old)
        tmp.rename(dest)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def restore(profile: str, name: str, root: Path, *, folder: str | None = None) -> dict[str, Any]:
    """Unpack ``artifacts/<profile>/<folder or name>/`` into the run folder (keys already
    there are left alone) with its write log and done marker (a parked run has neither);
    one-line errors on a missing or altered archive. Returns its ``carry.json``."""
    src = root / ARTIFACTS / profile / (folder or name)
    try:
        meta = load_json(src / CARRY_FILE)
    except FileNotFoundError:
        raise QrlibError(f"{src}: no {CARRY_FILE}; nothing of {name} is carried") from None
    run_dir = run_paths(profile, root)["run_dir"].resolve()
    for arc, info in meta["archives"].items():
        path = src / arc
        if not path.exists() or _sha256(path) != info["sha256"]:
            raise QrlibError(f"{path}: missing or not the archive {CARRY_FILE} names "
                             f"(sha256 differs); check it out again from git")
    run_dir.mkdir(parents=True, exist_ok=True)
    for arc in meta["archives"]:
        with tempfile.TemporaryDirectory(dir=run_dir, prefix=".carry.") as tmp:
            with tarfile.open(src / arc, "r:gz") as tar:
                tar.extractall(tmp, filter="data")
            for top in Path(tmp).iterdir():
                _merge(top, run_dir / top.name)
    if meta.get("parked") is not None:  # the resuming run writes its own log
        return meta
    lines = "".join(f"{m}\t{p.replace(RUN_DIR_TOKEN, str(run_dir), 1)}\n" for m, p in meta["log"])
    atomic_write(run_dir / "reads" / f"{name}.log", lines)
    if meta.get("done"):
        save_json(meta["done"], run_dir / "done" / f"{name}.json")
    return meta


def _merge(src: Path, dest: Path) -> None:
    """Move ``src`` to ``dest``; into an existing folder, only what it lacks."""
    if not dest.exists():
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(src, dest)
    elif src.is_dir() and dest.is_dir():
        for child in src.iterdir():
            _merge(child, dest / child.name)


def restore_missing(profile: str, root: Path, *, say: Any = print) -> list[str]:
    """Restore each carried notebook of ``profile`` that this clone has not run (no done
    marker) and whose carried fingerprint is the published one; returns their names."""
    if not (root / ARTIFACTS / profile).is_dir():
        return []
    run_dir = run_paths(profile, root)["run_dir"]
    manifest = freshness.load_manifest(profile, root)
    out = []
    for name in carried_notebooks(root):
        folder = root / ARTIFACTS / profile / name
        if (run_dir / "done" / f"{name}.json").exists() or not (folder / CARRY_FILE).exists():
            continue
        carried = json.loads((folder / CARRY_FILE).read_text())
        published = (manifest.get(name) or {}).get("fingerprint")
        if carried.get("fingerprint") != published:
            say(f"[qrlib] {name}: carried runs (fingerprint {carried.get('fingerprint')}) are "
                f"not the published run ({published}); not restored")
            continue
        restore(profile, name, root)
        say(f"[qrlib] {name}: restored its runs from {folder.relative_to(root)} (run at "
            f"{carried.get('commit')})")
        out.append(name)
    return out
