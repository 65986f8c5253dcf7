# ---
# jupyter:
#   qrlib:
#     reads: [06_acqo_stage1, 07_acqo_stage2]  # earlier notebooks whose artifacts this one reads (qrlib.freshness)
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% tags=["parameters"]
profile = "dev"  # profile name (smoke | cpu | cpu-long | gpu)
run_dir = "../runs/dev"  # reads 06's and 07's adapters from here
figures_dir = "../figures/dev"  # figures of this run
tables_dir = "../tables/dev"  # tables of this run
cache_dir = None  # shared cache (dequantised models, embeddings); None means qrlib default
seed = 0  # seed for subsets and the bootstrap
data_dir = None  # BEIR folders; None means ../shared/data or $QRLIB_DATA
model = "smollm2"  # policy (must be 06's and 07's)
trained_with = ["bm25"]  # retrievers 06 and 07 trained with (one Stage I and one Stage II adapter each)
test_datasets = ["2wikimultihopqa-mini", "hotpotqa-large"]  # test splits (out of domain when not in 06's train_datasets)
n_test_queries = 6  # test questions per dataset; None means all
n_test_distractors = 60  # corpus cut: judged paragraphs + this many others; None means full
eval_retrievers = ["bm25", "dense"]  # every decomposition is searched with each (cross-retriever, ACQO Fig. 5)
eval_k = 100  # depth of each sub-query's list and of the fused list
eval_batch_size = 16  # questions decoded together
eval_autocast = False  # bf16 autocast of the greedy decoding (False keeps the fp32 outputs)
reader_model = "smollm2"  # the local reader (ACQO Table 10 uses Qwen2.5-7B-Instruct)
reader_retriever = "bm25"  # the retriever whose fused top documents the reader sees
reader_top_k = 5  # passages given to the reader (ACQO Table 10: top 10)
reader_passage_words = 80  # words kept of each passage
reader_max_new_tokens = 16  # budget of one answer
reader_n_queries = None  # questions the reader answers per dataset (first ones of the cut); None means all
reader_autocast = False  # bf16 reader (autocast on HF, a bf16 engine on vLLM): several times faster on CPU; the same reader reads every row
bootstrap = 2000  # paired-bootstrap resamples
n_examples = 4  # example decompositions shown
torch_threads = 0  # CPU threads for torch; 0 keeps torch's default
rollouts = "hf"  # generation engine: hf | vllm (qrlib.generation.engine)
dense_model = "minilm"  # encoder of the dense retriever: offline all-MiniLM-L6-v2; a hub id (BAAI/bge-base-en-v1.5) on GPU

# %% [markdown]
# # 16 · ACQO away from home: another dataset, another retriever, and a reader
#
# *Paper:* [When Should I Search More: Adaptive Complex Query Optimization with Reinforcement Learning](https://arxiv.org/abs/2601.21208) (Wen, Deng, Wei, Chen, Qiao and Sun; arXiv:2601.21208, 2026).
#
# Notebooks 06-07 train ACQO's decomposer on one training set with one retriever and test
# it there. ACQO (Sec. 4.3-4.4) asks three more questions, which this notebook answers with
# the same adapters and no further training:
#
# 1. **Out of domain**: does a decomposer trained on 2WikiMultihopQA questions help on
#    HotpotQA (a test set whose training split it never saw)?
# 2. **Cross-retriever** (ACQO Fig. 5): sub-queries learned against BM25's rankings,
#    searched with a dense retriever instead. Each question's lists are fused by
#    Rank-Score Fusion (RSF, ACQO Eq. 1-2) either way.
# 3. **End to end** (ACQO Table 10): does better retrieval give better answers? A small
#    local reader answers each question from the top documents of each method; exact match
#    and token F1 against the gold answer and its aliases (SQuAD v1.1's measures,
#    `qrlib.eval.qa`).
#
# Every row is compared with the raw question on the same questions by a 95% paired
# bootstrap (`qrlib.eval.compare`), and carries the training scale of its adapter.
#
# **What you will learn:** whether a decomposer trained on one dataset and one retriever
# still beats the raw question elsewhere, and whether better retrieval gives a small reader
# better answers. A decomposer that learned general splitting habits should keep part of
# its gain out of domain and with the other retriever; one that learned the quirks of its
# training retriever should not. A reader can only gain where the gold paragraphs move into
# the documents it reads.

# %%
import functools
import time

from qrlib import session

