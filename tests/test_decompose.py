"""Tests for qrlib.methods.bandits.decompose (deterministic splits, JSON-list parsing) and the bandit prompts."""
from __future__ import annotations

import json

import pytest

from qrlib.methods.bandits.decompose import (content_words, entity_spans, heuristic_hierarchy,
                             heuristic_split, oracle_split, parse_query_list)
from qrlib.core.errors import QrlibError


def test_oracle_split_one_query_per_title_with_aspect():
    q = "Which battle occurred first, the Battle of Manila or the Battle of Guam?"
    out = oracle_split(q, ["Battle of Manila (1945)", "Battle of Guam (1944)"])
    # hand-worked: content words of q minus title words {battle, manila, 1945, guam, 1944}
    # leave "occurred"; "first" and "which" are stop words.
    assert out == ["Battle of Manila (1945) occurred", "Battle of Guam (1944) occurred"]


def test_oracle_split_dedupes_and_unescapes_titles():
    out = oracle_split("Who wrote it?", ["A &amp; B", "A & B", "C"])
    assert [o.split(" wrote")[0] for o in out] == ["A & B", "C"]


def test_oracle_split_rejects_empty():
    with pytest.raises(QrlibError):
        oracle_split("q?", [])
    with pytest.raises(QrlibError):
        oracle_split("  ", ["A"])


def test_heuristic_split_comparison():
    q = "Which musician, Ciaran Gribbin or Brett Scallions, is a member of the band Fuel?"
    assert heuristic_split(q) == ["Ciaran Gribbin musician member band fuel",
                                  "Brett Scallions musician member band fuel"]


def test_heuristic_split_comparison_without_comma():
    # no comma: every capitalised span becomes an arm with the aspect word "closer"
    assert heuristic_split("Is Gasherbrum II or Nuptse closer to Everest?") == [
        "Gasherbrum II closer", "Nuptse closer", "Everest closer"]


def test_heuristic_split_relation_chain():
    parts = heuristic_split("Who is the spouse of the director of film West Of Shanghai?")
    assert "West Of Shanghai" in parts  # title-cased "Of" stays inside the entity
    # chain "spouse of the director of film X": inner suffix first, the widest last
    assert parts[2:] == ["film West Of Shanghai", "director of film West Of Shanghai"]


def test_heuristic_split_is_deterministic_and_never_empty():
    for q in ["why?", "hello world", "What is it"]:
        a, b = heuristic_split(q), heuristic_split(q)
        assert a == b and len(a) >= 1 and all(a)
    with pytest.raises(QrlibError):
        heuristic_split("")


def test_heuristic_split_max_parts():
    q = ("What is the name of the fight song of the university whose main campus is in "
         "Lawrence, Kansas and whose branch campuses are in the Kansas City area?")
    assert len(heuristic_split(q, max_parts=2)) == 2
    assert len(heuristic_split(q, max_parts=4)) <= 4


def test_entity_spans_and_content_words():
    assert entity_spans("Which film came out first, Pearl Lust or On Body And Soul?") == [
        "Pearl Lust", "On Body And Soul"]
    assert entity_spans("Who founded the Bank of England?") == ["Bank of England"]
    assert content_words("Who is Aristarete's father?") == ["aristarete", "father"]


def test_heuristic_hierarchy_children_differ_from_parent():
    h = heuristic_hierarchy("Which battle occurred first, the Battle of Manila or the "
                            "Battle of Guam?")
    assert [n["parent"] for n in h] == ["Battle of Manila battle occurred",
                                         "Battle of Guam battle occurred"]
    for node in h:
        assert node["children"] and node["parent"] not in node["children"]
    assert "Battle of Manila" in h[0]["children"]


def test_parse_query_list_json_and_fallback():
    assert parse_query_list('Sure! ["a b", "c d", "a b"] done') == ["a b", "c d"]
    assert parse_query_list("1. first query\n2. second query", 1) == ["first query"]
    assert parse_query_list("") == []
    assert parse_query_list("Sorry, I cannot do that.") == []
    assert parse_query_list("- only one bullet") == ["only one bullet"]
    assert parse_query_list(json.dumps(["x y"] * 3)) == ["x y"]


def test_bandit_prompts_registered():
    from qrlib.generation import prompts
    for name in ("bandit/problem-definition", "bandit/specialised"):
        msgs = prompts.render(name, request="Who wrote Hamlet?", n_queries=3)
        text = " ".join(m["content"] for m in msgs)
        assert "Who wrote Hamlet?" in text and "3" in text and "JSON" in text


class _FakeTok:
    def apply_chat_template(self, msgs, tokenize=False, add_generation_prompt=True):
        return " | ".join(m["content"] for m in msgs)


def test_model_split_caches_and_falls_back(monkeypatch, tmp_path):
    import qrlib.generation.policy

    calls = []

    def fake_generate(model, tok, prompts, max_new_tokens, do_sample, temperature, top_p,
                      num_return_sequences, **kw):
        calls.append((list(prompts), num_return_sequences, do_sample))
        outs = []
        for p in prompts:
            outs += ['["Battle of Manila", "Battle of Guam"]', "I cannot help with that."][
                :num_return_sequences]
        return outs

    monkeypatch.setattr(qrlib.generation.policy, "generate", fake_generate)
    from qrlib.methods.bandits.decompose import model_split

    q = "Which battle occurred first, the Battle of Manila or the Battle of Guam?"
    cache = tmp_path / "dec.json"
    out = model_split([q], None, _FakeTok(), n_queries=3, n_samples=2, cache_path=cache,
                      model_name="fake")
    assert out[0][0] == ["Battle of Manila", "Battle of Guam"]
    assert out[0][1] == heuristic_split(q, 3)          # junk completion -> heuristic fallback
    assert calls[0][1] == 2 and calls[0][2] is True     # two samples -> sampling on
    assert q in calls[0][0][0] and "3" in calls[0][0][0]
    stored = json.loads(cache.read_text())
    assert sorted(v["fallback"] for v in stored.values()) == [False, True]
    again = model_split([q], None, _FakeTok(), n_queries=3, n_samples=2, cache_path=cache,
                        model_name="fake")
    assert again == out and len(calls) == 1             # served from the JSON cache
