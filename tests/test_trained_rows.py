"""The trained-row table (qrlib.eval.trained_rows): each trained row against the raw query
and, paired on the same queries, against notebook 19's prompting baseline."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from qrlib.core.errors import QrlibError
from qrlib.eval import compare as C
from qrlib.eval import trained_rows as T
from qrlib.eval.scale import scale_columns


def _log(copy=0.0, echo=0.0, steps=60):
    return pd.DataFrame({"step": range(1, steps + 1), "qids": ["a;b"] * steps,
                         "rollouts": [16] * steps, "step_seconds": [20.0] * steps,
                         "format_valid": [1.0] * steps, "copy": [copy] * steps,
                         "echo": [echo] * steps})


def _notebook(tmp_path, raw, trained, *, name="05", dataset="scifact", log=None):
    KW = dict(paper="deepretrieval", dataset=dataset, retriever="bm25", metric="nDCG@10")
    scale = scale_columns("qwen", [log if log is not None else _log()],
                          test_queries=len(raw), test_valid=0.98)
    rows = [C.compare(trained, raw, method="trained-bm25", kind="trained", baseline="raw",
                      scale=scale, resamples=500, **KW),
            C.compare(raw, raw, method="untrained", kind="untrained", baseline="raw",
                      resamples=500, **KW)]
    C.save_comparisons(C.comparison_table(rows), f"{name}_comparisons", tmp_path)


def _prompting(tmp_path, raw, best):
    KW = dict(paper="prompting", dataset="scifact", retriever="bm25", metric="nDCG@10")
    rows = [C.compare(best, raw, method="best-prompt", kind="untrained", baseline="raw",
                      resamples=500, **KW)]
    C.save_comparisons(C.comparison_table(rows), "19_comparisons", tmp_path)


def _scores(n=40, seed=0):
    rng = np.random.default_rng(seed)
    raw = {f"q{i}": float(v) for i, v in enumerate(rng.uniform(0, 1, n))}
    return raw, {q: v + 0.05 for q, v in raw.items()}, {q: v + 0.02 for q, v in raw.items()}


def test_a_trained_row_is_paired_with_the_prompting_baseline_on_its_queries(tmp_path):
    raw, trained, best = _scores()
    _notebook(tmp_path, raw, trained)
    _prompting(tmp_path, raw, best)
    cmp, pq, missing = T.load_notebook_tables(tmp_path, ["05_vanilla_rl", "08_sage"])
    assert missing == ["08_sage"]
    table, rows = T.trained_table(cmp, pq, T.prompting_rows(tmp_path), resamples=500)
    assert list(table.columns) == list(T.TRAINED_COLUMNS) and len(table) == 1  # untrained left out
    r = table.iloc[0]
    assert r["vs raw"] == pytest.approx(0.05) and r["vs raw verdict"] == "beats"
    assert r["vs prompting"] == pytest.approx(0.03) and r["vs prompting verdict"] == "beats"
    assert r["prompting score"] == pytest.approx(np.mean(list(best.values())))
    assert r["collapse"] == "none (copy 0.00, echo 0.00)" and r["scale note"] == ""
    assert r["test valid"] == 0.98 and r["RL steps"] == 60
    assert rows[0]["baseline kind"] == "untrained" and rows[0]["test queries"] == 40


def test_rows_that_cannot_be_paired_say_why(tmp_path):
    raw, trained, best = _scores()
    other = {q: v + 0.1 for q, v in raw.items()}  # another collection: the raw scores differ
    _notebook(tmp_path, other, trained, log=_log(copy=0.95, steps=20))
    _prompting(tmp_path, raw, best)
    cmp, pq, _ = T.load_notebook_tables(tmp_path, ["05_vanilla_rl"])
    r = T.trained_table(cmp, pq, T.prompting_rows(tmp_path), resamples=500)[0].iloc[0]
    assert r["vs prompting verdict"] == "not compared" and r["vs prompting"] != r["vs prompting"]
    assert "raw query scores differ from notebook 19's on 40 of 40" in r["prompting note"]
    assert r["collapse"] == "collapsed: copy 0.95"
    assert r["scale note"] == "plumbing check, not a result"
    # a dataset notebook 19 did not score, and no notebook 19 at all
    _notebook(tmp_path, raw, trained, name="14", dataset="nfcorpus")
    cmp, pq, _ = T.load_notebook_tables(tmp_path, ["14_rlqr"])
    r = T.trained_table(cmp, pq, T.prompting_rows(tmp_path), resamples=500)[0].iloc[0]
    assert r["prompting note"] == "notebook 19 has no prompting baseline on nfcorpus/bm25 in nDCG@10"
    r = T.trained_table(cmp, pq, None, resamples=500)[0].iloc[0]
    assert "has not written its per-query values" in r["prompting note"]


def test_per_query_values_that_disagree_with_the_table_are_refused(tmp_path):
    raw, trained, best = _scores()
    _notebook(tmp_path, raw, trained)
    cmp, pq, _ = T.load_notebook_tables(tmp_path, ["05_vanilla_rl"])
    pq["05_vanilla_rl"].loc[pq["05_vanilla_rl"].method == "trained-bm25", "value"] += 0.5
    with pytest.raises(QrlibError, match="do not average to its table score"):
        T.trained_table(cmp, pq, None)
    assert T.collapse_verdict(float("nan"), 0.0) == "unknown"
    assert T.collapse_verdict(0.1, 0.97) == "collapsed: echo 0.97"


def test_a_rewriter_that_changes_no_test_score_is_a_no_op_collapse(tmp_path):
    # 05's bm25 expansion at c72e453: low copy share in training, yet every one of its 300
    # test claims scored exactly what the raw claim scored (one glued OOV token appended)
    raw, trained, _ = _scores()
    _notebook(tmp_path, raw, dict(raw), log=_log(copy=0.05))
    cmp, pq, _ = T.load_notebook_tables(tmp_path, ["05_vanilla_rl"])
    r = T.trained_table(cmp, pq, None, resamples=200)[0].iloc[0]
    assert r["equal to raw"] == 1.0 and r["vs raw"] == 0.0
    assert r["collapse"] == "collapsed: no-op at test (equal to raw 1.00) (copy 0.05, echo 0.00)"
    # one query moved: not a no-op, and the share says how close it came
    moved = {**raw, "q0": raw["q0"] + 0.2}
    _notebook(tmp_path, raw, moved, log=_log(copy=0.05))
    cmp, pq, _ = T.load_notebook_tables(tmp_path, ["05_vanilla_rl"])
    r = T.trained_table(cmp, pq, None, resamples=200)[0].iloc[0]
    assert r["equal to raw"] == pytest.approx(39 / 40)
    assert r["collapse"] == "none (copy 0.05, echo 0.00)"
    assert T.equal_share(trained, raw) == 0.0
    assert T.collapse_verdict(0.95, 0.0, equal=1.0) == \
        "collapsed: no-op at test (equal to raw 1.00), copy 0.95"
    assert T.collapse_verdict(float("nan"), 0.0, equal=1.0) == \
        "collapsed: no-op at test (equal to raw 1.00); training shares unknown"


def test_a_row_re_evaluated_unchanged_by_a_later_notebook_is_listed_once(tmp_path):
    raw, trained, best = _scores()
    _notebook(tmp_path, raw, trained, name="07")
    _notebook(tmp_path, raw, trained, name="16")  # the same adapter on the same test set
    cmp, pq, _ = T.load_notebook_tables(tmp_path, ["07_acqo_stage2", "16_acqo_transfer"])
    table = T.trained_table(cmp, pq, None, resamples=200)[0]
    assert table.notebook.tolist() == ["07_acqo_stage2"]
    _notebook(tmp_path, raw, {q: v + 0.01 for q, v in trained.items()}, name="16")
    cmp, pq, _ = T.load_notebook_tables(tmp_path, ["07_acqo_stage2", "16_acqo_transfer"])
    assert len(T.trained_table(cmp, pq, None, resamples=200)[0]) == 2  # another evaluation


def test_results_sections_render_the_table_and_the_seed_spread(tmp_path):
    from qrlib.core.io import save_table
    from qrlib.workbook import results
    from qrlib.workbook.resultsdoc import Doc
    from qrlib.workbook.trained_sections import seeds_section, trained_rows_section

    raw, trained, best = _scores()
    tables = tmp_path / "tables" / "cpu"
    _notebook(tables, raw, trained)
    _prompting(tables, raw, best)
    cmp, pq, _ = T.load_notebook_tables(tables, ["05_vanilla_rl"])
    save_table(T.trained_table(cmp, pq, T.prompting_rows(tables), resamples=200)[0],
               "20_trained_rows", tables)
    # seed 1 of the headline row (it beats the raw query), a little weaker
    _notebook(tmp_path / "tables" / "cpu-seed1", raw, {q: v + 0.04 for q, v in raw.items()})
    d = Doc("cpu", tmp_path)
    text = trained_rows_section(d) + "\n" + seeds_section(d)
    assert "1 of 1 trained rows beat both the raw query and the prompting baseline" in text
    assert "| 05 | scifact/bm25 | nDCG@10 | trained-bm25 | +0.050 [" in text
    assert "| 05 | scifact/bm25 | trained-bm25 | raw | 2 | 0: +0.050 [" in text
    assert "| +0.045 | +0.040 to +0.050 | beats |" in text
    assert "(nan)" not in text  # a blank prompting note reads back from CSV as NaN
    assert results.audit(text, d) == []


def _sql(tmp_path, zero, sft, rl):
    """13's shape: no raw query; trained rows against the zero-shot model (untrained)."""
    KW = dict(paper="deepretrieval", dataset="spider-dev", retriever="sqlite",
              metric="execution accuracy", baseline="zero-shot", baseline_kind="untrained",
              resamples=500)
    scale = scale_columns("qwen", [_log()], test_queries=len(zero), test_valid=0.99)
    rows = [C.compare(zero, zero, method="zero-shot (think)", kind="untrained", **KW),
            C.compare(sft, zero, method="SFT on gold", kind="warm start", **KW),
            C.compare(rl, zero, method="RL from scratch", kind="trained", scale=scale, **KW)]
    C.save_comparisons(C.comparison_table(rows), "13_comparisons", tmp_path)


