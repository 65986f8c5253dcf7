"""The steps of notebook 11 (qrlib.methods.deepretrieval.tasks_audit) on synthetic inputs and the
recorded literature-search answers (no Lucene, no network)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from qrlib.core.io import REPO_ROOT
from qrlib.methods.deepretrieval import tasks_audit as A
from qrlib.retrieval.retrievers import build_retriever


def test_damage_counts_the_glued_first_word_and_empty_queries():
    plain = [["organ", "skin", "care"], ["zinc", "cold"], ["statin"]]
    prefixed = [["contents:organ", "skin", "care"], ["content", "zinc", "cold"], ["contents:statin"]]
    got = A.damage_counts(plain, prefixed)
    assert got["mean query tokens"] == pytest.approx(2.0)
    assert got["share first word lost"] == pytest.approx(2 / 3)
    assert got["share with no term left"] == pytest.approx(1 / 3)


def test_coverage_row_counts_answer_bearing_passages():
    aq = {"q1": {"d1": 1, "d2": 1}, "q2": {}, "q3": {"d5": 1}}
    qrels = {"q1": {"d2": 1}, "q2": {"d3": 1}, "q3": {"d4": 1}}
    assert A.coverage_row(["q1", "q2", "q3"], aq, qrels) == {
        "questions": 3, "no passage contains an answer": pytest.approx(1 / 3),
        "median answer-bearing passages": 1.0, "mean answer-bearing passages": 1.0,
        "a gold (supporting) paragraph contains an answer": pytest.approx(1 / 3)}


def _raw():
    return {"toy": pd.DataFrame({"H@1": [0, 1], "H@5": [1, 1], "first_rank": [3.0, 1.0]},
                                index=["q1", "q2"])}


def test_raw_table_and_the_evidence_summary():
    t1 = pd.DataFrame({"NQ H@1": [0.2], "NQ H@5": [0.4], "SQuAD H@1": [0.1]},
                      index=["Original Query"])
    t = A.raw_table(_raw(), t1, ["H@1", "H@5"])
    assert t.to_dict("records")[0] == {"source": "ours: toy (raw question, bm25s)", "questions": 2,
                                       "H@1": 0.5, "H@5": 1.0,
                                       "first answer rank (median, within top 20)": 2.0}
    assert t.source.tolist()[1:] == ["published: NQ (Original Query, BM25, 21M passages)"]
    corpus = {"d1": "x", "d2": "y"}
    rec, lines = A.evidence_summary(_raw(), {"toy": (type("D", (), {"corpus": corpus}), {}, {})},
                                    ["H@1", "H@5"], split="test", drop_yes_no=True)
    assert rec == {"evidence.raw.toy.H@1": 0.5, "evidence.raw.toy.H@5": 1.0}
    assert lines == ["- **toy** (2 test questions, yes/no left out): the raw question with bm25s "
                     "reaches H@1 0.500, H@5 1.000 (pooled corpus of 2 paragraphs; not comparable "
                     "with Table 1)."]


AUDIT = pd.DataFrame({"dataset": ["nfcorpus", "hotpotqa-large"], "published BM25": [0.147, 0.603],
                      "Lucene plain": [0.32, 0.5], "Lucene contents:": [0.148, 0.45],
                      "Lucene contents:, released eval": [0.148, 0.45], "bm25s": [0.33, 0.52],
                      "published DeepRetrieval-3B": [0.2, 0.7], "gain vs published BM25": [0.053, 0.097],
                      "gain vs plain Lucene (released eval)": [-0.12, np.nan]})


def test_audit_lines_state_both_gains_or_why_there_are_none():
    assert A.audit_lines(AUDIT, use_lucene=False, full=True)[0].startswith("- Lucene was not available")
    assert A.audit_lines(AUDIT, use_lucene=True, full=False) == [
        "- Subsets: the audit needs the full test sets (profile cpu/gpu)."]
    lines = A.audit_lines(AUDIT, use_lucene=True, full=True)
    assert lines[0].endswith("+5.3 points over the published baseline, -12.0 over plain Lucene "
                             "scored the same way.")
    assert lines[1].endswith("(subset: no like-for-like gain).")


def test_final_summary_records_in_order_from_the_saved_tables(tmp_path):
    AUDIT.to_csv(tmp_path / "11_baseline_audit.csv", index=False)
    pd.DataFrame({"dataset": ["nfcorpus"], "nDCG@10 bm25s": [0.33], "nDCG@10 Lucene": [0.32],
                  "top-10 overlap bm25s vs Lucene": [0.8], "Lucene q/s": [500.0],
                  "Lucene / bm25s speed": [2.0]}).to_csv(tmp_path / "11_engines.csv", index=False)
    pd.DataFrame({"qid": ["a", "b"], "reward": [4.0, -3.5]}).to_csv(
        tmp_path / "11_litsearch_env.csv", index=False)
    rec, lines = A.final_summary(tmp_path, full=True, litsearch_k=3000)
    assert list(rec) == ["bm25s.nfcorpus.ndcg10", "lucene_plain.nfcorpus.ndcg10",
                         "lucene_prefix.nfcorpus.ndcg10", "lucene_prefix_released_eval.nfcorpus.ndcg10",
                         "bm25s.hotpotqa-large.ndcg10", "lucene_plain.hotpotqa-large.ndcg10",
                         "lucene_prefix.hotpotqa-large.ndcg10",
                         "lucene_prefix_released_eval.hotpotqa-large.ndcg10",
                         "nfcorpus.prefix_minus_published", "engines.nfcorpus.top10_overlap",
                         "litsearch.rewards"]
    assert rec["nfcorpus.prefix_minus_published"] == pytest.approx(0.001)
    assert rec["litsearch.rewards"] == [4.0, -3.5]
    assert "reproduces the published baseline within 0.0010" in lines[2]
    assert lines[3].startswith("- bm25s vs Lucene on the same queries (k1/b equal): nDCG@10 "
                               "nfcorpus 0.330 vs 0.320; top-10 overlap nfcorpus 0.80. Lucene's")
    assert lines[-1] == ("- Literature-search adapters on replayed answers: rewards a +4.00, "
                         "b -3.50 (Recall@3000 tiers); a live search without network fails in "
                         "one line.")
    plain = AUDIT[["dataset", "published BM25", "bm25s"]]
    plain.to_csv(tmp_path / "11_baseline_audit.csv", index=False)
    rec, lines = A.final_summary(tmp_path, full=True, litsearch_k=3000)
    assert list(rec) == ["bm25s.nfcorpus.ndcg10", "bm25s.hotpotqa-large.ndcg10", "litsearch.rewards"]
    assert lines[0].endswith("bm25s nDCG@10: nfcorpus 0.330, hotpotqa-large 0.520.")


def test_litsearch_rewards_tier_the_recall_of_the_replayed_answers():
    replay = str(REPO_ROOT / "tests" / "fixtures" / "litsearch" / "replay.json")
    lit = A.litsearch_rewards(build_retriever("pubmed", None, replay=replay),
                              build_retriever("ctgov", None, replay=replay), k=3000)
    assert lit.engine.tolist() == ["PubMedSearch", "PubMedSearch", "PubMedSearch",
                                   "ClinicalTrialsSearch"]
    assert lit["format ok"].tolist() == [True, True, False, True]
    assert lit.loc[[0, 1, 3], "recall@3000"].tolist() == pytest.approx([2 / 3, 0.0, 2 / 3])
    assert lit.loc[[0, 1, 3], "retrieval tier"].tolist() == [4.0, -3.5, 4.0]
    assert lit["query"].iloc[2] == "(none: format error)"
