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
run_dir = "../runs/dev"  # where this run's pseudo-documents, rewrites and per-query scores go
figures_dir = "../figures/dev"  # figures (PNG + PDF + caption)
tables_dir = "../tables/dev"  # tables (CSV + Markdown)
cache_dir = None  # shared cache (dequantised models, embeddings); None: qrlib default
seed = 0  # seed for query subsets and the bootstrap
data_dir = None  # offline data root (None: qrlib.data.datasets's lookup order)
model = "smollm2"  # untrained policy: smollm2 | qwen2.5-coder-0.5b | hub id (gpu profile)
rollouts = "hf"  # generation engine: hf | vllm (in-process engine, qrlib.generation.engine)
datasets = ["scifact"]  # collections with a trained row elsewhere in the workbook
retrievers = {"scifact": ["bm25"]}  # retriever kinds per dataset
query_kinds = {"scifact": "claim", "nfcorpus": "health", "2wikimultihopqa-mini": "question", "hotpotqa-large": "question", "hotpotqa-mini": "question"}  # pseudo-document prompt per dataset (qrlib.methods.prompting.prompts)
n_test_queries = 10  # test queries per dataset (None: the whole test split)
n_dev_queries = 4  # training queries the best prompt is chosen on (never test queries)
n_distractors = 200  # corpus: judged docs of the chosen queries + this many others; None: whole corpus
pseudo_doc_tokens = 32  # token budget of a pseudo-document (Query2doc: 128)
rewrite_tokens = 24  # token budget of a candidate prompt's rewrite
batch_size = 64  # prompts per generation call
measures = ["nDCG@10", "R@10", "R@100"]  # reported metrics; the first one is compared
eval_k = 100  # retrieval depth
bootstrap = 10000  # paired-bootstrap resamples
dense_model = "minilm"  # encoder of the dense retriever (offline all-MiniLM-L6-v2)
torch_threads = 0  # CPU threads for torch; 0 keeps torch's default

# %% [markdown]
# # 19 · Prompting baselines: what an untrained model gets without RL
#
# Every trained rewriter in this workbook is compared with the raw query. A reader should
# also ask whether it beats **the same model used without training**, at a fraction of the
# compute. Xu et al., *Rethinking On-policy Optimization for Query Augmentation* (TMLR;
# [arXiv:2510.17139](https://arxiv.org/abs/2510.17139)) made that comparison across
# evidence seeking, ad hoc and tool retrieval and found that simple prompting often
# matches or beats RL rewriting. SAGE's own Table 1 shows the same on NFCorpus:
# DeepRetrieval with Qwen3-4B reaches 0.3676 nDCG@10 against 0.3677 for the raw query.
#
# This notebook builds the two training-free rows, on every dataset that has a trained row
# elsewhere, with the retrievers of those rows:
#
# 1. **SPQE** (their *Simple Pseudo-document Query Expansion*): the untrained policy
#    writes a short passage $d_H$ for the query, and $(q, d_H)$ is searched;
# 2. **the best of its prompts**: the untrained policy rewrites with each of five
#    rewriting prompts (DMQR-RAG's four and a generic one), as a replacement and as an
#    expansion; the best pair is chosen on *training* queries and only it decodes the test.
#
# Every row is compared with the raw query on the whole test split, with a 95 % paired
# bootstrap interval over queries. Nothing here is trained, so these numbers do not
# depend on a training budget.

# %%
import time

from qrlib import session

S = session.start("19_prompting_baselines", run_dir=run_dir, figures_dir=figures_dir,
                  tables_dir=tables_dir, cache_dir=cache_dir, seed=seed,
                  torch_threads=torch_threads, rollouts=rollouts, dense_model=dense_model)
run_dir, figures_dir, tables_dir, out_dir, record = (S.run_dir, S.figures_dir, S.tables_dir,
                                                     S.out_dir, S.record)

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown, display

