"""The steps of notebook 10 (qrlib.methods.deepretrieval.evaluation) on a tiny run folder."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pandas as pd
import pytest

from qrlib.eval.findings import paragraph, split_sentences
from qrlib.eval.scale import scale_columns
from qrlib.methods.deepretrieval import evaluation as E


def _write(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")


@pytest.fixture
def run(tmp_path):
    base = tmp_path / "05_vanilla_rl"
    _write(base / "rewrites" / "toy" / "raw.jsonl",
           [{"qid": "q1", "search_text": "one", "gen_tokens": 0, "gen_seconds": 0.0},
            {"qid": "q2", "search_text": "two", "gen_tokens": 0, "gen_seconds": 0.0}])
    _write(base / "rewrites" / "toy" / "trained-bm25-rewrite.jsonl",
           [{"qid": "q1", "search_text": "good", "format_ok": True, "gen_tokens": 4, "gen_seconds": 0.1},
            {"qid": "q2", "search_text": "bad", "format_ok": False, "gen_tokens": 6, "gen_seconds": 0.3}])
    _write(base / "rewrites" / "toy" / "multi.jsonl",  # a multi-query method, fused with RSF
           [{"qid": "q1", "search_texts": ["one", "good"]}, {"qid": "q2", "search_texts": ["two"]}])
    (base / "settings.json").write_text(json.dumps({"model": "smollm2"}))
    (tmp_path / "rl" / "toy-bm25-rewrite" / "adapter").mkdir(parents=True)
    return tmp_path


class Ranked:
    def __init__(self):
        self.lists = {"one": [("d9", 2.0), ("d1", 1.0)], "two": [("d2", 1.0)],
                      "good": [("d1", 3.0)], "bad": [("d9", 1.0)]}

    def search(self, texts, k):
        return [self.lists[t][:k] for t in texts]


def test_find_inventory_and_adapters(run, capsys):
    found, settings = E.find_rewrites(run, ["05_vanilla_rl", "07_acqo_stage2"])
    assert "07_acqo_stage2: no rewrites under" in capsys.readouterr().out
    assert [(s, d, m) for s, d, m, _ in found] == [("05_vanilla_rl", "toy", "multi"),
                                                   ("05_vanilla_rl", "toy", "raw"),
                                                   ("05_vanilla_rl", "toy", "trained-bm25-rewrite")]
    assert settings == {"05_vanilla_rl": {"model": "smollm2"}}
    assert list(E.inventory(found).columns) == ["source", "dataset", "method"]
    with pytest.raises(AssertionError, match="without their adapter"):
        E.trained_adapters(run, found)
    (run / "rl" / "toy-bm25-rewrite" / "adapter" / "adapter_config.json").write_text("{}")
    assert [a.parent.name for a in E.trained_adapters(run, found)] == ["toy-bm25-rewrite"]


def test_score_methods_scores_each_method_with_its_retrievers(run):
    found, _ = E.find_rewrites(run, ["05_vanilla_rl"])
    te = SimpleNamespace(queries={"q1": "one", "q2": "two"}, qrels={"q1": {"d1": 1}, "q2": {"d2": 1}})
    coll = {("05_vanilla_rl", "toy"): (te, {})}
    effect, latency, tokens, perq, valid = E.score_methods(
        found, coll, lambda key, kind: Ranked(), ["bm25", "dense"], k=10)
    # the trained adapter only with its own retriever; the others with both
    assert list(zip(effect.retriever, effect.method)) == [
        ("bm25", "multi"), ("bm25", "raw"), ("bm25", "trained-bm25-rewrite"),
        ("dense", "multi"), ("dense", "raw")]
    e = effect.set_index(["retriever", "method"])
    assert e.loc[("bm25", "trained-bm25-rewrite"), "MRR@10"] == pytest.approx(0.5)
    assert e.loc[("bm25", "raw"), "MRR@3"] == pytest.approx(0.75)
    assert e.loc[("bm25", "multi"), "R@10"] == 1.0 and list(e.columns[:4]) == ["dataset", "source", "n_queries", "MRR@3"]
    lat = latency.set_index(["retriever", "method"])
    assert lat.loc[("bm25", "trained-bm25-rewrite"), "generation_ms"] == pytest.approx(200.0)
    assert lat.loc[("bm25", "raw"), "fusion_ms"] == 0.0
    assert (latency.total_ms == latency[["generation_ms", "retrieval_ms", "fusion_ms"]].sum(axis=1)).all()
    assert tokens.set_index("method").loc["trained-bm25-rewrite", "max_tokens"] == 6
    assert valid == {("toy", "multi"): None, ("toy", "raw"): None,
                     ("toy", "trained-bm25-rewrite"): 0.5}
    assert set(perq) == {(d, k, m) for d, k, m in [("toy", "bm25", "multi"), ("toy", "bm25", "raw"),
                                                    ("toy", "bm25", "trained-bm25-rewrite"),
                                                    ("toy", "dense", "multi"), ("toy", "dense", "raw")]}


def _perq(values):
    return pd.DataFrame({"query_id": list(values), "nDCG@10": list(values.values())})


def test_vs_raw_rows_records_and_summary_lines():
    perq = {("toy", "bm25", "raw"): _perq({"a": 0.5, "b": 0.5}),
            ("toy", "bm25", "trained-bm25-rewrite"): _perq({"a": 1.0, "b": 0.5}),
            ("toy", "bm25", "untrained-rewrite"): _perq({"a": 0.0, "b": 0.5}),
            ("other", "dense", "untrained-rewrite"): _perq({"a": 0.0})}   # no raw row: skipped
    rows = E.vs_raw_rows(perq, lambda n, m, k: scale_columns(None, test_queries=k),
                         resamples=200, seed=0)
    assert [(r["method"], r["kind"], r["diff"]) for r in rows] == [
        ("trained-bm25-rewrite", "trained", 0.25), ("untrained-rewrite", "untrained", -0.25)]
    vs_raw = pd.DataFrame(rows)
    effect = pd.DataFrame({"dataset": "toy", "retriever": "bm25",
                           "method": ["raw", "trained-bm25-rewrite"], "NDCG@10": [0.5, 0.75]})
    latency = pd.DataFrame({"retriever": ["bm25", "bm25"], "generation_ms": [0.0, 40.0],
                            "retrieval_ms": [1.0, 2.0]})
    fresh = pd.DataFrame({"batch_size": [1, 5], "generation_ms_per_query": [90.0, 30.0]})
    tokens = pd.DataFrame({"mean_tokens": [0.0, 5.0]})
    rec = E.result_records(effect, latency, vs_raw)
    assert list(rec) == ["toy.bm25.raw.ndcg10", "toy.bm25.trained-bm25-rewrite.ndcg10",
                         "latency.bm25.retrieval_ms", "toy.bm25.trained-bm25-rewrite.vs_raw",
                         "toy.bm25.untrained-rewrite.vs_raw"]
    assert rec["latency.bm25.retrieval_ms"] == 1.5 and rec["toy.bm25.untrained-rewrite.vs_raw"][0] == -0.25
    lines = E.summary_lines(effect, latency, fresh, tokens, vs_raw)
    text = paragraph(lines)
    assert not any(line.startswith("- ") for line in text.splitlines())
    assert len(split_sentences(text)) == len(lines) == 4
    assert lines[0] == ("The raw query, at NDCG@10 0.500 (toy/bm25), scores highest in 0 of 1 "
                        "dataset/retriever block; the highest elsewhere: trained-bm25-rewrite on "
                        "toy/bm25 (0.750).")
    assert lines[1] == ("Generation took 40 ms per query in the upstream notebooks' batched test "
                        "decoding (`10_latency`) and, re-timed here (`10_generation_timing`), "
                        "90 ms one at a time and 30 ms in one batch, against retrieval bm25 "
                        "1.50 ms: generation, not the search, dominates the latency of every "
                        "method.")
    assert lines[2] == "Generated tokens per query average 5.0."
    assert lines[3].startswith("trained-bm25-rewrite minus raw on toy/bm25, nDCG@10: +0.250")
    two = pd.DataFrame(rows * 2).assign(dataset=["toy", "toy", "b", "b"],
                                        lo=[0.1, -0.3, -0.3, -0.4], hi=[0.4, 0.1, -0.1, 0.0])
    slow = latency.assign(generation_ms=[0.0, 1.0])
    lines = E.summary_lines(effect, slow, fresh.iloc[:0], tokens.iloc[:0], two)
    assert lines[1] == ("Generation took 1 ms per query in the upstream notebooks' batched test "
                        "decoding (`10_latency`), against retrieval bm25 1.50 ms: neither part "
                        "dominates the latency of every method.")
    assert lines[2] == ("Of 2 trained rows compared with raw, 1 beats it with a 95 % interval "
                        "above 0, 1 falls below it and 0 cannot be told apart from it.")
    assert lines[3].startswith("The strongest: trained-bm25-rewrite minus raw on toy/bm25")
    assert lines[4].startswith("The weakest: trained-bm25-rewrite minus raw on b/bm25")
    assert 2 <= len(split_sentences(paragraph(lines))) <= 6


def test_fresh_timing_with_no_queries_is_empty():
    assert E.fresh_timing([], {}, {}, 0).empty
