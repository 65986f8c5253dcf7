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
run_dir = "../runs/dev"  # where this run's artifacts go (baselines/ for later notebooks)
figures_dir = "../figures/dev"  # figures (PNG + PDF + caption)
tables_dir = "../tables/dev"  # tables (CSV + Markdown)
cache_dir = None  # shared cache for embeddings and BM25 indexes (None: qrlib.workbook.cache_dir())
seed = 0  # seed of the query/distractor subsets
data_dir = None  # offline data root (None: qrlib.data.datasets's lookup order)
datasets = ["scifact", "nfcorpus", "hotpotqa-mini", "hotpotqa-large", "2wikimultihopqa-mini"]  # collections to index
pooled = {"hotpotqa-mini": ["2wikimultihopqa-mini", "hotpotqa-large"]}  # extra distractor corpora -> an extra "<name>+pool" collection
split = "test"  # qrels split whose queries are run
retrievers = ["bm25", "bm25-ref", "dense"]  # bm25: bm25s; bm25-ref: rank_bm25; dense: encoder + FAISS flat
dense_datasets = ["scifact", "nfcorpus"]  # collections that also get a dense index (encoding is the slow part)
reference_max_docs = 200_000  # skip the slow rank_bm25 reference on larger corpora (full BEIR HotpotQA)
n_queries = None  # queries per collection (None: the whole split)
n_distractors = None  # non-judged docs kept per collection (None: the whole corpus)
k = 100  # depth of every ranked list (R@100 needs 100)
bm25_k1 = 1.2  # BM25 k1 (ACQO A.1 / BEIR setting)
bm25_b = 0.75  # BM25 b
stemmer = "english"  # PyStemmer algorithm (None: no stemming)
stopwords = "en"  # bm25s stopword list (None: keep all)
dense_model = "minilm"  # offline all-MiniLM-L6-v2; a hub id such as BAAI/bge-base-en-v1.5 when online
query_instruction = ""  # prefix for queries (None: the model's known instruction, e.g. BGE's)
dense_batch_size = 64  # encoder batch size
hnsw_datasets = ["scifact"]  # collections where an HNSW index is built and compared with flat
hnsw_m = 64  # HNSW links per node (ACQO A.1: 64)
hnsw_ef_construction = 2000  # HNSW build beam (ACQO A.1: 2000)
hnsw_ef_search = 128  # HNSW search beam
save_runs = True  # write the top-k runs (JSON) next to the per-query metrics
ranx_crosscheck = True  # recompute the baseline metrics with ranx (numba; ~30 s of compilation)

# %% [markdown]
# # 02 · Indexes and raw-query baselines
#
# *Papers:* [BEIR: A Heterogeneous Benchmark for Zero-shot Evaluation of Information Retrieval Models](https://arxiv.org/abs/2104.08663) (Thakur, Reimers, Rücklé, Srivastava and Gurevych; NeurIPS 2021 Datasets and Benchmarks); [DeepRetrieval: Hacking Real Search Engines and Retrievers with Large Language Models via Reinforcement Learning](https://arxiv.org/abs/2503.00223) (Jiang, Lin, Cao, Tian, Kang, Wang, Sun and Han; arXiv:2503.00223, 2025).
#
# Every method in this workbook rewrites a query and sends the rewrite to a **fixed**
# retriever; the reward is a retrieval metric. So the retrievers come first, and with them
# the numbers every method must beat: the metrics of the **raw** queries.
#
# We build three retrievers over each collection:
#
# * **BM25** with `bm25s` (Lù, 2024), which precomputes each document's BM25 contribution per
#   term into a sparse matrix, so a query is a sparse row lookup — the fast path used inside
#   RL reward loops;
# * **BM25** with `rank_bm25.BM25Okapi`, a straightforward reference implementation — the
#   same tokens (regex split, lower-case, English stopwords, Snowball stemmer) go into both;
# * **dense** retrieval with a sentence-transformers bi-encoder (all-MiniLM-L6-v2, offline)
#   and an exact FAISS inner-product index over L2-normalised vectors (cosine similarity).
#
# BM25 scores document $d$ for query $q$ as
#
# $$\mathrm{BM25}(q,d)=\sum_{t\in q}\mathrm{idf}(t)\,\frac{f_{t,d}\,(k_1+1)}{f_{t,d}+k_1\left(1-b+b\,\frac{|d|}{\mathrm{avgdl}}\right)}$$
#
# with $k_1=1.2$, $b=0.75$ (the setting ACQO, appendix A.1, uses for HotpotQA). `bm25s`
# (method `lucene`) uses $\mathrm{idf}(t)=\ln\!\big(1+\frac{N-n_t+0.5}{n_t+0.5}\big)$ and drops
# the constant $(k_1+1)$; `rank_bm25` uses $\ln\frac{N-n_t+0.5}{n_t+0.5}$ with negative values
# floored. Rankings should therefore agree closely but not exactly — we measure how closely.
#
# Metrics come from `ir-measures`: nDCG@10, R@100, MAP@10 (`AP@10`) and MRR@10 (`RR@10`).

