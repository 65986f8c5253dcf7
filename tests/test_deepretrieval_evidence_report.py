"""The steps of notebook 17 (qrlib.methods.deepretrieval.evidence_report) on synthetic scored
rewrites (no model, no corpus)."""
from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from qrlib.core.errors import QrlibError
from qrlib.eval.compare import comparison_table
from qrlib.methods.deepretrieval import evidence_report as R

NS = (1, 5)
HN = ["H@1", "H@5"]
QIDS = ["q1", "q2"]


def test_run_datasets_and_the_pairs_with_both_runs():
    got = R.run_datasets(["nothink", "think"], ["a", "b"], ["b"])
    assert got == {"nothink": ["a", "b"], "think": ["b"]}
    assert R.both_runs(["a", "b"], got) == ["b"]
    assert R.run_datasets(["room"], ["a"], None) == {"room": ["a"]}
    with pytest.raises(QrlibError, match="unknown run"):
        R.run_datasets(["sometimes"], ["a"], None)
    with pytest.raises(QrlibError, match="not in datasets"):
        R.run_datasets(["think"], ["a"], ["c"])
    got = R.run_datasets(["nothink", "think", "room"], ["a", "b"], ["b"], ["a"])
    assert got == {"nothink": ["a", "b"], "think": ["b"], "room": ["a"]}
    with pytest.raises(QrlibError, match=r"room_datasets \['c'\] are not in datasets; accepted: a, b"):
        R.run_datasets(["room"], ["a", "b"], None, ["c"])


def _hits(h1, h5):
    return pd.DataFrame({"H@1": h1, "H@5": h5, "first_rank": [1.0, None]}, index=QIDS)


def _scored(h1, h5, injected, completion="<answer>{\"query\": \"x y\"}</answer>"):
    rw = pd.DataFrame({"format_ok": [True, False], "modified": [True, True],
                       "gen_tokens": [4, 6], "completion": [completion] * 2}, index=QIDS)
    inj = pd.DataFrame({"has_injection": injected, "question": ["who?", "where?"],
                        "rewrite": ["who paris", "where"], "injected": [["paris"], []],
                        "cleaned": ["who", "where"]}, index=QIDS)
    return {"rewrites": rw, "injection": inj, "rewrite": _hits(h1, h5),
            "cleaned": _hits([0, 0], [0, 1])}


def _log():
    return pd.DataFrame({"step": [1, 2], "qids": ["t1", "t2"], "rollouts": [4, 4],
                         "step_seconds": [6.0, 6.0], "format_valid": [1.0, 1.0],
                         "reward": [0.5, 1.5]})


def _results():
    out = {}
    for run in ("nothink", "think"):
        out[f"untrained {run}", "toy"] = _scored([0, 0], [0, 1], [False, False])
        out[f"trained {run}", "toy"] = _scored([1, 0], [1, 1], [True, False])
    return out


