"""Notebook 14's grid functions (qrlib.methods.rlqr.study) on a two-document index with a
fake retriever and a fake trainer: exact rows, comparisons and records; no model."""
from __future__ import annotations

import math
import sys
import types

import pandas as pd
import pytest

from qrlib.core.errors import QrlibError
from qrlib.methods.rlqr import study


class Retr:
    """Ranks document a first when the text names it, else b first."""

    def search(self, texts, k):
        return [[("a", 1.0), ("b", 0.5)] if "a" in t.split() else [("b", 1.0), ("a", 0.5)]
                for t in texts][:len(texts)]


TE = types.SimpleNamespace(queries={"q1": "find a", "q2": "find a too"},
                           qrels={"q1": {"a": 1}, "q2": {"b": 1}})
LOG = pd.DataFrame({"step": [1, 2], "qids": ["s1;s2", "s2"], "rollouts": [4, 4],
                    "step_seconds": [30.0, 30.0], "format_valid": [1.0, 0.5]})


def _rw(texts, ok=(True, True), modified=(True, True)):
    return pd.DataFrame({"qid": ["q1", "q2"], "rewrite": texts, "search_text": texts,
                         "format_ok": list(ok), "modified": list(modified)})


def _evaluate():
    rewrites = {("x", "untrained"): _rw(["a", "b"], ok=(True, False)),
                ("x", "bm25", "all"): _rw(["find a", "find a too"], modified=(False, False))}
    return study.evaluate({"x": TE}, {("x", "bm25"): Retr()}, ["bm25"], rewrites,
                          {("x", "bm25", "all"): LOG}, model="m", train_sets=["all", "hard"],
                          resamples=200)


def test_evaluate_gives_table_2s_rows_and_their_comparisons():
    res, cmp, per_q = _evaluate()
    assert res.model.tolist() == ["raw query", "untrained", "RL-QR"]
    second = 1 / math.log2(3)  # q2's document at rank 2
    assert res["nDCG@3"].tolist() == pytest.approx([(1 + second) / 2, 1.0, (1 + second) / 2])
    assert res["query words mean"].tolist() == pytest.approx([2.5, 1.0, 2.5])
    assert res["format ok"].tolist() == [1.0, 0.5, 1.0]
    assert res["modified"].tolist() == [0.0, 1.0, 0.0]
    assert res["RL steps"].tolist() == [0, 0, 2] and res["train queries"].tolist() == [0, 0, 2]
    assert set(zip(cmp.metric, cmp.method)) == {(m, r) for m in ("nDCG@3", "nDCG@10")
                                                for r in ("untrained", "RL-QR")}
    row = cmp[(cmp.metric == "nDCG@3") & (cmp.method == "untrained")].iloc[0]
    assert row["diff"] == pytest.approx((1 - second) / 2) and row["wins"] == 1
    assert set(per_q["x", "bm25"]) == {"raw query", "untrained", "RL-QR"}

    pairs, intervals = study.per_query_pairs(cmp, per_q)
    assert list(pairs) == ["x/bm25: RL-QR"]
    assert pairs["x/bm25: RL-QR"][0] == pytest.approx({"q1": 1.0, "q2": second})
    assert intervals["x/bm25: RL-QR"] == "+0.000 [+0.000, +0.000]"

    synth = pd.DataFrame({"dataset": ["x"], "usable": [5], "bm25 source@1": [0.8]})
    rec = study.records(synth, res, cmp)
    assert rec["x.synthesis.usable"] == 5
    assert rec["x.bm25.RL-QR.ndcg3"] == pytest.approx((1 + second) / 2)
    assert rec["x.bm25.untrained.nDCG@3.vs_raw"][0] == pytest.approx((1 - second) / 2)
    assert study.extra_sentences(res, cmp, synth) == [
        "The trained rewriters modify 0% of the real test queries.",
        "On x, BM25 ranks the source document first for 80% of the 5 synthetic training "
        "questions as they are, so copying them is already near-optimal there."]


