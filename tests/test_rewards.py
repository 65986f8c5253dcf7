"""Rewards: every equation against numbers worked by hand from the papers' definitions."""
from __future__ import annotations

import math
import random

import pytest

from qrlib import rewards as R
from qrlib.errors import QrlibError

approx = pytest.approx


# ------------------------------------------------------------------ ranking basics
def test_gold_ranks_recall_ndcg():
    ranked = [("a", 3.0), ("b", 2.0), ("c", 1.0)]
    qrels = {"b": 1, "c": 2, "z": 1}
    assert R.gold_ranks(ranked, qrels) == [2, 3]
    assert R.gold_ranks(ranked, qrels, k=2) == [2]
    assert R.recall_at(ranked, qrels) == approx(2 / 3)
    # DCG = 1/log2(3) + 2/log2(4); IDCG = 2/log2(2) + 1/log2(3) + 1/log2(4)
    dcg = 1 / math.log2(3) + 2 / 2
    idcg = 2 + 1 / math.log2(3) + 1 / 2
    assert R.ndcg_at_k(ranked, qrels, 10) == approx(dcg / idcg)
    assert R.ndcg_at_k([], qrels, 10) == 0.0
    assert R.ndcg_at_k(ranked, {}, 10) == 0.0
    with pytest.raises(QrlibError):
        R.ndcg_at_k(ranked, qrels, 0)


def test_ndcg_matches_ir_measures():
    ir_measures = pytest.importorskip("ir_measures")
    rng = random.Random(3)
    qrels, run = {}, {}
    for q in range(20):
        docs = [f"d{i}" for i in range(30)]
        qrels[f"q{q}"] = {d: rng.choice([0, 1, 2]) for d in rng.sample(docs, 6)}
        ranked = rng.sample(docs, 20)
        run[f"q{q}"] = {d: float(20 - i) for i, d in enumerate(ranked)}
    for k in (3, 10):
        ref = {m.query_id: m.value for m in ir_measures.iter_calc(
            [ir_measures.nDCG @ k], qrels, run)}
        for q, r in run.items():
            ours = R.ndcg_at_k(list(r.items()), qrels[q], k)
            assert ours == approx(ref.get(q, 0.0), abs=1e-9)


# ------------------------------------------------------------------ DeepRetrieval Table 8
@pytest.mark.parametrize("recall,want", [
    (1.0, 5.0), (0.7, 5.0), (0.69, 4.0), (0.5, 4.0), (0.45, 3.0), (0.4, 3.0), (0.35, 1.0),
    (0.3, 1.0), (0.2, 0.5), (0.1, 0.5), (0.07, 0.1), (0.05, 0.1), (0.049, -3.5), (0.0, -3.5)])
def test_recall_tiers(recall, want):
    assert R.recall_tier_reward(recall) == want


@pytest.mark.parametrize("rank,want", [
    (1, 5.0), (5, 5.0), (6, 4.0), (20, 4.0), (21, 2.0), (50, 2.0), (51, 1.0), (100, 1.0),
    (101, 0.5), (1000, 0.5), (1001, 0.1), (3000, 0.1), (3001, -3.5), (None, -3.5)])
def test_answer_rank_tiers(rank, want):
    assert R.answer_rank_tier_reward(rank) == want


def test_deepretrieval_format_reward():
    assert R.deepretrieval_total(0.4, True, format_bonus=0.5) == approx(0.9)
    assert R.deepretrieval_total(0.4, False, format_penalty=-2.0) == -2.0
    assert R.deepretrieval_total(0.4, False, format_penalty=-2.0, gate=False) == approx(-1.6)


def test_sql_execution_match():
    assert R.sql_execution_match([(1,), (2,)], [(2,), (1,)])
    assert not R.sql_execution_match([(1,), (2,)], [(2,), (1,)], ordered=True)
    assert not R.sql_execution_match([(1,)], [(1,), (1,)])         # multiset, not set
    assert not R.sql_execution_match(None, [(1,)])
    assert R.sql_execution_match([], [])
    assert R.sql_execution_match([("a", None, 1.5)], [["a", None, 1.5]])


