"""DeepRetrieval's SQL task pipeline (qrlib.methods.deepretrieval.sql_task) on a tiny database."""
from __future__ import annotations

import json
import sqlite3

import pandas as pd
import pytest

from qrlib.core.errors import QrlibError
from qrlib.generation.parsing import parse_completion
from qrlib.methods.deepretrieval import sql_task as T


@pytest.fixture
def rows(tiny_db):
    base = {"schema": "CREATE TABLE t (a INTEGER, b TEXT)", "db_id": "t", "db_path": str(tiny_db)}
    return [{**base, "qid": "spider-0", "question": "How many x?",
             "gold_sql": "SELECT count(*) FROM t WHERE b = 'x'"},
            {**base, "qid": "spider-1", "question": "The a values in order",
             "gold_sql": "SELECT a FROM t ORDER BY a DESC"},
            {**base, "qid": "spider-2", "question": "All b", "gold_sql": "SELECT b FROM t"}]


def test_execution_accuracy_follows_spiders_rules(rows):
    gen = {"spider-0": "SELECT count(*) FROM t WHERE b='x'",      # same rows
           "spider-1": "SELECT a FROM t ORDER BY a",              # gold has ORDER BY: wrong
           "spider-2": "DELETE FROM t"}                           # refused by the sandbox
    s = T.score_sql(rows, gen).set_index("qid")
    assert s.exec_match.tolist() == [True, False, False]
    assert s.executed.tolist() == [True, True, False] and s.loc["spider-2", "error"]
    s2 = T.score_sql(rows, {"spider-1": "SELECT a FROM t ORDER BY a DESC"}).set_index("qid")
    assert s2.loc["spider-1", "exec_match"] and s2.loc["spider-0", "error"] == "no statement"
    with sqlite3.connect(rows[0]["db_path"]) as con:                # nothing was deleted
        assert con.execute("SELECT count(*) FROM t").fetchone()[0] == 3


def test_gold_targets_parse_back_to_the_gold_sql(rows):
    out = T.gold_targets(rows, "deepretrieval/sql-nothink")
    for r in out:
        p = parse_completion(r["sft_target"], "deepretrieval-nothink")
        assert p.ok and p.queries == [r["gold_sql"]]
    with pytest.raises(QrlibError, match="without reasoning"):
        T.gold_targets(rows, "deepretrieval/sql-think")


def test_accuracy_by_level_and_levels_from_dev_json(tmp_path):
    empty = {"select": [False, [[0, [0, [0, 1, False], None]]]],
             "from": {"table_units": [["table_unit", 0]], "conds": []}, "where": [],
             "groupBy": [], "having": [], "orderBy": [], "limit": None, "intersect": None,
             "union": None, "except": None}
    two = json.loads(json.dumps(empty))
    two["select"][1].append([0, [0, [0, 2, False], None]])
    (tmp_path / "dev.json").write_text(json.dumps([{"sql": empty}, {"sql": two}, {"sql": empty}]))
    levels = T.spider_levels(tmp_path / "dev.json")
    assert levels == {"spider-0": "easy", "spider-1": "medium", "spider-2": "easy"}
    scores = pd.DataFrame({"qid": ["spider-0", "spider-1", "spider-2"],
                           "exec_match": [True, False, False]})
    assert T.accuracy_by_level(scores, levels) == {"all": pytest.approx(1 / 3), "easy": 0.5,
                                                   "medium": 0.0}
    with pytest.raises(QrlibError, match="no hardness level"):
        T.accuracy_by_level(scores.assign(qid=["x", "y", "z"]), levels)
    with pytest.raises(QrlibError, match="needs gold_sql"):
        T.score_sql([{"qid": "a", "schema": "", "question": "", "db_id": "", "db_path": ""}], {})


def test_gold_targets_start_like_the_select_prefill(rows):
    low = [{**rows[0], "gold_sql": "select count(*) from t"}]
    target = T.gold_targets(low, "deepretrieval/sql-nothink")[0]["sft_target"]
    assert target.startswith('<answer>{"query": "SELECT count(*) from t')


def test_sample_questions_is_seeded_and_sorted(rows):
    a = T.sample_questions(rows, 2, seed=1)
    assert a == T.sample_questions(list(reversed(rows)), 2, seed=1)
    assert [r["qid"] for r in a] == sorted(r["qid"] for r in a) and len(a) == 2
    assert len(T.sample_questions(rows, None)) == 3 == len(T.sample_questions(rows, 10))
    with pytest.raises(QrlibError, match="positive number"):
        T.sample_questions(rows, 0)


def test_gold_sql_scores_one_and_databases_do_not_cross_the_split(shared_data):
    """On real Spider databases: the gold query matches itself through the sandbox (the
    comparison is not broken), a wrong one does not, and no database is in both parts."""
    from qrlib.data.datasets import load_spider
    from qrlib.data.rows import rows_from_spider

    sp = load_spider(shared_data / "spider-dev")
    train, test = rows_from_spider(sp, "train"), rows_from_spider(sp, "test")
    assert not {r["db_id"] for r in train} & {r["db_id"] for r in test}
    rows = T.sample_questions(test, 25, seed=0)
    s = T.score_sql(rows, {r["qid"]: r["gold_sql"] for r in rows})
    assert s.exec_match.all() and s.executed.all()
    wrong = T.score_sql(rows, {r["qid"]: "SELECT 1" for r in rows})
    assert wrong.executed.all() and wrong.exec_match.mean() < 0.2
    levels = T.spider_levels(shared_data / "spider-dev" / "dev.json")
    assert set(T.accuracy_by_level(s, levels)) >= {"all", "easy", "medium"}