# %% [markdown]
# **What you will see.** The raw-query nDCG@10 of every collection under three retrievers,
# next to published values (section 3); a second evaluator agreeing to floating-point
# precision; the two BM25 engines agreeing on most of their top-10 while one is many times
# faster (sections 4-5); and how much of the exact dense top-10 an HNSW index recovers
# (section 6). The steps live in `qrlib.retrieval.study`.

# %%
from pathlib import Path

from qrlib import session

S = session.start("02_index_build", run_dir=run_dir, figures_dir=figures_dir, tables_dir=tables_dir,
                  cache_dir=cache_dir, seed=seed)
run_dir, figures_dir, tables_dir, record = S.run_dir, S.figures_dir, S.tables_dir, S.record

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown

from qrlib import plots
from qrlib.core.io import cache_dir as shared_cache, save_json, save_table
from qrlib.retrieval import study
from qrlib.retrieval.baseline import baseline_dir

cache_root = Path(cache_dir) if cache_dir else shared_cache()
bm25_params = {"k1": bm25_k1, "b": bm25_b, "stemmer": stemmer, "stopwords": stopwords}
dense_params = {"model": dense_model, "query_instruction": query_instruction,
                "batch_size": dense_batch_size, "cache_dir": cache_root, "index": "flat"}
print("cache:", cache_root)

# %% [markdown]
# ## 1. The collections
#
# Small profiles keep `n_queries` random queries, all their judged documents and
# `n_distractors` random other documents (seeded, `qrlib.data.datasets.subset`); the full profiles use
# whole corpora. A pooled collection adds the other Wikipedia-paragraph sets as distractors.

# %%
collections = study.load_collections(datasets, pooled, split, data_dir=data_dir,
                                     n_queries=n_queries, n_distractors=n_distractors, seed=seed)
for name, ds in collections.items():
    print(f"{name:24s} {ds!r}")

# %% [markdown]
# ## 2. Build, search, score
#
# For every collection and retriever we time the index build and the batched search of all
# queries, measure the index's serialized size, and score the top-100 lists. Dense document
# embeddings are cached in `cache_dir/embeddings/` keyed by model and a hash of the doc ids and
# texts, so only the first run pays for encoding. Dense runs only on `dense_datasets`, and
# the slow `rank_bm25` reference only up to `reference_max_docs` documents. Each
# (collection, retriever) prints one line: build and search seconds, then the four metrics.

# %%
results, speed_rows = study.build_and_score(
    collections, retrievers, dense_datasets=dense_datasets, reference_max_docs=reference_max_docs,
    bm25_params=bm25_params, dense_params=dense_params, k=k, run_dir=run_dir, save_runs=save_runs)