# ------------------------------------------------------------------ ACQO
@pytest.mark.parametrize("r,want", [
    (1, 2.0), (4, 2 - 3 / 9), (5.5, 1.5), (10, 1.0), (55, 0.5), (100, 0.0), (101, 0.0),
    (1000, 0.0)])
def test_phi_eq3(r, want):
    assert R.phi(r) == approx(want)


def test_phi_prime_eq10():
    assert R.phi_prime(1, lam=1.0, k_star=3) == approx(2 + 1 / math.log2(2))
    assert R.phi_prime(3, lam=1.0, k_star=3) == approx(2 - 2 / 9 + 1 / math.log2(4))
    assert R.phi_prime(4, lam=1.0, k_star=3) == approx(R.phi(4))
    assert R.phi_prime(1, lam=0.5, k_star=0) == approx(2.0)       # k*=0: HotpotQA, no bonus
    assert R.phi_prime(2, lam=0.5, k_star=3) == approx(2 - 1 / 9 + 0.5 / math.log2(3))


def test_acqo_score_eq4_eq5():
    # s(r_i) = eta^i Phi(r_i), i = 1..n over ascending ranks
    assert R.acqo_score([1, 3], eta=0.6) == approx(0.6 * 2 + 0.36 * (2 - 2 / 9))
    assert R.acqo_score([3, 1], eta=0.6) == approx(0.6 * 2 + 0.36 * (2 - 2 / 9))
    assert R.acqo_score([1, 3], eta=1.0) == approx(2 + 2 - 2 / 9)
    assert R.acqo_score([], eta=0.6) == 0.0                          # no gold retrieved
    assert R.acqo_score([150], eta=0.6) == 0.0                       # beyond rank 100
    assert R.acqo_score([1, 3], False, delta=-0.7) == -0.7           # format gate
    assert R.acqo_score([1], False, delta=-0.5, gate=False) == approx(0.6 * 2 - 0.5)
    assert R.acqo_score([1, 3], eta=0.6, lam=1.0, k_star=3) == approx(
        0.6 * 3 + 0.36 * (2 - 2 / 9 + 0.5))
    with pytest.raises(QrlibError):
        R.acqo_score([1], delta=0.0)


def test_acqo_stage1_is_max_over_subsets_eq6_and_stage2_eq9():
    qrels = {"g": 1}
    A = [("g", 0.9)]
    B = [("z", 0.95)]
    # {A}: g at rank 1 -> 0.6 * 2 = 1.2 ; {A,B}: RSF ties P=1, z has the larger score,
    # so g drops to rank 2 -> 0.6 * (2 - 1/9)
    assert R.acqo_stage1([A, B], qrels, eta=0.6) == approx(1.2)
    assert R.acqo_stage2([A, B], qrels, eta=0.6, lam=1.0, k_star=0) == approx(0.6 * (2 - 1 / 9))
    assert R.acqo_stage2([A, B], qrels, eta=0.6, lam=1.0, k_star=3) == approx(
        0.6 * (2 - 1 / 9 + 1 / math.log2(3)))
    assert R.acqo_stage1([B], qrels) == 0.0
    assert R.acqo_stage1([A, B], qrels, format_ok=False, delta=-1.0) == -1.0
    assert R.acqo_stage1([], qrels) == 0.0
    # top-k cut: the gold doc at rank 3 is outside R_2
    C = [("x", 3.0), ("y", 2.0), ("g", 1.0)]
    assert R.acqo_stage2([C], qrels, k=2) == 0.0
    assert R.acqo_stage2([C], qrels, k=3) == approx(0.6 * (2 - 2 / 9))


