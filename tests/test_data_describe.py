"""qrlib.data.describe: notebook 01's tables on hand-made collections (no data folder)."""
from __future__ import annotations

from types import SimpleNamespace

import matplotlib
import numpy as np
import pandas as pd
import pytest

from qrlib.data import describe
from qrlib.eval.findings import split_sentences

matplotlib.use("Agg")


def _ds(corpus, queries, qrels, meta=None):
    return SimpleNamespace(corpus=corpus, queries=queries, qrels=qrels,
                           query_meta=meta or {q: {} for q in queries},
                           doc_text=lambda d: f"{corpus[d]['title']} {corpus[d]['text']}".strip())


CORPUS = {"d1": {"title": "A", "text": "one two"}, "d2": {"title": "B", "text": "one"},
          "d3": {"title": "", "text": "x y z w"}}


def test_dataset_stats_counts_judgments_grades_and_lengths():
    test = _ds(CORPUS, {"q1": "a b c", "q2": "a"}, {"q1": {"d1": 2, "d2": 0}, "q2": {"d3": 1}})
    train = _ds(CORPUS, {"q3": "a b"}, {"q3": {"d1": 1}})
    loaded = {("toy", "train"): train, ("toy", "test"): test}
    stats, q, d = describe.dataset_stats(loaded, ["train", "test"], None, seed=0)
    row = stats.set_index("split").loc["test"]
    assert (row["docs"], row["queries"], row["qrels"], row["max judged"]) == (3, 2, 3, 2)
    assert row["judged/query"] == 1.5 and row["relevant/query"] == 1.0
    assert row["grades"] == "0:1 1:1 2:1"
    assert row["query words (mean)"] == 2.0 and row["query words (max)"] == 3
    assert row["doc words (mean)"] == pytest.approx(3.0) and row["doc words (median)"] == 3.0
    assert q.to_dict("records")[0] == {"dataset": "toy", "split": "train", "words": 2}
    assert len(d) == 3  # document lengths once per corpus (at its last split)
    numbers = describe.key_numbers(stats)
    assert numbers == {"toy.train.queries": 1, "toy.train.relevant_per_query": 1.0,
                       "toy.docs": 3, "toy.test.queries": 2, "toy.test.relevant_per_query": 1.0}


def test_sample_ids_is_seeded_and_keeps_all_when_asked():
    ids = [f"d{i}" for i in range(10)]
    assert describe.sample_ids(ids, None, np.random.default_rng(0)) == sorted(ids)
    a = describe.sample_ids(ids, 3, np.random.default_rng(1))
    assert a == describe.sample_ids(ids, 3, np.random.default_rng(1)) and len(set(a)) == 3


def test_multihop_type_tables():
    hp_meta = {"q1": {"type": "bridge", "level": "hard"}, "q2": {}}
    loaded = {("hotpotqa-mini", "test"): _ds(CORPUS, {"q1": "a", "q2": "b"},
                                             {"q1": {"d1": 1}, "q2": {"d2": 1}}, hp_meta),
              ("2wikimultihopqa-mini", "test"): _ds(
                  CORPUS, {"q3": "c", "q4": "d"}, {"q3": {"d1": 1, "d2": 1}, "q4": {"d3": 1}},
                  {"q3": {"type": "comparison"}, "q4": {"type": "bridge_comparison",
                                                        "type_source": "inferred",
                                                        "num_supporting": 4}})}
    hp = describe.hotpot_questions(loaded, ["hotpotqa-mini", "scifact"], ["train", "test"])
    assert hp[["type", "level", "context", "hotpot split"]].values.tolist() == [
        ["bridge", "hard", "distractor", "dev"], ["unknown", "unknown", "distractor", "dev"]]
    types, ctx = describe.hotpot_tables(hp)
    assert types.questions.tolist() == [1, 1] and ctx.questions.tolist() == [2]
    tw = describe.twowiki_questions(loaded, ["train", "test"])
    assert tw[["type", "type source", "gold paragraphs"]].values.tolist() == [
        ["comparison", "label", 2], ["bridge_comparison", "inferred", 4]]
    assert describe.twowiki_types(tw).questions.tolist() == [1, 1]
    fig = describe.plot_multihop_types(hp, tw)
    assert len(fig.axes) >= 2
    fig = describe.plot_lengths(pd.DataFrame({"dataset": ["a"], "split": ["test"], "words": [3]}),
                                pd.DataFrame({"dataset": ["a"], "words": [30]}))
    assert fig.axes[0].get_title() == "Query length"


