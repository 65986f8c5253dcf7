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

# %% [markdown]
# **What you will see.** The size and judgment depth of each collection (section 2), its
# query and document lengths, the question types of the multi-hop sets (section 3), what
# pooling adds to a multi-hop corpus (section 4) and which Spider databases can run offline
# (section 5). Every table and figure is computed by `qrlib.data.describe`; this page calls
# it and reads the results.

# %%
from pathlib import Path

from qrlib import session

S = session.start("01_data_analysis", run_dir=run_dir, figures_dir=figures_dir,
                  tables_dir=tables_dir, cache_dir=cache_dir, seed=seed)
run_dir, figures_dir, tables_dir, record = S.run_dir, S.figures_dir, S.tables_dir, S.record

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown

from qrlib import plots
from qrlib.core.io import save_json, save_table
from qrlib.data import describe
from qrlib.data.datasets import load_spider

pd.set_option("display.width", 160)

# %% [markdown]
# ## 1. Loading every collection
#
# `qrlib.data.datasets.load_dataset(name, split)` looks for the folder in `data_dir`, `$QRLIB_DATA`,
# `./data`, `../shared/data`, and finally `ir_datasets` (online only). Each split yields a
# `Dataset` with `corpus`, `queries`, `qrels`, per-query metadata and collection facts. A
# split a collection lacks is skipped rather than raised.

# %%
loaded = describe.load_splits(datasets, splits, data_dir)
for (name, split), ds in loaded.items():
    print(f"{name:22s} {split:5s} {ds!r}")

# %% [markdown]
# ## 2. Size and judgment depth
#
# *Judged per query* counts every qrels line (any grade); *relevant per query* counts grades
# above zero. Query length is in whitespace words of the raw query; document length in words
# of `title + text` (the string both BM25 and the encoder see). For a query $q$ with qrels
# $J_q$ (document $\to$ grade), judged per query is the mean of $|J_q|$ and relevant per
# query the mean of $|\{d : J_q(d) > 0\}|$. Document lengths come from up to
# `max_docs_for_lengths` documents sampled once per corpus.

# %%
stats, qlens, dlens = describe.dataset_stats(loaded, splits, max_docs_for_lengths, seed)
save_table(stats, "01_dataset_stats", tables_dir,
           caption=f"Collections used in the workbook (profile {profile}). Doc lengths from up "
                   f"to {max_docs_for_lengths} sampled docs per corpus.")
stats.round(2)

# %% [markdown]
# Read the `relevant/query` and `grades` columns: SciFact has about one relevant abstract per
# claim; NFCorpus has dozens of judged documents per query with two grades (2 = directly
# cited, 1 = indirectly), so its nDCG rewards getting many documents roughly right. The multi-hop sets have exactly two (HotpotQA) or two to four
# (2Wiki) gold paragraphs per question.
#
# The lengths next: expect short keyword queries for NFCorpus, sentence-long claims for
# SciFact and long multi-hop questions, and short Wikipedia paragraphs against abstracts of
# about two hundred words.

# %%
fig = describe.plot_lengths(qlens, dlens)
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
hp = describe.hotpot_questions(loaded, datasets, splits)
if len(hp):
    hp_types, hp_ctx = describe.hotpot_tables(hp)
    save_table(hp_types, "01_hotpotqa_types", tables_dir,
               caption="HotpotQA question type x level per split ('unknown': no label in the "
                       "source; levels of those are inferred 'hard').")
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
tw = describe.twowiki_questions(loaded, splits)
if len(tw):
    tw_types = describe.twowiki_types(tw)
    save_table(tw_types, "01_2wiki_types", tables_dir,
               caption="2WikiMultihopQA-mini question types (unknown for the HippoRAG-only "
                       "questions) and number of gold paragraphs.")
    display(tw_types)

# %% [markdown]
# The two type distributions side by side, as counts of questions.

# %%
if len(hp) or len(tw):
    fig = describe.plot_multihop_types(hp, tw)
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
# `qrlib.data.datasets` checks while merging. Expect the judged fraction of the corpus to
# fall as the pool grows: the same gold paragraphs among more distractors.

# %%
pool_rows = []
if pooled_base:
    pool_rows, shared_ids = describe.pooled_corpus(pooled_base, pooled_extra, data_dir)
    pool = pd.DataFrame(pool_rows)
    save_table(pool, "01_pooled_corpus", tables_dir,
               caption=f"{pooled_base} alone and pooled with {', '.join(pooled_extra)} as extra "
                       f"distractors (shared ids: {shared_ids}).")
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
    per_db = describe.spider_per_db(sp)
    save_table(per_db, "01_spider_dbs", tables_dir,
               caption=f"Spider dev questions per database; {sum(sp.skipped.values())} questions "
                       f"on missing databases ({', '.join(sp.meta['missing_databases'])}) are "
                       "skipped.")
    plots.save_figure(describe.plot_spider_dbs(per_db), "01_spider_dbs", figures_dir,
                      profile=profile, setting="Spider dev, 20 databases",
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
display(Markdown(describe.findings(stats, pool_rows, pooled_base,
                                   per_db if include_spider else None,
                                   sp if include_spider else None)))

# %% [markdown]
# **Questions.** Which collection would you expect a reward on the top-10 ranks to find
# easiest to improve, and why? What does the judged fraction of the pooled corpus say about
# how often a random distractor can be mistaken for a gold paragraph?
#
# The last cell records the key numbers the smoke tests read (`qrlib.eval.record`); it
# prints nothing and can be skipped.

# %%
for key, value in describe.key_numbers(stats, per_db if include_spider else None,
                                       sp.skipped if include_spider else None).items():
    record(key, value)
