"""The steps ACQO's notebooks (03, 06, 07, 12, 16, 18) call, on small synthetic inputs with
hand-computed results: no model, no index, no data folder."""
from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pandas as pd
import pytest

from qrlib.core.errors import QrlibError
from qrlib.data.collection import Dataset
from qrlib.eval.findings import split_sentences, what_we_found
from qrlib.methods.acqo import ablation_study as ab
from qrlib.methods.acqo import fusion_study as fs
from qrlib.methods.acqo import stage1_study as st1
from qrlib.methods.acqo import stage2_eval as st2
from qrlib.methods.acqo import study
from qrlib.methods.acqo import transfer_study as ts
from qrlib.methods.acqo import vanilla_study as van
from qrlib.methods.acqo.transfer import rule_split

NDCG_2ND = 1 / math.log2(3) / (1 + 1 / math.log2(3))   # one of two gold docs, at rank 2
NDCG_1ST = 1 / (1 + 1 / math.log2(3))                   # one of two gold docs, at rank 1
NDCG_23 = (1 / math.log2(3) + 0.5) / (1 + 1 / math.log2(3))  # both gold docs, at ranks 2 and 3


class FakeRetriever:
    """``search`` returns fixed lists per text (empty for an unknown one)."""

    def __init__(self, lists):
        self.lists = lists

    def search(self, texts, k):
        return [list(self.lists.get(t, []))[:k] for t in texts]


LISTS = {"Q": [("d3", 3.0), ("d1", 2.0)],
         "s1": [("d1", 5.0), ("d3", 1.0)],
         "s2": [("d2", 4.0), ("d3", 2.0)]}


def _ds(name="ds"):
    return Dataset(name, {d: {"title": d, "text": d} for d in ("d1", "d2", "d3")}, {"q1": "Q"},
                   {"q1": {"d1": 1, "d2": 1}}, {"q1": {"answers": ["x"]}})


# --------------------------------------------------------------------------- 03
def test_toy_example_orders_by_rank_consensus_then_score():
    toy = fs.toy_example([("a", 0.9), ("b", 0.8), ("c", 0.7)], [("c", 0.95), ("b", 0.5)], 60)
    assert fs.order(toy, "RSF position") == "cab" and fs.order(toy, "RRF position") == "cba"
    p = dict(zip(toy["doc"], toy["P(p)"]))
    assert p == {"a": 1.0, "b": 1.0, "c": 0.75}
    assert str(toy["rank in list B"].dtype) == "Int64" and toy["rank in list B"].isna().sum() == 1


@pytest.fixture
def fused(monkeypatch):
    monkeypatch.setattr(fs, "build_retriever", lambda kind, corpus, **kw: FakeRetriever(LISTS))
    data = {"ds": _ds()}
    subq = {"ds": {"oracle": {"q1": ["s1", "s2"]}, "heuristic": {"q1": ["s1"]}}}
    methods = fs.fusion_methods(k=2, rrf_k=60, depth=10, comb_norm="minmax")
    results, lists = fs.evaluate_fusions(data, subq, ["bm25"], methods, measures=["nDCG@2"],
                                         depth=10, k=2, dense_model="minilm")
    return data, subq, methods, results, lists


def test_evaluate_fusions_scores_every_rule_on_the_sub_query_lists(fused):
    _, _, _, results, lists = fused
    got = {(r["split"], r["method"]): r["nDCG@2"] for r in results.to_dict("records")}
    assert got[("-", "raw question")] == pytest.approx(NDCG_2ND)
    # oracle: d1, d2 (gold) and d3 all have P = 1; RSF orders them by score: d1, d2, d3
    assert got[("oracle", "RSF")] == pytest.approx(1.0)
    assert got[("oracle", "CombSUM")] == pytest.approx(1.0)
    # RRF puts d3 (in both lists) first: 2/62 > 1/61
    assert got[("oracle", "RRF")] == pytest.approx(NDCG_2ND)
    assert got[("oracle", "best single sub-query (oracle pick)")] == pytest.approx(NDCG_1ST)
    assert got[("oracle", "sub-query 2 alone")] == pytest.approx(NDCG_1ST)
    # raw + sub-queries: d3 P = 1/2 first, then d1 (P = 2/3)
    assert got[("oracle", "RSF (raw + sub-queries)")] == pytest.approx(NDCG_2ND)
    assert got[("heuristic", "sub-query 2 alone")] == pytest.approx(NDCG_1ST)  # only one: reused
    assert list(results.method.cat.categories) == fs.method_order(2)
    assert set(lists) == {("ds", "bm25", "oracle"), ("ds", "bm25", "heuristic")}
    diff = fs.differences(results, "nDCG@2")
    assert diff.loc[("ds", "bm25", "oracle"), "RSF - RRF"] == pytest.approx(1 - NDCG_2ND)
    rec = fs.records(fs.toy_example([("a", 1.0)], [("a", 1.0)]), results,
                     fs.tie_table(lists, k=2, rrf_k=60)[0], measure="nDCG@2", k=2)
    assert rec["ds.bm25.oracle.RSF.ndcg"] == pytest.approx(1.0)
    assert rec["ds.bm25.-.raw question.ndcg"] == pytest.approx(NDCG_2ND)
    assert rec["ds.bm25.oracle.share_p_tie"] == 1.0 and rec["toy.rsf_order"] == "a"


