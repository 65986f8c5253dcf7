# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% tags=["parameters"]
profile = "dev"  # profile name (runner injects it)
run_dir = "../runs/dev"  # where this run's artifacts go
figures_dir = "../figures/dev"  # figures (PNG + PDF + caption)
tables_dir = "../tables/dev"  # tables (CSV + Markdown)
cache_dir = None  # shared cache for dense embeddings (None: qrlib.workbook.cache_dir())
seed = 0  # seed for query subsets and distractor sampling
data_dir = None  # offline data root (None: qrlib.data.datasets's lookup order)
datasets = ["hotpotqa-mini", "2wikimultihopqa-mini"]  # multi-hop collections (need supporting_titles)
split = "test"  # qrels split to evaluate
n_queries = None  # queries per dataset (None: every query of the split)
n_distractors = None  # distractor docs kept beside the judged ones (None: whole corpus)
retrievers = ["bm25", "dense"]  # retriever kinds (qrlib.retrieval.retrievers.build_retriever)
dense_model = "minilm"  # dense encoder (offline all-MiniLM-L6-v2 on CPU)
k = 10  # metric cut-off (nDCG@k, R@k, AP@k)
depth = 100  # documents retrieved per (sub-)query before fusion
rrf_k = 60  # RRF constant (Cormack et al. 2009)
comb_norm = "minmax"  # per-list score normalisation for CombSUM / CombMNZ
timing_repeats = 5  # repetitions when timing each fusion method

# %% [markdown]
# # 03 · Rank-Score Fusion: merging the lists of several sub-queries
#
# *Papers:* [When Should I Search More: Adaptive Complex Query Optimization with Reinforcement Learning](https://arxiv.org/abs/2601.21208) (Wen, Deng, Wei, Chen, Qiao and Sun; arXiv:2601.21208, 2026); [Query Decomposition for RAG: Balancing Exploration-Exploitation](https://arxiv.org/abs/2510.18633) (Petcu, Murray, Khashabi, Kanoulas, de Rijke, Lawrie and Duh; arXiv:2510.18633, 2025).
#
# When a model splits a multi-hop question into sub-queries (ACQO's decomposition, the
# bandit paper's arms), each sub-query returns its own ranked list and the lists must be
# merged into one. ACQO (Sec. 3.3) proposes **Rank-Score Fusion (RSF)**, a variant of
# Reciprocal Rank Fusion that keeps RRF's rank consensus as the primary key and uses the
# retrieval score only to break ties. Because RSF also defines the ranks that ACQO's reward
# is computed on (notebook 04), its behaviour matters for training as well as for
# evaluation.
#
# Here no model is involved: sub-queries come from two model-free splitters of
# `qrlib.methods.bandits.decompose` — an **oracle** split (one sub-query per gold supporting title, an upper
# bound) and a **heuristic** split (entity spans, clauses, "X of Y" chains). For each
# retriever we compare the raw question, each sub-query alone, and four fusions of the
# sub-query lists: RRF, RSF, CombSUM and CombMNZ.

# %%
import time

from qrlib import session

S = session.start("03_rank_score_fusion", run_dir=run_dir, figures_dir=figures_dir,
                  tables_dir=tables_dir, cache_dir=cache_dir, seed=seed)
run_dir, figures_dir, tables_dir, record = S.run_dir, S.figures_dir, S.tables_dir, S.record

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from qrlib.retrieval import fusion
from qrlib import plots
from qrlib.data.datasets import load_dataset, subset
from qrlib.methods.bandits.decompose import heuristic_split, oracle_split
from qrlib.eval.metrics import evaluate
from qrlib.retrieval.retrievers import build_retriever
from qrlib.core.io import save_json, save_table

measures = [f"nDCG@{k}", f"R@{k}", f"AP@{k}"]
smaller = (n_queries is not None or n_distractors is not None)
note = " (subset: smaller than the paper's setting)" if smaller else ""

# %% [markdown]
# ## The fusion rules
#
# For a document $p$ that appears in $M$ of the lists with ranks $r_j$ and scores $s_j$:
#
# * **RRF**: $\mathrm{RRF}(p) = \sum_j \frac{1}{k + r_j}$ with $k = 60$.
# * **RSF** (ACQO Eq. 1–2): $P(p) = \dfrac{1}{\sum_{j} 1/r_j}$, $S(p) = \max_j s_j$; sort by
#   $(P(p)\ \text{ascending}, -S(p))$ — rank consensus first, the strongest score only for ties.
# * **CombSUM / CombMNZ** (Fox & Shaw): the sum of min-max normalised scores, times the number
#   of lists containing $p$ for MNZ.
#
# A document ranked first in one list and absent from the other gets $P = 1$, exactly like a
# document ranked second in both lists ($1/(1/2 + 1/2) = 1$): such rank ties are common, and
# RSF resolves them by score where RRF (with its $k=60$ damping) orders them by rank sums.

