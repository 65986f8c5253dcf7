"""ACQO Stage II and the test (ACQO Sec. 3.4.3, Table 3): the steps notebook 07 calls.

* :func:`sample_tau`, :func:`kept_table` and :func:`tau_histogram`: the data curriculum,
  tau(q) as the mean Stage I reward of K sampled decompositions (Eq. 7) and the filter
  tau(q) <= tau_thres (Eq. 8), with the kept share's bootstrap interval;
* :func:`stage2_rows`: the questions Stage II trains on;
* :func:`curriculum_figure` and :func:`stage_table`: both stages' logs on one axis;
* :func:`models_to_decode`, :func:`score_rows` and :func:`provenance`: the rows of the
  test (untrained, cold start, Stage I, ACQO, the rule split), each scored by RSF over its
  sub-queries, with what trained it;
* :func:`results_table`, :func:`per_question_table`, :func:`comparisons`,
  :func:`easy_hard`, :func:`by_n_sub` and :func:`vs_paper`: ACQO Table 3's columns with
  paired-bootstrap intervals, Table 1's easy/hard split, Fig. 1-2's quality by number of
  sub-queries and the published Table 3 beside ours.
"""
from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from qrlib.eval import metrics
from qrlib.eval.compare import compare, comparison_table
from qrlib.eval.scale import fmt_scale, log_scale, scale_columns
from qrlib.eval.stats import paired_bootstrap
from qrlib.generation import policy
from qrlib.methods.acqo.curriculum import generate_decompositions, tau_by_question
from qrlib.methods.acqo.study import rule_split, score_subqueries, sub_queries_range
from qrlib.rl.release import release_memory

RAW = "raw question"
RULE = "rule: question + heuristic split (no model)"
MEASURES = ["R@4", "R@10", "R@100", "AP@10", "RR@10", "nDCG@10"]
Key = tuple[str, str, str]  # (dataset, retriever, row label)


def tau_rule(tau_thres: float, tau_min: float | None) -> str:
    """The Eq. 8 filter as text (with our optional lower bound)."""
    return (f"tau <= {tau_thres:.3f}" if tau_min is None
            else f"{tau_min:.3f} < tau <= {tau_thres:.3f}")


def sample_tau(model: str, adapter: str, rows: Sequence[Mapping[str, Any]], env: Any, *, n: int,
               temperature: float, seed: int, autocast: bool) -> tuple[dict[str, float], int, float]:
    """tau(q) of every training question (Eq. 7): ``n`` decompositions sampled by the
    Stage I ``adapter`` with its decoding contract, scored by the Stage I reward ``env``
    and averaged; the sampling model and its engine are released before scoring
    (:func:`qrlib.rl.release.release_memory`), so Stage II's training does not carry them.
    Returns ``(tau, rollouts, seconds)``."""
    m, tok = policy.load_policy(model, adapter=adapter)
    t0 = time.perf_counter()
    rolls = generate_decompositions(m, tok, rows, contract=adapter, n=n, do_sample=True,
                                    temperature=temperature, seed=seed, autocast=autocast)
    del m
    release_memory()
    rewards = env.score([r["completion"] for r in rolls], [r["qid"] for r in rolls])
    tau = tau_by_question(rewards, [r["qid"] for r in rolls])
    return tau, len(rolls), time.perf_counter() - t0


def kept_table(tau: Mapping[str, Mapping[str, float]], kept: Mapping[str, Sequence[str]], *,
               bootstrap: int, seed: int) -> pd.DataFrame:
    """Per retriever: questions, kept questions, the kept share with a 95 % bootstrap
    interval over training questions (``lo``, ``hi``) and the mean tau(q)."""
    rows = []
    for kind in tau:
        keep = set(kept[kind])
        flags = np.array([q in keep for q in sorted(tau[kind])], dtype=float)
        rng = np.random.default_rng(seed)
        boots = flags[rng.integers(0, len(flags), size=(bootstrap, len(flags)))].mean(axis=1)
        rows.append({"retriever": kind, "questions": len(flags), "kept": int(flags.sum()),
                     "kept share": flags.mean(), "lo": np.quantile(boots, 0.025),
                     "hi": np.quantile(boots, 0.975),
                     "mean tau": float(np.mean(list(tau[kind].values())))})
    return pd.DataFrame(rows)


