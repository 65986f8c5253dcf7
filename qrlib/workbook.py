"""Workbook plumbing: profiles, run folders, atomic artifacts, notebook build and runner.

No science lives here. A *profile* is one YAML file under ``params/``::

    name: smoke                  # run name: runs/smoke, figures/smoke, tables/smoke
    description: CI profile
    extends: cpu.yaml            # optional: start from another profile, then override
    globals:                     # given to every notebook that declares the parameter
      seed: 0
    notebooks:                   # per-notebook parameters (override globals)
      02_index_build:
        datasets: [scifact]

Every key under ``globals`` must be declared in the ``parameters`` cell of at least one
notebook, and every key of a notebook section in that notebook's ``parameters`` cell;
anything else is an error naming the key, and so is a value whose type differs from the
default in the ``parameters`` cell (``"forty"`` for an integer, a string where a list is
expected, ``"false"`` for a boolean; ``null`` is always accepted, an integer where a float
is expected too). The runner always injects ``profile``, ``run_dir``, ``figures_dir``,
``tables_dir`` and ``cache_dir`` where a notebook declares them; a profile may not set them.

``--resume`` skips a notebook only when its fingerprint is unchanged: its parameters and
source, the fingerprints of every earlier notebook of the run (whose artifacts it may
read), the data folders it can read (file sizes and modification times) and the qrlib
source. One ``qrlib run`` at a time may use a run folder (``runs/<name>/run.lock`` holds
the PID); the executed copy of a notebook is ``INCOMPLETE-NN_name.ipynb`` until it has run
to the end.
"""
from __future__ import annotations

import ast
import contextlib
import copy
import hashlib
import json
import os
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from qrlib.errors import QrlibError

REPO_ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIR = REPO_ROOT / "notebooks"
NOTEBOOK_SRC_DIR = NOTEBOOK_DIR / "src"
PROFILE_KEYS = {"name", "description", "extends", "globals", "notebooks"}
INJECTED = ("profile", "run_dir", "figures_dir", "tables_dir", "cache_dir")