# %%
A = [("a", 0.9), ("b", 0.8), ("c", 0.7)]
B = [("c", 0.95), ("b", 0.5)]
keys = fusion.rsf_keys([A, B])


def rank_in(lst, doc):
    """1-based rank of ``doc`` in ``lst`` (None: absent)."""
    return next((r + 1 for r, (x, _) in enumerate(lst) if x == doc), None)


toy = pd.DataFrame({
    "doc": list(keys),
    "rank in list A": [rank_in(A, d) for d in keys],
    "rank in list B": [rank_in(B, d) for d in keys],
    "P(p)": [float(keys[d][0]) for d in keys], "S(p)": [keys[d][1] for d in keys],
    "RRF score": [dict(fusion.rrf([A, B], k=rrf_k))[d] for d in keys],
})
toy["RSF position"] = toy["doc"].map({d: i + 1 for i, (d, _) in enumerate(fusion.rsf([A, B]))})
toy["RRF position"] = toy["doc"].map({d: i + 1 for i, (d, _) in
                                      enumerate(fusion.rrf([A, B], k=rrf_k))})
record("toy.rsf_order", "".join(toy.sort_values("RSF position")["doc"]))
record("toy.rrf_order", "".join(toy.sort_values("RRF position")["doc"]))
toy.astype({"rank in list A": "Int64", "rank in list B": "Int64"})

# %% [markdown]
# ## Data, retrievers and sub-queries
#
# Each dataset's split is loaded (optionally subset: the judged documents plus random
# distractors), and every question is split twice. The oracle split reads the gold
# supporting titles from the query metadata, so it shows what a perfect decomposition could
# gain; the heuristic split is what a rule-based system gets without a model.

# %%
def load(name):
    ds = load_dataset(name, split, data_dir=data_dir)
    if n_queries is not None or n_distractors is not None:
        ds = subset(ds, n_queries=n_queries, n_distractors=n_distractors, seed=seed)
    return ds


def splits_for(ds):
    out = {"oracle": {}, "heuristic": {}}
    for q, text in ds.queries.items():
        titles = ds.query_meta.get(q, {}).get("supporting_titles") or []
        out["oracle"][q] = oracle_split(text, titles) if titles else [text]
        out["heuristic"][q] = heuristic_split(text)[:3]     # ACQO allows at most 3
    return out


data = {name: load(name) for name in datasets}
subq = {name: splits_for(ds) for name, ds in data.items()}
overview = pd.DataFrame([{
    "dataset": name, "queries": len(ds.queries), "docs": len(ds.corpus),
    "oracle sub-queries / query": np.mean([len(v) for v in subq[name]["oracle"].values()]),
    "heuristic sub-queries / query": np.mean([len(v) for v in subq[name]["heuristic"].values()]),
} for name, ds in data.items()])
overview

# %%
ex_q = next(iter(data[datasets[0]].queries))
pd.DataFrame({"split": ["raw", "oracle", "heuristic"],
              "queries": [[data[datasets[0]].queries[ex_q]], subq[datasets[0]]["oracle"][ex_q],
                          subq[datasets[0]]["heuristic"][ex_q]]})

# %% [markdown]
# ## Retrieval and fusion
#
# For each (dataset, retriever) every raw question and every sub-query is searched in one
# batched call, to depth 100. Fused lists are cut to the same depth. Before scoring, fused
# lists go through `fusion.to_run`, which gives strictly decreasing scores in list order:
# ir-measures re-sorts runs by score and would otherwise reorder RSF's ties by document id.