from qrlib import plots
from qrlib.core.io import atomic_write, save_json, save_table
from qrlib.data import datasets as qdata
from qrlib.eval import metrics
from qrlib.eval.compare import compare, comparison_table, describe
from qrlib.eval.scale import scale_columns
from qrlib.eval.stats import verdict
from qrlib.generation import policy, rewrite
from qrlib.generation.prompts import get as get_prompt
from qrlib.methods.prompting import spqe
from qrlib.retrieval import retrievers as retrieval
from qrlib.rl.release import release_memory

main = measures[0]

# %% [markdown]
# ## 1. Data and retrievers
#
# Test queries are each dataset's test split (whole in the `cpu` profile); the queries the
# best prompt is chosen on come from its *train* split. Both search the same corpus.

# %%
DATA, RETR = {}, {}
for name in datasets:
    te = qdata.subset(qdata.load_dataset(name, "test", data_dir=data_dir),
                      n_queries=n_test_queries, n_distractors=n_distractors, seed=seed)
    dev = qdata.subset(qdata.load_dataset(name, "train", data_dir=data_dir),
                       n_queries=n_dev_queries, n_distractors=0 if n_distractors is not None
                       else None, seed=seed)
    corpus = {**te.corpus, **dev.corpus}
    DATA[name] = (te, dev)
    for kind in retrievers[name]:
        kw = {"cache_dir": cache_dir, "show_progress": False} if kind == "dense" else {}
        RETR[name, kind] = retrieval.build_retriever(kind, corpus, **kw)
    print(f"{name}: {len(te.queries)} test queries, {len(dev.queries)} dev queries, "
          f"{len(corpus)} documents; retrievers {', '.join(retrievers[name])}")


def per_query(name, kind, texts, qrels):
    """Per-query scores of ``{qid: text}`` searched with one retriever."""
    run = retrieval.run_queries(RETR[name, kind], texts, k=eval_k)
    return metrics.evaluate(run, qrels, measures, per_query=True).set_index("query_id")


SCORES = {}  # (dataset, retriever, method) -> per-query DataFrame (measures as columns)
for name in datasets:
    te = DATA[name][0]
    for kind in retrievers[name]:
        SCORES[name, kind, "raw"] = per_query(name, kind, te.queries, te.qrels)

# %% [markdown]
# ## 2. SPQE: a pseudo-document per query
#
# The untrained policy writes a passage $d_H \sim \pi(\cdot \mid q)$ greedily, within
# `pseudo_doc_tokens`. The prompt asks for the kind of passage the collection holds (a
# scientific abstract for a claim, a health article for a NFCorpus topic, an encyclopedia
# passage for a multi-hop question), carries no worked example and nothing to copy. The
# paper searches the pair $(q, d_H)$; how the two are joined is the retriever's, so three
# readings are rows:
#
# $$ \texttt{spqe}: q \oplus d_H \qquad \texttt{spqe-q2d}: \underbrace{q \oplus \dots
#    \oplus q}_{5} \oplus d_H \qquad \texttt{pseudo-doc}: d_H $$
#
# `spqe-q2d` is Query2doc's sparse recipe (the query repeated so that the passage does not
# outweigh it in BM25; a dense encoder reads a repeated query as the same sentence, so it
# is a BM25 row only); `pseudo-doc` is HyDE's reading (the passage replaces the query).