# --------------------------------------------------------------------------- paths
def cache_dir() -> Path:
    """Shared cache for embeddings, indexes and dequantised models.

    ``$QRLIB_CACHE`` if set, else ``<repo>/.cache/qrlib``. Shared across runs on purpose:
    encoding SciFact's corpus once is enough.
    """
    path = Path(os.environ.get("QRLIB_CACHE", REPO_ROOT / ".cache" / "qrlib"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def run_paths(name: str, root: Path | None = None) -> dict[str, Path]:
    """The folders a run writes to: runs/<name>, figures/<name>, tables/<name>."""
    root = Path(root or REPO_ROOT)
    return {
        "run_dir": root / "runs" / name,
        "figures_dir": root / "figures" / name,
        "tables_dir": root / "tables" / name,
    }


# --------------------------------------------------------------------------- atomic I/O
@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only on success.

    Nothing half-written is ever left at ``path``: a crash leaves the old file (or none).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    os.chmod(tmp_path, 0o666 & ~current_umask())  # mkstemp makes 0600; artifacts are shared
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


_UMASK_LOCK = threading.Lock()


def current_umask() -> int:
    """The process umask (read from /proc where possible, so no thread sees umask 0)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def atomic_write(path: str | os.PathLike, data: str | bytes) -> Path:
    """Write text or bytes to ``path`` atomically and return the path."""
    with atomic_path(path) as tmp:
        if isinstance(data, bytes):
            tmp.write_bytes(data)
        else:
            tmp.write_text(data, encoding="utf-8")
    return Path(path)


def save_json(obj: Any, path: str | os.PathLike) -> Path:
    """Atomically write ``obj`` as indented JSON (numpy scalars converted)."""
    return atomic_write(path, json.dumps(obj, indent=2, default=_json_default) + "\n")


def load_json(path: str | os.PathLike) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def _json_default(o: Any) -> Any:
    if hasattr(o, "item"):
        return o.item()
    if hasattr(o, "tolist"):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def save_table(df: Any, name: str, tables_dir: str | os.PathLike, *, caption: str = "",
               index: bool = False, floatfmt: str = ".4f") -> dict[str, Path]:
    """Save a DataFrame as ``<name>.csv`` and ``<name>.md`` (with caption) atomically."""
    tables_dir = Path(tables_dir)
    csv_path = tables_dir / f"{name}.csv"
    md_path = tables_dir / f"{name}.md"
    atomic_write(csv_path, df.to_csv(index=index))
    md = df.to_markdown(index=index, floatfmt=floatfmt)
    if caption:
        md = f"{md}\n\n{caption}"
    atomic_write(md_path, md + "\n")
    return {"csv": csv_path, "md": md_path}


# --------------------------------------------------------------------------- notebooks
def notebook_names() -> list[str]:
    """Notebook stems in run order (``NN_name``), from ``notebooks/src/*.py``."""
    return sorted(p.stem for p in NOTEBOOK_SRC_DIR.glob("[0-9][0-9]_*.py"))


def build_notebooks(names: list[str] | None = None) -> list[Path]:
    """Convert the jupytext sources ``notebooks/src/NN_*.py`` into ``notebooks/NN_*.ipynb``.

    The ``.py`` files (percent format) are the sources under review; the ``.ipynb`` files
    are what JupyterLab opens and the runner executes. Outputs are never stored.
    """
    import jupytext

    out = []
    for name in names or notebook_names():
        nb = jupytext.read(NOTEBOOK_SRC_DIR / f"{name}.py")
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (qrlib)",
                                     "language": "python"}
        nb.metadata.pop("jupytext", None)
        for i, cell in enumerate(nb.cells):  # stable ids: rebuilding gives no spurious diff
            cell.id = f"c{i:03d}-" + hashlib.sha1(cell.source.encode()).hexdigest()[:8]
        target = NOTEBOOK_DIR / f"{name}.ipynb"
        atomic_write(target, jupytext.writes(nb, fmt="ipynb"))
        out.append(target)
    return out


def notebook_parameters(name: str) -> dict[str, Any]:
    """Names and defaults declared in the notebook's ``parameters`` cell."""
    import papermill as pm

    path = NOTEBOOK_DIR / f"{name}.ipynb"
    if not path.exists():
        raise QrlibError(f"notebook {path} does not exist; run `make notebooks` to build it")
    params = pm.inspect_notebook(str(path))
    if not params:
        raise QrlibError(f"notebook {name} has no cell tagged 'parameters'")
    return {k: v.get("default") for k, v in params.items()}


_NO_DEFAULT = object()


def _default_value(source: Any) -> Any:
    """The Python value of a default as written in a parameters cell (``_NO_DEFAULT`` when
    it is an expression rather than a literal)."""
    if not isinstance(source, str):
        return source
    try:
        return ast.literal_eval(source)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return _NO_DEFAULT


def _type_name(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "a list", tuple: "a list", dict: "a mapping"}.get(type(value),
                                                                    type(value).__name__)


def check_value_type(value: Any, default: Any) -> str | None:
    """None if ``value`` fits the type of a parameters-cell ``default``, else what was
    expected. ``None`` on either side is always accepted; an int is accepted for a float."""
    if value is None or default is None or default is _NO_DEFAULT:
        return None
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(default, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif isinstance(default, str):
        ok = isinstance(value, str)
    elif isinstance(default, (list, tuple)):
        ok = isinstance(value, (list, tuple))
    elif isinstance(default, dict):
        ok = isinstance(value, dict)
    else:
        return None
    return None if ok else _type_name(default)


def _type_error(where: str, key: str, value: Any, expected: str, default: Any,
                notebook: str) -> QrlibError:
    hint = ""
    if expected == "a number" and isinstance(value, str):
        with contextlib.suppress(ValueError):
            float(value)
            hint = f" (YAML reads {value} as text; write it with a dot, e.g. 5.0e-5)"
    return QrlibError(f"{where}: {key} must be {expected} like its default {default!r} in "
                      f"{notebook}'s parameters cell, got {_type_name(value)} {value!r}{hint}")


# --------------------------------------------------------------------------- profiles
def _yaml_loader() -> Any:
    """A safe YAML loader that refuses a key given twice in one mapping."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    def mapping(loader: Any, node: Any, deep: bool = False) -> Any:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            with contextlib.suppress(TypeError):
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key!r} appears twice in one mapping",
                        key_node.start_mark)
                seen.add(key)
        return loader.construct_mapping(node, deep=deep)

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    return Loader


def _read_yaml(path: Path) -> dict[str, Any]:
    import yaml

    if not path.exists():
        raise QrlibError(f"profile {path} not found; profiles live in {REPO_ROOT / 'params'}")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise QrlibError(f"profile {path} cannot be read as UTF-8 text ({exc})") from None
    try:
        data = yaml.load(text, Loader=_yaml_loader())  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        what = getattr(exc, "problem", None) or (str(exc).splitlines() or ["parse error"])[0]
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise QrlibError(f"profile {path} is not valid YAML{where}: {what}") from None
    if not isinstance(data, dict):
        raise QrlibError(f"profile {path} must be a mapping with keys {sorted(PROFILE_KEYS)}")
    return data


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def load_profile(path: str | os.PathLike, *, validate: bool = True,
                 _chain: tuple[Path, ...] = ()) -> dict[str, Any]:
    """Read a profile (following ``extends``) and check every key against the notebooks.

    Raises :class:`QrlibError` naming the first unknown or malformed key.
    """
    path = Path(path)
    if not path.exists() and not path.suffix and (REPO_ROOT / "params" / f"{path}.yaml").exists():
        path = REPO_ROOT / "params" / f"{path}.yaml"
    here = path.resolve()
    if here in _chain:
        cycle = " -> ".join(p.name for p in (*_chain[_chain.index(here):], here))
        raise QrlibError(f"profile {_chain[0].name}: 'extends' forms a cycle ({cycle}); "
                         "a profile may extend only profiles that do not lead back to it")
    data = _read_yaml(path)
    unknown = set(data) - PROFILE_KEYS
    if unknown:
        raise QrlibError(f"profile {path.name}: unknown top-level key {sorted(unknown)[0]!r}; "
                         f"accepted: {sorted(PROFILE_KEYS)}")
    if "extends" in data:
        if not isinstance(data["extends"], str) or not data["extends"].strip():
            raise QrlibError(f"profile {path.name}: 'extends' must be a profile file name such "
                             f"as cpu.yaml, got {data['extends']!r}")
        parent = load_profile(path.parent / data["extends"], validate=False,
                              _chain=(*_chain, here))
        parent.pop("extends", None)
        child = {k: v for k, v in data.items() if k != "extends"}
        data = _merge(parent, child)
    data.setdefault("name", path.stem)
    data.setdefault("globals", {})
    data.setdefault("notebooks", {})
    for key in ("globals", "notebooks"):
        if not isinstance(data[key], dict):
            raise QrlibError(f"profile {path.name}: '{key}' must be a mapping, "
                             f"got {type(data[key]).__name__}")
    if not isinstance(data["name"], str) or not data["name"].replace("-", "").replace("_", "").isalnum():
        raise QrlibError(f"profile {path.name}: name must be letters, digits, '-' or '_', "
                         f"got {data['name']!r}")
    if validate:
        validate_profile(data, source=path.name)
    return data


def validate_profile(profile: dict[str, Any], *, source: str = "profile") -> None:
    """Check every key of ``globals`` and each notebook section against the notebooks."""
    names = notebook_names()
    declared = {n: notebook_parameters(n) for n in names}
    for nb, section in profile["notebooks"].items():
        if nb not in declared:
            raise QrlibError(f"{source}: unknown notebook {nb!r}; accepted: {names}")
        if section is None:
            section = profile["notebooks"][nb] = {}
        if not isinstance(section, dict):
            raise QrlibError(f"{source}: notebooks.{nb} must be a mapping of parameters")
        for key, value in section.items():
            if key in INJECTED:
                raise QrlibError(f"{source}: notebooks.{nb}.{key} is set by the runner; "
                                 "remove it")
            if key not in declared[nb]:
                raise QrlibError(f"{source}: unknown key {key!r} for notebook {nb}; "
                                 f"accepted: {sorted(declared[nb])}")
            default = _default_value(declared[nb][key])
            expected = check_value_type(value, default)
            if expected:
                raise _type_error(f"{source}: notebooks.{nb}", key, value, expected, default, nb)
    every = set().union(*declared.values()) if declared else set()
    for key, value in profile["globals"].items():
        if key in INJECTED:
            raise QrlibError(f"{source}: globals.{key} is set by the runner; remove it")
        if key not in every:
            raise QrlibError(f"{source}: unknown global key {key!r}; no notebook declares it")
        for nb in names:
            if key in declared[nb] and key not in profile["notebooks"].get(nb, {}):
                default = _default_value(declared[nb][key])
                expected = check_value_type(value, default)
                if expected:
                    raise _type_error(f"{source}: globals", key, value, expected, default, nb)


def parameters_for(profile: dict[str, Any], name: str, declared: Mapping[str, Any],
                   root: Path | None = None) -> dict[str, Any]:
    """The parameters papermill injects into notebook ``name``."""
    paths = run_paths(profile["name"], root)
    injected = {"profile": profile["name"], "cache_dir": str(cache_dir()),
                **{k: str(v) for k, v in paths.items()}}
    params = {k: v for k, v in injected.items() if k in declared}
    params.update({k: v for k, v in profile["globals"].items() if k in declared})
    params.update(profile["notebooks"].get(name, {}))
    return params


def params_hash(params: Mapping[str, Any], name: str) -> str:
    """Fingerprint of a notebook's source and parameters (one part of its fingerprint)."""
    src = (NOTEBOOK_DIR / f"{name}.ipynb").read_bytes()
    blob = json.dumps(params, sort_keys=True, default=str).encode() + src
    return hashlib.sha256(blob).hexdigest()[:16]


def qrlib_source_hash() -> str:
    """sha256 over every file of the qrlib package (code, prompts, published numbers)."""
    pkg = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for f in sorted(pkg.rglob("*")):
        if f.is_file() and "__pycache__" not in f.parts and f.suffix not in (".pyc", ".pyo"):
            h.update(str(f.relative_to(pkg)).encode() + b"\0" + f.read_bytes() + b"\1")
    return h.hexdigest()[:16]


def data_roots(data_dir: str | os.PathLike | None = None) -> list[Path]:
    """Every existing folder a notebook may read datasets from (``qrlib.data``'s lookup
    order, with the notebooks folder as the working directory)."""
    from qrlib import data as qdata

    cands = []
    if data_dir:
        d = Path(data_dir).expanduser()
        cands.append(d if d.is_absolute() else NOTEBOOK_DIR / d)
    if os.environ.get("QRLIB_DATA"):
        cands.append(Path(os.environ["QRLIB_DATA"]))
    cands += [NOTEBOOK_DIR / "data", REPO_ROOT / "data", qdata.REPO_ROOT / "data",
              qdata.REPO_ROOT.parent / "shared" / "data", REPO_ROOT.parent / "shared" / "data",
              NOTEBOOK_DIR.parent / "shared" / "data"]
    out: list[Path] = []
    for c in cands:
        if c.is_dir() and c.resolve() not in out:
            out.append(c.resolve())
    return out


def data_fingerprint(roots: list[Path]) -> str:
    """Hash of the path, size and modification time of every file under ``roots``."""
    h = hashlib.sha256()
    for root in roots:
        h.update(str(root).encode() + b"\0")
        for dirpath, dirnames, files in os.walk(root):
            dirnames.sort()
            for f in sorted(files):
                full = os.path.join(dirpath, f)
                with contextlib.suppress(OSError):
                    st = os.stat(full)
                    h.update(f"{os.path.relpath(full, root)}\0{st.st_size}\0"
                             f"{st.st_mtime_ns}\1".encode())
    return h.hexdigest()[:16]


def notebook_inputs(name: str, params: Mapping[str, Any], declared: Mapping[str, Any],
                    run_dir: Path, *, data_cache: dict[tuple, str] | None = None
                    ) -> dict[str, Any]:
    """What notebook ``name``'s results depend on, each part fingerprinted.

    ``params``: its parameters and source; ``upstream``: the fingerprint recorded in the
    completion marker of every earlier notebook of the run (``None``: not complete), since a
    notebook may read any earlier notebook's artifacts; ``data``: the data folders it can
    read; ``qrlib``: the library source.
    """
    data_dir = params.get("data_dir", _default_value(declared.get("data_dir")))
    roots = data_roots(data_dir if isinstance(data_dir, (str, os.PathLike)) else None)
    key = tuple(roots)
    cache = data_cache if data_cache is not None else {}
    if key not in cache:
        cache[key] = data_fingerprint(roots)
    upstream = {}
    for prev in notebook_names():
        if prev >= name:
            break
        marker = run_dir / "done" / f"{prev}.json"
        try:
            upstream[prev] = load_json(marker).get("hash") if marker.exists() else None
        except (OSError, ValueError):
            upstream[prev] = None
    return {"params": params_hash(params, name), "upstream": upstream,
            "data": cache[key], "data_roots": [str(r) for r in roots],
            "qrlib": qrlib_source_hash()}


def fingerprint_of(inputs: Mapping[str, Any]) -> str:
    """One fingerprint over :func:`notebook_inputs` (the completion marker's ``hash``)."""
    parts = {k: inputs[k] for k in ("params", "upstream", "data", "qrlib")}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def _changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    """Why a notebook's completion marker no longer matches, in a few words."""
    prev = old.get("inputs") or {}
    if not prev:
        return "it was completed by an older qrlib that recorded no inputs"
    why = []
    if prev.get("params") != new["params"]:
        why.append("parameters or notebook source changed")
    ups = [n for n, h in new["upstream"].items() if (prev.get("upstream") or {}).get(n) != h]
    if ups:
        why.append(f"earlier notebook{'s' if len(ups) > 1 else ''} {', '.join(ups)} changed")
    if prev.get("data") != new["data"]:
        why.append("data files changed")
    if prev.get("qrlib") != new["qrlib"]:
        why.append("qrlib source changed")
    return "; ".join(why) or "fingerprint changed"


# --------------------------------------------------------------------------- run lock
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


# --------------------------------------------------------------------------- runner
class _PeakMemory:
    """Sample the RSS of this process and all its children (the kernel) in a thread."""

    def __init__(self, interval: float = 0.5) -> None:
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        import psutil

        me = psutil.Process()
        while not self._stop.is_set():
            total = 0
            for p in [me, *me.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    total += p.memory_info().rss
            self.peak = max(self.peak, total)
            self._stop.wait(self.interval)

    def __enter__(self) -> "_PeakMemory":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()


def _failed_cell(exc: Exception) -> str:
    """Locate the failing cell in a papermill execution error, in one line."""
    name = getattr(exc, "ename", type(exc).__name__)
    value = " ".join(str(getattr(exc, "evalue", exc)).split())[:300]
    cell = getattr(exc, "exec_count", None)
    where = f"cell [{cell}]" if cell is not None else "a cell"
    return f"{where} raised {name}: {value}"


def run_profile(profile_path: str | os.PathLike, *, only: list[str] | None = None,
                resume: bool = False, root: Path | None = None, kernel: str = "python3",
                log_output: bool = False) -> list[dict[str, Any]]:
    """Execute the notebooks in order with papermill, injecting the profile's parameters.

    Executed notebooks go to ``runs/<name>/notebooks/`` (named ``INCOMPLETE-NN_name.ipynb``,
    behind a first cell saying so, until the notebook has run to its end); a completion
    marker with the notebook's fingerprint (see :func:`notebook_inputs`) goes to
    ``runs/<name>/done/``; wall time and peak memory of each notebook are appended to
    ``runs/<name>/timings.csv``. The run holds ``runs/<name>/run.lock`` throughout.
    """
    import papermill as pm

    profile = load_profile(profile_path)
    names = notebook_names()
    if only:
        wanted = []
        for token in only:
            match = [n for n in names if n == token or n.split("_", 1)[0] == token.zfill(2)]
            if not match:
                raise QrlibError(f"--only {token!r} matches no notebook; accepted: {names}")
            wanted += match
        names = [n for n in names if n in wanted]
    paths = run_paths(profile["name"], root)
    run_dir = paths["run_dir"]
    with run_lock(run_dir):
        for p in paths.values():
            p.mkdir(parents=True, exist_ok=True)
        save_json(profile, run_dir / "profile.json")
        rows: list[dict[str, Any]] = []
        data_cache: dict[tuple, str] = {}
        for name in names:
            declared = notebook_parameters(name)
            params = parameters_for(profile, name, declared, root)
            inputs = notebook_inputs(name, params, declared, run_dir, data_cache=data_cache)
            fingerprint = fingerprint_of(inputs)
            marker = run_dir / "done" / f"{name}.json"
            if resume and marker.exists():
                done = load_json(marker)
                if done.get("hash") == fingerprint:
                    print(f"[qrlib] {name}: complete, skipped (--resume)", flush=True)
                    rows.append({**done, "notebook": name, "status": "skipped"})
                    continue
                print(f"[qrlib] {name}: runs again: {_changed(done, inputs)}", flush=True)
            marker.unlink(missing_ok=True)
            out_nb = run_dir / "notebooks" / f"{name}.ipynb"
            partial_nb = out_nb.with_name(f"INCOMPLETE-{out_nb.name}")
            out_nb.parent.mkdir(parents=True, exist_ok=True)
            out_nb.unlink(missing_ok=True)  # an older complete copy no longer matches
            print(f"[qrlib] {name}: running with {json.dumps(params, default=str)}", flush=True)
            start = time.perf_counter()
            status, error = "ok", ""
            with _PeakMemory() as mem:
                try:
                    executed = pm.execute_notebook(
                        _with_incomplete_banner(NOTEBOOK_DIR / f"{name}.ipynb"),
                        str(partial_nb), parameters=params, kernel_name=kernel,
                        cwd=str(NOTEBOOK_DIR), progress_bar=False, log_output=log_output)
                except pm.PapermillExecutionError as exc:
                    status, error = "failed", _failed_cell(exc)
                except Exception as exc:  # noqa: BLE001 - kernel died (OOM, os._exit), timeout
                    reason = " ".join(str(exc).split())[:200] or "no message"
                    status, error = "failed", f"the kernel failed ({type(exc).__name__}: {reason})"
            wall = time.perf_counter() - start
            row = {"notebook": name, "status": status, "wall_s": round(wall, 1),
                   "peak_rss_mb": round(mem.peak / 2**20), "hash": fingerprint,
                   "finished": time.strftime("%Y-%m-%dT%H:%M:%S")}
            _append_timing(run_dir / "timings.csv", row)
            rows.append(row)
            if status != "ok":
                _print_summary(rows)
                raise QrlibError(f"notebook {name} failed: {error} (executed copy: "
                                 f"{partial_nb})")
            _save_complete(executed, out_nb, NOTEBOOK_DIR / f"{name}.ipynb")
            partial_nb.unlink(missing_ok=True)
            save_json({**row, "inputs": inputs}, marker)
        _print_summary(rows)
        from qrlib.publish import after_run  # timing table; cpu: executed notebooks + RESULTS.md

        after_run(profile["name"], rows, root=root)
    return rows


INCOMPLETE_CELL_ID = "qrlib-incomplete"


def _with_incomplete_banner(path: Path) -> Any:
    """The notebook at ``path`` behind a first cell saying this copy is incomplete.

    Papermill saves the executed copy after every cell, so a copy left by a kill or a
    failure says so itself (and is named ``INCOMPLETE-...``); the runner drops the cell once
    the notebook has run to its end.
    """
    import nbformat

    nb = nbformat.read(path, as_version=4)
    cell = nbformat.v4.new_markdown_cell(
        "**INCOMPLETE** — this executed copy was saved while the notebook ran; it stopped "
        "before the end (killed, interrupted or failed). Its results are not complete: run "
        "`python -m qrlib run` again.")
    cell.id = INCOMPLETE_CELL_ID
    cell.metadata["qrlib"] = "incomplete-banner"
    nb.cells.insert(0, cell)
    nb.metadata["qrlib"] = {**nb.metadata.get("qrlib", {}), "complete": False}
    return nb


def _save_complete(nb: Any, path: Path, source: Path) -> None:
    """Write the executed notebook without the incomplete banner, atomically."""
    import nbformat

    pm_meta = nb.metadata.get("papermill", {})
    if "input_path" in pm_meta:  # papermill recorded the bannered notebook object itself
        pm_meta["input_path"], pm_meta["output_path"] = str(source), str(path)
    nb.cells = [c for c in nb.cells if c.get("id") != INCOMPLETE_CELL_ID
                and c.get("metadata", {}).get("qrlib") != "incomplete-banner"]
    nb.metadata["qrlib"] = {**nb.metadata.get("qrlib", {}), "complete": True}
    atomic_write(path, nbformat.writes(nb))


def _append_timing(path: Path, row: Mapping[str, Any]) -> None:
    import pandas as pd

    cols = ["notebook", "status", "wall_s", "peak_rss_mb", "hash", "finished"]
    new = pd.DataFrame([{c: row.get(c) for c in cols}])
    if path.exists():
        new = pd.concat([pd.read_csv(path), new], ignore_index=True)
    atomic_write(path, new.to_csv(index=False))


def _print_summary(rows: list[dict[str, Any]]) -> None:
    print("\n[qrlib] notebook                      status    wall_s  peak_MB", flush=True)
    total = 0.0
    for r in rows:
        wall = float(r.get("wall_s") or 0)
        total += wall if r.get("status") == "ok" else 0
        print(f"[qrlib] {r['notebook']:<29} {r['status']:<8} {wall:8.1f} "
              f"{int(r.get('peak_rss_mb') or 0):8d}", flush=True)
    print(f"[qrlib] total wall time of executed notebooks: {total / 60:.1f} min", flush=True)


if __name__ == "__main__":  # pragma: no cover - `python -m qrlib.workbook build`
    if sys.argv[1:2] == ["build"]:
        for p in build_notebooks(sys.argv[2:] or None):
            print(p.relative_to(REPO_ROOT))
    else:
        print("usage: python -m qrlib.workbook build [NN_name ...]", file=sys.stderr)
        sys.exit(2)