def test_acqo_tau_and_curriculum_eq7_eq8():
    assert R.acqo_tau([1.0, 2.0, 3.0]) == approx(2.0)
    kept = R.acqo_curriculum({"q1": 1.5, "q2": 1.7, "q3": 5 / 3})
    assert kept == ["q1", "q3"]
    with pytest.raises(QrlibError):
        R.acqo_tau([])


# ------------------------------------------------------------------ SAGE
def test_scs_eq1():
    # means: s1 = 0.9, s2 = 0.3 -> ranks 1, 2
    assert R.sage_scs([0.9, 0.1, 0.5], [1, 2, 2]) == approx([0.9, 0.05, 0.25])
    # tie between s1 and s2 means (0.6): both rank 1; s3 rank 3
    assert R.sage_scs([0.8, 0.4, 0.6, 0.2], [1, 1, 2, 3]) == approx([0.8, 0.4, 0.6, 0.2 / 3])
    assert R.sage_scs([0.3, 0.3], [4, 4]) == approx([0.3, 0.3])       # all equal
    assert R.sage_scs([0.6, 0.2], [1, None]) == approx([0.6, 0.1])   # no strategy = own group


def test_crs_eq2():
    assert R.sage_crs([0.1, 0.5, 0.9, 0.3]) == approx([-0.3, 0.1, 0.5, -0.1])   # median 0.4
    assert R.sage_crs([0.1, 0.5, 0.9, 0.3], "mean") == approx([-0.35, 0.05, 0.45, -0.15])
    assert R.sage_crs([0.2, 0.2, 0.2]) == approx([0, 0, 0])          # all rollouts equal
    assert R.sage_crs([1.0, 2.0], 0.5) == approx([0.5, 1.5])
    assert R.sage_crs([]) == []
    with pytest.raises(QrlibError):
        R.sage_crs([1.0], "mode")


def test_copy_penalty_eq3():
    assert R.copy_penalty(0.8, "Who is X?", " who is  x? ", p=0.05) == approx(0.75)
    assert R.copy_penalty(0.8, "Who is X?", "who is x?", p=0.05, normalise=False) == 0.8
    assert R.copy_penalty(0.8, "Who is X, the painter?", "Who is X?", p=0.05) == 0.8


# ------------------------------------------------------------------ RL-QR
def test_rlqr_group_penalty_and_eq6():
    assert R.rlqr_group_penalty([0, 10, 20, 30], theta=0.1) == approx([0, -0.1, -0.55, -1.0])
    assert R.rlqr_group_penalty([5, 5, 0]) == approx([-1, -1, 0])
    assert R.rlqr_group_penalty([0, 0]) == [0.0, 0.0]
    assert R.rlqr_rewards([1, 0.5, 0, 0], [0, 10, 20, 30], lambda1=1, lambda2=0.5,
                          theta=0.1) == approx([1, 0.45, -0.275, -0.5])
    with pytest.raises(QrlibError):
        R.rlqr_group_penalty([1], theta=2)


# ------------------------------------------------------------------ registry
def obs(ranked, qrels, **kw):
    return R.Observation(qid="q", ranked=ranked, qrels=qrels, **kw)


def test_registry_lists_and_binds():
    names = {r["name"] for r in R.list_rewards()}
    assert {"ndcg", "deepretrieval_recall", "deepretrieval_answer_rank", "deepretrieval_ndcg",
            "deepretrieval_sql", "acqo_stage1", "acqo_stage2", "sage_direct", "sage_scs",
            "sage_crs", "rlqr"} <= names
    rw = R.make_reward("acqo_stage2", eta=1.0, k_star=3)
    assert rw.params["eta"] == 1.0 and rw.params["lam"] == 1.0
    with pytest.raises(QrlibError):
        R.make_reward("acqo_stage2", etta=1.0)
    with pytest.raises(QrlibError):
        R.make_reward("nope")


