# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% tags=["parameters"]
profile = "dev"  # profile name (smoke | cpu | cpu-long | gpu)
run_dir = "../runs/dev"  # synthesised sets, adapters and logs of this notebook go here
figures_dir = "../figures/dev"  # figures of this run
tables_dir = "../tables/dev"  # tables of this run
cache_dir = None  # shared cache (dequantised models, embeddings); None means qrlib default
seed = 0  # seed for document sampling, training and the bootstrap
data_dir = None  # BEIR folders; None means ../shared/data or $QRLIB_DATA
model = "smollm2"  # the rewriter policy (RL-QR: Qwen3-4B/8B/14B in no-think mode)
datasets = ["scifact"]  # indexes: synthesise for each, train one rewriter per retriever, test on its real test queries
retrievers = ["bm25", "dense"]  # Lexical and Semantic in RL-QR's terms
n_test_queries = 20  # real test queries per index; None means the whole test split
n_distractors = 300  # corpus cut (synthesis, training and test); None means the full corpus
synthesis_model = "qwen2.5-coder-0.5b"  # the offline model that writes the synthetic queries
n_synthesis_docs = 8  # documents sampled from the index (those no test query judges)
synthesis_doc_words = 160  # a document is cut to this many words in the prompt
synthesis_max_new_tokens = 96  # budget of one synthesis
prefill = "<answer>"  # start of the rewriter's answer ("" leaves the tags to the model)
reward_k = 3  # nDCG@k of the reward (RL-QR evaluates nDCG@3)
train_sets = ["all"]  # training questions per rewriter: all (RL-QR) | hard (only those whose source the raw question does not rank first for that retriever; a lever against copying) | room (only those whose source the raw question ranks 2-50)
lever_datasets = None  # datasets on which the sets other than all (the levers) train; None means every dataset
train_steps = 2  # GRPO optimizer steps per rewriter
prompts_per_step = 1  # synthetic queries per step
num_generations = 4  # rollouts per query (the GRPO group)
max_completion_length = 32  # token budget of one rollout
temperature = 1.0  # rollout temperature (RL-QR: TRL's defaults, i.e. 1.0)
top_p = 1.0  # rollout nucleus sampling (TRL default)
algorithm = "grpo"  # grpo | dapo (qrlib.rl.train presets)
beta = 0.0  # KL coefficient (TRL's GRPOConfig default, which RL-QR says it kept)
learning_rate = 5e-5  # LoRA learning rate
lora_r = 16  # LoRA rank
dynamic_sampling = 0  # DAPO dynamic sampling rounds for groups whose rewards are all equal (0: off)
stop = []  # stop strings of rollouts and of test decoding (kept in the completion), e.g. ["</answer>"]
eval_autocast = False  # bf16 autocast of greedy test rewriting (False keeps the fp32 outputs)
bootstrap = 2000  # paired-bootstrap resamples
n_examples = 5  # example rewrites shown
torch_threads = 0  # CPU threads for torch; 0 keeps torch's default
rollouts = "hf"  # generation engine: hf | vllm (qrlib.generation.engine)
dense_model = "minilm"  # encoder of the dense retriever: offline all-MiniLM-L6-v2; a hub id (BAAI/bge-base-en-v1.5) on GPU

# %% [markdown]
# # 14 · RL-QR: a rewriter per index, trained without a single human query
#
# *Paper:* [Annotation-Free Reinforcement Learning Query Rewriting via Verifiable Search Reward](https://arxiv.org/abs/2507.23242) (Cha, Kim, Hahn, Kim, Han and Jeon; arXiv:2507.23242, 2025).
#
# RL-QR asks what to do when an index has **no labelled queries at all**. Its answer has two
# parts:
#
# 1. **Index-aligned query synthesis** (Alg. 1, Table 1): an offline model reads one
#    document of the index and writes a situation in which someone needs it, the question
#    that person would ask, and the answer. The source document is the question's only
#    relevant document.
# 2. **Annotation-free RL** (Sec. 3.2): one rewriter per retriever is trained with GRPO on
#    those synthetic questions alone, with the reward
#
# $$ r_i = \lambda_1\,\mathrm{nDCG@3}(q'_i) + \lambda_2\,\tilde p_i, $$
#
# where $\tilde p_i \le 0$ counts the characters the rollout writes outside `<answer>`
# (all of them when the tags are missing), normalised within the group so that the
# non-zero penalties span $[\theta, 1]$ (Eq. 5-6; `qrlib.methods.rlqr.rewards`,
# $\lambda_1 = 1$, $\lambda_2 = 0.5$, $\theta = 0.1$: our choice, the paper gives none).
#
# The rewriter is then tested on the **real** test queries of the same index, in RL-QR
# Table 2's layout: raw query, the untrained rewriter, the RL-QR rewriter, per retriever,
# nDCG@3, with query length (Table 3). Rollouts are parsed the way the test rewrites are
# (strict format first, then lenient recovery), so format errors cost through $\tilde p_i$
# and not by searching nothing; notebook 08 trained with a strict parser and saw 1.7 %
# well-formed rollouts.
#
# After this notebook you can say how usable a small model's synthetic questions are, how
# often a retriever already finds their source unaided (then copying is the best rewrite),
# and whether a rewriter trained on them moves nDCG@3 on real queries. The grid's plumbing
# is in `qrlib.methods.rlqr.study`, the method's steps in `qrlib.methods.rlqr.pipeline`.

