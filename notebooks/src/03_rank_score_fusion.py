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
#
# **What you will learn:** how RSF orders documents (a two-list example worked by hand),
# how much each fusion rule gains over the raw question and over a single sub-query, how
# often RSF's score tie-break decides the top of the list, and what fusing costs.

# %%
from qrlib import session

S = session.start("03_rank_score_fusion", run_dir=run_dir, figures_dir=figures_dir,
                  tables_dir=tables_dir, cache_dir=cache_dir, seed=seed)
run_dir, figures_dir, tables_dir, record = S.run_dir, S.figures_dir, S.tables_dir, S.record

import matplotlib.pyplot as plt
from IPython.display import Markdown

from qrlib import plots
from qrlib.core.io import save_json, save_table
from qrlib.methods.acqo import fusion_study as fs

measures = [f"nDCG@{k}", f"R@{k}", f"AP@{k}"]
smaller = n_queries is not None or n_distractors is not None
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
#
# Two small lists make this concrete. List A ranks a, b, c; list B ranks c, b. Document c
# is third in A and first in B, so $P(c) = 1/(1/3 + 1) = 3/4$ and it comes first under
# RSF; a (first in A only) and b (second in both) tie at $P = 1$, and a wins on its higher
# score. We expect the RSF order **c, a, b**; RRF, which counts b's two appearances, should
# give **c, b, a**.

# %%
toy = fs.toy_example([("a", 0.9), ("b", 0.8), ("c", 0.7)], [("c", 0.95), ("b", 0.5)], rrf_k)
toy

# %% [markdown]
# ## Data, retrievers and sub-queries
#
# Each dataset's split is loaded (optionally subset: the judged documents plus random
# distractors), and every question is split twice. The oracle split reads the gold
# supporting titles from the query metadata, so it shows what a perfect decomposition could
# gain; the heuristic split is what a rule-based system gets without a model. Expect two
# or more oracle sub-queries per question, one per supporting paragraph (two in HotpotQA,
# two to four in 2WikiMultihopQA).

# %%
data = {name: fs.load_cut(name, split, data_dir=data_dir, n_queries=n_queries,
                          n_distractors=n_distractors, seed=seed) for name in datasets}
subq = {name: fs.split_questions(ds) for name, ds in data.items()}
fs.overview(data, subq)

# %% [markdown]
# One question as it is and under both splits:

# %%
fs.split_example(data, subq, datasets[0])

# %% [markdown]
# ## Retrieval and fusion
#
# For each (dataset, retriever) every raw question and every sub-query is searched in one
# batched call, to depth 100. Fused lists are cut to the same depth. Before scoring, fused
# lists go through `fusion.to_run`, which gives strictly decreasing scores in list order:
# ir-measures re-sorts runs by score and would otherwise reorder RSF's ties by document id.
# Besides the four rules, two controls: RRF over lists first cut to their top $k$, and RSF
# over the raw question's list together with the sub-queries' lists.

# %%
methods = fs.fusion_methods(k=k, rrf_k=rrf_k, depth=depth, comb_norm=comb_norm)
results, lists_cache = fs.evaluate_fusions(data, subq, retrievers, methods, measures=measures,
                                           depth=depth, k=k, dense_model=dense_model,
                                           cache_dir=cache_dir)
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
#
# The same numbers as differences, RSF minus each competitor per block:

# %%
print(f"{measures[0]} differences per block (positive: RSF better):")
fs.differences(results, measures[0]).round(3)

# %%
fig = fs.fusion_figure(results, datasets=datasets, retrievers=retrievers, measure=measures[0])
plots.save_figure(fig, "03_fusion_ndcg", figures_dir,
                  caption=f"{measures[0]} of the raw question, the first sub-query alone and "
                          f"four fusions of the sub-query lists (oracle and heuristic splits). "
                          f"Profile {profile}{note}.",
                  profile=profile, setting=fs.cut_setting(n_queries, n_distractors, depth))
plt.show()

# %% [markdown]
# ## How often does RSF's tie-break matter?
#
# We count, in the fused top-$k$ of each question, documents whose rank consensus $P(p)$
# equals another top-$k$ document's: there, RSF's order is decided by the score $S(p)$. We
# also measure how often RSF's and RRF's top-$k$ differ at all, and show one real tie.

# %%
ties, example = fs.tie_table(lists_cache, k=k, rrf_k=rrf_k)
save_table(ties.round(4), "03_fusion_ties", tables_dir,
           caption=f"Rank-consensus ties P(p) in the RSF top-{k} (resolved by max score S(p)) "
                   f"and disagreement with RRF; profile {profile}{note}.")
ties.round(3)

# %% [markdown]
# The first BM25 question with such a tie: its tied documents, their ranks in each
# sub-query's list, and where RSF and RRF put them.

# %%
fs.tie_example(example, data, subq, depth=depth, rrf_k=rrf_k)

# %% [markdown]
# ## Cost per question
#
# Fusion runs once per rollout inside the reward loop, so it must be negligible next to
# retrieval. We time each method over all questions' sub-query lists (depth 100 each) and
# report microseconds per question: expect tens to hundreds of microseconds, against
# milliseconds for one search.

# %%
timing_summary = fs.timing_summary(lists_cache, methods, repeats=timing_repeats)
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
summary = fs.run_summary(profile=profile, datasets=datasets, retrievers=retrievers, k=k,
                         depth=depth, data=data, results=results, ties=ties, timing=timing_summary)
save_json(summary, run_dir / "03_fusion" / "summary.json")
print("saved", run_dir / "03_fusion" / "summary.json")

# %% [markdown]
# ## What we found
#
# Read from this run's tables (`03_fusion_metrics`, `03_fusion_ties`, `03_fusion_timing`).

# %%
display(Markdown(fs.findings(results, ties, timing_summary, measure=measures[0], k=k,
                             rrf_k=rrf_k)))

# %% [markdown]
# The last cell stores the numbers the tests read (the toy orders, each block's nDCG and
# share of ties); it prints nothing and can be skipped.

# %%
for key, value in fs.records(toy, results, ties, measure=measures[0], k=k).items():
    record(key, value)