def test_registered_rewards_on_observations():
    qrels = {"g": 1}
    o_ok = obs([("x", 2.0), ("g", 1.0)], qrels)
    o_bad = obs([("g", 1.0)], qrels, format_ok=False)
    r = R.make_reward("deepretrieval_ndcg", k=10, format_penalty=-1.0).score([o_ok, o_bad])
    assert r[0]["reward"] == approx(1 / math.log2(3)) and r[1]["reward"] == -1.0
    r = R.make_reward("deepretrieval_answer_rank").score([o_ok])
    assert r[0]["reward"] == 5.0 and r[0]["first_rank"] == 2
    r = R.make_reward("deepretrieval_recall", k=1).score([o_ok])
    assert r[0]["reward"] == -3.5                                     # recall@1 = 0
    r = R.make_reward("acqo_stage1", eta=0.6).score([o_ok])
    assert r[0]["reward"] == approx(0.6 * (2 - 1 / 9))


def test_group_rewards_on_observations():
    qrels = {"g": 1}
    g = [obs([("g", 1.0)], qrels, strategy=1, queries=["new"], original_query="orig"),
         obs([("x", 1.0)], qrels, strategy=2, queries=["orig"], original_query="orig"),
         obs([("x", 1.0), ("g", 0.5)], qrels, strategy=2, queries=["other"],
             original_query="orig")]
    nd = [1.0, 0.0, 1 / math.log2(3)]
    scs = R.make_reward("sage_scs", p=0.05).score(g)
    # means: s1 = 1.0 (rank 1), s2 = 0.315 (rank 2); rollout 2 copies the input
    assert [d["reward"] for d in scs] == approx([1.0, 0.0 / 2 - 0.05, nd[2] / 2])
    crs = R.make_reward("sage_crs", p=0.0).score(g)
    assert [d["reward"] for d in crs] == approx([1 - nd[2], -nd[2], 0.0])
    flat = [obs([("x", 1.0)], qrels, strategy=1) for _ in range(4)]
    assert R.reward_variance_zero([d["reward"] for d in R.make_reward("sage_crs").score(flat)])
    rl = R.make_reward("rlqr", k=3, lambda1=1.0, lambda2=0.5, theta=0.1).score([
        obs([("g", 1.0)], qrels, tagged=True, n_outside=0),
        obs([("g", 1.0)], qrels, tagged=True, n_outside=40),
        obs([("g", 1.0)], qrels, tagged=False, n_chars=20)])
    # raw penalties 0, 40, 20 -> non-zero ones mapped into [0.1, 1]: 40 -> 1, 20 -> 0.1
    assert [d["reward"] for d in rl] == approx([1.0, 1 - 0.5, 1 - 0.05])


def test_stage1_fast_rsf_path_matches_fused_lists():
    """The array path of acqo_stage1 must give the ranks of fusion.rsf exactly (ties too)."""
    from itertools import combinations

    from qrlib import fusion
    rng = random.Random(7)
    for trial in range(200):
        m = rng.randint(2, 3)
        pool = [f"d{i}" for i in range(rng.randint(5, 40))]
        lists = []
        for _ in range(m):
            docs = rng.sample(pool, rng.randint(1, len(pool)))
            # coarse scores to force P and S ties
            lists.append([(d, float(rng.randint(0, 3))) for d in docs])
            lists[-1].sort(key=lambda t: -t[1])
        qrels = {d: 1 for d in rng.sample(pool, rng.randint(0, 4))}
        k = rng.choice([3, 10, 100])
        slow = max(R.acqo_score(R.gold_ranks(fusion.rsf([lists[i] for i in idx], top=k), qrels),
                                eta=0.6)
                   for size in range(1, m + 1) for idx in combinations(range(m), size))
        assert R.acqo_stage1(lists, qrels, k=k, eta=0.6) == approx(slow, abs=1e-12), trial
        full = R.acqo_score(R.gold_ranks(fusion.rsf(lists, top=k), qrels), eta=0.6, lam=1.0,
                            k_star=3)
        assert R.acqo_stage2(lists, qrels, k=k, eta=0.6, lam=1.0, k_star=3) == approx(
            full, abs=1e-12), trial
