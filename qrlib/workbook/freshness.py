"""Per-notebook freshness: exactly what can change a notebook's results, file by file.

A notebook's **inputs** are

* ``source``: its jupytext source ``notebooks/src/NN_name.py``;
* ``params``: its parameters after ``extends`` and globals (the profile section it sees);
* ``modules``: every qrlib file it imports, transitively, found by reading the ``import``
  statements (deferred imports inside functions included; a package ``__init__`` that
  imports its submodules with ``pkgutil.iter_modules`` depends on all of them; a package's
  non-Python files, e.g. ``qrlib/methods/acqo/published.yaml``, belong to its ``__init__``);
* ``data``: the dataset folders it actually opened in its last run (recorded by the runner's
  read log, :mod:`qrlib.core.readlog`), hashed by content;
* ``upstream``: the fingerprint of each earlier notebook whose artifacts it declares reading
  in its source header (``jupyter: qrlib: reads: [06_acqo_stage1]``).

The runner (:mod:`qrlib.workbook.runner`) records these inputs per notebook in
``tables/<profile>/manifest.json`` (committed with the tables), so that
``python -m qrlib status --profile cpu`` can say, on any clone, which published notebooks
are fresh, which are stale and why. Pure functions of file contents; git is asked only for
the "(uncommitted)" note in a reason.

Imports only :mod:`qrlib.workbook.profiles`, :mod:`qrlib.core` and :mod:`qrlib.errors`.
"""
from __future__ import annotations

import ast
import hashlib
import json
import os
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from qrlib.core.io import REPO_ROOT, atomic_write, load_json
from qrlib.core.errors import QrlibError
from qrlib.core.registry import pyproject_entries
from qrlib.workbook.profiles import (data_roots, load_profile, profile_notebooks,
                                     notebook_parameters, parameters_for)

PACKAGE = "qrlib"
MANIFEST = "manifest.json"
_DYNAMIC_IMPORT_MARKERS = ("pkgutil.iter_modules", "iter_modules(")


# --------------------------------------------------------------------------- hashing
def file_hash(path: Path) -> str:
    """sha256 (16 hex digits) of a file's bytes; ``"missing"`` when it does not exist."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    except FileNotFoundError:
        return "missing"


def folder_hash(path: Path) -> str:
    """sha256 over the relative names and bytes of every file under ``path``."""
    if not path.is_dir():
        return "missing"
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        h.update(str(f.relative_to(path)).encode() + b"\0")
        h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()[:16]


def value_hash(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


# --------------------------------------------------------------------------- imports
def _module_file(mod: str, root: Path) -> Path | None:
    """The file of a qrlib module name (``qrlib.x.y``), or None if it is not one."""
    if mod != PACKAGE and not mod.startswith(PACKAGE + "."):
        return None
    rel = Path(*mod.split("."))
    for cand in (root / rel.with_suffix(".py"), root / rel / "__init__.py"):
        if cand.is_file():
            return cand
    return None


def _imports_of(tree: ast.AST, current: str, is_package: bool) -> set[str]:
    """Module names imported anywhere in ``tree`` (relative imports resolved)."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = current.split(".")
                base = parts if is_package else parts[:-1]
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)  # `from pkg import submodule`
    return out


def _with_parents(mod: str) -> list[str]:
    parts = mod.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


REGISTRY_MODULE = "qrlib.methods.registry"
"""Imports every paper's ``register`` module through entry points, which no ``import``
statement shows; :func:`module_closure` adds them from ``pyproject.toml``."""

PUBLISHED_MODULE = "qrlib.eval.published"
"""Reads each paper folder's ``published.yaml`` (package data): :func:`module_closure` adds
the folders of the registered papers."""

NOT_READ_BY_NOTEBOOKS = frozenset({"claims.yaml"})
"""Package files that are not inputs of a notebook's results: the papers' claims are judged
by the scoreboard of RESULTS.md, regenerated on every results run; a notebook's "What we
found" only names the claims it feeds, so editing a claim stales no notebook (its sentence
may then name an older claim set until the next run)."""


