"""The training-scale columns read from a run's own log (qrlib.eval.scale; issue 24 item 5)."""
import pandas as pd

from qrlib.eval.scale import (PLUMBING_STEPS, SCALE_COLUMNS, fmt_scale, log_scale, missing_scale,
                         plumbing_note, scale_columns)


def _log(steps, qids, rollouts=16, seconds=30.0):
    return pd.DataFrame({"step": list(range(1, steps + 1)),
                         "qids": [";".join(q) for q in qids],
                         "rollouts": [rollouts] * steps, "step_seconds": [seconds] * steps})


def test_log_scale_counts_steps_distinct_queries_rollouts_and_minutes():
    lg = _log(3, [["a", "b"], ["b", "c"], ["a", "d"]], rollouts=16, seconds=20.0)
    assert log_scale(lg) == {"steps": 3, "queries": 4, "rollouts": 48.0, "minutes": 1.0}
    assert fmt_scale(log_scale(lg)) == "3 steps, 4 queries, 48 rollouts, 1.0 min"


def test_a_curriculum_row_sums_steps_and_takes_the_union_of_questions():
    s1 = _log(4, [["a", "b"]] * 4, rollouts=16, seconds=30.0)
    s2 = _log(2, [["b", "c"]] * 2, rollouts=8, seconds=60.0)
    row = scale_columns("qwen", [s1, s2], test_queries=516, sft_steps=24)
    assert list(row)[:len(SCALE_COLUMNS)] == list(SCALE_COLUMNS)
    assert {c: row[c] for c in SCALE_COLUMNS} == {
        "policy": "qwen", "RL steps": 6, "SFT steps": 24, "train queries": 3, "rollouts": 80,
        "train min": 4.0, "test queries": 516}
    untrained = scale_columns(None, test_queries=10)
    assert untrained["policy"] == "-" and untrained["RL steps"] == 0
    assert scale_columns("q", test_queries=1, sft_queries=55)["train queries"] == 55
    assert missing_scale(["policy", "RL steps"]) == list(SCALE_COLUMNS[2:])


def test_only_short_trained_runs_are_labelled_plumbing_checks():
    assert plumbing_note(PLUMBING_STEPS - 1).endswith("a plumbing check, not a result")
    assert plumbing_note(PLUMBING_STEPS) == ""
    assert plumbing_note(0) == ""  # untrained rows are not training runs


def test_validity_columns_put_test_validity_beside_the_last_training_quarter():
    from qrlib.eval.scale import VALIDITY_COLUMNS, flagged, validity_columns

    lg = _log(8, [["a"]] * 8)
    lg["format_valid"] = [0.0] * 6 + [1.0, 0.5]  # last quarter: steps 7-8
    row = scale_columns("qwen", [lg], test_queries=300, test_valid=0.0)
    assert {c: row[c] for c in VALIDITY_COLUMNS[:3]} == {"test valid": 0.0, "train valid": 0.75,
                                                           "valid flag": "test valid < 0.9"}
    # a log without copy/echo columns: the collapse shares are unknown, not zero
    assert row["train copy"] != row["train copy"] and row["train echo"] != row["train echo"]
    assert "well-formed 0.00, training's last quarter 0.75" in flagged(row)
    ok = validity_columns(0.95, [lg])
    assert ok["valid flag"] == "" and flagged(ok) == ""
    # a curriculum: the final run's quarter; untrained rows have no training validity
    first = lg.assign(format_valid=1.0)
    assert scale_columns("q", [first, lg], test_queries=1, test_valid=1.0)["train valid"] == 0.75
    raw = scale_columns(None, test_queries=3)
    assert raw["test valid"] != raw["test valid"] and raw["valid flag"] == ""
    assert raw["train copy"] != raw["train copy"]
    assert flagged({"valid flag": float("nan")}) == ""  # an empty flag read back from a CSV


def test_collapse_columns_read_the_final_runs_last_quarter():
    lg = _log(8, [["a"]] * 8)
    lg["copy"] = [0.0] * 6 + [1.0, 0.8]   # last quarter: steps 7-8
    lg["echo"] = [1.0] * 6 + [0.0, 0.1]
    row = scale_columns("qwen", [lg.assign(copy=0.0, echo=0.0), lg], test_queries=5,
                        test_valid=1.0)
    assert (row["train copy"], row["train echo"]) == (0.9, 0.05)