def test_examples_show_each_rewrite_beside_its_query():
    rewrites = {("x", "untrained"): _rw(["a", "b"]), ("x", "bm25", "all"): _rw(["c", "d"])}
    ex = study.rewrite_examples({"x": TE}, rewrites, ["bm25", "dense"], ["all", "hard"], 1)
    assert ex.iloc[0].to_dict() == {"index": "x · bm25", "query": "find a", "untrained": "a",
                                    "RL-QR": "c"}
    assert ex.iloc[1]["index"] == "x · dense" and pd.isna(ex.iloc[1]["RL-QR"])  # not trained
    att = pd.DataFrame({"doc_id": ["a", "b"], "usable": [True, False], "reason": ["", "empty"],
                        "scenario": ["s", "t"], "question": ["q?", ""], "completion": ["", ""]})
    assert study.synthesis_examples({"x": att}, 1).columns.tolist() == [
        "dataset", "doc_id", "usable", "reason", "scenario", "question"]


def _fake_pipeline(monkeypatch, calls):
    import qrlib.methods.rlqr as pkg

    def train_rewriter(name, searcher, queries, qrels, **kw):
        calls.append((name, sorted(queries), kw))
        return {"steps": kw["max_steps"], "train_seconds": 1.0, "rollouts": 4, "adapter": name}

    fake = types.SimpleNamespace(
        training_set=lambda att: ({"s1": "q one", "s2": "q two"}, {"s1": {"a": 1}, "s2": {"b": 1}}),
        hard_subset=lambda q, r, searcher: ({"s2": q["s2"]}, {"s2": dict(r["s2"])}),
        room_subset=lambda q, r, searcher: ({}, {}),
        train_rewriter=train_rewriter)
    monkeypatch.setitem(sys.modules, "qrlib.methods.rlqr.pipeline", fake)
    monkeypatch.setattr(pkg, "pipeline", fake, raising=False)


def test_train_all_trains_a_rewriter_per_index_retriever_and_set(monkeypatch, capsys):
    calls = []
    _fake_pipeline(monkeypatch, calls)
    summaries, sizes = study.train_all({"x": None}, {("x", "bm25"): Retr()}, ["bm25"],
                                       ["all", "hard", "room"], run_dir="r", train_steps=8,
                                       stop=["</answer>"], lora_r=8, k=3, model="m")
    assert list(summaries) == [("x", "bm25", "all"), ("x", "bm25", "hard")]
    assert sizes.questions.tolist() == [2, 1, 0]
    assert [c[0] for c in calls] == ["rlqr-x-bm25", "rlqr-x-bm25-hard"]
    assert calls[1][1] == ["s2"]
    kw = calls[0][2]
    assert (kw["lora_alpha"], kw["save_steps"], kw["stop"], kw["k"]) == (16, 2, ["</answer>"], 3)
    assert "no room training question" in capsys.readouterr().out
    with pytest.raises(QrlibError, match="unknown train_sets"):
        study.train_all({"x": None}, {}, ["bm25"], ["most"], run_dir="r", train_steps=1)


def test_train_all_trains_the_levers_on_lever_datasets_only(monkeypatch):
    calls = []
    _fake_pipeline(monkeypatch, calls)
    retr = {(n, "bm25"): Retr() for n in ("x", "y")}
    summaries, sizes = study.train_all({"x": None, "y": None}, retr, ["bm25"], ["all", "hard"],
                                       run_dir="r", train_steps=4, lever_datasets=["y"])
    assert list(summaries) == [("x", "bm25", "all"), ("y", "bm25", "all"), ("y", "bm25", "hard")]
    assert sizes[["dataset", "training set"]].values.tolist() == [["x", "all"], ["y", "all"],
                                                                  ["y", "hard"]]
    with pytest.raises(QrlibError, match=r"lever_datasets \['z'\] are not in datasets; accepted: x, y"):
        study.train_all({"x": None, "y": None}, retr, ["bm25"], ["all"], run_dir="r",
                        train_steps=1, lever_datasets=["z"])


def test_curves_setting_and_captions():
    assert study.curves_setting("m", {("x", "bm25", "all"): LOG}) == \
        "m; from the logs: x/bm25/all 2 steps, 2 queries, 8 rollouts, 1.0 min"
    assert study.caption("14_synthesis", model="s", profile="cpu").startswith(
        "RL-QR query synthesis with s:")
    assert "policy, RL steps" in study.caption("14_rlqr_results", profile="cpu")