# %%
methods = {
    "RRF": lambda lists: fusion.rrf(lists, k=rrf_k, top=depth),
    "RSF": lambda lists: fusion.rsf(lists, top=depth),
    "CombSUM": lambda lists: fusion.combsum(lists, norm=comb_norm, top=depth),
    "CombMNZ": lambda lists: fusion.combmnz(lists, norm=comb_norm, top=depth),
    f"RRF (lists cut to {k})": lambda lists: fusion.rrf([l[:k] for l in lists], k=rrf_k,
                                                         top=depth),
}
rows, per_query, lists_cache = [], [], {}
for name, ds in data.items():
    for kind in retrievers:
        params = {"model": dense_model, "cache_dir": cache_dir, "show_progress": False} \
            if kind == "dense" else {}
        t0 = time.perf_counter()
        ret = build_retriever(kind, ds.corpus, **params)
        build_s = time.perf_counter() - t0
        qids = list(ds.queries)
        texts = [ds.queries[q] for q in qids]
        for sk in ("oracle", "heuristic"):
            texts += [s for q in qids for s in subq[name][sk][q]]
        unique = list(dict.fromkeys(texts))
        t0 = time.perf_counter()
        res = dict(zip(unique, ret.search(unique, depth)))
        search_s = time.perf_counter() - t0
        print(f"{name} / {kind}: index {build_s:.1f}s, {len(unique)} searches {search_s:.1f}s")
        raw_run = {q: fusion.to_run(res[ds.queries[q]]) for q in qids}
        runs = {("raw question", "-"): raw_run}
        for sk in ("oracle", "heuristic"):
            groups = {q: [res[s] for s in subq[name][sk][q]] for q in qids}
            lists_cache[(name, kind, sk)] = groups
            for j in range(2):
                runs[(f"sub-query {j + 1} alone", sk)] = {
                    q: fusion.to_run(g[min(j, len(g) - 1)]) for q, g in groups.items()}
            for m, fn in methods.items():
                runs[(m, sk)] = {q: fusion.to_run(fn(g)) for q, g in groups.items()}
            runs[("RSF (raw + sub-queries)", sk)] = {
                q: fusion.to_run(fusion.rsf([res[ds.queries[q]]] + g, top=depth))
                for q, g in groups.items()}
        for (method, sk), run in runs.items():
            pq = evaluate(run, ds.qrels, measures, per_query=True)
            row = {"dataset": name, "retriever": kind, "split": sk, "method": method}
            row.update(pq[measures].mean().to_dict())
            rows.append(row)
            pq = pq.assign(dataset=name, retriever=kind, split=sk, method=method)
            per_query.append(pq)
        # best single sub-query per question (an oracle choice, for reference): score every
        # sub-query list in one evaluate call under pseudo query ids "qid::j"
        for sk in ("oracle", "heuristic"):
            groups = lists_cache[(name, kind, sk)]
            run = {f"{q}::{j}": fusion.to_run(l) for q, g in groups.items()
                   for j, l in enumerate(g)}
            qrels = {f"{q}::{j}": ds.qrels[q] for q, g in groups.items() for j in range(len(g))}
            pq = evaluate(run, qrels, measures, per_query=True)
            pq["qid"] = pq["query_id"].str.rsplit("::", n=1).str[0]
            best = pq.sort_values(measures[0], ascending=False).groupby("qid").head(1)
            row = {"dataset": name, "retriever": kind, "split": sk,
                   "method": "best single sub-query (oracle pick)"}
            row.update(best[measures].mean().to_dict())
            rows.append(row)

results = pd.DataFrame(rows)
order = ["raw question", "sub-query 1 alone", "sub-query 2 alone",
         "best single sub-query (oracle pick)", "RRF", f"RRF (lists cut to {k})", "RSF",
         "CombSUM", "CombMNZ", "RSF (raw + sub-queries)"]
results["method"] = pd.Categorical(results["method"], order, ordered=True)
results = results.sort_values(["dataset", "retriever", "split", "method"]).reset_index(drop=True)
for r in results[results.method.isin(["raw question", "RRF", "RSF", "CombSUM"])].to_dict("records"):
    record(f"{r['dataset']}.{r['retriever']}.{r['split']}.{r['method']}.ndcg", r[measures[0]])
save_table(results.round(4), "03_fusion_metrics", tables_dir,
           caption=f"Fusion of sub-query lists vs raw question and single sub-queries; "
                   f"{', '.join(measures)}; profile {profile}{note}.")
results.round(3)

# %% [markdown]
# The table reads row-wise within a (dataset, retriever, split) block. "best single
# sub-query" picks, per question, the sub-query with the highest nDCG — it needs the labels
# and is a ceiling for any *selection* policy, while the fusions are label-free.
#
# Why can RRF fall *below* a single sub-query? With $k=60$, a document at ranks 20 and 25 of
# two lists scores $1/80 + 1/85 \approx 0.024$, more than a document ranked first in one list
# only ($1/61 \approx 0.016$). In multi-hop retrieval each gold paragraph is usually found by
# *one* sub-query, while deep lists (depth 100, here over a small corpus) overlap in many
# mediocre documents, so RRF's consensus pulls those above the single-list hits. RSF's
# $P(p)$ has no damping constant (first in one list: $P=1$; ranks 20 and 25: $P\approx 11$),
# and cutting the lists to the top 10 before RRF removes most of the overlap.

