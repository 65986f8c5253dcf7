"""Execute the smoke profile's notebooks that load a language model (as `make test` promises)
and check their products; tests/test_notebooks_modelfree.py runs and checks the others (the
notebooks of params/smoke-modelfree.yaml) in the other pytest process of `make test`."""
from __future__ import annotations

import os

import pytest

from _smoke import (SMOKE, SmokeChecks, model_free_notebooks, model_notebooks,
                    rec, run)  # noqa: F401 (rec: a fixture)
from qrlib import workbook as wb
from qrlib.core.io import read_table

# `make test` runs this file in a pytest process of its own, beside the unit tests.
pytestmark = pytest.mark.notebooks


# Two notebooks at once (each after what it reads): the smoke kernels are single-threaded,
# so the second one uses the core the unit-test process leaves once it ends (README, "Two
# busy processes"). QRLIB_SMOKE_JOBS=1 runs them one by one.
SMOKE_JOBS = int(os.environ.get("QRLIB_SMOKE_JOBS", "2"))


@pytest.fixture(scope="module")
def smoke_run():
    return run(SMOKE, only=model_notebooks(), jobs=SMOKE_JOBS)


class TestSmokeRun(SmokeChecks):
    """The shared checks (tests/_smoke.py) over the notebooks this file runs."""
    NAMES = model_notebooks()
    # claims whose rows the smoke profile does not train (it trains one run per notebook)
    UNTESTED_CLAIMS = {"dr-rl-beats-raw-dense": "smoke 05 trains BM25 only",
                       "sage-scs-beats-direct": "smoke 08 trains unguided and SCS only"}


def test_the_two_smoke_test_files_run_every_notebook():
    assert sorted(model_notebooks() + model_free_notebooks()) == wb.notebook_names()


# ----------------------------------------------------------------------------- key numbers
# Each notebook records its key numbers (qrlib.eval.record); these tests read them back and
# assert them, so a wrong number fails `make test`, not just a crashed cell. Pinned values
# are those of the smoke profile (seeded subsets, deterministic retrieval and simulation).


def test_05_and_10_score_the_raw_claims_identically(rec):
    r5, r10 = rec["05_vanilla_rl"], rec["10_evaluation"]
    raw5 = {k: v for k, v in r5.items() if k.startswith("test.") and ".raw." in k}
    assert raw5
    for k, v in raw5.items():
        _, dataset, kind, _, _ = k.split(".")
        if k.endswith(".ndcg10") and f"{dataset}.{kind}.raw.ndcg10" in r10:
            assert r10[f"{dataset}.{kind}.raw.ndcg10"] == pytest.approx(v, abs=1e-9)
    steps = [v for k, v in r5.items() if k.endswith(".steps")]
    assert steps and all(s == 2 for s in steps)              # smoke: train_steps 2
    assert all(0 <= v <= 1 for k, v in r5.items() if k.endswith((".modified", "_quarter")))


def test_05_and_10_compare_in_one_schema_and_agree(smoke_run):
    """Issue 25 item 3: both notebooks write the one comparison schema; 10 re-scores 05's
    rewrites, so its trained-vs-raw rows are 05's, interval included (same seed)."""
    from qrlib.eval.compare import check_comparisons, select

    _, _, paths = smoke_run
    c5 = check_comparisons(read_table(paths["tables_dir"] / "05_comparisons.csv"), "05")
    c10 = check_comparisons(read_table(paths["tables_dir"] / "10_comparisons.csv"), "10")
    assert set(c5["baseline kind"]) == {"baseline", "untrained"}
    trained5 = select(c5, **{"baseline kind": "baseline"}).set_index(["dataset", "retriever", "method"])
    trained10 = select(c10, kind="trained").set_index(["dataset", "retriever", "method"])
    assert len(trained5) and set(trained5.index) <= set(trained10.index)
    for key, r in trained5.iterrows():
        for col in ("diff", "score", "baseline score", "lo", "hi", "RL steps", "test queries"):
            assert trained10.loc[key, col] == pytest.approx(r[col], abs=1e-4), (key, col)
    assert (select(c10, kind="untrained")["RL steps"] == 0).all()


