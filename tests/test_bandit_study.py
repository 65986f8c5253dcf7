"""qrlib.methods.bandits.study: notebook 09's steps on small hand-made inputs (no data, no
retrieval): arms, units, simulation bookkeeping, tables, the direction checks and the text."""
from __future__ import annotations

from types import SimpleNamespace

import matplotlib
import numpy as np
import pandas as pd
import pytest

from qrlib.eval.findings import split_sentences
from qrlib.methods.bandits import bandits as B
from qrlib.methods.bandits import study as BS

matplotlib.use("Agg")


def _ds(queries, qrels, titles=None, meta=None):
    corpus = {d: {"title": (titles or {}).get(d, d), "text": ""}
              for r in qrels.values() for d in r}
    return SimpleNamespace(queries=queries, qrels=qrels, corpus=corpus,
                           query_meta=meta or {q: {} for q in queries})


class AnyList(dict):
    """A ranked cache that answers every (dataset, arm) with the same list."""

    def __init__(self, lst):
        super().__init__()
        self.lst = lst

    def __missing__(self, key):
        return self.lst


# ----------------------------------------------------------------------------- arms
def test_arms_put_the_request_first_and_drop_blank_and_repeated_subqueries():
    assert BS.arms_for("Who won?", ["a", " ", "", "WHO WON?", "b"]) == ["Who won?", "a", "b"]
    assert BS.arms_for("Who won?", ["a", " ", "who won?"], add_question_arm=False) == ["a", "who won?"]


def test_oracle_decomposition_uses_supporting_titles_or_the_judged_titles():
    ds = _ds({"q1": "Was Paris or Rome older?", "q2": "Who built it?"},
             {"q1": {"d1": 1}, "q2": {"d2": 1}}, titles={"d1": "Paris", "d2": "Rome"},
             meta={"q1": {"supporting_titles": ["Paris", "Rome"]}, "q2": {}})
    dec = BS.rule_decompositions({"toy": ds}, ["oracle"], 4)
    assert list(dec) == [("toy", "oracle")]
    assert set(dec[("toy", "oracle")]) == {"q1", "q2"}
    assert all(len(samples) == 1 for samples in dec[("toy", "oracle")].values())
    assert BS.add_model_decompositions(dec, {}, kinds=["oracle"], model_name=None, n_requests=1,
                                       n_samples=1, n_queries=2, max_new_tokens=8,
                                       cache_path=None, seed=0) == "not requested"
    assert BS.add_model_decompositions(dec, {}, kinds=["model"], model_name=None, n_requests=1,
                                       n_samples=1, n_queries=2, max_new_tokens=8,
                                       cache_path=None, seed=0).startswith("skipped: decompose_model")
    assert "[toy / oracle]" in BS.decomposition_examples(dec, {"toy": ds})


# ----------------------------------------------------------------------------- units
def test_units_keep_requests_with_a_relevant_document_and_pool_stats_count_them():
    ds = _ds({"q1": "first", "q2": "second"}, {"q1": {"a": 1, "z": 1}, "q2": {"zz": 1}})
    decomp = {("toy", "heuristic"): {"q1": [["x", "y"]], "q2": [["x"]]}}
    ranked = AnyList([("a", 3.0), ("b", 2.0), ("c", 1.0)])
    units = BS.build_units({"toy": ds}, decomp, ranked, {"toy": None}, add_question_arm=True,
                           min_relevant=1)
    # q2's gold document is never retrieved: left out
    assert [(u["qid"], u["arms"], u["pool"], u["relevant"], u["gold"]) for u in units] == [
        ("q1", 3, 3, 1, 2)]
    stats = BS.pool_stats(units)
    assert stats.to_dict("records") == [{"dataset": "toy", "decomposition": "heuristic",
                                         "requests": 1, "runs": 1, "arms": 3.0, "pool": 3.0,
                                         "relevant_in_pool": 1.0, "gold": 2.0,
                                         "share_relevant": 1 / 3}]


