"""The one comparison schema (qrlib.eval.compare): values, scale checks and one-line errors."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from qrlib.core.errors import QrlibError
from qrlib.eval import compare as C
from qrlib.eval.scale import SCALE_COLUMNS

KW = dict(paper="acqo", dataset="2wiki", retriever="bm25", metric="nDCG@10",
          baseline="raw question")


def _scores(n=50, shift=0.05, seed=1):
    rng = np.random.default_rng(seed)
    base = rng.uniform(0, 1, n)
    return ({f"q{i}": float(b + shift + rng.normal(0, 0.02)) for i, b in enumerate(base)},
            {f"q{i}": float(b) for i, b in enumerate(base)})


def test_a_row_has_every_column_and_the_paired_difference():
    a, b = _scores()
    row = C.compare(a, b, method="ACQO", kind="trained", resamples=2000, **KW)
    assert tuple(row) == C.COMPARISON_COLUMNS
    assert row["diff"] == pytest.approx(np.mean([a[q] - b[q] for q in a]))
    assert row["score"] == pytest.approx(np.mean(list(a.values())))
    assert row["lo"] < row["diff"] < row["hi"] and row["lo"] > 0
    assert row["wins"] + row["losses"] + row["ties"] == 50
    assert row["test queries"] == 50 and row["RL steps"] == 0 and row["policy"] == "-"


def test_a_method_no_better_than_its_baseline_has_an_interval_over_zero():
    a, b = _scores(shift=0.0)
    row = C.compare(a, b, method="copy", kind="untrained", resamples=2000, **KW)
    assert row["lo"] < 0 < row["hi"]
    assert "is not distinguishable from" in C.describe(row)


def test_scale_must_match_the_paired_queries_and_name_every_column():
    a, b = _scores(n=10)
    scale = dict(policy="qwen", **{"RL steps": 60, "SFT steps": 0, "train queries": 200,
                                   "rollouts": 960, "train min": 30.0, "test queries": 9})
    with pytest.raises(QrlibError, match="9 test queries, the scores pair 10"):
        C.compare(a, b, method="m", kind="trained", scale=scale, **KW)
    with pytest.raises(QrlibError, match="scale lacks rollouts"):
        C.compare(a, b, method="m", kind="trained",
                  scale={k: v for k, v in scale.items() if k != "rollouts"}, **KW)
    row = C.compare(a, b, method="m", kind="trained", scale={**scale, "test queries": 10}, **KW)
    assert "60 RL steps" in C.describe(row) and "plumbing" not in C.describe(row)


def test_bad_input_gets_one_line_errors():
    a, b = _scores(n=5)
    with pytest.raises(QrlibError, match="kind 'rl' is not one of"):
        C.compare(a, b, method="m", kind="rl", **KW)
    with pytest.raises(QrlibError, match="only one side"):
        C.compare({**a, "extra": 1.0}, b, method="m", kind="trained", **KW)
    with pytest.raises(QrlibError, match="method must be a non-empty string"):
        C.compare(a, b, method=" ", kind="trained", **KW)
    with pytest.raises(QrlibError, match="t.csv: not a comparison table, it lacks dataset"):
        C.check_comparisons(pd.DataFrame({"paper": ["x"]}), "t.csv")


def test_table_order_duplicates_and_selection_by_column():
    a, b = _scores(n=20)
    rows = [C.compare(a, b, method="ACQO", kind="trained", resamples=500, **KW),
            C.compare(b, b, method="raw question", kind="baseline", resamples=500, **KW)]
    df = C.comparison_table(rows)
    assert list(df.columns) == list(C.COMPARISON_COLUMNS)
    assert C.select(df, kind="trained", **{"baseline kind": "baseline"}).method.tolist() == ["ACQO"]
    assert len(C.select(df, kind=["trained", "baseline"], **{"test queries": 20})) == 2
    with pytest.raises(QrlibError, match="no column nope"):
        C.select(df, nope=1)
    with pytest.raises(QrlibError, match="appears 2 times"):
        C.comparison_table(rows + rows[:1])
    assert set(SCALE_COLUMNS) <= set(df.columns)


def test_a_flagged_row_carries_its_validity_and_says_so_in_its_sentence():
    from qrlib.eval.scale import scale_columns

    a, b = _scores()
    lg = pd.DataFrame({"step": [1, 2, 3, 4], "qids": ["q1"] * 4, "rollouts": [16] * 4,
                       "step_seconds": [10.0] * 4, "format_valid": [1.0, 1.0, 1.0, 0.99]})
    row = C.compare(a, b, method="trained", kind="trained", resamples=500,
                    scale=scale_columns("qwen", [lg], test_queries=50, test_valid=0.0), **KW)
    assert row["valid flag"] == "test valid < 0.9" and row["train valid"] == 0.99
    assert "flagged: test outputs well-formed 0.00, training's last quarter 0.99" in C.describe(row)
    # a table written before the validity columns existed still reads as a comparison table
    old = C.comparison_table([row]).drop(columns=["test valid", "train valid", "valid flag"])
    assert C.check_comparisons(old, "old.csv") is old and "flagged" not in C.describe(
        old.iloc[0].to_dict())


def test_saved_comparisons_keep_every_rows_per_query_values(tmp_path):
    a, b = _scores(n=12)
    rows = [C.compare(a, b, method="ACQO", kind="trained", resamples=200, **KW),
            C.compare({q: v + 0.1 for q, v in b.items()}, b, method="rule", kind="model-free",
                      resamples=200, **KW)]
    df = C.comparison_table(rows)
    paths = C.save_comparisons(df[df.kind != "nope"], "07_comparisons", tmp_path)
    pq = C.read_per_query(paths["per_query"])
    assert list(pq.columns) == list(C.PER_QUERY_COLUMNS)
    assert sorted(pq.method.unique()) == ["ACQO", "raw question", "rule"]
    assert len(pq) == 3 * 12  # the shared baseline is written once
    acqo = pq[pq.method == "ACQO"].set_index("qid")["value"]
    assert acqo.to_dict() == pytest.approx(a)  # full precision, not the table's rounding
    # the saved values give back the row's difference
    raw = pq[pq.method == "raw question"].set_index("qid")["value"]
    assert (acqo - raw).mean() == pytest.approx(df.iloc[0]["diff"])


def test_a_table_without_per_query_values_or_with_two_values_is_refused(tmp_path):
    a, b = _scores(n=6)
    row = C.compare(a, b, method="ACQO", kind="trained", resamples=200, **KW)
    with pytest.raises(QrlibError, match="carries no per-query values"):
        C.save_comparisons(pd.DataFrame([dict(row)]), "x", tmp_path)
    assert not list(tmp_path.iterdir())  # nothing half-written
    other = C.compare({q: v + 1 for q, v in a.items()}, b, method="ACQO", kind="trained",
                      resamples=200, **{**KW, "baseline": "other"})
    with pytest.raises(QrlibError, match="ACQO on 2wiki/bm25 .nDCG@10. has two values"):
        C.comparison_table([row, other])