def tau_histogram(tau: Mapping[str, Mapping[str, float]], tau_thres: float) -> Any:
    """Histogram of tau(q) per retriever with the Eq. 8 threshold dashed."""
    import matplotlib.pyplot as plt

    from qrlib import plots

    fig, ax = plt.subplots(figsize=(6, 3.2))
    for i, kind in enumerate(tau):
        ax.hist(list(tau[kind].values()), bins=20, alpha=0.5, color=f"C{i}", label=kind)
    ax.axvline(tau_thres, color="k", ls="--", lw=1, label=r"$\tau_{thres}$")
    ax.set(xlabel=r"learning complexity $\tau(q)$ (mean Stage I reward of K rollouts)",
           ylabel="training questions")
    plots.legend_outside(ax)
    return fig


def stage2_rows(rows: Sequence[Mapping[str, Any]], kept: Sequence[str],
                label: str = "") -> list[Mapping[str, Any]]:
    """The training questions Stage II keeps; all of them (said once) when the filter kept
    none, i.e. the Stage I model masters every question."""
    keep = set(kept)
    out = [r for r in rows if r["qid"] in keep]
    if not out:
        print(f"{label}: the tau filter kept no question; Stage II uses all of them")
        out = list(rows)
    return out


def read_run_log(run_dir: str | Path, name: str) -> pd.DataFrame:
    """``run_dir/rl/<name>/log.csv``."""
    return pd.read_csv(Path(run_dir) / "rl" / name / "log.csv")


def curriculum_figure(run_dir: str | Path, names: Mapping[str, str],
                      window: int = 4) -> tuple[Any, pd.DataFrame, list[str]]:
    """Stage I then Stage II per retriever on one step axis (``names``: retriever -> Stage
    II run): each stage's own reward, sub-queries per rollout and training fused nDCG@10
    (rolling mean of ``window``). Returns the figure, both logs concatenated (``stage``,
    ``retriever`` columns) and the scale of each run as text."""
    import matplotlib.pyplot as plt

    from qrlib import plots

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    curves, scales = [], []
    for i, (kind, name) in enumerate(names.items()):
        l1 = read_run_log(run_dir, f"acqo-stage1-{kind}").assign(stage="I")
        l2 = read_run_log(run_dir, name).assign(stage="II")
        scales.append(f"{kind}: Stage I {fmt_scale(log_scale(l1))}; "
                      f"Stage II {fmt_scale(log_scale(l2))}")
        l2["step"] = l2["step"] + l1["step"].max()
        both = pd.concat([l1, l2], ignore_index=True).assign(retriever=kind)
        curves.append(both)
        for stage, ls in (("I", "-"), ("II", "--")):
            part = both[both.stage == stage]
            for ax, col in zip(axes, ("reward", "part/n_sub", "part/fused_ndcg@10")):
                if col in part:
                    ax.plot(part.step, part[col].rolling(window, min_periods=1).mean(),
                            color=f"C{i}", ls=ls, label=f"{kind}, stage {stage}")
        for ax in axes:
            ax.axvline(l1["step"].max() + 0.5, color="0.6", lw=0.8)
    x = "training step (Stage I, then II)"
    axes[0].set(xlabel=x, ylabel=f"stage reward (rolling mean of {window})")
    axes[1].set(xlabel=x, ylabel="sub-queries per rollout")
    axes[2].set(xlabel=x, ylabel=f"fused nDCG@10, training (rolling {window})")
    for ax in axes:
        if ax.get_legend_handles_labels()[0]:
            plots.legend_outside(ax, where="below")
    fig.tight_layout()
    return fig, pd.concat(curves, ignore_index=True), scales


def stage_table(curves: pd.DataFrame) -> pd.DataFrame:
    """Per retriever and stage: steps, mean reward, sub-queries per rollout, training
    fused nDCG@10, seconds per step and training minutes (ACQO Table 6b's role)."""
    return (curves.groupby(["retriever", "stage"])
            .agg(steps=("step", "count"), reward=("reward", "mean"),
                 sub_queries=("part/n_sub", "mean"), fused_ndcg10=("part/fused_ndcg@10", "mean"),
                 s_per_step=("step_seconds", "mean"),
                 cpu_minutes=("step_seconds", lambda x: x.sum() / 60))
            .reset_index())


