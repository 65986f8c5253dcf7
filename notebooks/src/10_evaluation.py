# ---
# jupyter:
#   qrlib:
#     reads: [05_vanilla_rl]  # earlier notebooks whose artifacts this one reads (qrlib.freshness)
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% tags=["parameters"]
profile = "dev"  # profile name (smoke | cpu | cpu-long | gpu)
run_dir = "../runs/dev"  # run folder written by the earlier notebooks
figures_dir = "../figures/dev"  # figures of this run
tables_dir = "../tables/dev"  # tables of this run
cache_dir = None  # shared cache (dequantised models, embeddings); None means qrlib default
seed = 0  # seed of the paired bootstrap (test collections come from each source's CollectionCut records)
data_dir = None  # BEIR folders; None means /work/shared/data or $QRLIB_DATA
sources = ["05_vanilla_rl"]  # notebook folders under run_dir holding rewrites/DATASET/METHOD.jsonl
retrievers = ["bm25", "dense"]  # retrievers every method is evaluated with
eval_k = 100  # retrieval depth (R@100)
latency_queries = 5  # queries re-generated with each adapter to time generation (0 skips)
torch_threads = 0  # CPU threads for torch; 0 keeps torch's default
dense_model = "minilm"  # encoder of the dense retriever: offline all-MiniLM-L6-v2; a hub id (BAAI/bge-base-en-v1.5) on GPU

# %% [markdown]
# # 10 · Evaluation: every method, dataset and retriever in one table
#
# *Papers:* [DeepRetrieval: Hacking Real Search Engines and Retrievers with Large Language Models via Reinforcement Learning](https://arxiv.org/abs/2503.00223) (Jiang, Lin, Cao, Tian, Kang, Wang, Sun and Han; arXiv:2503.00223, 2025); [When Should I Search More: Adaptive Complex Query Optimization with Reinforcement Learning](https://arxiv.org/abs/2601.21208) (Wen, Deng, Wei, Chen, Qiao and Sun; arXiv:2601.21208, 2026).
#
# This notebook gathers what the training notebooks left under `run_dir` — the greedy
# rewrites of the test queries by each method (raw query, untrained model, each trained
# adapter) — and scores them the way ACQO reports results:
#
# * **effectiveness** (ACQO Tables 2-3): MRR@3, NDCG@3, R@4, R@10, R@100, MAP@10, MRR@10,
#   NDCG@10 — computed by `ir-measures` (MRR is `RR@k`, MAP is `AP@k`);
# * **latency per query** split into generation, retrieval and fusion (ACQO Table 6a);
# * **generated tokens** per query (ACQO Table 8).
#
# It also loads the LoRA adapter behind each trained rewrite (`run_dir/rl/<run>/adapter`) and times
# its generation on a few queries, so the latency table does not depend on how busy the
# machine was while the training notebook ran.
#
# Rewrite files are JSON lines with at least `qid`, `search_text` (or a list
# `search_texts` for multi-query methods, fused with RSF), `gen_tokens`, `gen_seconds`.

# %%
from qrlib import session

S = session.start("10_evaluation", run_dir=run_dir, figures_dir=figures_dir, tables_dir=tables_dir,
                  cache_dir=cache_dir, seed=seed, torch_threads=torch_threads,
                  dense_model=dense_model)

import matplotlib.pyplot as plt
import pandas as pd
import torch
from IPython.display import Markdown

from qrlib import plots
from qrlib.core.io import save_table
from qrlib.eval.compare import comparison_table, save_comparisons
from qrlib.eval.prose import paragraph
from qrlib.eval.scale import SCALE_COLUMNS
from qrlib.methods.deepretrieval import evaluation as E

run_dir, figures_dir, tables_dir = S.run_dir, S.figures_dir, S.tables_dir
MEASURES, LABELS = E.MEASURES, E.LABELS  # ACQO's eight measures; MRR = RR, MAP = AP

# %% [markdown]
# ## 1. What the run holds
#
# **Step 1** lists what earlier notebooks of this run left behind: one rewrite file per
# (source notebook, dataset, method) and the LoRA adapter behind each trained rewrite. Nothing is recomputed
# here; a notebook that did not run in this profile simply contributes no rows. Expect one
# `raw` file, one `untrained-<mode>` file per prompt mode and one `trained-<retriever>-<mode>`
# file per training run of notebook 05, and an adapter for each trained file (a trained
# rewrite whose adapter is missing stops the notebook here).

# %%
found, settings = E.find_rewrites(run_dir, sources)
adapters = E.trained_adapters(run_dir, found)
print(f"{len(found)} rewrite files, {len(adapters)} adapters: {[a.parent.name for a in adapters]}")
E.inventory(found)

# %% [markdown]
# ## 2. Test collections
#
# **Step 2** rebuilds the exact test collection each method was evaluated on, so that every
# method is scored against the same queries and documents: each source notebook saved its
# cut as a `qrlib.data.cut.CollectionCut` record (dataset, split, query ids, document ids in
# index order) in `collections/<dataset>.json`, and `CollectionCut.load` reads the dataset
# folder back through it. The output maps each (source, dataset) to its number of test
# queries and documents, which must match notebook 05's.

# %%
COLL = E.load_collections(run_dir, found, data_dir)
get_retriever = E.Retrievers(COLL, cache_dir=cache_dir)
{k: (len(te.queries), len(corpus)) for k, (te, corpus) in COLL.items()}

