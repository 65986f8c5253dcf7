"""Notebooks 08 and 15's table builders (qrlib.methods.sage.pools and .study) on small
synthetic pools and frames, with exact expected values; no model is loaded."""
from __future__ import annotations

import json
import sys
import types

import pandas as pd
import pytest

from qrlib.core.errors import QrlibError
from qrlib.eval.compare import untrained_scale
from qrlib.methods.sage import pools, study

# two queries, a pool of three rewrites each (one per SAGE strategy prompt), one retriever
SCORED = pd.DataFrame({
    "dataset": ["d"] * 6, "retriever": ["bm25"] * 6, "family": ["SAGE strategies"] * 6,
    "qid": ["q1"] * 3 + ["q2"] * 3,
    "prompt": ["sage/s1", "sage/s2", "sage/s3"] * 2,
    "ndcg": [0.0, 0.5, 1.0, 0.2, 0.2, 0.8],
    "raw": [0.5] * 3 + [0.8] * 3,
    "format_ok": [True, True, False, True, True, True]})


def test_families_and_pool_sizes():
    fam = pools.prompt_families(["dmqr/general", "generic/rewrite", "dmqr/keyword", "sage/s1"])
    assert fam == {"SAGE strategies": ["sage/s1", "sage/s2", "sage/s3", "sage/s4", "sage/s5"],
                   "DMQR-RAG": ["dmqr/general", "dmqr/keyword"], "generic": ["generic/rewrite"]}
    pool = pools.pool_sizes(fam, 4, 16, 8)
    assert pool == {"SAGE strategies": 4, "DMQR-RAG": 4, "generic": 16}
    assert pools.describe_pools(fam, pool).splitlines()[1] == "DMQR-RAG: 2 prompt(s) x 4 samples = pool 8"
    with pytest.raises(QrlibError, match="DMQR-RAG pool has only 8 rewrites"):
        pools.pool_sizes(fam, 4, 16, 16)


def test_best_of_n_table_is_the_exact_expected_maximum():
    bon = pools.best_of_n_table(SCORED, [1, 2, 3]).set_index("N")
    # q1 [0, .5, 1]: E max of 2 = .5/3 + 1*2/3; q2 [.2, .2, .8]: .2/3 + .8*2/3
    assert bon["best-of-N nDCG@10"].to_dict() == pytest.approx(
        {1: 0.45, 2: (5 / 6 + 0.6) / 2, 3: 0.9})
    assert bon["raw nDCG@10"].tolist() == pytest.approx([0.65] * 3)
    assert bon["mean sample nDCG@10"].tolist() == pytest.approx([0.45] * 3)
    assert bon["format ok"].tolist() == pytest.approx([5 / 6] * 3) and (bon.queries == 2).all()


def test_strategy_share_beats_raw_and_records():
    share = pools.strategy_best_share(SCORED)
    # q1: s3 wins; q2: s3 wins (0.8 is unique), so s3 has share 1
    assert share.set_index("prompt")["best share"].to_dict() == {"sage/s3": 1.0}
    # beats raw: q1 1.0 > 0.5, q2 0.8 is not > 0.8
    beats = pools.beats_raw(share)
    assert beats.loc[("d", "bm25"), "SAGE strategies"] == 0.5
    bon = pools.best_of_n_table(SCORED, [1, 3])
    cmp = pools.family_comparisons(SCORED, ["SAGE strategies"], (1, 3), resamples=200)
    rec = pools.bon_records(bon, cmp, beats)
    assert rec["bon.d.bm25.SAGE strategies.best_of_3"] == pytest.approx(0.9)
    assert rec["bon.d.bm25.raw"] == pytest.approx(0.65)
    assert rec["bon.d.bm25.SAGE strategies.beats_raw"] == 0.5
    key = "bon.d.bm25.SAGE strategies, best of 3 (oracle) minus raw query"
    assert rec[key][0] == pytest.approx(0.9 - 0.65)
    assert "strongest family is SAGE strategies on d/bm25 (0.900 against 0.650 raw)" in \
        pools.headroom_sentence(bon)


