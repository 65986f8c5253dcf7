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
measures = ["nDCG@10", "R@10", "R@100"]  # reported metrics; the first one chooses the prompt and is compared
also_compared = []  # more measures compared with the raw query per query (cpu: RL-QR's nDCG@3, so notebook 14's rows pair)
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
# depend on a training budget. The steps are in `qrlib.methods.prompting` (`spqe` for
# the method, `study` for this notebook's grid).

# %%
from qrlib import session

S = session.start("19_prompting_baselines", run_dir=run_dir, figures_dir=figures_dir,
                  tables_dir=tables_dir, cache_dir=cache_dir, seed=seed,
                  torch_threads=torch_threads, rollouts=rollouts, dense_model=dense_model)
run_dir, figures_dir, tables_dir, out_dir, record = (S.run_dir, S.figures_dir, S.tables_dir,
                                                     S.out_dir, S.record)

import time

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown, display

from qrlib import plots
from qrlib.core.io import save_json, save_table
from qrlib.eval.compare import save_comparisons
from qrlib.generation import policy, rewrite
from qrlib.methods.prompting import spqe, study
from qrlib.rl.release import release_memory

main = measures[0]

# %% [markdown]
# ## 1. Data and retrievers
#
# Test queries are each dataset's test split (whole in the `cpu` profile); the queries the
# best prompt is chosen on come from its *train* split. Both search the same corpus. The
# raw query's per-query scores are the baseline of every row below.

# %%
DATA, RETR = study.load_cuts(datasets, retrievers, n_test_queries=n_test_queries,
                             n_dev_queries=n_dev_queries, n_distractors=n_distractors,
                             seed=seed, data_dir=data_dir, cache_dir=cache_dir)
score = study.Scorer(RETR, measures, eval_k)  # per-query measures of {qid: search text}
SCORES = score.raw(DATA, retrievers)  # (dataset, retriever, method) -> per-query scores

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
# The cell prints, per dataset, the passages' mean length and the share cut at the budget.

# %%
t0 = time.perf_counter()
pol, tok = policy.load_policy(model)
print(f"policy {model} loaded in {time.perf_counter() - t0:.0f} s")
PSEUDO = study.pseudo_docs(pol, tok, DATA, query_kinds, out_dir / "pseudo_docs",
                           max_new_tokens=pseudo_doc_tokens, batch_size=batch_size)
SCORES.update(study.spqe_scores(score, DATA, PSEUDO, retrievers))

# %% [markdown]
# One passage per dataset, as the policy wrote it:

# %%
with pd.option_context("display.max_colwidth", 200):
    display(study.passage_examples(PSEUDO))

# %% [markdown]
# ## 3. The best of the policy's prompts
#
# Each candidate prompt (`qrlib.methods.prompting.spqe.PROMPT_CANDIDATES`) decodes the
# development queries greedily with one decoding contract (its prefill
# `<answer>{"query": "`, stopped at `</answer>`, `rewrite_tokens` tokens, the lenient
# parser); its rewrite is searched in place of the query (*rewrite*) and appended to it
# (*expand*). The (prompt, mode) with the best mean development score per dataset and
# retriever decodes the test queries under the same contract:
#
# $$ (p^*, m^*) = \arg\max_{(p, m)} \frac{1}{|D_{\text{dev}}|} \sum_{q \in D_{\text{dev}}}
#    \mathrm{nDCG@10}\big(m(q, \pi_p(q))\big). $$

# %%
CONTRACTS = spqe.candidate_contracts(spqe.PROMPT_CANDIDATES, rewrite_tokens)
DEV_RW = {(name, p): rewrite.rewrite_queries(pol, tok, dev.queries, contract=c, progress=False,
                                             batch_size=batch_size)
          for name, (_, dev) in DATA.items() for p, c in CONTRACTS.items()}
selection, CHOSEN = study.select_prompts(score, DATA, DEV_RW, retrievers, main)
save_table(selection, "19_prompt_selection", tables_dir,
           caption=study.caption("19_prompt_selection", main=main, profile=profile))
selection

