"""Notebook 19's grid functions (qrlib.methods.prompting.study) on a two-document index with
a fake retriever: the prompt choice, the result rows, comparisons, records and the closing
text, with exact values; no model."""
from __future__ import annotations

import math
import types

import pandas as pd
import pytest

from qrlib.eval.findings import split_sentences
from qrlib.methods.prompting import study


class Retr:
    """Ranks document a first when the text names it, else b first."""

    def search(self, texts, k):
        return [[("a", 1.0), ("b", 0.5)] if "a" in t.split() else [("b", 1.0), ("a", 0.5)]
                for t in texts]


TE = types.SimpleNamespace(queries={"q1": "find a", "q2": "find b"},
                           qrels={"q1": {"a": 1}, "q2": {"b": 1}})
DEV = types.SimpleNamespace(queries={"d1": "x", "d2": "y"}, qrels={"d1": {"a": 1}, "d2": {"a": 1}})
DATA = {"x": (TE, DEV)}
SECOND = 1 / math.log2(3)  # nDCG@10 of the relevant document at rank 2


def _rw(qids, queries, rewrites, **cols):
    return pd.DataFrame({"qid": qids, "query": queries, "rewrite": rewrites,
                         "format_ok": [True] * len(qids), "modified": [True] * len(qids),
                         **cols})


def test_scorer_scores_the_raw_queries_per_query():
    score = study.Scorer({("x", "bm25"): Retr()}, ["nDCG@10"], 10)
    raw = score.raw(DATA, {"x": ["bm25"]})
    assert list(raw) == [("x", "bm25", "raw")]
    assert raw["x", "bm25", "raw"]["nDCG@10"].to_dict() == pytest.approx({"q1": 1.0, "q2": 1.0})


def test_select_prompts_keeps_the_dev_argmax_and_names_the_test_prompts():
    score = study.Scorer({("x", "bm25"): Retr()}, ["nDCG@10"], 10)
    dev = {("x", "p/one"): _rw(["d1", "d2"], ["x", "y"], ["b", "b"]),
           ("x", "p/two"): _rw(["d1", "d2"], ["x", "y"], ["a", "b"])}
    sel, chosen = study.select_prompts(score, DATA, dev, {"x": ["bm25"]}, "nDCG@10")
    assert chosen == {("x", "bm25"): ("p/two", "rewrite")}
    assert sel.chosen.sum() == 1 and sel["dev nDCG@10"].max() == pytest.approx((1 + SECOND) / 2)
    assert len(sel) == 4 and set(sel["dev queries"]) == {2}
    assert study.chosen_prompts({("x", "bm25"): ("p/two", "rewrite"),
                                 ("x", "dense"): ("p/one", "expand"),
                                 ("y", "bm25"): ("p/two", "rewrite")}) == [
        ("x", "p/one"), ("x", "p/two"), ("y", "p/two")]
    best = {("x", "p/two"): _rw(["q1", "q2"], ["find a", "find b"], ["a", "a"])}
    sc = study.best_prompt_scores(score, DATA, best, chosen)
    assert sc["x", "bm25", "best-prompt"]["nDCG@10"].to_dict() == pytest.approx(
        {"q1": 1.0, "q2": SECOND})


def _scores():
    idx = pd.Index(["q1", "q2"], name="query_id")
    return {("x", "bm25", "raw"): pd.DataFrame({"nDCG@10": [0.2, 0.4]}, index=idx),
            ("x", "bm25", "spqe"): pd.DataFrame({"nDCG@10": [0.5, 0.7]}, index=idx),
            ("x", "bm25", "best-prompt"): pd.DataFrame({"nDCG@10": [0.1, 0.3]}, index=idx)}


PSEUDO = {"x": pd.DataFrame({"qid": ["q1", "q2"], "query": ["find a", "find b"], "passage": ["A text.", "B text."],
                             "gen_tokens": [32, 20], "truncated": [True, False],
                             "gen_seconds": [0.5, 0.5]})}
CHOSEN = {("x", "bm25"): ("p/two", "expand")}
BEST = {("x", "p/two"): _rw(["q1", "q2"], ["find a", "find b"], ["a", "b"],
                            gen_tokens=[24, 10], gen_seconds=[0.2, 0.4])}


