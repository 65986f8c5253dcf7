"""Profiles and notebooks, everything about them except running them.

No science lives here. A *profile* is one YAML file under ``params/``::

    name: smoke                  # run name: runs/smoke, figures/smoke, tables/smoke
    description: CI profile
    extends: cpu.yaml            # optional: start from another profile, then override
    globals:                     # given to every notebook that declares the parameter
      seed: 0
    notebooks:                   # per-notebook parameters (override globals)
      02_index_build:
        datasets: [scifact]
    long: [13, 15_sage_ablation] # optional: notebooks a plain run skips (run with --long)
    only: [06, 07]               # optional: the only notebooks this profile has (a seed
                                 # replica); run and status leave the others out

Every key under ``globals`` must be declared in the ``parameters`` cell of at least one
notebook, and every key of a notebook section in that notebook's ``parameters`` cell;
anything else is an error naming the key, and so is a value whose type differs from the
default in the ``parameters`` cell (``"forty"`` for an integer, a string where a list is
expected, ``"false"`` for a boolean; ``null`` is always accepted, an integer where a float
is expected too). The runner always injects ``profile``, ``run_dir``, ``figures_dir``,
``tables_dir`` and ``cache_dir`` where a notebook declares them; a profile may not set them.
Injected paths are relative to ``notebooks/`` (the kernel's working directory), so executed
notebooks hold no absolute path of the machine that ran them.

The bottom layer of :mod:`qrlib.workbook`: it imports no other module of the package.
:data:`NOTEBOOK_DIR`, :data:`NOTEBOOK_SRC_DIR` and :data:`REPO_ROOT` are read from this
module at call time by the whole package (tests point them at a toy repository here).
"""
from __future__ import annotations

import ast
import contextlib
import copy
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from qrlib.core.io import REPO_ROOT, cache_dir
from qrlib.core.errors import QrlibError

NOTEBOOK_DIR = REPO_ROOT / "notebooks"
NOTEBOOK_SRC_DIR = NOTEBOOK_DIR / "src"
PROFILE_KEYS = {"name", "description", "extends", "globals", "notebooks", "long", "only"}
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



# --------------------------------------------------------------------------- notebooks
def notebook_names() -> list[str]:
    """Notebook stems in run order (``NN_name``), from ``notebooks/src/*.py``."""
    return sorted(p.stem for p in NOTEBOOK_SRC_DIR.glob("[0-9][0-9]_*.py"))



def notebook_parameters(name: str) -> dict[str, Any]:
    """Names and defaults declared in the notebook's ``parameters`` cell."""
    import papermill as pm  # deferred: heavy (nbclient, jupyter_client), needed only here

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
    data.setdefault("long", [])
    for key in ("long", "only"):
        value = data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(x, (str, int)) for x in value):
            raise QrlibError(f"profile {path.name}: '{key}' must be a list of notebook names or "
                             f"numbers, got {value!r}")
    for key in ("globals", "notebooks"):
        if not isinstance(data[key], dict):
            raise QrlibError(f"profile {path.name}: '{key}' must be a mapping, "
                             f"got {type(data[key]).__name__}")
    if not isinstance(data["name"], str) or not data["name"].replace("-", "").replace("_", "").isalnum():
        raise QrlibError(f"profile {path.name}: name must be letters, digits, '-' or '_', "
                         f"got {data['name']!r}")
    if validate:
        validate_profile(data, source=path.name)
        long_notebooks(data)
        profile_notebooks(data)
    return data


def _named(profile: Mapping[str, Any], key: str, names: list[str]) -> list[str]:
    """The notebooks a profile's ``key`` list names (numbers or names), in run order."""
    tokens = [str(x) for x in profile.get(key, [])]
    for token in tokens:
        if not any(_matches(n, token) for n in names):
            raise QrlibError(f"profile {profile.get('name')}: '{key}' names {token!r}, which "
                             f"matches no notebook; accepted: {names}")
    return select_notebooks(names, tokens) if tokens else []


def profile_notebooks(profile: Mapping[str, Any]) -> list[str]:
    """The notebooks a profile has, in run order: all of them, or its ``only`` list (a seed
    replica runs only the notebooks behind the headline rows)."""
    names = notebook_names()
    return _named(profile, "only", names) if profile.get("only") else names


def long_notebooks(profile: Mapping[str, Any]) -> list[str]:
    """The notebooks of the profile's ``long`` set (numbers or names), in run order: a run
    without ``--long`` or ``--only`` skips them (the profile's main time leaves them out)."""
    return _named(profile, "long", notebook_names())


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


def notebook_relpath(path: Path | str) -> str:
    """``path`` relative to the notebooks folder (the kernel's working directory), so no
    executed notebook or stamp holds an absolute path of the machine that ran it."""
    return os.path.relpath(Path(path).resolve(), NOTEBOOK_DIR.resolve())


def profile_files(path: str | os.PathLike) -> list[Path]:
    """The profile file at ``path`` and, in order, the files it ``extends`` (resolved;
    the chain stops at a missing file, a malformed ``extends`` or a cycle)."""
    chain: list[Path] = []
    here = Path(path).resolve()
    while here.exists() and here not in chain:
        chain.append(here)
        ext = (_read_yaml(here) or {}).get("extends")
        if not isinstance(ext, str):
            break
        here = (here.parent / ext).resolve()
    return chain


def parameters_for(profile: dict[str, Any], name: str, declared: Mapping[str, Any],
                   root: Path | None = None) -> dict[str, Any]:
    """The parameters papermill injects into notebook ``name`` (paths relative to
    ``notebooks/``, the kernel's working directory)."""
    paths = run_paths(profile["name"], root)
    injected = {"profile": profile["name"], "cache_dir": notebook_relpath(cache_dir()),
                **{k: notebook_relpath(v) for k, v in paths.items()}}
    params = {k: v for k, v in injected.items() if k in declared}
    params.update({k: v for k, v in profile["globals"].items() if k in declared})
    params.update(profile["notebooks"].get(name, {}))
    return params


def data_roots(data_dir: str | os.PathLike | None = None) -> list[Path]:
    """Every existing folder a notebook may read datasets from (``qrlib.data``'s lookup
    order, with the notebooks folder as the working directory)."""
    # deferred: qrlib.data is a science module (dataset loaders, sqlite, sql); the
    # workbook needs only its REPO_ROOT, and only when a data root is looked up
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



def _matches(name: str, token: str) -> bool:
    """Whether ``token`` (a notebook's number, ``6`` or ``06``, or full name) names ``name``."""
    return name == token or name.split("_", 1)[0] == token.zfill(2)


def select_notebooks(names: list[str], only: list[str] | None) -> list[str]:
    """The notebooks ``--only`` names (number or full name), in run order."""
    if not only:
        return names
    wanted = []
    for token in only:
        match = [n for n in names if _matches(n, token)]
        if not match:
            raise QrlibError(f"--only {token!r} matches no notebook; accepted: {names}")
        wanted += match
    return [n for n in names if n in wanted]


def profile_selection(profile: Mapping[str, Any], only: list[str] | None) -> list[str]:
    """The profile's notebooks (:func:`profile_notebooks`) that ``--only`` names, in run
    order; a one-line error for a notebook the profile's ``only`` list leaves out."""
    names = profile_notebooks(profile)
    for token in only or []:
        if not any(_matches(n, token) for n in names) and any(
                _matches(n, token) for n in notebook_names()):
            raise QrlibError(f"--only {token!r}: profile {profile.get('name')} has only "
                             f"{names} (its 'only' list)")
    return select_notebooks(names, only)