def test_tie_table_counts_p_ties_and_disagreement_with_rrf(fused):
    data, subq, methods, results, lists = fused
    ties, example = fs.tie_table(lists, k=2, rrf_k=60)
    t = ties.set_index("split")
    assert t.loc["oracle", "share with a P-tie in top-2"] == 1.0
    assert t.loc["oracle", "tied docs per question"] == 2.0
    assert t.loc["oracle", "share where RSF top-2 != RRF top-2"] == 1.0
    assert t.loc["heuristic", "questions with >= 2 sub-queries"] == 0
    assert example[:4] == ("ds", "bm25", "oracle", "q1") and example[5] == ["d1", "d2"]
    tie = fs.tie_example(example, data, subq, depth=10, rrf_k=60)
    assert list(tie["doc"]) == ["d1", "d2"] and tie["gold"].all()
    assert tie["ranks per sub-query"].tolist() == [[1, None], [None, 1]]
    assert fs.tie_example(None, data, subq, depth=10, rrf_k=60) is None
    timing = fs.timing_summary(lists, methods, repeats=1)
    assert set(timing.index) == set(methods) and (timing["mean"] >= 0).all()
    text = fs.findings(results, ties, timing, measure="nDCG@2", k=2, rrf_k=60)
    assert not any(line.startswith("- ") for line in text.splitlines())
    sentences = split_sentences(text)
    assert len(sentences) == 4, sentences
    # heuristic: one sub-query, so RSF and RRF keep its order (d1, d3); oracle: RSF 1, RRF 2nd
    assert sentences[0] == (f"RSF scores above RRF (k=60) in 1 of 2 blocks, RSF - RRF running "
                            f"+0.000 (ds/bm25/heuristic) to {1 - NDCG_2ND:+.3f} (ds/bm25/oracle) "
                            f"nDCG@2.")
    assert sentences[1] == (f"On the heuristic split RSF reaches {NDCG_1ST:.3f} nDCG@2 against "
                            f"{NDCG_2ND:.3f} for the raw question (above it in 1 of 1 blocks) and "
                            f"{NDCG_1ST:.3f} for CombSUM; on the oracle split RSF reaches 1.000 "
                            f"against {NDCG_2ND:.3f} for the raw question (above it in 1 of 1 "
                            f"blocks) and 1.000 for CombSUM.")
    assert "occurs for 0%-100% of questions" in sentences[2]
    assert sentences[3].startswith("Fusing one question's lists takes ")
    assert fs.findings(results[results.method == "raw question"], ties, timing, measure="nDCG@2",
                       k=2, rrf_k=60) == "No block of this run has a fused list to compare."
    assert fs.cut_setting(None, None, 100) == "full multi-hop subsets, lists of depth 100"


# --------------------------------------------------------------------------- shared
def test_rule_split_quarters_and_validity():
    for q in ("Who was born first, Ada Lovelace or Alan Turing?", "What is the capital of France?"):
        assert study.rule_split(q) == rule_split(q)
    log = pd.DataFrame({"step": range(1, 9)})
    (a, first), (b, last) = study.quarters(log)
    assert (a, b) == study.QUARTERS and list(first.step) == [1, 2] and list(last.step) == [7, 8]
    assert study.validity([{"format_ok": True}, {"format_ok": False}]) == 0.5
    assert study.interval({"diff": 0.1, "lo": -0.02, "hi": 0.2}) == "+0.100 [-0.020, +0.200]"


def test_published_table_names_the_notebook_to_run(tmp_path):
    with pytest.raises(QrlibError, match="run notebook 07 of profile smoke first"):
        study.published_table(tmp_path, "07_x", reader="12", writer="07", profile="smoke")


def test_training_collection_rebuilds_06s_corpus(monkeypatch):
    monkeypatch.setattr(study.qdata, "load_dataset", lambda name, split, data_dir=None: _ds())
    rec = SimpleNamespace(corpus_ids=["d1", "d2"], train_rows=[{"qid": "q1"}],
                          train_datasets=["ds"])
    corpus, qrels = study.training_collection(rec)
    assert sorted(corpus) == ["d1", "d2"] and qrels == {"q1": {"d1": 1, "d2": 1}}
    with pytest.raises(QrlibError, match="1 of its 3 paragraphs are missing"):
        study.training_collection(SimpleNamespace(corpus_ids=["d1", "d2", "d9"],
                                                  train_rows=[], train_datasets=["ds"]))


