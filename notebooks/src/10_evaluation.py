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
import time

from qrlib import session

S = session.start("10_evaluation", run_dir=run_dir, figures_dir=figures_dir, tables_dir=tables_dir,
                  cache_dir=cache_dir, seed=seed, torch_threads=torch_threads,
                  dense_model=dense_model)

import matplotlib.pyplot as plt
import pandas as pd
import torch
from IPython.display import Markdown

from qrlib import plots
from qrlib.core.io import load_json, save_table
from qrlib.core.records import load_record
from qrlib.data import datasets as qdata
from qrlib.data.cut import CollectionCut
from qrlib.eval import metrics
from qrlib.eval.compare import compare, comparison_table, describe
from qrlib.eval.scale import SCALE_COLUMNS, scale_columns
from qrlib.generation import policy, rewrite
from qrlib.retrieval import fusion, retrievers as retrieval

run_dir, figures_dir, tables_dir = S.run_dir, S.figures_dir, S.tables_dir
MEASURES = ("RR@3", "nDCG@3", "R@4", "R@10", "R@100", "AP@10", "RR@10", "nDCG@10")
LABELS = {"RR@3": "MRR@3", "RR@10": "MRR@10", "AP@10": "MAP@10", "nDCG@3": "NDCG@3",
          "nDCG@10": "NDCG@10"}

# %% [markdown]
# ## 1. What the run holds
#
# **Step 1** lists what earlier notebooks of this run left behind: one rewrite file per
# (source notebook, dataset, method) and the LoRA adapter behind each trained rewrite. Nothing is recomputed
# here; a notebook that did not run in this profile simply contributes no rows.

# %%
found = []  # (source, dataset, method, path)
settings = {}
for src in sources:
    base = run_dir / src
    if not (base / "rewrites").exists():
        print(f"{src}: no rewrites under {base} (notebook not run in this profile?)")
        continue
    settings[src] = load_json(base / "settings.json") if (base / "settings.json").exists() else {}
    for p in sorted((base / "rewrites").glob("*/*.jsonl")):
        found.append((src, p.parent.name, p.stem, p))
inventory = pd.DataFrame([(s, d, m) for s, d, m, _ in found], columns=["source", "dataset", "method"])
# the adapters behind the trained rewrites found above (run "<dataset>-<kind>-<mode>" for
# method "trained-<kind>-<mode>"), not whatever else the run folder holds
adapters = sorted({run_dir / "rl" / f"{d}-{m[len('trained-'):]}" / "adapter"
                   for _, d, m, _ in found if m.startswith("trained-")})
missing = [a for a in adapters if not (a / "adapter_config.json").exists()]
assert not missing, f"trained rewrites without their adapter: {missing}"
print(f"{len(found)} rewrite files, {len(adapters)} adapters: {[a.parent.name for a in adapters]}")
inventory

# %% [markdown]
# ## 2. Test collections
#
# **Step 2** rebuilds the exact test collection each method was evaluated on, so that every
# method is scored against the same queries and documents: each source notebook saved its
# cut as a `qrlib.data.cut.CollectionCut` record (dataset, split, query ids, document ids in
# index order) in `collections/<dataset>.json`, and `CollectionCut.load` reads the dataset
# folder back through it.

# %%
COLL, RETR = {}, {}
for src, name, _, _ in found:
    if (src, name) not in COLL:
        cut = load_record(CollectionCut, run_dir / src / "collections" / f"{name}.json",
                          writer=f"notebook {src}")
        COLL[src, name] = cut.load(data_dir)
keys = {(src, d): (src, d) for src, d, _, _ in found}


def get_retriever(key, kind):
    if (key, kind) not in RETR:
        kw = {"cache_dir": cache_dir, "show_progress": False} if kind == "dense" else {}
        RETR[key, kind] = retrieval.build_retriever(kind, COLL[key][1], **kw)
    return RETR[key, kind]


{k: (len(COLL[v][0].queries), len(COLL[v][1])) for k, v in keys.items()}

# %% [markdown]
# ## 3. Effectiveness (ACQO Tables 2-3 metrics)
#
# **Step 3** searches every method's rewrites with every retriever and scores the lists with
# the eight measures of ACQO's tables, so rows from different notebooks (and, later, other
# methods) line up in one table. A trained adapter is scored only with the retriever it was trained for (its method name
# says which); raw and untrained rewrites are scored with every retriever.

