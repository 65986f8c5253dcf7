"""RESULTS.md sections on the trained rows as a whole: every trained row against the raw
query and the prompting baseline (notebook 20's ``20_trained_rows``), and how far another
seed moves the headline rows (:mod:`qrlib.eval.seeds`). Shared sections of
:mod:`qrlib.workbook.results`."""
from __future__ import annotations

from typing import Any

from qrlib.eval import seeds
from qrlib.eval.trained_rows import NO_RAW, compared_rows
from qrlib.workbook.resultsdoc import Doc, cite, md_table

TRAINED = "20_trained_rows"


#: How a verdict (:func:`qrlib.eval.stats.verdict`) reads in a table cell.
SHORT = {"beats": "beats", "falls below": "below", "is not distinguishable from": "cannot tell"}


def _interval(d: Doc, r: Any, col: str) -> str:
    if r[col] != r[col]:
        return "–"
    return (d.interval(r[col], r[f"{col} lo"], r[f"{col} hi"])
            + f" {SHORT.get(r[f'{col} verdict'], r[f'{col} verdict'])}")


def _note(value: Any) -> str:
    """`` (note)`` for a non-empty text cell; empty for a blank one (read back as NaN)."""
    return f" ({value})" if isinstance(value, str) and value else ""


def _scale(d: Doc, r: Any) -> str:
    """:meth:`Doc.scale` of the row, with its plumbing-check note."""
    return d.scale(r) + _note(r["scale note"])


def trained_rows_section(d: Doc) -> str:
    """Every trained row of the profile (notebook 20), empty until notebook 20 has run."""
    if not d.has(TRAINED):
        return ""
    t = d.t(TRAINED)
    rows = [[f"{r.notebook[:2]}", f"{r.dataset}/{r.retriever}", r.metric, r.method,
             _interval(d, r, "vs raw") if r["vs raw verdict"] != NO_RAW else f"– ({NO_RAW})",
             _interval(d, r, "vs prompting") + _note(r["prompting note"])
             if r["vs prompting"] == r["vs prompting"] else "–" + _note(r["prompting note"]),
             d.n(r["test valid"], ".2f"), r.collapse, _scale(d, r)]
            for _, r in t.iterrows()]
    both = t[(t["vs raw verdict"] == "beats") & (t["vs prompting verdict"] == "beats")]
    count = "rows of 20_trained_rows"
    lead = (f"{d.n(len(both), '.0f', derived=count)} of {d.n(len(t), '.0f', derived=count)} "
            "trained rows beat both the raw query and the prompting "
            "baseline with intervals above 0" + (": " + "; ".join(
                f"{r.method} ({r.dataset}/{r.retriever})" for _, r in both.iterrows())
                if len(both) else "") + ".")
    ci = f"[{d.n(t['level'].max() * 100, '.0f')}% CI]"
    head = ["nb", "test set", "metric", "trained row", f"Δ vs raw {ci}",
            f"Δ vs prompting baseline {ci}", "test valid", "collapse (last quarter; no-op at test)",
            "training scale"]
    return (f"## Every trained row against the raw query and the prompting baseline "
            f"(notebook 20: {cite(TRAINED)})\n\n"
            "Each trained row of the training notebooks against the raw query (the notebook's "
            "own paired comparison) and, paired on the same test queries, against notebook "
            "19's prompting baseline (its prompt chosen on training queries), or, where "
            "notebook 19 has none in the row's metric or the notebook has no raw query, the "
            "notebook's own training-free model (named beside the interval); a row without a "
            "prompting comparison says why. " + lead + "\n\n" + md_table(head, rows) + "\n")


def headline_rows(t: Any) -> Any:
    """The rows trained with three seeds: every trained row whose interval against the raw
    query excludes 0 (against its notebook's training-free baseline where it has no raw
    query: 13's SQL rows), and ACQO's own trained rows (notebook 07)."""
    excludes = ["beats", "falls below"]
    return t[t["vs raw verdict"].isin(excludes) |
             ((t["vs raw verdict"] == NO_RAW) & t["vs prompting verdict"].isin(excludes)) |
             (t["notebook"] == "07_acqo_stage2")]


def _replica(d: Doc, diff: float, lo: float, hi: float, seed: int, table: str) -> str:
    src = f"tables/{d.profile}{seeds.SEED_SUFFIX}{seed}/{table}.csv"
    return (f"{d.n(diff, signed=True, derived=src)} [{d.n(lo, signed=True, derived=src)}, "
            f"{d.n(hi, signed=True, derived=src)}]")


def seeds_section(d: Doc) -> str:
    """The headline rows' difference to the raw query at each seed that ran."""
    if not d.has(TRAINED):
        return ""
    head_rows = headline_rows(d.t(TRAINED))
    rows, cited, left = [], [TRAINED], []
    for nb, group in head_rows.groupby("notebook", sort=True):
        table = f"{nb[:2]}_comparisons"
        if not d.has(table):
            continue
        cmp = d.t(table)
        cited.append(table)
        left += [f"{nb[:2]}: {x}" for x in seeds.replicas_for(table, d.tables_dir)[1]]
        keys = group[["paper", "dataset", "retriever", "metric", "method"]]
        sel = compared_rows(cmp).merge(keys, on=list(keys.columns))
        sp = seeds.spread(sel, table, d.tables_dir)
        for _, r in sp.iterrows():
            src = "mean of the seeds' diff in " + table
            rows.append([nb[:2], f"{r.dataset}/{r.retriever}", r.method, r.baseline,
                         str(int(r.seeds)),
                         "; ".join(f"{s}: " + d.interval(*(float(x) for x in (a, lo, hi)))
                                   if s == 0 else f"{s}: {_replica(d, a, lo, hi, s, table)}"
                                   for s, a, lo, hi in r.runs) if r.seeds > 1 else "seed 0 only",
                         d.n(r["diff mean"], signed=True, derived=src) if r.seeds > 1 else "–",
                         f"{d.n(r['diff min'], signed=True, derived=src)} to "
                         f"{d.n(r['diff max'], signed=True, derived=src)}" if r.seeds > 1
                         else "–", SHORT.get(r["every seed"], r["every seed"])])
    if not rows:
        return ""
    replicas = [p.name for _, p in seeds.replica_dirs(d.tables_dir)]
    where = (", ".join(f"`tables/{n}/`" for n in replicas) if replicas else
             f"none yet (`params/{d.profile}-seed1.yaml` and `-seed2.yaml` have not run)")
    return (f"## How far another seed moves the headline rows ({cite(*cited)})\n\n"
            "Training is not bit-reproducible here, so each headline row (every trained row "
            "whose interval against the raw query excludes 0, or against the zero-shot model "
            "where there is no raw query, as in SQL; and ACQO) is trained again "
            f"with seeds 1 and 2 (seed replicas: {where}). A scoreboard claim holds only when "
            "it holds at every seed that ran. A replica counts only where it ran the same "
            "code as the base run (notebook source and qrlib modules, by the manifests)"
            + (f"; left out: {'; '.join(left)}" if left else "") + ".\n\n"
            + md_table(["nb", "test set", "trained row", "against", "seeds",
                        "Δ per seed [95% CI]",
                        "mean Δ", "range", "every seed"], rows) + "\n")