S = session.start("16_acqo_transfer", run_dir=run_dir, figures_dir=figures_dir,
                  tables_dir=tables_dir, cache_dir=cache_dir, seed=seed,
                  torch_threads=torch_threads, rollouts=rollouts, dense_model=dense_model)
run_dir, figures_dir, tables_dir, out_dir, record = (S.run_dir, S.figures_dir, S.tables_dir,
                                                     S.out_dir, S.record)

from IPython.display import Markdown

from qrlib import plots
from qrlib.core.io import save_json, save_table
from qrlib.eval.compare import comparison_table, save_comparisons
from qrlib.generation import engine
from qrlib.methods.acqo import study
from qrlib.methods.acqo import transfer_study as ts
from qrlib.methods.acqo.artifacts import Stage1Record
from qrlib.methods.acqo.transfer import Stage2Record, decompose
from qrlib.eval.findings import what_we_found

S1 = Stage1Record.load(run_dir / "06_acqo_stage1")
S2 = Stage2Record.load(run_dir / "07_acqo_stage2")
IN_DOMAIN = set(S1.train_datasets)
print(f"profile={profile} model={model}; trained on {sorted(IN_DOMAIN)} with {trained_with}")

# %% [markdown]
# ## 1. Test sets and retrievers
#
# Each test set is searched against its own corpus (cut in small profiles to the judged
# paragraphs plus `n_test_distractors`), with every evaluation retriever.

# %%
TEST = study.load_test_cuts(test_datasets, data_dir=data_dir, n_queries=n_test_queries,
                            n_distractors=n_test_distractors, seed=seed)
for name, ds in TEST.items():
    print(f"{name} ({'in domain' if name in IN_DOMAIN else 'out of domain'}): "
          f"{len(ds.queries)} questions, {len(ds.corpus)} paragraphs")
RETR = study.eval_retrievers(TEST, eval_retrievers, cache_dir=cache_dir)

# %% [markdown]
# ## 2. Sub-queries of every row
#
# The raw question (one query), the rule split (the question plus up to two rule-based
# sub-queries, no model), and per training retriever the Stage I adapter (06) and the
# Stage I + II adapter (07, ACQO), greedy, each with its training's decoding contract
# (prompt, prefill, stop strings, token budget, parser: the adapter's `decoding.json`).
# Only the trained rows generate; the two rows without a model are built from the question
# text alone, so they cost nothing and set the bar a trained row has to clear.

# %%
ROWS, KIND, TRAINED_WITH, SCALE = ts.trained_rows(S1, S2, trained_with)  # label -> adapter, kind, ...
SUBS = ts.fixed_subqueries(TEST)  # (row, dataset) -> {qid: sub-queries}
GEN = {}  # (row, dataset) -> decompositions (for examples and validity)
t0 = time.perf_counter()
for label, adapter in ROWS.items():
    if adapter is not None:
        for name, dec in decompose(model, adapter, TEST, batch_size=eval_batch_size,
                                   autocast=eval_autocast).items():  # the adapter's own contract
            GEN[label, name], SUBS[label, name] = dec, study.subqueries_of(dec)
engine.close_engines()
print(f"decompositions in {time.perf_counter() - t0:.0f}s")
_ = save_json({f"{k[0]} | {k[1]}": v for k, v in GEN.items()}, out_dir / "decompositions.json")

# %% [markdown]
# ## 3. Retrieval: in and out of domain, with the training retriever and the other one
#
# nDCG@10 and R@10 of every row on every test set and evaluation retriever, each row minus
# the raw question with the 95% paired bootstrap. Each question's sub-query lists are
# fused by RSF whichever retriever searched them. The column `cross-retriever` marks a
# trained row searched with the retriever it did *not* train against (ACQO Fig. 5's
# question: are the learned sub-queries tied to their training retriever?).

# %%
row_scale = functools.partial(ts.row_scale, model, SCALE, GEN)  # (label, n, dataset) -> scale
RUNS, PER_Q, cmp_rows = ts.score_transfer(TEST, RETR, SUBS, KIND, row_scale,
                                          eval_retrievers=eval_retrievers, k=eval_k,
                                          bootstrap=bootstrap, seed=seed)
TRANSFER = ts.transfer_table(PER_Q, SUBS, IN_DOMAIN, TRAINED_WITH)
save_table(TRANSFER.round(4), "16_transfer", tables_dir,
           caption=("ACQO's decomposer on every test set (in / out of the training domain) and "
                    "evaluation retriever (the training one, or the other: cross-retriever, "
                    f"ACQO Fig. 5); nDCG@10, R@10, sub-queries per question [profile: {profile}]"))