def test_hierarchical_units_list_parents_before_their_children():
    q = "Which film did the director of Titanic make after Avatar?"
    ds = _ds({"q1": q}, {"q1": {"a": 1}})
    units = BS.hierarchical_units({"toy": ds}, AnyList([("a", 1.0), ("b", 0.5)]),
                                  {"toy": None}, parents=2, children=2, min_relevant=1)
    par = units[0]["req"].parent
    n_par = int((par == -1).sum())
    assert n_par >= 1 and (par[:n_par] == -1).all() and (par[n_par:] >= 0).all()
    assert list(par[n_par:]) == sorted(par[n_par:])


# ----------------------------------------------------------------------------- simulation
def _toy_units():
    req = B.make_request([["g1", "n1", "n2"], ["n3", "g2", "n4"]], {"g1": 1, "g2": 1})
    return [{"dataset": "toy", "decomposition": "heuristic", "qid": "q1", "req": req}]


def test_simulate_units_seeds_each_policy_and_meets_at_a_full_budget():
    units, pols = _toy_units(), ["random", "bernoulli"]
    res, orders, secs = BS.simulate_units(units, pols, 20, [0.5, 1.0], seed=3)
    assert secs >= 0 and len(res) == 4 and set(orders) == {(0, "random"), (0, "bernoulli")}
    assert np.array_equal(orders[(0, "bernoulli")],
                          B.simulate(units[0]["req"], "bernoulli", 20, seed=[3, 0, 1]))
    full = res[res.budget == 1.0]
    assert full.precision.tolist() == pytest.approx([2 / 6, 2 / 6])
    assert full.recall.tolist() == [1.0, 1.0]


def test_summarise_is_mean_and_normal_half_width_with_zero_for_a_single_value():
    df = pd.DataFrame({"g": ["a", "a", "a", "b"], "x": [1.0, 2.0, 3.0, 5.0]})
    s = BS.summarise(df, ["g"], "x").set_index("g")
    assert s.loc["a", "mean"] == 2.0 and s.loc["a", "ci95"] == pytest.approx(1.96 / np.sqrt(3))
    assert s.loc["b", "ci95"] == 0.0
    m, h = B.mean_ci(np.array([1.0, 2.0, 3.0]))
    assert (m, h) == pytest.approx((s.loc["a", "mean"], s.loc["a", "ci95"]))


# ----------------------------------------------------------------------------- checks
POLS = ["random", "rank", "bernoulli", "bernoulli_top3"]
LABELS = {p: B.POLICIES[p].label for p in POLS}


def _runs(n=12):
    """Per-request precision at <= 30 %: random 0.1, rank 0.45, Bernoulli 0.5 and top-3
    Bernoulli 0.55, each plus the same per-request noise; 0.2 for everyone at 100 %."""
    rng = np.random.default_rng(0)
    rows = []
    for u in range(n):
        noise = rng.normal(0, 0.02)
        base = {"random": 0.1 + noise, "rank": 0.45 + noise, "bernoulli": 0.5 + noise}
        base["bernoulli_top3"] = base["bernoulli"] + 0.05
        for p in POLS:
            for b in (0.1, 0.2, 0.3, 1.0):
                rows.append({"unit": u, "dataset": "toy", "decomposition": "heuristic",
                             "qid": f"q{u}", "policy": p, "budget": b,
                             "precision": base[p] if b < 1 else 0.2, "recall": 1.0 if b == 1 else 0.5})
    return pd.DataFrame(rows)


def test_holds_reads_the_interval_and_all_hold_combines():
    assert BS.holds({"lo": 0.01, "hi": 0.2}) == "yes"
    assert BS.holds({"lo": -0.2, "hi": -0.01}) == "no"
    assert BS.holds({"lo": 0.0, "hi": 0.2}) == "not shown"
    assert BS.all_hold([{"lo": 0.1, "hi": 0.2}] * 2) == "yes"
    assert BS.all_hold([{"lo": 0.1, "hi": 0.2}, {"lo": -0.2, "hi": -0.1}]) == "no"
    assert BS.all_hold([{"lo": 0.1, "hi": 0.2}, {"lo": -0.1, "hi": 0.1}]) == "not shown"
    assert BS.all_hold([]) == "not shown"
    assert BS.small_budgets([0.1, 0.3, 0.30000000001, 0.4]) == [0.1, 0.3, 0.30000000001]


