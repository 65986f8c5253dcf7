"""Training pools with room to improve and templates with nothing to copy (issue 41 items
4-5): the pure pieces behind the notebooks' levers."""
from __future__ import annotations

import math

import pytest

from qrlib.core.errors import QrlibError
from qrlib.generation.parsing import parse_completion
from qrlib.generation.prompts import get
from qrlib.methods.acqo.curriculum import keep_for_stage2, weaker_share
from qrlib.rl.health import template_examples
from qrlib.rl.rows import room_filter


def test_weaker_share_keeps_the_questions_the_raw_question_serves_worst():
    scores = {"a": 0.9, "b": 0.1, "c": 0.5, "d": 0.1}
    assert weaker_share(scores, 0.5) == ["b", "d"]  # ties broken by id, result sorted
    assert weaker_share(scores, 1.0) == ["a", "b", "c", "d"]
    assert weaker_share({"x": 1.0}, 0.5) == ["x"]  # never empty
    with pytest.raises(QrlibError, match=r"share must be in \(0, 1\]"):
        weaker_share(scores, 0.0)


def test_stage2_filter_with_a_lower_bound_on_tau():
    tau = {"a": -1.0, "b": 0.0, "c": 1.0, "d": 2.0}
    assert keep_for_stage2(tau, 5 / 3) == ["a", "b", "c"]  # ACQO Eq. 8 alone
    assert keep_for_stage2(tau, 5 / 3, tau_min=0.0) == ["c"]


def test_room_filter_keeps_ranks_inside_the_window_in_order():
    ranks = {"q1": 1, "q2": 2.0, "q3": None, "q4": math.nan, "q5": 50, "q6": 51, "q7": 7}
    assert room_filter(ranks) == ["q2", "q5", "q7"]
    assert room_filter(ranks, 1, 1) == ["q1"]
    with pytest.raises(QrlibError, match="1 <= lo <= hi"):
        room_filter(ranks, 5, 2)


def test_rlqr_room_subset_uses_the_source_documents_rank():
    from qrlib.methods.rlqr.pipeline import room_subset

    class Searcher:
        def search(self, texts, k):
            ranked = {"first": ["s1", "x"], "third": ["x", "y", "s2"], "gone": ["x", "y"]}
            return [[(d, 1.0) for d in ranked[t]][:k] for t in texts]

    q = {"1": "first", "2": "third", "3": "gone"}
    qrels = {"1": {"s1": 1}, "2": {"s2": 1}, "3": {"s3": 1}}
    kept, kept_qrels = room_subset(q, qrels, Searcher(), lo=2, hi=50)
    assert kept == {"2": "third"} and kept_qrels == {"2": {"s2": 1}}


def test_deepretrieval_think_prompt_prefills_app_h_and_shows_no_chain():
    t = get("deepretrieval/evidence-think")
    assert t.meta["prefill"] == "Let me rewrite the query with reasoning. <think>"
    assert "<think> your reasoning" not in t.user and "step by step" not in t.user
    # no chain to copy: the only placeholder is the answer layout's, as in the nothink prompt
    assert template_examples(t) == template_examples(get("deepretrieval/evidence-nothink")) \
        == frozenset({"..."})
    done = t.meta["prefill"] + " who wrote it </think> <answer>{\"query\": \"a b\"}</answer>"
    p = parse_completion(done, "deepretrieval")
    assert p.ok and p.queries == ["a b"] and p.n_outside == 0
    assert not parse_completion("Sure. <think> x </think><answer>{\"query\": \"a\"}</answer>",
                                "deepretrieval").ok  # any other lead-in is text outside tags
    assert get("deepretrieval/sql-think").meta["prefill"].endswith("<think>")


def test_acqo_fewshot_examples_show_one_two_and_three_queries():
    t = get("acqo/decompose-fewshot")
    text = t.messages(context="", question="Q?")[1]["content"]
    lengths = sorted(len(parse_completion(line, "acqo").queries)
                     for line in text.splitlines() if line.startswith('{"query"'))
    assert lengths == [1, 2, 3]
    assert "first%%second%%third" not in get("acqo/decompose").user


def test_sage_prompts_answer_query_then_strategy_with_an_example_per_strategy():
    from qrlib.methods.sage.pipeline import variants

    for name in ("sage/proactive", "sage/guided"):
        text = get(name).messages(query="QQ")[-1]["content"]
        answers = [parse_completion(line[line.index("<answer>"):], "sage")
                   for line in text.splitlines() if line.startswith("<answer>{")]
        assert sorted(a.strategy for a in answers) == [1, 2, 3, 4, 5]
        assert all(line.index('"query"') < line.index('"strategy"')
                   for line in text.splitlines() if line.startswith("<answer>{"))
    assert get("sage/proactive").meta["prefill"] == "<think>"
    assert get("sage/guided").meta["prefill"] == '<answer>{"query": "'
    assert variants(reasoning=True)["scs"].prompt == "sage/proactive"
    assert variants()["scs"].prompt == "sage/guided"