# %% [markdown]
# ## 3. Raw-query baselines
#
# Reference values for the full test sets come from `qrlib/eval/published/references.yaml`
# (printed below): BM25 with a flat title + text index from the Pyserini/Anserini BEIR
# regressions, and all-MiniLM-L6-v2 from the MTEB leaderboard. Our BM25 is close to that
# regression's analyzer (the same 33-word Lucene English stopword list; Snowball/Porter2
# instead of Lucene's Porter stemmer; `bm25s`'s Lucene idf), so on full data we expect to land
# close to the reference. Subsets (small profiles) are easier, because most distractors are
# gone, and are not comparable with the references.
#
# nDCG@10 sums the gains of the top 10 documents discounted by rank,
# $\sum_{i=1}^{10} g_i/\log_2(i+1)$, divided by the same sum for the ideal ordering; the
# `diff` column is ours minus the reference, filled only when the comparison is fair.

# %%
ref_table, REFERENCE = study.references()
display(ref_table)
full = n_queries is None and n_distractors is None
baseline = study.baseline_table(results, REFERENCE, full=full, dense_model=dense_model)
save_table(baseline, "02_baselines", tables_dir,
           caption=f"Raw-query baselines, {split} split, k1={bm25_k1}, b={bm25_b}, dense = "
                   f"{dense_model} + FAISS flat (profile {profile}; "
                   f"{'full collections' if full else f'subsets: {n_queries} queries, {n_distractors} distractors'}). "
                   "References: Pyserini BM25-flat BEIR regressions and the MTEB leaderboard.")
baseline.round(4)

# %% [markdown]
# The same nDCG@10 as bars; on full collections black ticks mark the published values.

# %%
setting_02 = (f"{split} split, full collections" if full else
              f"{split} split, subsets of {n_queries} queries + {n_distractors} distractors")
plots.save_figure(study.plot_baselines(baseline, collections, retrievers, REFERENCE, full),
                  "02_baselines", figures_dir, profile=profile, setting=setting_02,
                  caption="Raw-query nDCG@10 per collection and retriever"
                          + ("" if full else " on query/corpus subsets (smaller than the papers'; "
                             "not comparable with published numbers)") + ".")
plt.show()

# %% [markdown]
# ### Cross-check with a second evaluator
#
# The metrics come from ir-measures (pytrec_eval underneath). As an independent check we
# recompute them with `ranx` (Bassani, 2022), which has its own numba implementations, on the
# same runs; the largest absolute difference per measure should be at floating-point level.
# (Both use trec_eval's conventions: linear gains, AP@10 divided by the number of relevant
# documents.)

# %%
if ranx_crosscheck:
    cross = study.ranx_crosscheck(results, collections)
    save_table(cross, "02_ranx_crosscheck", tables_dir, floatfmt=".2e",
               caption="Absolute difference between ir-measures and ranx on the baseline runs.")
    display(cross)

# %% [markdown]
# ## 4. bm25s against rank_bm25
#
# Same tokens, same $k_1$, $b$; only the idf variant and the implementation differ. We compare
# the nDCG@10 of the two engines and the overlap of their top-10 lists
# ($|\mathrm{top}_{10}^{a}\cap\mathrm{top}_{10}^{b}|/10$, averaged over queries), and then their
# speed on the same queries. Expect differences in the third decimal and overlaps near 0.9:
# the idf variants reorder only near-ties.

# %%
agreement = study.bm25_agreement(results, collections)
save_table(agreement, "02_bm25_agreement", tables_dir,
           caption="bm25s (lucene idf) vs rank_bm25 (BM25Okapi) on identical tokens.")
agreement.round(4)

# %% [markdown]
# ## 5. Speed and size
#
# Queries per second of the batched search, index build time (dense: encoding, or reading the
# cached embeddings, plus adding them to FAISS) and serialized index size, all measured in this
# run on this machine. The speed-up column is relative to `rank_bm25` on the same collection.