_PARSED: dict[tuple[str, str, bool, str], tuple[frozenset[str], bool]] = {}


def _parsed_imports(path: Path, name: str, is_pkg: bool) -> tuple[set[str], bool]:
    """:func:`_imports_of` of one file and whether it imports dynamically, cached by the
    file's text (``qrlib status`` and the tests walk the same ~150 files once per notebook;
    reading is cheap, parsing is not)."""
    text = path.read_text(encoding="utf-8")
    key = (str(path), name, is_pkg, text)
    if key not in _PARSED:
        _PARSED[key] = (frozenset(_imports_of(ast.parse(text, filename=str(path)), name,
                                              is_pkg)),
                        any(m in text for m in _DYNAMIC_IMPORT_MARKERS))
    found, dynamic = _PARSED[key]
    return set(found), dynamic


def module_closure(source: Path, root: Path = REPO_ROOT) -> list[str]:
    """Repository-relative paths of every qrlib file that importing ``source`` can load.

    Parents' ``__init__`` files count (importing ``qrlib.rewards.acqo`` runs
    ``qrlib/methods/__init__.py``); a package's non-Python files count as part of its
    ``__init__`` (they are package data it reads).
    """
    seen: dict[str, Path] = {}
    todo: list[tuple[str, Path, bool]] = [("__main__", source, False)]
    while todo:
        name, path, is_pkg = todo.pop()
        found, dynamic = _parsed_imports(path, name, is_pkg)
        if name == REGISTRY_MODULE:  # it loads the papers' entry points (qrlib.core.registry)
            found.update(pyproject_entries(root / "pyproject.toml").values())
        elif name == PUBLISHED_MODULE:  # it reads every paper folder's published.yaml
            found.update(m.rpartition(".")[0]
                         for m in pyproject_entries(root / "pyproject.toml").values())
        if is_pkg and dynamic:
            found.update(f"{name}.{p.stem}" for p in path.parent.glob("*.py")
                         if p.name != "__init__.py")
        for mod in found:
            for m in _with_parents(mod):
                f = _module_file(m, root)
                if f is not None and m not in seen:
                    seen[m] = f
                    todo.append((m, f, f.name == "__init__.py"))
    files: set[Path] = set(seen.values())
    for f in list(files):
        if f.name == "__init__.py":
            files.update(p for p in f.parent.iterdir()
                         if p.is_file() and p.suffix not in (".py", ".pyc")
                         and p.name not in NOT_READ_BY_NOTEBOOKS)
    return sorted(str(f.relative_to(root)) for f in files)


# --------------------------------------------------------------------------- declarations
def source_path(name: str, root: Path = REPO_ROOT) -> Path:
    return root / "notebooks" / "src" / f"{name}.py"


def declared_reads(name: str, root: Path = REPO_ROOT) -> list[str]:
    """Earlier notebooks whose artifacts ``name`` reads, from its jupytext header::

        # ---
        # jupyter:
        #   qrlib:
        #     reads: [06_acqo_stage1]
        # ---
    """
    lines = source_path(name, root).read_text(encoding="utf-8").splitlines()
    if not lines or lines[0].strip() != "# ---":
        return []
    head = []
    for line in lines[1:]:
        if line.strip() == "# ---":
            break
        head.append(line[2:] if line.startswith("# ") else line.lstrip("#"))
    meta = (yaml.safe_load("\n".join(head)) or {}).get("jupyter", {}).get("qrlib", {}) or {}
    reads = meta.get("reads", []) or []
    if not isinstance(reads, list) or not all(isinstance(r, str) for r in reads):
        raise QrlibError(f"{name}: 'jupyter: qrlib: reads' must be a list of notebook names, "
                         f"got {reads!r}")
    for r in reads:
        if r >= name or not source_path(r, root).exists():
            raise QrlibError(f"{name}: declares reading {r!r}, which is not an earlier "
                             "notebook of the workbook")
    return reads