# %%
from qrlib import session

S = session.start("14_rlqr", run_dir=run_dir, figures_dir=figures_dir, tables_dir=tables_dir,
                  cache_dir=cache_dir, seed=seed, torch_threads=torch_threads, rollouts=rollouts,
                  dense_model=dense_model)
run_dir, figures_dir, tables_dir, out_dir, record = (S.run_dir, S.figures_dir, S.tables_dir,
                                                     S.out_dir, S.record)

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown

from qrlib import plots
from qrlib.core.io import save_json, save_table
from qrlib.eval.compare import save_comparisons
from qrlib.eval import published
from qrlib.generation import prompts
from qrlib.generation.contract import DecodingContract
from qrlib.methods.rlqr import pipeline as rlqr, study
from qrlib.rl.health import health_report
from qrlib.eval.findings import what_we_found

# %% [markdown]
# ## 1. Indexes and their real test queries
#
# Each index is a BEIR test collection; its real test queries are used **only** for the
# final test. Synthesis draws from the documents that no test query judges.

# %%
DATA, RETRIEVERS = study.load_indexes(datasets, retrievers, n_test_queries=n_test_queries,
                                      n_distractors=n_distractors, seed=seed,
                                      data_dir=data_dir, cache_dir=cache_dir)

# %% [markdown]
# ## 2. Index-aligned query synthesis (Alg. 1)
#
# The synthesis prompt (`rlqr/synthesis`, in our words); the answer is prefilled with
# `{"scenario": "` so the JSON layout is given. A question is kept when it parses, is not
# empty (the model's "not enough information"), has 4-64 words and is not copied verbatim
# from the document (`qrlib.methods.rlqr.synthesis.usable`). Sets are cached in the run
# folder and reused when the settings match. The summary says, per index, how many
# questions are usable and how often each retriever ranks the source first (*source@1*)
# when the question is searched as it is: the higher it is, the less a rewrite can add.

# %%
print(prompts.get("rlqr/synthesis").user)
ATTEMPTS, SYNTH = study.synthesize_all(DATA, RETRIEVERS, retrievers, out_dir / "synthesis",
                                       model=synthesis_model, n_docs=n_synthesis_docs,
                                       doc_words=synthesis_doc_words,
                                       max_new_tokens=synthesis_max_new_tokens, seed=seed)
save_table(SYNTH.round(4), "14_synthesis", tables_dir,
           caption=study.caption("14_synthesis", model=synthesis_model, profile=profile))
SYNTH

# %% [markdown]
# A few synthesised items (the reason says why a question was dropped):

# %%
pd.set_option("display.max_colwidth", 100)
study.synthesis_examples(ATTEMPTS, n_examples)

# %% [markdown]
# ## 3. One rewriter per retriever, synthetic queries only (Eq. 5-7)
#
# GRPO with a LoRA adapter (TRL's `GRPOTrainer`; RL-QR trains Qwen3 with TRL's default
# settings for one epoch). The objective is Eq. 7, GRPO's clipped ratio
# $\min(\rho_{i,t}\hat A_i, \operatorname{clip}(\rho_{i,t}, 1\pm\epsilon)\hat A_i)$ averaged
# over the tokens of each of the $G$ rollouts, with $\hat A_i$ the reward of Eq. 6 centred
# and scaled within its group. The rewrite prompt asks for the query inside `<answer>` tags
# and nothing else; with `prefill` the answer starts with `<answer>`. Each finished
# training gives its memory back before the next (`qrlib.rl.release`, called by `train`).
#
# `train_sets` picks the questions: *all* of them (the paper), only the *hard* ones whose
# source the raw question does not rank first for that retriever, or those whose source it
# ranks 2-50 (*room*); the sets other than *all* train only on `lever_datasets` when it is
# given. A set with no question trains no rewriter, and the cell says so.

# %%
SUMMARIES, TRAIN_SIZES = study.train_all(
    ATTEMPTS, RETRIEVERS, retrievers, train_sets, run_dir=run_dir, train_steps=train_steps,
    lever_datasets=lever_datasets, stop=stop, lora_r=lora_r, k=reward_k, prefill=prefill,
    model=model, algorithm=algorithm, beta=beta, prompts_per_step=prompts_per_step,
    num_generations=num_generations,
    max_completion_length=max_completion_length, temperature=temperature, top_p=top_p,
    learning_rate=learning_rate, dynamic_sampling=dynamic_sampling, seed=seed)
