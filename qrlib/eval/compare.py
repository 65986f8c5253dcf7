"""One comparison schema: a method against a baseline on the same test queries.

Every "rewrite vs raw query" result of the workbook is one row of the same shape, built by
:func:`compare` from two per-query score mappings and saved as a notebook's
``NN_comparisons`` table; ``RESULTS.md`` reads those tables **by column** (``kind``,
``baseline``, ``metric``), never by the wording of a label. A row holds

* where: ``paper``, ``dataset``, ``retriever``, ``metric``;
* what: ``method`` and its ``kind`` (:data:`KINDS`: the baseline itself, a model-free rule,
  an untrained policy, a warm start, a trained policy), ``baseline`` and its
  ``baseline kind`` (``baseline`` when it is the raw query, so "every method against the raw
  query" is ``select(df, **{"baseline kind": "baseline"})``);
* the paired comparison (:func:`qrlib.eval.stats.paired_bootstrap`, queries are the unit):
  ``score``, ``baseline score``, ``diff`` = mean of score minus baseline score, its
  ``level`` percentile interval ``lo``..``hi`` from ``resamples`` resamples, ``p<=0``
  (share of resamples at or below 0), ``wins``/``losses``/``ties`` and ``test queries``;
* the training scale behind the method (:data:`qrlib.eval.scale.SCALE_COLUMNS`, read from
  the runs' logs; zeros and policy ``-`` for rows without training) and its format validity
  at test beside training's (:data:`qrlib.eval.scale.VALIDITY_COLUMNS`; tables written before
  they existed are read without them).

Each row keeps the per-query values it was computed from (:class:`Row`), and
:func:`comparison_table` gathers them, one value per query of every method and baseline, in
its ``attrs``; :func:`save_comparisons` writes the table and, beside it,
``<name>_per_query.csv`` (:data:`PER_QUERY_COLUMNS`), so a later reader can pair any two
rows of any notebooks on the same test queries (the trained-row table pairs every trained
row with the prompting baseline of notebook 19). Pure functions but :func:`save_comparisons`.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from qrlib.core.errors import QrlibError
from qrlib.eval.scale import (SCALE_COLUMNS, VALIDITY_COLUMNS, flagged, plumbing_note,
                              validity_columns)
from qrlib.eval.stats import fmt_interval, paired_bootstrap, verdict

KINDS = ("baseline", "model-free", "untrained", "warm start", "trained")
KEY_COLUMNS = ("paper", "dataset", "retriever", "metric", "method", "kind", "baseline",
               "baseline kind")
STAT_COLUMNS = ("score", "baseline score", "diff", "lo", "hi", "p<=0", "wins", "losses", "ties",
                "level", "resamples")
REQUIRED_COLUMNS = KEY_COLUMNS + STAT_COLUMNS + tuple(SCALE_COLUMNS)
COMPARISON_COLUMNS = REQUIRED_COLUMNS + tuple(VALIDITY_COLUMNS)
NO_VALIDITY = validity_columns(None)  # a row without a model: NaN, NaN, no flag
PER_QUERY_COLUMNS = ("paper", "dataset", "retriever", "metric", "method", "qid", "value")
_PQ_KEY = ["paper", "dataset", "retriever", "metric", "method"]


class Row(dict):
    """A comparison row (a plain ``dict`` of :data:`COMPARISON_COLUMNS`) that also carries
    ``per_query``: ``{method: {qid: value}, baseline: {qid: value}}`` over its paired
    queries (read by :func:`comparison_table`; lost by ``dict(row)``)."""
    per_query: dict[str, dict[str, float]]


def untrained_scale(test_queries: int, policy: str | None = None) -> dict[str, Any]:
    """The scale columns of a row without training (``policy`` for an untrained model)."""
    return {"policy": policy or "-", "RL steps": 0, "SFT steps": 0, "train queries": 0,
            "rollouts": 0, "train min": 0.0, "test queries": int(test_queries)}


def compare(scores: Mapping[str, float], baseline_scores: Mapping[str, float], *,
            paper: str, dataset: str, retriever: str, metric: str, method: str, kind: str,
            baseline: str, baseline_kind: str = "baseline",
            scale: Mapping[str, Any] | None = None, resamples: int = 10_000,
            level: float = 0.95, seed: int = 0) -> dict[str, Any]:
    """One comparison row: ``method`` minus ``baseline`` in ``metric`` over the queries both
    mappings (query id -> per-query value) hold, which must be the same set.

    ``scale`` is :func:`qrlib.eval.scale.scale_columns` of the runs behind the method (None:
    :func:`untrained_scale`); its ``test queries`` must equal the number of paired queries."""
    for name, value in (("kind", kind), ("baseline_kind", baseline_kind)):
        if value not in KINDS:
            raise QrlibError(f"compare: {name} {value!r} is not one of {', '.join(KINDS)}")
    for name, value in (("paper", paper), ("dataset", dataset), ("retriever", retriever),
                        ("metric", metric), ("method", method), ("baseline", baseline)):
        if not isinstance(value, str) or not value.strip():
            raise QrlibError(f"compare: {name} must be a non-empty string, got {value!r}")
    scores = {str(k): v for k, v in scores.items()}
    baseline_scores = {str(k): v for k, v in baseline_scores.items()}
    bs = paired_bootstrap(scores, baseline_scores, n=resamples, level=level, seed=seed)
    scale = dict(scale) if scale is not None else untrained_scale(bs["n_queries"])
    missing = [c for c in SCALE_COLUMNS if c not in scale]
    if missing:
        raise QrlibError(f"compare: scale lacks {', '.join(missing)} (use "
                         "qrlib.eval.scale.scale_columns)")
    if int(scale["test queries"]) != bs["n_queries"]:
        raise QrlibError(f"compare: scale says {scale['test queries']} test queries, the "
                         f"scores pair {bs['n_queries']}")
    row = Row({"paper": paper, "dataset": dataset, "retriever": retriever, "metric": metric,
               "method": method, "kind": kind, "baseline": baseline,
               "baseline kind": baseline_kind, "score": bs["mean_a"],
               "baseline score": bs["mean_b"], "diff": bs["diff"], "lo": bs["lo"],
               "hi": bs["hi"], "p<=0": bs["p_le_0"], "wins": bs["wins"],
               "losses": bs["losses"], "ties": bs["ties"], "level": level,
               "resamples": resamples, **{c: scale[c] for c in SCALE_COLUMNS},
               **{c: scale.get(c, NO_VALIDITY[c]) for c in VALIDITY_COLUMNS}})
    row.per_query = {baseline: {q: float(baseline_scores[q]) for q in scores},
                     method: {q: float(v) for q, v in scores.items()}}
    return row


def comparison_table(rows: Iterable[Mapping[str, Any]]) -> Any:
    """The rows as a DataFrame in :data:`COMPARISON_COLUMNS` order (a one-line error when a
    row lacks a column or two rows compare the same method and baseline twice), with the
    rows' per-query values in ``attrs["per_query"]`` (:func:`per_query_table`)."""
    import pandas as pd

    rows = list(rows)
    per_query = per_query_table(rows)
    rows = [dict(r) for r in rows]
    if not rows:
        raise QrlibError("comparison_table: no rows")
    df = pd.DataFrame([{**NO_VALIDITY, **r} for r in rows])
    check_comparisons(df, "comparison_table")
    key = ["paper", "dataset", "retriever", "metric", "method", "baseline"]
    dup = df[df.duplicated(key, keep=False)]
    if len(dup):
        r = dup.iloc[0]
        raise QrlibError(f"comparison_table: {r.method} vs {r.baseline} on {r.dataset}/"
                         f"{r.retriever} ({r.metric}) appears {len(dup)} times")
    df = df[list(COMPARISON_COLUMNS)]
    df.attrs["per_query"] = per_query
    return df