def test_corpus_row_and_findings():
    own = _ds(CORPUS, {"q1": "a"}, {"q1": {"d1": 1}})
    big = _ds({**CORPUS, "d4": {"title": "", "text": ""}}, {"q1": "a"}, {"q1": {"d1": 1}})
    rows = [describe.corpus_row("base own corpus", own), describe.corpus_row("base pooled", big)]
    assert rows[0]["judged fraction"] == pytest.approx(1 / 3)
    assert rows[1]["docs per judged doc"] == 4.0
    stats, _, _ = describe.dataset_stats({("toy", "test"): own}, ["test"], None, 0)
    text = describe.findings(stats, rows, "base")
    assert text.startswith("The test collection toy has 3 documents and 1 test queries with 1.00 "
                           "relevant documents per query (up to 1 judged for one query)")
    assert "grows its corpus from 3 to 4 documents" in text and "25.0% of it instead of 33.3%" in text
    assert len(split_sentences(text)) == 2


def test_findings_of_several_collections_is_a_paragraph_of_ranges():
    big = _ds({**CORPUS, "d4": {"title": "", "text": "a b c d e f g"}}, {"q1": "a b c", "q2": "a"},
              {"q1": {"d1": 1, "d2": 1, "d3": 0}, "q2": {"d4": 1}})
    small = _ds(CORPUS, {"q1": "a"}, {"q1": {"d1": 1}})
    stats, _, _ = describe.dataset_stats({("big", "test"): big, ("small", "test"): small},
                                         ["test"], None, 0)
    rows = [describe.corpus_row("small own corpus", small), describe.corpus_row("small pooled", big)]
    sp = SimpleNamespace(skipped={"c": 5}, meta={"missing_databases": ["c"]})
    per_db = pd.DataFrame({"db_id": ["a", "c"], "questions": [3, 5], "sqlite present": [True, False]})
    text = describe.findings(stats, rows, "small", per_db, sp)
    assert not any(line.startswith("- ") for line in text.splitlines())
    assert 2 <= len(split_sentences(text)) <= 6
    assert text.startswith("The 2 test collections hold 3 (small) to 4 (big) documents and 1 "
                           "(small) to 2 (big) test queries.")
    assert ("Relevant documents per query run 1.00 (small) to 1.50 (big), with up to 3 judged "
            "for one big query; queries average 1.0 (small) to 2.0 (big) words") in text
    assert text.endswith("On Spider dev 3 questions can be executed and 5 are on the missing "
                         "database(s) c.")


def test_spider_per_db_counts_skipped_questions_of_missing_databases():
    sp = SimpleNamespace(examples=[{"db_id": "a"}, {"db_id": "a"}, {"db_id": "b"}],
                         skipped={"c": 5}, db_paths={"a": 1, "b": 1},
                         schemas={"a": {"tables": [1, 2]}, "b": {"tables": [1]},
                                  "c": {"tables": []}},
                         meta={"missing_databases": ["c"]})
    per_db = describe.spider_per_db(sp)
    assert per_db.values.tolist() == [["c", 5, False, 0], ["a", 2, True, 2], ["b", 1, True, 1]]
    assert describe.key_numbers(pd.DataFrame(columns=["dataset", "split", "queries",
                                                      "relevant/query", "docs"]),
                                per_db, sp.skipped) == {"spider.questions_usable": 3,
                                                        "spider.questions_skipped": 5}
    assert len(describe.plot_spider_dbs(per_db).axes) == 1
    stats = pd.DataFrame(columns=["dataset", "split"])
    assert describe.findings(stats, [], "x", per_db, sp) == (
        "On Spider dev 3 questions can be executed and 5 are on the missing database(s) c.")
