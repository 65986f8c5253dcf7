"""Each paper's checkable claims (``qrlib/methods/<paper>/claims.yaml``) and their verdict
on one profile's tables.

A claim names the notebook and the comparison table (:mod:`qrlib.eval.compare` schema)
whose rows test it, a row selector (column -> value; ``*`` globs on text columns), the
direction the claim states (``greater``: the method minus its baseline above 0; ``less``:
below 0) and optionally the paper's own numbers, as cells of its ``published.yaml``.
:func:`verdict_of` gives **held** (every selected row's 95 % paired interval lies on the
claimed side of 0), **not held** or **not run** (with the reason). The scoreboard page
(:mod:`qrlib.workbook.scoreboard`) and the notebooks' "What we found"
(:mod:`qrlib.eval.findings`) read them.
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from qrlib.core.errors import QrlibError
from qrlib.eval.stats import verdict

__all__ = ["Claim", "CLAIMS_FILE", "DIRECTIONS", "load_claims", "select_rows", "verdict_of",
           "paper_value"]

CLAIMS_FILE = "claims.yaml"
DIRECTIONS = ("greater", "less")


@dataclass(frozen=True)
class Claim:
    paper: str
    id: str
    claim: str
    source: str
    notebook: str
    table: str
    select: dict[str, Any]
    direction: str = "greater"
    paper_cells: tuple[tuple[str, str, str], ...] = field(default_factory=tuple)


def _methods_dir(root: Path) -> Path:
    return root / "qrlib" / "methods"


def load_claims(root: Path) -> list[Claim]:
    """Every claim of every paper folder, in folder order; a one-line error names a malformed
    entry."""
    out = []
    for path in sorted(_methods_dir(root).glob(f"*/{CLAIMS_FILE}")):
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        paper = data.get("paper") or path.parent.name
        for i, c in enumerate(data.get("claims") or []):
            where = f"{path.relative_to(root)} claim {i + 1}"
            missing = [k for k in ("id", "claim", "source", "notebook", "table", "select")
                       if not c.get(k)]
            if missing:
                raise QrlibError(f"{where}: missing {', '.join(missing)}")
            if c.get("direction", "greater") not in DIRECTIONS:
                raise QrlibError(f"{where}: direction {c['direction']!r}; accepted: "
                                 f"{', '.join(DIRECTIONS)}")
            cells = tuple(tuple(x) for x in c.get("paper_cells") or ())
            if any(len(x) != 3 for x in cells):
                raise QrlibError(f"{where}: paper_cells are [table, row, column] triples")
            out.append(Claim(paper, c["id"], c["claim"], c["source"], c["notebook"],
                             c["table"], dict(c["select"]), c.get("direction", "greater"),
                             cells))
    ids = [c.id for c in out]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise QrlibError(f"claim ids must be unique; repeated: {', '.join(dup)}")
    return out


def select_rows(table: Any, select: dict[str, Any]) -> Any:
    """The rows of ``table`` matching every ``column: value`` (``*`` globs on text)."""
    mask = None
    for col, want in select.items():
        if col not in table.columns:
            raise QrlibError(f"no column {col!r} (columns: {', '.join(map(str, table.columns))})")
        vals = table[col]
        if isinstance(want, str) and any(ch in want for ch in "*?["):
            m = vals.astype(str).map(lambda v, w=want: fnmatch.fnmatchcase(v, w))
        else:
            m = vals == want
        mask = m if mask is None else mask & m
    return table if mask is None else table[mask]


def paper_value(c: Claim) -> str:
    if not c.paper_cells:
        return "-"
    from qrlib.eval import published

    vals = []
    for tab, row, col in c.paper_cells:
        try:
            vals.append(f"{published.value(c.paper, tab, row, col):g}")
        except (QrlibError, KeyError) as exc:
            raise QrlibError(f"claim {c.id}: paper cell {tab} / {row} / {col}: {exc}") from None
    return " vs ".join(vals) + f" ({c.paper_cells[0][0]})"


def verdict_of(c: Claim, tables_dir: Path) -> dict[str, Any]:
    """The claim's verdict on the tables under ``tables_dir``, with the evidence."""
    from qrlib.core.io import read_table

    path = tables_dir / f"{c.table}.csv"
    base = {"paper": c.paper, "id": c.id, "claim": c.claim, "source": c.source,
            "notebook": c.notebook, "table": c.table, "paper value": paper_value(c)}
    if not path.exists():
        return {**base, "verdict": "not run", "ours": "-",
                "why": f"{c.notebook} has not published {c.table} in this profile"}
    rows = select_rows(read_table(path), c.select)
    if rows.empty:
        return {**base, "verdict": "not run", "ours": "-",
                "why": f"no row of {c.table} matches {c.select}"}
    want = "beats" if c.direction == "greater" else "falls below"
    ok = [verdict(r["lo"], r["hi"]) == want for r in rows.to_dict("records")]
    ours = "; ".join(f"{r['method']} vs {r['baseline']} ({r['dataset']}/{r['retriever']}, "
                     f"{r['metric']}): {r['diff']:+.3f} [{r['lo']:+.3f}, {r['hi']:+.3f}], "
                     f"{int(r['RL steps'])} RL steps" for r in rows.to_dict("records"))
    n_ok = sum(ok)
    held = "held" if all(ok) else "not held"
    why = (f"{n_ok} of {len(ok)} rows on the claimed side of 0" if len(ok) > 1 else
           ("interval on the claimed side of 0" if all(ok) else
            "interval contains 0 or lies on the other side"))
    return {**base, "verdict": held, "ours": ours, "why": why}