# %% [markdown]
# Only the chosen prompts decode the test queries, with the same contracts; their rewrites
# are saved in the run folder. The policy and the engine are then given back.

# %%
BEST = {(name, p): rewrite.rewrite_queries(pol, tok, DATA[name][0].queries,
                                           contract=CONTRACTS[p], progress=False,
                                           batch_size=batch_size)
        for name, p in study.chosen_prompts(CHOSEN)}
study.save_frames(BEST, out_dir / "rewrites")
SCORES.update(study.best_prompt_scores(score, DATA, BEST, CHOSEN))
del pol
_ = release_memory()  # the engine and the policy go before the dense retrieval below

# %% [markdown]
# ## 4. Results on the test split
#
# One row per dataset, retriever and method, with the generation cost beside the score:
# tokens per query, the share of completions that used their whole budget, and the
# seconds of generation per query on this machine.

# %%
results = study.results_table(SCORES, CHOSEN, BEST, PSEUDO, query_kinds, model=model,
                              measures=measures, rewrite_tokens=rewrite_tokens)
save_table(results, "19_prompting_results", tables_dir,
           caption=study.caption("19_prompting_results", model=model, profile=profile,
                                 pseudo_doc_tokens=pseudo_doc_tokens,
                                 rewrite_tokens=rewrite_tokens))
with pd.option_context("display.max_columns", None, "display.width", 250):
    display(results)

# %% [markdown]
# ### Against the raw query, per query
#
# The mean per-query difference in the main metric with a 95 % paired-bootstrap interval
# over queries (`qrlib.eval.compare`); a baseline "beats" the raw query only when its
# interval lies above 0. The measures in `also_compared` get the same rows in the saved
# table (a trained row reported in another metric, as RL-QR's nDCG@3, pairs with its own);
# the display, the figure and the findings read the main metric. The per-query scores and
# the settings are saved for the trained rows' comparisons with these baselines.

# %%
ALL_CMP = study.comparisons(SCORES, [main, *also_compared], model=model, resamples=bootstrap,
                           seed=seed)
save_comparisons(ALL_CMP, "19_comparisons", tables_dir,
                 caption=study.caption("19_comparisons", main=", ".join([main, *also_compared]),
                                       bootstrap=bootstrap, profile=profile))
cmp = ALL_CMP[ALL_CMP.metric == main].reset_index(drop=True)  # the figure and findings read main
with pd.option_context("display.max_columns", None, "display.width", 250):
    display(cmp[["dataset", "retriever", "method", "score", "baseline score", "diff", "lo",
                 "hi", "wins", "losses", "test queries"]])

study.save_per_query(SCORES, out_dir / "per_query.csv")
_ = save_json({"model": model, "datasets": datasets, "retrievers": retrievers,
           "query_kinds": {n: query_kinds[n] for n in datasets},
           "pseudo_doc_tokens": pseudo_doc_tokens, "rewrite_tokens": rewrite_tokens,
           "chosen": {f"{n}/{k}": list(v) for (n, k), v in CHOSEN.items()},
           "n_test_queries": n_test_queries, "n_dev_queries": n_dev_queries,
           "n_distractors": n_distractors, "seed": seed}, out_dir / "settings.json")

# %% [markdown]
# The same differences as a figure, one group of points per dataset and retriever:

# %%
fig = study.vs_raw_figure(cmp, SCORES, [(n, k) for n in datasets for k in retrievers[n]], main)
plots.save_figure(fig, "19_prompting_vs_raw", figures_dir,
                  caption=study.caption("19_prompting_vs_raw", main=main), profile=profile,
                  setting=model)
plt.close(fig)

# %% [markdown]
# ## What we found
#
# Built from `19_comparisons` and `19_prompting_results` of this run.

# %%
display(Markdown(study.findings(cmp, PSEUDO, main=main, pseudo_doc_tokens=pseudo_doc_tokens)))

# %% [markdown]
# The numbers the tests read back (recorded quietly; nothing to read here).

# %%
for key, value in study.records(cmp, PSEUDO).items():
    record(key, value)
