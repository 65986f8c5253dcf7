"""Every trained row of a profile against the raw query and the prompting baseline.

The bar for a result (README, "Reading a result"): a trained rewriter against the raw query
*and* against a training-free prompting baseline, on the whole test split, with paired
intervals, its test format validity, its collapse check and its training scale. Each
training notebook already compares its rows with the raw query (its ``NN_comparisons``
table, :mod:`qrlib.eval.compare`); notebook 19 scores the training-free rows (its
``best-prompt`` row: the rewriting prompt chosen per dataset and retriever on training
queries). :func:`trained_table` joins the two through the per-query values both saved
(``NN_comparisons_per_query.csv``), so the difference to the prompting baseline is paired on
the same test queries, with the same bootstrap as every other row (:func:`compare`).

The pairing is checked, not assumed: the trained row's raw-query scores must equal notebook
19's raw-query scores on the same queries (same collection, same retriever, same metric);
otherwise the row states why it has no prompting comparison (``prompting note``).

Pure functions of their arguments; reading the tables is :func:`load_notebook_tables`.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from qrlib.core.errors import QrlibError
from qrlib.eval.compare import Row, check_comparisons, compare, read_per_query
from qrlib.eval.scale import PLUMBING_STEPS, SCALE_COLUMNS, VALIDITY_COLUMNS
from qrlib.eval.stats import verdict

__all__ = ["TRAINED_KINDS", "COLLAPSE_SHARE", "NOOP_SHARE", "NO_RAW", "compared_rows", "equal_share", "PROMPTING_METHOD",
           "TRAINED_COLUMNS", "untrained_twin", "load_notebook_tables", "trained_table", "collapse_verdict", "prompting_rows",
           "findings", "forest_figure"]

#: Comparison kinds that are trained rows (an RL run, or an SFT warm start alone).
TRAINED_KINDS = ("trained", "warm start")
#: A run collapsed when its last quarter's copy or echo share is above this
#: (:func:`qrlib.rl.health.collapse`'s threshold).
COLLAPSE_SHARE = 0.9
#: A trained row is a **no-op at test** when at least this share of its test queries score
#: exactly what the raw query scores: the rewriter changed nothing the retriever can see
#: (e.g. an expansion that appends one glued out-of-vocabulary token, which the copy and echo
#: flags of training do not catch).
NOOP_SHARE = 1.0
#: Notebook 19's training-free row every trained row is measured against.
PROMPTING_NOTEBOOK, PROMPTING_METHOD, PROMPTING_RAW = "19_prompting_baselines", "best-prompt", "raw"
#: ``vs raw verdict`` of a row whose notebook has no raw query (text-to-SQL: the question is
#: not a query the database can run); its prompting comparison is then the notebook's own
#: training-free baseline (13's zero-shot model).
NO_RAW = "no raw query"
#: ``prompting note`` phrase of a row paired with its notebook's own model before training
#: (:func:`untrained_twin`), followed by that row's name.
OWN_UNTRAINED = "against its own untrained model, same prompt"
#: The columns that name one row of a comparison table.
ROW_KEYS = ("paper", "dataset", "retriever", "metric", "method")
#: Raw-query scores that agree to this many decimals are the same search.
_SAME = 1e-6

TRAINED_COLUMNS = (
    "notebook", "paper", "dataset", "retriever", "metric", "method", "kind", "test queries",
    "score", "raw score", "vs raw", "vs raw lo", "vs raw hi", "vs raw verdict",
    "prompting score", "vs prompting", "vs prompting lo", "vs prompting hi",
    "vs prompting verdict", "prompting note", "test valid", "train valid", "train copy",
    "train echo", "equal to raw", "collapse", "policy", "RL steps", "SFT steps",
    "train queries", "rollouts", "train min", "scale note", "level")


def load_notebook_tables(tables_dir: str | Path, notebooks: list[str]
                         ) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """``(comparisons, per_query, missing)``: each notebook's ``NN_comparisons`` table and
    its per-query values (``NN`` is the notebook's number), and the notebooks that have not
    written them in ``tables_dir`` (not run in this profile, or run before per-query values
    were saved)."""
    from qrlib.core.io import read_table

    tables_dir = Path(tables_dir)
    comparisons, per_query, missing = {}, {}, []
    for nb in notebooks:
        stem = f"{nb[:2]}_comparisons"
        cmp_path, pq_path = tables_dir / f"{stem}.csv", tables_dir / f"{stem}_per_query.csv"
        if not (cmp_path.exists() and pq_path.exists()):
            missing.append(nb)
            continue
        comparisons[nb] = check_comparisons(read_table(cmp_path), str(cmp_path))
        per_query[nb] = read_per_query(pq_path)
    return comparisons, per_query, missing


def equal_share(own: Mapping[str, float], raw: Mapping[str, float]) -> float:
    """The share of the row's test queries whose score equals the raw query's (to 1e-6)."""
    return sum(abs(v - raw[q]) <= _SAME for q, v in own.items()) / len(own) if own else math.nan


def collapse_verdict(copy: float, echo: float, threshold: float = COLLAPSE_SHARE,
                     equal: float = math.nan, noop: float = NOOP_SHARE) -> str:
    """``"collapsed: copy 0.95"``, ``"none (copy 0.00, echo 0.00)"`` or ``"unknown"`` (a
    log without the shares) from a row's last-quarter ``train copy`` and ``train echo``;
    ``"collapsed: no-op at test (equal to raw 1.00), ..."`` when ``equal`` (:func:`equal_share`)
    reaches ``noop``, whatever the training shares say."""
    nop = [f"no-op at test (equal to raw {equal:.2f})"] if equal >= noop else []
    if not (copy == copy and echo == echo):
        return f"collapsed: {nop[0]}; training shares unknown" if nop else "unknown"
    hit = [f"{k} {v:.2f}" for k, v in (("copy", copy), ("echo", echo)) if v > threshold]
    shares = f"copy {copy:.2f}, echo {echo:.2f}"
    if nop or hit:
        return f"collapsed: {', '.join(nop + hit)}" + ("" if hit else f" ({shares})")
    return f"none ({shares})"


def _values(pq: Any, r: Mapping[str, Any], method: str) -> dict[str, float]:
    sel = pq[(pq.paper == r["paper"]) & (pq.dataset == r["dataset"]) &
             (pq.retriever == r["retriever"]) & (pq.metric == r["metric"]) &
             (pq.method == method)]
    return dict(zip(sel.qid.astype(str), sel.value.astype(float)))


def _prompting(r: Mapping[str, Any], own: Mapping[str, float], raw: Mapping[str, float],
               prompting: Any | None) -> tuple[dict[str, float] | None, str]:
    """Notebook 19's prompting-baseline values on the row's queries, or ``None`` and why."""
    if prompting is None:
        return None, "notebook 19 has not written its per-query values in this profile"
    where = (prompting.dataset == r["dataset"]) & (prompting.retriever == r["retriever"]) & \
        (prompting.metric == r["metric"])
    sel = prompting[where]
    if not len(sel):
        return None, (f"notebook 19 has no prompting baseline on {r['dataset']}/"
                      f"{r['retriever']} in {r['metric']}")
    base = dict(zip(sel[sel.method == PROMPTING_METHOD].qid.astype(str),
                    sel[sel.method == PROMPTING_METHOD].value.astype(float)))
    raw19 = dict(zip(sel[sel.method == PROMPTING_RAW].qid.astype(str),
                     sel[sel.method == PROMPTING_RAW].value.astype(float)))
    lacking = [q for q in own if q not in base or q not in raw19]
    if lacking:
        return None, (f"{len(lacking)} of the row's {len(own)} test queries are not among "
                      f"notebook 19's {len(base)}")
    differ = sum(1 for q in own if abs(raw[q] - raw19[q]) > _SAME)
    if differ:
        return None, (f"the raw query scores differ from notebook 19's on {differ} of "
                      f"{len(own)} queries (another collection or retriever setting)")
    return {q: base[q] for q in own}, ""


def untrained_twin(method: str) -> str | None:
    """The training-free row a notebook names after a trained one (``"trained think:
    rewrite"`` -> ``"untrained think: rewrite"``: the same model and prompt before training,
    17's naming); None when ``method`` does not start with ``"trained "``. It stands in for
    notebook 19's prompting baseline where 19 has none in the row's metric (17's H@N)."""
    return f"un{method}" if method.startswith("trained ") else None


def compared_rows(cmp: Any) -> Any:
    """The trained rows (:data:`TRAINED_KINDS`) of one ``NN_comparisons`` table, each once:
    against the raw query (``baseline kind`` baseline) where the notebook has one, otherwise
    against its first training-free (``untrained``) baseline, e.g. 13's zero-shot model."""
    import pandas as pd

    key = list(ROW_KEYS)
    trained = cmp[cmp["kind"].isin(TRAINED_KINDS)]
    vs_raw = trained[trained["baseline kind"] == "baseline"]
    no_raw = ~pd.MultiIndex.from_frame(trained[key]).isin(pd.MultiIndex.from_frame(vs_raw[key]))
    other = trained[(trained["baseline kind"] == "untrained") & no_raw]
    return pd.concat([vs_raw, other.drop_duplicates(key)]).sort_index()


def trained_table(comparisons: Mapping[str, Any], per_query: Mapping[str, Any],
                  prompting: Any | None, *, resamples: int = 10_000, seed: int = 0
                  ) -> tuple[Any, list[dict[str, Any]]]:
    """One row per trained row of every notebook's comparison table (:func:`compared_rows`),
    in :data:`TRAINED_COLUMNS`: the notebook's own difference to the raw query and its
    interval, the paired difference to notebook 19's prompting baseline on the same queries
    (:func:`compare`, ``resamples`` resamples, ``seed``), or where 19 has none in the row's
    metric to the notebook's own model before training (:func:`untrained_twin`), or the reason
    it has none, test
    validity, the collapse verdict and the scale. ``prompting``: notebook 19's per-query
    values (None when it has not run). A row whose notebook has no raw query (SQL) reads
    :data:`NO_RAW` against it, and its prompting comparison is the notebook's own against its
    training-free baseline (named in ``prompting note``). A row that a later notebook
    re-evaluates unchanged (same paper, dataset, retriever, metric and method, same per-query
    values: 16 re-reads 07's adapters on 07's test set) is listed once, under the first
    notebook. A no-raw row's comparison is its notebook's own row, interval included (not
    bootstrapped again). Returns ``(table, comparison rows vs the prompting baseline)``."""
    import pandas as pd

    rows, cmp_rows, seen = [], [], {}
    nan4 = dict.fromkeys(("vs raw", "vs raw lo", "vs raw hi"), math.nan)
    for nb, cmp in comparisons.items():
        pq = per_query[nb]
        for _, r in compared_rows(cmp).iterrows():
            own, raw = _values(pq, r, r["method"]), _values(pq, r, r["baseline"])
            key = tuple(r[k] for k in ROW_KEYS)
            if key in seen and seen[key] == own:
                continue
            seen.setdefault(key, own)
            if not own or set(own) != set(raw):
                raise QrlibError(f"{nb}: the per-query values of {r['method']} and "
                                 f"{r['baseline']} on {r['dataset']}/{r['retriever']} "
                                 f"({r['metric']}) are missing or do not pair")
            if abs(sum(own.values()) / len(own) - float(r["score"])) > 1e-3:
                raise QrlibError(f"{nb}: the per-query values of {r['method']} do not average "
                                 f"to its table score {float(r['score']):.4f}")
            has_raw = r["baseline kind"] == "baseline"
            c: Row | None = None
            if has_raw:
                base, note = _prompting(r, own, raw, prompting)
                name = f"prompting baseline ({PROMPTING_METHOD})"
                twin = untrained_twin(str(r["method"]))
                before = _values(pq, r, twin) if base is None and twin else {}
                if before and set(before) == set(own):
                    base, name, note = before, twin, f"{note}; {OWN_UNTRAINED}: {twin}"
                if base is not None:
                    scale = {k: r[k] for k in (*SCALE_COLUMNS, *VALIDITY_COLUMNS) if k in r}
                    c = compare(own, base, **{k: r[k] for k in ROW_KEYS}, kind=r["kind"],
                                baseline=name,
                                baseline_kind="untrained", scale=scale, resamples=resamples,
                                seed=seed)
            else:  # the notebook's own comparison with its training-free baseline, as is
                c = Row({k: r[k] for k in cmp.columns})
                c.per_query = {str(r["baseline"]): raw, str(r["method"]): own}
                note = (f"no raw query in {nb[:2]}: against its training-free baseline, "
                        f"{r['baseline']}")
            pr: dict[str, Any] = {"prompting score": math.nan, "vs prompting": math.nan,
                                  "vs prompting lo": math.nan, "vs prompting hi": math.nan,
                                  "vs prompting verdict": "not compared"}
            if c is not None:
                cmp_rows.append(c)
                pr = {"prompting score": c["baseline score"], "vs prompting": c["diff"],
                      "vs prompting lo": c["lo"], "vs prompting hi": c["hi"],
                      "vs prompting verdict": verdict(c["lo"], c["hi"])}
            steps = int(r["RL steps"])
            same = equal_share(own, raw) if has_raw else math.nan
            rows.append({
                "notebook": nb, **{k: r[k] for k in ("paper", "dataset", "retriever", "metric",
                                                     "method", "kind")},
                "test queries": int(r["test queries"]), "score": float(r["score"]),
                **({"raw score": float(r["baseline score"]), "vs raw": float(r["diff"]),
                    "vs raw lo": float(r["lo"]), "vs raw hi": float(r["hi"]),
                    "vs raw verdict": verdict(r["lo"], r["hi"])} if has_raw else
                   {"raw score": math.nan, **nan4, "vs raw verdict": NO_RAW}),
                **pr, "prompting note": note,
                "test valid": r.get("test valid", math.nan),
                "train valid": r.get("train valid", math.nan),
                "train copy": r.get("train copy", math.nan),
                "train echo": r.get("train echo", math.nan),
                "equal to raw": same,
                "collapse": collapse_verdict(float(r.get("train copy", math.nan)),
                                             float(r.get("train echo", math.nan)), equal=same)
                if steps else "no RL",
                **{k: r[k] for k in ("policy", "RL steps", "SFT steps", "train queries",
                                     "rollouts", "train min")},
                "scale note": ("plumbing check, not a result" if 0 < steps < PLUMBING_STEPS
                               else ""),
                "level": float(r["level"])})
    if not rows:
        raise QrlibError("trained_table: no trained row in any comparison table")
    return pd.DataFrame(rows, columns=list(TRAINED_COLUMNS)), cmp_rows


def prompting_rows(tables_dir: str | Path) -> Any | None:
    """Notebook 19's per-query values (``19_comparisons_per_query.csv``), None when absent."""
    path = Path(tables_dir) / "19_comparisons_per_query.csv"
    return read_per_query(path) if path.exists() else None


def _label(r: Mapping[str, Any]) -> str:
    return f"{r['method']} ({r['notebook'][:2]}, {r['dataset']}/{r['retriever']})"


def findings(table: Any, missing: list[str]) -> str:
    """At most six sentences on ``table`` (:func:`trained_table`): verdicts against the raw
    query and the prompting baseline (counted from intervals), the rows that beat both, the
    collapse and validity checks, and the notebooks with no table in this run."""
    from qrlib.eval.prose import paragraph

    def counts(col: str) -> tuple[int, int, int]:
        v = table[col].tolist()
        return v.count("beats"), v.count("falls below"), v.count("is not distinguishable from")

    n = len(table)
    up, down, tie = counts("vs raw verdict")
    no_raw = table[table["vs raw verdict"] == NO_RAW]
    out = [f"Of {n} trained row{'s' if n != 1 else ''} from {table.notebook.nunique()} "
           f"notebooks, {up} beat the raw query with a 95 % interval above 0, {down} fall "
           f"below it and {tie} cannot be told apart from it"
           + (f"; {len(no_raw)} (notebook{'s' if no_raw.notebook.nunique() > 1 else ''} "
              f"{', '.join(sorted({x[:2] for x in no_raw.notebook}))}) have no raw query and "
              "are compared with their notebook's training-free baseline instead"
              if len(no_raw) else "") + "."]
    paired = table[table["vs prompting verdict"] != "not compared"]
    if len(paired):
        pu, pd_, pt = counts("vs prompting verdict")
        out.append(f"Paired on the same test queries with a training-free baseline (notebook "
                   f"19's prompting baseline; the notebook's own where it has no raw query, or "
                   f"where notebook 19 has none in the row's metric), "
                   f"{pu} of {len(paired)} rows beat it, {pd_} fall below it and {pt} cannot "
                   "be told apart" + (f"; {n - len(paired)} rows have no such comparison "
                                      "(their reasons are in the table's last text column)"
                                      if n > len(paired) else "") + ".")
    else:
        out.append("No row could be paired with a prompting baseline in this run (the table "
                   "says why for each).")
    both = table[(table["vs raw verdict"] == "beats") & (table["vs prompting verdict"] == "beats")]
    up_no_raw = no_raw[no_raw["vs prompting verdict"] == "beats"]
    out.append(("Rows that beat both the raw query and the prompting baseline: "
                + "; ".join(_label(r) + (" (against its own untrained model)"
                                         if OWN_UNTRAINED in str(r["prompting note"]) else "")
                            for _, r in both.iterrows()) if len(both) else
                "No trained row beats both the raw query and the prompting baseline")
               + ("" if not len(no_raw) else
                  f"; of the rows without a raw query, {len(up_no_raw)} beat their "
                  "training-free baseline" + (": " + "; ".join(
                      _label(r) for _, r in up_no_raw.iterrows()) if len(up_no_raw) else ""))
               + ".")
    rl = table[table["RL steps"] > 0]
    collapsed = rl[rl["collapse"].str.startswith("collapsed")]
    if len(collapsed):
        out.append(f"{len(collapsed)} of {len(rl)} RL rows come from runs that collapsed (in "
                   "their last training quarter, or to a no-op at test): "
                   + "; ".join(f"{_label(r)}: {r['collapse']}" for _, r in collapsed.iterrows())
                   + ".")
    elif len(rl):
        out.append(f"No RL row comes from a collapsed run (last-quarter copy share at most "
                   f"{rl['train copy'].max():.2f}, echo at most {rl['train echo'].max():.2f}).")
    valid = table.dropna(subset=["test valid"])
    if len(valid):
        low = valid.loc[valid["test valid"].idxmin()]
        out.append(f"Test format validity ranges from {low['test valid']:.2f} "
                   f"({_label(low)}) to {valid['test valid'].max():.2f}.")
    if missing:
        out.append(f"Not in this run (no comparison table with per-query values): "
                   f"{', '.join(missing)}.")
    return paragraph(out[:6])


def forest_figure(table: Any) -> Any:
    """Each trained row's difference to the raw query and to the prompting baseline with
    its 95 % interval, one line per row (rows without a prompting comparison show one)."""
    import matplotlib.pyplot as plt

    rows = table.reset_index(drop=True)
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(rows) + 1.4))
    for col, off, colour, name in (("vs raw", -0.15, "tab:blue", "minus the raw query"),
                                   ("vs prompting", 0.15, "tab:orange",
                                    "minus the prompting baseline")):
        ok = rows[col].notna()
        y = rows.index[ok] + off
        ax.errorbar(rows.loc[ok, col], y, xerr=[rows.loc[ok, col] - rows.loc[ok, f"{col} lo"],
                                                 rows.loc[ok, f"{col} hi"] - rows.loc[ok, col]],
                    fmt="o", ms=4, capsize=2, color=colour, label=name)
    ax.axvline(0, color="grey", lw=0.8, ls="--")
    ax.set_yticks(rows.index, [_label(r) for _, r in rows.iterrows()], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("difference in the row's metric (95 % paired bootstrap)")
    ax.legend(loc="lower right", fontsize=7)
    fig.tight_layout()
    return fig
