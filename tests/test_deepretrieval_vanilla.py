"""The steps of notebook 05 (qrlib.methods.deepretrieval.vanilla) on small synthetic inputs."""
from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from qrlib.core.errors import QrlibError
from qrlib.eval.compare import comparison_table
from qrlib.eval.scale import scale_columns
from qrlib.methods.deepretrieval import vanilla as V


def test_runs_for_takes_global_runs_and_the_datasets_own():
    runs = ["bm25:expand", "scifact/dense:rewrite", "nfcorpus/bm25:rewrite"]
    assert V.runs_for(runs, "scifact") == [("bm25", "expand"), ("dense", "rewrite")]
    assert V.runs_for(runs, "nfcorpus") == [("bm25", "expand"), ("bm25", "rewrite")]
    assert V.runs_for(runs, "hotpotqa-large") == [("bm25", "expand")]
    assert V.runs_for(["bm25+room:rewrite"], "scifact") == [("bm25+room", "rewrite")]
    assert V.retriever_of("bm25+room") == "bm25" and V.retriever_of("dense") == "dense"
    for bad in ("bm25", "bm25:paraphrase", "bm25+easy:rewrite", ":rewrite"):
        with pytest.raises(QrlibError, match="bad train_runs entry"):
            V.runs_for([bad], "scifact")


def test_a_room_run_trains_on_the_claims_ranked_inside_room_ranks():
    tr = SimpleNamespace(queries={"a": "solved", "b": "near", "c": "lost", "d": "deep"},
                         qrels={"a": {"d1": 1}, "b": {"d2": 1}, "c": {"d3": 1}, "d": {"d4": 2}})
    lists = {"solved": [("d1", 3.0)], "near": [("x", 2.0), ("d2", 1.0)], "lost": [("x", 1.0)],
             "deep": [(f"x{i}", 1.0) for i in range(9)] + [("d4", 0.5)]}
    pair = (tr, None, {})
    assert V.train_queries(pair, Ranked(lists), "bm25") == tr.queries
    assert V.train_queries(pair, Ranked(lists), "bm25+room") == {"b": "near", "d": "deep"}
    assert V.train_queries(pair, Ranked(lists), "bm25+room", room_ranks=(2, 5)) == {"b": "near"}


def test_prompts_render_an_example_and_the_claim():
    for mode in ("rewrite", "expand"):
        text = V.PROMPTS[mode]["user"].format(query="<claim>")
        assert text.endswith("Claim: <claim>") and '<answer>{"query": "' in text


def _log(run, rewards, qids, fmt=(1.0, 1.0, 0.5, 0.5)):
    n = len(rewards)
    return pd.DataFrame({"run": run, "step": range(1, n + 1), "reward": rewards, "qids": qids,
                         "format_valid": list(fmt)[:n], "frac_reward_zero_std": [0.0, 0.5, 0.5, 1.0][:n],
                         "step_seconds": [60.0] * n, "rollouts": [8] * n,
                         "completion_length": [10.0] * n})


def test_gain_over_raw_subtracts_the_mean_raw_score_of_each_steps_claims():
    logs = _log("hotpotqa-large-bm25-rewrite", [0.5, 0.25, 0.75, 1.0], ["a;b", "c", float("nan"), "a"])
    raw = {"a": 0.25, "b": 0.75, "c": 0.0}
    seen = []

    def score(name, kind, qid):
        seen.append((name, kind))
        return raw[qid]

    g = V.gain_over_raw(logs, score)
    assert g.to_dict("records") == [
        {"run": "hotpotqa-large-bm25-rewrite", "step": 1, "gain": 0.0},
        {"run": "hotpotqa-large-bm25-rewrite", "step": 2, "gain": 0.25},
        {"run": "hotpotqa-large-bm25-rewrite", "step": 4, "gain": 0.75}]   # step 3: no claims
    assert set(seen) == {("hotpotqa-large", "bm25")}                       # dataset with a dash


def test_training_summary_reads_quarters_and_halves_from_the_log():
    logs = _log("s-bm25-expand", [0.0, 0.2, 0.4, 0.8], ["a", "b", "a", "c"])
    logs["gain"] = [0.1, 0.3, 0.5, 0.7]
    t = V.training_summary(logs, "smollm2").iloc[0]
    assert t["run"] == "s-bm25-expand" and t["policy"] == "smollm2" and t["steps"] == 4
    assert (t["distinct_queries"], t["rollouts"], t["train_minutes"]) == (3, 32.0, 4.0)
    assert (t["reward_first_quarter"], t["reward_last_quarter"]) == (0.0, 0.8)
    assert (t["format_first_quarter"], t["format_last_quarter"]) == (1.0, 0.5)
    assert t["gain_first_half"] == pytest.approx(0.2) and t["gain_second_half"] == pytest.approx(0.6)
    assert t["frac_zero_std"] == 0.5 and t["s_per_step"] == 60.0
    assert pd.isna(V.training_summary(logs.drop(columns="gain"), "m").iloc[0]["gain_first_half"])


def test_curves_setting_states_the_scale_of_the_logs():
    logs = pd.concat([_log("s-bm25-expand", [0.1, 0.2], ["a", "b"]),
                      _log("s-dense-rewrite", [0.1, 0.2, 0.3], ["a", "a", "a"])])
    setting, caption = V.curves_setting(logs, model="m", lora_r=8, reward_k=100,
                                        prompts_per_step=1, num_generations=4)
    assert setting == "m, per run: 2-3 steps taken, 1-2 distinct train claims seen, 1x4 rollouts/step"
    assert "s-bm25-expand 2 steps, 2 claims, 16 rollouts; s-dense-rewrite 3 steps, 1 claims" in caption
    assert caption.startswith("GRPO training of m + LoRA r=8: reward nDCG@100")