def _log(steps=2, valid=(1.0, 0.5)):
    return pd.DataFrame({"step": range(1, steps + 1), "qids": ["a;b"] + ["b"] * (steps - 1),
                         "rollouts": [4] * steps, "step_seconds": [30.0] * steps,
                         "format_valid": list(valid)[:steps], "reward": [0.0, 1.0][:steps],
                         "frac_reward_zero_std": [1.0, 0.0][:steps],
                         "part/n_sub": [1.0, 2.0][:steps],
                         "part/fused_ndcg@10": [0.2, 0.4][:steps],
                         "part/best_sub_ndcg@10": [0.1, 0.3][:steps]})


# --------------------------------------------------------------------------- 06
def test_stage1_curve_summary_records_and_findings():
    table = st1.curve_summary({"bm25": _log()})
    first, last = table.iloc[0], table.iloc[1]
    assert (first.steps, last.steps) == ("first quarter", "last quarter")
    assert (first.reward, last.reward, last["sub-queries"]) == (0.0, 1.0, 2.0)
    assert st1.curve_records(table) == {"bm25.first.reward": 0.0, "bm25.first.sub_queries": 1.0,
                                        "bm25.last.reward": 1.0, "bm25.last.sub_queries": 2.0}
    health = pd.DataFrame({"collapsed": [True, False]})
    out = st1.findings_sentences(table, health, ["bm25"])
    assert "from 0.000 to 1.000" in out[0] and out[1].startswith("1 of 2 Stage I runs collapsed")
    assert st1.findings_sentences(table, pd.DataFrame(), ["bm25"])[1] == "No run trained here."


class ScoreEnv:
    """``score`` looks each completion up in a table (0 when absent)."""

    def __init__(self, table):
        self.table = table

    def score(self, completions, qids):
        return [self.table.get(c, 0.0) for c in completions]


def test_cold_start_targets_keep_a_sample_only_when_it_beats_the_question():
    rows = [{"qid": "q1", "question": "A and B"}, {"qid": "q2", "question": "C"}]
    rolls = [{"qid": "q1", "completion": '{"query": "A%%B"}', "format_ok": True,
              "subqueries": ["A", "B"]},
             {"qid": "q2", "completion": '{"query": "D"}', "format_ok": True, "subqueries": ["D"]}]
    cands = [dict(r, rule=False) for r in rolls]
    env = ScoreEnv({'{"query": "A%%B"}': 2.0, '{"query": "A and B"}': 1.0,
                    '{"query": "D"}': 0.5, '{"query": "C"}': 1.5})
    targets, warm, row = st1.choose_targets(rows, cands, rolls, env, copy_targets=True)
    assert targets["q1"]["sampled"] and targets["q1"]["gain"] == 1.0
    assert not targets["q2"]["sampled"]
    assert [w["sft_target"] for w in warm] == ['{"query": "A%%B"}', '{"query": "C"}']
    assert row["target is a sample"] == 0.5 and row["targets with 2 sub-queries"] == 1
    assert row["mean sample score"] == 1.25 and row["question-as-is score"] == 1.25
    _, warm, row = st1.choose_targets(rows, cands, rolls, env, copy_targets=False)
    assert warm[1]["sft_target"] == "" and row["copy targets in SFT"] == 0
    assert list(st1.target_examples(rows, targets, 5)["question"]) == ["A and B"]
    rule = st1.rule_candidate({"qid": "q", "question": "Who was born first, Ada or Alan?"})
    assert rule is None or (rule["rule"] and len(rule["subqueries"]) >= 2)


def test_samplers_release_the_model_and_engine_before_training(monkeypatch):
    """06's cold start and 07's tau rollouts hand their sampling model and engine back
    before the caller trains (a stored vLLM traceback otherwise keeps them alive)."""
    calls = []
    roll = {"qid": "q1", "completion": '{"query": "A%%B"}', "format_ok": True,
            "subqueries": ["A", "B"]}

    def decompose(m, tok, rows, *a, **kw):
        calls.append("generate")
        return [dict(roll)]

    for mod in (st1, st2):
        monkeypatch.setattr(mod.policy, "load_policy", lambda *a, **kw: ("model", "tok"))
        monkeypatch.setattr(mod, "generate_decompositions", decompose)
        monkeypatch.setattr(mod, "release_memory", lambda: calls.append("release"))
    rows = [{"qid": "q1", "question": "A and B"}]
    rolls, cands, _ = st1.sample_candidates("m", rows, "acqo/decompose-fewshot", n=1, rule=False)
    assert calls == ["generate", "release"] and len(cands) == 1

    class Env:
        def score(self, completions, qids):
            calls.append("score")
            return [2.0] * len(completions)

    calls.clear()
    tau, n, _ = st2.sample_tau("m", "adapter", rows, Env(), n=1, temperature=0.8, seed=0,
                               autocast=True)
    assert calls == ["generate", "release", "score"] and tau == {"q1": 2.0} and n == 1


