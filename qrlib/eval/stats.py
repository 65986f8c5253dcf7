"""Paired comparisons over the same test queries.

:func:`paired_bootstrap` is the interval every "trained rewriter vs raw query" row of the
workbook reports: the per-query differences of one metric are resampled with replacement
(queries are the unit; Efron & Tibshirani 1993, percentile interval), so the interval
answers "would this gain hold on another sample of questions like these?".
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from qrlib.core.errors import QrlibError


def paired_bootstrap(a: Sequence[float] | Mapping[str, float],
                     b: Sequence[float] | Mapping[str, float], *, n: int = 10_000,
                     level: float = 0.95, seed: int = 0) -> dict[str, float]:
    """Mean of ``a - b`` over paired queries with a percentile bootstrap interval.

    ``a`` and ``b`` are per-query values in the same order, or mappings qid -> value
    (compared on their common qids; a qid in only one of them is an error, since a
    silently dropped query changes the comparison). Returns ``mean_a``, ``mean_b``,
    ``diff``, ``lo``, ``hi`` (the ``level`` interval of the mean difference), ``p_le_0``
    (share of resamples whose mean difference is <= 0: a one-sided bootstrap p-value for
    "a beats b"), ``wins``/``losses``/``ties`` (queries) and ``n_queries``.
    """
    if isinstance(a, Mapping) or isinstance(b, Mapping):
        if not (isinstance(a, Mapping) and isinstance(b, Mapping)):
            raise QrlibError("paired_bootstrap: pass two sequences or two qid -> value mappings")
        only = sorted(set(a) ^ set(b))
        if only:
            raise QrlibError(f"paired_bootstrap: {len(only)} qid(s) in only one side, e.g. "
                             f"{only[:3]}; compare on the same queries")
        qids = sorted(a)
        x = np.array([a[q] for q in qids], dtype=float)
        y = np.array([b[q] for q in qids], dtype=float)
    else:
        x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise QrlibError(f"paired_bootstrap: sides differ in shape ({x.shape} vs {y.shape})")
    if len(x) == 0:
        raise QrlibError("paired_bootstrap: no queries")
    if not 0 < level < 1:
        raise QrlibError(f"level must be in (0, 1), got {level}")
    d = x - y
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(d), size=(n, len(d)))
    means = d[idx].mean(axis=1)
    alpha = (1 - level) / 2
    return {"mean_a": float(x.mean()), "mean_b": float(y.mean()), "diff": float(d.mean()),
            "lo": float(np.quantile(means, alpha)), "hi": float(np.quantile(means, 1 - alpha)),
            "p_le_0": float((means <= 0).mean()), "wins": int((d > 0).sum()),
            "losses": int((d < 0).sum()), "ties": int((d == 0).sum()), "n_queries": len(d)}


def mean_interval(values: Sequence[float], *, n: int = 10_000, level: float = 0.95,
                  seed: int = 0) -> tuple[float, float]:
    """The percentile bootstrap ``level`` interval of the mean of ``values`` (the one-sample
    case of :func:`paired_bootstrap`, against zeros)."""
    x = np.asarray(values, dtype=float)
    r = paired_bootstrap(x, np.zeros_like(x), n=n, level=level, seed=seed)
    return r["lo"], r["hi"]


def fmt_interval(r: Mapping[str, float], digits: int = 3) -> str:
    """``+0.012 [+0.003, +0.021]`` from a :func:`paired_bootstrap` result."""
    f = f"{{:+.{digits}f}}"
    return f"{f.format(r['diff'])} [{f.format(r['lo'])}, {f.format(r['hi'])}]"


def span(values: Iterable[float], fmt: str = ".0%") -> str:
    """``"40%-60%"`` for the range of ``values`` as ``fmt`` shows them, ``"100%"`` when the
    two ends read the same."""
    values = list(values)
    lo, hi = format(min(values), fmt), format(max(values), fmt)
    return lo if lo == hi else f"{lo}-{hi}"


def verdict(lo: float, hi: float) -> str:
    """How an interval of ``a - b`` reads: "beats" (excludes 0 from above), "falls below"
    (from below) or "is not distinguishable from" (contains 0)."""
    return "beats" if lo > 0 else "falls below" if hi < 0 else "is not distinguishable from"