# %%
piv = results.pivot_table(index=["dataset", "retriever", "split"], columns="method",
                          values=measures[0], observed=True)
cmp = pd.DataFrame({"RSF - RRF": piv["RSF"] - piv["RRF"],
                    "RSF - CombSUM": piv["RSF"] - piv["CombSUM"],
                    "RSF - best single": piv["RSF"] - piv["best single sub-query (oracle pick)"]})
print(f"{measures[0]} differences per block (positive: RSF better):")
cmp.dropna().round(3)

# %%
# horizontal bars: the method names sit on the y axis, where they cannot collide
fig, axes = plt.subplots(len(datasets), len(retrievers), figsize=(5.2 * len(retrievers),
                         2.9 * len(datasets)), squeeze=False, sharex=True, sharey=True)
show = ["raw question", "sub-query 1 alone", "RRF", "RSF", "CombSUM", "CombMNZ"]
for i, name in enumerate(datasets):
    for j, kind in enumerate(retrievers):
        ax = axes[i][j]
        sub = results[(results.dataset == name) & (results.retriever == kind)
                      & results.method.isin(show)]
        piv = sub.pivot_table(index="method", columns="split", values=measures[0],
                              observed=True).reindex(show[::-1])
        piv = piv.rename(columns={"-": "raw question"})
        piv.plot.barh(ax=ax, legend=False, width=0.8)
        ax.set_title(f"{name} · {kind}", fontsize=10)
        ax.set_ylabel("")
        ax.set_xlabel(f"{measures[0]} (test)" if i == len(datasets) - 1 else "")
        ax.set_xlim(0, 1)
handles, labels = axes[0][0].get_legend_handles_labels()
fig.tight_layout()
plots.legend_outside(fig, handles, labels, title="sub-queries from")
plots.save_figure(fig, "03_fusion_ndcg", figures_dir,
                  caption=f"{measures[0]} of the raw question, the first sub-query alone and "
                          f"four fusions of the sub-query lists (oracle and heuristic splits). "
                          f"Profile {profile}{note}.",
                  profile=profile,
                  setting=(f"{n_queries} questions + {n_distractors} distractors per dataset"
                           if smaller else "full multi-hop subsets") + f", lists of depth {depth}")
plt.show()

# %% [markdown]
# ## How often does RSF's tie-break matter?
#
# We count, in the fused top-$k$ of each question, documents whose rank consensus $P(p)$
# equals another top-$k$ document's: there, RSF's order is decided by the score $S(p)$. We
# also measure how often RSF's and RRF's top-$k$ differ at all, and show one real tie.

# %%
tie_rows, example = [], None
for (name, kind, sk), groups in lists_cache.items():
    n_tied_q = n_tied_docs = n_diff = n_multi = 0
    for q, g in groups.items():
        if len(g) < 2:
            continue
        n_multi += 1
        keys = fusion.rsf_keys(g)
        top = [d for d, _ in fusion.rsf(g, top=k)]
        ps = [round(keys[d][0], 12) for d in top]
        tied = [d for d, p in zip(top, ps) if ps.count(p) > 1]
        n_tied_docs += len(tied)
        n_tied_q += bool(tied)
        n_diff += top != [d for d, _ in fusion.rrf(g, k=rrf_k, top=k)]
        if tied and example is None and kind == "bm25":
            example = (name, kind, sk, q, g, tied)
    tie_rows.append({"dataset": name, "retriever": kind, "split": sk,
                     "questions with >= 2 sub-queries": n_multi,
                     f"share with a P-tie in top-{k}": n_tied_q / max(n_multi, 1),
                     f"tied docs per question": n_tied_docs / max(n_multi, 1),
                     f"share where RSF top-{k} != RRF top-{k}": n_diff / max(n_multi, 1)})
ties = pd.DataFrame(tie_rows)
for r in tie_rows:
    record(f"{r['dataset']}.{r['retriever']}.{r['split']}.share_p_tie", r[f"share with a P-tie in top-{k}"])
save_table(ties.round(4), "03_fusion_ties", tables_dir,
           caption=f"Rank-consensus ties P(p) in the RSF top-{k} (resolved by max score S(p)) "
                   f"and disagreement with RRF; profile {profile}{note}.")
ties.round(3)