# %%
t0 = time.perf_counter()
pol, tok = policy.load_policy(model)
print(f"policy {model} loaded in {time.perf_counter() - t0:.0f} s")
PSEUDO = {}
for name in datasets:
    te = DATA[name][0]
    path = out_dir / "pseudo_docs" / f"{name}.jsonl"
    PSEUDO[name] = spqe.pseudo_documents(pol, tok, te.queries,
                                         f"prompting/pseudo-doc-{query_kinds[name]}",
                                         max_new_tokens=pseudo_doc_tokens,
                                         batch_size=batch_size)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, PSEUDO[name].to_json(orient="records", lines=True))
    for kind in retrievers[name]:
        for reading in spqe.READINGS:
            if reading == "spqe-q2d" and kind != "bm25":
                continue
            SCORES[name, kind, reading] = per_query(name, kind,
                                                    spqe.reading_texts(PSEUDO[name], reading),
                                                    te.qrels)
    p = PSEUDO[name]
    print(f"{name}: {len(p)} passages, {p.gen_tokens.mean():.0f} tokens on average, "
          f"{p.truncated.mean():.0%} at the budget, {p.gen_seconds.sum() / 60:.1f} min")

# %% [markdown]
# One passage per dataset, as the policy wrote it:

# %%
with pd.option_context("display.max_colwidth", 200):
    display(pd.DataFrame([{"dataset": n, "query": PSEUDO[n]["query"].iloc[0],
                           "pseudo-document": PSEUDO[n]["passage"].iloc[0]}
                          for n in datasets]))

# %% [markdown]
# ## 3. The best of the policy's prompts
#
# Each candidate prompt (`qrlib.methods.prompting.spqe.PROMPT_CANDIDATES`) decodes the
# development queries greedily with one decoding contract (its prefill
# `<answer>{"query": "`, stopped at `</answer>`, `rewrite_tokens` tokens, the lenient
# parser); its rewrite is searched in place of the query (*rewrite*) and appended to it
# (*expand*). The (prompt, mode) with the best mean development score per dataset and
# retriever decodes the test queries under the same contract.

# %%
CONTRACTS = spqe.candidate_contracts(spqe.PROMPT_CANDIDATES, rewrite_tokens)
sel_rows, CHOSEN = [], {}
for name in datasets:
    dev = DATA[name][1]
    dev_rw = {p: rewrite.rewrite_queries(pol, tok, dev.queries, contract=c, progress=False,
                                         batch_size=batch_size)
              for p, c in CONTRACTS.items()}
    for kind in retrievers[name]:
        dev_scores = {}
        for p, df in dev_rw.items():
            for mode in spqe.MODES:
                s = per_query(name, kind, spqe.mode_texts(df, mode), dev.qrels)[main].mean()
                dev_scores[p, mode] = s
                sel_rows.append({"dataset": name, "retriever": kind, "prompt": p, "mode": mode,
                                 f"dev {main}": s, "format_ok": df.format_ok.mean(),
                                 "modified": df.modified.mean(),
                                 "dev queries": len(dev.queries)})
        CHOSEN[name, kind] = spqe.choose_prompt(dev_scores)
selection = pd.DataFrame(sel_rows)
selection["chosen"] = [CHOSEN[r.dataset, r.retriever] == (r.prompt, r["mode"])
                       for _, r in selection.iterrows()]
save_table(selection, "19_prompt_selection", tables_dir,
           caption=f"Development {main} of every candidate prompt and mode (training queries, "
                   f"never the test split); 'chosen' marks the one that decodes the test "
                   f"[profile: {profile}]")
selection

# %%
BEST = {}
for name in datasets:
    te = DATA[name][0]
    for p in sorted({CHOSEN[name, k][0] for k in retrievers[name]}):
        BEST[name, p] = rewrite.rewrite_queries(pol, tok, te.queries, contract=CONTRACTS[p],
                                                progress=False, batch_size=batch_size)
        path = out_dir / "rewrites" / name / f"{p.replace('/', '_')}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, BEST[name, p].to_json(orient="records", lines=True))
    for kind in retrievers[name]:
        p, mode = CHOSEN[name, kind]
        SCORES[name, kind, "best-prompt"] = per_query(name, kind,
                                                      spqe.mode_texts(BEST[name, p], mode),
                                                      te.qrels)
del pol
_ = release_memory()  # the engine and the policy go before the dense retrieval below

