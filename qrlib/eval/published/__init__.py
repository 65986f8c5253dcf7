"""The papers' published numbers, in one machine-readable place.

Every "paper vs ours" table of the workbook reads the papers' values from here, never from
numbers typed into a notebook. One YAML file per paper, in the paper's folder
(``qrlib/methods/<folder>/published.yaml``), plus ``references.yaml`` beside this module
for the standard baselines that come from no paper of the five::

    paper: bandit                       # short name the tables are read by (unique)
    title: "Query Decomposition for RAG: Balancing Exploration-Exploitation"
    citation: Petcu et al., 2025
    file: bandit-query-decomposition.txt  # the paper's text in ../shared/papers/
    row_keys:                           # optional: paper row label -> qrlib's name for it
      Random: random
    tables:
      - table: Table 4                  # the paper's own table name ("Table 6a", "Sec. 5.3")
        caption: Precision under budgets ...   # short paraphrase of the paper's caption
        setting: ResearchyQuestions, human judgments   # data / model / retriever of the numbers
        unit: fraction                  # fraction | percent | ms | tokens | gpu-hours | count | parameter | ...
        source: Table 4, Sec. 5.3       # where in the paper (page/section), for checking
        columns: [Ser. 10%, Hier. 10%]
        column_settings: {}             # optional: column -> setting, overriding `setting`
        rows:                           # row label -> one value per column (null: "-")
          Random: [0.157, 0.159]
        records:                        # optional, for irregular tables: explicit cells
          - {row: ..., column: ..., value: ..., setting: ...}

:func:`records` flattens every file into one row per cell with the columns
``paper, table, row, column, value, setting, source, unit, key`` (``key``: the
``row_keys`` entry of the row, else None); :func:`table` filters them and can pivot them
back into the paper's layout. Values are stored exactly as printed in the paper (percent
tables keep percent); ``fraction=True`` divides percent values by 100.

Why a package with one module: :mod:`qrlib.freshness` counts a package's data files as part
of its ``__init__``, so ``references.yaml`` here is an input of exactly the notebooks that
read published numbers (in ``qrlib/eval/`` it would be one of every notebook importing
:mod:`qrlib.eval.metrics`). The papers' own files are reached through the imports of the
papers' packages below (whose ``__init__`` files import nothing), for the same reason.
"""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import qrlib.methods
from qrlib.core.errors import QrlibError
# each paper's published.yaml is package data of its folder; qrlib.workbook.freshness counts
# every registered paper's folder (the qrlib.methods entry points) as read by this module

HERE = Path(__file__).resolve().parent             # references.yaml
METHODS_DIR = Path(qrlib.methods.__file__).resolve().parent  # <folder>/published.yaml
_PAPER_KEY = re.compile(r"^paper:[ \t]*([\w-]+)[ \t]*(?:#.*)?$", re.M)
COLUMNS = ["paper", "table", "row", "column", "value", "setting", "source", "unit", "key"]
UNITS = {"fraction", "percent", "ms", "tokens", "gpu-hours", "count", "words", "ratio",
         "seconds", "parameter"}
TABLE_KEYS = {"table", "caption", "setting", "unit", "source", "columns", "column_settings",
              "rows", "records", "note"}
PAPER_KEYS = {"paper", "title", "citation", "file", "row_keys", "tables", "note"}


def paper_files() -> dict[str, Path]:
    """Paper name (the file's top-level ``paper:`` key) -> its YAML file: every
    ``qrlib/methods/<folder>/published.yaml`` and the ``*.yaml`` files of this package."""
    out: dict[str, Path] = {}
    for path in sorted(METHODS_DIR.glob("*/published.yaml")) + sorted(HERE.glob("*.yaml")):
        m = _PAPER_KEY.search(path.read_text(encoding="utf-8"))
        if m is None:
            raise QrlibError(f"{path}: no top-level 'paper: <name>' line")
        if m.group(1) in out:
            raise QrlibError(f"{path}: paper {m.group(1)!r} is also filed in {out[m.group(1)]}")
        out[m.group(1)] = path
    return out


def papers() -> list[str]:
    """Names of the papers with a YAML file (``acqo``, ``bandit``, ...)."""
    return sorted(paper_files())


def _num(v: Any, where: str) -> float | None:
    if v is None or v == "-":
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise QrlibError(f"{where}: value {v!r} is not a number (use null for a missing cell)")
    return float(v)