# %%
speed = study.speed_table(speed_rows)
save_table(speed, "02_speed", tables_dir,
           caption=f"Index build time, search throughput and index size (profile {profile}; "
                   "2-core CPU unless stated). Dense build time is encoding time unless the "
                   "embeddings came from the cache (encode_cached).")
speed.round(3)

# %% [markdown]
# Throughput on a log scale: `bm25s` answers a query by a sparse row lookup, `rank_bm25`
# scores every document in Python, and dense retrieval pays for encoding the query.

# %%
plots.save_figure(study.plot_speed(speed, collections, retrievers), "02_speed", figures_dir,
                  profile=profile, setting=setting_02,
                  caption="Search throughput of bm25s, rank_bm25 and dense retrieval "
                          "(MiniLM on CPU, including query encoding).")
plt.show()

# %% [markdown]
# ## 6. HNSW for training-time rewards
#
# RL training issues thousands of retrievals per step, so ACQO (appendix A.1) builds an
# approximate `IndexHNSWFlat` ($M=64$, efConstruction $=2000$) for training and evaluates with
# an exact flat index. We build both over the same cached embeddings and report how much of the
# exact top-10 HNSW recovers, and its nDCG@10. The recall is
# $\frac{1}{|Q|}\sum_q |\mathrm{top}_{10}^{\mathrm{flat}}(q)\cap\mathrm{top}_{10}^{\mathrm{HNSW}}(q)|/10$;
# with a beam this wide we expect it close to 1.

# %%
hnsw_rows = study.hnsw_vs_flat(collections, hnsw_datasets, retrievers, dense_params, m=hnsw_m,
                               ef_construction=hnsw_ef_construction, ef_search=hnsw_ef_search)
hnsw_table = pd.DataFrame(hnsw_rows)
if len(hnsw_table):
    save_table(hnsw_table, "02_hnsw_vs_flat", tables_dir,
               caption=f"HNSW (M={hnsw_m}, efConstruction={hnsw_ef_construction}, efSearch="
                       f"{hnsw_ef_search}) vs exact flat index on the same embeddings"
                       + ("" if hnsw_ef_construction >= 2000 else
                          " (efConstruction smaller than ACQO's 2000)") + ".")
hnsw_table.round(4)

# %% [markdown]
# ## 7. What later notebooks read
#
# `run_dir/baselines/` holds, per collection and retriever, the per-query metrics
# (`<dataset>__<retriever>.per_query.csv`) and the top-k run (`.run.json`);
# `qrlib.retrieval.baseline.load_baseline(run_dir, dataset, retriever)` reads them back. The manifest
# records how the collections were built, so a later notebook can rebuild the same subset.

# %%
manifest = {
    "profile": profile, "split": split, "seed": seed, "k": k,
    "n_queries": n_queries, "n_distractors": n_distractors, "pooled": pooled,
    "datasets": {n: {"docs": len(ds.corpus), "queries": len(ds.queries)}
                 for n, ds in collections.items()},
    "bm25": bm25_params, "dense": {k_: str(v) for k_, v in dense_params.items()},
    "metrics": baseline.to_dict("records"),
}
save_json(manifest, baseline_dir(run_dir) / "manifest.json")
print("wrote", baseline_dir(run_dir))

# %% [markdown]
# ## What we found
#
# Read from this run's tables (`02_baselines`, `02_bm25_agreement`, `02_speed`,
# `02_hnsw_vs_flat`) and the published references.

# %%
display(Markdown(study.findings(collections, baseline, retrievers, agreement, speed, hnsw_rows,
                                full)))

# %% [markdown]
# **Questions.** Why are subsets easier than full collections, and what does that do to a
# reward computed on them? Which idf variant would you expect to disagree more on very
# common terms?
#
# The last cell records the key numbers the smoke tests read (`qrlib.eval.record`); it
# prints nothing and can be skipped.

# %%
for key, value in study.key_numbers(baseline, agreement, speed, hnsw_rows).items():
    record(key, value)