# %%
if example is not None:
    name, kind, sk, q, g, tied = example
    keys = fusion.rsf_keys(g)
    rsf_pos = {d: i + 1 for i, (d, _) in enumerate(fusion.rsf(g, top=depth))}
    rrf_pos = {d: i + 1 for i, (d, _) in enumerate(fusion.rrf(g, k=rrf_k, top=depth))}
    rank_in = lambda d: [next((r + 1 for r, (x, _) in enumerate(l) if x == d), None) for l in g]
    print(f"{name} / {kind} / {sk} split, question: {data[name].queries[q]}")
    print("sub-queries:", subq[name][sk][q])
    tie_df = pd.DataFrame([{"doc": d, "ranks per sub-query": rank_in(d), "P(p)": keys[d][0],
                            "S(p)": keys[d][1], "RSF position": rsf_pos[d],
                            "RRF position": rrf_pos[d],
                            "gold": data[name].qrels[q].get(d, 0) > 0} for d in tied])
    display(tie_df.sort_values("RSF position"))

# %% [markdown]
# ## Cost per question
#
# Fusion runs once per rollout inside the reward loop, so it must be negligible next to
# retrieval. We time each method over all questions' sub-query lists (depth 100 each) and
# report microseconds per question.

# %%
time_rows = []
for (name, kind, sk), groups in lists_cache.items():
    gl = list(groups.values())
    for m, fn in methods.items():
        best = float("inf")
        for _ in range(timing_repeats):
            t0 = time.perf_counter()
            for g in gl:
                fn(g)
            best = min(best, time.perf_counter() - t0)
        time_rows.append({"dataset": name, "retriever": kind, "split": sk, "method": m,
                          "us per question": 1e6 * best / max(len(gl), 1)})
timing = pd.DataFrame(time_rows)
timing_summary = timing.groupby("method")["us per question"].agg(["mean", "max"]).round(1)
save_table(timing_summary.reset_index(), "03_fusion_timing", tables_dir,
           caption=f"Fusion time per question (best of {timing_repeats} repeats, 2-3 lists of "
                   f"depth {depth}, pure Python); profile {profile}.")
timing_summary

# %% [markdown]
# ## Summary
#
# The result tables and the numbers saved below are what `RESULTS.md` quotes. Read them
# with the profile in mind: a subset with few distractors makes every method look better
# than on the full corpus.

# %%
summary = {
    "profile": profile, "datasets": datasets, "retrievers": retrievers, "k": k,
    "depth": depth, "n_queries": {n: len(d.queries) for n, d in data.items()},
    "n_docs": {n: len(d.corpus) for n, d in data.items()},
    "metrics": results.assign(method=results.method.astype(str)).to_dict(orient="records"),
    "ties": ties.to_dict(orient="records"),
    "timing_us_per_question": timing_summary["mean"].to_dict(),
}
save_json(summary, run_dir / "03_fusion" / "summary.json")
print("saved", run_dir / "03_fusion" / "summary.json")

# %% [markdown]
# ## What we found
#
# Read from this run's tables (`03_fusion_metrics`, `03_fusion_ties`, `03_fusion_timing`).

# %%
from IPython.display import Markdown

nd = results.pivot_table(index=["dataset", "retriever", "split"], columns="method",
                         values=measures[0], observed=True)
raw_q = results[results.method == "raw question"].set_index(["dataset", "retriever"])[measures[0]]
lines = []
for (name, kind, sk), r in nd.dropna(subset=["RSF"]).iterrows():
    lines.append(f"- **{name} · {kind} · {sk} split**: RSF {r['RSF']:.3f}, RRF {r['RRF']:.3f}, "
                 f"CombSUM {r['CombSUM']:.3f}; raw question {raw_q.loc[(name, kind)]:.3f}.")
wins = int((nd["RSF"] > nd["RRF"]).sum())
lines.append(f"- RSF beats RRF (k={rrf_k}) in {wins} of {int(nd['RSF'].notna().sum())} blocks; "
             f"over every block RSF - RRF is {(nd['RSF'] - nd['RRF']).min():+.3f} to "
             f"{(nd['RSF'] - nd['RRF']).max():+.3f} {measures[0]}.")
lines.append(f"- A rank-consensus tie in RSF's top {k} (broken by the score) occurs for "
             f"{ties[f'share with a P-tie in top-{k}'].min():.0%}-"
             f"{ties[f'share with a P-tie in top-{k}'].max():.0%} of questions.")
lines.append(f"- Fusing one question's lists takes {timing_summary['mean'].min():.0f}-"
             f"{timing_summary['mean'].max():.0f} µs in pure Python, depending on the method.")
display(Markdown("\n".join(lines)))
