"""Rewards: every equation against numbers worked by hand from the papers' definitions."""
from __future__ import annotations

import math
import random
from fractions import Fraction
from itertools import combinations

import ir_measures
import pytest

from qrlib.rl import rewards as R
from qrlib.methods.deepretrieval import rewards as R_dr
from qrlib.methods.acqo import rewards as R_acqo
from qrlib.methods.sage import rewards as R_sage
from qrlib.methods.rlqr import rewards as R_rlqr
from qrlib.core.errors import QrlibError
from qrlib.eval.metrics import evaluate

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


def test_ndcg_matches_ir_measures_and_evaluate_with_duplicates():
    """Ranked lists with repeated documents: ours equals qrlib.eval.metrics.evaluate (which
    keeps a document's first rank) and ir-measures on the list without its repeats."""
    rng = random.Random(3)
    qrels, lists = {}, {}
    for q in range(20):
        docs = [f"d{i}" for i in range(30)]
        qrels[f"q{q}"] = {d: rng.choice([0, 1, 2]) for d in rng.sample(docs, 6)}
        ranked = rng.sample(docs, 20)
        for _ in range(rng.randint(0, 6)):                    # repeat some documents
            ranked.insert(rng.randint(1, len(ranked)), rng.choice(ranked[:10]))
        lists[f"q{q}"] = [(d, float(len(ranked) - i)) for i, d in enumerate(ranked)]
    assert any(len({d for d, _ in v}) < len(v) for v in lists.values())
    for k in (3, 10):
        ref = evaluate(lists, qrels, [f"nDCG@{k}"], per_query=True).set_index("query_id")
        dedup = {q: {} for q in lists}
        for q, v in lists.items():
            for i, (d, _) in enumerate(v):
                dedup[q].setdefault(d, float(len(v) - i))
        irm = {m.query_id: m.value for m in ir_measures.iter_calc(
            [ir_measures.nDCG @ k], qrels, dedup)}
        for q, v in lists.items():
            ours = R.ndcg_at_k(v, qrels[q], k)
            assert ours == approx(ref.loc[q, f"nDCG@{k}"], abs=1e-9)
            assert ours == approx(irm.get(q, 0.0), abs=1e-9)


def test_repeated_documents_count_once():
    qrels = {"a": 1, "b": 1}
    assert R.ndcg_at_k([("a", 2.0), ("a", 1.0)], {"a": 1}, 10) == approx(1.0)
    assert R.recall_at([("a", 2.0), ("a", 1.0)], qrels) == approx(0.5)
    assert R.gold_ranks([("a", 3.0), ("a", 2.0), ("b", 1.0)], {"b": 1}) == [2]
    assert R.gold_ranks([("x", 3.0), ("x", 2.0), ("b", 1.0)], {"b": 1}, k=2) == [2]
    o = R.Observation(qid="q", ranked=[("a", 2.0), ("a", 1.0)], qrels=qrels)
    assert R.make_reward("deepretrieval_answer_rank").score([o])[0]["first_rank"] == 1
    assert R.make_reward("acqo_stage2", eta=1.0).score([o])[0]["reward"] == approx(2.0)


def test_same_query_is_the_one_copy_test():
    assert R.same_query("Who is X?", "  who  IS x? ")
    assert not R.same_query("Who is X, the painter?", "Who is X?")
    assert R.normalise_query(" A\tb ") == "a b"


# ------------------------------------------------------------------ DeepRetrieval Table 8
@pytest.mark.parametrize("recall,want", [
    (1.0, 5.0), (0.7, 5.0), (0.69, 4.0), (0.5, 4.0), (0.45, 3.0), (0.4, 3.0), (0.35, 1.0),
    (0.3, 1.0), (0.2, 0.5), (0.1, 0.5), (0.07, 0.1), (0.05, 0.1), (0.049, -3.5), (0.0, -3.5)])
def test_recall_tiers(recall, want):
    assert R_dr.recall_tier_reward(recall) == want


@pytest.mark.parametrize("rank,want", [
    (1, 5.0), (5, 5.0), (6, 4.0), (20, 4.0), (21, 2.0), (50, 2.0), (51, 1.0), (100, 1.0),
    (101, 0.5), (1000, 0.5), (1001, 0.1), (3000, 0.1), (3001, -3.5), (None, -3.5)])
def test_answer_rank_tiers(rank, want):
    assert R_dr.answer_rank_tier_reward(rank) == want


def test_deepretrieval_format_reward():
    assert R_dr.deepretrieval_total(0.4, True, format_bonus=0.5) == approx(0.9)
    assert R_dr.deepretrieval_total(0.4, False, format_penalty=-2.0) == -2.0
    assert R_dr.deepretrieval_total(0.4, False, format_penalty=-2.0, gate=False) == approx(-1.6)


