"""The steps of notebook 11 (qrlib.methods.deepretrieval.tasks_audit) on synthetic inputs and the
recorded literature-search answers (no Lucene, no network)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from qrlib.core.io import REPO_ROOT
from qrlib.eval.findings import paragraph, split_sentences
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
    assert lines == ["With bm25s the raw question reaches H@1 0.500, H@5 1.000 on toy (2 test "
                     "questions, 2 paragraphs); yes/no questions are left out and the pooled "
                     "corpora are not comparable with Table 1."]
    two = {**_raw(), "big": _raw()["toy"].assign(**{"H@1": [0, 0]})}
    sets = {"toy": (type("D", (), {"corpus": corpus}),),
            "big": (type("D", (), {"corpus": {**corpus, "d3": "z"}}),)}
    _, lines = A.evidence_summary(two, sets, ["H@1"], split="dev", drop_yes_no=False)
    assert lines == ["With bm25s the raw question reaches H@1 0.500 on toy (2 dev questions, 2 "
                     "paragraphs) and H@1 0.000 on big (2 dev questions, 3 paragraphs); the pooled "
                     "corpora are not comparable with Table 1."]
    assert A.evidence_summary({}, {}, ["H@1"], split="test", drop_yes_no=True) == ({}, [])


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
    ev = ["With bm25s the raw question reaches H@1 0.500 on toy; the corpora differ."]
    text = paragraph(lines + ev)
    assert not any(line.startswith("- ") for line in text.splitlines())
    assert split_sentences(text) == lines + ev and len(lines) == 5
    assert lines[0] == ("On nfcorpus and hotpotqa-large, against the published BM25 nDCG@10 of "
                        "0.147 (nfcorpus) to 0.603 (hotpotqa-large), Lucene with plain queries is "
                        "-0.103 (hotpotqa-large) to +0.173 (nfcorpus), with the released "
                        "`contents:` prefix -0.153 (hotpotqa-large) to +0.001 (nfcorpus), with "
                        "the prefix and the released evaluation script -0.153 (hotpotqa-large) to "
                        "+0.001 (nfcorpus) and bm25s -0.083 (hotpotqa-large) to +0.183 "
                        "(nfcorpus).")
    assert lines[1] == ("On the full test sets, the released query string reproduces NFCorpus's "
                        "published baseline (+0.0010; acceptance: 0.005); HotpotQA's published "
                        "0.603 cannot be checked on the hotpotqa-large subset.")
    assert lines[2] == ("Published DeepRetrieval-3B on nfcorpus (0.200) gains +5.3 points over the "
                        "published baseline and -12.0 over plain Lucene scored the same way; no "
                        "gain is stated for hotpotqa-large, a subset of the paper's corpus.")
    assert lines[3] == ("On the same queries with equal k1/b, bm25s minus Lucene is +0.010 "
                        "nDCG@10, their top-10 lists overlap 0.80, and Lucene's batched search "
                        "answers 500 queries per second (2.00 times bm25s) in this run.")
    assert lines[4] == ("The literature-search adapters score the replayed answers a +4.00, "
                        "b -3.50 (Recall@3000 tiers), and a live search without network fails in "
                        "one line.")
    pd.DataFrame({"dataset": ["nfcorpus"], "mean query tokens": [3.3],
                  "share first word lost": [1.0]}).to_csv(tmp_path / "11_prefix_damage.csv",
                                                          index=False)
    AUDIT.iloc[:1].to_csv(tmp_path / "11_baseline_audit.csv", index=False)
    _, lines = A.final_summary(tmp_path, full=False, litsearch_k=3000)
    assert lines[0].startswith("On subsets of nfcorpus (plumbing only, not comparable with the "
                               "paper), against the published BM25 nDCG@10 of 0.147, Lucene with "
                               "plain queries is +0.173, with the released `contents:` prefix "
                               "+0.001 (it costs 100% of the queries their first word; they "
                               "average 3.3 tokens), with")
    assert lines[1].startswith("Published DeepRetrieval-3B (0.200) gains +5.3 points")
    assert len(lines) == 4
    plain = AUDIT[["dataset", "published BM25", "bm25s"]]
    plain.to_csv(tmp_path / "11_baseline_audit.csv", index=False)
    rec, lines = A.final_summary(tmp_path, full=True, litsearch_k=3000)
    assert list(rec) == ["bm25s.nfcorpus.ndcg10", "bm25s.hotpotqa-large.ndcg10", "litsearch.rewards"]
    assert lines[0] == ("Lucene (Pyserini) was not available, so the audit did not run (it needs "
                        "the `lucene` extra and a Java runtime); bm25s reaches nDCG@10 0.330 "
                        "(nfcorpus) to 0.520 (hotpotqa-large).")
    assert len(lines) == 2


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