def per_query_table(rows: Iterable[Mapping[str, Any]]) -> Any:
    """The per-query values behind comparison rows (:class:`Row`), one per (paper, dataset,
    retriever, metric, method, qid), in :data:`PER_QUERY_COLUMNS`; ``None`` when a row
    does not carry them. A method whose value for one query differs between two rows is a
    one-line error (two different things under one name)."""
    import pandas as pd

    out: dict[tuple[str, ...], float] = {}
    for r in rows:
        pq = getattr(r, "per_query", None)
        if pq is None:
            return None
        for name, values in pq.items():
            for q, v in values.items():
                key = (r["paper"], r["dataset"], r["retriever"], r["metric"], name, q)
                old = out.setdefault(key, v)
                if not (old == v or (old != old and v != v)):
                    raise QrlibError(f"comparison_table: {name} on {r['dataset']}/"
                                     f"{r['retriever']} ({r['metric']}) has two values for "
                                     f"query {q} ({old} and {v}); give the two rows different "
                                     "method names")
    return pd.DataFrame([(*k, v) for k, v in out.items()], columns=list(PER_QUERY_COLUMNS))


def save_comparisons(df: Any, name: str, tables_dir: Any, *, caption: str = "",
                     digits: int | None = 4) -> dict[str, Any]:
    """Save a :func:`comparison_table` as ``<name>.csv|md`` (rounded to ``digits``) and its
    per-query values as ``<name>_per_query.csv`` (full precision). A table that lost its
    per-query values (built without :func:`comparison_table`, or concatenated) is a
    one-line error before anything is written."""
    from pathlib import Path

    from qrlib.core.io import atomic_write, save_table

    per_query = df.attrs.get("per_query")
    if per_query is None:
        raise QrlibError(f"save_comparisons: {name} carries no per-query values; build it with "
                         "qrlib.eval.compare.comparison_table from compare() rows")
    check_comparisons(df, name)
    have = set(map(tuple, per_query[_PQ_KEY].drop_duplicates().itertuples(index=False)))
    for _, r in df.iterrows():
        for m in (r["method"], r["baseline"]):
            if (r["paper"], r["dataset"], r["retriever"], r["metric"], m) not in have:
                raise QrlibError(f"save_comparisons: {name} has no per-query values of {m} on "
                                 f"{r['dataset']}/{r['retriever']} ({r['metric']})")
    out = save_table(df.round(digits) if digits is not None else df, name, tables_dir,
                     caption=caption)
    path = Path(tables_dir) / f"{name}_per_query.csv"
    atomic_write(path, per_query.to_csv(index=False))
    return {**out, "per_query": path}


