"""qrlib.methods.reward_study: notebook 04's pseudo-rollouts, completions, GRPO advantages and
tables on a six-document BM25 corpus."""
from __future__ import annotations

import random
from types import SimpleNamespace

import matplotlib
import numpy as np
import pandas as pd
import pytest

from qrlib.eval.findings import split_sentences
from qrlib.methods import reward_study as RS

matplotlib.use("Agg")

CORPUS = {"d1": "coffee beans are roasted in small batches", "d2": "volcanoes erupt hot lava",
          "d3": "green tea leaves are steamed", "d4": "lava flows cool into basalt rock",
          "d5": "espresso is brewed from roasted coffee", "d6": "tea ceremonies in japan"}
QUERIES = {"q1": "how are coffee beans roasted", "q2": "what does lava turn into",
           "q3": "how is green tea made"}
QRELS = {"q1": {"d1": 1}, "q2": {"d4": 1}, "q3": {"d3": 1}}


@pytest.fixture(scope="module")
def toy():
    from qrlib.retrieval.retrievers import build_retriever

    ds = SimpleNamespace(corpus=CORPUS, queries=QUERIES, qrels=QRELS,
                         doc_text=lambda d: CORPUS[d])
    return ds, build_retriever("bm25", CORPUS)


def _notebook_rollouts(ds, ret, group_size, p_malformed, seed):
    """The rollout generator as notebook 04 wrote it before it moved to reward_study."""
    rng = random.Random(seed)
    qids = sorted(ds.queries)
    first_docs = dict(zip(qids, ret.search([ds.queries[q] for q in qids], 3)))
    all_words = [w for q in qids for w in ds.queries[q].split()]

    def prf_words(q, n=6):
        if not first_docs[q]:
            return []
        words = ds.doc_text(rng.choice(first_docs[q])[0]).split()[:60]
        return rng.sample(words, min(n, len(words)))

    OPS = {
        "copy": (lambda w, q: [w], 4),
        "drop30": (lambda w, q: [[x for x in w if rng.random() > 0.3] or w[:1]], 4),
        "keywords": (lambda w, q: [sorted(w, key=len, reverse=True)[:3]], 4),
        "shuffle": (lambda w, q: [rng.sample(w, len(w))], 3),
        "truncate": (lambda w, q: [w[: max(1, len(w) // 2)]], 4),
        "noise": (lambda w, q: [w + rng.sample(all_words, 3)], 2),
        "prf": (lambda w, q: [w + prf_words(q)], 1),
        "split2": (lambda w, q: [w[: max(1, len(w) // 2)], w[max(1, len(w) // 2):] or w], 3),
    }
    rollouts = []
    for q in qids:
        words = ds.queries[q].split()
        ops = ["copy"] + [rng.choice(list(OPS)) for _ in range(group_size - 1)]
        for op in ops:
            fn, strat = OPS[op]
            rollouts.append({"qid": q, "op": op, "strategy": strat, "parts": fn(words, q),
                             "broken": rng.random() < p_malformed})
    return pd.DataFrame(rollouts)


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_rollouts_are_the_notebooks_draw_for_draw(toy, seed):
    ds, ret = toy
    got = RS.pseudo_rollouts(ds, ret, 8, 0.3, seed)
    pd.testing.assert_frame_equal(got, _notebook_rollouts(ds, ret, 8, 0.3, seed))
    assert (got.groupby("qid").op.first() == "copy").all() and len(got) == 24


def test_wrap_writes_each_format_and_breaks_it_on_purpose():
    parts = [["a", "b"], ["c"]]
    assert RS.wrap(parts, "acqo", 3, False) == '{"query": "a b%%c"}'
    assert RS.wrap(parts, "acqo", 3, True) == '{"query": "a b%%'
    assert RS.wrap(parts, "deepretrieval", 3, False) == (
        '<think>rewrite</think><answer>{"query": "a b c"}</answer>')
    assert RS.wrap(parts, "deepretrieval", 3, True).endswith('"a b c"}')
    assert RS.wrap(parts, "sage", 2, False) == (
        '<think>s2</think><answer>{"query": "a b c", "strategy": 2}</answer>')
    assert RS.wrap(parts, "plain", 2, False) == "<answer>a b c</answer>"
    assert RS.wrap(parts, "plain", 2, True) == "Here you go: a b c"


def test_grpo_advantage_normalises_within_each_group():
    adv = RS.grpo_advantage([1.0, 3.0, 5.0, 5.0], ["a", "a", "b", "b"])
    assert adv == pytest.approx([-1 / 1.0001, 1 / 1.0001, 0.0, 0.0])


def test_every_reward_scores_the_rollouts_and_the_tables_follow(toy):
    ds, ret = toy
    roll = RS.pseudo_rollouts(ds, ret, 4, 0.25, 0)
    rewards = RS.compared_rewards(10)
    assert len(rewards) == 10 and rewards["RL-QR"] == ("rlqr", "plain", {"k": 3})
    sc, timings, envs = RS.score_rollouts(roll, ds, ret, rewards)
    assert list(sc.columns) == [*rewards, "qid", "op"] and len(sc) == len(roll)
    stats = RS.reward_stats(sc, list(rewards), timings)
    assert list(stats.columns) == ["mean", "std", "min", "max", "share < 0",
                                   "mean within-group std", "frac_reward_zero_std",
                                   "ms per rollout"]
    assert ((stats.frac_reward_zero_std >= 0) & (stats.frac_reward_zero_std <= 1)).all()
    assert len(RS.plot_reward_histograms(sc, list(rewards), stats).axes) == 10
    pick, worked = RS.sage_worked_group(envs["SAGE SCS"], roll)
    assert pick in QUERIES and list(worked.columns) == [
        "op", "queries", "format_ok", "strategy", "nDCG@10", "strategy mean nDCG",
        "strategy rank", "SCS (Eq. 1)", "CRS (Eq. 2)", "copy", "final SCS reward (Eq. 3, p=0.05)"]
    assert worked["copy"].iloc[0]  # the group's first rollout is the verbatim copy
    copy_tab = RS.copy_penalty_table(ret, ds, roll, 10, [0.0, 0.5])
    assert copy_tab.p.tolist() == [0.0, 0.5]
    # a penalty lowers the copies' reward by p (their nDCG is unchanged)
    drop = copy_tab["mean reward of copies"].iloc[0] - copy_tab["mean reward of copies"].iloc[1]
    assert drop == pytest.approx(0.5)
    assert copy_tab["mean reward of rewrites"].nunique() == 1
    open_tab = RS.open_readings(envs, rewards, 0)
    assert set(open_tab.reading) == {"ACQO Eq. 4-5", "RL-QR [theta, 1]", "bandit Table 1 epsilon"}
    assert len(open_tab) == 12 + 6 + 6 and all(isinstance(v, str) for v in open_tab.value)
    assert RS.released_presets().shape[0] == 4


def test_epsilon_zero_stays_on_the_good_arm():
    rows = RS.epsilon_readings(0, epsilons=(0.0,), reps=50)
    assert [r["measure"] for r in rows] == ["precision at 10% budget (toy, K=4)",
                                            "precision at 25% budget (toy, K=4)"]
    assert all(0 <= r["value"] <= 1 for r in rows)


def test_findings_and_key_numbers_read_the_saved_tables():
    t_stats = pd.DataFrame({"reward": ["a", "b"], "frac_reward_zero_std": [0.5, 0.1]})
    t_copy = pd.DataFrame({"p": [0.0, 0.05, 0.1], RS.SHARE_COL: [0.8, 0.1, 0.0],
                           "mean GRPO advantage of copies": [0.5, -0.2, -0.9]})
    assert RS.key_numbers(t_stats, t_copy) == {
        "frac_zero_std.a": 0.5, "frac_zero_std.b": 0.1, "copy_top_share.p=0": 0.8,
        "copy_top_share.p=0.05": 0.1, "copy_top_share.p=0.1": 0.0}
    text = RS.findings(t_stats, t_copy, 8)
    assert text == (
        "Over the 2 rewards, the share of 8-rollout groups with no reward spread (no GRPO signal) "
        "runs 0.10 (b) to 0.50 (a), median 0.30. No reward gives every group some spread. "
        "Without SAGE's copy penalty (p = 0) a verbatim copy is a top rollout in 80% of groups "
        "and with p = 0.05 in 10%, while the mean GRPO advantage of copies goes from +0.500 to "
        "-0.900 at p = 0.1.")
    assert not any(line.startswith("- ") for line in text.splitlines())
    assert len(split_sentences(text)) == 3
    ten = pd.DataFrame({"reward": list("abcdefghij"),
                        "frac_reward_zero_std": [0, 0, 0.12, 0.12, 0.2, 0.2, 0.28, 0.33, 0, 0.1]})
    text = RS.findings(ten, t_copy.iloc[:1], 8)
    assert text == ("Over the 10 rewards, the share of 8-rollout groups with no reward spread (no "
                    "GRPO signal) runs 0.00 (a) to 0.33 (h), median 0.12. 3 of them give every "
                    "group some spread (a, b, i).")
    assert RS.findings(ten.iloc[:1], t_copy.iloc[:1], 8) == (
        "The share of 8-rollout groups with no reward spread (no GRPO signal) is 0.00 (a).")
    assert np.isfinite(RS.plot_copy_penalty(t_copy).axes[0].get_lines()[0].get_ydata()).all()