def test_last_rollouts_reads_the_end_of_each_runs_samples(tmp_path):
    folder = tmp_path / "rl" / "acqo-stage1-bm25"
    folder.mkdir(parents=True)
    lines = [json.dumps({"step": i, "query": f"q{i}", "completion": "c", "reward": i})
             for i in range(5)]
    (folder / "samples.jsonl").write_text("\n".join(lines))
    out = st1.last_rollouts(tmp_path, {"bm25": "acqo-stage1-bm25"}, 2)
    assert list(out.step) == [3, 4] and set(out.retriever) == {"bm25"}


# --------------------------------------------------------------------------- 07
ACQO = "ACQO: Stage I+II (bm25-trained)"


def _pq(values, n_sub=None, measure="nDCG@10"):
    df = pd.DataFrame({"query_id": [f"q{i + 1}" for i in range(len(values))], measure: values})
    if n_sub is not None:
        df["n_sub"] = n_sub
    return df


@pytest.fixture
def per_q():
    return {("ds", "bm25", st2.RAW): _pq([1.0, 0.0]),
            ("ds", "bm25", st2.RULE): _pq([0.5, 0.5], [2, 2]),
            ("ds", "bm25", ACQO): _pq([1.0, 0.5], [1, 2])}


def test_stage2_results_and_comparisons(per_q):
    trained_by = {st2.RAW: (None, [], 0, 0), st2.RULE: (None, [], 0, 0),
                  ACQO: ("m", [_log(), _log()], 0, 0)}
    kind_of = {st2.RAW: "baseline", st2.RULE: "model-free", ACQO: "trained"}
    valid = {(ACQO, "ds"): 1.0}
    res = st2.results_table(per_q, trained_by, valid, bootstrap=200, seed=0,
                            measures=["nDCG@10"]).set_index("model")
    assert res.loc[ACQO, "ΔnDCG@10 vs raw"] == pytest.approx(0.25)
    assert res.loc[ACQO, "wins/losses"] == "1/0" and res.loc[ACQO, "sub-queries"] == 1.5
    assert res.loc[ACQO, "RL steps"] == 4 and res.loc[st2.RAW, "sub-queries"] == 1.0
    cmp = st2.comparisons(per_q, kind_of, trained_by, valid, ["bm25"], bootstrap=200, seed=0)
    got = {(r["method"], r["baseline"]): r for r in cmp.to_dict("records")}
    assert set(got) == {(st2.RULE, st2.RAW), (ACQO, st2.RAW), (ACQO, st2.RULE)}
    assert got[ACQO, st2.RULE]["diff"] == pytest.approx(0.25)
    assert got[ACQO, st2.RULE]["baseline kind"] == "model-free"
    assert got[st2.RULE, st2.RAW]["kind"] == "model-free"
    rec = st2.records(pd.DataFrame({"retriever": ["bm25"], "kept share": [0.5],
                                    "questions": [2]}), res.reset_index())
    assert rec[f"ds.bm25.{st2.RAW}.delta_vs_raw"] == [0.0, 0.0, 0.0]
    assert rec["bm25.tau.kept_share"] == 0.5 and rec[f"ds.bm25.{ACQO}.ndcg10"] == 0.75


def test_stage2_tables_by_question_subset_and_count(per_q):
    wide = st2.per_question_table(per_q)
    assert list(wide.columns[:3]) == ["dataset", "retriever", "query_id"]
    assert wide.set_index("query_id").loc["q2", ACQO] == 0.5
    eh = st2.easy_hard(per_q).set_index("model")
    assert (eh.loc[ACQO, "easy"], eh.loc[ACQO, "hard"]) == (1.0, 0.5)
    by = st2.by_n_sub(per_q)
    assert set(by.model) == {st2.RULE, ACQO}
    assert by[(by.model == ACQO)].set_index("sub-queries")["nDCG@10"].to_dict() == {1: 1.0, 2: 0.5}
    assert ((by.lo <= by["nDCG@10"]) & (by["nDCG@10"] <= by.hi)).all()
    fig = st2.by_n_sub_figure(by, sorted(set(by.dataset)), "bm25")
    assert any(t.get_text().startswith("n=") for t in fig.axes[0].texts)
    import matplotlib.pyplot as plt
    plt.close(fig)