def models_to_decode(record: Any, stage2: Mapping[str, Mapping[str, Any]],
                     retrievers: Sequence[str],
                     untrained_prompts: Sequence[str]) -> dict[str, tuple[Any, Any]]:
    """``{row label: (adapter, decoding contract)}``: the untrained policy with each prompt
    (Stage I's contract, prompt swapped), and per retriever the cold start alone (when 06
    ran one), the Stage I adapter and the Stage I + II adapter (ACQO), each with the
    contract its training saved."""
    models = {f"untrained [{p.split('/')[-1]}]": (None, record.contract(retrievers[0], prompt=p))
              for p in untrained_prompts}
    for kind in retrievers:
        if record.summary(kind).get("sft_adapter"):
            a = record.summary(kind)["sft_adapter"]
            models[f"cold start only ({kind}-sampled)"] = (a, a)
        a = record.summary(kind)["adapter"]
        models[f"Stage I ({kind}-trained)"] = (a, a)
        a = stage2[kind]["adapter"]
        models[f"ACQO: Stage I+II ({kind}-trained)"] = (a, a)
    return models


def score_rows(test: Mapping[str, Any], retrievers: Mapping[tuple[str, str], Any],
               decompositions: Mapping[tuple[str, str], Sequence[Mapping]], labels: Sequence[str],
               *, rule_row: bool, k: int,
               measures: Sequence[str] = MEASURES) -> tuple[dict[Key, pd.DataFrame], list[dict]]:
    """Every row on every test set and evaluation retriever: per-question ``measures`` of
    the RSF-fused lists (with ``n_sub`` for rows that write sub-queries) and, per model
    row, the latency split (generation, retrieval, fusion) and generated tokens."""
    per_q: dict[Key, pd.DataFrame] = {}
    lat = []
    for (name, kind), retr in retrievers.items():
        ds = test[name]
        per_q[name, kind, RAW], _ = score_subqueries(
            retr, ds.qrels, {q: [ds.queries[q]] for q in ds.queries}, measures, k=k, n_sub=False)
        if rule_row:  # no model: the question plus up to two rule-based sub-queries
            per_q[name, kind, RULE], _ = score_subqueries(
                retr, ds.qrels, {q: rule_split(ds.queries[q]) for q in ds.queries}, measures, k=k)
        for label in labels:
            dec = decompositions[label, name]
            per_q[name, kind, label], t = score_subqueries(
                retr, ds.qrels, {d["qid"]: d["subqueries"] for d in dec}, measures, k=k)
            lat.append({"dataset": name, "retriever": kind, "model": label,
                        "generation s/query": np.mean([d["gen_seconds"] for d in dec]),
                        "retrieval ms/query": 1000 * t["retrieval"] / len(dec),
                        "fusion ms/query": 1000 * t["fusion"] / len(dec),
                        "generated tokens": np.mean([d["gen_tokens"] for d in dec])})
    return per_q, lat


def provenance(labels: Sequence[str], record: Any, stage2_names: Mapping[str, str], *,
               run_dir: str | Path, model: str) -> tuple[dict[str, tuple], dict[str, str]]:
    """What trained each row, ``{label: (policy, RL logs, SFT steps, SFT questions)}``,
    and its kind for :func:`qrlib.eval.compare.compare` (baseline, model-free, untrained,
    warm start, trained)."""
    trained_by: dict[str, tuple] = {RAW: (None, [], 0, 0), RULE: (None, [], 0, 0)}
    kind_of = {RAW: "baseline", RULE: "model-free"}
    for label in labels:
        if label.startswith("untrained"):
            trained_by[label], kind_of[label] = (model, [], 0, 0), "untrained"
    for kind, name in stage2_names.items():
        sft = record.sft_steps if record.summary(kind).get("sft_adapter") else 0
        n_warm = record.sft_questions.get(kind, 0) if sft else 0  # questions with a sampled target
        stage1 = read_run_log(run_dir, f"acqo-stage1-{kind}")
        trained_by[f"cold start only ({kind}-sampled)"] = (model, [], sft, n_warm)
        trained_by[f"Stage I ({kind}-trained)"] = (model, [stage1], sft, n_warm)
        trained_by[f"ACQO: Stage I+II ({kind}-trained)"] = (
            model, [stage1, read_run_log(run_dir, name)], sft, n_warm)
        kind_of.update({f"cold start only ({kind}-sampled)": "warm start",
                        f"Stage I ({kind}-trained)": "trained",
                        f"ACQO: Stage I+II ({kind}-trained)": "trained"})
    return trained_by, kind_of


