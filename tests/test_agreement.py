"""Run agreement (qrlib.eval.agreement) and DeepRetrieval's released search settings."""
from __future__ import annotations

import math

import pytest

from qrlib.core.errors import QrlibError
from qrlib.eval.agreement import same_top1, top_k_overlap
from qrlib.methods.deepretrieval.released import released_bm25


def _run(*lists):
    return {f"q{i}": [(d, 1.0 / (r + 1)) for r, d in enumerate(docs)] for i, docs in enumerate(lists)}


def test_overlap_counts_shared_documents_in_the_top_k():
    a = _run(["d1", "d2", "d3"], ["d4", "d5"], [])
    b = _run(["d3", "d2", "d9"], ["d6", "d7"], [])
    assert top_k_overlap(a, b, 3) == pytest.approx((2 / 3 + 0) / 2)  # the empty query is skipped
    assert top_k_overlap(a, b, 1) == 0.0
    assert top_k_overlap(a, a, 10) == 1.0
    assert same_top1(a, a) == 1.0 and same_top1(a, b) == 0.0
    assert math.isnan(top_k_overlap({}, b, 10))
    with pytest.raises(QrlibError, match="k must be >= 1"):
        top_k_overlap(a, b, 0)


def test_released_settings_map_subsets_and_reject_unknown_tasks():
    assert released_bm25("scifact") == {"k1": 1.2, "b": 0.75, "protocol": "rows"}
    assert released_bm25("hotpotqa-large")["protocol"] == "grouped"
    with pytest.raises(QrlibError, match="no BM25 script for 'fiqa'"):
        released_bm25("fiqa")