def test_direction_checks_on_hand_made_runs():
    res = _runs()
    pm = BS.precision_by_policy(res)
    P = BS.PairedChecks.from_runs(res, [0.1, 0.2, 0.3, 1.0], LABELS, dataset="toy",
                                  retriever="bm25", seed=0)
    checks = BS.direction_checks(P, pm, None)
    assert checks == [
        ("all policies meet at 100 %", "yes", "max spread of precision@100% 0.0e+00"),
        ("bandits beat random at <= 30 %", "yes", "3/3 policies significantly above random"),
        ("rank information helps: top-k=3 beats the rank-aware baseline", "yes",
         "+0.100 [+0.100, +0.100]"),
        ("Bernoulli top-k=3 beats plain Bernoulli", "yes", "+0.050 [+0.050, +0.050]"),
        ("a top-k Bernoulli policy is the best overall", "yes", "+0.050 [+0.050, +0.050]"),
    ]
    # one comparison row per paired check, in the order made (3 against random first)
    assert [(r["method"], r["baseline"]) for r in P.rows][:3] == [
        (LABELS[p], "Random") for p in ("bernoulli", "bernoulli_top3", "rank")]
    assert len(P.rows) == 6 and {r["baseline kind"] for r in P.rows[:3]} == {"baseline"}
    numbers = BS.key_numbers(res, checks, 12, None)
    assert numbers["precision.bernoulli_top3.b=0.1"] == pytest.approx(
        numbers["precision.bernoulli.b=0.1"] + 0.05)
    assert numbers["recall.random.b=1"] == 1.0 and numbers["requests_simulated"] == 12
    assert numbers["check.bandits beat random at <= 30 %"] == "yes"
    assert "hier_minus_serial.bernoulli_family.b=0.1" not in numbers
    assert list(BS.order_small(pm, [0.1, 0.2, 0.3, 1.0]).index) == [
        "bernoulli_top3", "bernoulli", "rank", "random"]


def test_paper_comparison_and_findings_read_the_checks():
    res = _runs()
    pm = BS.precision_by_policy(res)
    P = BS.PairedChecks.from_runs(res, [0.1, 0.2, 0.3, 1.0], LABELS, dataset="toy",
                                  retriever="bm25", seed=0)
    check_df = pd.DataFrame(BS.direction_checks(P, pm, None), columns=BS.CHECK_COLUMNS)
    cmp = BS.paper_comparison(pm, check_df, P, "toy").set_index("paper's finding")
    assert list(cmp.columns) == ["paper (Table 4, 10 %)", "ours (toy, ~10 %)", "holds here"]
    assert cmp.loc["bandits beat random", "holds here"] == (
        "yes (3/3 policies significantly above random)")
    assert cmp.loc["top-k Bernoulli (k=3) beats Bernoulli", "holds here"] == (
        "yes (+0.050 [+0.050, +0.050])")
    assert cmp.loc["ε-greedy is best at 10-20 % (Sec. 5.1, NeuCLIR)", "holds here"] == (
        "not checked in this run")
    text = BS.findings(check_df, cmp.reset_index(), pm, [0.1, 0.2, 0.3, 1.0], LABELS,
                       n_units=12, reps=5)
    assert not any(line.startswith("- ") for line in text.splitlines())
    sentences = split_sentences(text)
    assert len(sentences) == 4, sentences
    assert sentences[0].startswith("Of the 12 findings checked in the two tables above, 8 hold "
                                   "(interval above 0), 0 go the other way and 4 are not shown")
    assert cmp.loc["the rank-aware baseline is below every Bernoulli policy", "holds here"] == "yes"
    assert cmp.loc["bandits beat random", "ours (toy, ~10 %)"].endswith("bandits 0.500-0.550")
    assert "(12 simulated requests, 5 repetitions each)" in sentences[0]
    missed = cmp[~cmp["holds here"].str.startswith("yes")].index
    assert sentences[1].startswith("Not reproduced here: *") and sentences[1].count("*") == 8
    assert all(f"*{name}* (" in sentences[1] for name in missed)
    assert "*ε-greedy is best at 10-20 % (Sec. 5.1, NeuCLIR)* (not checked in this run)" in text
    assert sentences[2].startswith("The best policy at budgets <= 30 % is Bernoulli top-k=3 (0.5")
    assert "at ~10 % the weakest bandit is Bernoulli (0.5" in sentences[2]
    assert sentences[3].endswith("precision spread 0.0e+00 across policies.")
    extra = pd.DataFrame({"paper's finding": ["X trails Y", "Z wins"],
                          "holds here": ["not shown (+0.002 [-0.003, +0.007])", "no"]})
    text = BS.findings(check_df, pd.concat([cmp.reset_index(), extra]), pm, [0.1, 0.2, 0.3, 1.0],
                       LABELS, n_units=12, reps=5)
    assert text.startswith("Of the 14 findings checked in the two tables above, 8 hold (interval "
                           "above 0), 1 goes the other way and 5 are not shown")
    assert "*X trails Y* (not shown: +0.002 [-0.003, +0.007]), *Z wins* (no)." in text