def test_results_table_puts_the_generation_cost_beside_the_score():
    res = study.results_table(_scores(), CHOSEN, BEST, PSEUDO, {"x": "claim"}, model="m",
                              measures=["nDCG@10"], rewrite_tokens=24).set_index("method")
    assert res["nDCG@10"].to_dict() == pytest.approx({"raw": 0.3, "spqe": 0.6,
                                                      "best-prompt": 0.2})
    assert res.loc["raw", "detail"] == "-" and res.loc["raw", "policy"] == "-"
    assert res.loc["spqe", "detail"] == "prompting/pseudo-doc-claim"
    assert res.loc["spqe", ["gen_tokens", "truncated"]].tolist() == [26.0, 0.5]
    assert res.loc["best-prompt", "detail"] == "p/two (expand)"
    assert res.loc["best-prompt", ["truncated", "gen_s_per_query"]].tolist() == pytest.approx(
        [0.5, 0.3])  # 24 tokens of 24 is at the budget, 10 is not
    assert (res["RL steps"] == 0).all() and (res["test queries"] == 2).all()


def test_comparisons_records_and_the_closing_text(tmp_path):
    cmp = study.comparisons(_scores(), "nDCG@10", model="m", resamples=200)
    assert cmp.method.tolist() == ["spqe", "best-prompt"]
    assert cmp["diff"].tolist() == pytest.approx([0.3, -0.1])
    assert cmp.lo.tolist() == pytest.approx(cmp["diff"].tolist())  # every query moves alike
    rec = study.records(cmp, PSEUDO)
    assert rec["x.bm25.spqe.diff"] == pytest.approx(0.3)
    assert rec["x.bm25.best-prompt.hi"] == pytest.approx(-0.1)
    assert rec["x.pseudo_doc_truncated"] == 0.5
    text = study.findings(cmp, PSEUDO, main="nDCG@10", pseudo_doc_tokens=32)
    assert not any(line.startswith("- ") for line in text.splitlines())
    sentences = split_sentences(text)
    assert len(sentences) == 5, sentences
    assert sentences[0] == ("The raw query scores nDCG@10 0.300 (x/bm25) over 1 dataset/retriever "
                            "block (2 test queries each).")
    assert sentences[1] == ("Of 2 training-free rows compared with raw, 1 beats it with a 95 % "
                            "interval above 0, 1 falls below it and 0 cannot be told apart from "
                            "it; per method (above / below / rows): spqe 1/0/1, best-prompt 0/1/1.")
    assert sentences[2] == ("The largest gain: spqe beats raw on x/bm25 (nDCG@10 +0.300 [+0.300, "
                            "+0.300], 2 queries); the largest loss: best-prompt falls below raw on "
                            "x/bm25 (nDCG@10 -0.100 [-0.100, -0.100], 2 queries).")
    assert "budget for 50% of x queries" in sentences[3]
    assert study.findings(cmp.iloc[:0], PSEUDO, main="nDCG@10", pseudo_doc_tokens=32) == (
        "This run has no training-free row to compare with the raw query.")
    path = study.save_per_query(_scores(), tmp_path / "pq.csv")
    pq = pd.read_csv(path)
    assert pq.columns.tolist() == ["qid", "nDCG@10", "dataset", "retriever", "method"]
    assert len(pq) == 6


def test_spqe_readings_are_searched_with_the_q2d_reading_for_bm25_only():
    seen = []

    def score(name, kind, texts, qrels):
        seen.append((kind, texts["q1"]))
        return "s"

    out = study.spqe_scores(score, DATA, PSEUDO, {"x": ["bm25", "dense"]})
    assert list(out) == [("x", "bm25", "spqe"), ("x", "bm25", "spqe-q2d"),
                         ("x", "bm25", "pseudo-doc"), ("x", "dense", "spqe"),
                         ("x", "dense", "pseudo-doc")]
    assert seen[0] == ("bm25", "find a A text.") and seen[2] == ("bm25", "A text.")
    assert study.passage_examples(PSEUDO).to_dict("records") == [
        {"dataset": "x", "query": "find a", "pseudo-document": "A text."}]


def test_comparisons_in_a_second_metric_pair_each_row_in_its_own_metric():
    """``also_compared``: a trained row reported in nDCG@3 (RL-QR) finds the same rows in it."""
    scores = {k: v.assign(**{"nDCG@3": v["nDCG@10"] * 2}) for k, v in _scores().items()}
    cmp = study.comparisons(scores, ["nDCG@10", "nDCG@3"], model="m", resamples=200)
    assert cmp.metric.tolist() == ["nDCG@10", "nDCG@10", "nDCG@3", "nDCG@3"]
    assert cmp["diff"].tolist() == pytest.approx([0.3, -0.1, 0.6, -0.2])
    pq = cmp.attrs["per_query"]
    assert set(pq.metric) == {"nDCG@10", "nDCG@3"}
    with pytest.raises(Exception, match="'R@10' is not among the scored measures"):
        study.comparisons(scores, ["nDCG@10", "R@10"], model="m", resamples=200)