def test_06_acqo_format_gate_and_training_ran(rec):
    r = rec["06_acqo_stage1"]
    # more than 3 sub-queries, or no JSON at all, is a format failure: delta = -1 (ACQO Eq. 5)
    assert r["demo.four_subqueries_reward"] == -1.0 and r["demo.no_json_reward"] == -1.0
    assert r["bm25.steps"] == 2
    assert 1.0 <= r["bm25.last.sub_queries"] <= 3.0
    # the rejection-sampling cold start ran (smoke: 2 samples per question, 1 SFT step)
    assert 0.0 <= r["bm25.warm.target_is_sample"] <= 1.0
    assert 0.0 <= r["bm25.warm.format_valid"] <= 1.0


def test_07_acqo_tau_filter_and_raw_row(rec):
    r = rec["07_acqo_stage2"]
    assert 0.0 <= r["bm25.tau.kept_share"] <= 1.0 and r["bm25.tau.questions"] == 6
    raw = r["2wikimultihopqa-mini.bm25.raw question.delta_vs_raw"]
    assert raw == [0.0, 0.0, 0.0]  # the raw question against itself
    for key, val in r.items():
        if key.endswith(".delta_vs_raw"):
            d, lo, hi = val
            assert lo <= d + 1e-12 and d <= hi + 1e-12, key


def test_07_every_row_states_its_training_scale(smoke_run):
    """Issue 24 item 5: the scale columns are read from the runs' logs (smoke: Stage I 2
    steps, Stage II 1 step), zero for the untrained rows."""
    from qrlib.eval.scale import missing_scale

    _, _, paths = smoke_run
    res = read_table(paths["tables_dir"] / "07_acqo_results.csv")
    res = res[res.dataset == "2wikimultihopqa-mini"].set_index("model")
    assert not missing_scale(res.columns)
    assert res.loc["ACQO: Stage I+II (bm25-trained)", "RL steps"] == 3
    assert res.loc["Stage I (bm25-trained)", "RL steps"] == 2
    assert res.loc["raw question", "RL steps"] == 0 and res.loc["raw question", "policy"] == "-"
    acqo = res.loc["ACQO: Stage I+II (bm25-trained)"]
    assert acqo["rollouts"] >= 3 * 2 and acqo["train min"] > 0  # 3 steps x 1 question x 2
    assert 1 <= acqo["train queries"] <= 6 and (res["test queries"] == 4).all()


def test_12_vanilla_row_pairs_with_07_and_states_its_budget(rec, smoke_run):
    """Issue 24 item 4: the single-query baseline trains for the smoke budget (1 step, set
    in the profile), states its scale from its log, and its table carries 07's raw and ACQO
    rows unchanged; its comparisons follow the one schema (issue 25) and agree with the
    rows' means."""
    from qrlib.eval.compare import check_comparisons, select
    from qrlib.eval.scale import missing_scale

    _, _, paths = smoke_run
    r = rec["12_acqo_vanilla_rl"]
    assert r["2wikimultihopqa-mini.bm25.vanilla.rl_steps"] == 1
    res = read_table(paths["tables_dir"] / "12_vanilla_results.csv").set_index("model")
    assert not missing_scale(res.columns)
    theirs = read_table(paths["tables_dir"] / "07_acqo_results.csv")
    theirs = theirs[theirs.dataset == "2wikimultihopqa-mini"].set_index("model")
    for label in ("raw question", "ACQO: Stage I+II (bm25-trained)"):
        assert res.loc[label, "nDCG@10"] == pytest.approx(theirs.loc[label, "nDCG@10"], abs=1e-4)
    van = res.loc["vanilla RL (bm25-trained, one query)"]
    assert van["RL steps"] == 1 and van["SFT steps"] == 0 and van["test queries"] == 4
    assert r["2wikimultihopqa-mini.bm25.vanilla.ndcg10"] == pytest.approx(van["nDCG@10"], abs=1e-4)
    cmp = check_comparisons(read_table(paths["tables_dir"] / "12_comparisons.csv"), "12")
    vs_raw = select(cmp, kind="trained", **{"baseline kind": "baseline"}).iloc[0]
    assert vs_raw.method == "vanilla RL (bm25-trained, one query)"
    assert vs_raw.lo <= vs_raw["diff"] + 1e-12 and vs_raw["diff"] <= vs_raw.hi + 1e-12
    assert vs_raw["diff"] == pytest.approx(van["nDCG@10"] - res.loc["raw question", "nDCG@10"],
                                           abs=1e-4)
    assert vs_raw["RL steps"] == 1 and vs_raw["test queries"] == 4
    acqo = select(cmp, method="ACQO: Stage I+II (bm25-trained)").iloc[0]
    assert acqo.baseline == van.name and acqo["RL steps"] == 3
    assert acqo["diff"] == pytest.approx(
        res.loc["ACQO: Stage I+II (bm25-trained)", "nDCG@10"] - van["nDCG@10"], abs=1e-4)


