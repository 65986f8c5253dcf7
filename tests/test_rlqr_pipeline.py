"""RL-QR's pipeline steps (qrlib.methods.rlqr.pipeline) that need no model: which documents
synthesis may use, the training set, the synthesis summary and per-query scoring."""
from __future__ import annotations

import pandas as pd
import pytest

from qrlib.core.errors import QrlibError
from qrlib.data.collection import Dataset
from qrlib.methods.rlqr import pipeline as rlqr
from qrlib.retrieval import retrievers as retrieval

CORPUS = {f"d{i}": {"title": "", "text": t} for i, t in enumerate([
    "vitamin d hip fracture trial", "statins lower cholesterol", "aspirin and stroke risk",
    "sleep and memory consolidation", "coffee intake and liver disease", "exercise and mood"])}
DS = Dataset(name="toy", corpus=CORPUS, queries={"q1": "vitamin d fractures", "q2": "statins"},
             qrels={"q1": {"d0": 1}, "q2": {"d1": 1}})


def attempts(rows):
    return pd.DataFrame(rows, columns=["qid", "doc_id", "usable", "question"])


def test_synthesis_never_uses_a_document_a_test_query_judges():
    docs = rlqr.synthesis_docs(DS, 10, seed=0)
    assert set(docs) == {"d2", "d3", "d4", "d5"}          # all unjudged ones, no more
    assert rlqr.synthesis_docs(DS, 2, seed=0) == rlqr.synthesis_docs(DS, 2, seed=0)
    assert len(set(rlqr.synthesis_docs(DS, 2, seed=1))) == 2
    judged_all = Dataset(name="tiny", corpus={"d0": CORPUS["d0"]}, queries={"q": "x"},
                         qrels={"q": {"d0": 1}})
    with pytest.raises(QrlibError, match="every document is judged"):
        rlqr.synthesis_docs(judged_all, 3)


def test_training_set_keeps_usable_questions_with_their_source_as_the_only_relevant_doc():
    at = attempts([("syn-d2", "d2", True, "does aspirin cut strokes"),
                   ("syn-d3", "d3", False, ""),
                   ("syn-d4", "d4", True, "is coffee bad for the liver")])
    queries, qrels = rlqr.training_set(at)
    assert queries == {"syn-d2": "does aspirin cut strokes", "syn-d4": "is coffee bad for the liver"}
    assert qrels == {"syn-d2": {"d2": 1}, "syn-d4": {"d4": 1}}
    with pytest.raises(QrlibError, match="no usable synthesised question among 1"):
        rlqr.training_set(attempts([("syn-d3", "d3", False, "")]))


def test_summary_counts_where_the_source_ranks():
    at = attempts([("syn-d2", "d2", True, "aspirin stroke risk"),
                   ("syn-d4", "d4", True, "coffee liver disease"),
                   ("syn-d5", "d5", True, "statins and cholesterol"),  # finds d1, not d5
                   ("syn-d3", "d3", False, "")])
    bm25 = retrieval.build_retriever("bm25", CORPUS)
    row = rlqr.synthesis_summary("toy", at, {"bm25": bm25.search})
    assert row["documents"] == 4 and row["usable"] == 3 and row["usable share"] == 0.75
    assert row["question words mean"] == 3.0
    assert row["bm25 source@1"] == pytest.approx(2 / 3)


def test_search_scores_follow_the_query_order_and_score_misses_zero():
    bm25 = retrieval.build_retriever("bm25", CORPUS)
    s = rlqr.search_scores(bm25, DS.qrels, {"q2": "statins cholesterol", "q1": "exercise mood"},
                           ("nDCG@3", "nDCG@10"))
    assert list(s.index) == ["q2", "q1"] and list(s.columns) == ["nDCG@3", "nDCG@10"]
    assert s.loc["q2", "nDCG@3"] == pytest.approx(1.0) and s.loc["q1", "nDCG@10"] == 0.0


def test_hard_subset_keeps_only_questions_the_raw_query_does_not_solve():
    bm25 = retrieval.build_retriever("bm25", CORPUS)
    queries = {"easy": "aspirin stroke risk", "hard": "cholesterol", "vague": "health effects"}
    qrels = {"easy": {"d2": 1}, "hard": {"d4": 1}, "vague": {"d5": 1}}
    q, r = rlqr.hard_subset(queries, qrels, bm25)
    assert "easy" not in q and set(q) == {"hard", "vague"} and r["hard"] == {"d4": 1}
    # BM25 returns no document without a shared term: those sources stay unreached at any depth
    q5, _ = rlqr.hard_subset(queries, qrels, bm25, solved_at=6)
    assert set(q5) == {"hard", "vague"}
    q1, _ = rlqr.hard_subset({"x": "statins lower cholesterol"}, {"x": {"d1": 1}}, bm25)
    assert q1 == {}
