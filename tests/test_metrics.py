"""qrlib.eval.metrics: hand-worked values through ir-measures, order/missing-query conventions."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from qrlib.rl import rewards
from qrlib.core.errors import QrlibError
from qrlib.eval.metrics import easy_hard_split, evaluate, subtopics_from_qrels

QRELS = {"q1": {"d1": 1, "d2": 1}}


def test_hand_worked_values():
    # run: d3 (not relevant) then d1 (relevant); 2 relevant docs in total
    df = evaluate({"q1": [("d3", 2.0), ("d1", 1.0)]}, QRELS,
                  ["nDCG@10", "RR@10", "R@100", "AP@10", "P@10"])
    dcg = 1 / math.log2(3)
    idcg = 1 + 1 / math.log2(3)
    assert list(df.columns) == ["nDCG@10", "RR@10", "R@100", "AP@10", "P@10"]
    assert df["nDCG@10"][0] == pytest.approx(dcg / idcg)
    assert df["RR@10"][0] == pytest.approx(0.5)
    assert df["R@100"][0] == pytest.approx(0.5)
    assert df["AP@10"][0] == pytest.approx(0.5 / 2)  # P@2 = 1/2, divided by R = 2
    assert df["P@10"][0] == pytest.approx(0.1)


def test_graded_ndcg():
    qrels = {"q": {"a": 2, "b": 1}}
    df = evaluate({"q": ["b", "a"]}, qrels, ["nDCG@10"])
    # trec_eval gains are the raw grades: DCG = 1 + 2/log2(3), IDCG = 2 + 1/log2(3)
    assert df["nDCG@10"][0] == pytest.approx((1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3)))


def test_list_order_beats_tied_scores():
    # tied scores: whatever tie-break the evaluator uses, one of these two lists would be
    # reordered by it; list order must win in both
    assert evaluate({"q": [("a", 1.0), ("b", 1.0)]}, {"q": {"b": 1}}, ["RR@10"])["RR@10"][0] == 0.5
    assert evaluate({"q": [("b", 1.0), ("a", 1.0)]}, {"q": {"a": 1}}, ["RR@10"])["RR@10"][0] == 0.5
    # a dict run is ranked by its scores
    assert evaluate({"q": {"a": 1.0, "b": 3.0}}, {"q": {"a": 1}}, ["RR@10"])["RR@10"][0] == 0.5
    # duplicates keep their first rank
    assert evaluate({"q": ["a", "a", "b"]}, {"q": {"b": 1}}, ["RR@10"])["RR@10"][0] == 0.5


def test_repeated_documents_count_once_here_and_in_the_rewards():
    # ranked [a, a]: one document at rank 1, nothing at rank 2
    df = evaluate({"q": ["a", "a"]}, {"q": {"a": 1, "b": 1}}, ["nDCG@10", "R@100"])
    assert df["nDCG@10"][0] == pytest.approx(1 / (1 + 1 / math.log2(3)))
    assert df["R@100"][0] == pytest.approx(0.5)
    assert evaluate({"q": ["a", "a"]}, {"q": {"a": 1}}, ["nDCG@10"])["nDCG@10"][0] == 1.0
    # the per-rollout reward maths agrees with the evaluation
    for ranked, qrels in [(["a", "a"], {"a": 1, "b": 1}), (["x", "x", "a", "x", "b"],
                                                          {"a": 2, "b": 1, "c": 1})]:
        lst = [(d, 1.0) for d in ranked]
        ref = evaluate({"q": ranked}, {"q": qrels}, ["nDCG@3", "R@3"])
        assert rewards.ndcg_at_k(lst, qrels, 3) == pytest.approx(ref["nDCG@3"][0])
        assert rewards.recall_at(lst, qrels, 3) == pytest.approx(ref["R@3"][0])


def test_missing_and_empty_queries_count_as_zero():
    qrels = {"q1": {"d1": 1}, "q2": {"d9": 1}, "q3": {"d3": 1}}
    run = {"q1": [("d1", 1.0)], "q3": [], "extra": [("d1", 1.0)]}
    per_q = evaluate(run, qrels, ["RR@10"], per_query=True)
    assert list(per_q["query_id"]) == ["q1", "q2", "q3"]
    assert list(per_q["RR@10"]) == [1.0, 0.0, 0.0]
    assert evaluate(run, qrels, ["RR@10"])["RR@10"][0] == pytest.approx(1 / 3)
    assert evaluate({}, qrels, ["RR@10"])["RR@10"][0] == 0.0


def test_alpha_ndcg_with_subtopics():
    # d1 and d3 cover subtopic s1, d2 covers s2; alpha = 0.5 (ndeval default)
    qrels = {"q": {"d1": 1, "d2": 1, "d3": 1}}
    sub = {"q": {"s1": {"d1": 1, "d3": 1}, "s2": {"d2": 1}}}
    got = evaluate({"q": ["d1", "d3", "d2"]}, qrels, ["alpha_nDCG@10"],
                   subtopic_qrels=sub)["alpha_nDCG@10"][0]
    dcg = 1 + 0.5 / math.log2(3) + 1 / math.log2(4)   # d3 repeats s1: gain (1 - 0.5)^1
    ideal = 1 + 1 / math.log2(3) + 0.5 / math.log2(4)  # d1, d2, d3
    assert got == pytest.approx(dcg / ideal, rel=1e-6)


def test_subtopics_from_qrels():
    assert subtopics_from_qrels({"q": {"b": 1, "a": 1, "z": 0}}) == {
        "q": {"s0": {"a": 1}, "s1": {"b": 1}}}


def test_bad_input():
    with pytest.raises(QrlibError, match="unknown measure"):
        evaluate({"q1": ["d1"]}, QRELS, ["nDCGG@10"])
    with pytest.raises(QrlibError, match="qrels are empty"):
        evaluate({"q1": ["d1"]}, {}, ["nDCG@10"])
    with pytest.raises(QrlibError):
        evaluate(["d1"], QRELS, ["nDCG@10"])


def test_easy_hard_split():
    df = pd.DataFrame({"query_id": ["a", "b", "c", "d"], "nDCG@10": [0.0, 0.2, 0.6, 1.0]})
    assert easy_hard_split(df, "nDCG@10", 0.5) == (["c", "d"], ["a", "b"])
    assert easy_hard_split(df, "nDCG@10", "median") == (["c", "d"], ["a", "b"])  # median 0.4
    with pytest.raises(QrlibError, match="not in the per-query table"):
        easy_hard_split(df, "RR@10", 0.5)
