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

# %%
import time
from pathlib import Path

from qrlib import session

S = session.start("02_index_build", run_dir=run_dir, figures_dir=figures_dir, tables_dir=tables_dir,
                  cache_dir=cache_dir, seed=seed)
run_dir, figures_dir, tables_dir, record = S.run_dir, S.figures_dir, S.tables_dir, S.record

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from qrlib import plots
from qrlib.retrieval.baseline import baseline_dir, run_baseline, save_baseline
from qrlib.data.datasets import load_dataset, subset
from qrlib.eval import published
from qrlib.eval.agreement import same_top1, top_k_overlap
from qrlib.eval.metrics import evaluate, label
from qrlib.retrieval.retrievers import build_retriever
from qrlib.core.io import cache_dir as shared_cache, save_json, save_table

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
collections = {}
for name in datasets:
    collections[name] = load_dataset(name, split, data_dir=data_dir)
for name, extra in (pooled or {}).items():
    collections[f"{name}+pool"] = load_dataset(name, split, data_dir=data_dir,
                                               extra_corpora=list(extra))
if n_queries is not None or n_distractors is not None:
    collections = {n: subset(ds, n_queries=n_queries, n_distractors=n_distractors, seed=seed)
                   for n, ds in collections.items()}
for name, ds in collections.items():
    ds.name = name
    print(f"{name:24s} {ds!r}")

# %% [markdown]
# ## 2. Build, search, score
#
# For every collection and retriever we time the index build and the batched search of all
# queries, measure the index's serialized size, and score the top-100 lists. Dense document
# embeddings are cached in `cache_dir/embeddings/` keyed by model and a hash of the doc ids and
# texts, so only the first run pays for encoding.

# %%
results, speed_rows = {}, []
for name, ds in collections.items():
    kinds = [r for r in retrievers if (r != "dense" or name in dense_datasets)
             and (r != "bm25-ref" or len(ds.corpus) <= reference_max_docs)]
    for kind in kinds:
        params = dense_params if kind == "dense" else bm25_params
        t0 = time.perf_counter()
        retriever = build_retriever(kind, ds.corpus, **params)
        build_s = time.perf_counter() - t0
        res = run_baseline(ds, kind, k=k, retriever=retriever)
        results[(name, kind)] = res
        speed_rows.append({
            "dataset": name, "retriever": kind, "docs": len(ds.corpus),
            "queries": len(ds.queries), "build_s": build_s,
            "encode_cached": getattr(retriever, "loaded_from_cache", None) if kind == "dense" else None,
            "search_s": res.timings["search_s"], "queries_per_s": res.timings["queries_per_s"],
            "index_MB": retriever.index_nbytes() / 2**20})
        save_baseline(res, run_dir, save_run=save_runs)
        print(f"{name:24s} {kind:9s} build {build_s:7.2f}s  search {res.timings['search_s']:7.3f}s  "
              + "  ".join(f"{label(m)} {v:.4f}" for m, v in res.metrics.items()))
        del retriever

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

# %%
refs = {"bm25": published.table("references", "BM25 flat", column="nDCG@10"),
        "dense": published.table("references", "MiniLM MTEB", column="nDCG@10")}
REFERENCE = {(r.row, kind): r.value for kind, df in refs.items() for r in df.itertuples()}
REFERENCE.update({(ds, "bm25-ref"): v for (ds, kind), v in list(REFERENCE.items()) if kind == "bm25"})
display(pd.concat(refs.values())[["table", "row", "column", "value", "source"]])
full = n_queries is None and n_distractors is None
rows = []
for (name, kind), res in results.items():
    row = {"dataset": name, "retriever": kind, "queries": len(res.per_query),
           **{label(m): v for m, v in res.metrics.items()}}
    comparable = full and (kind != "dense" or dense_model == "minilm")
    ref = REFERENCE.get((name, kind)) if comparable else None
    row["reference nDCG@10"] = ref
    row["diff"] = row["nDCG@10"] - ref if ref is not None else None
    rows.append(row)
baseline = pd.DataFrame(rows)
for r in baseline.to_dict("records"):
    record(f"{r['retriever']}.{r['dataset']}.ndcg10", r["nDCG@10"])
    record(f"{r['retriever']}.{r['dataset']}.recall100", r["R@100"])
save_table(baseline, "02_baselines", tables_dir,
           caption=f"Raw-query baselines, {split} split, k1={bm25_k1}, b={bm25_b}, dense = "
                   f"{dense_model} + FAISS flat (profile {profile}; "
                   f"{'full collections' if full else f'subsets: {n_queries} queries, {n_distractors} distractors'}). "
                   "References: Pyserini BM25-flat BEIR regressions and the MTEB leaderboard.")
baseline.round(4)

