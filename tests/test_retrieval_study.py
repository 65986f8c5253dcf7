"""qrlib.retrieval.study: notebook 02's tables on hand-made baseline results (no index)."""
from __future__ import annotations

from types import SimpleNamespace

import matplotlib
import numpy as np
import pandas as pd
import pytest

from qrlib.eval.findings import split_sentences
from qrlib.retrieval import study

matplotlib.use("Agg")


def _res(ndcg, run):
    metrics = {"nDCG@10": ndcg, "R@100": 0.9, "AP@10": 0.4, "RR@10": 0.5}
    return SimpleNamespace(metrics=metrics, run=run, per_query=pd.DataFrame({"q": list(run)}))


RUN_A = {"q1": [("d1", 2.0), ("d2", 1.0)], "q2": [("d3", 1.0)]}
RUN_B = {"q1": [("d2", 2.0), ("d1", 1.0)], "q2": [("d3", 1.0)]}
RESULTS = {("scifact", "bm25"): _res(0.70, RUN_A), ("scifact", "bm25-ref"): _res(0.68, RUN_B),
           ("scifact", "dense"): _res(0.60, RUN_A), ("small", "bm25"): _res(0.50, RUN_A)}
REFERENCE = {("scifact", "bm25"): 0.665, ("scifact", "bm25-ref"): 0.665,
             ("scifact", "dense"): 0.645}


def test_kinds_skip_dense_and_the_slow_reference_where_asked():
    kinds = ["bm25", "bm25-ref", "dense"]
    assert study.kinds_for("a", 10, kinds, ["a"], 100) == kinds
    assert study.kinds_for("b", 10, kinds, ["a"], 100) == ["bm25", "bm25-ref"]
    assert study.kinds_for("a", 101, kinds, ["a"], 100) == ["bm25", "dense"]


def test_baseline_table_compares_with_references_only_when_fair():
    full = study.baseline_table(RESULTS, REFERENCE, full=True, dense_model="minilm")
    row = full.set_index(["dataset", "retriever"]).loc[("scifact", "bm25")]
    assert list(full.columns) == ["dataset", "retriever", "queries", "nDCG@10", "R@100",
                                  "MAP@10", "MRR@10", "reference nDCG@10", "diff"]
    assert row["queries"] == 2 and row["diff"] == pytest.approx(0.035)
    other = study.baseline_table(RESULTS, REFERENCE, full=True, dense_model="bge")
    assert pd.isna(other.set_index(["dataset", "retriever"]).loc[("scifact", "dense"), "diff"])
    sub = study.baseline_table(RESULTS, REFERENCE, full=False, dense_model="minilm")
    assert sub["reference nDCG@10"].isna().all()
    refs, ref = study.references()
    assert {"bm25", "dense", "bm25-ref"} == {k for _, k in ref}
    assert all(ref[(d, "bm25-ref")] == ref[(d, "bm25")] for d, k in ref if k == "bm25")
    assert list(refs.columns) == ["table", "row", "column", "value", "source"]
    fig = study.plot_baselines(full, ["scifact", "small"], ["bm25", "bm25-ref", "dense"], ref, True)
    assert fig.axes[0].get_title().endswith("(black ticks: published references)")


def test_agreement_speed_numbers_and_findings():
    agreement = study.bm25_agreement(RESULTS, ["scifact", "small"])
    assert agreement.to_dict("records") == [{
        "dataset": "scifact", "nDCG@10 bm25s": 0.70, "nDCG@10 rank_bm25": 0.68,
        "nDCG@10 diff": pytest.approx(0.02), "mean top-10 overlap": 1.0, "same top-1": 0.5}]
    speed = study.speed_table([
        {"dataset": "scifact", "retriever": "bm25", "queries_per_s": 100.0},
        {"dataset": "scifact", "retriever": "bm25-ref", "queries_per_s": 4.0},
        {"dataset": "small", "retriever": "bm25", "queries_per_s": 50.0}])
    assert speed["speed-up vs rank_bm25"].tolist()[:2] == [25.0, 1.0]
    assert np.isnan(speed["speed-up vs rank_bm25"].iloc[2])
    base = study.baseline_table(RESULTS, REFERENCE, full=False, dense_model="minilm")
    hnsw = [{"dataset": "scifact", "top-10 recall vs flat": 0.99, "nDCG@10 HNSW": 0.6,
             "nDCG@10 flat": 0.6}]
    numbers = study.key_numbers(base, agreement, speed, hnsw)
    assert numbers["bm25.scifact.ndcg10"] == 0.70 and numbers["dense.scifact.recall100"] == 0.9
    assert numbers["agreement.scifact.top10_overlap"] == 1.0
    assert numbers["speedup.scifact"] == 25.0 and np.isnan(numbers["speedup.small"])
    assert numbers["hnsw.scifact.top10_recall_vs_flat"] == 0.99
    text = study.findings(["scifact", "small"], base, ["bm25", "bm25-ref", "dense"], agreement,
                          speed, hnsw, full=False)
    assert not any(line.startswith("- ") for line in text.splitlines())
    sentences = split_sentences(text)
    assert len(sentences) == 5, sentences
    assert sentences[0] == ("Raw-query nDCG@10 runs bm25 0.500 (small) to 0.700 (scifact); "
                            "bm25-ref 0.680 (scifact); dense 0.600 (scifact).")
    assert sentences[1].startswith("bm25s and rank_bm25 on identical tokens differ by at most "
                                   "0.0200 nDCG@10")
    assert sentences[2].startswith("bm25s answers 25.0x more queries per second")
    assert sentences[3] == ("HNSW recovers 0.9900 (scifact) of the exact top-10, its nDCG@10 "
                            "differing from the flat index's by +0.0000 (scifact).")
    assert sentences[4].startswith("These are subsets")
    full = study.baseline_table(RESULTS, REFERENCE, full=True, dense_model="minilm")
    text = study.findings(["scifact", "small"], full, ["bm25", "dense"], agreement.iloc[:0],
                          speed.iloc[:0], [], full=True)
    assert split_sentences(text)[1] == ("Beside the 2 published values ours differ by -0.045 "
                                        "(scifact/dense) to +0.035 (scifact/bm25) nDCG@10.")
    assert len(study.plot_speed(speed, ["scifact", "small"], ["bm25", "bm25-ref"]).axes) == 1
