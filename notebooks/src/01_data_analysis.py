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
cache_dir = None  # shared cache (unused here; declared for the runner)
seed = 0  # master seed (sampling docs for the length plots)
data_dir = None  # offline data root (None: qrlib.data.datasets's lookup order)
datasets = ["scifact", "nfcorpus", "hotpotqa-mini", "hotpotqa-large", "2wikimultihopqa-mini"]  # BEIR-layout collections to describe
splits = ["train", "test"]  # qrels splits to count (a split a dataset lacks is skipped)
pooled_base = "hotpotqa-mini"  # multi-hop set whose corpus is enlarged with the others' paragraphs
pooled_extra = ["2wikimultihopqa-mini", "hotpotqa-large"]  # extra Wikipedia-paragraph corpora (distractors)
max_docs_for_lengths = 5000  # docs sampled per corpus for length statistics (None: all)
include_spider = True  # describe Spider dev (text-to-SQL) too

# %% [markdown]
# # 01 · The data: what every later notebook retrieves from
#
# *Paper:* [BEIR: A Heterogeneous Benchmark for Zero-shot Evaluation of Information Retrieval Models](https://arxiv.org/abs/2104.08663) (Thakur, Reimers, Rücklé, Srivastava and Gurevych; NeurIPS 2021 Datasets and Benchmarks).
#
# Query optimisation is judged by retrieval metrics, so before training anything we look at
# the collections themselves: how many documents and queries they have, how many documents
# are judged per query, how long queries and documents are, and — for the multi-hop sets —
# what kinds of questions they contain. These numbers explain much of what follows: a
# collection with one judged document per query (SciFact) rewards precision at the top,
# one with dozens of graded judgments (NFCorpus) rewards recall; two gold paragraphs per
# HotpotQA question make "find both hops" the whole game.
#
# All collections are in the BEIR layout (Thakur et al., 2021): `corpus.jsonl.gz`,
# `queries.jsonl`, `qrels/<split>.tsv`. The qrels file of a split decides which queries
# belong to it. Every folder carries a `PROVENANCE.md`; the multi-hop sets are **pooled
# subsamples** (not the full HotpotQA/2Wiki dev sets), and several metadata fields are
# partial or inferred — we show those flags rather than hide them.

# %%
from collections import Counter
from pathlib import Path

from qrlib import session

S = session.start("01_data_analysis", run_dir=run_dir, figures_dir=figures_dir,
                  tables_dir=tables_dir, cache_dir=cache_dir, seed=seed)
run_dir, figures_dir, tables_dir, record = S.run_dir, S.figures_dir, S.tables_dir, S.record

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from qrlib import plots
from qrlib.data.datasets import load_dataset, load_spider
from qrlib.core.errors import QrlibError
from qrlib.core.io import save_json, save_table

rng = np.random.default_rng(seed)
pd.set_option("display.width", 160)

# %% [markdown]
# ## 1. Loading every collection
#
# `qrlib.data.datasets.load_dataset(name, split)` looks for the folder in `data_dir`, `$QRLIB_DATA`,
# `./data`, `../shared/data`, and finally `ir_datasets` (online only). Each split yields a
# `Dataset` with `corpus`, `queries`, `qrels`, per-query metadata and collection facts.

# %%
loaded = {}
for name in datasets:
    for split in splits:
        try:
            loaded[(name, split)] = load_dataset(name, split, data_dir=data_dir)
        except QrlibError as exc:
            if "has no split" in str(exc):
                continue
            raise
for (name, split), ds in loaded.items():
    print(f"{name:22s} {split:5s} {ds!r}")

# %% [markdown]
# ## 2. Size and judgment depth
#
# *Judged per query* counts every qrels line (any grade); *relevant per query* counts grades
# above zero. Query length is in whitespace words of the raw query; document length in words
# of `title + text` (the string both BM25 and the encoder see).

# %%
def words(s: str) -> int:
    return len(s.split())


def sample_ids(ids, n):
    ids = sorted(ids)
    if n is None or n >= len(ids):
        return ids
    return [ids[i] for i in rng.choice(len(ids), size=n, replace=False)]