@lru_cache(maxsize=None)
def _load(paper: str) -> tuple[dict[str, Any], tuple[dict[str, Any], ...]]:
    import yaml

    files = paper_files()
    if paper not in files:
        raise QrlibError(f"no published numbers for paper {paper!r}; available: {sorted(files)}")
    path = files[paper]
    doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    where = str(path.relative_to(path.parent.parent))
    unknown = set(doc) - PAPER_KEYS
    if unknown:
        raise QrlibError(f"{where}: unknown key {sorted(unknown)[0]!r}; accepted: {sorted(PAPER_KEYS)}")
    if doc.get("paper") != paper:
        raise QrlibError(f"{where}: 'paper' must be {paper!r}, got {doc.get('paper')!r}")
    keys = doc.get("row_keys") or {}
    out: list[dict[str, Any]] = []
    for t in doc.get("tables") or []:
        name = t.get("table")
        w = f"{where} {name}"
        bad = set(t) - TABLE_KEYS
        if bad:
            raise QrlibError(f"{w}: unknown key {sorted(bad)[0]!r}; accepted: {sorted(TABLE_KEYS)}")
        for req in ("table", "setting", "unit", "source"):
            if not t.get(req):
                raise QrlibError(f"{w}: missing '{req}'")
        if t["unit"] not in UNITS:
            raise QrlibError(f"{w}: unit {t['unit']!r} not in {sorted(UNITS)}")
        cols = list(t.get("columns") or [])
        csets = t.get("column_settings") or {}
        for c in csets:
            if c not in cols:
                raise QrlibError(f"{w}: column_settings names unknown column {c!r}")
        base = {"paper": paper, "table": str(name), "source": t["source"], "unit": t["unit"]}
        for row, vals in (t.get("rows") or {}).items():
            if len(vals) != len(cols):
                raise QrlibError(f"{w}: row {row!r} has {len(vals)} values for {len(cols)} columns")
            for c, v in zip(cols, vals):
                val = _num(v, f"{w} [{row}, {c}]")
                if val is not None:
                    out.append({**base, "row": str(row), "column": str(c), "value": val,
                                "setting": csets.get(c, t["setting"]), "key": keys.get(row)})
        for r in t.get("records") or []:
            val = _num(r.get("value"), f"{w} record {r}")
            if val is not None:
                out.append({**base, "row": str(r["row"]), "column": str(r["column"]),
                            "value": val, "setting": r.get("setting", t["setting"]),
                            "key": r.get("key", keys.get(r["row"]))})
    meta = {k: doc.get(k) for k in ("paper", "title", "citation", "file")}
    meta["tables"] = {str(t["table"]): {k: t.get(k) for k in ("caption", "setting", "unit", "source",
                                                              "columns")}
                      for t in doc.get("tables") or []}
    return meta, tuple(out)


def info(paper: str) -> dict[str, Any]:
    """Title, citation, paper file and per-table caption/setting/unit/source/columns."""
    return _load(paper)[0]


def records(paper: str | None = None):
    """All published cells (of one paper, or of every paper) as a DataFrame."""
    import pandas as pd

    rows = [r for p in ([paper] if paper else papers()) for r in _load(p)[1]]
    return pd.DataFrame(rows, columns=COLUMNS)


def table(paper: str, table: str | None = None, *, row: str | list[str] | None = None,
          column: str | list[str] | None = None, setting: str | None = None,
          wide: bool = False, index: str = "row", fraction: bool = False):
    """Published cells of ``paper`` (optionally one ``table``, rows, columns, setting).

    ``wide=True`` returns the table in the paper's layout: one row per ``index`` value
    (``"row"`` = the paper's label, ``"key"`` = qrlib's name from ``row_keys``; rows
    without one are left out), one column
    per paper column, in the paper's order. ``fraction=True`` turns percent into fractions.
    Unknown papers, tables, rows or columns are a one-line :class:`QrlibError`.
    """
    df = records(paper)
    if table is not None:
        if table not in set(df["table"]):
            raise QrlibError(f"{paper}: no table {table!r}; available: {sorted(set(df['table']))}")
        df = df[df["table"] == table]
    for col, want in (("row", row), ("column", column)):
        if want is None:
            continue
        want = [want] if isinstance(want, str) else list(want)
        missing = [w for w in want if w not in set(df[col])]
        if missing:
            raise QrlibError(f"{paper} {table or ''}: no {col} {missing[0]!r}; "
                             f"available: {list(dict.fromkeys(df[col]))}")
        df = df[df[col].isin(want)]
    if setting is not None:
        df = df[df["setting"].str.contains(setting, regex=False)]
    df = df.copy()
    if fraction:
        pct = df["unit"] == "percent"
        df.loc[pct, "value"] = df.loc[pct, "value"] / 100.0
        df.loc[pct, "unit"] = "fraction"
    if not wide:
        return df.reset_index(drop=True)
    if index == "key":  # rows qrlib has no name for (e.g. a policy we do not run) drop out
        df = df[df["key"].notna()]
    out = df.pivot_table(index=index, columns="column", values="value", aggfunc="first", sort=False)
    out = out.reindex(index=list(dict.fromkeys(df[index])), columns=list(dict.fromkeys(df["column"])))
    out.columns.name = None
    return out


def value(paper: str, table: str, row: str, column: str) -> float:
    """One published number (as printed in the paper)."""
    df = globals()["table"](paper, table, row=row, column=column)
    if len(df) != 1:
        raise QrlibError(f"{paper} {table} [{row}, {column}]: {len(df)} cells match")
    return float(df["value"].iloc[0])