# %%
rows, lat_rows, tok_rows, PERQ, VALID = [], [], [], {}, {}
for src, name, method, path in found:
    df = pd.read_json(path, lines=True, dtype={"qid": str})
    VALID[name, method] = float(df.format_ok.mean()) if "format_ok" in df else None
    key = keys[src, name]
    te, _ = COLL[key]
    for kind in retrievers:
        if method.startswith("trained-") and not method.startswith(f"trained-{kind}-"):
            continue
        retr = get_retriever(key, kind)
        texts = (df.search_texts.tolist() if "search_texts" in df
                 else [[t] for t in df.search_text.tolist()])
        flat = [t for ts in texts for t in ts]
        t0 = time.perf_counter()
        for t in flat:  # one query at a time: online latency
            retr.search([t], eval_k)
        t_ret = (time.perf_counter() - t0) / len(df)
        res = retr.search(flat, eval_k)
        lists, i = [], 0
        t0 = time.perf_counter()
        for ts in texts:
            sub = res[i:i + len(ts)]
            i += len(ts)
            lists.append(sub[0] if len(sub) == 1 else fusion.rsf(sub))
        t_fus = (time.perf_counter() - t0) / len(df) if any(len(ts) > 1 for ts in texts) else 0.0
        run = dict(zip(df.qid, lists))
        ev = metrics.evaluate(run, te.qrels, MEASURES)
        PERQ[name, kind, method] = metrics.evaluate(run, te.qrels, ["nDCG@10"], per_query=True)
        rows.append({"dataset": name, "retriever": kind, "method": method, "source": src,
                     "n_queries": len(df), **{LABELS.get(m, m): ev[m].iloc[0] for m in MEASURES}})
        lat_rows.append({"dataset": name, "retriever": kind, "method": method,
                         "generation_ms": 1000 * df.gen_seconds.mean() if "gen_seconds" in df else 0.0,
                         "retrieval_ms": 1000 * t_ret, "fusion_ms": 1000 * t_fus})
    if "gen_tokens" in df:
        tok_rows.append({"dataset": name, "method": method, "mean_tokens": df.gen_tokens.mean(),
                         "median_tokens": df.gen_tokens.median(), "max_tokens": df.gen_tokens.max()})
effect = pd.DataFrame(rows).sort_values(["dataset", "retriever", "method"]).reset_index(drop=True)
save_table(effect, "10_effectiveness", tables_dir,
           caption=("Test effectiveness of every method x dataset x retriever (metrics of ACQO "
                    f"Tables 2-3; MRR=RR, MAP=AP, from ir-measures) [profile: {profile}; test "
                    "subsets and small models, not the paper's setting]"))
effect

# %% [markdown]
# ### Against the raw query, with intervals
#
# The bar for every trained rewriter: its nDCG@10 minus the raw query's on the same test
# queries, with a 95% paired-bootstrap interval over queries (10,000 resamples), as a row
# of the workbook's one comparison schema (`qrlib.eval.compare`). An interval that contains 0 means the run cannot tell the two apart.

# %%
def method_scale(name, method, n_test):
    """The training scale of a method's row from its run's log (qrlib.eval.scale); a trained
    method whose run log is missing is an error, not a row without training."""
    if not method.startswith("trained-"):
        pol = None if method == "raw" else next(
            (s.get("model") for s in settings.values() if s.get("model")), None)
        return scale_columns(pol, test_queries=n_test,
                             test_valid=None if method == "raw" else VALID[name, method])
    log = run_dir / "rl" / f"{name}-{method[len('trained-'):]}" / "log.csv"
    assert log.exists(), f"{method} on {name}: no training log at {log}"
    pol = load_json(log.parent / "config.json").get("model")
    return scale_columns(pol, [pd.read_csv(log, dtype={"qids": str})], test_queries=n_test,
                         test_valid=VALID[name, method])


vs_rows = []
for (name, kind, method), pq in PERQ.items():
    if method == "raw" or (name, kind, "raw") not in PERQ:
        continue
    a = pq.set_index("query_id")["nDCG@10"].to_dict()
    b = PERQ[name, kind, "raw"].set_index("query_id")["nDCG@10"].to_dict()
    vs_rows.append(compare(a, b, paper="deepretrieval", dataset=name, retriever=kind,
                           metric="nDCG@10", method=method,
                           kind="trained" if method.startswith("trained-") else "untrained",
                           baseline="raw", scale=method_scale(name, method, len(a)),
                           resamples=10_000, seed=seed))