def test_recall_reward_reads_recall_at_3k():
    # Table 1 / Fig. 1 score literature search with Recall@3K: a gold document at rank
    # 150 counts (the old default cut at 100 gave the floor, -3.5)
    ranked = [(f"x{i}", 1.0) for i in range(149)] + [("g", 0.5)]
    o = R.Observation(qid="q", ranked=ranked, qrels={"g": 1})
    rw = R.make_reward("deepretrieval_recall")
    assert rw.params["k"] == 3000 and rw.depth == 3000
    assert rw.score([o])[0]["reward"] == 5.0


def test_deepretrieval_released_presets():
    """Values of pat-jj/DeepRetrieval code/verl/utils/reward_score/*.py."""
    hit = R.Observation(qid="q", ranked=[("g", 1.0)], qrels={"g": 1})
    miss = R.Observation(qid="q", ranked=[("x", 1.0)], qrels={"g": 1})
    broken = R.Observation(qid="q", ranked=[("g", 1.0)], qrels={"g": 1}, format_ok=False)
    nd = R.make_reward("deepretrieval_ndcg", preset="released")
    assert nd.params["k"] == 1000 and nd.depth == 1000
    assert [d["reward"] for d in nd.score([hit, miss, broken])] == approx([1.1, 0.0, -2.0])
    paper = R.make_reward("deepretrieval_ndcg", preset="paper")
    assert [d["reward"] for d in paper.score([hit, miss, broken])] == approx([1.0, 0.0, -1.0])
    assert R.make_reward("deepretrieval_ndcg", preset="released", k=50).params["k"] == 50
    assert R_dr.released_ndcg_k("scifact") == 50 and R_dr.released_ndcg_k("hotpotqa") == 3000
    assert R_dr.released_ndcg_k("fever") == 1000 and R_dr.released_ndcg_k("nfcorpus", dense=True) == 100
    rec = R.make_reward("deepretrieval_recall", preset="released")
    assert [d["reward"] for d in rec.score([hit, miss, broken])] == approx([6.0, -2.5, -4.0])
    rank = R.make_reward("deepretrieval_answer_rank", preset="released")
    assert [d["reward"] for d in rank.score([hit, miss, broken])] == approx([6.0, -2.5, -4.0])
    assert R_dr.deepretrieval_total(0.0, True, format_bonus=0.1, bonus_mode="if_positive") == 0.0
    with pytest.raises(QrlibError, match="no preset 'released'"):
        R.make_reward("sage_crs", preset="released")
    with pytest.raises(QrlibError, match="bonus_mode"):
        R_dr.deepretrieval_total(1.0, True, bonus_mode="sometimes")


def test_sql_reward_presets_and_comparisons():
    def sql_obs(pred, gold, gold_sql=None, ok=True):
        return R.Observation(qid="s", ranked=[], qrels={}, format_ok=ok,
                             extras={"pred_rows": pred, "gold_rows": gold, "gold_sql": gold_sql})
    dup = sql_obs([(1,), (1,), (2,)], [(1,), (2,)])
    order = sql_obs([(2,), (1,)], [(1,), (2,)], "SELECT a FROM t ORDER BY a")
    wrong = sql_obs([(3,)], [(1,)])
    failed = sql_obs(None, [(1,)])
    paper = R.make_reward("deepretrieval_sql")
    assert [d["reward"] for d in paper.score([dup, order, wrong, failed])] == [0, 0, 0, 0]
    released = R.make_reward("deepretrieval_sql", preset="released")   # spider.py: sets
    assert [d["reward"] for d in released.score([dup, order, wrong, failed])] == approx(
        [1.1, 1.1, 0.0, 0.0])
    bird = R.make_reward("deepretrieval_sql", preset="released-bird")  # bird.py: 1 or 0.3
    assert [d["reward"] for d in bird.score([dup, wrong, failed])] == approx([1.1, 0.4, 0.0])
    assert R.make_reward("deepretrieval_sql", exec_bonus=0.3).score([
        sql_obs([(1,)], [(1,)])])[0]["reward"] == approx(1.3)            # App. F: + 0.3
    assert released.score([sql_obs([(1,)], [(1,)], ok=False)])[0]["reward"] == -2.0