def test_family_comparisons_pair_each_family_with_raw_and_the_later_families():
    two = pd.concat([SCORED, SCORED.assign(family="generic", ndcg=SCORED.ndcg / 2)])
    cmp = pools.family_comparisons(two, ["SAGE strategies", "generic"], (1, 3), resamples=200)
    pairs = set(zip(cmp.method, cmp.baseline))
    assert pairs == {("SAGE strategies, best of 1", "raw query"),
                     ("SAGE strategies, best of 3 (oracle)", "raw query"),
                     ("generic, best of 1", "raw query"),
                     ("generic, best of 3 (oracle)", "raw query"),
                     ("SAGE strategies, best of 1", "generic, best of 1"),
                     ("SAGE strategies, best of 3 (oracle)", "generic, best of 3 (oracle)")}
    row = cmp[(cmp.method == "SAGE strategies, best of 1") & (cmp.baseline == "generic, best of 1")]
    assert row["diff"].item() == pytest.approx(0.45 - 0.225)
    assert set(cmp["kind"]) == {"untrained"} and set(cmp["test queries"]) == {2}


def test_crs_readings_show_crs_equals_direct_under_the_group_median():
    t = pools.crs_readings(SCORED).set_index("CRS reading")
    assert t.loc["group", "max |A_CRS - A_Direct|"] < 1e-9
    assert t.loc["no-centring", "max |A_CRS - A_Direct|"] > 0.1
    assert (t.groups == 2).all()
    assert pools.crs_records(t.reset_index()) == {
        "crs.d.bm25.max_gap_vs_direct": t.loc["group", "max |A_CRS - A_Direct|"]}


def test_strategy_choice_counts_ids_and_filters_labels():
    rw = {("d", "SAGE-SCS"): pd.DataFrame({"strategy": [1, 1, 3, None]}),
          ("d", "unguided RL (DeepRetrieval-style)"): pd.DataFrame({"strategy": [None] * 2})}
    t = study.strategy_choice(rw)
    assert t.columns.tolist() == ["dataset", "model", "none", "s1", "s2", "s3", "s4", "s5"]
    assert t.iloc[0][["none", "s1", "s3"]].tolist() == [0.25, 0.5, 0.25]
    assert t.iloc[1]["none"] == 1.0
    assert study.strategy_choice(rw, {"SAGE-SCS"}).model.tolist() == ["SAGE-SCS"]


def _variant(key, label, prompt):
    return types.SimpleNamespace(key=key, label=label, prompt=prompt)


def test_labels_records_and_sentences():
    runs = [_variant("unguided", "unguided RL", "generic/rewrite"),
            _variant("scs", "SAGE-SCS", "sage/guided")]
    assert study.sage_labels(runs) == {"untrained (sage/guided)", "SAGE-SCS"}
    assert study.ablation_labels(runs[:1], 0.05) == {
        "unguided": "unguided RL",
        "scs": "SCS, proactive prompt, p=0.05 (notebook 08's SAGE-SCS)"}
    res = pd.DataFrame({"dataset": ["d", "d"], "model": ["raw query", "SAGE-SCS"],
                        "nDCG@10": [0.5, 0.6], "ΔnDCG@10 vs raw": [0.0, 0.1],
                        "lo": [0.0, 0.05], "hi": [0.0, 0.15], "modified": [0.0, 0.75]})
    assert study.result_records(res, "sage.", delta=True) == {
        "sage.d.raw query.ndcg10": 0.5, "sage.d.raw query.delta_vs_raw": [0.0, 0.0, 0.0],
        "sage.d.raw query.modified": 0.0, "sage.d.SAGE-SCS.ndcg10": 0.6,
        "sage.d.SAGE-SCS.delta_vs_raw": [0.1, 0.05, 0.15], "sage.d.SAGE-SCS.modified": 0.75}
    assert set(study.result_records(res)) == {"d.raw query.ndcg10", "d.raw query.modified",
                                              "d.SAGE-SCS.ndcg10", "d.SAGE-SCS.modified"}
    choice = pd.DataFrame({"dataset": ["d", "d"], "model": ["untrained (sage/guided)", "SAGE-SCS"],
                           "none": [0.5, 0.0], "s1": [0.5, 0.8], "s2": [0.0, 0.2]})
    cmp = pd.DataFrame({"kind": ["trained"], "method": ["SAGE-SCS"]})
    assert study.trained_sentences(choice, res, cmp) == [
        "Trained SAGE rewriters use their most frequent strategy for 80% of test queries.",
        "They modify 75% of the queries."]
    t3 = pd.DataFrame({"row": ["conservative", "proactive"], "value": [0.5, 0.998]})
    assert study.ablation_sentence(res, ["SAGE-SCS"], t3) == (
        "The trained rows modify 75% of the test queries (SAGE Table 3: conservative "
        "50.0%, proactive 99.8%).")


