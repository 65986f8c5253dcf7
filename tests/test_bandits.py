"""Tests for qrlib.methods.bandits.bandits: Table 1 rewards, Algorithms 1-2 updates, Eq. 1, hierarchy,
and the simulation's invariants on tiny hand-made arms."""
from __future__ import annotations

import math
import sys

import numpy as np
import pytest

from qrlib.methods.bandits import bandits as B
from qrlib.core.errors import QrlibError


# ---------------------------------------------------------------- pure rewards (Table 1)
def test_ucb_bonus_and_reward():
    # n = 1: sqrt(log2(2)/1) = 1; n = 3: sqrt(log2(4)/3) = sqrt(2/3)
    assert B.ucb_bonus(np.array([1.0]), 0.5)[0] == pytest.approx(0.5)
    assert B.reward_ucb(np.array([1.0]), np.array([3]), 0.3)[0] == pytest.approx(
        1 + 0.3 * math.sqrt(2 / 3))


def test_topk_window_hand_worked():
    rel = np.array([[1, 0, 1, 1], [0, 0, 0, 1]], dtype=float)
    w = B.topk_window(rel, 3)
    # arm 0: (1+0+1)/3, (0+1+1)/3, (1+1+0)/3, (1+0+0)/3 ; arm 1: 0, 1/3, 1/3, 1/3
    assert np.allclose(w, [[2 / 3, 2 / 3, 2 / 3, 1 / 3], [0, 1 / 3, 1 / 3, 1 / 3]])


def test_rank_aware_reward():
    # Relevance / log2(n + 2) with the 1-based rank n: n=1 -> 1/log2(3), n=2 -> 1/2
    r = B.reward_rank_aware(np.array([1.0, 1.0, 0.0]), np.array([1, 2, 1]))
    assert np.allclose(r, [1 / math.log2(3), 0.5, 0.0])


def test_diversity_rewards():
    # novelty = 1 - (cos + 1)/2: cos 0.5 -> 0.25, cos -1 (nothing observed) -> 1
    assert np.allclose(B.novelty(np.array([0.5, -1.0, 1.0])), [0.25, 1.0, 0.0])
    assert np.allclose(B.reward_diversity(np.array([1.0, 0.0]), np.array([0.5, 0.5])),
                       [0.25, 0.0])
    # concave: 1 below 0, exp(-5 * 0.9**15) at 0.9, exp(-5) at 1
    r = B.reward_diversity_concave(np.array([1.0, 1.0, 1.0]), np.array([-0.2, 0.9, 1.0]))
    assert np.allclose(r, [1.0, math.exp(-5 * 0.9 ** 15), math.exp(-5)])


def test_eq1_combined_reward():
    # window mean 2/3, cos 0 -> novelty 1/2, rank 1 with c = 0.1 -> + 0.1
    r = B.reward_topk_ucb_diversity(np.array([2 / 3]), np.array([0.0]), np.array([1]), 0.1)
    assert r[0] == pytest.approx(1 / 3 + 0.1)


# ---------------------------------------------------------------- updates (Alg. 1-2, Sec 3.4)
def test_beta_update_algorithm1():
    a, b = B.beta_update(np.array([1.0, 1.0, 2.0]), np.array([1.0, 1.0, 3.0]),
                         np.array([1.0, 0.0, 0.25]))
    assert np.allclose(a, [2.0, 1.0, 2.25]) and np.allclose(b, [1.0, 2.0, 3.75])
    a, b = B.beta_update(np.array([1.0]), np.array([1.0]), np.array([1.2]))  # UCB bonus
    assert a[0] == pytest.approx(2.2) and b[0] == pytest.approx(1.0)


def test_gaussian_posterior_algorithm2():
    # prior N(0, 1), 3 observations summing to 1.5: var = 1/(1+3), mu = 1.5/4
    mu, sd = B.gaussian_posterior(np.array([1.5]), np.array([3]))
    assert mu[0] == pytest.approx(0.375) and sd[0] == pytest.approx(0.5)


def test_hierarchy_rule_and_inheritance():
    # Beta(5, 1): mean 5/6 > 0.77 with 4 pulls -> expand; 3 pulls -> not yet
    assert B.should_expand(np.array([5.0, 5.0, 3.0]), np.array([1.0, 1.0, 2.0]),
                           np.array([4, 3, 4])).tolist() == [True, False, False]
    a, b = B.inherit_prior(np.array([5.0]), np.array([1.0]), 0.91)
    assert a[0] == pytest.approx(4.55) and b[0] == pytest.approx(0.91)
    with pytest.raises(QrlibError):
        B.inherit_prior(np.array([1.0]), np.array([1.0]), 0.0)