save_json({"/".join(key): s for key, s in SUMMARIES.items()}, out_dir / "summaries.json")
LOGS = study.read_logs(SUMMARIES)

# %% [markdown]
# ### Training health
#
# Per step and run (`qrlib.rl.health`): the reward, the shares of rollouts that are
# well-formed and that hit the token budget, the share that copy the input query (*copy*)
# or repeat one of the prompt's own examples or placeholders (*echo*), and the share of
# groups whose rewards are all equal (no GRPO signal). A run has **collapsed** when its
# copy or echo share is above 0.9 over its last quarter of steps.

# %%
HEALTH, health_lines = health_report(SUMMARIES, "14_health",
                                     tables_dir=tables_dir, figures_dir=figures_dir,
                                     profile=profile, setting=model)
print("\n".join(health_lines))

# %% [markdown]
# ### Training curves
#
# Mean reward (nDCG@3 plus the penalty term), its retrieval part alone, and the share of
# well-formed rollouts per step. A reward that rises while the nDCG part stays flat was
# earned by the format penalty alone.

# %%
fig = study.curves_figure(LOGS, reward_k)
_ = plots.save_figure(fig, "14_rlqr_curves", figures_dir, profile=profile,
                      caption=study.caption("14_rlqr_curves"),
                      setting=study.curves_setting(model, LOGS))

# %% [markdown]
# ## 4. The real test queries: raw vs untrained vs RL-QR (Table 2's layout)
#
# Greedy rewrites of every test query by the untrained model and by each trained rewriter
# (each searched with the retriever it was trained for), scored with nDCG@3 (RL-QR's
# measure) and nDCG@10, each against the raw query with a 95 % paired bootstrap over the
# test queries (the `qrlib.eval.compare` schema). A rewrite that yields no query is
# searched as the raw query.
#
# The decoding contract of training (prompt, prefill, stop strings, budget, parser) is
# written once: the untrained model decodes with it, and each trained adapter carries its
# own, checked equal to it.

# %%
CONTRACT = DecodingContract(prompt=rlqr.REWRITE_PROMPT, prefill=prefill, stop=tuple(stop),
                            max_new_tokens=max_completion_length, fmt="plain")
REWRITES = study.rewrite_test(model, DATA, SUMMARIES, contract=CONTRACT, autocast=eval_autocast)

# %% [markdown]
# Each rewrite set searched with its retriever and scored; one row per index, retriever and
# rewriter (Tables 2-3 columns), and its difference from the raw query.

# %%
RESULTS, COMPARISONS, PER_Q = study.evaluate(DATA, RETRIEVERS, retrievers, REWRITES, LOGS,
                                             model=model, train_sets=train_sets,
                                             resamples=bootstrap, seed=seed)
save_table(RESULTS.round(4), "14_rlqr_results", tables_dir,
           caption=study.caption("14_rlqr_results", profile=profile))
save_comparisons(COMPARISONS, "14_comparisons", tables_dir,
                 caption=study.caption("14_comparisons", profile=profile))
RESULTS.round(3)

# %%
COMPARISONS[["dataset", "retriever", "metric", "method", "score", "baseline score", "diff",
             "lo", "hi", "wins", "losses", "RL steps"]].round(3)

# %% [markdown]
# Query by query (nDCG@3, RL-QR's measure): each trained rewriter (y) against the raw
# query (x) on the real test queries. A rewriter that copies the query puts every point
# on the diagonal.

# %%
pairs_14, intervals_14 = study.per_query_pairs(COMPARISONS, PER_Q)
fig = plots.per_query_scatter(pairs_14, metric="nDCG@3", baseline="raw query",
                              intervals=intervals_14)
_ = plots.save_figure(fig, "14_per_query", figures_dir, profile=profile, setting=model,
                      caption=study.caption("14_per_query"))
plt.show()

# %% [markdown]
# Example rewrites of real test queries, before and after training:

# %%
study.rewrite_examples(DATA, REWRITES, retrievers, train_sets, n_examples)

# %% [markdown]
# The paper's Table 2 (nDCG@3 in %, its own indexes, Qwen3 rewriters), from
# `qrlib/methods/rlqr/published.yaml`:

# %%
published.table("rlqr", "Table 2")

# %% [markdown]
# ## What we found
#
# Built from `14_comparisons` (nDCG@3, RL-QR's measure), `14_synthesis`, `14_rlqr_results`
# and `14_health` of this run by `qrlib.eval.findings`:

# %%
extra = study.extra_sentences(RESULTS, COMPARISONS, SYNTH)
display(Markdown(what_we_found(COMPARISONS[COMPARISONS.metric == "nDCG@3"], notebook="14_rlqr",
                               tables_dir=tables_dir, health=HEALTH, extra=extra)))

# %% [markdown]
# The numbers the tests read back (recorded quietly; nothing to read here).

# %%
for key, value in study.records(SYNTH, RESULTS, COMPARISONS).items():
    record(key, value)
