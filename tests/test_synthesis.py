"""RL-QR query synthesis: parsing hostile output, the usability filter, BEIR layout, reuse."""
from __future__ import annotations

import json
import time

import pytest

from qrlib.methods.rlqr.synthesis import (PREFILL, load_synthesis, parse_synthesis,
                                          save_synthesis, usable)

DOC = "Vitamin D supplementation reduced hip fractures in a randomised trial of 2,000 adults."


def test_parse_a_prefilled_completion():
    out = 'Someone at risk of falls", "question": "Does vitamin D prevent hip fractures?", "answer": "yes"}'
    item = parse_synthesis(out, PREFILL)
    assert item == {"scenario": "Someone at risk of falls",
                    "question": "Does vitamin D prevent hip fractures?", "answer": "yes"}


def test_parse_a_completion_cut_inside_the_object():
    out = 'A clinician", "question": "Which trial tested vitamin D for hip fractures'
    item = parse_synthesis(out, PREFILL)
    assert item is not None and item["question"].startswith("Which trial")
    assert item["answer"] == ""


@pytest.mark.parametrize("junk", ["", "no json here", '{"question": 3}', "{" * 50_000,
                                  '{"scenario": "x"}'])
def test_junk_gives_none(junk):
    assert parse_synthesis(junk) is None


def test_parsing_is_fast_on_huge_hostile_output():
    t0 = time.perf_counter()
    parse_synthesis('{"a": "' + "x{" * 200_000, PREFILL)
    assert time.perf_counter() - t0 < 2.0


@pytest.mark.parametrize("item, ok, reason", [
    (None, False, "no JSON"),
    ({"question": ""}, False, "empty question"),
    ({"question": "hip fractures?"}, False, "shorter than 4"),
    ({"question": "Vitamin D supplementation reduced hip fractures"}, False, "copied"),
    ({"question": "Does taking vitamin D prevent broken hips in older people?"}, True, "ok"),
])
def test_usable(item, ok, reason):
    got, why = usable(item, DOC)
    assert got is ok and reason in why


def _attempts():
    return [{"qid": "syn-d1", "doc_id": "d1", "usable": True, "reason": "ok",
             "scenario": "s", "question": "Does vitamin D prevent broken hips?", "answer": "yes"},
            {"qid": "syn-d2", "doc_id": "d2", "usable": False, "reason": "empty question",
             "scenario": "", "question": "", "answer": ""}]


def test_saved_set_is_beir_and_is_reused_only_with_the_same_settings(tmp_path):
    man = {"dataset": "toy", "docs": ["d1", "d2"], "model": "m"}
    save_synthesis(tmp_path, _attempts(), man)
    q = [json.loads(x) for x in (tmp_path / "queries.jsonl").read_text().splitlines()]
    assert [x["_id"] for x in q] == ["syn-d1"] and q[0]["metadata"]["source_doc"] == "d1"
    assert (tmp_path / "qrels" / "train.tsv").read_text().splitlines() == [
        "query-id\tcorpus-id\tscore", "syn-d1\td1\t1"]
    rows, why = load_synthesis(tmp_path, man)
    assert why == "reused" and len(rows) == 2
    rows, why = load_synthesis(tmp_path, {**man, "model": "other"})
    assert rows is None and "model" in why
    rows, why = load_synthesis(tmp_path / "none", man)
    assert rows is None and "no manifest" in why
    # synthesize() records its wall time beside the settings; a new run's time must not
    # count as a change of settings (it did, so every run generated its set again)
    save_synthesis(tmp_path, _attempts(), {**man, "seconds": 12.3})
    rows, why = load_synthesis(tmp_path, man)
    assert why == "reused" and len(rows) == 2


def test_saved_set_loads_with_the_beir_loader(tmp_path):
    from qrlib.data.datasets import load_beir_folder

    save_synthesis(tmp_path, _attempts(), {"dataset": "toy"})
    (tmp_path / "corpus.jsonl").write_text(json.dumps({"_id": "d1", "title": "", "text": DOC}) + "\n")
    ds = load_beir_folder(tmp_path, "train")
    assert ds.queries == {"syn-d1": "Does vitamin D prevent broken hips?"}
    assert ds.qrels == {"syn-d1": {"d1": 1}}


def test_synthesize_releases_the_model_and_engine_before_returning(tmp_path, monkeypatch):
    """The synthesis model and its vLLM engine go back before the trainings that follow
    (a stored vLLM traceback otherwise keeps them alive); the set is saved after."""
    from types import SimpleNamespace

    from qrlib.methods.rlqr import pipeline

    calls = []
    monkeypatch.setattr(pipeline.policy, "load_policy", lambda model: ("model", "tok"))
    monkeypatch.setattr(pipeline, "render_prompt", lambda *a, **kw: "prompt")

    def generate(m, tok, texts, **kw):
        calls.append("generate")
        return ['scenario": "s", "question": "Does vitamin D prevent broken hips?", '
                '"answer": "yes"}'] * len(texts)

    monkeypatch.setattr(pipeline.policy, "generate", generate)
    monkeypatch.setattr(pipeline, "release_memory", lambda: calls.append("release"))
    ds = SimpleNamespace(name="toy", doc_text=lambda d: DOC)
    attempts, how = pipeline.synthesize(ds, ["d1"], tmp_path, model="m")
    assert calls == ["generate", "release"] and how.startswith("generated")
    assert (tmp_path / "queries.jsonl").exists() and len(attempts) == 1
