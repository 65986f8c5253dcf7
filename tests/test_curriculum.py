"""ACQO curriculum glue (tau, filter, fused search, sub-query probe) and paired bootstrap."""
from __future__ import annotations

import numpy as np
import pytest

from qrlib.methods.acqo import curriculum as C
from qrlib.core.errors import QrlibError
from qrlib.eval.stats import fmt_interval, paired_bootstrap


def test_paired_bootstrap_interval_and_pairing():
    a = {"q1": 0.5, "q2": 0.7, "q3": 0.9, "q4": 0.4}
    b = {"q1": 0.4, "q2": 0.6, "q3": 0.8, "q4": 0.3}
    r = paired_bootstrap(a, b, n=500)
    assert r["diff"] == pytest.approx(0.1) and r["lo"] == pytest.approx(0.1)
    assert r["hi"] == pytest.approx(0.1) and r["wins"] == 4 and r["p_le_0"] == 0.0
    # pairing matters: the same values in another order are no longer a sure gain
    rng = np.random.default_rng(0)
    x = rng.normal(0.5, 0.2, 200)
    y = x + rng.normal(0.0, 0.05, 200) - 0.02
    r = paired_bootstrap(list(y), list(x), n=2000)
    assert r["lo"] < r["diff"] < r["hi"] < 0
    assert fmt_interval(r).startswith("-0.0")
    with pytest.raises(QrlibError, match="only one side"):
        paired_bootstrap({"q1": 1.0}, {"q2": 1.0})
    with pytest.raises(QrlibError, match="no queries"):
        paired_bootstrap([], [])


def test_tau_and_stage2_filter():
    tau = C.tau_by_question([2.0, 1.0, 0.5, 0.5, -1.0, 2.5], ["a", "a", "b", "b", "c", "c"])
    assert tau == {"a": 1.5, "b": 0.5, "c": 0.75}
    assert C.keep_for_stage2({"a": 1.9, "b": 5 / 3, "c": 0.2}) == ["b", "c"]
    with pytest.raises(QrlibError):
        C.tau_by_question([1.0], ["a", "b"])


class ListRetriever:
    """Ranked lists given per query text."""

    def __init__(self, lists):
        self.lists = lists
        self.calls = 0

    def search(self, texts, k):
        self.calls += 1
        return [self.lists[t][:k] for t in texts]


def test_search_fused_uses_rsf_and_one_call():
    retr = ListRetriever({"a": [("x", 3.0), ("y", 2.0)], "b": [("y", 5.0), ("z", 1.0)]})
    run, t = C.search_fused(retr, {"q": ["a", "b"], "r": ["a"]}, k=10)
    assert retr.calls == 1
    order = lambda r: sorted(r, key=r.get, reverse=True)  # noqa: E731
    assert order(run["q"]) == ["y", "x", "z"]  # y: ranks (2,1), P=2/3 beats x (1) and z (2)
    assert order(run["r"]) == ["x", "y"] and set(t) == {"retrieval", "fusion"}


def test_subquery_probe_adds_fused_and_best_single():
    from qrlib.rl.env import RewardEnv

    lists = {"good": [("g1", 2.0), ("n", 1.0)], "other": [("g2", 2.0), ("m", 1.0)],
             "bad": [("n", 2.0), ("m", 1.0)]}
    env = RewardEnv(ListRetriever(lists), {"q": {"g1": 1, "g2": 1}}, reward="acqo_stage1",
                    fmt="acqo", max_subqueries=3)
    probe = C.SubqueryProbe(env, k=10)
    out = probe(None, ['{"query": "good%%other"}', '{"query": "bad"}'], qid=["q", "q"],
                query=["orig", "orig"])
    assert len(out) == 2 and out[0] > out[1]
    r0, r1 = env.records[-2:]
    assert r0["part_fused_ndcg@10"] == pytest.approx(1.0)
    assert r0["part_best_sub_ndcg@10"] < 1.0 and r1["part_best_sub_ndcg@10"] == 0.0


def test_rejection_targets_pick_the_best_valid_sample_only_when_it_beats_the_copy():
    from qrlib.methods.acqo.curriculum import rejection_targets

    cands = [
        {"qid": "a", "completion": "s1", "format_ok": True, "reward": 1.2},
        {"qid": "a", "completion": "s2", "format_ok": True, "reward": 1.9},
        {"qid": "a", "completion": "bad", "format_ok": False, "reward": 5.0},  # never chosen
        {"qid": "b", "completion": "t1", "format_ok": True, "reward": 0.7},
        {"qid": "b", "completion": "t2", "format_ok": True, "reward": 0.7},
        {"qid": "c", "completion": "u1", "format_ok": True, "reward": 0.3},
    ]
    out = rejection_targets(cands, {"a": 1.5, "b": 0.7, "c": 0.2, "d": 1.0})
    assert out["a"]["completion"] == "s2" and out["a"]["sampled"]
    assert abs(out["a"]["gain"] - 0.4) < 1e-12
    assert out["b"] == {"completion": None, "reward": 0.7, "copy_reward": 0.7, "gain": 0.0,
                        "sampled": False}  # a tie with the copy keeps the copy
    assert out["c"]["completion"] == "u1"
    assert out["d"]["completion"] is None  # no sample at all: the copy
    with pytest.raises(QrlibError, match="no copy reward"):
        rejection_targets([{"qid": "z", "completion": "x", "format_ok": True, "reward": 1}],
                          {"a": 0.0})