def test_sql_execution_match():
    assert R_dr.sql_execution_match([(1,), (2,)], [(2,), (1,)])
    assert not R_dr.sql_execution_match([(1,), (2,)], [(2,), (1,)], ordered=True)
    assert not R_dr.sql_execution_match([(1,)], [(1,), (1,)])         # multiset, not set
    assert not R_dr.sql_execution_match(None, [(1,)])
    assert R_dr.sql_execution_match([], [])
    assert R_dr.sql_execution_match([("a", None, 1.5)], [["a", None, 1.5]])
    # Spider: order counts only when the gold SQL sorts; DeepRetrieval code: sets
    assert not R_dr.sql_execution_match([(2,), (1,)], [(1,), (2,)], mode="spider",
                                     gold_sql="SELECT a FROM t ORDER BY a")
    assert R_dr.sql_execution_match([(2,), (1,)], [(1,), (2,)], mode="spider",
                                 gold_sql="SELECT a FROM t WHERE b = 'order by'")
    assert R_dr.sql_execution_match([(1,), (1,)], [(1,)], mode="set")


# ------------------------------------------------------------------ ACQO
@pytest.mark.parametrize("r,want", [
    (1, 2.0), (4, 2 - 3 / 9), (5.5, 1.5), (10, 1.0), (55, 0.5), (100, 0.0), (101, 0.0),
    (1000, 0.0)])
def test_phi_eq3(r, want):
    assert R_acqo.phi(r) == approx(want)


def test_phi_prime_eq10():
    assert R_acqo.phi_prime(1, lam=1.0, k_star=3) == approx(2 + 1 / math.log2(2))
    assert R_acqo.phi_prime(3, lam=1.0, k_star=3) == approx(2 - 2 / 9 + 1 / math.log2(4))
    assert R_acqo.phi_prime(4, lam=1.0, k_star=3) == approx(R_acqo.phi(4))
    assert R_acqo.phi_prime(1, lam=0.5, k_star=0) == approx(2.0)       # k*=0: HotpotQA, no bonus
    assert R_acqo.phi_prime(2, lam=0.5, k_star=3) == approx(2 - 1 / 9 + 0.5 / math.log2(3))


def test_acqo_score_eq4_eq5():
    # s(r_i) = eta^i Phi(r_i), i = 1..n over ascending ranks
    assert R_acqo.acqo_score([1, 3], eta=0.6) == approx(0.6 * 2 + 0.36 * (2 - 2 / 9))
    assert R_acqo.acqo_score([3, 1], eta=0.6) == approx(0.6 * 2 + 0.36 * (2 - 2 / 9))
    assert R_acqo.acqo_score([1, 3], eta=1.0) == approx(2 + 2 - 2 / 9)
    assert R_acqo.acqo_score([], eta=0.6) == 0.0                          # no gold retrieved
    assert R_acqo.acqo_score([150], eta=0.6) == 0.0                       # beyond rank 100
    assert R_acqo.acqo_score([1, 3], False, delta=-0.7) == -0.7           # format gate
    assert R_acqo.acqo_score([1], False, delta=-0.5, gate=False) == approx(0.6 * 2 - 0.5)
    assert R_acqo.acqo_score([1, 3], eta=0.6, lam=1.0, k_star=3) == approx(
        0.6 * 3 + 0.36 * (2 - 2 / 9 + 0.5))
    with pytest.raises(QrlibError):
        R_acqo.acqo_score([1], delta=0.0)


def test_acqo_eq4_first_index_reading():
    # i from 1 (default, the paper's i = 1..n) vs from 0 (best gold undecayed)
    assert R_acqo.acqo_score([1], eta=0.6) == approx(1.2)
    assert R_acqo.acqo_score([1], eta=0.6, first_index=0) == approx(2.0)
    assert R_acqo.acqo_score([1, 3], eta=0.6, first_index=0) == approx(2 + 0.6 * (2 - 2 / 9))
    assert R_acqo.acqo_score([1, 3], eta=1.0, first_index=0) == R_acqo.acqo_score([1, 3], eta=1.0)
    with pytest.raises(QrlibError):
        R_acqo.acqo_score([1], first_index=2)


def test_convsearch_released_rank_reward():
    """BeastyZ/ConvSearch-R1 rewrite_r1.py: Phi of the best gold rank only; -0.1 for a
    broken format; nothing in the top 100 gives 0."""
    rw = R.make_reward("convsearch_rirs", preset="released")
    two = R.Observation(qid="q", ranked=[("x", 3.0), ("g1", 2.0), ("g2", 1.0)],
                        qrels={"g1": 1, "g2": 1})
    far = R.Observation(qid="q", ranked=[(f"x{i}", 1.0) for i in range(100)] + [("g1", 0.1)],
                        qrels={"g1": 1})
    bad = R.Observation(qid="q", ranked=[("g1", 1.0)], qrels={"g1": 1}, format_ok=False)
    got = [d["reward"] for d in rw.score([two, far, bad])]
    assert got == approx([2 - 1 / 9, 0.0, -0.1])
    assert rw.depth == 100