# %% [markdown]
# ## 3. Effectiveness (ACQO Tables 2-3 metrics)
#
# **Step 3** searches every method's rewrites with every retriever and scores the lists with
# the eight measures of ACQO's tables, so rows from different notebooks (and, later, other
# methods) line up in one table. A trained adapter is scored only with the retriever it was trained for (its method name
# says which); raw and untrained rewrites are scored with every retriever. A method that
# writes several queries (`search_texts`) has their lists fused with RSF. The same pass
# times retrieval one query at a time, for step 4.

# %%
effect, latency, tokens, PERQ, VALID = E.score_methods(found, COLL, get_retriever, retrievers,
                                                       k=eval_k)
save_table(effect, "10_effectiveness", tables_dir,
           caption=("Test effectiveness of every method x dataset x retriever (metrics of ACQO "
                    f"Tables 2-3; MRR=RR, MAP=AP, from ir-measures) [profile: {profile}; test "
                    "subsets and small models, not the paper's setting]"))
effect

# %% [markdown]
# ### Against the raw query, with intervals
#
# The bar for every trained rewriter: its nDCG@10 minus the raw query's on the same test
# queries, $\bar d = \frac1n\sum_q (s_q - s_q^{\text{raw}})$, with a 95% paired-bootstrap
# interval over queries (10,000 resamples), as a row
# of the workbook's one comparison schema (`qrlib.eval.compare`). An interval that contains 0 means the run cannot tell the two apart.
# Each row carries the training scale read from its run's log; 05's trained-vs-raw rows
# must come out identical here (same queries, same seed).

# %%
def method_scale(name, method, n_test):
    return E.method_scale(name, method, n_test, run_dir=run_dir, settings=settings, valid=VALID)


vs_rows = E.vs_raw_rows(PERQ, method_scale, resamples=10_000, seed=seed)
vs_raw = comparison_table(vs_rows) if vs_rows else pd.DataFrame()
if len(vs_raw):
    save_comparisons(vs_raw, "10_comparisons", tables_dir,
                     caption=("nDCG@10 of each method minus the raw query's on the same test queries, "
                              "95% paired-bootstrap interval [lo, hi] (qrlib.eval.compare schema); "
                              f"training scale ({', '.join(SCALE_COLUMNS)}) from each run's log "
                              f"[profile: {profile}]"))
vs_raw

# %% [markdown]
# ## 4. Latency per query (ACQO Table 6a)
#
# **Step 4** splits the cost of answering one query into its parts, as ACQO's Table 6a
# does: writing the rewrite (generation), searching (retrieval) and merging several lists
# (fusion). Generation time comes from the rewriting pass of the source notebook (batched greedy
# decoding, so a per-query share of the batch) and, where adapters exist, from a fresh
# timing below; retrieval is timed here one query at a time; fusion is zero for
# single-query methods. The fresh timing decodes `latency_queries` test queries with each
# adapter's own decoding contract, once one at a time and once in one batch.

# %%
fresh = E.fresh_timing(adapters, COLL, settings, latency_queries)
save_table(latency, "10_latency", tables_dir,
           caption=(f"Per-query latency split into generation, retrieval and fusion (ACQO Table 6a "
                    f"layout); CPU, {torch.get_num_threads()} threads [profile: {profile}]"))
if len(fresh):
    save_table(fresh, "10_generation_timing", tables_dir,
               caption=f"Fresh generation timing of every trained adapter [profile: {profile}]")
display(latency)
fresh

# %% [markdown]
# ## 5. Generated tokens (ACQO Table 8)
#
# **Step 5** counts how many tokens each method generates per query: the main driver of
# generation latency, and ACQO's argument against long reasoning traces (its Table 8).

# %%
save_table(tokens, "10_generated_tokens", tables_dir,
           caption=f"Generated tokens per query (ACQO Table 8 layout) [profile: {profile}]")
tokens

# %% [markdown]
# ## 6. Figure: NDCG@10 of each method against the raw query, with intervals
#
# **Step 6** draws the table of section 3's intervals: for every method and (dataset,
# retriever), its nDCG@10 minus the raw query's on the same test queries, with the 95 %
# paired-bootstrap interval as an error bar. Differences of a hundredth are invisible in
# a bar chart of absolute levels and meaningless without their interval; a point whose bar
# crosses the dashed zero line is not distinguishable from the raw query.

# %%
if len(vs_raw):
    fig, n_q = E.vs_raw_figure(vs_raw)
    plots.save_figure(fig, "10_ndcg_by_method", figures_dir, profile=profile, setting=n_q,
                      caption="Test nDCG@10 of every method minus the raw query's, with 95 % "
                              "paired-bootstrap intervals over the test queries")
    plt.show()

# %% [markdown]
# ## What we found
#
# **Takeaway**, read from this run's tables (`10_effectiveness`, `10_comparisons`, `10_latency`,
# `10_generated_tokens`); the key numbers are also recorded for the smoke tests.

# %%
record = S.record
for key, value in E.result_records(effect, latency, vs_raw).items():
    record(key, value)
lines = E.summary_lines(effect, latency, fresh, tokens, vs_raw)
display(Markdown(paragraph(lines) if lines else "No rewrites in this run."))