def test_13_sql_rows_compare_with_zero_shot_and_state_their_scale(rec, smoke_run):
    """Issue 26 item 1 (smoke): the SFT and RL-after-SFT rows, each compared with the
    zero-shot model on the same test questions; the paired difference is the difference of
    the two execution accuracies, and the split keeps databases apart."""
    from qrlib.eval.compare import check_comparisons

    _, _, paths = smoke_run
    r = rec["13_deepretrieval_sql"]
    res = read_table(paths["tables_dir"] / "13_sql_results.csv").set_index("model")
    cmp = check_comparisons(read_table(paths["tables_dir"] / "13_comparisons.csv"), "13")
    cmp = cmp.set_index("method")
    assert set(cmp.index) == {"zero-shot (think)", "SFT on gold (nothink)", "RL after SFT"}
    for m, row in cmp.iterrows():
        assert row["diff"] == pytest.approx(res.loc[m, "execution accuracy"]
                                            - res.loc["zero-shot (nothink)", "execution accuracy"],
                                            abs=1e-4)
        assert row["test queries"] == 3 and r[f"sql.{m}.exec_acc"] == pytest.approx(
            res.loc[m, "execution accuracy"], abs=1e-4)
    assert (cmp.loc["RL after SFT", ["RL steps", "SFT steps"]] == [1, 1]).all()
    assert (cmp.loc["SFT on gold (nothink)", ["RL steps", "SFT steps"]] == [0, 1]).all()
    split = read_table(paths["tables_dir"] / "13_split.csv").set_index("part")
    assert split.loc["train", "databases"] + split.loc["test", "databases"] == 19
    assert split.loc["test", "used"] == 3 and split.loc["train", "used"] == 4


RLQR_SMOKE_RAW_BM25 = 0.8262  # nDCG@3 of the raw query, 10 seeded SciFact claims, 200 distractors