# --------------------------------------------------------------------------- inputs
def static_inputs(name: str, params: Mapping[str, Any], root: Path = REPO_ROOT) -> dict[str, Any]:
    """The inputs known before running: source, parameters, qrlib files (each hashed)."""
    src = source_path(name, root)
    return {"source": {str(src.relative_to(root)): file_hash(src)},
            "params": dict(params),
            "modules": {m: file_hash(root / m) for m in module_closure(src, root)}}


def data_inputs(folders: Iterable[str], root: Path = REPO_ROOT,
                data_dir: str | os.PathLike | None = None) -> dict[str, str]:
    """Content hash of each input named in a read log: ``params/...`` files of the
    repository, and dataset folders by name, found where the notebooks find them
    (:func:`qrlib.workbook.profiles.data_roots`, so a clone elsewhere hashes its own
    copy)."""
    roots = data_roots(data_dir)
    out = {}
    for f in sorted(set(folders)):
        if f.startswith("params/"):
            out[f] = file_hash(root / f)
            continue
        name = Path(f).name
        hit = next((r / name for r in roots if (r / name).is_dir()), None)
        out[f] = folder_hash(hit) if hit is not None else "missing"
    return out


def fingerprint(inputs: Mapping[str, Any]) -> str:
    """One fingerprint over a notebook's inputs (what the stamps carry)."""
    parts = {k: inputs.get(k) for k in ("source", "params", "modules", "data", "upstream")}
    return value_hash(parts)


# --------------------------------------------------------------------------- manifest
def manifest_path(profile: str, root: Path = REPO_ROOT) -> Path:
    return root / "tables" / profile / MANIFEST


def load_manifest(profile: str, root: Path = REPO_ROOT) -> dict[str, Any]:
    path = manifest_path(profile, root)
    if not path.exists():
        return {}
    data = load_json(path)
    if not isinstance(data, dict):
        raise QrlibError(f"{path} must hold a mapping of notebook -> entry")
    return data


def save_manifest_entry(profile: str, name: str, entry: Mapping[str, Any],
                        root: Path = REPO_ROOT) -> Path:
    data = load_manifest(profile, root)
    data[name] = dict(entry)
    return atomic_write(manifest_path(profile, root),
                        json.dumps(dict(sorted(data.items())), indent=1, sort_keys=True) + "\n")


# --------------------------------------------------------------------------- status
@dataclass
class Status:
    """Freshness of one notebook of a profile."""

    notebook: str
    state: str                     # fresh | stale | never run
    reasons: list[str] = field(default_factory=list)
    entry: dict[str, Any] = field(default_factory=dict)

    def line(self, max_reasons: int | None = None) -> str:
        """One line: state, reasons (the first ``max_reasons`` and how many more) and where
        the published run was made."""
        e = self.entry
        where = ""
        if e:
            where = f" (run at {e.get('commit', '?')}{', dirty tree' if e.get('dirty') else ''}"
            where += (f", fingerprint {e['fingerprint']})" if e.get("fingerprint")
                      else ", no fingerprint)")
        reasons = self.reasons
        if max_reasons is not None and len(reasons) > max_reasons:
            reasons = [*reasons[:max_reasons], f"and {len(reasons) - max_reasons} more"]
        why = f": {'; '.join(reasons)}" if reasons else ""
        return f"{self.notebook:<28} {self.state}{why}{where}"


def cold_seconds(entry: Mapping[str, Any]) -> float | None:
    """Wall seconds of a manifest entry's last run that trained everything itself (the run
    itself when it reused no training); None when no such run is on record."""
    if entry.get("cold_wall_s") is not None:
        return float(entry["cold_wall_s"])
    if entry.get("reused_training") or entry.get("wall_s") is None:
        return None
    return float(entry["wall_s"])