# %% [markdown]
# ## 4. Results on the test split
#
# One row per dataset, retriever and method, with the generation cost beside the score:
# tokens per query, the share of completions that used their whole budget, and the
# seconds of generation per query on this machine.

# %%
def gen_stats(name, kind, method):
    if method == "raw":
        return {"detail": "-", "format_ok": 1.0, "gen_tokens": 0.0, "truncated": 0.0,
                "gen_s_per_query": 0.0}
    if method == "best-prompt":
        p, mode = CHOSEN[name, kind]
        df = BEST[name, p]
        return {"detail": f"{p} ({mode})", "format_ok": df.format_ok.mean(),
                "gen_tokens": df.gen_tokens.mean(),
                "truncated": df.gen_tokens.map(lambda n: spqe.is_truncated(n, rewrite_tokens)).mean(),
                "gen_s_per_query": df.gen_seconds.mean()}
    df = PSEUDO[name]
    return {"detail": f"prompting/pseudo-doc-{query_kinds[name]}", "format_ok": 1.0,
            "gen_tokens": df.gen_tokens.mean(), "truncated": df.truncated.mean(),
            "gen_s_per_query": df.gen_seconds.mean()}


rows = []
for (name, kind, method), sc in SCORES.items():
    rows.append({"dataset": name, "retriever": kind, "method": method,
                 **{m: sc[m].mean() for m in measures}, **gen_stats(name, kind, method),
                 **scale_columns(None if method == "raw" else model,
                                 test_queries=len(sc))})
results = pd.DataFrame(rows)
save_table(results, "19_prompting_results", tables_dir,
           caption=f"Training-free rows on each test split: the raw query, SPQE's three "
                   f"readings and the best of the untrained policy's prompts ({model}); "
                   f"pseudo-documents of at most {pseudo_doc_tokens} tokens, rewrites of at "
                   f"most {rewrite_tokens}; truncated = share of completions at the budget "
                   f"[profile: {profile}]")
with pd.option_context("display.max_columns", None, "display.width", 250):
    display(results)

# %% [markdown]
# ### Against the raw query, per query
#
# The mean per-query difference in the main metric with a 95 % paired-bootstrap interval
# over queries (`qrlib.eval.compare`); a baseline "beats" the raw query only when its
# interval lies above 0.

# %%
cmp_rows = []
for (name, kind, method), sc in SCORES.items():
    if method == "raw":
        continue
    base = SCORES[name, kind, "raw"][main].to_dict()
    cmp_rows.append(compare(sc[main].to_dict(), base, paper="prompting", dataset=name,
                            retriever=kind, metric=main, method=method, kind="untrained",
                            baseline="raw", baseline_kind="baseline",
                            scale=scale_columns(model, test_queries=len(sc)),
                            resamples=bootstrap, seed=seed))
cmp = comparison_table(cmp_rows)
save_table(cmp, "19_comparisons", tables_dir,
           caption=f"Per-query {main} differences of each training-free row against the raw "
                   f"query, 95 % paired-bootstrap intervals over the test queries "
                   f"({bootstrap} resamples) [profile: {profile}]")
with pd.option_context("display.max_columns", None, "display.width", 250):
    display(cmp[["dataset", "retriever", "method", "score", "baseline score", "diff", "lo",
                 "hi", "wins", "losses", "test queries"]])

# per-query scores, for the trained rows' comparisons with these baselines
pq = pd.concat([sc.assign(dataset=n, retriever=k, method=m).rename_axis("qid").reset_index()
                for (n, k, m), sc in SCORES.items()], ignore_index=True)
atomic_write(out_dir / "per_query.csv", pq.to_csv(index=False))
save_json({"model": model, "datasets": datasets, "retrievers": retrievers,
           "query_kinds": {n: query_kinds[n] for n in datasets},
           "pseudo_doc_tokens": pseudo_doc_tokens, "rewrite_tokens": rewrite_tokens,
           "chosen": {f"{n}/{k}": list(v) for (n, k), v in CHOSEN.items()},
           "n_test_queries": n_test_queries, "n_dev_queries": n_dev_queries,
           "n_distractors": n_distractors, "seed": seed}, out_dir / "settings.json")