def row_scale(trained_by: Mapping[str, tuple], valid: Mapping[tuple[str, str], float],
              label: str, n: int, name: str) -> dict[str, Any]:
    """The scale columns of one row on ``n`` test questions of ``name``."""
    pol, logs, sft, n_warm = trained_by[label]
    return scale_columns(pol, logs, test_queries=n, sft_steps=sft, sft_queries=n_warm,
                         test_valid=valid.get((label, name)))


def ndcg(per_q: Mapping[Key, pd.DataFrame], name: str, kind: str, label: str) -> dict[str, float]:
    """``{qid: nDCG@10}`` of one row."""
    return per_q[name, kind, label].set_index("query_id")["nDCG@10"].to_dict()


def results_table(per_q: Mapping[Key, pd.DataFrame], trained_by: Mapping[str, tuple],
                  valid: Mapping[tuple[str, str], float], *, bootstrap: int, seed: int,
                  measures: Sequence[str] = MEASURES) -> pd.DataFrame:
    """ACQO Table 3's columns per (dataset, retriever, row): the means of ``measures``,
    sub-queries per question, nDCG@10 minus the raw question's with its 95 % paired
    bootstrap (``lo``, ``hi``), wins/losses and the row's training scale."""
    rows = []
    for (name, kind, label), pq in per_q.items():
        bs = paired_bootstrap(ndcg(per_q, name, kind, label), ndcg(per_q, name, kind, RAW),
                              n=bootstrap, seed=seed)
        rows.append({"dataset": name, "retriever": kind, "model": label,
                     **{metrics.label(m): pq[m].mean() for m in measures},
                     "sub-queries": pq["n_sub"].mean() if "n_sub" in pq else 1.0,
                     "ΔnDCG@10 vs raw": bs["diff"], "lo": bs["lo"], "hi": bs["hi"],
                     "wins/losses": f"{bs['wins']}/{bs['losses']}",
                     **row_scale(trained_by, valid, label, bs["n_queries"], name)})
    return pd.DataFrame(rows)


def per_question_table(per_q: Mapping[Key, pd.DataFrame]) -> pd.DataFrame:
    """nDCG@10 of every test question, one column per row (read by notebook 12)."""
    long = pd.concat([pq[["query_id", "nDCG@10"]].assign(dataset=name, retriever=kind, model=label)
                      for (name, kind, label), pq in per_q.items()], ignore_index=True)
    return (long.pivot_table(index=["dataset", "retriever", "query_id"], columns="model",
                             values="nDCG@10").reset_index().rename_axis(columns=None))


def comparisons(per_q: Mapping[Key, pd.DataFrame], kind_of: Mapping[str, str],
                trained_by: Mapping[str, tuple], valid: Mapping[tuple[str, str], float],
                retrievers: Sequence[str], *, bootstrap: int, seed: int) -> pd.DataFrame:
    """Every row minus the raw question, and ACQO (trained with each retriever, searched
    with it) minus every other row, in nDCG@10 (:mod:`qrlib.eval.compare` schema)."""
    def one(name: str, retr: str, method: str, base: str, **kinds: str) -> dict[str, Any]:
        return compare(ndcg(per_q, name, retr, method), ndcg(per_q, name, retr, base),
                       paper="acqo", dataset=name, retriever=retr, metric="nDCG@10",
                       method=method, baseline=base, resamples=bootstrap, seed=seed,
                       scale=row_scale(trained_by, valid, method, len(per_q[name, retr, method]),
                                       name), **kinds)

    rows = [one(name, kind, label, RAW, kind=kind_of[label])
            for (name, kind, label) in per_q if label != RAW]
    for trained_with in retrievers:
        acqo = f"ACQO: Stage I+II ({trained_with}-trained)"
        for (name, kind, label) in per_q:
            if kind != trained_with or label in (acqo, RAW) or (name, kind, acqo) not in per_q:
                continue
            rows.append(one(name, kind, acqo, label, kind="trained",
                            baseline_kind=kind_of[label]))
    return comparison_table(rows)