def read_per_query(path: Any) -> Any:
    """A ``<name>_per_query.csv`` written by :func:`save_comparisons` (a one-line error when
    it lacks a :data:`PER_QUERY_COLUMNS` column); query ids are read as strings."""
    from qrlib.core.io import read_table

    df = read_table(path, dtype={"qid": str})
    missing = [c for c in PER_QUERY_COLUMNS if c not in df.columns]
    if missing:
        raise QrlibError(f"{path}: not a per-query table, it lacks {', '.join(missing)}")
    return df


def check_comparisons(df: Any, source: str) -> Any:
    """``df`` if it has every :data:`REQUIRED_COLUMNS` and known kinds, else a one-line
    error naming ``source`` (a table read back from disk, say) and what it lacks."""
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise QrlibError(f"{source}: not a comparison table, it lacks {', '.join(missing)} "
                         "(see qrlib.eval.compare.COMPARISON_COLUMNS)")
    bad = sorted((set(df["kind"]) | set(df["baseline kind"])) - set(KINDS))
    if bad:
        raise QrlibError(f"{source}: unknown kind(s) {bad}; accepted: {', '.join(KINDS)}")
    return df


def select(df: Any, **where: Any) -> Any:
    """Rows of a comparison table whose columns equal ``where`` (column names with spaces
    are passed as ``**{"test queries": 516}``); an unknown column is an error."""
    unknown = [k for k in where if k not in df.columns]
    if unknown:
        raise QrlibError(f"select: no column {', '.join(unknown)}; columns are "
                         f"{', '.join(map(str, df.columns))}")
    mask = None
    for k, v in where.items():
        m = df[k].isin(v) if isinstance(v, (list, tuple, set)) else df[k] == v
        mask = m if mask is None else mask & m
    return df if mask is None else df[mask]


def describe(row: Mapping[str, Any], digits: int = 3) -> str:
    """``"ACQO minus raw question on 2wiki/bm25, nDCG@10: +0.021 [+0.014, +0.027] -> beats
    (132 RL steps, ...)"``: one sentence of a comparison row, its scale when trained."""
    text = (f"{row['method']} minus {row['baseline']} on {row['dataset']}/{row['retriever']}, "
            f"{row['metric']}: {fmt_interval(row, digits)} -> {row['method']} "
            f"{verdict(row['lo'], row['hi'])} {row['baseline']}")
    if int(row["RL steps"]) or int(row["SFT steps"]):
        text += (f" ({int(row['RL steps'])} RL steps + {int(row['SFT steps'])} SFT, "
                 f"{int(row['train queries'])} distinct training queries, "
                 f"{int(row['rollouts'])} rollouts, {float(row['train min']):.1f} min; "
                 f"{int(row['test queries'])} test queries"
                 f"{plumbing_note(int(row['RL steps']))})")
    return text + flagged(row)
