"""Agreement between two ranked runs of the same queries (engine and tokenizer checks).

``top_k_overlap`` is :math:`|\\mathrm{top}_k^a \\cap \\mathrm{top}_k^b| / \\max(|\\mathrm{top}_k^a|,
|\\mathrm{top}_k^b|)` averaged over the queries where either list is non-empty (notebooks 02
and 11 compare bm25s with rank_bm25 and with Lucene this way); ``same_top1`` is the share of
those queries whose first document is the same. A run maps query id -> [(doc id, score)...]
in rank order.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from qrlib.core.errors import QrlibError

Run = Mapping[str, Sequence[tuple[str, float]]]


def _pairs(run_a: Run, run_b: Run, k: int):
    if k < 1:
        raise QrlibError(f"top_k_overlap: k must be >= 1, got {k}")
    for q in run_a:
        a = [d for d, _ in run_a[q][:k]]
        b = [d for d, _ in run_b.get(q, [])[:k]]
        if a or b:
            yield a, b


def top_k_overlap(run_a: Run, run_b: Run, k: int = 10) -> float:
    """Mean share of documents two runs have in common in their top ``k`` (NaN for no query)."""
    vals = [len(set(a) & set(b)) / max(len(a), len(b)) for a, b in _pairs(run_a, run_b, k)]
    return sum(vals) / len(vals) if vals else float("nan")


def same_top1(run_a: Run, run_b: Run) -> float:
    """Share of queries whose two runs rank the same document first (NaN for no query)."""
    vals = [bool(a and b and a[0] == b[0]) for a, b in _pairs(run_a, run_b, 1)]
    return sum(vals) / len(vals) if vals else float("nan")