def refresh_summary(statuses: Iterable[Status]) -> str:
    """``18 of 20 fresh; 2 of the other 2 took 95 min at their last runs from scratch (08_x 60
    at abc, 15_y 35 at def)`` and which have no such run on record: what regenerating the
    stale and never-run notebooks costs, by the profile's manifest (times measured at the
    commits named, so an estimate once the code changed)."""
    statuses = list(statuses)
    todo = [s for s in statuses if s.state != "fresh"]
    head = f"{len(statuses) - len(todo)} of {len(statuses)} fresh"
    if not todo:
        return head
    timed = [(s.notebook, cold_seconds(s.entry), s.entry.get("cold_commit") or s.entry.get("commit"))
             for s in todo if s.entry and cold_seconds(s.entry) is not None]
    unknown = [s.notebook for s in todo if not s.entry or cold_seconds(s.entry) is None]
    parts = [head]
    if timed:
        total = sum(t for _, t, _ in timed) / 60
        each = ", ".join(f"{n} {t / 60:.0f} at {c or '?'}" for n, t, c in timed)
        parts.append(f"{len(timed)} of the other {len(todo)} took {total:.0f} min at their "
                     f"last runs from scratch ({each})")
    if unknown:
        parts.append(f"no run from scratch on record: {', '.join(unknown)}")
    return "; ".join(parts)


def uncommitted(paths: list[str], root: Path) -> set[str]:
    """The repository-relative ``paths`` with uncommitted changes (none outside git)."""
    if not paths:
        return set()
    try:
        out = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", *paths],
                             capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return set()
    return {line[3:].strip() for line in out.splitlines() if len(line) > 3}


#: Modules a training does not run: a reused training is compared on the notebook's others.
EVAL_ONLY = ("qrlib/eval/", "qrlib/plots.py")