def test_acqo_stage1_is_max_over_subsets_eq6_and_stage2_eq9():
    qrels = {"g": 1}
    A = [("g", 0.9)]
    B = [("z", 0.95)]
    # {A}: g at rank 1 -> 0.6 * 2 = 1.2 ; {A,B}: RSF ties P=1, z has the larger score,
    # so g drops to rank 2 -> 0.6 * (2 - 1/9)
    assert R_acqo.acqo_stage1([A, B], qrels, eta=0.6) == approx(1.2)
    assert R_acqo.acqo_stage2([A, B], qrels, eta=0.6, lam=1.0, k_star=0) == approx(0.6 * (2 - 1 / 9))
    assert R_acqo.acqo_stage2([A, B], qrels, eta=0.6, lam=1.0, k_star=3) == approx(
        0.6 * (2 - 1 / 9 + 1 / math.log2(3)))
    assert R_acqo.acqo_stage1([B], qrels) == 0.0
    assert R_acqo.acqo_stage1([A, B], qrels, format_ok=False, delta=-1.0) == -1.0
    assert R_acqo.acqo_stage1([], qrels) == 0.0
    # top-k cut: the gold doc at rank 3 is outside R_2
    C = [("x", 3.0), ("y", 2.0), ("g", 1.0)]
    assert R_acqo.acqo_stage2([C], qrels, k=2) == 0.0
    assert R_acqo.acqo_stage2([C], qrels, k=3) == approx(0.6 * (2 - 2 / 9))


def test_acqo_tau_and_curriculum_eq7_eq8():
    assert R_acqo.acqo_tau([1.0, 2.0, 3.0]) == approx(2.0)
    kept = R_acqo.acqo_curriculum({"q1": 1.5, "q2": 1.7, "q3": 5 / 3})
    assert kept == ["q1", "q3"]
    with pytest.raises(QrlibError):
        R_acqo.acqo_tau([])


# ------------------------------------------------------------------ SAGE
def test_scs_eq1():
    # means: s1 = 0.9, s2 = 0.3 -> ranks 1, 2
    assert R_sage.sage_scs([0.9, 0.1, 0.5], [1, 2, 2]) == approx([0.9, 0.05, 0.25])
    # tie between s1 and s2 means (0.6): both rank 1; s3 rank 3
    assert R_sage.sage_scs([0.8, 0.4, 0.6, 0.2], [1, 1, 2, 3]) == approx([0.8, 0.4, 0.6, 0.2 / 3])
    assert R_sage.sage_scs([0.3, 0.3], [4, 4]) == approx([0.3, 0.3])       # all equal
    assert R_sage.sage_scs([0.6, 0.2], [1, None]) == approx([0.6, 0.1])   # no strategy = own group


def test_crs_eq2():
    assert R_sage.sage_crs([0.1, 0.5, 0.9, 0.3]) == approx([-0.3, 0.1, 0.5, -0.1])   # median 0.4
    assert R_sage.sage_crs([0.1, 0.5, 0.9, 0.3], "mean") == approx([-0.35, 0.05, 0.45, -0.15])
    assert R_sage.sage_crs([0.2, 0.2, 0.2]) == approx([0, 0, 0])          # all rollouts equal
    assert R_sage.sage_crs([1.0, 2.0], 0.5) == approx([0.5, 1.5])
    assert R_sage.sage_crs([]) == []
    with pytest.raises(QrlibError):
        R_sage.sage_crs([1.0], "mode")


def test_copy_penalty_eq3():
    assert R_sage.copy_penalty(0.8, "Who is X?", " who is  x? ", p=0.05) == approx(0.75)
    assert R_sage.copy_penalty(0.8, "Who is X?", "who is x?", p=0.05, normalise=False) == 0.8
    assert R_sage.copy_penalty(0.8, "Who is X, the painter?", "Who is X?", p=0.05) == 0.8


# ------------------------------------------------------------------ RL-QR
def test_rlqr_normalisation_readings():
    assert R_rlqr.rlqr_group_penalty([0, 10, 20, 30], theta=0.1, norm="max") == approx(
        [0, -1 / 3, -2 / 3, -1.0])
    assert R_rlqr.rlqr_group_penalty([1, 30], theta=0.1, norm="max") == approx([-0.1, -1.0])
    assert R_rlqr.rlqr_group_penalty([1, 30], theta=0.1) == approx([-0.1, -1.0])
    with pytest.raises(QrlibError):
        R_rlqr.rlqr_group_penalty([1], norm="zscore")