def test_evidence_tables_rows_comparisons_and_records():
    results, raw = _results(), {"toy": _hits([0, 1], [0, 1])}
    test = {"toy": SimpleNamespace(questions={"q1": "who?", "q2": "where?"})}
    logs = {("toy", "nothink"): _log(), ("toy", "think"): _log()}
    rows, cmp_rows = R.evidence_tables(results, raw, test, logs, ["nothink", "think"],
                                       {"nothink": ["toy"], "think": ["toy"]}, ["toy"],
                                       model="m", ns=NS, resamples=200, seed=0)
    assert [(r["rewriter"], r["query"]) for r in rows[:3]] == [
        ("untrained nothink", "raw question"), ("untrained nothink", "rewrite"),
        ("untrained nothink", "cleaned rewrite")]
    assert len(rows) == 4 * 3 and rows[4]["injection rate"] == 0.5
    cmp = comparison_table(cmp_rows)
    assert len(cmp) == 4 * 3 * 2 + 2 * 2           # + think vs nothink, per state and N
    think = cmp[cmp.method.str.contains(" think: ") & cmp.baseline.str.endswith("nothink: rewrite")]
    assert think[["method", "kind", "metric", "diff"]].values.tolist() == [
        ["untrained think: rewrite", "untrained", "H@1", 0.0],
        ["untrained think: rewrite", "untrained", "H@5", 0.0],
        ["trained think: rewrite", "trained", "H@1", 0.0],
        ["trained think: rewrite", "trained", "H@5", 0.0]]
    trained = cmp[cmp.kind == "trained"]
    assert (trained["RL steps"] == 2).all() and (cmp[cmp.kind == "untrained"]["RL steps"] == 0).all()
    pairs, intervals = R.outcome_pairs(results, raw, cmp, "H@1")
    assert list(pairs) == ["toy: untrained nothink: rewrite", "toy: trained nothink: rewrite",
                           "toy: untrained think: rewrite", "toy: trained think: rewrite"]
    raw_h, new_h = pairs["toy: trained nothink: rewrite"]
    assert raw_h == {"q1": 0, "q2": 1} and new_h == {"q1": 1, "q2": 0}
    assert intervals["toy: trained nothink: rewrite"].startswith("+0.000")
    rec = R.result_records(results, raw, ["toy"], HN)
    assert rec == {"toy.untrained nothink.injection_rate": 0.0, "toy.untrained nothink.H@5": 0.5,
                   "toy.trained nothink.injection_rate": 0.5, "toy.trained nothink.H@5": 1.0,
                   "toy.untrained think.injection_rate": 0.0, "toy.untrained think.H@5": 0.5,
                   "toy.trained think.injection_rate": 0.5, "toy.trained think.H@5": 1.0,
                   "toy.raw.H@5": 0.5}


def test_injection_examples_and_extra_sentences():
    results = _results()
    ex = R.injection_examples(results, 3)
    assert ex[["rewriter", "rewrite", "injected", "cleaned", "first rank rewrite"]].values.tolist() \
        == [["trained nothink", "who paris", "paris", "who", 1.0],
            ["trained think", "who paris", "paris", "who", 1.0]]
    reasoning_rows = pd.DataFrame({"rewriter": ["trained think", "trained nothink"],
                                   "dataset": ["toy", "toy"], "test echo share": [0.25, 0.0],
                                   "test reasoning words": [12.25, 0.0]})
    assert R.extra_sentences(reasoning_rows, results) == [
        "With reasoning, trained think on toy reasons in 12.2 words on average and copies the "
        "prompt's example chain in 25% of test rewrites.",
        "Trained rewrites put an answer string into the query for 50.0%-50.0% of the questions "
        "(string match)."]
    assert R.extra_sentences(reasoning_rows.iloc[1:], {}) == []
    no_example = reasoning_rows.assign(**{"test echo share": [float("nan"), float("nan")]})
    assert R.extra_sentences(no_example.iloc[:1], {}) == [  # no example chain shown: no NaN %
        "With reasoning, trained think on toy reasons in 12.2 words on average."]


def test_reasoning_table_reads_test_lengths_and_training_quarters():
    results = {("trained nothink", "toy"): _scored([1, 0], [1, 1], [True, False])}
    test = {"toy": SimpleNamespace(questions={"q1": "who?", "q2": "where?"})}
    lengths = {("toy", "nothink"): pd.DataFrame({"step": [1, 2], "reasoning words": [0.0, 0.0],
                                                 "query words": [2.0, 4.0],
                                                 "echo share": [float("nan")] * 2})}
    t = R.reasoning_table(results, test, {("toy", "nothink"): _log()}, lengths, {"nothink": ""}, HN)
    row = t.iloc[0]
    assert (row["H@1"], row["format ok"], row["gen tokens"]) == (0.5, 0.5, 5.0)
    assert (row["test reasoning words"], row["test query words"]) == (0.0, 2.0)
    assert (row["reward early"], row["reward late"]) == (0.5, 1.5)
    assert (row["query words early"], row["query words late"]) == (2.0, 4.0)