def test_kept_table_tau_rule_and_stage2_rows():
    kept = st2.kept_table({"bm25": {"a": 1.0, "b": 2.0}}, {"bm25": ["a"]}, bootstrap=100, seed=0)
    r = kept.iloc[0]
    assert (r.questions, r.kept, r["kept share"], r["mean tau"]) == (2, 1, 0.5, 1.5)
    assert 0.0 <= r.lo <= 0.5 <= r.hi <= 1.0
    assert st2.tau_rule(5 / 3, None) == "tau <= 1.667"
    assert st2.tau_rule(5 / 3, 0.1) == "0.100 < tau <= 1.667"
    rows = [{"qid": "a"}, {"qid": "b"}]
    assert st2.stage2_rows(rows, ["b"]) == [{"qid": "b"}]
    assert st2.stage2_rows(rows, [], "bm25") == rows   # nothing kept: all of them


def test_vs_paper_and_provenance(tmp_path):
    res = pd.DataFrame([{"dataset": "hotpotqa-large", "retriever": "bm25", "model": m,
                         "R@4": v, "R@10": v, "R@100": v, "MAP@10": v, "MRR@10": v, "nDCG@10": v}
                        for m, v in ((st2.RAW, 0.5), (ACQO, 0.6))])
    paper = pd.DataFrame({f"BM25 {m}": [0.3, 0.4] for m in ("R@4", "R@10", "R@100", "MAP@10",
                                                             "MRR@10", "NDCG@10")},
                         index=["raw", "acqo"])
    out = st2.vs_paper(res, paper, {("hotpotqa-large", "bm25", st2.RAW): None})
    assert len(out) == 12 and out[out.row == "acqo"]["paper"].eq(0.4).all()
    assert st2.vs_paper(res, paper, {}).empty
    for name in ("acqo-stage1-bm25", "acqo-stage2-bm25"):
        (tmp_path / "rl" / name).mkdir(parents=True)
        _log().to_csv(tmp_path / "rl" / name / "log.csv", index=False)
    rec = SimpleNamespace(sft_steps=3, sft_questions={"bm25": 2},
                          summary=lambda k: {"sft_adapter": "x"})
    by, kinds = st2.provenance(["untrained [x]", ACQO], rec, {"bm25": "acqo-stage2-bm25"},
                               run_dir=tmp_path, model="m")
    assert kinds["untrained [x]"] == "untrained" and kinds[ACQO] == "trained"
    assert len(by[ACQO][1]) == 2 and by[ACQO][2:] == (3, 2)
    assert kinds["cold start only (bm25-sampled)"] == "warm start"


# --------------------------------------------------------------------------- 12
def test_vanilla_budget_raw_check_and_comparisons():
    stages = pd.DataFrame({"retriever": ["bm25", "bm25"], "steps": [2, 1]})
    assert van.step_budget(stages, ["bm25"], None) == {"bm25": 3}
    assert van.step_budget(stages, ["dense"], 5) == {"dense": 5}
    with pytest.raises(QrlibError, match="no dense row"):
        van.step_budget(stages, ["dense"], None)
    ds = _ds()
    pub = pd.DataFrame({"dataset": ["ds"], "retriever": ["bm25"], "query_id": ["q1"],
                        "raw question": [NDCG_2ND], "untrained [no-decompose]": [0.5],
                        "rule: x": [0.0], ACQO: [1.0]})
    raw = van.check_raw(FakeRetriever(LISTS), ds, pub, "ds", "bm25", k=10, measures=["nDCG@10"])
    assert raw["nDCG@10"].iloc[0] == pytest.approx(NDCG_2ND)
    with pytest.raises(QrlibError, match="differs from 07's"):
        van.check_raw(FakeRetriever(LISTS), ds, pub.assign(**{"raw question": 0.9}), "ds",
                      "bm25", k=10, measures=["nDCG@10"])
    per_q = {("ds", "bm25", van.VANILLA): _pq([0.75], [1])}
    theirs = pd.DataFrame([{"dataset": "ds", "retriever": "bm25", "model": ACQO, "nDCG@10": 1.0,
                            "policy": "m", "RL steps": 3, "SFT steps": 0, "train queries": 2,
                            "rollouts": 12, "train min": 1.0, "test queries": 1}])
    logs = {"bm25": _log()}
    res, vanilla, kept = van.results_table(per_q, theirs, logs, {("ds", "bm25"): 1.0}, model="m",
                                           test_datasets=["ds"], retrievers=["bm25"],
                                           measures=["nDCG@10"])
    assert list(res.model) == [ACQO, van.vanilla_label("bm25")]
    assert vanilla.iloc[0]["RL steps"] == 2
    cmp = van.comparisons(per_q, pub, kept, logs, {("ds", "bm25"): 1.0}, model="m",
                          bootstrap=100, seed=0)
    got = {(r["method"], r["baseline"]): r["diff"] for r in cmp.to_dict("records")}
    lab = van.vanilla_label("bm25")
    assert got[lab, "untrained [no-decompose]"] == pytest.approx(0.25)
    assert got[lab, "rule: x"] == pytest.approx(0.75) and got[ACQO, lab] == pytest.approx(0.25)
    rec = van.records(cmp)
    assert rec["ds.bm25.vanilla.rl_steps"] == 2
    assert rec["ds.bm25.vanilla.ndcg10"] == pytest.approx(0.75)
    assert "ds/bm25 +0.250" in van.findings_tail(cmp)
    assert van.extra_sentences(vanilla) == ["Vanilla RL writes 1.00 queries per question "
                                            "(one by design)."]