# ---------------------------------------------------------------- requests
def _req(**kw):
    ranked = [[("p1", 9.0), ("p2", 8.0), ("p3", 7.0), ("p4", 6.0)],
              [("n1", 5.0), ("n2", 4.0), ("p1", 3.0), ("n3", 2.0)],
              [("n4", 1.0), ("n5", 0.5), ("n6", 0.2), ("n7", 0.0)]]
    return B.make_request(ranked, {"p1": 1, "p2": 1, "p3": 1, "p4": 2}, **kw)


def test_make_request_indices_and_scores():
    req = _req()
    assert req.n_arms == 3 and req.n_docs == 11          # p1 shared by arms 0 and 1
    assert req.lists[1, 2] == req.lists[0, 0]
    assert req.rel.tolist() == [1, 1, 1, 1] + [0] * 7    # graded 2 -> relevant
    assert req.scores[0, 0] == 1.0 and req.scores[2, 3] == 0.0   # min-max over the request
    with pytest.raises(QrlibError):
        B.make_request([[]], {})
    with pytest.raises(QrlibError):
        B.make_request([["a"], ["b"]], {}, parent=[1, 0])  # a parent with a parent


@pytest.mark.parametrize("name", B.PAPER_ORDER)
def test_full_budget_every_policy_selects_the_pool(name):
    rng = np.random.default_rng(3)
    req = _req(embeddings=rng.normal(size=(11, 4)))
    order = B.simulate(req, name, reps=50, seed=1)
    assert order.shape == (50, 11)
    assert np.all(np.sort(order, axis=1) == np.arange(11))  # each doc exactly once
    p, r = B.precision_recall(order, req.rel, [1.0])
    assert np.allclose(p, 4 / 11) and np.allclose(r, 1.0)


@pytest.mark.parametrize("name", [n for n in B.PAPER_ORDER if n != "random"])
def test_arms_are_read_top_down_and_shared_docs_skipped(name):
    req = _req()            # p1 is rank 1 of arm 0 and rank 3 of arm 1
    order = B.simulate(req, name, reps=30, seed=2)
    counts = np.bincount(req.lists[req.lists < req.n_docs], minlength=req.n_docs)
    assert counts[req.lists[0, 0]] == 2
    for row in order:
        assert sorted(row.tolist()) == list(range(req.n_docs))     # nobody read twice
        step = {int(d): t for t, d in enumerate(row)}
        for arm in req.lists:
            docs = [int(d) for d in arm if d < req.n_docs]
            for pos, d in enumerate(docs):
                if counts[d] == 1:
                    # an arm reads top-down: every document above one that only this arm
                    # holds came out first, a shared one possibly through the other arm;
                    # so a shared document already taken is skipped, not waited for
                    assert all(step[e] < step[d] for e in docs[:pos]), (arm, d)
    # both arms open with the same document: it is selected once, at step 0, and the
    # next pull of either arm skips it and reads that arm's second document
    two = B.make_request([["s", "a1", "a2"], ["s", "b1", "b2"]], {"s": 1, "a1": 1})
    o2 = B.simulate(two, name, reps=30, seed=3)
    s_idx = two.lists[0, 0]
    assert np.all(o2[:, 0] == s_idx)
    assert set(o2[:, 1].tolist()) <= {int(two.lists[0, 1]), int(two.lists[1, 1])}


def test_thompson_concentrates_on_the_perfect_arm():
    N = 30
    ranked = [[f"g{i}" for i in range(N)]] + [[f"x{a}_{i}" for i in range(N)] for a in range(3)]
    req = B.make_request(ranked, {f"g{i}": 1 for i in range(N)})
    order = B.simulate(req, "bernoulli", reps=400, seed=0)
    good = req.rel[order]                                    # 1 where the perfect arm was read
    # after 10 steps the Beta(1 + s, 1 + f) posteriors separate: steps 10..29 almost all
    # come from the perfect arm (a uniform arm choice would give 1/4)
    assert good[:, 10:30].mean() > 0.9
    assert good[:, 20:30].mean() > good[:, 0:10].mean()
    rnd = B.simulate(req, "rank", reps=400, seed=0)
    assert abs(req.rel[rnd][:, 10:30].mean() - 0.25) < 0.05