def test_rows_without_a_raw_query_are_listed_against_their_training_free_baseline(tmp_path):
    # 13 (text-to-SQL): the question is no query the database runs, so its trained rows
    # are measured against the zero-shot model; they must be in the table, not dropped
    from qrlib.workbook.trained_sections import headline_rows

    raw, trained, best = _scores()
    _notebook(tmp_path, raw, trained)
    zero = {q: float(i % 2) for i, q in enumerate(raw)}
    rl = {q: 1.0 for q in raw}                      # +0.5 over zero-shot on every odd query
    _sql(tmp_path, zero, dict(zero), rl)
    cmp, pq, _ = T.load_notebook_tables(tmp_path, ["05_vanilla_rl", "13_deepretrieval_sql"])
    table, rows = T.trained_table(cmp, pq, T.prompting_rows(tmp_path), resamples=300)
    sql = table[table.notebook == "13_deepretrieval_sql"].set_index("method")
    assert list(sql.index) == ["SFT on gold", "RL from scratch"]  # zero-shot (think) untrained
    r = sql.loc["RL from scratch"]
    assert r["vs raw verdict"] == T.NO_RAW and r["vs raw"] != r["vs raw"]
    assert r["vs prompting"] == pytest.approx(0.5) and r["vs prompting verdict"] == "beats"
    own = cmp["13_deepretrieval_sql"].set_index("method").loc["RL from scratch"]
    assert (r["vs prompting lo"], r["vs prompting hi"]) == (own["lo"], own["hi"])  # not redrawn
    assert r["prompting note"] == "no raw query in 13: against its training-free baseline, zero-shot"
    assert r["equal to raw"] != r["equal to raw"] and r["collapse"] == "none (copy 0.00, echo 0.00)"
    assert sql.loc["SFT on gold", "vs prompting verdict"] == "is not distinguishable from"
    assert len(rows) == 2  # SFT and RL against zero-shot; 05 unpaired (no notebook 19)
    saved = C.comparison_table(rows).set_index("method")  # 20_comparisons takes them as is
    assert saved.loc["RL from scratch", "lo"] == own["lo"]
    assert set(headline_rows(table).method) == {"trained-bm25", "RL from scratch"}
    text = T.findings(table, [])
    assert "2 (notebook 13) have no raw query" in text
    assert "of the rows without a raw query, 1 beat their training-free baseline: RL from " \
           "scratch (13, spider-dev/sqlite)" in text