def test_vanilla_copy_of_the_question_ties_the_published_raw_row():
    """07 publishes per-question nDCG@10 rounded to 6 decimals; a vanilla policy that copies
    the question scores the same lists at full precision. The pair must tie exactly, not
    'beat' by rounding (cpu run at 505d549: +0.000 [+0.000, +0.000] read as beats)."""
    full = [0.6131471927654584, 0.5, 0.3868528072345416]
    pub = pd.DataFrame({"dataset": "ds", "retriever": "bm25", "query_id": ["q1", "q2", "q3"],
                        "raw question": [round(v, 6) for v in full],
                        "untrained [no-decompose]": [round(v, 6) for v in full]})
    per_q = {("ds", "bm25", van.VANILLA): pd.DataFrame({"query_id": ["q1", "q2", "q3"],
                                                          "nDCG@10": full, "n_sub": [1, 1, 1]})}
    theirs = pd.DataFrame(columns=["dataset", "retriever", "model"])
    cmp = van.comparisons(per_q, pub, theirs, {"bm25": _log()}, {("ds", "bm25"): 1.0},
                          model="m", bootstrap=100, seed=0)
    row = cmp[cmp.baseline == "raw question"].iloc[0]
    assert (row["diff"], row["lo"], row["hi"]) == (0.0, 0.0, 0.0)
    assert (row["wins"], row["losses"], row["ties"]) == (0, 0, 3)


# --------------------------------------------------------------------------- 16
def _record(tmp_path, kind="bm25"):
    _log().to_csv(tmp_path / "log.csv", index=False)
    s1 = SimpleNamespace(sft_steps=0, sft_questions={},
                         summary=lambda k: {"log": str(tmp_path / "log.csv"), "adapter": "a1"})
    s2 = SimpleNamespace(summaries={kind: {"log": str(tmp_path / "log.csv")}},
                         adapter=lambda k: "a2")
    return s1, s2


def test_transfer_rows_scores_and_reader(tmp_path):
    s1, s2 = _record(tmp_path)
    adapters, kinds, retr_of, scale = ts.trained_rows(s1, s2, ["bm25"])
    assert list(adapters) == [ts.RAW, ts.RULE, "Stage I (bm25-trained)", ACQO]
    assert adapters[ACQO] == "a2" and kinds[ts.RULE] == "model-free" and retr_of[ACQO] == "bm25"
    test = {"ds": _ds()}
    subs = ts.fixed_subqueries(test)
    subs.update({("Stage I (bm25-trained)", "ds"): {"q1": ["s1"]},
                 (ACQO, "ds"): {"q1": ["s1", "s2"]}})
    gen = {(lab, "ds"): [{"format_ok": True}] for lab in ("Stage I (bm25-trained)", ACQO)}

    def scale_of(label, n, name):
        return ts.row_scale("m", scale, gen, label, n, name)

    runs, per_q, rows = ts.score_transfer(test, {("ds", "bm25"): FakeRetriever(LISTS),
                                                 ("ds", "dense"): FakeRetriever(LISTS)},
                                          subs, kinds, scale_of,
                                          eval_retrievers=["bm25", "dense"], k=10,
                                          bootstrap=100, seed=0)
    assert len(rows) == 6 and len(runs) == 8
    table = ts.transfer_table(per_q, subs, {"ds"}, retr_of).set_index(["retriever", "model"])
    assert table.loc[("dense", ACQO), "cross-retriever"]
    assert not table.loc[("bm25", ACQO), "cross-retriever"]
    assert table.loc[("bm25", ACQO), "nDCG@10"] == pytest.approx(1.0)  # RSF: d1, d2, d3
    assert table.loc[("bm25", ACQO), "sub-queries"] == 2
    assert ts.ranked_ids(runs[ACQO, "ds", "bm25"])["q1"] == ["d1", "d2", "d3"]
    scores = {(lab, "ds"): pd.DataFrame({"EM": [e], "F1": [f]}, index=["q1"])
              for lab, e, f in ((ts.RAW, 0.0, 0.5), (ts.RULE, 0.0, 0.5),
                                ("Stage I (bm25-trained)", 1.0, 1.0), (ACQO, 1.0, 1.0))}
    reader, reader_rows = ts.reader_table(scores, kinds, scale_of, datasets=["ds"],
                                          retriever="bm25", bootstrap=100, seed=0)
    assert len(reader_rows) == 6
    assert reader.set_index("model").loc[ACQO, "ΔF1 vs raw"] == pytest.approx(0.5)
    from qrlib.eval.compare import comparison_table

    cmp = comparison_table(rows + reader_rows)
    rec = ts.records(table.reset_index(), reader, cmp)
    assert rec[f"reader.ds.{ACQO}.f1"] == 1.0
    assert rec[f"ds.bm25.nDCG@10.{ACQO}.vs_raw"][0] == pytest.approx(1 - NDCG_2ND)
    extra = ts.extra_sentences(cmp[cmp.metric == "nDCG@10"], {"other"})
    assert extra[0].startswith("Out of domain (ds), the trained rows beat the raw question in")
    assert extra[-1].endswith("of 2 comparisons.")


