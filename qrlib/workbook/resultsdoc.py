"""What the sections of RESULTS.md are written with (:mod:`qrlib.workbook.results`).

:class:`Doc` reads a profile's tables and the papers' published numbers and formats every
number it prints, recording the sources the audit checks; :func:`md_table`, :func:`cite`
and :func:`comparisons_section` are the helpers sections share. The shared sections live in
:mod:`qrlib.workbook.results`, each paper's in ``qrlib/methods/<paper>/results.py``.

A section is a :data:`Section`, ``(order, title, function)``: ``function(doc)`` returns its
Markdown (``""`` to leave it out), ``title`` heads the "not available" note when it fails,
and ``order`` places it: RESULTS.md sorts all sections, shared and papers', by this number
(each number used once). Today's are in steps of 10: scoreboard 10, trained rows 13 and
seeds 16 (:mod:`qrlib.workbook.trained_sections`), baselines 20, fusion 30, rewards 40,
bandits 50, rl 60, acqo 70, acqo transfer 80, acqo ablation 90, sage 100, rl-qr 110, beyond
BEIR 120, sql 130, evidence 140, prompting 150, timings 160, gaps 170, other tables 180; a new section takes a free number between its neighbours.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qrlib.core.errors import QrlibError
from qrlib.core.io import read_table
from qrlib.eval import published
from qrlib.eval.compare import check_comparisons, select
from qrlib.eval.scale import missing_scale
from qrlib.eval.stats import verdict

__all__ = ["Doc", "Section", "cite", "comparisons_section", "md_table"]


@dataclass
class Doc:
    """One rendering of RESULTS.md: reads a profile's tables and the papers' published
    numbers, formats numbers, and records the sources (and derived formulas) for the audit."""
    profile: str
    root: Path
    cited: list[str] = field(default_factory=list)          # table stems read
    papers: list[str] = field(default_factory=list)         # published papers read
    derived: list[tuple[str, str]] = field(default_factory=list)  # (text, formula)
    _tables: dict[str, Any] = field(default_factory=dict)
    status: dict[str, Any] = field(default_factory=dict)    # notebook -> freshness.Status
    long: list[str] = field(default_factory=list)           # the profile's long set

    @property
    def tables_dir(self) -> Path:
        return self.root / "tables" / self.profile

    def t(self, name: str):
        """Read ``tables/<profile>/<name>.csv`` (and cite it)."""
        if name not in self._tables:
            path = self.tables_dir / f"{name}.csv"
            if not path.exists():
                raise QrlibError(f"tables/{self.profile}/{name}.csv is missing")
            self._tables[name] = read_table(path)
            if name not in self.cited:
                self.cited.append(name)
        return self._tables[name]

    def has(self, name: str) -> bool:
        """Whether this profile wrote ``tables/<profile>/<name>.csv``."""
        return (self.tables_dir / f"{name}.csv").exists()

    def interval(self, diff: float, lo: float, hi: float) -> str:
        """``+0.027 [+0.018, +0.038]``, each number sourced like :meth:`n`."""
        return (f"{self.n(diff, signed=True)} [{self.n(lo, signed=True)}, "
                f"{self.n(hi, signed=True)}]")

    def scale(self, r: Any) -> str:
        """A row's training scale (:data:`qrlib.eval.scale.SCALE_COLUMNS`): ``"64 RL + 24 SFT
        steps, 200 q, 1,100 rollouts, 31 RL min"``, ``"24 SFT steps, 55 q"``, ``"untrained"``,
        or ``–`` for a table written before it carried the scale."""

        if missing_scale(list(r.index)):
            return "–"
        if not (r["RL steps"] or r["SFT steps"]):
            return "untrained" if r["policy"] != "-" else "no model"
        if not r["RL steps"]:  # a warm start alone: its minutes are not in any RL log
            return f"{int(r['SFT steps'])} SFT steps, {int(r['train queries'])} q"
        steps = f"{int(r['RL steps'])} RL" + (f" + {int(r['SFT steps'])} SFT"
                                               if r["SFT steps"] else "")
        flag = r.get("valid flag")  # a trained row whose test outputs are mostly malformed
        flag = (f"; **flagged: test valid {self.n(r['test valid'], '.2f')}, training "
                f"{self.n(r['train valid'], '.2f')}**" if isinstance(flag, str) and flag else "")
        return (f"{steps} steps, {int(r['train queries'])} q, {int(r['rollouts']):,} rollouts, "
                f"{self.n(r['train min'], '.0f')} RL min{flag}")

    def pub(self, paper: str, table: str, **kw):

        if paper not in self.papers:
            self.papers.append(paper)
        return published.table(paper, table, **kw)

    def n(self, value: float, fmt: str = ".3f", *, derived: str | None = None,
          signed: bool = False) -> str:
        """Format ``value``; ``derived`` names the formula when the number is computed
        from sources rather than read from one."""
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "–"
        s = format(value, ("+" if signed else "") + fmt)
        if derived:
            self.derived.append((s.lstrip("+-"), derived))
        return s.replace("-", "−") if signed or value < 0 else s

    def rng(self, values, fmt: str = ".3f", *, what: str) -> str:
        vals = [float(v) for v in values if v == v]
        lo, hi = min(vals), max(vals)
        a, b = self.n(lo, fmt), self.n(hi, fmt)
        return a if a == b else f"{a}–{b}"


def md_table(header: list[str], rows: list[list[str]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def cite(*names: str) -> str:
    """``"`a.md`, `b.md`"``: the tables a section heading cites (the audit reads them)."""
    return ", ".join(f"`{n}.md`" for n in names)


def comparisons_section(d: Doc, table: str, title: str, intro: str, *,
                        metrics: tuple[str, ...] | None = None,
                        baseline_kind: str = "baseline") -> str:
    """A section that lists one notebook's comparison table by column (``qrlib.eval.compare``
    schema): every method against its baselines of ``baseline_kind`` (the raw query by
    default), the interval, verdict and training scale. Empty until the notebook has run
    in this profile."""
    if not d.has(table):
        return ""
    cmp = select(check_comparisons(d.t(table), table), **{"baseline kind": baseline_kind})
    if metrics is not None:
        cmp = cmp[cmp.metric.isin(metrics)]
    raw = baseline_kind == "baseline"
    rows = [[r.dataset, r.retriever, r.metric, r.method]
            + ([] if raw else [r.baseline])
            + [d.n(r.score), d.n(r["baseline score"]), d.interval(r["diff"], r.lo, r.hi),
               verdict(r.lo, r.hi), d.scale(r)]
            for _, r in cmp.iterrows()]
    head = (["test set", "retriever", "metric", "method"] + ([] if raw else ["against"])
            + ["score", "raw" if raw else "its score", "Δ [95% CI]",
               "vs raw" if raw else "verdict", "training scale"])
    return f"## {title} ({cite(table)})\n\n{intro}\n\n" + md_table(head, rows) + "\n"


Section = tuple[float, str, Callable[[Doc], str]]
"""``(order, title, function)`` of one RESULTS.md section (see the module docstring)."""