def training_drift(trained_at: str, run_at: str, modules: Iterable[str],
                   root: Path = REPO_ROOT) -> list[str] | None:
    """The files among ``modules`` (a notebook's imports, less :data:`EVAL_ONLY`) that differ
    between commit ``trained_at`` (where a training the notebook found finished in ``runs/``
    ran) and ``run_at`` (the notebook's own run): code the reused training never ran. ``None``
    when git cannot tell (a training with uncommitted changes, a commit not in the clone)."""
    if "+" in trained_at + run_at:  # "abc + changes": uncommitted code trained it
        return None
    paths = sorted(m for m in modules if not m.startswith(EVAL_ONLY))
    if not paths:
        return []
    try:
        out = subprocess.run(["git", "-C", str(root), "diff", "--name-only", trained_at,
                              run_at, "--", *paths], capture_output=True, text=True,
                             check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return sorted(line.strip() for line in out.splitlines() if line.strip())


def _reuse_reasons(entry: Mapping[str, Any]) -> list[str]:
    """Why a run that reused finished trainings does not measure its own code (the runner
    records ``reused_from``: run -> the training's commit and :func:`training_drift`)."""
    out = []
    for run, r in sorted((entry.get("reused_from") or {}).items()):
        changed = r.get("changed")
        if changed is None:
            out.append(f"reused training {run} (commit {r.get('commit')}): git cannot tell "
                       f"which code trained it; move runs/<profile>/rl/{run} aside to retrain")
        elif changed:
            out.append(f"reused training {run} was trained at {r.get('commit')}, before "
                       f"changes to {', '.join(changed[:3])}"
                       + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
                       + f"; move runs/<profile>/rl/{run} aside to retrain")
    return out


def _changed_keys(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    return [k for k in sorted(set(old) | set(new)) if value_hash(old.get(k)) != value_hash(new.get(k))]


def notebook_status(name: str, params: Mapping[str, Any], manifest: Mapping[str, Any],
                    upstream_state: Mapping[str, Status], root: Path = REPO_ROOT,
                    note_uncommitted: bool = True) -> Status:
    """Compare what ``name`` depends on now (working tree) with its manifest entry.

    ``note_uncommitted`` asks git which changed files are uncommitted, for the reason text;
    committed documents (RESULTS.md) pass False so their text depends on file contents only."""
    entry = manifest.get(name)
    if not entry:
        return Status(name, "never run")
    if not entry.get("inputs"):
        return Status(name, "stale", ["published before qrlib recorded per-notebook inputs"],
                      dict(entry))
    old = entry.get("inputs") or {}
    now = static_inputs(name, params, root)
    reasons: list[str] = []
    files = _changed_keys(old.get("source", {}), now["source"])
    files += _changed_keys(old.get("modules", {}), now["modules"])
    dirty = uncommitted(files, root) if note_uncommitted else set()
    for f in files:
        verb = ("no longer imported" if f not in now["modules"] and f not in now["source"]
                else "newly imported" if f not in old.get("modules", {}) and f.startswith(PACKAGE)
                else "changed")
        reasons.append(f"{f} {verb}" + (" (uncommitted)" if f in dirty else ""))
    changed = _changed_keys(old.get("params", {}), now["params"])
    if changed:
        reasons.append("parameter" + ("s " if len(changed) > 1 else " ") + ", ".join(changed)
                       + " changed")
    data_now = data_inputs(old.get("data", {}), root, params.get("data_dir"))
    reasons += [f"data {d} changed" for d in _changed_keys(old.get("data", {}), data_now)]
    reasons += _reuse_reasons(entry)
    declared = declared_reads(name, root)
    if sorted(declared) != sorted((old.get("upstream") or {})):
        reasons.append("declared reads changed")
    for up in declared:
        up_entry = manifest.get(up) or {}
        if (old.get("upstream") or {}).get(up) != up_entry.get("fingerprint"):
            reasons.append(f"{up} was re-run since")
        elif up in upstream_state and upstream_state[up].state != "fresh":
            reasons.append(f"reads {up}, which is {upstream_state[up].state}")
    return Status(name, "stale" if reasons else "fresh", reasons, dict(entry))


def legacy_entries(profile: str, root: Path = REPO_ROOT) -> dict[str, Any]:
    """Entries (without inputs) for notebooks published before the manifest existed, read
    from the executed copies' metadata, so that ``status`` calls them stale, not never run."""
    out = {}
    for p in sorted((root / "notebooks" / "executed" / profile).glob("[0-9][0-9]_*.ipynb")):
        meta = json.loads(p.read_text(encoding="utf-8")).get("metadata", {}).get("qrlib", {})
        out[p.stem] = {"commit": meta.get("commit", "?"), "dirty": meta.get("dirty", False),
                       "wall_s": meta.get("wall_s"), "fingerprint": None}
    return out


def published_entries(profile: str, root: Path = REPO_ROOT) -> dict[str, Any]:
    """Manifest entries, and legacy entries for notebooks published before the manifest."""
    return {**legacy_entries(profile, root), **load_manifest(profile, root)}


def profile_status(profile_path: str | os.PathLike, root: Path = REPO_ROOT,
                   note_uncommitted: bool = True) -> list[Status]:
    """Freshness of every notebook of a profile (all, or its ``only`` list, which must hold
    every notebook its members read), in run order (``note_uncommitted``: see
    :func:`notebook_status`)."""
    profile = load_profile(profile_path)
    manifest = published_entries(profile["name"], root)
    out: dict[str, Status] = {}
    names = profile_notebooks(profile)
    for name in names:
        outside = [r for r in declared_reads(name, root) if r not in names]
        if outside:
            raise QrlibError(f"profile {profile['name']}: its 'only' list has {name} but not "
                             f"{outside[0]}, which {name} reads; add it to 'only'")
        params = parameters_for(profile, name, notebook_parameters(name), root)
        out[name] = notebook_status(name, params, manifest, out, root, note_uncommitted)
    return list(out.values())