def test_14_rlqr_rows_against_the_raw_query(rec, smoke_run):
    """RL-QR (smoke): synthesis from the unjudged documents, one rewriter per retriever;
    every comparison is the difference of the two rows' means on the same test queries and
    carries the run's scale."""
    from qrlib.eval.compare import check_comparisons, select

    r = rec["14_rlqr"]
    _, _, paths = smoke_run
    syn = read_table(paths["tables_dir"] / "14_synthesis.csv").set_index("dataset")
    assert syn.loc["scifact", "documents"] == 4
    assert r["scifact.synthesis.usable"] == syn.loc["scifact", "usable"] <= 4
    res = read_table(paths["tables_dir"] / "14_rlqr_results.csv")
    raw = res[res.model == "raw query"].set_index("retriever")["nDCG@3"]
    assert raw["bm25"] == pytest.approx(RLQR_SMOKE_RAW_BM25, abs=0.005)  # deterministic search
    cmp = check_comparisons(read_table(paths["tables_dir"] / "14_comparisons.csv"), "14")
    three = select(cmp, metric="nDCG@3")
    pairs = set(zip(three.retriever, three.method))
    assert {(k, m) for k in ("bm25", "dense") for m in ("untrained", "RL-QR")} <= pairs
    assert {m for _, m in pairs} <= {"untrained", "RL-QR", "RL-QR (hard questions)",
                                     "RL-QR (source at 2-50)"}
    for _, c in three.iterrows():
        row = res[(res.retriever == c.retriever) & (res.model == c.method)].iloc[0]
        assert c["diff"] == pytest.approx(row["nDCG@3"] - raw[c.retriever], abs=1e-4)
        assert c.lo <= c["diff"] + 1e-12 and c["diff"] <= c.hi + 1e-12
        assert c["test queries"] == 10
        assert c["RL steps"] == (1 if c.method.startswith("RL-QR") else 0)
        assert r[f"scifact.{c.retriever}.{c.method}.nDCG@3.vs_raw"] == pytest.approx(
            [c["diff"], c.lo, c.hi], abs=1e-4)  # the table is rounded to 4 decimals


# The tables with trained rows, by notebook; each carries the scale columns.
TRAINED_TABLES = {
    "05_vanilla_rl": ("05_test_results", "05_comparisons"),
    "07_acqo_stage2": ("07_acqo_results",),
    "08_sage": ("08_sage_results", "08_comparisons"),
    "10_evaluation": ("10_comparisons",),
    "12_acqo_vanilla_rl": ("12_vanilla_results", "12_comparisons"),
    "13_deepretrieval_sql": ("13_sql_results", "13_comparisons"),
    "14_rlqr": ("14_rlqr_results", "14_comparisons"),
    "15_sage_ablation": ("15_sage_ablation", "15_comparisons"),
    "16_acqo_transfer": ("16_comparisons",),
    "17_deepretrieval_evidence": ("17_comparisons",),
    "18_acqo_ablation": ("18_ablation", "18_comparisons"),
}


def test_every_trained_table_states_its_training_scale(smoke_run):
    from qrlib.eval.scale import VALID_BAR, VALIDITY_COLUMNS, missing_scale

    _, _, paths = smoke_run
    for nb, names in TRAINED_TABLES.items():
        for name in names:
            t = read_table(paths["tables_dir"] / f"{name}.csv")
            assert not missing_scale(t.columns), (name, missing_scale(t.columns))
            trained = t[t["RL steps"] > 0]
            assert len(trained) and (trained["rollouts"] > 0).all() and \
                (trained["train queries"] > 0).all(), name
            # test format validity beside training's last quarter, flagged below the bar
            assert set(VALIDITY_COLUMNS) <= set(t.columns), name
            assert trained["test valid"].notna().all() and \
                trained["train valid"].notna().all(), name
            # the collapse check of the same quarter (qrlib.rl.health's copy and echo shares)
            assert trained["train copy"].between(0, 1).all() and \
                trained["train echo"].between(0, 1).all(), name
            flags = t["valid flag"].fillna("").astype(str).str.len() > 0
            assert (flags == (t["test valid"] < VALID_BAR)).all(), name


