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

``--stale`` (alias ``--resume``) runs only the notebooks that ``python -m qrlib status``
calls stale or never run (:mod:`qrlib.freshness`: source, profile section, imported qrlib
files, dataset folders read, declared upstream notebooks). One ``qrlib run`` at a time may
use a run folder (``runs/<name>/run.lock`` holds the PID); the executed copy of a notebook
is ``INCOMPLETE-NN_name.ipynb`` until it has run to the end. Injected paths are relative
to ``notebooks/`` (the kernel's working directory), so executed notebooks hold no absolute
path of the machine that ran them.
"""
from __future__ import annotations

import ast
import contextlib
import copy
import hashlib
import json
import os
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from qrlib.core.io import (REPO_ROOT, atomic_path, atomic_write, cache_dir,  # noqa: F401
                           current_umask, load_json, read_table, save_json, save_table)
from qrlib.core.lock import LOCK_NAME, run_lock  # noqa: F401
from qrlib.core.errors import QrlibError

NOTEBOOK_DIR = REPO_ROOT / "notebooks"
NOTEBOOK_SRC_DIR = NOTEBOOK_DIR / "src"
PROFILE_KEYS = {"name", "description", "extends", "globals", "notebooks"}
INJECTED = ("profile", "run_dir", "figures_dir", "tables_dir", "cache_dir")


# --------------------------------------------------------------------------- paths
def run_paths(name: str, root: Path | None = None) -> dict[str, Path]:
    """The folders a run writes to: runs/<name>, figures/<name>, tables/<name>."""
    root = Path(root or REPO_ROOT)
    return {
        "run_dir": root / "runs" / name,
        "figures_dir": root / "figures" / name,
        "tables_dir": root / "tables" / name,
    }


@contextlib.contextmanager
def published_outputs_guard(name: str, folders: list[Path]) -> Any:
    """Keep a copy of notebook ``name``'s published outputs (``NN_*`` files in ``folders``)
    while it runs; ``guard.restore()`` puts them back exactly (files it added removed), so
    a notebook that fails half-way leaves no half-written tables or figures behind."""
    import shutil
    import tempfile

    prefix = name.split("_", 1)[0] + "_"
    with tempfile.TemporaryDirectory(prefix="qrlib-outputs-") as tmp:
        saved: dict[Path, Path] = {}
        for i, folder in enumerate(folders):
            for f in sorted(Path(folder).glob(prefix + "*")):
                if f.is_file():
                    saved[f] = Path(tmp) / str(i) / f.name
                    saved[f].parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(f, saved[f])

        class Guard:
            def restore(self) -> int:
                """Restore the saved outputs; returns how many files were changed back."""
                n = 0
                for folder in folders:
                    for f in Path(folder).glob(prefix + "*"):
                        if f.is_file() and f not in saved:
                            f.unlink()
                            n += 1
                for f, copy_ in saved.items():
                    if not f.exists() or f.read_bytes() != copy_.read_bytes():
                        shutil.copy2(copy_, f)
                        n += 1
                return n

        yield Guard()


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


def _rel(path: Path | str) -> str:
    """``path`` relative to the notebooks folder (the kernel's working directory), so no
    executed notebook or stamp holds an absolute path of the machine that ran it."""
    return os.path.relpath(Path(path).resolve(), NOTEBOOK_DIR.resolve())


def parameters_for(profile: dict[str, Any], name: str, declared: Mapping[str, Any],
                   root: Path | None = None) -> dict[str, Any]:
    """The parameters papermill injects into notebook ``name`` (paths relative to
    ``notebooks/``, the kernel's working directory)."""
    paths = run_paths(profile["name"], root)
    injected = {"profile": profile["name"], "cache_dir": _rel(cache_dir()),
                **{k: _rel(v) for k, v in paths.items()}}
    params = {k: v for k, v in injected.items() if k in declared}
    params.update({k: v for k, v in profile["globals"].items() if k in declared})
    params.update(profile["notebooks"].get(name, {}))
    return params


def data_roots(data_dir: str | os.PathLike | None = None) -> list[Path]:
    """Every existing folder a notebook may read datasets from (``qrlib.data``'s lookup
    order, with the notebooks folder as the working directory)."""
    from qrlib.data import datasets as qdata

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


def select_notebooks(names: list[str], only: list[str] | None) -> list[str]:
    """The notebooks ``--only`` names (number or full name), in run order."""
    if not only:
        return names
    wanted = []
    for token in only:
        match = [n for n in names if n == token or n.split("_", 1)[0] == token.zfill(2)]
        if not match:
            raise QrlibError(f"--only {token!r} matches no notebook; accepted: {names}")
        wanted += match
    return [n for n in names if n in wanted]


def stale_selection(profile_path: str | os.PathLike, root: Path) -> list[str]:
    """Notebooks to run for ``--stale``: every stale or never-run notebook, plus each fresh
    notebook whose artifacts a selected one reads but this machine's run folder lacks."""
    from qrlib import freshness

    profile = load_profile(profile_path)
    status = {s.notebook: s for s in freshness.profile_status(profile_path, root)}
    chosen = {n for n, s in status.items() if s.state != "fresh"}
    done_dir = run_paths(profile["name"], root)["run_dir"] / "done"
    todo = sorted(chosen)
    while todo:
        for up in freshness.declared_reads(todo.pop(), root):
            if up not in chosen and not (done_dir / f"{up}.json").exists():
                chosen.add(up)
                todo.append(up)
    return [n for n in notebook_names() if n in chosen]


def _dirty_inputs(profile_path: Path, inputs: Mapping[str, Any], root: Path) -> list[str]:
    """Uncommitted files among what a notebook depends on (its source, its qrlib modules,
    the profile files); [] outside a git work tree."""
    from qrlib import freshness

    files = [*inputs["source"], *inputs["modules"]]
    chain, path = [], profile_path.resolve()
    while path.exists() and path not in chain:  # the profile and the files it extends
        chain.append(path)
        ext = (_read_yaml(path) or {}).get("extends")
        if not isinstance(ext, str):
            break
        path = (path.parent / ext).resolve()
    return sorted(freshness.uncommitted(files + [os.path.relpath(p, root) for p in chain], root))


def run_profile(profile_path: str | os.PathLike, *, only: list[str] | None = None,
                resume: bool = False, stale: bool = False, allow_dirty: bool = False,
                root: Path | None = None, kernel: str = "python3",
                log_output: bool = False) -> list[dict[str, Any]]:
    """Execute the notebooks in order with papermill, injecting the profile's parameters.

    Executed notebooks go to ``runs/<name>/notebooks/`` (named ``INCOMPLETE-NN_name.ipynb``,
    behind a first cell saying so, until the notebook has run to its end). After each
    notebook the runner checks its read log against its declared reads
    (:mod:`qrlib.freshness`), stamps its tables and figure captions with the commit and its
    fingerprint, and records its inputs, wall time and peak memory in
    ``tables/<name>/manifest.json``. ``stale`` (or ``resume``) runs only what
    ``qrlib status`` calls stale or never run. A published profile refuses to run a
    notebook whose inputs have uncommitted changes unless ``allow_dirty``.
    """
    import papermill as pm

    from qrlib import freshness
    from qrlib.core import readlog
    from qrlib.publish import PUBLISHED_PROFILES, commit_info, stamp_outputs

    root = Path(root or REPO_ROOT)
    profile_path = Path(profile_path)
    if not profile_path.exists() and (root / "params" / f"{profile_path}.yaml").exists():
        profile_path = root / "params" / f"{profile_path}.yaml"
    profile = load_profile(profile_path)
    names = select_notebooks(notebook_names(), only)
    pick = set(stale_selection(profile_path, root)) if (stale or resume) else set(names)
    paths = run_paths(profile["name"], root)
    run_dir = paths["run_dir"]
    published = profile["name"] in PUBLISHED_PROFILES or os.environ.get("QRLIB_PUBLISH") == "1"
    with run_lock(run_dir):
        for p in paths.values():
            p.mkdir(parents=True, exist_ok=True)
        save_json(profile, run_dir / "profile.json")
        rows: list[dict[str, Any]] = []
        for name in names:
            if name not in pick:
                print(f"[qrlib] {name}: fresh, skipped", flush=True)
                rows.append({"notebook": name, "status": "skipped"})
                continue
            declared = notebook_parameters(name)
            params = parameters_for(profile, name, declared, root)
            static = freshness.static_inputs(name, params, root)
            dirty = _dirty_inputs(profile_path, static, root)
            if dirty and published and not allow_dirty:
                raise QrlibError(
                    f"{name}: refusing to publish into tables/{profile['name']} from a tree with "
                    f"uncommitted changes to what it depends on ({', '.join(dirty[:5])}"
                    f"{', ...' if len(dirty) > 5 else ''}); commit them or pass --allow-dirty")
            marker = run_dir / "done" / f"{name}.json"
            marker.unlink(missing_ok=True)
            out_nb = run_dir / "notebooks" / f"{name}.ipynb"
            partial_nb = out_nb.with_name(f"INCOMPLETE-{out_nb.name}")
            out_nb.parent.mkdir(parents=True, exist_ok=True)
            out_nb.unlink(missing_ok=True)  # an older complete copy no longer matches
            log = run_dir / "reads" / f"{name}.log"
            log.unlink(missing_ok=True)
            watch = [*data_roots(params.get("data_dir")), run_dir.resolve(),
                     (root / "params").resolve()]
            info = {**commit_info(root), "dirty": bool(dirty)}  # the commit the run starts at
            print(f"[qrlib] {name}: running with {json.dumps(params, default=str)}", flush=True)
            start = time.perf_counter()
            started = time.time()
            status, error = "ok", ""
            env = {"QRLIB_READ_LOG": str(log.resolve()),
                   "QRLIB_READ_WATCH": os.pathsep.join(map(str, watch))}
            old_env = {k: os.environ.get(k) for k in env}
            os.environ.update(env)
            with _PeakMemory() as mem, published_outputs_guard(
                    name, [paths["tables_dir"], paths["figures_dir"]]) as guard:
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
                finally:
                    for k, v in old_env.items():
                        if v is None:
                            os.environ.pop(k, None)
                        else:
                            os.environ[k] = v
                if status != "ok":  # a failed notebook publishes nothing
                    changed = guard.restore()
                    if changed:
                        print(f"[qrlib] {name}: failed; {changed} published table/figure "
                              f"file(s) put back as they were", flush=True)
            wall = time.perf_counter() - start
            row = {"notebook": name, "status": status, "wall_s": round(wall, 1),
                   "peak_rss_mb": round(mem.peak / 2**20),
                   "finished": time.strftime("%Y-%m-%dT%H:%M:%S")}
            if status == "ok":
                try:
                    reads = classify_reads(name, readlog.read_log(log), run_dir, watch, root)
                except QrlibError as exc:
                    status, error = "failed", str(exc)
                    row["status"] = status
            _append_timing(run_dir / "timings.csv", row)
            rows.append(row)
            if status != "ok":
                _print_summary(rows)
                raise QrlibError(f"notebook {name} failed: {error} (executed copy: "
                                 f"{partial_nb})")
            manifest = freshness.load_manifest(profile["name"], root)
            inputs = {**static, "data": freshness.data_inputs(reads["data"], root,
                                                              params.get("data_dir")),
                      "upstream": {u: (manifest.get(u) or {}).get("fingerprint")
                                   for u in freshness.declared_reads(name, root)}}
            fp = freshness.fingerprint(inputs)
            row["fingerprint"] = fp
            outputs = stamp_outputs(name, profile["name"], paths, since=started, info=info,
                                    fingerprint=fp, root=root)
            _save_complete(executed, out_nb, NOTEBOOK_DIR / f"{name}.ipynb")
            partial_nb.unlink(missing_ok=True)
            entry = {"fingerprint": fp, "commit": info["commit"], "dirty": info["dirty"],
                     "allow_dirty": bool(dirty and allow_dirty), "wall_s": row["wall_s"],
                     "peak_rss_mb": row["peak_rss_mb"], "finished": row["finished"],
                     "outputs": outputs, "inputs": inputs}
            freshness.save_manifest_entry(profile["name"], name, entry, root)
            save_json({**row, "hash": fp}, marker)
        _print_summary(rows)
        from qrlib.publish import after_run  # timing table; cpu: executed notebooks + RESULTS.md

        after_run(profile["name"], rows, root=root)
    return rows


RUNNER_FILES = ("done", "notebooks", "reads", "timings.csv", "profile.json", LOCK_NAME)
SHARED_DIRS = ("rl", "records")  # one sub-folder or file per notebook or training run


def _artifact_key(rel: Path) -> tuple[str, ...]:
    """What one notebook owns under the run folder: ``rl/<run>``, ``records/<file>``, or
    the top-level file or folder."""
    return tuple(rel.parts[:2] if rel.parts and rel.parts[0] in SHARED_DIRS else rel.parts[:1])


def classify_reads(name: str, log: list[tuple[str, str]], run_dir: Path,
                   watch: list[Path], root: Path) -> dict[str, list[str]]:
    """Sort a notebook's read log into dataset folders, profile files and artifacts.

    A file under the run folder that an earlier notebook wrote (per its read log) is that
    notebook's artifact, and reading it is an error unless the source header declares it
    (``jupyter: qrlib: reads``). Returns ``{"data": [...], "artifacts": [...]}`` with
    repository-relative dataset folders and profile files.
    """
    from qrlib import freshness
    from qrlib.core import readlog

    run_dir = run_dir.resolve()
    producers: dict[str, str] = {}
    for other in sorted((run_dir / "reads").glob("*.log")):
        if other.stem < name:
            for mode, p in readlog.read_log(other):
                if mode == "w":
                    producers[p] = other.stem
    by_key = {_artifact_key(Path(q).relative_to(run_dir)): n for q, n in producers.items()
              if Path(q).is_relative_to(run_dir)}
    own = {p for mode, p in log if mode == "w"}
    declared = set(freshness.declared_reads(name, root))
    data: set[str] = set()
    artifacts: set[str] = set()
    params_dir = (root / "params").resolve()
    for mode, p in log:
        path = Path(p)
        if mode != "r" or p in own:
            continue
        if path.is_relative_to(run_dir):
            rel = path.relative_to(run_dir)
            if rel.parts and rel.parts[0] in RUNNER_FILES:
                continue
            producer = producers.get(p) or by_key.get(_artifact_key(rel))
            if producer is None or producer == name:
                continue  # left by an older run of this notebook, or not an artifact
            if producer not in declared:
                raise QrlibError(
                    f"{name} read {rel}, an artifact of {producer}, but its source header does "
                    f"not declare it; add {producer} to `jupyter: qrlib: reads` in "
                    f"notebooks/src/{name}.py")
            artifacts.add(str(rel))
        elif path.is_relative_to(params_dir):
            data.add(os.path.relpath(path, root))
        else:
            for w in watch:
                if path.is_relative_to(w) and w != run_dir and len(path.relative_to(w).parts) > 1:
                    data.add(path.relative_to(w).parts[0])  # a dataset folder, by name
                    break
    return {"data": sorted(data), "artifacts": sorted(artifacts)}


INCOMPLETE_CELL_ID = "qrlib-incomplete"
READLOG_CELL_ID = "qrlib-read-log"


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
    hook = nbformat.v4.new_code_cell("import qrlib.core.readlog\nqrlib.core.readlog.start()")
    hook.id = READLOG_CELL_ID
    hook.metadata["qrlib"] = "read-log"
    hook.metadata["tags"] = ["qrlib-read-log"]
    nb.cells[:0] = [cell, hook]
    nb.metadata["qrlib"] = {**nb.metadata.get("qrlib", {}), "complete": False}
    return nb


def _save_complete(nb: Any, path: Path, source: Path) -> None:
    """Write the executed notebook without the incomplete banner, atomically."""
    import nbformat

    pm_meta = nb.metadata.get("papermill", {})
    if "input_path" in pm_meta:  # papermill recorded the bannered notebook object itself
        pm_meta["input_path"], pm_meta["output_path"] = _rel(source), _rel(path)
    nb.cells = [c for c in nb.cells if c.get("id") not in (INCOMPLETE_CELL_ID, READLOG_CELL_ID)
                and c.get("metadata", {}).get("qrlib") not in ("incomplete-banner", "read-log")]
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