def test_rlqr_group_penalty_and_eq6():
    assert R_rlqr.rlqr_group_penalty([0, 10, 20, 30], theta=0.1) == approx([0, -0.1, -0.55, -1.0])
    assert R_rlqr.rlqr_group_penalty([5, 5, 0]) == approx([-1, -1, 0])
    assert R_rlqr.rlqr_group_penalty([0, 0]) == [0.0, 0.0]
    assert R_rlqr.rlqr_rewards([1, 0.5, 0, 0], [0, 10, 20, 30], lambda1=1, lambda2=0.5,
                          theta=0.1) == approx([1, 0.45, -0.275, -0.5])
    with pytest.raises(QrlibError):
        R_rlqr.rlqr_group_penalty([1], theta=2)


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


def test_registered_rewards_declare_depth_and_columns():
    spec = R.REWARDS
    assert R.make_reward("deepretrieval_answer_rank").depth == 3000
    assert R.make_reward("acqo_stage1", k=50).depth == 50
    assert R.make_reward("ndcg", k=7).depth == 7
    assert R.make_reward("deepretrieval_sql").depth is None
    assert spec["deepretrieval_sql"].missing_columns({"db_path"}) == ["gold_sql or gold_rows"]
    assert spec["deepretrieval_sql"].missing_columns({"db_path", "gold_rows"}) == []
    assert spec["deepretrieval_sql"].prepare is not None
    assert all("paper" in s.presets or "released" in s.presets for s in spec.values())


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


def exact_gold_ranks(lists, qrels, k):
    """Independent ACQO Eq. 1-2 (Fractions, first occurrences): gold ranks in the top k."""
    inv, best = {}, {}
    for lst in lists:
        seen = []
        for d, s in lst:
            if d in seen:
                continue
            seen.append(d)
            inv[d] = inv.get(d, Fraction(0)) + Fraction(1, len(seen))
            best[d] = max(best.get(d, -math.inf), float(s))
    order = sorted(inv, key=lambda d: (1 / inv[d], -best[d], d))[:k]
    return [i for i, d in enumerate(order, start=1) if qrels.get(d, 0) >= 1]


def test_stage1_fast_rsf_path_matches_exact_brute_force():
    """The array path of acqo_stage1 (and stage2's fused list) against an independent
    exact computation, on short tie-heavy lists where P ties exactly (2+12 vs 3+4, ...)
    and S ties often."""
    fill = [(f"f{i}", 0.1) for i in range(20)]      # P(x) = P(y) = 12/7, S(y) > S(x)
    l1 = [fill[0], ("x", 0.49), ("y", 0.96)] + fill[1:10]
    l2 = fill[10:13] + [("y", 0.2)] + fill[13:20] + [("x", 0.1)]
    assert R_acqo._RSFTable([l1, l2], {"x": 1}).gold_ranks((0, 1), 100) == [4]
    assert exact_gold_ranks([l1, l2], {"x": 1}, 100) == [4]
    rng = random.Random(7)
    for trial in range(400):
        m = rng.randint(2, 4)
        pool = [f"d{i}" for i in range(rng.randint(4, 16))]
        lists = []
        for _ in range(m):
            docs = rng.sample(pool, rng.randint(1, len(pool)))
            if rng.random() < 0.2:
                docs.insert(rng.randint(1, len(docs)), rng.choice(docs))   # a repeat
            lists.append([(d, float(rng.randint(0, 2))) for d in docs])
        qrels = {d: 1 for d in rng.sample(pool, rng.randint(0, 4))}
        k = rng.choice([3, 6, 100])
        subsets = [idx for size in range(1, m + 1) for idx in combinations(range(m), size)]
        table = R_acqo._RSFTable(lists, qrels)
        for idx in subsets:
            want = exact_gold_ranks([lists[i] for i in idx], qrels, k)
            assert table.gold_ranks(idx, k) == want, (trial, idx)
        slow = max(R_acqo.acqo_score(exact_gold_ranks([lists[i] for i in idx], qrels, k), eta=0.6)
                   for idx in subsets)
        assert R_acqo.acqo_stage1(lists, qrels, k=k, eta=0.6) == approx(slow, abs=1e-12), trial
        full = R_acqo.acqo_score(exact_gold_ranks(lists, qrels, k), eta=0.6, lam=1.0, k_star=3)
        assert R_acqo.acqo_stage2(lists, qrels, k=k, eta=0.6, lam=1.0, k_star=3) == approx(
            full, abs=1e-12), trial