# %%
fig, ax = plt.subplots(figsize=(10, 4))
piv = baseline.pivot(index="dataset", columns="retriever", values="nDCG@10")
piv = piv.reindex(index=list(collections), columns=[r for r in retrievers if r in piv.columns])
piv.plot.bar(ax=ax, rot=0)
plots.legend_outside(ax, title="retriever")
plots.tidy_ticks(ax, rotation=20, wrap=18)
if full:
    for i, name in enumerate(piv.index):
        for j, kind in enumerate(piv.columns):
            ref = REFERENCE.get((name, kind))
            if ref is not None:
                x = i + (j - (len(piv.columns) - 1) / 2) * 0.5 / len(piv.columns)
                ax.plot([x - 0.07, x + 0.07], [ref, ref], color="black", lw=2)
ax.set_ylabel("nDCG@10 of the raw queries")
ax.set_xlabel("collection")
ax.set_title("Raw-query nDCG@10" + (" (black ticks: published references)" if full else ""))
fig.tight_layout()
setting_02 = (f"{split} split, full collections" if full else
              f"{split} split, subsets of {n_queries} queries + {n_distractors} distractors")
plots.save_figure(fig, "02_baselines", figures_dir, profile=profile, setting=setting_02,
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
    import warnings

    import ranx

    warnings.filterwarnings("ignore", module="ranx")
    RANX = {"nDCG@10": "ndcg@10", "R@100": "recall@100", "AP@10": "map@10", "RR@10": "mrr@10"}
    cross = []
    for (name, kind), res in results.items():
        ds = collections[name]
        qr = ranx.Qrels({q: dict(r) for q, r in ds.qrels.items()})
        # ranx ranks by score; give list ranks as scores so both see the same order
        rr = ranx.Run({q: {d: float(len(lst) - i) for i, (d, _) in enumerate(lst)} or {"__none__": 0.0}
                       for q, lst in res.run.items()})
        theirs = ranx.evaluate(qr, rr, list(RANX.values()))
        cross.append({"dataset": name, "retriever": kind,
                      **{f"|diff| {label(m)}": abs(res.metrics[m] - float(theirs[RANX[m]]))
                         for m in RANX}})
    cross = pd.DataFrame(cross)
    save_table(cross, "02_ranx_crosscheck", tables_dir, floatfmt=".2e",
               caption="Absolute difference between ir-measures and ranx on the baseline runs.")
    display(cross)

# %% [markdown]
# ## 4. bm25s against rank_bm25
#
# Same tokens, same $k_1$, $b$; only the idf variant and the implementation differ. We compare
# the nDCG@10 of the two engines and the overlap of their top-10 lists
# ($|\mathrm{top}_{10}^{a}\cap\mathrm{top}_{10}^{b}|/10$, averaged over queries), and then their
# speed on the same queries.

# %%
agree_rows = []
for name in collections:
    a, b = results.get((name, "bm25")), results.get((name, "bm25-ref"))
    if a is None or b is None:
        continue
    agree_rows.append({"dataset": name, "nDCG@10 bm25s": a.metrics["nDCG@10"],
                       "nDCG@10 rank_bm25": b.metrics["nDCG@10"],
                       "nDCG@10 diff": a.metrics["nDCG@10"] - b.metrics["nDCG@10"],
                       "mean top-10 overlap": top_k_overlap(a.run, b.run, 10),  # qrlib.eval.agreement
                       "same top-1": same_top1(a.run, b.run)})
agreement = pd.DataFrame(agree_rows)
for r in agreement.to_dict("records"):
    record(f"agreement.{r['dataset']}.top10_overlap", r["mean top-10 overlap"])
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
speed = pd.DataFrame(speed_rows)
ref_qps = speed[speed.retriever == "bm25-ref"].set_index("dataset")["queries_per_s"]
speed["speed-up vs rank_bm25"] = [row.queries_per_s / ref_qps.get(row.dataset, np.nan)
                                  for row in speed.itertuples()]
for r in speed[speed.retriever == "bm25"].to_dict("records"):
    record(f"speedup.{r['dataset']}", r["speed-up vs rank_bm25"])
save_table(speed, "02_speed", tables_dir,
           caption=f"Index build time, search throughput and index size (profile {profile}; "
                   "2-core CPU unless stated). Dense build time is encoding time unless the "
                   "embeddings came from the cache (encode_cached).")
speed.round(3)

# %%
fig, ax = plt.subplots(figsize=(10, 4))
sp = speed.pivot(index="dataset", columns="retriever", values="queries_per_s")
sp = sp.reindex(index=list(collections), columns=[r for r in retrievers if r in sp.columns])
sp.plot.bar(ax=ax, logy=True, rot=0)
plots.legend_outside(ax, title="retriever")
plots.tidy_ticks(ax, rotation=20, wrap=18)
ax.set_ylabel("throughput (queries / second, log scale)")
ax.set_xlabel("collection")
ax.set_title("Search throughput, batched, top-100")
fig.tight_layout()
plots.save_figure(fig, "02_speed", figures_dir, profile=profile, setting=setting_02,
                  caption="Search throughput of bm25s, rank_bm25 and dense retrieval "
                          "(MiniLM on CPU, including query encoding).")
plt.show()

# %% [markdown]
# ## 6. HNSW for training-time rewards
#
# RL training issues thousands of retrievals per step, so ACQO (appendix A.1) builds an
# approximate `IndexHNSWFlat` ($M=64$, efConstruction $=2000$) for training and evaluates with
# an exact flat index. We build both over the same cached embeddings and report how much of the
# exact top-10 HNSW recovers, and its nDCG@10.

# %%
hnsw_rows = []
for name in hnsw_datasets or []:
    if name not in collections or "dense" not in retrievers:
        continue
    ds = collections[name]
    flat = build_retriever("dense", ds.corpus, **dense_params)
    t0 = time.perf_counter()
    hnsw = build_retriever("dense", ds.corpus, **{**dense_params, "index": "hnsw",
                                                   "hnsw_m": hnsw_m,
                                                   "ef_construction": hnsw_ef_construction,
                                                   "ef_search": hnsw_ef_search})
    hnsw_build = hnsw.index_seconds
    qids = list(ds.queries)
    texts = [ds.queries[q] for q in qids]
    t1 = time.perf_counter()
    run_f = dict(zip(qids, flat.search(texts, 10)))
    t2 = time.perf_counter()
    run_h = dict(zip(qids, hnsw.search(texts, 10)))
    t3 = time.perf_counter()
    rec = np.mean([len({d for d, _ in run_f[q]} & {d for d, _ in run_h[q]}) / 10 for q in qids])
    hnsw_rows.append({"dataset": name, "docs": len(ds.corpus), "M": hnsw_m,
                      "efConstruction": hnsw_ef_construction, "efSearch": hnsw_ef_search,
                      "HNSW build_s": hnsw_build, "flat index_s": flat.index_seconds,
                      "top-10 recall vs flat": rec,
                      "nDCG@10 flat": evaluate(run_f, ds.qrels, ["nDCG@10"])["nDCG@10"][0],
                      "nDCG@10 HNSW": evaluate(run_h, ds.qrels, ["nDCG@10"])["nDCG@10"][0],
                      "flat search_s": t2 - t1, "HNSW search_s": t3 - t2})
hnsw_table = pd.DataFrame(hnsw_rows)
for r in hnsw_rows:
    record(f"hnsw.{r['dataset']}.top10_recall_vs_flat", r["top-10 recall vs flat"])
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
from IPython.display import Markdown

lines = []
for name in collections:
    sub = baseline[baseline.dataset == name].set_index("retriever")
    parts = [f"{kind} {sub.loc[kind, 'nDCG@10']:.3f}" for kind in retrievers if kind in sub.index]
    ref = [f"{kind} {sub.loc[kind, 'reference nDCG@10']:.3f}" for kind in retrievers
           if kind in sub.index and pd.notna(sub.loc[kind, "reference nDCG@10"])]
    lines.append(f"- **{name}**: raw-query nDCG@10 " + ", ".join(parts)
                 + (f" (published: {', '.join(ref)})" if ref else ""))
if len(agreement):
    lines.append(f"- bm25s and rank_bm25 on identical tokens differ by at most "
                 f"{agreement['nDCG@10 diff'].abs().max():.4f} nDCG@10; their top-10 lists "
                 f"overlap {agreement['mean top-10 overlap'].min():.2f}-"
                 f"{agreement['mean top-10 overlap'].max():.2f} on average.")
fast = speed[speed.retriever == "bm25"].dropna(subset=["speed-up vs rank_bm25"])
if len(fast):
    lines.append(f"- bm25s answers {fast['speed-up vs rank_bm25'].min():.1f}-"
                 f"{fast['speed-up vs rank_bm25'].max():.1f}x more queries per second than "
                 f"rank_bm25 in this run (the ratio depends on query length and machine load).")
for r in hnsw_rows:
    lines.append(f"- HNSW on {r['dataset']} recovers {r['top-10 recall vs flat']:.4f} of the exact "
                 f"top-10 (nDCG@10 {r['nDCG@10 HNSW']:.4f} vs {r['nDCG@10 flat']:.4f} flat).")
if not full:
    lines.append("- These are subsets (see the profile): easier than the full collections and "
                 "not comparable with published numbers.")
display(Markdown("\n".join(lines)))
