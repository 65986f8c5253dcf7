"""The steps of notebook 13 (qrlib.methods.deepretrieval.sql_report) on synthetic rows and scores
(no database is opened, no model is loaded)."""
from __future__ import annotations

import pandas as pd

from qrlib import plots

from qrlib.eval.compare import comparison_table
from qrlib.methods.deepretrieval import sql_report as Q


def _rows(ids, db):
    return [{"qid": q, "db_id": db, "question": f"question {q}", "gold_sql": f"SELECT {q}"}
            for q in ids]


LEVELS = {"s1": "easy", "s2": "medium", "s3": "hard", "s4": "easy", "s5": "extra"}


def test_split_table_counts_databases_questions_and_levels():
    train_all = _rows(["s1", "s2"], "a") + _rows(["s3"], "b")
    test_all = _rows(["s4", "s5"], "c")
    t = Q.split_table(train_all, test_all, train_all[:2], test_all, LEVELS)
    assert t.to_dict("records") == [
        {"part": "train", "databases": 2, "questions": 3, "used": 2, "easy": 1, "medium": 1,
         "hard": 0, "extra": 0},
        {"part": "test", "databases": 1, "questions": 2, "used": 2, "easy": 1, "medium": 0,
         "hard": 0, "extra": 1}]


def test_run_specs_and_contracts():
    specs = Q.run_specs(_rows(["s1"], "a"), rl_prompt="deepretrieval/sql-nothink",
                        prefill='<answer>{"query": "SELECT', sft_steps=3,
                        think_prompt="deepretrieval/sql-think")
    assert [s["run"] for s in specs.values()] == ["scratch", "coldstart", "think"]
    assert specs["RL after SFT"]["sft_steps"] == 3 and "sft_target" in specs["RL after SFT"]["rows"][0]
    c = Q.run_contract(specs["RL from scratch"], max_new_tokens=32, think_max_new_tokens=64)
    t = Q.run_contract(specs["RL from scratch (think)"], max_new_tokens=32, think_max_new_tokens=64)
    assert (c.max_new_tokens, c.stop, c.fmt) == (32, ("</answer>",), "deepretrieval-nothink")
    assert t.max_new_tokens == 64 and t.prefill == specs["RL from scratch (think)"]["prefill"]
    cfg = Q.sql_config(specs["RL after SFT"], c, max_steps=8, lora_r=4, model="smollm2", seed=1)
    assert (cfg.name, cfg.algorithm, cfg.sft_steps, cfg.lora_alpha, cfg.save_steps,
            cfg.max_completion_length, cfg.stop) == ("sql-coldstart", "dapo", 3, 8, 2, 32,
                                                     ["</answer>"])
    models = Q.eval_models({"deepretrieval/sql-nothink": c}, ["deepretrieval/sql-nothink"],
                           {"RL after SFT": {"adapter": "A", "sft_adapter": None}})
    assert models == {"zero-shot (nothink)": (None, c), "RL after SFT": ("A", "A")}


def _scores(matches):
    return pd.DataFrame({"qid": ["s4", "s5"], "exec_match": matches, "executed": [True, False]})


def _gen():
    return pd.DataFrame({"qid": ["s4", "s5"], "sql": ["SELECT 1", ""], "format_ok": [True, False],
                         "gen_tokens": [10, 20], "think_words": [0, 0]})


def _log():
    return pd.DataFrame({"step": [1, 2], "qids": ["s1", "s2"], "rollouts": [4, 4],
                         "step_seconds": [30.0, 30.0], "format_valid": [1.0, 1.0]})


def test_table3_comparisons_records_examples_and_best_sentence():
    scores = {Q.BASE: _scores([False, False]), Q.SFT_ROW: _scores([True, False]),
              "RL after SFT": _scores([True, True])}
    gen = {k: _gen() for k in scores}
    scale = Q.row_scales({"RL after SFT": _log()}, {"RL after SFT": {"sft_steps": 2}}, gen,
                         model="m", n_test=2, sft_steps=2, n_train=5)
    assert (scale["RL after SFT"]["RL steps"], scale["RL after SFT"]["SFT steps"]) == (2, 2)
    assert (scale[Q.SFT_ROW]["RL steps"], scale[Q.SFT_ROW]["SFT steps"],
            scale[Q.SFT_ROW]["train queries"]) == (0, 2, 5)
    assert scale[Q.BASE]["RL steps"] == 0 and scale[Q.BASE]["test valid"] == 0.5
    t = Q.table3(scores, gen, LEVELS, scale)
    assert t["execution accuracy"].tolist() == [0.0, 0.5, 1.0]
    assert t.set_index("model").loc[Q.SFT_ROW, ["easy", "extra", "ran", "gen tokens"]].tolist() == \
        [1.0, 0.0, 0.5, 15.0]
    assert pd.isna(t["medium"]).all()
    cmp = comparison_table(Q.comparison_rows(scores, scale, resamples=200, seed=0))
    assert cmp[["method", "kind", "diff"]].values.tolist() == [[Q.SFT_ROW, "warm start", 0.5],
                                                              ["RL after SFT", "trained", 1.0]]
    pairs, intervals = Q.outcome_pairs(scores, cmp)
    assert list(pairs) == [Q.SFT_ROW, "RL after SFT"] and intervals["RL after SFT"].startswith("+1.000")
    assert plots.outcome_counts(*pairs[Q.SFT_ROW]) == {"both": 0, "method only": 1,
                                                       "baseline only": 0, "neither": 1}
    rec = Q.result_records(t, cmp)
    assert list(rec) == [f"sql.{Q.BASE}.exec_acc", f"sql.{Q.SFT_ROW}.exec_acc",
                         "sql.RL after SFT.exec_acc", f"sql.{Q.SFT_ROW} minus {Q.BASE}",
                         f"sql.RL after SFT minus {Q.BASE}"]
    assert rec[f"sql.RL after SFT minus {Q.BASE}"][0] == 1.0
    ex = Q.examples(gen, scores, _rows(["s4", "s5"], "c"), 1)
    assert ex[["model", "generated", "match", "gold"]].values.tolist() == [
        [Q.BASE, "SELECT 1", False, "SELECT s4"], ["RL after SFT", "SELECT 1", True, "SELECT s4"]]
    assert Q.best_sentence(t) == ("The highest execution accuracy is 1.000 (RL after SFT; 50% of "
                                  "its statements ran).")
    assert Q.comparison_rows({"RL after SFT": scores["RL after SFT"]}, scale) == []


def test_row_scales_without_an_sft_row_leave_it_out():
    gen = {Q.BASE: _gen()}
    assert set(Q.row_scales({}, {}, gen, model="m", n_test=2, sft_steps=0, n_train=3)) == {Q.BASE}