vs_raw = comparison_table(vs_rows) if vs_rows else pd.DataFrame()
if len(vs_raw):
    save_table(vs_raw, "10_comparisons", tables_dir,
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
# single-query methods.

# %%
fresh = []
if latency_queries and adapters:
    for a in adapters:
        cfg = load_json(a.parent / "config.json")
        name = cfg["dataset"]
        src = next(iter(settings), None)
        te = COLL[keys[src, name]][0] if (src, name) in keys else qdata.load_dataset(name, "test")
        qs = dict(list(te.queries.items())[:latency_queries])
        m, tok = policy.load_policy(cfg["model"], adapter=a)
        for bs in (1, len(qs)):
            # the adapter's own decoding contract (its training's prompt, stops, budget)
            df = rewrite.rewrite_queries(m, tok, qs, contract=a,
                                        mode="expand" if cfg.get("expansion") else "rewrite",
                                        batch_size=bs, progress=False)
            fresh.append({"adapter": a.parent.name, "batch_size": bs,
                          "generation_ms_per_query": 1000 * df.gen_seconds.mean(),
                          "tokens_per_query": df.gen_tokens.mean()})
        del m
fresh = pd.DataFrame(fresh)
latency = pd.DataFrame(lat_rows)
latency["total_ms"] = latency[["generation_ms", "retrieval_ms", "fusion_ms"]].sum(axis=1)
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
tokens = pd.DataFrame(tok_rows)
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
    pairs = [" · ".join(k) for k in dict.fromkeys(zip(vs_raw.dataset, vs_raw.retriever))]
    methods = list(dict.fromkeys(vs_raw.method))
    fig, ax = plt.subplots(figsize=(8, 0.8 + 0.35 * len(vs_raw)))
    step = 0.8 / max(1, len(pairs))
    for j, pair in enumerate(pairs):
        sel = vs_raw[(vs_raw.dataset + " · " + vs_raw.retriever) == pair]
        y = [methods.index(m) + (j - (len(pairs) - 1) / 2) * step for m in sel.method]
        ax.errorbar(sel["diff"], y, xerr=[sel["diff"] - sel["lo"], sel["hi"] - sel["diff"]],
                    fmt="o", capsize=3, color=f"C{j}", label=pair)
    ax.axvline(0, color="0.4", ls="--", lw=1)
    ax.set_yticks(range(len(methods)), methods)
    ax.invert_yaxis()
    ax.set(xlabel="nDCG@10 minus the raw query's (95 % paired bootstrap)", ylabel="method")
    plots.legend_outside(ax, title="dataset · retriever")
    n_q = ", ".join(f"{d}: {n} queries" for d, n in vs_raw.groupby("dataset")["test queries"].max().items())
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
lines = []
for r in effect.to_dict("records"):
    record(f"{r['dataset']}.{r['retriever']}.{r['method']}.ndcg10", r["NDCG@10"])
for (name, kind), grp in effect.groupby(["dataset", "retriever"]):
    g = grp.set_index("method")["NDCG@10"]
    best = g.idxmax()
    raw_v = g.get("raw")
    lines.append(f"- **{name} · {kind}**: best method {best} (NDCG@10 {g[best]:.3f})"
                 + (f"; raw query {raw_v:.3f}" if raw_v is not None else "") + ".")
if len(latency):
    gen = latency[latency.generation_ms > 0]
    for kind, grp in latency.groupby("retriever"):
        record(f"latency.{kind}.retrieval_ms", grp.retrieval_ms.mean())
    timed = ""
    if len(fresh):
        one = fresh[fresh.batch_size == 1].generation_ms_per_query
        many = fresh[fresh.batch_size > 1].generation_ms_per_query
        timed = (f"; re-timed here (`10_generation_timing`) {one.min():.0f}-{one.max():.0f} ms "
                 f"per query one at a time"
                 + (f" and {many.min():.0f}-{many.max():.0f} ms in one batch" if len(many)
                    else ""))
    lines.append(
        (f"- Generation took {gen.generation_ms.min():.0f}-{gen.generation_ms.max():.0f} ms per "
         f"query in the upstream notebooks' batched test decoding (`10_latency`){timed}; "
         if len(gen) else "- No method generates text in this run; ")
        + "retrieval " + ", ".join(f"{k} {g.retrieval_ms.mean():.2f} ms"
                                   for k, g in latency.groupby("retriever"))
        + ": on this CPU the language model, not the search, dominates latency.")
if len(tokens):
    tk = tokens[tokens.mean_tokens > 0]
    if len(tk):
        lines.append(f"- Generated tokens per query: {tk.mean_tokens.min():.1f}-"
                     f"{tk.mean_tokens.max():.1f} on average.")
for r in vs_raw.to_dict("records"):
    record(f"{r['dataset']}.{r['retriever']}.{r['method']}.vs_raw", [r["diff"], r["lo"], r["hi"]])
    if r["kind"] == "trained":
        lines.append(f"- {describe(r)}.")
display(Markdown("\n".join(lines) if lines else "No rewrites in this run."))
