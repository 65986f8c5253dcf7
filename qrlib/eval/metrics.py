"""Evaluation: a thin wrapper over ir-measures (MacAvaney et al., ECIR 2022).

Nothing is re-implemented here: measures are parsed by name (``nDCG@10``, ``RR@10``,
``R@100``, ``AP@10``, ``P@10``, ``alpha_nDCG@10``, anything ``ir_measures.parse_measure``
accepts) and computed by ir-measures' providers (pytrec_eval for the trec_eval family,
pyndeval for alpha-nDCG). The wrapper only fixes three conventions that bite in practice:

* **Ranked lists keep their order.** A run given as lists ``[(doc, score), ...]`` is
  evaluated in list order: trec_eval-style evaluators re-sort by score and break ties by
  document id, which would silently reorder fused or tied lists. Lists are therefore
  re-scored ``n, n-1, ..., 1`` before evaluation; a run given as ``{doc: score}`` dicts is
  evaluated with its own scores (trec_eval semantics). Duplicate docs keep their first rank.
* **Every judged query counts.** Queries in ``qrels`` that are missing from the run (or got an
  empty list) score 0, as ``trec_eval -c`` does; queries in the run without qrels are ignored.
  The aggregate is the mean over the judged queries.
* **alpha-nDCG needs subtopics.** Pass ``subtopic_qrels={qid: {subtopic: {doc: rel}}}``
  (e.g. one subtopic per gold paragraph of a multi-hop question, see
  :func:`subtopics_from_qrels`); without it each query has a single subtopic (ndeval's
  reading of plain qrels), and alpha-nDCG then measures plain novelty-free gain.

``AP@k`` is trec_eval's ``map_cut_k``: precision summed at relevant ranks <= k divided by
the total number of relevant docs (not by min(R, k)).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from qrlib.core.errors import QrlibError

Run = Mapping[str, Any]
Qrels = Mapping[str, Mapping[str, int]]

DEFAULT_MEASURES = ("nDCG@10", "R@100")
#: The raw-query baseline table of notebook 02 (ACQO Tables 2-3 report MAP@10/MRR@k/R@k).
BASELINE_MEASURES = ("nDCG@10", "R@100", "AP@10", "RR@10")
#: How the papers label these measures.
LABELS = {"AP@10": "MAP@10", "RR@10": "MRR@10", "RR@3": "MRR@3"}


def parse_measures(measures: str | Sequence[str] | Sequence[Any]) -> list[Any]:
    """ir-measures objects from names; one-line QrlibError naming the bad one."""
    import ir_measures

    if isinstance(measures, str):
        measures = [measures]
    if not measures:
        raise QrlibError("no measures given; name at least one, e.g. nDCG@10, R@100, RR@10")
    out = []
    for m in measures:
        if not isinstance(m, str):
            out.append(m)
            continue
        try:
            out.append(ir_measures.parse_measure(m))
        except Exception:  # noqa: BLE001 - ir-measures raises several types
            raise QrlibError(f"unknown measure {m!r}; use ir-measures names such as nDCG@10, "
                             "RR@10, R@100, AP@10, P@10, alpha_nDCG@10") from None
    return out


def normalise_run(run: Run) -> dict[str, dict[str, float]]:
    """``{qid: {doc: score}}`` from lists (order-preserving scores) or dicts (kept)."""
    if not isinstance(run, Mapping):
        raise QrlibError(f"run must be a dict qid -> ranked list or qid -> {{doc: score}}, "
                         f"got {type(run).__name__}")
    out: dict[str, dict[str, float]] = {}
    for qid, res in run.items():
        if isinstance(res, Mapping):
            out[str(qid)] = {str(d): float(s) for d, s in res.items()}
            continue
        items = list(res)
        n = len(items)
        ranked: dict[str, float] = {}
        for i, item in enumerate(items):
            doc = item[0] if isinstance(item, (tuple, list)) else item
            ranked.setdefault(str(doc), float(n - i))
        out[str(qid)] = ranked
    return out


def _qrels_records(qrels: Qrels, subtopic_qrels: Mapping | None, qids: set[str]) -> Any:
    from ir_measures import Qrel

    if subtopic_qrels is None:
        return [Qrel(q, d, int(r), "0") for q in qids for d, r in qrels[q].items()]
    recs = []
    for q in qids:
        for sub, docs in subtopic_qrels.get(q, {}).items():
            recs += [Qrel(q, d, int(r), str(sub)) for d, r in docs.items()]
    return recs


def evaluate(run: Run, qrels: Qrels, measures: Sequence[str] = DEFAULT_MEASURES,
             per_query: bool = False, *, subtopic_qrels: Mapping | None = None) -> pd.DataFrame:
    """Score ``run`` against ``qrels`` with ir-measures.

    Returns one row with one column per measure (``per_query=False``), or one row per judged
    query with a ``query_id`` column (``per_query=True``; queries missing from the run get 0).
    Column names are the measure names as given (e.g. ``"nDCG@10"``).
    """
    import ir_measures

    names = [measures] if isinstance(measures, str) else list(measures)
    parsed = parse_measures(names)
    if not qrels:
        raise QrlibError("qrels are empty; nothing to evaluate against")
    runs = normalise_run(run)
    qids = sorted(q for q, rs in qrels.items() if rs)
    qset = set(qids)
    runs = {q: runs.get(q, {}) for q in qids}
    cols = [n if isinstance(n, str) else str(n) for n in names]
    values = {c: dict.fromkeys(qids, 0.0) for c in cols}
    plain = [(c, m) for c, m in zip(cols, parsed) if not str(m).startswith("alpha_nDCG")]
    alpha = [(c, m) for c, m in zip(cols, parsed) if str(m).startswith("alpha_nDCG")]
    nonempty = {q: r for q, r in runs.items() if r}
    for group, sub in ((plain, None), (alpha, subtopic_qrels if subtopic_qrels is not None else None)):
        if not group or not nonempty:
            continue
        if group is alpha:
            qrecs = _qrels_records(qrels, sub, qset)
        else:
            qrecs = {q: {d: int(r) for d, r in qrels[q].items()} for q in qids}
        by_str = {str(m): c for c, m in group}
        for metric in ir_measures.iter_calc([m for _, m in group], qrecs, nonempty):
            if metric.query_id in qset:
                values[by_str[str(metric.measure)]][metric.query_id] = float(metric.value)
    df = pd.DataFrame({"query_id": qids, **{c: [values[c][q] for q in qids] for c in cols}})
    if per_query:
        return df
    return df[cols].mean().to_frame().T.reset_index(drop=True)


def subtopics_from_qrels(qrels: Qrels) -> dict[str, dict[str, dict[str, int]]]:
    """One subtopic per relevant doc (each gold paragraph of a multi-hop question is a facet)."""
    return {q: {f"s{i}": {d: r} for i, (d, r) in enumerate(sorted(rs.items())) if r > 0}
            for q, rs in qrels.items()}


def easy_hard_split(per_query_df: pd.DataFrame, measure: str,
                    threshold: float | str = "median") -> tuple[list[str], list[str]]:
    """Split queries by a baseline measure: ``easy`` (value >= threshold) vs ``hard`` (<).

    ``per_query_df`` is :func:`evaluate` output with ``per_query=True``; ``threshold`` may be
    a number or ``"median"``/``"mean"`` of the column (ACQO Table 1 contrasts such subsets).
    Returns ``(easy_qids, hard_qids)``, each sorted.
    """
    if measure not in per_query_df.columns:
        raise QrlibError(f"measure {measure!r} not in the per-query table; columns: "
                         f"{', '.join(c for c in per_query_df.columns if c != 'query_id')}")
    col = per_query_df[measure].astype(float)
    if isinstance(threshold, str):
        if threshold not in ("median", "mean"):
            raise QrlibError(f"threshold must be a number, 'median' or 'mean'; got {threshold!r}")
        thr = float(col.median() if threshold == "median" else col.mean())
    else:
        thr = float(threshold)
    ids = per_query_df["query_id"].astype(str) if "query_id" in per_query_df else \
        per_query_df.index.astype(str)
    easy = sorted(ids[col >= thr])
    hard = sorted(ids[col < thr])
    return easy, hard


def label(measure: str) -> str:
    """Paper-style label (``AP@10`` -> ``MAP@10``, ``RR@10`` -> ``MRR@10``)."""
    return LABELS.get(measure, measure)