def test_pairwise_and_per_query_pairs_read_the_evaluation():
    s = {"raw query": pd.Series({"q1": 0.2, "q2": 0.4}),
         "SAGE Direct": pd.Series({"q1": 0.3, "q2": 0.4}),
         "SAGE-SCS": pd.Series({"q1": 0.5, "q2": 0.6})}
    ev = study.Evaluation(None, [], scores={("d", k): v for k, v in s.items()},
                          scales={("d", k): untrained_scale(2) for k in s})
    variants = {"unguided": _variant("unguided", "unguided RL", "generic/rewrite"),
                "direct": _variant("direct", "SAGE Direct", "sage/guided"),
                "scs": _variant("scs", "SAGE-SCS", "sage/guided")}
    rows = study.pairwise(ev, variants, ["direct", "scs"], ["d"], retriever="dense",
                          resamples=200)  # unguided was not trained: no pair with it
    assert [(r["method"], r["baseline"]) for r in rows] == [("SAGE-SCS", "SAGE Direct")]
    assert rows[0]["diff"] == pytest.approx(0.2) and rows[0]["baseline kind"] == "trained"
    assert study.describe_pairs(rows).startswith("SAGE-SCS minus SAGE Direct on d/dense")
    head = [{"kind": "trained", "baseline kind": "baseline", "dataset": "d",
             "method": "SAGE-SCS", "diff": 0.25, "lo": 0.2, "hi": 0.3}]
    pairs, intervals = study.per_query_pairs(head + rows, ev.scores)
    assert pairs == {"d: SAGE-SCS": ({"q1": 0.2, "q2": 0.4}, {"q1": 0.5, "q2": 0.6})}
    assert intervals == {"d: SAGE-SCS": "+0.250 [+0.200, +0.300]"}


def test_train_runs_names_runs_and_places_appended_runs_after_each_dataset(monkeypatch):
    import qrlib.methods.sage as pkg

    seen = []

    def train_variant(v, searcher, full, queries, *, name, run_dir, dataset, **kw):
        seen.append((name, searcher, kw["save_steps"], kw["n_queries"], kw["stop"]))
        return {"steps": kw["max_steps"], "adapter": name}

    fake = types.SimpleNamespace(train_variant=train_variant)
    monkeypatch.setitem(sys.modules, "qrlib.methods.sage.pipeline", fake)
    monkeypatch.setattr(pkg, "pipeline", fake, raising=False)
    ds = lambda n: types.SimpleNamespace(name=n, queries={"q": "x"}, corpus={"a": "b"})  # noqa: E731
    data = {"a": (ds("a"), ds("a"), ds("a")), "b": (ds("b"), ds("b"), ds("b"))}
    runs = [_variant("direct", "SAGE Direct", "p"), _variant("scs", "SAGE-SCS", "p")]
    out = study.train_runs(runs, data, lambda full, kind: f"{full.name}-{kind}", retriever="bm25",
                           run_dir="r", train_steps=9, n_train_queries=3, n_distractors=5,
                           stop=("}",), append={"a": {"old": {"steps": 1}}}, model="m")
    assert list(out) == [("a", "direct"), ("a", "scs"), ("a", "old"), ("b", "direct"),
                         ("b", "scs")]
    assert seen[0] == ("sage-a-bm25-direct", "a-bm25", 2, 3, ["}"])
    assert study.summaries_json(out)["a:old"] == {"steps": 1}