def test_egreedy_stays_after_a_relevant_doc():
    ranked = [["g1", "g2", "g3", "g4"], ["x1", "x2", "x3", "x4"]]
    req = B.make_request(ranked, {"g1": 1, "g2": 1, "g3": 1, "g4": 1})
    # Table 1 as written (epsilon = 0): after a relevant document the same arm is pulled
    literal = B.simulate(req, B.Policy("eg0", "eg", "egreedy", epsilon=0.0), 400, seed=4)
    good = literal[:, 0] == req.lists[0, 0]
    assert good.any() and np.all(literal[good, 1:4] == req.lists[0, 1:4])
    # the default policy (epsilon = 0.1) keeps the arm with probability
    # 1 - 0.1 * (K - 1) / K = 0.95 for K = 2, and draws uniformly after a miss
    pol = B.POLICIES["egreedy"]
    assert pol.epsilon == 0.1
    order = B.simulate(req, "egreedy", reps=4000, seed=5)
    after_hit = order[:, 0] == req.lists[0, 0]
    stay = np.mean(order[after_hit, 1] == req.lists[0, 1])
    assert 0.93 < stay < 0.97
    after_miss = ~after_hit
    assert abs(np.mean(order[after_miss, 1] == req.lists[1, 1]) - 0.5) < 0.05


def test_topk_prefers_the_arm_with_relevant_docs_below_rank_one():
    # arm 0: first doc irrelevant, next three relevant; arm 1: all irrelevant.
    ranked = [["x0", "g1", "g2", "g3", "x4", "x5"], [f"y{i}" for i in range(6)]]
    req = B.make_request(ranked, {"g1": 1, "g2": 1, "g3": 1})
    top = B.precision_recall(B.simulate(req, "bernoulli_top3", 500, seed=5), req.rel, [1 / 3])[0]
    ber = B.precision_recall(B.simulate(req, "bernoulli", 500, seed=5), req.rel, [1 / 3])[0]
    assert top.mean() > ber.mean()


def test_hierarchical_children_start_inactive():
    # parent 0 fully relevant -> expands after 4 observations; parent 1 irrelevant
    ranked = [[f"g{i}" for i in range(6)], [f"x{i}" for i in range(6)],
              [f"c{i}" for i in range(6)], [f"y{i}" for i in range(6)]]
    rel = {**{f"g{i}": 1 for i in range(6)}, **{f"c{i}": 1 for i in range(6)}}
    req = B.make_request(ranked, rel, parent=[-1, -1, 0, 1])
    order = B.simulate(req, "bernoulli", 200, seed=6, hierarchical=True)
    child0 = set(req.lists[2].tolist())
    child1 = set(req.lists[3].tolist())
    for row in order:
        g_seen = 0
        for d in row:
            if d in child0:
                assert g_seen >= 4           # not before 4 observations of parent 0
                break
            g_seen += d in set(req.lists[0].tolist())
        # parent 1's child only once every active arm is exhausted (fallback release)
        first_c1 = min(list(row).index(d) for d in child1)
        assert first_c1 >= 18
    assert np.all(np.sort(order, axis=1) == np.arange(24))


def test_seeded_and_reproducible():
    req = _req()
    a = B.simulate(req, "bernoulli_top4", 20, seed=11)
    assert np.array_equal(a, B.simulate(req, "bernoulli_top4", 20, seed=11))
    assert not np.array_equal(a, B.simulate(req, "bernoulli_top4", 20, seed=12))


def test_budget_counts_and_errors():
    assert B.budget_counts(11, [0.1, 0.5, 1.0]).tolist() == [2, 6, 11]
    with pytest.raises(QrlibError):
        B.budget_counts(10, [0.0])
    with pytest.raises(QrlibError):
        B.simulate(_req(), "nope")


def test_precision_recall_hand_worked():
    rel = np.array([1.0, 0.0, 1.0, 0.0])
    order = np.array([[0, 1, 2, 3], [1, 3, 0, 2]])
    p, r = B.precision_recall(order, rel, [0.25, 0.5, 1.0])
    assert np.allclose(p, [[1, 0.5, 0.5], [0, 0, 0.5]])
    assert np.allclose(r, [[0.5, 0.5, 1], [0, 0, 1]])


def test_alpha_ndcg_hand_worked():
    # subtopics: arm 0 -> {a}, arm 1 -> {d, a, e}; a covers both subtopics.
    req = B.make_request([["a", "b", "c"], ["d", "a", "e"]], {"a": 1, "d": 1, "e": 1})
    order = np.array([[0, 1, 2, 3, 4], [3, 0, 4, 1, 2]])      # a first / d first
    out = B.alpha_ndcg({"q": order}, {"q": req}, cutoffs=(1,))["q"]
    # @1: ideal gain 2 (doc a); a first -> 2/2 = 1, d first -> 1/2
    assert np.allclose(out[:, 0], [1.0, 0.5])


def test_bandits_module_does_not_import_torch():
    import subprocess
    code = "import qrlib.methods.bandits.bandits, sys; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "False"