rows, qlen_rows, dlen_rows = [], [], []
doc_len_cache = {}
for (name, split), ds in loaded.items():
    judged = [len(r) for r in ds.qrels.values()]
    rel = [sum(v > 0 for v in r.values()) for r in ds.qrels.values()]
    grades = Counter(v for r in ds.qrels.values() for v in r.values())
    qlens = [words(t) for t in ds.queries.values()]
    if name not in doc_len_cache:
        doc_len_cache[name] = [words(ds.doc_text(d)) for d in sample_ids(ds.corpus, max_docs_for_lengths)]
    dl = doc_len_cache[name]
    rows.append({"dataset": name, "split": split, "docs": len(ds.corpus), "queries": len(ds.queries),
                 "qrels": sum(judged), "judged/query": np.mean(judged),
                 "relevant/query": np.mean(rel), "max judged": max(judged),
                 "grades": " ".join(f"{g}:{c}" for g, c in sorted(grades.items())),
                 "query words (mean)": np.mean(qlens), "query words (max)": max(qlens),
                 "doc words (mean)": np.mean(dl), "doc words (median)": np.median(dl)})
    qlen_rows += [{"dataset": name, "split": split, "words": n} for n in qlens]
    if split == splits[-1] or (name, splits[-1]) not in loaded:
        dlen_rows += [{"dataset": name, "words": n} for n in dl]
stats = pd.DataFrame(rows)
save_table(stats, "01_dataset_stats", tables_dir,
           caption=f"Collections used in the workbook (profile {profile}). Doc lengths from up "
                   f"to {max_docs_for_lengths} sampled docs per corpus.")
for r in stats.to_dict("records"):
    record(f"{r['dataset']}.{r['split']}.queries", r["queries"])
    record(f"{r['dataset']}.{r['split']}.relevant_per_query", r["relevant/query"])
    record(f"{r['dataset']}.docs", r["docs"])
stats.round(2)

# %% [markdown]
# Read the `relevant/query` and `grades` columns: SciFact has about one relevant abstract per
# claim; NFCorpus has dozens of judged documents per query with two grades (2 = directly
# cited, 1 = indirectly), so its nDCG rewards getting many documents roughly right. The multi-hop sets have exactly two (HotpotQA) or two to four
# (2Wiki) gold paragraphs per question.

# %%
fig, axes = plt.subplots(1, 2, figsize=(13, 4))
q = pd.DataFrame(qlen_rows)
d = pd.DataFrame(dlen_rows)
import seaborn as sns

sns.boxplot(data=q, x="words", y="dataset", hue="split", ax=axes[0], showfliers=False)
axes[0].set(title="Query length", xlabel="query length (words)", ylabel="collection")
plots.legend_outside(axes[0], where="below", title="split")
sns.boxplot(data=d, x="words", y="dataset", ax=axes[1], showfliers=False, color="C2")
axes[1].set_xscale("log")
axes[1].set(title="Document length (title + text)", xlabel="document length (words, log scale)",
            ylabel="")
fig.tight_layout()
plots.save_figure(fig, "01_lengths", figures_dir, profile=profile,
                  setting=f"up to {max_docs_for_lengths} sampled docs per corpus",
                  caption="Query and document lengths per collection (outliers hidden). "
                          "Multi-hop questions are long, Wikipedia paragraphs short.")
plt.show()

# %% [markdown]
# ## 3. Multi-hop question types
#
# HotpotQA (Yang et al., 2018) labels each question **bridge** (the answer needs an
# intermediate entity) or **comparison** (two entities compared), and a **level**
# (easy/medium/hard; the dev set is all hard). The offline copies know the type for only part
# of the questions: `type_level_source` records where the label came from, and
# hotpotqa-large mixes the official distractor context with 248 fullwiki questions that were
# kept only if TF-IDF had already found both gold paragraphs — a bias towards lexically easy
# questions, so we report it next to every hotpotqa-large number.

# %%
hp_rows = []
for name in [n for n in datasets if n.startswith("hotpotqa")]:
    for split in splits:
        ds = loaded.get((name, split))
        if ds is None:
            continue
        for qid, m in ds.query_meta.items():
            hp_rows.append({"dataset": name, "split": split, "type": m.get("type") or "unknown",
                            "level": m.get("level") or "unknown",
                            "label source": m.get("type_level_source") or "",
                            "context": m.get("context_setting", "distractor"),
                            "hotpot split": m.get("hotpot_split", "dev")})