def test_scs_runs_of_08_read_the_summaries_or_say_what_to_rerun(tmp_path):
    with pytest.raises(QrlibError, match="run notebook 08 first"):
        study.scs_runs_of_08(tmp_path, ["nfcorpus"])
    (tmp_path / "08_sage" / "a").mkdir(parents=True)
    (tmp_path / "08_sage" / "a" / "config.json").write_text(
        json.dumps({"reward_params": {"p": 0.05}, "retriever": "dense"}))
    run = {"adapter": str(tmp_path / "08_sage" / "a" / "adapter"), "steps": 2}
    (tmp_path / "08_sage" / "sage_summaries.json").write_text(json.dumps({"nfcorpus:scs": run}))
    assert study.scs_runs_of_08(tmp_path, ["nfcorpus"]) == {"nfcorpus": run}
    with pytest.raises(QrlibError, match="no SAGE-SCS run on scifact"):
        study.scs_runs_of_08(tmp_path, ["scifact"])


def test_captions_fill_their_fields():
    assert study.caption("15_comparisons", profile="cpu").endswith("[profile: cpu]")
    assert "(dense)" in study.caption("08_sage_results", retriever="dense")
    assert "policy, RL steps" in study.caption("08_sage_results", retriever="dense")


def test_sample_pools_releases_the_policy_and_engine_before_returning(monkeypatch):
    """08 samples its best-of-n pools before training: the sampling policy and its vLLM
    engine go back first (a stored vLLM traceback otherwise keeps them alive)."""
    from types import SimpleNamespace

    from qrlib.generation import policy, rewrite
    from qrlib.rl import release

    calls = []
    monkeypatch.setattr(policy, "load_policy", lambda model: ("pol", "tok"))

    def sample(pol, tok, queries, pname, n, **kw):
        calls.append("sample")
        return pd.DataFrame({"qid": list(queries) * n, "search_text": ["x"] * (len(queries) * n)})

    monkeypatch.setattr(rewrite, "sample_rewrites", sample)
    monkeypatch.setattr(release, "release_memory", lambda: calls.append("release"))
    data = {"toy": SimpleNamespace(queries={"q1": "a", "q2": "b"})}
    out = pools.sample_pools("m", data, {"generic": ["p1", "p2"]}, {"generic": 2},
                             max_new_tokens=8, temperature=1.0, batch_size=4)
    assert calls == ["sample", "sample", "release"] and len(out) == 8
    assert set(out.prompt) == {"p1", "p2"} and set(out.family) == {"generic"}


def test_sample_pools_reads_back_the_pools_an_earlier_stopped_run_finished(monkeypatch, tmp_path,
                                                                         capsys):
    """With a cache folder each prompt's pool is written as it is done and read back (no
    policy loaded) by a resumed run; other sampling settings are another key."""
    from types import SimpleNamespace

    from qrlib.generation import policy, rewrite
    from qrlib.rl import release

    calls = []
    monkeypatch.setattr(policy, "load_policy", lambda model: calls.append("load") or ("p", "t"))

    def sample(pol, tok, queries, pname, n, **kw):
        calls.append(pname)
        return pd.DataFrame({"qid": list(queries) * n, "search_text": [f"{pname} {kw['seed']}"]
                             * (len(queries) * n), "valid": [True] * (len(queries) * n)})

    monkeypatch.setattr(rewrite, "sample_rewrites", sample)
    monkeypatch.setattr(release, "release_memory", lambda: calls.append("release"))
    data = {"toy": SimpleNamespace(queries={"q1": "a", "q2": "b"})}
    fams = {"generic": ["generic/rewrite", "dmqr/general"]}
    kw = dict(max_new_tokens=8, temperature=1.0, batch_size=4, cache=tmp_path / "pools")
    first = pools.sample_pools("m", data, fams, {"generic": 2}, **kw)
    assert calls == ["load", "generic/rewrite", "dmqr/general", "release"]
    assert len(list((tmp_path / "pools").glob("*.parquet"))) == 2
    calls.clear()
    again = pools.sample_pools("m", data, fams, {"generic": 2}, **kw)
    assert calls == [] and "2 of 2 prompt pools read back" in capsys.readouterr().out
    pd.testing.assert_frame_equal(first, again)
    pools.sample_pools("m", data, fams, {"generic": 2}, **{**kw, "seed": 1})
    assert calls == ["load", "generic/rewrite", "dmqr/general", "release"]