def test_17_evidence_rows_and_injection(rec, smoke_run):
    from qrlib.eval.compare import check_comparisons, select

    r17 = rec["17_deepretrieval_evidence"]
    profile, _, paths = smoke_run
    for name in profile["notebooks"]["17_deepretrieval_evidence"]["datasets"]:
        for label in ("untrained nothink", "trained nothink"):
            assert 0.0 <= r17[f"{name}.{label}.injection_rate"] <= 1.0
        assert 0.0 <= r17[f"{name}.raw.H@20"] <= 1.0
    # the comparison rows agree with the evidence table (11's raw-question H@N, over more
    # questions, is bounded in tests/test_notebooks_modelfree.py)
    ev = read_table(paths["tables_dir"] / "17_evidence.csv")
    cmp = check_comparisons(read_table(paths["tables_dir"] / "17_comparisons.csv"), "17")
    assert set(cmp.metric) == {"H@1", "H@5", "H@20"}
    for _, c in select(cmp, metric="H@20", **{"baseline kind": "baseline"}).iterrows():
        rewriter, query = c.method.split(": ")
        row = ev[(ev.dataset == c.dataset) & (ev.rewriter == rewriter) & (ev["query"] == query)]
        assert c["score"] == pytest.approx(float(row["H@20"].iloc[0]), abs=1e-4)


def test_08_best_of_n_curves_and_sage_rows(rec, smoke_run):
    r = rec["08_sage"]
    _, _, paths = smoke_run
    # deterministic retrieval on the seeded subsets pins the raw-query rows
    assert r["bon.nfcorpus.bm25.raw"] == pytest.approx(0.6804, abs=0.005)
    assert r["sage.nfcorpus.raw query.ndcg10"] == pytest.approx(0.5634, abs=0.01)
    bon = read_table(paths["tables_dir"] / "08_best_of_n.csv")
    assert set(bon.family) == {"SAGE strategies", "DMQR-RAG", "generic"}
    for _, g in bon.groupby(["dataset", "retriever", "family"]):
        curve = g.sort_values("N")["best-of-N nDCG@10"].tolist()
        assert all(a <= b + 1e-12 for a, b in zip(curve, curve[1:])), curve  # monotone in N
        assert curve[0] == pytest.approx(g["mean sample nDCG@10"].iloc[0], abs=1e-9)
    for fam in ("SAGE strategies", "DMQR-RAG", "generic"):
        assert 0.0 <= r[f"bon.nfcorpus.bm25.{fam}.beats_raw"] <= 1.0
    # issue 26 item 4: the families with paired intervals, against the raw query and each
    # other, at N = 1 and the largest N; each difference is the curves' difference
    from qrlib.eval.compare import check_comparisons as _check

    bcmp = _check(read_table(paths["tables_dir"] / "08_best_of_n_comparisons.csv"), "08")
    curve = bon.set_index(["dataset", "retriever", "family", "N"])["best-of-N nDCG@10"]
    raw_bon = bon.groupby(["dataset", "retriever"])["raw nDCG@10"].first()

    def _value(ds, kind, label):
        if label == "raw query":
            return raw_bon[ds, kind]
        fam, n = label.split(", best of ")
        return curve[ds, kind, fam, int(n.split()[0])]

    assert len(bcmp) == 3 * 2 + 3 * 2  # per N in {1, 4}: 3 families vs raw, 3 family pairs
    for _, c in bcmp.iterrows():
        assert c["diff"] == pytest.approx(_value(c.dataset, c.retriever, c.method)
                                          - _value(c.dataset, c.retriever, c.baseline), abs=2e-4)
        assert c.lo <= c["diff"] + 1e-12 <= c.hi + 2e-12 and c["test queries"] == 2
    for key in ("unguided RL (DeepRetrieval-style)", "SAGE-SCS"):  # trained rows exist
        assert 0.0 <= r[f"sage.nfcorpus.{key}.ndcg10"] <= 1.0
        assert 0.0 <= r[f"sage.nfcorpus.{key}.modified"] <= 1.0
    for key, val in r.items():
        if key.endswith(".delta_vs_raw"):
            d, lo, hi = val
            assert lo <= d + 1e-12 and d <= hi + 1e-12, key
            if ".raw query." in key:
                assert val == [0.0, 0.0, 0.0]
    # every comparison in the one schema: SAGE rows vs raw agree with the results table,
    # and the pairwise rows are the difference of the two rows' means
    from qrlib.eval.compare import check_comparisons, select

    cmp = check_comparisons(read_table(paths["tables_dir"] / "08_comparisons.csv"), "08")
    res = read_table(paths["tables_dir"] / "08_sage_results.csv").set_index("model")
    for _, c in select(cmp, paper="sage", **{"baseline kind": "baseline"}).iterrows():
        assert c["diff"] == pytest.approx(res.loc[c.method, "ΔnDCG@10 vs raw"], abs=2e-4)
    for _, c in select(cmp, paper="sage", **{"baseline kind": "trained"}).iterrows():
        assert c["diff"] == pytest.approx(res.loc[c.method, "nDCG@10"]
                                          - res.loc[c.baseline, "nDCG@10"], abs=2e-4)
    assert not len(select(cmp, paper="rlqr"))  # RL-QR lives in notebook 14
    # issue 26 item 5: under the paper's group-median baseline CRS's update weights are Direct's
    crs = read_table(paths["tables_dir"] / "08_crs_readings.csv")
    group = crs[crs["CRS reading"] == "group"]
    assert len(group) and (group["max |A_CRS - A_Direct|"] < 1e-6).all()
    assert (crs[crs["CRS reading"] == "no-centring"]["max |A_CRS - A_Direct|"] > 0).all()


