"""Reader scoring (qrlib.eval.qa), the reader's prompt pieces (qrlib.generation.reader) and
ACQO's transfer helpers (qrlib.methods.acqo.transfer)."""
from __future__ import annotations

import pytest

from qrlib.core.errors import QrlibError
from qrlib.eval import qa
from qrlib.generation import reader
from qrlib.methods.acqo.transfer import Stage2Record, ranked_ids, rule_split


@pytest.mark.parametrize("pred, golds, em, f1", [
    ("The Eiffel Tower!", ["eiffel tower"], 1.0, 1.0),
    ("Paris, France", ["Paris"], 0.0, 2 / 3),          # P 1/2, R 1 -> F1 2/3
    ("in 1889", ["1889", "eighteen eighty-nine"], 0.0, 2 / 3),
    ("London", ["Paris", "City of Paris"], 0.0, 0.0),
    ("the the", ["a"], 1.0, 1.0),                     # both normalise to "" (SQuAD: equal)
    ("Paris Paris", ["Paris"], 0.0, 2 / 3),            # bag of tokens: 1 common of 2 predicted
])
def test_exact_match_and_f1_follow_squad_v11(pred, golds, em, f1):
    assert qa.exact_match(pred, golds) == em
    assert qa.token_f1(pred, golds) == pytest.approx(f1)


def test_score_answers_is_per_question_and_names_a_question_without_golds():
    df = qa.score_answers({"q1": "Paris", "q2": "no idea"}, {"q1": ["paris"], "q2": ["Rome"]})
    assert list(df.index) == ["q1", "q2"] and df.EM.tolist() == [1.0, 0.0]
    with pytest.raises(QrlibError, match="question 'q3' has no gold answers"):
        qa.score_answers({"q3": "x"}, {"q1": ["y"]})
    with pytest.raises(QrlibError, match="no gold answer"):
        qa.exact_match("x", [])


def test_reader_passages_and_the_first_line_of_an_answer():
    corpus = {"d1": {"title": "Tower", "text": "one two three four"}, "d2": {"title": "", "text": "x"}}
    assert reader.passages_text(["d2", "d1"], corpus, passage_words=3) == "[1] x\n[2] Tower one two"
    assert reader.passages_text([], corpus) == "(no passage was retrieved)"
    assert reader.first_line('\n  Answer: "Gustave Eiffel".\nBecause ...') == "Gustave Eiffel"
    assert reader.first_line("   \n") == ""
    assert reader.first_line("The answer is: Sy Kattelson") == "Sy Kattelson"
    with pytest.raises(QrlibError, match="passage_words must be >= 1"):
        reader.passages_text(["d1"], corpus, passage_words=0)


def test_rule_split_and_ranked_ids():
    subs = rule_split("Who was born first, Alan Turing or Ada Lovelace?")
    assert subs[0].startswith("Who was born first") and 1 <= len(subs) <= 3
    assert len(set(subs)) == len(subs)
    run = {"q1": {"a": 0.2, "b": 0.9, "c": 0.5}}
    assert ranked_ids(run, ["q1", "q2"]) == {"q1": ["b", "c", "a"], "q2": []}


def test_stage2_record_names_the_missing_retriever(tmp_path):
    rec = Stage2Record(summaries={"bm25": {"adapter": "x/adapter"}}, tau={"bm25": {"q": 1.0}},
                       kept={"bm25": ["q"]})
    rec.save(tmp_path)
    back = Stage2Record.load(tmp_path)
    assert back.adapter("bm25") == "x/adapter"
    with pytest.raises(QrlibError, match="no Stage II adapter for 'dense'"):
        back.adapter("dense")
