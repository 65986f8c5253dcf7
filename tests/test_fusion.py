"""Fusion: RRF, RSF (ACQO Eq. 1-2), CombSUM/CombMNZ, hand-worked numbers + ranx check."""
from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from fractions import Fraction

import pytest

from qrlib.core.errors import QrlibError
from qrlib.retrieval.fusion import (combmnz, combsum, fuse, fuse_batch, fuse_runs, normalise, rrf,
                          rsf, rsf_keys, to_run)

A = [("a", 0.9), ("b", 0.8), ("c", 0.7)]
B = [("c", 0.95), ("b", 0.5)]


def test_rrf_hand_worked():
    out = dict(rrf([A, B], k=60))
    assert out["a"] == pytest.approx(1 / 61)
    assert out["b"] == pytest.approx(1 / 62 + 1 / 62)
    assert out["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert [d for d, _ in rrf([A, B], k=60)] == ["c", "b", "a"]


def exact_rsf_order(lists, top=None):
    """Independent ACQO Eq. 1-2: P with Fractions, first occurrence of a document only."""
    inv, best = {}, {}
    for lst in lists:
        seen = []
        for d, s in lst:
            if d in seen:
                continue
            seen.append(d)
            inv[d] = inv.get(d, Fraction(0)) + Fraction(1, len(seen))
            best[d] = max(best.get(d, -math.inf), float(s))
    order = sorted(inv, key=lambda d: (1 / inv[d], -best[d], d))
    return order if top is None else order[:top]


def tie_heavy_lists(rng, m):
    """Short lists over a small pool with coarse scores: many exact P and S ties, some of
    them (ranks 2+12 vs 3+4, 2+6 vs 3+3, ...) not exact in floating point."""
    pool = [f"d{i}" for i in range(rng.randint(4, 16))]
    lists = []
    for _ in range(m):
        docs = rng.sample(pool, rng.randint(1, len(pool)))
        lists.append([(d, float(rng.randint(0, 2))) for d in docs])
    return lists, pool


def test_rsf_exact_tie_is_broken_by_score():
    # x at ranks 2 and 12, y at ranks 3 and 4: P(x) = P(y) = 12/7 exactly, S(y) > S(x),
    # so Eq. 2 puts y first (a float sum ranks x first: 1/2 + 1/12 > 1/3 + 1/4 by 1 ulp)
    fill = [(f"f{i}", 0.1) for i in range(20)]
    l1 = [fill[0], ("x", 0.49), ("y", 0.96)] + fill[1:10]
    l2 = fill[10:13] + [("y", 0.2)] + fill[13:20] + [("x", 0.1)]
    keys = rsf_keys([l1, l2])
    assert keys["x"] == (Fraction(12, 7), 0.49) and keys["y"] == (Fraction(12, 7), 0.96)
    order = [d for d, _ in rsf([l1, l2])]
    assert order.index("y") < order.index("x")
    assert order == exact_rsf_order([l1, l2])


def test_rsf_matches_exact_brute_force_on_tie_heavy_lists():
    rng = random.Random(11)
    for trial in range(600):
        lists, _ = tie_heavy_lists(rng, rng.randint(2, 4))
        top = rng.choice([None, 3, 8])
        assert [d for d, _ in rsf(lists, top=top)] == exact_rsf_order(lists, top), trial


def test_repeated_document_counts_once_at_its_first_rank():
    # "a" twice in the first list: one entry at rank 1, "b" moves up to rank 2
    lists = [[("a", 0.9), ("a", 0.8), ("b", 0.7)], [("b", 0.5)]]
    assert rsf_keys(lists)["a"] == (1, 0.9)
    assert rsf_keys(lists)["b"] == (Fraction(1, 1) / (Fraction(1, 2) + 1), 0.7)
    assert [d for d, _ in rsf(lists)] == ["b", "a"] == exact_rsf_order(lists)
    assert dict(rrf(lists, k=60))["a"] == pytest.approx(1 / 61)
    assert dict(combsum(lists, norm="none"))["a"] == pytest.approx(0.9)
    assert fuse([[("a", 2.0), ("a", 1.0), ("b", 0.5)]], "rsf") == [("a", 2.0), ("b", 0.5)]
    assert to_run([("a", 2.0), ("b", 1.0), ("a", 0.5)]) == {"a": 3.0, "b": 2.0}


def test_rsf_eq1_keys():
    keys = rsf_keys([A, B])
    # P(p) = 1 / sum_j 1/r_j ; S(p) = max_j s_j
    assert keys["a"] == pytest.approx((1.0, 0.9))
    assert keys["b"] == pytest.approx((1 / (1 / 2 + 1 / 2), 0.8))
    assert keys["c"] == pytest.approx((1 / (1 / 3 + 1 / 1), 0.95))


def test_rsf_eq2_order_and_tie_break():
    # c has the best consensus (P=0.75); a and b tie on P=1, S breaks it (0.9 > 0.8)
    assert [d for d, _ in rsf([A, B])] == ["c", "a", "b"]
    # RRF orders the same input differently (b before a): RSF resolves the rank tie by score
    assert [d for d, _ in rrf([A, B])] != [d for d, _ in rsf([A, B])]


def test_rsf_primary_key_is_rank_not_score():
    hi = [("x", 100.0), ("y", 99.0)]
    lo = [("y", 0.1), ("z", 0.05)]
    # y: P = 1/(1/2 + 1) = 2/3 beats x (P = 1) despite x's larger score
    assert [d for d, _ in rsf([hi, lo])] == ["y", "x", "z"]


def test_rsf_identical_ranks_use_max_score():
    # both docs sit at rank 1 in one list each: P ties at 1, max score decides
    assert [d for d, _ in rsf([[("p", 0.3)], [("q", 0.7)]])] == ["q", "p"]


def test_combsum_combmnz():
    a2 = [("a", 3.0), ("b", 2.0), ("c", 1.0)]
    b2 = [("c", 4.0), ("b", 2.0)]
    s = dict(combsum([a2, b2], norm="none"))
    assert s == pytest.approx({"a": 3.0, "b": 4.0, "c": 5.0})
    mm = dict(combsum([a2, b2], norm="minmax"))   # a2 -> 1, .5, 0 ; b2 -> 1, 0
    assert mm == pytest.approx({"a": 1.0, "b": 0.5, "c": 1.0})
    mnz = combmnz([a2, b2], norm="minmax")
    assert dict(mnz) == pytest.approx({"a": 1.0, "b": 1.0, "c": 2.0})
    assert [d for d, _ in mnz] == ["c", "a", "b"]   # a/b tie: a was seen first (rank 1)


def test_normalisations():
    lst = [("a", 4.0), ("b", 2.0), ("c", 2.0)]
    assert [s for _, s in normalise(lst, "max")] == pytest.approx([1, .5, .5])
    assert [s for _, s in normalise(lst, "sum")] == pytest.approx([.5, .25, .25])
    z = [s for _, s in normalise(lst, "zmuv")]
    assert sum(z) == pytest.approx(0) and z[0] > 0
    assert [s for _, s in normalise([("a", 1.0), ("b", 1.0)], "minmax")] == [1.0, 1.0]
    with pytest.raises(QrlibError):
        normalise(lst, "softmax")


def test_edge_cases():
    for m in ("rrf", "rsf", "combsum", "combmnz"):
        assert fuse([[], []], m) == []
        assert fuse([A], m) == A
        assert len(fuse([A, B], m, top=2)) == 2
    assert fuse([], "rsf") == []
    with pytest.raises(QrlibError):
        fuse([A], "borda")
    with pytest.raises(QrlibError):
        rrf("not lists")


def test_to_run_keeps_order_strictly():
    fused = rsf([[("p", 0.3)], [("q", 0.3)]])
    run = to_run(fused)
    assert sorted(run, key=run.get, reverse=True) == [d for d, _ in fused]
    assert len(set(run.values())) == len(run)


def test_batch_helpers():
    out = fuse_batch([[A, B], [B]], "rsf")
    assert [d for d, _ in out[0]] == ["c", "a", "b"] and out[1] == B
    run = fuse_runs([{"q1": A}, {"q1": B, "q2": A}], "rsf")
    assert list(run["q1"]) == ["c", "a", "b"] and list(run["q2"]) == ["a", "b", "c"]


def test_rrf_matches_ranx():
    rng = random.Random(1)
    runs = []
    for _ in range(3):
        run = {}
        for q in ("q1", "q2", "q3"):
            docs = rng.sample([f"d{i}" for i in range(40)], 15)
            run[q] = {d: float(100 - i) for i, d in enumerate(docs)}
        runs.append(run)
    # ranx's own RRF in a child process with numba's JIT off: the same ranx code run as
    # Python, so this process does not compile ranx's kernels (~50 s on a fresh clone's 2 cores)
    code = ("import json, sys, ranx; runs = json.load(sys.stdin); "
            "f = ranx.fuse(runs=[ranx.Run(r) for r in runs], method='rrf', params={'k': 60}); "
            "json.dump(f.to_dict(), sys.stdout)")
    res = subprocess.run([sys.executable, "-c", code], input=json.dumps(runs), text=True,
                         capture_output=True, env={**os.environ, "NUMBA_DISABLE_JIT": "1"},
                         timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    ref = json.loads(res.stdout)
    for q in ("q1", "q2", "q3"):
        lists = [sorted(r[q].items(), key=lambda t: -t[1]) for r in runs]
        ours = dict(rrf(lists, k=60))
        assert set(ours) == set(ref[q])
        for d, v in ours.items():
            assert v == pytest.approx(ref[q][d], rel=1e-9)