def test_15_ablation_rows_pair_with_the_raw_query_and_reuse_08s_scs_run(rec, smoke_run):
    from qrlib.eval.compare import check_comparisons, select

    r8, r15 = rec["08_sage"], rec["15_sage_ablation"]
    _, _, paths = smoke_run
    res = read_table(paths["tables_dir"] / "15_sage_ablation.csv").set_index("model")
    # the same data cut as 08 (same smoke settings): the raw query and 08's SCS row agree
    assert r15["nfcorpus.raw query.ndcg10"] == pytest.approx(r8["sage.nfcorpus.raw query.ndcg10"])
    scs = "SCS, proactive prompt, p=0.05 (notebook 08's SAGE-SCS)"
    assert r15[f"nfcorpus.{scs}.ndcg10"] == pytest.approx(r8["sage.nfcorpus.SAGE-SCS.ndcg10"])
    assert res.loc[scs, "RL steps"] == res.loc["SCS, conservative prompt, p=0", "RL steps"] > 0
    cmp = check_comparisons(read_table(paths["tables_dir"] / "15_comparisons.csv"), "15")
    for _, c in select(cmp, **{"baseline kind": "baseline"}).iterrows():
        assert c["diff"] == pytest.approx(res.loc[c.method, "nDCG@10"]
                                          - res.loc["raw query", "nDCG@10"], abs=2e-4)
        assert 0.0 <= res.loc[c.method, "modified"] <= 1.0


def test_16_transfer_rows_match_07_and_the_reader_scores_are_rates(rec, smoke_run):
    from qrlib.eval.compare import check_comparisons, select

    r7, r16 = rec["07_acqo_stage2"], rec["16_acqo_transfer"]
    _, _, paths = smoke_run
    # the same test cut and retriever as 07: the raw question scores identically
    key = "2wikimultihopqa-mini.bm25.raw question.ndcg10"
    assert r16[key] == pytest.approx(r7[key], abs=1e-9)
    cmp = check_comparisons(read_table(paths["tables_dir"] / "16_comparisons.csv"), "16")
    assert {"nDCG@10", "reader EM", "reader F1"} <= set(cmp.metric)
    assert set(cmp.retriever) >= {"bm25", "dense"}  # cross-retriever rows exist
    for _, c in select(cmp, metric="nDCG@10").iterrows():
        base = r16[f"{c.dataset}.{c.retriever}.raw question.ndcg10"]
        assert c["baseline score"] == pytest.approx(base, abs=1e-4)
        assert c["score"] == pytest.approx(r16[f"{c.dataset}.{c.retriever}.{c.method}.ndcg10"],
                                           abs=1e-4)
    for k, v in r16.items():
        if k.startswith("reader.") and k.endswith(".f1"):
            assert 0.0 <= v <= 1.0, k


