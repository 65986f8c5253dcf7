"""Search-then-score: per-query measures of search texts (the step every rewrite table takes).

:func:`search_scores` runs one batched search of each query's search text and scores the
lists with ir-measures (:func:`qrlib.eval.metrics.evaluate`): a DataFrame indexed by query
id in the given order, one column per measure, a query whose list finds nothing judged
scoring 0. Method pipelines (RL-QR, SAGE) call it instead of writing the loop again.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from qrlib.eval import metrics


def search_scores(retriever: Any, qrels: Mapping[str, Mapping[str, int]],
                  texts_by_qid: Mapping[str, str], measures: Sequence[str] = ("nDCG@10",),
                  depth: int = 100) -> Any:
    """Per-query ``measures`` of each query's search text, one search for all of them."""
    qids = list(texts_by_qid)
    res = retriever.search([texts_by_qid[q] for q in qids], depth)
    ev = metrics.evaluate(dict(zip(qids, res)), {q: qrels[q] for q in qids}, tuple(measures),
                          per_query=True)
    return ev.set_index("query_id")[list(measures)].reindex(qids).fillna(0.0)