def acqo_scatter(comparisons_: pd.DataFrame, per_q: Mapping[Key, pd.DataFrame]) -> Any:
    """Per-question nDCG@10 of ACQO (searched with its training retriever) against the raw
    question, one panel per dataset and retriever, with the paired interval."""
    from qrlib import plots
    from qrlib.eval.stats import fmt_interval

    head = comparisons_[comparisons_.method.str.startswith("ACQO")
                        & (comparisons_["baseline kind"] == "baseline")]
    head = head[[m.endswith(f"({k}-trained)") for m, k in zip(head.method, head.retriever)]]
    key = {f"{r.dataset}/{r.retriever}": r for r in head.itertuples()}
    return plots.per_query_scatter(
        {k: (ndcg(per_q, r.dataset, r.retriever, RAW), ndcg(per_q, r.dataset, r.retriever, r.method))
         for k, r in key.items()}, metric="nDCG@10", baseline=RAW,
        intervals={k: fmt_interval(r._asdict()) for k, r in key.items()})


def easy_hard(per_q: Mapping[Key, pd.DataFrame]) -> pd.DataFrame:
    """Mean nDCG@10 of every row on the easy and the hard test questions: split at the
    median raw-question nDCG@10 of each dataset and retriever (ACQO Table 1)."""
    rows = []
    for (name, kind, label), pq in per_q.items():
        easy, hard = metrics.easy_hard_split(per_q[name, kind, RAW], "nDCG@10", "median")
        for part, ids in (("easy", easy), ("hard", hard)):
            sel = pq[pq.query_id.isin(ids)]
            rows.append({"dataset": name, "retriever": kind, "model": label, "subset": part,
                         "questions": len(sel), "nDCG@10": sel["nDCG@10"].mean()})
    return pd.DataFrame(rows).pivot_table(index=["dataset", "retriever", "model"],
                                          columns="subset", values="nDCG@10").reset_index()


def by_n_sub(per_q: Mapping[Key, pd.DataFrame]) -> pd.DataFrame:
    """Mean nDCG@10 of the test questions grouped by how many sub-queries a row wrote, with
    the 95 % bootstrap interval of each group's mean (``lo``, ``hi``; :func:`~qrlib.eval.stats.mean_interval`)."""
    from qrlib.eval.stats import mean_interval

    rows = []
    for (name, kind, label), pq in per_q.items():
        if "n_sub" not in pq or label == RAW:
            continue
        for n_sub, g in pq.groupby("n_sub"):
            lo, hi = mean_interval(g["nDCG@10"].to_numpy(), n=2000)
            rows.append({"dataset": name, "retriever": kind, "model": label, "sub-queries": n_sub,
                         "questions": len(g), "nDCG@10": g["nDCG@10"].mean(), "lo": lo, "hi": hi})
    return pd.DataFrame(rows)


def by_n_sub_figure(table: pd.DataFrame, datasets: Sequence[str], retriever: str) -> Any:
    """nDCG@10 against sub-queries written, one panel per dataset (ACQO Fig. 1-2), with each
    group's 95 % bootstrap interval as error bars and its number of questions beside it."""
    import matplotlib.pyplot as plt

    from qrlib import plots

    fig, axes = plt.subplots(1, len(datasets), figsize=(5.5 * len(datasets), 3.4), squeeze=False)
    for ax, name in zip(axes[0], datasets):
        sub = table[(table.dataset == name) & (table.retriever == retriever)]
        for j, (label, g) in enumerate(sub.groupby("model")):
            x = g["sub-queries"] + 0.06 * (j - 1)  # side by side where rows share an n
            ax.errorbar(x, g["nDCG@10"], yerr=[g["nDCG@10"] - g["lo"], g["hi"] - g["nDCG@10"]],
                        marker="o", capsize=3, color=f"C{j}", label=label)
            for xi, yi, n in zip(x, g["nDCG@10"], g["questions"]):
                ax.annotate(f"n={n}", (xi, yi), textcoords="offset points", xytext=(4, 4),
                            fontsize=7, color=f"C{j}")
        ax.set(title=name, xlabel="sub-queries written", ylabel=f"nDCG@10 ({retriever})")
        ax.set_xticks([1, 2, 3])
    plots.legend_outside(axes[0][-1])
    return fig