def test_18_ablation_scores_07s_and_12s_rows_as_they_published_them(rec, smoke_run):
    """Issue 26 item 8 (ACQO Table 5): the rows 18 reads (07's ACQO and Stage I, 12's
    single query) score here exactly as 07 and 12 published them; the RRF-trained Stage II
    continues 06's Stage I (its RL steps are Stage I's plus 07's Stage II's); every
    ablation is compared with ACQO."""
    from qrlib.eval.compare import check_comparisons, select

    _, _, paths = smoke_run
    t = paths["tables_dir"]
    abl = read_table(t / "18_ablation.csv").set_index("row")
    r07 = read_table(t / "07_acqo_results.csv")
    r07 = r07[r07.dataset == "2wikimultihopqa-mini"].set_index("model")
    r12 = read_table(t / "12_vanilla_results.csv").set_index("model")
    for mine, theirs, table in (("raw question", "raw question", r07),
                                ("ACQO", "ACQO: Stage I+II (bm25-trained)", r07),
                                ("without Stage II", "Stage I (bm25-trained)", r07),
                                ("without query decomposition",
                                 "vanilla RL (bm25-trained, one query)", r12)):
        for m in ("nDCG@10", "R@10", "MAP@10"):
            assert abl.loc[mine, m] == pytest.approx(table.loc[theirs, m], abs=1e-4), (mine, m)
        assert abl.loc[mine, "RL steps"] == table.loc[theirs, "RL steps"], mine
    rrf = abl.loc["without RSF [rrf-stage2]"]
    assert rrf["fusion"] == "rrf" and abl.loc["ACQO", "fusion"] == "rsf"
    assert rrf["RL steps"] == abl.loc["without Stage II", "RL steps"] + 1  # 07's smoke: 1 step
    cmp = check_comparisons(read_table(t / "18_comparisons.csv"), "18")
    vs = select(cmp, method="ACQO", **{"baseline kind": "trained"})
    assert set(vs.baseline) == set(abl.index) - {"raw question", "ACQO"}
    for _, c in vs.iterrows():
        assert c["diff"] == pytest.approx(abl.loc["ACQO", "nDCG@10"]
                                          - abl.loc[c.baseline, "nDCG@10"], abs=2e-4)
    assert rec["18_acqo_ablation"]["2wikimultihopqa-mini.bm25.decode_check_agreement"] >= 0.9


def test_19_prompting_rows_pair_with_the_raw_query_and_the_dev_choice(rec, smoke_run):
    _, _, paths = smoke_run
    t = paths["tables_dir"]
    res, cmp = read_table(t / "19_prompting_results.csv"), read_table(t / "19_comparisons.csv")
    sel = read_table(t / "19_prompt_selection.csv")
    r = rec["19_prompting_baselines"]
    main = "nDCG@10"
    assert set(cmp.metric) == {main, "nDCG@3"}  # the smoke profile's also_compared
    assert (cmp.metric == main).sum() == (cmp.metric == "nDCG@3").sum()
    for c in cmp.to_dict("records"):
        row = res[(res.dataset == c["dataset"]) & (res.retriever == c["retriever"])]
        m = c["metric"]
        assert c["score"] == pytest.approx(row[row.method == c["method"]][m].item(), abs=1e-4)
        assert c["baseline score"] == pytest.approx(row[row.method == "raw"][m].item(),
                                                    abs=1e-4)
        assert c["diff"] == pytest.approx(c["score"] - c["baseline score"], abs=2e-4)
        assert c["lo"] <= c["diff"] <= c["hi"] and c["RL steps"] == 0  # untrained
        if m == main:  # the recorded numbers are the main metric's
            key = f"{c['dataset']}.{c['retriever']}.{c['method']}.diff"
            assert r[key] == pytest.approx(c["diff"], abs=1e-4)
    # the q x5 reading is BM25's only; every block has all other rows
    cmp = cmp[cmp.metric == main]
    assert set(cmp[cmp.retriever == "dense"].method) == {"spqe", "pseudo-doc", "best-prompt"}
    # the chosen prompt is the development argmax, and the test row names it
    for (name, kind), g in sel.groupby(["dataset", "retriever"]):
        chosen = g[g.chosen]
        assert len(chosen) == 1 and chosen[f"dev {main}"].item() == g[f"dev {main}"].max()
        detail = res[(res.dataset == name) & (res.retriever == kind)
                     & (res.method == "best-prompt")].detail.item()
        assert detail == f"{chosen.prompt.item()} ({chosen['mode'].item()})"


