"""Best-of-N scaling of sampled rewrites (SAGE Sec. 3.1, Fig. 3): the oracle upper bound.

For every query a *pool* of M sampled rewrites of one prompt family is scored with the
qrels (nDCG@10). Best-of-N is the score of the best of N rewrites, i.e. the rewrite an
oracle would pick. Reading chosen here (the paper does not say how its N samples are
drawn): the N rewrites are N draws *without replacement* from the pool, and we report the
exact expectation of their maximum over all C(M, N) draws (:func:`expected_max`), not one
arbitrary draw. For a strategy family the pool holds the same number of samples from every
strategy prompt, so a draw is a uniform mix of strategies.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import comb

import numpy as np

from qrlib.core.errors import QrlibError


def expected_max(values: Sequence[float], n: int) -> float:
    """E[max of ``n`` draws without replacement from ``values``] (order statistics):
    with ``v_(1) <= ... <= v_(M)``, ``sum_{i=n}^{M} v_(i) C(i-1, n-1) / C(M, n)``."""
    v = np.sort(np.asarray(values, dtype=float))
    m = len(v)
    if not 1 <= n <= m:
        raise QrlibError(f"best-of-N needs 1 <= N <= pool size; got N={n}, pool {m}")
    total = comb(m, n)
    w = np.array([comb(i - 1, n - 1) for i in range(n, m + 1)], dtype=float) / total
    return float((v[n - 1:] * w).sum())


def best_of_n_per_query(pools: Mapping[str, Sequence[float]], n: int) -> dict[str, float]:
    """:func:`expected_max` of each query's pool (``pools``: qid -> scores), the per-query
    values a paired bootstrap over queries resamples."""
    if not pools:
        raise QrlibError("best-of-N: no queries")
    return {q: expected_max(v, n) for q, v in pools.items()}


def best_of_n_curve(pools: Mapping[str, Sequence[float]], ns: Sequence[int]) -> dict[int, float]:
    """Mean over queries of :func:`expected_max` for each N (``pools``: qid -> scores).
    An N larger than some query's pool is an error, not a silently shorter curve."""
    return {int(n): float(np.mean(list(best_of_n_per_query(pools, n).values()))) for n in ns}


def best_share(scores: Sequence[float], labels: Sequence[object]) -> dict[object, float]:
    """Which label (strategy) produced the best score of one pool: 1 for the winner, ties
    split equally (so shares over a query sum to 1)."""
    if len(scores) != len(labels) or not len(scores):
        raise QrlibError("best_share needs one label per score and at least one score")
    top = max(scores)
    winners = [lab for s, lab in zip(scores, labels) if s >= top - 1e-12]
    out: dict[object, float] = {}
    for lab in winners:
        out[lab] = out.get(lab, 0.0) + 1.0 / len(winners)
    return out