def test_hierarchy_table_pairs_modes_per_request():
    rows = []
    for q, (ser, hi, lo) in enumerate([(0.2, 0.4, 0.3), (0.4, 0.4, 0.5)]):
        for mode, v in (("serial", ser), ("hierarchical", hi), ("hierarchical-loose", lo)):
            for b in (0.1, 0.2):
                rows.append({"dataset": "toy", "qid": f"q{q}", "policy": "bernoulli",
                             "mode": mode, "budget": b, "precision": v})
    hier = pd.DataFrame(rows)
    tab, gain = BS.hierarchy_table(hier, ["bernoulli"], {"bernoulli": "Bernoulli"}, [1, 0.5])
    row = tab.iloc[0]
    assert row["policy"] == "Bernoulli" and row["Ser. b=10%"] == pytest.approx(0.3)
    assert row["Hier. b=10%"] == pytest.approx(0.4) and row["paper Hier. 10%"] == 0.371
    half = 1.96 * np.std([0.2, 0.0], ddof=1) / np.sqrt(2)
    assert row["Hier.-Ser. b=10% (±95% CI)"] == f"+0.100 ± {half:.3f}"
    assert row["loose-Ser. b=20% (±95% CI)"] == "+0.100 ± 0.000"
    assert gain["diff"].tolist() == pytest.approx([0.2, 0.2, 0.0, 0.0])
    P = BS.PairedChecks(pd.DataFrame(), {}, "toy", "bm25", 0)
    r = P.hierarchy(gain, "hierarchical", "paper n, tau")
    assert r["diff"] == pytest.approx(0.1) and r["baseline"] == "serial" and len(P.rows) == 1
    assert BS.hier_modes(None) == ["serial", "hierarchical"]


def test_precision_table_and_figures():
    res = _runs(4)
    cur = BS.summarise(res, ["dataset", "decomposition", "policy", "budget"], "precision")
    tab = BS.precision_table(cur, [0.1, 0.2, 0.3, 0.4, 1.0], LABELS)
    assert list(tab.columns) == ["dataset", "decomposition", "policy", "P@10%", "P@20%",
                                 "P@30%", "P@100%"]
    assert tab.set_index("policy").loc["Random", "P@100%"] == "0.200 ± 0.000"
    fig = BS.plot_budget_curves(cur, "precision", POLS, LABELS)
    assert len(fig.axes) == 1 and len(fig.axes[0].get_lines()) == len(POLS)
    gain = BS.gain_over_rank(res)
    assert set(gain.policy) == {"bernoulli", "bernoulli_top3"}
    assert len(BS.plot_gain_over_rank(gain, POLS, LABELS).axes) == 1
    assert "Recall of the selected documents" in BS.budget_caption("recall", 10, 10, 4)


def test_why_differences_states_the_hierarchy_threshold():
    pool = pd.DataFrame({"pool": [10.0, 20.0], "relevant_in_pool": [1.5, 2.5]})
    text = BS.why_differences(pool, hier_n=4, hier_tau=0.77, hier_loose=[1, 0.5],
                              decompositions=["heuristic"], model_requests=2, model_samples=2,
                              model_note="-", gpu={"model_requests": 9})
    assert text.startswith("**Why the differences**")
    assert "pools 10.0-20.0 documents" in text and "posterior mean 0.83" in text
    assert "are not run in this profile" in text and "decomposes 9 requests x ? samples" in text