def test_20_pairs_trained_rows_with_the_prompting_baseline(rec, smoke_run):
    """Every trained row of every comparison table is in 20's table, and a paired difference
    to notebook 19's prompting baseline is what the saved per-query values give."""
    from qrlib.eval import trained_rows as TR
    from qrlib.eval.compare import read_per_query

    _, _, paths = smoke_run
    t = paths["tables_dir"]
    table = read_table(t / "20_trained_rows.csv")
    assert list(table.columns) == list(TR.TRAINED_COLUMNS)
    key = ["paper", "dataset", "retriever", "metric", "method"]
    expected, n_rows = set(), 0
    for path in sorted(t.glob("[0-9][0-9]_comparisons.csv")):
        if path.stem[:2] in ("09", "10", "19", "20"):
            continue
        cmp = read_table(path)
        assert (t / f"{path.stem}_per_query.csv").exists(), path.stem
        sel = TR.compared_rows(cmp)  # vs the raw query, else the training-free baseline
        expected |= set(map(tuple, sel[key].values))
        n_rows += len(sel)
    # every trained row is there, a row re-evaluated unchanged by a later notebook once
    assert set(map(tuple, table[key].values)) == expected
    assert len(expected) <= len(table) <= n_rows
    assert len(table) == rec["20_trained_rows"]["trained_rows.n"]
    paired = table[table["vs prompting verdict"] != "not compared"]
    assert len(paired) == rec["20_trained_rows"]["trained_rows.paired"] >= 1  # 05's smoke row
    prompting = read_per_query(t / "19_comparisons_per_query.csv")
    no_raw = paired["vs raw verdict"] == TR.NO_RAW  # 13: against its own zero-shot model
    for _, r in paired[no_raw].iterrows():
        own = TR.compared_rows(read_table(t / f"{r.notebook[:2]}_comparisons.csv"))
        own = own[own.method == r.method].iloc[0]
        assert r["vs prompting"] == pytest.approx(own["diff"], abs=1e-4)
        assert own["baseline"] in r["prompting note"]
    for _, r in paired[~no_raw].iterrows():
        pq = read_per_query(t / f"{r.notebook[:2]}_comparisons_per_query.csv")
        pq = pq[(pq.dataset == r.dataset) & (pq.retriever == r.retriever) &
                (pq.metric == r.metric)]
        own = pq[pq.method == r.method].set_index("qid").value
        twin = TR.untrained_twin(r.method)  # 17's H@N: notebook 19 has none in that metric
        if twin and r["prompting note"].endswith(f"{TR.OWN_UNTRAINED}: {twin}"):
            base = pq[pq.method == twin].set_index("qid").value
        else:
            base = prompting[(prompting.dataset == r.dataset) &
                             (prompting.retriever == r.retriever) &
                             (prompting.metric == r.metric) &
                             (prompting.method == TR.PROMPTING_METHOD)].set_index("qid").value
        assert r["vs prompting"] == pytest.approx((own - base.loc[own.index]).mean(), abs=1e-4)
        assert r["vs prompting lo"] <= r["vs prompting"] <= r["vs prompting hi"]
    unpaired = table[table["vs prompting verdict"] == "not compared"]
    assert (unpaired["prompting note"].astype(str).str.len() > 0).all()