# --------------------------------------------------------------------------- 18
def _decompositions(tmp_path):
    d07 = tmp_path / "07_acqo_stage2"
    d12 = tmp_path / "12_acqo_vanilla_rl"
    d07.mkdir()
    d12.mkdir()
    (d07 / "decompositions.json").write_text(json.dumps({
        f"{ACQO} | ds": [{"qid": "q1", "subqueries": ["s1", "s2"], "format_ok": True}],
        "Stage I (bm25-trained) | ds": [{"qid": "q1", "subqueries": ["s1"], "format_ok": False}]}))
    (d12 / "rewrites.json").write_text(json.dumps({
        "ds | bm25": [{"qid": "q1", "subqueries": ["s2"], "format_ok": True}]}))


def _ablation_rows(tmp_path):
    """07's and 12's rows read from their saved decompositions, with the test and 06."""
    _decompositions(tmp_path)
    s1, s2 = _record(tmp_path)
    vanilla = {"summaries": {"bm25": {"log": str(tmp_path / "log.csv")}}}
    test = {"ds": _ds()}
    rows = ab.AblationRows()
    rows.read(test, s1, s2, vanilla, "bm25", run_dir=tmp_path)
    return rows, test, s1


def test_ablation_rows_scores_and_comparisons(tmp_path):
    rows, test, s1 = _ablation_rows(tmp_path)
    assert [k[0] for k in rows.rows] == [ab.RAW, "ACQO", "ACQO, RRF at test only",
                                         "without Stage II", "without query decomposition"]
    assert rows.valid["without Stage II", "ds", "bm25"] == 0.0
    rows.add_decoded("without RSF [rrf-stage2]", "bm25",
                     {"ds": [{"qid": "q1", "subqueries": ["s1", "s2"], "format_ok": True}]},
                     [{"log": str(tmp_path / "log.csv")}] * 2, s1)
    assert rows.fusion["without RSF [rrf-stage2]", "ds", "bm25"] == "rrf"
    assert len(rows.scale["without RSF [rrf-stage2]", "bm25"][0]) == 2
    assert ab.check_decoding({"ds": [{"qid": "q1", "subqueries": ["s1", "s2"]}]}, rows.rows,
                             "bm25") == {"ds.bm25.decode_check_agreement": 1.0}
    with pytest.raises(QrlibError, match="decodes 1 of 1 test questions differently"):
        ab.check_decoding({"ds": [{"qid": "q1", "subqueries": ["s1"]}]}, rows.rows, "bm25")
    per_q, table = ab.score_rows(rows, test, {("ds", "bm25"): FakeRetriever(LISTS)}, model="m",
                                 k=10)
    t = table.set_index("row")
    assert t.loc["ACQO", "nDCG@10"] == pytest.approx(1.0)             # RSF: d1, d2 on top
    assert t.loc["ACQO, RRF at test only", "nDCG@10"] == pytest.approx(NDCG_23)  # RRF: d3 first
    assert t.loc["ACQO", "RL steps"] == 4 and t.loc[ab.RAW, "RL steps"] == 0
    pub = pd.DataFrame({"dataset": ["ds"], "retriever": ["bm25"], "query_id": ["q1"],
                        ab.RAW: [NDCG_2ND]})
    cmp = ab.comparisons(per_q, rows, pub, datasets=["ds"], retrievers=["bm25"], model="m",
                         bootstrap=100, seed=0)
    vs = ab.vs_acqo(cmp).set_index("baseline")["diff"]
    assert vs["ACQO, RRF at test only"] == pytest.approx(1 - NDCG_23)
    assert vs["without query decomposition"] == pytest.approx(1 - NDCG_1ST)
    with pytest.raises(QrlibError, match="differs from 07's"):
        ab.comparisons(per_q, rows, pub.assign(**{ab.RAW: 0.0}), datasets=["ds"],
                       retrievers=["bm25"], model="m", bootstrap=100, seed=0)
    rec = ab.records(cmp)
    assert rec["ds.bm25.ACQO minus without Stage II"][0] == pytest.approx(1 - NDCG_1ST)
    extra = ab.extra_sentences(cmp)
    assert len(extra) == 1 and len(split_sentences(extra[0])) == 1
    found = what_we_found(cmp[cmp.baseline == ab.RAW], notebook="none", tables_dir=tmp_path,
                          extra=extra, subject="ACQO and ablation")
    for name in set(cmp.baseline) - {ab.RAW}:     # every ablated row survives the 6-sentence cap
        assert f"{name} {vs[name]:+.3f} [" in found
    paper = pd.DataFrame({"TopiOCQA BM25 NDCG@3": [50.0, 45.0, 40.0, 42.0],
                          "HotpotQA BM25 MAP@10": [60.0, 55.0, 50.0, 52.0]},
                         index=["ACQO", "without RSF", "without Stage II", "without QD"])
    drops = ab.vs_paper(table, paper, datasets=["ds"], retrievers=["bm25"]).set_index("row")
    assert drops.loc["without RSF [rrf-stage2]", "paper ΔNDCG@3 (TopiOCQA, BM25)"] == 5.0
    assert drops.loc["without query decomposition", "paper ΔMAP@10 (HotpotQA, BM25)"] == 8.0
    assert math.isnan(drops.loc["ACQO, RRF at test only", "paper ΔMAP@10 (HotpotQA, BM25)"])
    ex = ab.examples(rows.rows, test["ds"], "ds", "bm25", 2)
    assert list(ex.index) == ["question", "ACQO", "without Stage II",
                              "without query decomposition", "without RSF [rrf-stage2]"]
    first = ab.first_questions(test, 1)["ds"]
    assert list(first.queries) == ["q1"] and list(first.qrels) == ["q1"]