for r in cmp.to_dict("records"):
    record(f"{r['dataset']}.{r['retriever']}.{r['method']}.diff", r["diff"])
    record(f"{r['dataset']}.{r['retriever']}.{r['method']}.lo", r["lo"])
    record(f"{r['dataset']}.{r['retriever']}.{r['method']}.hi", r["hi"])
for name in datasets:
    record(f"{name}.pseudo_doc_truncated", float(PSEUDO[name].truncated.mean()))

# %%
order = ["spqe", "spqe-q2d", "pseudo-doc", "best-prompt"]
blocks = [(n, k) for n in datasets for k in retrievers[n]]
fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(blocks)), 3.8))
width = 0.8 / len(order)
for j, m in enumerate(order):
    sub = cmp[cmp.method == m].set_index(["dataset", "retriever"])
    xs = [i + (j - (len(order) - 1) / 2) * width for i, b in enumerate(blocks) if b in sub.index]
    rs = [sub.loc[b] for b in blocks if b in sub.index]
    if not rs:
        continue
    ax.errorbar(xs, [r["diff"] for r in rs],
                yerr=[[r["diff"] - r["lo"] for r in rs], [r["hi"] - r["diff"] for r in rs]],
                fmt="o", capsize=3, color=f"C{j}", label=m)
ax.axhline(0, color="0.4", lw=0.8)
ax.set_xticks(range(len(blocks)))
ax.set_xticklabels([f"{n}\n{k} (n={len(SCORES[n, k, 'raw'])})" for n, k in blocks], fontsize=8)
ax.set_ylabel(f"{main} minus raw query")
ax.set_title("Training-free rows against the raw query (95 % paired intervals)")
plots.legend_outside(ax)
plots.save_figure(fig, "19_prompting_vs_raw", figures_dir,
                  caption=f"Mean per-query {main} difference of each training-free row against "
                          f"the raw query with its 95 % paired-bootstrap interval; n = test "
                          f"queries", profile=profile, setting=model)
plt.close(fig)

# %% [markdown]
# ## What we found
#
# Built from `19_comparisons` and `19_prompting_results` of this run.

# %%
lines = []
for (name, kind), g in cmp.groupby(["dataset", "retriever"], sort=False):
    parts = [f"{r['method']} {r['diff']:+.3f} [{r['lo']:+.3f}, {r['hi']:+.3f}] "
             f"({verdict(r['lo'], r['hi'])} the raw query)" for r in g.to_dict("records")]
    raw_score = g["baseline score"].iloc[0]
    lines.append(f"- **{name} · {kind}** (raw query {main} {raw_score:.3f}, "
                 f"{int(g['test queries'].iloc[0])} test queries): " + "; ".join(parts) + ".")
best = cmp.loc[cmp["diff"].idxmax()]
beats = cmp[cmp["lo"] > 0]
below = cmp[cmp["hi"] < 0]
lines.append(f"- Of {len(cmp)} training-free rows, {len(beats)} beat the raw query and "
             f"{len(below)} fall below it; the largest gain is {describe(best)}.")
trunc = {n: PSEUDO[n].truncated.mean() for n in datasets}
lines.append(f"- Pseudo-documents used their whole {pseudo_doc_tokens}-token budget for "
             + ", ".join(f"{v:.0%} of {n}" for n, v in trunc.items())
             + " queries; a cut passage still searches, so the budget bounds the passage "
               "length rather than deciding validity.")
lines.append("- A trained row is worth its training only where it beats both the raw query "
             "and the best of these rows on the same queries; this run's per-query scores "
             "(`per_query.csv` in its run folder) are what such a pairing reads.")
display(Markdown("\n".join(lines)))
