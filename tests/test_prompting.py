"""The training-free baselines' text functions (qrlib.methods.prompting.spqe)."""
from __future__ import annotations

import pandas as pd
import pytest

from qrlib.core.errors import QrlibError
from qrlib.generation.prompts import get
from qrlib.methods.prompting import spqe


def test_readings_join_query_and_passage_as_documented():
    assert spqe.augmented_text("q w", "a passage", 1) == "q w a passage"
    assert spqe.augmented_text("q", "p", 5) == "q q q q q p"  # Query2doc's sparse recipe
    assert spqe.augmented_text("q", "Passage:  the   text\n", 0) == "the text"  # HyDE
    assert spqe.augmented_text("q", "  \n", 0) == "q"  # nothing written: the query itself
    with pytest.raises(QrlibError, match="repeats"):
        spqe.augmented_text("q", "p", -1)


def test_reading_texts_cover_every_query_and_refuse_unknown_readings():
    pseudo = pd.DataFrame({"qid": ["1", "2"], "query": ["a", "b"], "passage": ["x y", ""]})
    assert spqe.reading_texts(pseudo, "spqe-q2d") == {"1": "a a a a a x y", "2": "b"}
    assert spqe.reading_texts(pseudo, "pseudo-doc") == {"1": "x y", "2": "b"}
    with pytest.raises(QrlibError, match="accepted: spqe, spqe-q2d, pseudo-doc"):
        spqe.reading_texts(pseudo, "hyde")


def test_mode_texts_match_rewrite_queries_search_text():
    rw = pd.DataFrame({"qid": [1, 2], "query": ["a b", "c"], "rewrite": ["k", ""]})
    assert spqe.mode_texts(rw, "rewrite") == {"1": "k", "2": "c"}
    assert spqe.mode_texts(rw, "expand") == {"1": "a b k", "2": "c"}
    with pytest.raises(QrlibError, match="mode"):
        spqe.mode_texts(rw, "replace")


def test_choose_prompt_takes_the_best_and_the_first_of_ties():
    scores = {("p1", "rewrite"): 0.2, ("p2", "expand"): 0.5, ("p3", "rewrite"): 0.5}
    assert spqe.choose_prompt(scores) == ("p2", "expand")
    with pytest.raises(QrlibError):
        spqe.choose_prompt({})


def test_truncation_counts_completions_at_their_budget():
    assert spqe.is_truncated(128, 128) and spqe.is_truncated(127, 128)
    assert not spqe.is_truncated(100, 128)


def test_pseudo_doc_prompts_have_nothing_to_copy_and_contracts_stop_at_the_answer():
    for kind in ("claim", "health", "question"):
        t = get(f"prompting/pseudo-doc-{kind}")
        text = t.user.format(query="QUERY")
        assert "QUERY" in text and "<" not in text and "example" not in text.lower()
    cs = spqe.candidate_contracts(spqe.PROMPT_CANDIDATES, 64)
    assert set(cs) == set(spqe.PROMPT_CANDIDATES)
    assert all(c.stop == ("</answer>",) and c.max_new_tokens == 64 and c.prefill for c in cs.values())