TRANSFER.round(3)

# %% [markdown]
# Example sub-queries on the out-of-domain set (or the first test set). Questions from a
# dataset the decomposer never trained on show whether its splits follow the question's
# structure or copy patterns of its training questions:

# %%
ood = [n for n in test_datasets if n not in IN_DOMAIN] or list(test_datasets)
ts.examples(TEST[ood[0]], SUBS, list(ROWS), ood[0], n_examples)

# %% [markdown]
# ## 4. End to end: a local reader answers from each row's top documents (ACQO Table 10)
#
# The reader (`qrlib.generation.reader`) sees the first `reader_top_k` documents of each
# row's fused list (with `reader_retriever`), each cut to `reader_passage_words` words, and
# answers greedily; its first line is the prediction. EM and F1 are SQuAD v1.1's, against
# the gold answer and its aliases: EM is 1 when the normalised answer equals a gold one,
# F1 the harmonic mean of token precision and recall against the best gold. With
# `reader_autocast` the reader runs in bf16: its answers differ a little from fp32's, but
# one reader reads every row, so each Δ stays a paired comparison.

# %%
ANSWERS, QA_PQ = ts.answer_all(reader_model, TEST, RUNS, list(ROWS), retriever=reader_retriever,
                               n_queries=reader_n_queries, top_k=reader_top_k,
                               passage_words=reader_passage_words,
                               max_new_tokens=reader_max_new_tokens, autocast=reader_autocast)
save_json({f"{k[0]} | {k[1]}": v for k, v in ANSWERS.items()}, out_dir / "reader_answers.json")
READER, reader_cmp = ts.reader_table(QA_PQ, KIND, row_scale, datasets=test_datasets,
                                     retriever=reader_retriever, bootstrap=bootstrap, seed=seed)
save_table(READER.round(4), "16_reader", tables_dir,
           caption=(f"End to end (ACQO Table 10's setting): {reader_model} "
                    f"({'bf16' if reader_autocast else 'fp32'}) answers from the top "
                    f"{reader_top_k} documents of each row's fused {reader_retriever} list; EM and "
                    f"token F1 (SQuAD v1.1) with Δ vs the raw question and its 95% paired "
                    f"bootstrap [profile: {profile}]"))
READER.round(3)

# %% [markdown]
# A few answers next to the gold ones (first questions of each test set). A row can change
# the answer only through the documents it hands the reader, so rows with the same top
# documents give the same answer.

# %%
ts.answer_examples(TEST, ANSWERS, list(ROWS), n_examples)

# %% [markdown]
# Every comparison of this notebook in one table, and the retrieval ones drawn: each row
# minus the raw question, per evaluation retriever, one colour per test set. An interval
# above zero is a row that helps there.

# %%
CMP = comparison_table(cmp_rows + reader_cmp)
save_comparisons(CMP, "16_comparisons", tables_dir,
                 caption=("Every row minus the raw question: nDCG@10 on every test set and retriever, "
                          "and the reader's EM / F1; 95% paired bootstrap over the test questions "
                          f"(qrlib.eval.compare schema) [profile: {profile}]"))
fig = ts.delta_figure(CMP, retrievers=eval_retrievers, datasets=test_datasets, in_domain=IN_DOMAIN)
_ = plots.save_figure(fig, "16_transfer", figures_dir, profile=profile,
                      setting=f"{model}; {', '.join(f'{n}: {len(TEST[n].queries)} q' for n in TEST)}",
                      caption="ACQO's rows minus the raw question (nDCG@10, 95% paired bootstrap) in "
                              "and out of the training domain, with the training retriever and the "
                              "other one (ACQO Fig. 5's question)")

# %% [markdown]
# ## What we found
#
# Built from `16_comparisons` of this run by `qrlib.eval.findings`; the decomposers were
# trained in notebooks 06 and 07 (their training health is there):

# %%
ndcg_16 = CMP[CMP.metric == "nDCG@10"]
display(Markdown(what_we_found(ndcg_16, notebook="16_acqo_transfer", tables_dir=tables_dir,
                               extra=ts.extra_sentences(ndcg_16, IN_DOMAIN))))

# %% [markdown]
# The last cell stores the numbers the tests read (every row's nDCG@10, the reader's F1,
# every comparison); it prints nothing.

# %%
for key, value in ts.records(TRANSFER, READER, CMP).items():
    record(key, value)