def examples(decompositions: Mapping[tuple[str, str], Sequence[Mapping]], labels: Sequence[str],
             ds: Any, name: str, n: int) -> pd.DataFrame:
    """The first ``n`` test questions of ``name`` as every model decomposed them."""
    return pd.DataFrame([{"model": label, "question": ds.queries[d["qid"]],
                          "sub-queries": " %% ".join(d["subqueries"]), "format ok": d["format_ok"]}
                         for label in labels for d in decompositions[label, name][:n]])


def vs_paper(results: pd.DataFrame, paper: pd.DataFrame, per_q: Mapping[Key, Any]) -> pd.DataFrame:
    """Ours beside ACQO Table 3 on HotpotQA (``paper``: the published table indexed by row
    key, as fractions): raw question and ACQO, BM25 against BM25 and dense against ANCE."""
    rows = []
    for kind, pcol in (("bm25", "BM25"), ("dense", "ANCE")):
        if ("hotpotqa-large", kind, RAW) not in per_q:
            continue
        ours = results[(results.dataset == "hotpotqa-large") & (results.retriever == kind)]
        for key, label in (("raw", RAW), ("acqo", f"ACQO: Stage I+II ({kind}-trained)")):
            mine = ours[ours.model == label]
            if mine.empty or key not in paper.index:
                continue
            for m in ("R@4", "R@10", "R@100", "MAP@10", "MRR@10", "nDCG@10"):
                rows.append({"retriever (ours / paper)": f"{kind} / {pcol}", "row": key,
                             "measure": m, "ours": float(mine[m].iloc[0]),
                             "paper": float(paper.loc[key, f"{pcol} {m.replace('nDCG', 'NDCG')}"])})
    return pd.DataFrame(rows)


def no_paper_row(profile: str, datasets: Sequence[str], retrievers: Sequence[str]) -> str:
    """Why this run has nothing to put beside ACQO Table 3."""
    return (f"*No row to put next to ACQO Table 3 in this run*: the paper's table is HotpotQA, "
            f"and the `{profile}` profile evaluates {', '.join(datasets)} with "
            f"{', '.join(retrievers)}-trained models (`cpu-long` and `gpu` evaluate "
            "hotpotqa-large). The paper's values stay in `qrlib/methods/acqo/published.yaml`.")


def extra_sentences(results: pd.DataFrame, kept: pd.DataFrame) -> list[str]:
    """"What we found"'s own sentences: sub-queries written, and the tau filter's share."""
    acqo = results[results.model.str.startswith("ACQO")]
    untrained = results[results.model.str.startswith("untrained")]
    out = [f"ACQO wrote {sub_queries_range(acqo)} sub-queries per test question on average "
           f"(the untrained decomposer {sub_queries_range(untrained)}; "
           "`07_by_n_subqueries` splits the questions by count)."]
    out += [f"The τ filter kept {r['kept share']:.0%} of the {r.retriever} training questions "
            f"for Stage II ([{r.lo:.0%}, {r.hi:.0%}])." for _, r in kept.iterrows()]
    return out


def records(kept: pd.DataFrame, results: pd.DataFrame) -> dict[str, Any]:
    """The numbers the tests read: the tau filter per retriever, every row's nDCG@10 and
    its difference from the raw question ``[diff, lo, hi]``."""
    out: dict[str, Any] = {}
    for _, r in kept.iterrows():
        out[f"{r.retriever}.tau.kept_share"] = r["kept share"]
        out[f"{r.retriever}.tau.questions"] = r.questions
    for _, r in results.iterrows():
        key = f"{r.dataset}.{r.retriever}.{r.model}"
        out[f"{key}.ndcg10"] = r["nDCG@10"]
        out[f"{key}.delta_vs_raw"] = [r["ΔnDCG@10 vs raw"], r.lo, r.hi]
    return out