def test_where_notebook_19_has_no_baseline_the_row_meets_its_own_untrained_model(tmp_path):
    # 17's shape: answer-hit H@1, which notebook 19 does not score; the same model with the
    # same prompt before training ("untrained X" beside "trained X") is the training-free row
    raw, trained, best = _scores()
    before = {q: v + 0.04 for q, v in raw.items()}
    KW = dict(paper="deepretrieval", dataset="hotpotqa-large", retriever="bm25", metric="H@1",
              baseline="raw question", resamples=500)
    scale = scale_columns("qwen", [_log()], test_queries=len(raw), test_valid=0.97)
    rows = [C.compare(before, raw, method="untrained think: rewrite", kind="untrained", **KW),
            C.compare(trained, raw, method="trained think: rewrite", kind="trained",
                      scale=scale, **KW),
            C.compare(trained, raw, method="trained room: rewrite", kind="trained",
                      scale=scale, **KW)]  # no "untrained room: rewrite" row: not compared
    C.save_comparisons(C.comparison_table(rows), "17_comparisons", tmp_path)
    _prompting(tmp_path, raw, best)
    cmp, pq, _ = T.load_notebook_tables(tmp_path, ["17_deepretrieval_evidence"])
    table, cmp_rows = T.trained_table(cmp, pq, T.prompting_rows(tmp_path), resamples=500)
    think, room = table.set_index("method").loc[["trained think: rewrite",
                                                 "trained room: rewrite"]].to_dict("records")
    assert think["vs prompting"] == pytest.approx(0.01) and think["vs raw verdict"] == "beats"
    assert think["prompting note"] == ("notebook 19 has no prompting baseline on hotpotqa-large/"
                                       "bm25 in H@1; against its own untrained model, same "
                                       "prompt: untrained think: rewrite")
    assert room["vs prompting verdict"] == "not compared"
    assert [c["baseline"] for c in cmp_rows] == ["untrained think: rewrite"]
    assert T.untrained_twin("ACQO") is None
    text = T.findings(table, [])
    assert "or where notebook 19 has none in the row's metric" in text