class Ranked:
    """A retriever returning a fixed ranking per search text."""

    def __init__(self, lists):
        self.lists = lists

    def search(self, texts, k):
        return [self.lists[t][:k] for t in texts]


def _rewrites(texts, rewrites, fmt):
    return pd.DataFrame({"qid": ["q1", "q2"], "query": ["one", "two"], "search_text": texts,
                         "rewrite": rewrites, "modified": [r != "" for r in rewrites],
                         "format_ok": fmt, "gen_tokens": [4, 6], "gen_seconds": [0.5, 1.5]})


def test_evaluation_rows_comparisons_and_scatter_pairs():
    te = SimpleNamespace(queries={"q1": "one", "q2": "two"},
                         qrels={"q1": {"d1": 1}, "q2": {"d2": 1}})
    lists = {"one": [("d9", 2.0), ("d1", 1.0)], "two": [("d2", 1.0)],
             "better one": [("d1", 2.0)], "worse two": [("d9", 1.0)]}
    rewrites = {("toy", "untrained-rewrite"): _rewrites(["one", "two"], ["", ""], [True, False]),
                ("toy", "trained-bm25-rewrite"): _rewrites(["better one", "worse two"],
                                                           ["better one", "worse two"], [True, True]),
                ("toy", "trained-dense-rewrite"): _rewrites(["one", "two"], ["x", "y"], [True, True])}
    rewrites["toy", "raw"] = V.raw_rewrites(te.queries)

    def scale(name, method, n):
        return scale_columns(None if method == "raw" else "m", test_queries=n)

    results, perq = V.evaluate_rewrites(rewrites, {"toy": te}, lambda n, k: Ranked(lists),
                                        ["bm25"], k=10, scale=scale)
    assert list(results.method) == ["untrained-rewrite", "trained-bm25-rewrite", "raw"]
    r = results.set_index("method")
    assert r.loc["raw", "nDCG@10"] == pytest.approx((1 / 1.5849625 + 1.0) / 2, abs=1e-6)
    assert r.loc["trained-bm25-rewrite", "nDCG@10"] == pytest.approx(0.5)
    assert r.loc["trained-bm25-rewrite", "rewrite_words"] == 2.0
    assert r.loc["untrained-rewrite", "format_ok"] == 0.5 and r.loc["raw", "policy"] == "-"
    assert r.loc["raw", "modified"] == 0.0 and r.loc["raw", "rewrite_words"] == 0.0
    cmp = comparison_table(V.comparison_rows(perq, scale, seed=0))
    assert list(zip(cmp.baseline, cmp["baseline kind"])) == [("raw", "baseline"),
                                                            ("untrained-rewrite", "untrained")]
    assert cmp["diff"].iloc[0] == pytest.approx(0.5 - r.loc["raw", "nDCG@10"])
    assert (cmp.wins.iloc[0], cmp.losses.iloc[0]) == (1, 1)
    rewrites["toy", "trained-bm25+room-rewrite"] = rewrites["toy", "trained-bm25-rewrite"]
    again, _ = V.evaluate_rewrites(rewrites, {"toy": te}, lambda n, k: Ranked(lists), ["bm25"],
                                   k=10, scale=scale)
    assert "trained-bm25+room-rewrite" in set(again.method)  # scored with its retriever, bm25
    pairs, intervals = V.scatter_pairs(cmp, perq)
    assert list(pairs) == ["toy/bm25: trained-bm25-rewrite"]
    raw_s, new_s = pairs["toy/bm25: trained-bm25-rewrite"]
    assert new_s == {"q1": 1.0, "q2": 0.0} and raw_s["q2"] == 1.0
    assert intervals["toy/bm25: trained-bm25-rewrite"].startswith("-")


def test_examples_records_and_the_modified_sentence():
    rw = {("toy", "untrained-expand"): _rewrites(["a", "b"], ["u1", "u2"], [True, True]),
          ("toy", "trained-bm25-expand"): _rewrites(["a", "b"], ["t1", "t2"], [True, True])}
    ex = V.example_rewrites(rw, {"toy": [("bm25", "expand")]}, 1)
    assert ex.to_dict("records") == [{"run": "toy-bm25-expand", "claim": "one",
                                      "untrained": "u1", "trained": "t1"}]
    train = pd.DataFrame([{"run": "toy-bm25-expand", "steps": 2, "format_last_quarter": 0.75}])
    test = pd.DataFrame([{"dataset": "toy", "retriever": "bm25", "method": m, "nDCG@10": v,
                          "modified": mod} for m, v, mod in (("raw", 0.5, 0.0),
                                                             ("trained-bm25-expand", 0.6, 0.4),
                                                             ("trained-bm25-rewrite", 0.4, 0.95))])
    assert V.result_records(train, test) == {
        "train.toy-bm25-expand.steps": 2, "train.toy-bm25-expand.format_last_quarter": 0.75,
        "test.toy.bm25.raw.ndcg10": 0.5, "test.toy.bm25.raw.modified": 0.0,
        "test.toy.bm25.trained-bm25-expand.ndcg10": 0.6,
        "test.toy.bm25.trained-bm25-expand.modified": 0.4,
        "test.toy.bm25.trained-bm25-rewrite.ndcg10": 0.4,
        "test.toy.bm25.trained-bm25-rewrite.modified": 0.95}
    assert V.modified_sentence(test) == (
        "The trained rewriters changed 40%-95% of the test claims (expand, rewrite mode); the "
        "untrained rows with the same prompts are their second baseline.")