hp = pd.DataFrame(hp_rows)
if len(hp):
    hp_types = (hp.groupby(["dataset", "split", "type", "level"]).size()
                .rename("questions").reset_index())
    save_table(hp_types, "01_hotpotqa_types", tables_dir,
               caption="HotpotQA question type x level per split ('unknown': no label in the "
                       "source; levels of those are inferred 'hard').")
    hp_ctx = (hp.groupby(["dataset", "context", "hotpot split"]).size().rename("questions")
              .reset_index())
    save_table(hp_ctx, "01_hotpotqa_context", tables_dir,
               caption="Context setting and original HotpotQA split of the pooled questions "
                       "(fullwiki_top10 = both golds already in TF-IDF's top 10: easier).")
    display(hp_types)
    display(hp_ctx)

# %% [markdown]
# 2WikiMultihopQA (Ho et al., 2020) has four types — **comparison**, **inference**,
# **compositional** and **bridge_comparison** — but only the 500-question sample carries them;
# 226 bridge_comparison labels are inferred from having four gold paragraphs (which in the
# labelled sample happens only for that type).

# %%
tw_rows = []
for split in splits:
    ds = loaded.get(("2wikimultihopqa-mini", split))
    if ds is None:
        continue
    for qid, m in ds.query_meta.items():
        tw_rows.append({"split": split, "type": m.get("type") or "unknown",
                        "type source": m.get("type_source") or "label" if m.get("type") else "none",
                        "gold paragraphs": m.get("num_supporting") or len(ds.qrels[qid])})
tw = pd.DataFrame(tw_rows)
if len(tw):
    tw_types = tw.groupby(["split", "type", "type source", "gold paragraphs"]).size() \
        .rename("questions").reset_index()
    save_table(tw_types, "01_2wiki_types", tables_dir,
               caption="2WikiMultihopQA-mini question types (unknown for the HippoRAG-only "
                       "questions) and number of gold paragraphs.")
    display(tw_types)

# %%
if len(hp) or len(tw):
    fig, axes = plt.subplots(2, 1, figsize=(9, 6.4))
    if len(hp):
        ct = hp[hp.split == "test"].groupby(["dataset", "type"]).size().unstack(fill_value=0)
        ct.plot.barh(stacked=True, ax=axes[0])
        axes[0].set(title="HotpotQA test questions by type", xlabel="questions (count)",
                    ylabel="collection")
        plots.legend_outside(axes[0], title="type")
    if len(tw):
        ct2 = tw.groupby(["split", "type"]).size().unstack(fill_value=0)
        ct2.plot.barh(stacked=True, ax=axes[1])
        axes[1].set(title="2WikiMultihopQA-mini questions by type", xlabel="questions (count)",
                    ylabel="split")
        plots.legend_outside(axes[1], title="type")
    fig.tight_layout()
    plots.save_figure(fig, "01_multihop_types", figures_dir, profile=profile,
                      setting="offline multi-hop subsamples",
                      caption="Question types of the multi-hop subsamples ('unknown' = no label "
                              "in the source). The offline sets are 500-1,464-question samples, "
                              "not the full dev sets the papers use.")
    plt.show()

# %% [markdown]
# ## 4. A pooled multi-hop corpus
#
# Each multi-hop corpus is the pool of the questions' own context paragraphs (about ten per
# question), so every document is some question's gold or distractor paragraph. Pooling the
# other Wikipedia-paragraph sets adds distractors and makes retrieval harder, closer to an
# open corpus. Ids are namespaced (`hp_`/`2w_` + sha1 of the title), so pooling cannot
# collide; hotpotqa-large is a superset of hotpotqa-mini with identical ids and texts, which
# `qrlib.data.datasets` checks while merging.

# %%
pool_rows = []
if pooled_base:
    base = load_dataset(pooled_base, "test", data_dir=data_dir)
    pooled = load_dataset(pooled_base, "test", data_dir=data_dir, extra_corpora=pooled_extra)
    for label_, ds in (("own corpus", base), ("pooled corpus", pooled)):
        judged_all = {d for r in ds.qrels.values() for d in r}
        pool_rows.append({"corpus": f"{pooled_base} {label_}", "docs": len(ds.corpus),
                          "test queries": len(ds.queries),
                          "judged docs (all test queries)": len(judged_all),
                          "judged fraction": len(judged_all) / len(ds.corpus),
                          "judged per query": np.mean([len(r) for r in ds.qrels.values()]),
                          "docs per judged doc": len(ds.corpus) / max(len(judged_all), 1)})
    pool = pd.DataFrame(pool_rows)
    save_table(pool, "01_pooled_corpus", tables_dir,
               caption=f"{pooled_base} alone and pooled with {', '.join(pooled_extra)} as extra "
                       f"distractors (shared ids: {pooled.meta.get('extra_corpora_shared_ids')}).")
    display(pool.round(3))

