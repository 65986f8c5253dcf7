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
anything else is an error naming the key. The runner always injects ``profile``,
``run_dir``, ``figures_dir``, ``tables_dir`` and ``cache_dir`` where a notebook declares
them.
"""
from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import os
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
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


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


# --------------------------------------------------------------------------- profiles
def _read_yaml(path: Path) -> dict[str, Any]:
    import yaml

    if not path.exists():
        raise QrlibError(f"profile {path} not found; profiles live in {REPO_ROOT / 'params'}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0] if str(exc) else "parse error"
        raise QrlibError(f"profile {path} is not valid YAML: {first}") from None
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


def load_profile(path: str | os.PathLike, *, validate: bool = True) -> dict[str, Any]:
    """Read a profile (following ``extends``) and check every key against the notebooks.

    Raises :class:`QrlibError` naming the first unknown or malformed key.
    """
    path = Path(path)
    if not path.exists() and not path.suffix and (REPO_ROOT / "params" / f"{path}.yaml").exists():
        path = REPO_ROOT / "params" / f"{path}.yaml"
    data = _read_yaml(path)
    unknown = set(data) - PROFILE_KEYS
    if unknown:
        raise QrlibError(f"profile {path.name}: unknown top-level key {sorted(unknown)[0]!r}; "
                         f"accepted: {sorted(PROFILE_KEYS)}")
    if "extends" in data:
        parent = load_profile(path.parent / str(data["extends"]), validate=False)
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
        if not isinstance(section, dict):
            raise QrlibError(f"{source}: notebooks.{nb} must be a mapping of parameters")
        for key in section:
            if key not in declared[nb]:
                raise QrlibError(f"{source}: unknown key {key!r} for notebook {nb}; "
                                 f"accepted: {sorted(declared[nb])}")
    every = set().union(*declared.values()) if declared else set()
    for key in profile["globals"]:
        if key in INJECTED:
            raise QrlibError(f"{source}: globals.{key} is set by the runner; remove it")
        if key not in every:
            raise QrlibError(f"{source}: unknown global key {key!r}; no notebook declares it")


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
    """Fingerprint of a notebook's source and parameters, for ``--resume``."""
    src = (NOTEBOOK_DIR / f"{name}.ipynb").read_bytes()
    blob = json.dumps(params, sort_keys=True, default=str).encode() + src
    return hashlib.sha256(blob).hexdigest()[:16]


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

    Executed notebooks go to ``runs/<name>/notebooks/``; a completion marker with the
    parameter fingerprint goes to ``runs/<name>/done/``; wall time and peak memory of each
    notebook are appended to ``runs/<name>/timings.csv``.
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
    for p in paths.values():
        p.mkdir(parents=True, exist_ok=True)
    save_json(profile, run_dir / "profile.json")
    rows: list[dict[str, Any]] = []
    for name in names:
        declared = notebook_parameters(name)
        params = parameters_for(profile, name, declared, root)
        fingerprint = params_hash(params, name)
        marker = run_dir / "done" / f"{name}.json"
        if resume and marker.exists() and load_json(marker).get("hash") == fingerprint:
            print(f"[qrlib] {name}: complete, skipped (--resume)", flush=True)
            rows.append({**load_json(marker), "notebook": name, "status": "skipped"})
            continue
        marker.unlink(missing_ok=True)
        out_nb = run_dir / "notebooks" / f"{name}.ipynb"
        out_nb.parent.mkdir(parents=True, exist_ok=True)
        print(f"[qrlib] {name}: running with {json.dumps(params, default=str)}", flush=True)
        start = time.perf_counter()
        status, error = "ok", ""
        with _PeakMemory() as mem:
            try:
                pm.execute_notebook(str(NOTEBOOK_DIR / f"{name}.ipynb"), str(out_nb),
                                    parameters=params, kernel_name=kernel,
                                    cwd=str(NOTEBOOK_DIR), progress_bar=False,
                                    log_output=log_output)
            except pm.PapermillExecutionError as exc:
                status, error = "failed", _failed_cell(exc)
        wall = time.perf_counter() - start
        row = {"notebook": name, "status": status, "wall_s": round(wall, 1),
               "peak_rss_mb": round(mem.peak / 2**20), "hash": fingerprint,
               "finished": time.strftime("%Y-%m-%dT%H:%M:%S")}
        _append_timing(run_dir / "timings.csv", row)
        rows.append(row)
        if status != "ok":
            _print_summary(rows)
            raise QrlibError(f"notebook {name} failed: {error} (executed copy: {out_nb})")
        save_json(row, marker)
    _print_summary(rows)
    from qrlib.publish import after_run  # timing table; cpu: executed notebooks + RESULTS.md

    after_run(profile["name"], rows, root=root)
    return rows


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
