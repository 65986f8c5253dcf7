"""Rank fusion of several ranked lists (one per sub-query) into one list.

Every function takes ``lists: Sequence[Sequence[(doc_id, score)]]`` (each best first, as
:meth:`Retriever.search` returns them) and returns one fused list ``[(doc_id, score)]``,
best first, cut to ``top`` when given. Pure functions; no retrieval here.

* :func:`rrf`  Reciprocal Rank Fusion (Cormack et al., 2009): sum_j 1/(k + r_j).
* :func:`rsf`  Rank-Score Fusion (ACQO Sec. 3.3, Eq. 1-2): P(p) = 1 / sum_j 1/r_j over the
  lists that contain p, S(p) = max_j s_j; sort by (P ascending, S descending). P is
  compared exactly (integers over a common denominator), so documents whose P values are
  equal as fractions (ranks 2 and 12 vs 3 and 4: both 12/7) are ordered by S as Eq. 2
  says, never by floating-point rounding.
* :func:`combsum` / :func:`combmnz`  (Fox & Shaw, 1994) with optional per-list score
  normalisation (``none``, ``minmax``, ``max``, ``sum``, ``zmuv``).

Duplicates: a document repeated inside one list counts once, at its first position, and
the later documents move up (as :func:`qrlib.eval.metrics.evaluate` and trec_eval read a run).

Ties and metric tools: ir-measures / trec_eval re-sort a run by score and break ties by
doc id, which would undo RSF's tie-breaking (RSF's own key is the pair (P, -S), not one
number). Use :func:`to_run` (strictly decreasing scores from list order) before handing a
fused list to :mod:`qrlib.eval.metrics`.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from fractions import Fraction
from typing import Any

from qrlib.core.errors import QrlibError

Ranked = Sequence[tuple[str, float]]
Fused = list[tuple[str, float]]
NORMS = ("none", "minmax", "max", "sum", "zmuv")


def _check(lists: Sequence[Ranked]) -> None:
    if isinstance(lists, (str, bytes)) or not isinstance(lists, Sequence):
        raise QrlibError("fusion expects a list of ranked lists [[(doc_id, score), ...], ...]")


def unique_ranked(lst: Ranked) -> Iterator[tuple[int, str, Any]]:
    """``(rank, doc, score)`` of the first occurrence of each document, ranks 1-based and
    consecutive (a repeated document is dropped and the later ones move up)."""
    seen: set[str] = set()
    r = 0
    for d, s in lst:
        if d in seen:
            continue
        seen.add(d)
        r += 1
        yield r, d, s


_INV_TABLES: dict[int, tuple[int, list[int]]] = {}


def inverse_rank_table(n: int) -> tuple[int, list[int]]:
    """``(L, [L // r for r in 0..N])`` with L = lcm(1..N), N >= n a power of two (``[0]``
    is 0): sum_j 1/r_j equals ``sum_j table[r_j] / L`` exactly, in integers."""
    size = 1 << max(int(n) - 1, 1).bit_length()
    got = _INV_TABLES.get(size)
    if got is None:
        lcm = math.lcm(*range(1, size + 1))
        got = (lcm, [0] + [lcm // r for r in range(1, size + 1)])
        _INV_TABLES[size] = got
    return got


def _finish(items: list[tuple[Any, str, float]], top: int | None) -> Fused:
    items.sort(key=lambda t: t[0])
    out = [(d, s) for _, d, s in items]
    return out[:top] if top is not None else out


def rrf(lists: Sequence[Ranked], k: float = 60, top: int | None = None) -> Fused:
    """Reciprocal Rank Fusion: score(p) = sum_j 1 / (k + r_j), r_j 1-based.

    Ties keep the document seen first (best rank, then earlier list). Matches
    ``ranx.fuse(method="rrf", params={"k": k})`` scores.
    """
    _check(lists)
    if k < 0:
        raise QrlibError(f"rrf k must be >= 0, got {k}")
    score: dict[str, float] = {}
    first: dict[str, tuple[int, int]] = {}
    for j, lst in enumerate(lists):
        for r, d, _ in unique_ranked(lst):  # a repeated document counts once
            if d in score:
                score[d] += 1.0 / (k + r)
                if (r, j) < first[d]:
                    first[d] = (r, j)
            else:
                score[d] = 1.0 / (k + r)
                first[d] = (r, j)
    return _finish([((-s, first[d]), d, s) for d, s in score.items()], top)


#: float sums of reciprocal ranks closer than this are compared exactly
RSF_TIE_TOL = 1e-9


def _rsf_sums(lists: Sequence[Ranked]) -> tuple[dict[str, float], dict[str, float],
                                                 list[dict[str, int]], set[str]]:
    """doc -> sum_j 1/r_j as a float, doc -> max_j s_j, per list doc -> its rank (first
    occurrence; exact sums are rebuilt from these where floats are too close), and the
    documents found in more than one list."""
    _check(lists)
    inv: dict[str, float] = {}
    best: dict[str, float] = {}
    pos: list[dict[str, int]] = []
    multi: set[str] = set()
    for lst in lists:
        p: dict[str, int] = {}
        for r, d, s in unique_ranked(lst):  # a repeated document counts once
            p[d] = r
            s = float(s)
            if d in inv:
                inv[d] += 1.0 / r
                multi.add(d)
                if s > best[d]:
                    best[d] = s
            else:
                inv[d] = 1.0 / r
                best[d] = s
        pos.append(p)
    return inv, best, pos, multi


def _exact_sum(d: str, pos: list[dict[str, int]], table: list[int]) -> int:
    return sum(table[p.get(d, 0)] for p in pos)


def rsf_keys(lists: Sequence[Ranked]) -> dict[str, tuple[Fraction, float]]:
    """ACQO Eq. 1: doc -> (P(p), S(p)) with P = 1/sum_j(1/r_j) as an exact Fraction and
    S = max_j s_j."""
    inv, best, pos, _ = _rsf_sums(lists)
    lcm, table = inverse_rank_table(max((len(p) for p in pos), default=1))
    return {d: (Fraction(lcm, _exact_sum(d, pos, table)), best[d]) for d in inv}


def rsf(lists: Sequence[Ranked], top: int | None = None) -> Fused:
    """Rank-Score Fusion (ACQO Eq. 1-2).

    Sorted by (P(p) ascending, S(p) descending, doc_id), P compared exactly: documents
    are sorted on float sums, and every run of neighbours whose sums lie within
    :data:`RSF_TIE_TOL` (far above float error, far below any real gap) is re-sorted on
    exact integer sums. The returned score is ``1 / P(p) = sum_j 1/r_j`` (higher is
    better; equal for RSF ties, which S resolves).
    """
    inv, best, pos, multi = _rsf_sums(lists)
    keys = sorted((-v, -best[d], d) for d, v in inv.items())
    n = len(keys)
    stop = min(n if top is None else top, n - 1)     # runs starting inside the cut
    i = 0
    table: list[int] | None = None
    while i < stop:
        if keys[i + 1][0] - keys[i][0] > RSF_TIE_TOL:
            i += 1
            continue
        j = i + 1
        while j + 1 < n and keys[j + 1][0] - keys[j][0] <= RSF_TIE_TOL:
            j += 1
        if not any(k[2] in multi for k in keys[i:j + 1]):
            i = j + 1                # all single terms 1/r: the float order is exact
            continue
        if table is None:
            table = inverse_rank_table(max((len(p) for p in pos), default=1))[1]
        run = sorted((-_exact_sum(k[2], pos, table), k[1], k[2]) for k in keys[i:j + 1])
        keys[i:j + 1] = [(-inv[k[2]], k[1], k[2]) for k in run]
        i = j + 1
    out = [(d, -v) for v, _, d in keys]
    return out[:top] if top is not None else out


def normalise(lst: Ranked, norm: str = "minmax") -> list[tuple[str, float]]:
    """Per-list score normalisation for CombSUM/CombMNZ."""
    if norm not in NORMS:
        raise QrlibError(f"unknown score normalisation {norm!r}; accepted: {list(NORMS)}")
    if norm == "none" or not lst:
        return [(d, float(s)) for d, s in lst]
    vals = [float(s) for _, s in lst]
    if norm == "minmax":
        lo, hi = min(vals), max(vals)
        span = hi - lo
        return [(d, (v - lo) / span if span > 0 else 1.0) for (d, _), v in zip(lst, vals)]
    if norm == "max":
        hi = max(vals)
        return [(d, v / hi if hi != 0 else 0.0) for (d, _), v in zip(lst, vals)]
    if norm == "sum":
        tot = sum(vals)
        return [(d, v / tot if tot != 0 else 0.0) for (d, _), v in zip(lst, vals)]
    mu = sum(vals) / len(vals)
    sd = math.sqrt(sum((v - mu) ** 2 for v in vals) / len(vals))
    return [(d, (v - mu) / sd if sd > 0 else 0.0) for (d, _), v in zip(lst, vals)]


def _comb(lists: Sequence[Ranked], norm: str, mnz: bool, top: int | None) -> Fused:
    _check(lists)
    score: dict[str, float] = {}
    count: dict[str, int] = {}
    first: dict[str, tuple[int, int]] = {}
    for j, lst in enumerate(lists):
        for r, d, s in unique_ranked(normalise(lst, norm)):
            score[d] = score.get(d, 0.0) + s
            count[d] = count.get(d, 0) + 1
            if d not in first or (r, j) < first[d]:
                first[d] = (r, j)
    items = []
    for d, s in score.items():
        v = s * count[d] if mnz else s
        items.append(((-v, first[d]), d, v))
    return _finish(items, top)


def combsum(lists: Sequence[Ranked], norm: str = "minmax", top: int | None = None) -> Fused:
    """CombSUM: sum of (normalised) scores over the lists containing the document."""
    return _comb(lists, norm, False, top)


def combmnz(lists: Sequence[Ranked], norm: str = "minmax", top: int | None = None) -> Fused:
    """CombMNZ: CombSUM times the number of lists containing the document."""
    return _comb(lists, norm, True, top)


FUSIONS: dict[str, Callable[..., Fused]] = {
    "rrf": rrf, "rsf": rsf, "combsum": combsum, "combmnz": combmnz,
}


def fuse(lists: Sequence[Ranked], method: str = "rsf", top: int | None = None,
         **params: Any) -> Fused:
    """Fuse with the method named ``method`` (one of :data:`FUSIONS`).

    A single list is returned as is (cut to ``top``): fusion of one list is the identity
    for every method here up to score scale, and keeping the retriever's scores keeps
    single-query rollouts comparable with the raw query.
    """
    if method not in FUSIONS:
        raise QrlibError(f"unknown fusion method {method!r}; accepted: {sorted(FUSIONS)}")
    if len(lists) == 1:
        out = [(d, float(s)) for _, d, s in unique_ranked(lists[0])]
        return out[:top] if top is not None else out
    return FUSIONS[method](lists, top=top, **params)


def fuse_batch(groups: Sequence[Sequence[Ranked]], method: str = "rsf",
               top: int | None = None, **params: Any) -> list[Fused]:
    """:func:`fuse` over many queries at once (one group of lists per query)."""
    return [fuse(g, method, top=top, **params) for g in groups]


def to_run(fused: Ranked) -> dict[str, float]:
    """doc -> strictly decreasing score (len - position) that preserves the list order,
    so metric tools that re-sort by score cannot reorder ties."""
    n = len(fused)
    out: dict[str, float] = {}
    for i, (d, _) in enumerate(fused):
        out.setdefault(d, float(n - i))       # a repeated document keeps its first rank
    return out


def fuse_runs(runs: Sequence[Mapping[str, Ranked]], method: str = "rsf",
              top: int | None = None, **params: Any) -> dict[str, dict[str, float]]:
    """Fuse several runs ``{qid: ranked list}`` query by query into one metric-ready run
    ``{qid: {doc: score}}`` (scores from :func:`to_run`)."""
    qids = sorted({q for run in runs for q in run})
    out = {}
    for q in qids:
        lists = [run[q] for run in runs if q in run and len(run[q])]
        out[q] = to_run(fuse(lists, method, top=top, **params)) if lists else {}
    return out