# %% [markdown]
# ## 5. Spider (text-to-SQL)
#
# DeepRetrieval also trains query generation for SQL, rewarded by execution match. Spider's
# dev set has 1,034 questions over 20 SQLite databases; `wta_1.sqlite` is missing offline,
# so its questions are counted and skipped by `qrlib.data.datasets.load_spider`.

# %%
if include_spider:
    sp = load_spider(data_dir)
    print({k: v for k, v in sp.meta.items() if k != "source"})  # the data folder stays out
    per_db = (pd.DataFrame(sp.examples).groupby("db_id").size().rename("questions").to_frame())
    for db, n in sp.skipped.items():
        per_db.loc[db, "questions"] = n
    per_db["sqlite present"] = [db in sp.db_paths for db in per_db.index]
    per_db["tables"] = [len(sp.schemas[db]["tables"]) for db in per_db.index]
    per_db = per_db.sort_values("questions", ascending=False).reset_index()
    save_table(per_db, "01_spider_dbs", tables_dir,
               caption=f"Spider dev questions per database; {sum(sp.skipped.values())} questions "
                       f"on missing databases ({', '.join(sp.meta['missing_databases'])}) are "
                       "skipped.")
    fig, ax = plt.subplots(figsize=(8, 5))
    colors = ["C3" if not p else "C0" for p in per_db["sqlite present"]]
    ax.barh(per_db["db_id"], per_db["questions"], color=colors)
    ax.invert_yaxis()
    ax.set_xlabel("questions (count)")
    ax.set_ylabel("database")
    ax.set_title("Spider dev: questions per database (red: SQLite file missing)")
    fig.tight_layout()
    record("spider.questions_usable", int(per_db.loc[per_db["sqlite present"], "questions"].sum()))
    record("spider.questions_skipped", int(sum(sp.skipped.values())))
    plots.save_figure(fig, "01_spider_dbs", figures_dir, profile=profile,
                      setting="Spider dev, 20 databases",
                      caption="Spider dev questions per database; the red bar (wta_1) cannot "
                              "be executed offline.")
    plt.show()

# %% [markdown]
# ## 6. What later notebooks read
#
# The summary below is written to `run_dir/data_summary.json`.

# %%
summary = {"profile": profile, "stats": stats.to_dict("records"),
           "pooled": pool_rows,
           "spider": sp.meta if include_spider else None}
save_json(summary, Path(run_dir) / "data_summary.json")
print("wrote", Path(run_dir) / "data_summary.json")

# %% [markdown]
# ## What we found
#
# Read from this run's tables (`01_dataset_stats`, `01_pooled_corpus`, `01_spider_dbs`), so
# the text changes with the data.

# %%
from IPython.display import Markdown

test = stats[stats.split == "test"].set_index("dataset")
lines = []
for name, r in test.iterrows():
    lines.append(f"- **{name}**: {r['docs']:,} documents, {r['queries']:,} test queries, "
                 f"{r['relevant/query']:.2f} relevant documents per query "
                 f"(up to {r['max judged']}), queries of {r['query words (mean)']:.1f} words on "
                 f"average, documents of {r['doc words (median)']:.0f} words (median).")
if pool_rows:
    own, big = pool_rows[0], pool_rows[-1]
    lines.append(f"- Pooling the other Wikipedia sets into {pooled_base} grows its corpus from "
                 f"{own['docs']:,} to {big['docs']:,} documents; judged documents then make up "
                 f"{big['judged fraction']:.1%} of it instead of {own['judged fraction']:.1%}.")
if include_spider:
    lines.append(f"- Spider dev: {int(per_db.loc[per_db['sqlite present'], 'questions'].sum()):,} "
                 f"questions can be executed; {sum(sp.skipped.values())} are on the missing "
                 f"database(s) {', '.join(sp.meta['missing_databases'])}.")
display(Markdown("\n".join(lines)))