def test_stage1_lever_row_against_stage1_and_acqo(tmp_path):
    rows, test, s1 = _ablation_rows(tmp_path)
    lever = ab.LEVER_LABEL["fused-stage1"]
    rows.add_decoded(lever, "bm25",
                     {"ds": [{"qid": "q1", "subqueries": ["s1", "s2"], "format_ok": True}]},
                     [{"log": str(tmp_path / "log.csv")}], s1, fusion="rsf")
    assert rows.fusion[lever, "ds", "bm25"] == "rsf"
    assert lever in rows.setting()
    per_q, table = ab.score_rows(rows, test, {("ds", "bm25"): FakeRetriever(LISTS)}, model="m",
                                 k=10)
    assert table.set_index("row").loc[lever, "nDCG@10"] == pytest.approx(1.0)  # RSF, like ACQO
    pub = pd.DataFrame({"dataset": ["ds"], "retriever": ["bm25"], "query_id": ["q1"],
                        ab.RAW: [NDCG_2ND]})
    cmp = ab.comparisons(per_q, rows, pub, datasets=["ds"], retrievers=["bm25"], model="m",
                         bootstrap=100, seed=0)
    mine = cmp[(cmp.method == lever) & (cmp.baseline == ab.STAGE1)]
    assert len(mine) == 1 and mine["diff"].iloc[0] == pytest.approx(1 - NDCG_1ST)
    assert ab.vs_acqo(cmp).set_index("baseline").loc[lever, "diff"] == pytest.approx(0.0)
    extra = ab.extra_sentences(cmp)
    assert len(extra) == 1 and len(split_sentences(extra[0])) == 1
    assert f"; and {lever} minus Stage I with Eq. 6 (without Stage II) +{1 - NDCG_1ST:.3f} [" \
        in extra[0]
    runs = {("fused-stage1", "bm25"): {"log": str(tmp_path / "log.csv")}}
    fig, curves = ab.stage1_curves(s1, runs, ["bm25"])
    assert list(curves) == [("Stage I, Eq. 6 (06)", "bm25"), (lever, "bm25")]
    assert [ax.get_ylabel()[:13] for ax in fig.axes] == ["fused nDCG@10", "sub-queries p"]


def test_ablation_guards():
    ab.check_readings(["rrf-stage2", "rrf-both"], ["fused-stage1"])
    with pytest.raises(QrlibError, match="unknown reading 'rrf-x'"):
        ab.check_readings(["rrf-x"])
    with pytest.raises(QrlibError, match="levers: unknown reading 'eq9'; accepted: fused-stage1"):
        ab.check_readings([], ["eq9"])
    with pytest.raises(QrlibError, match="no cold start for bm25"):
        ab.require_cold_start({}, "bm25")
    rec = SimpleNamespace(train_rows=[{"qid": "a"}, {"qid": "b"}])
    s2 = SimpleNamespace(summaries={"bm25": {}}, kept={"bm25": []}, adapter=lambda k: None)
    assert ab.stage2_questions(rec, s2, "bm25") == rec.train_rows   # nothing kept: all
