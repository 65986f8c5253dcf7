# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% tags=["parameters"]
profile = "dev"  # profile name (smoke | cpu | cpu-long | gpu)
run_dir = "../runs/dev"  # adapters and rewrites
figures_dir = "../figures/dev"  # figures of this run
tables_dir = "../tables/dev"  # tables of this run
cache_dir = None  # shared cache (dequantised models, embeddings); None means qrlib default
seed = 0  # seed for subsets, sampling and training
data_dir = None  # BEIR folders; None means /work/shared/data or $QRLIB_DATA
model = "smollm2"  # policy for sampling and training: smollm2 | qwen2.5-coder-0.5b | hub id
torch_threads = 0  # CPU threads for torch; 0 keeps torch's default
rollouts = "hf"  # generation engine of training rollouts and sampling/evaluation: hf (transformers generate) | vllm (in-process vLLM engine, qrlib.generation.engine)
bootstrap = 10000  # paired-bootstrap resamples for every interval
dense_model = "minilm"  # offline all-MiniLM-L6-v2; a hub id such as BAAI/bge-base-en-v1.5 on GPU
# --- 1. strategy-guided prompting, best-of-N (SAGE Sec. 3.1, Fig. 3)
bon_datasets = ["scifact", "nfcorpus"]  # test queries of these collections
bon_retrievers = ["bm25", "dense"]  # every sampled rewrite is searched with each
bon_n_queries = 4  # test queries per dataset (random subset); None means all
bon_n_distractors = 300  # corpus cut: judged docs + this many others; None means full
bon_samples_per_prompt = 4  # pool per query: 5x this (SAGE), 4x this (DMQR), generic_samples
bon_generic_samples = 16  # pool of the single generic prompt
bon_ns = [1, 2, 4, 8, 16]  # N of best-of-N, each at most the smallest pool
bon_max_new_tokens = 32  # token budget of one sampled rewrite
bon_temperature = 1.0  # sampling temperature
bon_batch_size = 64  # sequences generated together
# --- 2-3. SAGE training (Sec. 2.3-2.5, Tables 1-3)
sage_datasets = ["nfcorpus"]  # train split for RL, test split for evaluation
sage_retriever = "dense"  # SAGE targets dense retrieval
sage_runs = ["unguided", "direct", "scs", "crs"]  # reward variants (qrlib.methods.sage.pipeline.variants); unguided is DeepRetrieval-style RL; Table 3's ablation is notebook 15
copy_penalty = 0.05  # p of SAGE Eq. 3 (Sec. 4.3 uses 0.05; Table 3 shows 0.02)
reasoning = False  # the paper's prompts with <think> (sage/proactive, sage/conservative); False: their no-reasoning variants (same layout and examples, a CPU budget)
n_train_queries = 16  # training queries (random subset of the train split)
n_test_queries = 20  # test queries; None means all
n_distractors = 300  # corpus cut for training and test; None means full
train_steps = 2  # GRPO steps per run
prompts_per_step = 1  # distinct queries per step
num_generations = 4  # rollouts per query (the GRPO group)
max_completion_length = 32  # token budget of one rollout
temperature = 1.0  # sampling temperature of rollouts
learning_rate = 5e-5  # LoRA learning rate
beta = 0.001  # KL coefficient
dynamic_sampling = 0  # DAPO dynamic sampling rounds for groups whose rewards are all equal (0: off)
stop = []  # stop strings of vLLM rollouts (kept in the completion), e.g. ["}"] for the JSON answer
eval_autocast = False  # bf16 autocast of the greedy test rewriting (faster, but 16-19 % of a trained adapter's greedy outputs then differ from fp32: benchmarks/bench_eval_precision.py); None: where the CPU has native bf16 matmul

# %% [markdown]
# # 08 · SAGE: strategy-guided rewriting
#
# *Paper:* [SAGE: Strategy-Adaptive Generation Engine for Query Rewriting](https://arxiv.org/abs/2506.19783) (Wang, Gong, Zhang and Wang; arXiv:2506.19783, 2025).
#
# SAGE changes *what the policy is asked to do* rather than the retriever or the fusion
# (RL-QR, the other method of this kind, has its own notebook, 14):
#
# * **SAGE** gives the model a menu of five interpretable rewriting strategies (semantic
#   expansion, entity disambiguation, sub-question decomposition, concise rewriting,
#   neutralised claim reformulation). First as prompts: how good is the best of N sampled
#   rewrites (an oracle upper bound, SAGE Fig. 3)? Then as an RL action: the policy emits
#   a strategy id and a rewrite, and GRPO is fed nDCG@10 reshaped so that good *strategies*
#   get credit (SCS, Eq. 1) or so that rollouts compete with the group median (CRS, Eq. 2),
#   with a penalty for copying the query (Eq. 3).
#
# Everything is compared with the raw query on the same test queries, with 95%
# paired-bootstrap intervals. Settings are far below the papers' (Qwen3-4B, BGE-base,
# 4,096-token budget); the profile is stamped on every figure and caption.
#
# After this notebook you can say:
#
# 1. how far an oracle choosing among N sampled rewrites gets above the raw query, per
#    prompt family (section 1);
# 2. whether the trained rewards order as the paper says (SCS, CRS > Direct > unguided)
#    on this run's test queries (section 2);
# 3. why CRS, read as the paper writes it, cannot train differently from Direct under GRPO.
#
# The pipeline lives in `qrlib.methods.sage`: `pools` (section 1), `pipeline` and `study`
# (section 2).

# %%
from qrlib import session

S = session.start("08_sage", run_dir=run_dir, figures_dir=figures_dir, tables_dir=tables_dir,
                  cache_dir=cache_dir, seed=seed, torch_threads=torch_threads, rollouts=rollouts)
run_dir, figures_dir, tables_dir, out_dir, record = (S.run_dir, S.figures_dir, S.tables_dir,
                                                     S.out_dir, S.record)

import matplotlib.pyplot as plt
import torch
from IPython.display import Markdown

from qrlib import plots
from qrlib.core.io import save_json, save_table
from qrlib.eval import curves
from qrlib.eval.compare import comparison_table, save_comparisons
from qrlib.generation.prompts import REGISTRY, as_template
from qrlib.methods.sage import pipeline as sage, pools, study
from qrlib.rl.health import health_report
from qrlib.eval.findings import what_we_found

print(f"profile={profile} policy={model} torch threads={torch.get_num_threads()}")
RETR = study.Retrievers(cache_dir=cache_dir, dense_model=dense_model)  # one index per cut and kind

# %% [markdown]
# ## 1. Strategy-guided prompting and best-of-N scaling (SAGE Sec. 3.1, Fig. 3)
#
# Three prompt *families* rewrite the same test queries:
#
# * **SAGE strategies**: one prompt per strategy of SAGE Table 4 (`sage/s1` ... `sage/s5`);
# * **DMQR-RAG**: the four rewriting strategies SAGE compares against (general, keyword,
#   pseudo-answer, core content; `dmqr/*`);
# * **generic**: a single "write a better search query" prompt (`generic/rewrite`).
#
# For every query each family gets a *pool* of sampled rewrites (the same number from each
# of its prompts). Best-of-N is what an oracle that sees the qrels gets by keeping the best
# of N rewrites: an upper bound on what a policy could learn to pick. We report its exact
# expectation over all draws of N rewrites from the pool (without replacement),
#
# $$ \mathbb{E}\big[\max_{i\le N} s_i\big] = \sum_{j=N}^{M} s_{(j)}\,
#    \binom{j-1}{N-1}\Big/\binom{M}{N}, $$
#
# with $s_{(1)}\le\dots\le s_{(M)}$ the pool's nDCG@10 sorted (`qrlib.methods.sage.bestofn`).
# The pools must hold at least the largest N; the cell prints their sizes and one
# strategy prompt as the model reads it.

# %%
FAMILIES = pools.prompt_families(REGISTRY)
POOL = pools.pool_sizes(FAMILIES, bon_samples_per_prompt, bon_generic_samples, max(bon_ns))
print(pools.describe_pools(FAMILIES, POOL))
print("\n--- sage/s3 as the model sees it:\n" + as_template("sage/s3").user.format(query="<query>"))

# %% [markdown]
# The untrained policy samples every pool at temperature `bon_temperature` (prompt $j$ of a
# family seeded `seed + 1000 j`); on a CPU this is the slow step of section 1 (40-70 min
# in the `cpu` profile). Each prompt's pool is kept in the run folder as it is done, so a
# run stopped and resumed later (`python -m qrlib park`) reads it back instead of sampling
# it again.

# %%
BON_DATA = pools.load_cuts(bon_datasets, n_queries=bon_n_queries,
                           n_distractors=bon_n_distractors, seed=seed, data_dir=data_dir)
SAMPLES = pools.sample_pools(model, BON_DATA, FAMILIES, POOL, max_new_tokens=bon_max_new_tokens,
                             temperature=bon_temperature, batch_size=bon_batch_size, seed=seed,
                             cache=out_dir / "bon_pools")

# %% [markdown]
# Every sampled rewrite is searched with every retriever and scored against the qrels
# (nDCG@10); a completion that yields no query is searched as the raw query (so a format
# failure can never score below the raw query in the *pool*, but it is counted in the
# format column). Best-of-1 is the mean sampled rewrite; the curve can only rise with N.

# %%
SCORED = pools.score_pools(SAMPLES, BON_DATA, RETR, bon_retrievers)
BON = pools.best_of_n_table(SCORED, bon_ns)
save_table(BON.round(4), "08_best_of_n", tables_dir, caption=pools.CAPTIONS["08_best_of_n"])
BON[BON.N.isin([1, max(bon_ns)])].round(3)

# %% [markdown]
# The same numbers as SAGE Fig. 3 draws them, one panel per dataset and retriever; the
# dashed line is the raw query.

# %%
fig = pools.best_of_n_figure(BON, bon_datasets, bon_retrievers, list(FAMILIES))
_ = plots.save_figure(fig, "08_best_of_n", figures_dir, profile=profile,
                      setting=pools.bon_setting(model, bon_n_queries, bon_n_distractors),
                      caption=pools.CAPTIONS["08_best_of_n_figure"])

# %% [markdown]
# ### Do the families separate? Paired intervals over the test queries
#
# Each family's best-of-N against the raw query, and the families against each other, at
# N = 1 (one sampled rewrite) and the largest N: the per-query expected best-of-N values
# paired by query, 95 % paired bootstrap (`qrlib.eval.compare`). The oracle picks with the
# qrels, so these rows bound what choosing among the family's rewrites could give; they
# are not a deployable rewriter.

# %%
BON_CMP = pools.family_comparisons(SCORED, list(FAMILIES), (1, max(bon_ns)),
                                   resamples=bootstrap, seed=seed)
save_comparisons(BON_CMP, "08_best_of_n_comparisons", tables_dir,
                 caption=pools.CAPTIONS["08_best_of_n_comparisons"])
BON_CMP[["dataset", "retriever", "method", "baseline", "diff", "lo", "hi", "wins", "losses",
         "test queries"]].round(3)

# %% [markdown]
# ### Which strategy gives the best rewrite, and how often does any beat the raw query?
#
# For every query and family, the strategy whose sample scored highest gets the credit
# (ties split). *Beats raw* is the share of queries where the best rewrite in the pool
# scores strictly above the raw query: headroom a learned strategy choice could exploit.

# %%
STRAT = pools.strategy_best_share(SCORED)
save_table(STRAT.round(3), "08_strategy_best_share", tables_dir,
           caption=pools.CAPTIONS["08_strategy_best_share"])
BEATS = pools.beats_raw(STRAT)
BEATS.round(2)

# %% [markdown]
# A few sampled rewrites per family (first test query of each dataset):

# %%
pools.examples(SAMPLES, BON_DATA)

# %% [markdown]
# ## 2. SAGE training: strategy id + rewrite, GRPO with Direct, SCS and CRS rewards
#
# The policy now answers `<answer>{"query": "...", "strategy": k}</answer>`, the layout of
# SAGE App. A.1 (Fig. 5), with one worked example per strategy in the prompt. With
# `reasoning` it first thinks inside `<think>` as the paper's prompt asks
# (`sage/proactive`); without, the answer is prefilled up to `{"query": "` and there is
# no reasoning block, so the small CPU model spends its budget on the query
# (`sage/guided`). With $r_i$ the nDCG@10
# of rollout $i$ in a group of $G$ rollouts of the same query:
#
# * **Direct**: $r_i$;
# * **SCS** (Eq. 1): $r_i / \mathrm{rank}(s_i)$, where strategies are ranked by their mean
#   reward within the group;
# * **CRS** (Eq. 2): $r_i - \mathrm{median}(r_1..r_G)$;
# * each minus $p$ when the rewrite equals the query (Eq. 3, $p$ = `copy_penalty`).
#
# The **unguided** baseline is DeepRetrieval-style RL on the same data, steps and model:
# the generic rewrite prompt (no strategies) and plain nDCG@10. In every run a rollout
# whose answer breaks its format earns 0. The formats differ in one rule: DeepRetrieval's
# (unguided) allows nothing after `</answer>`, SAGE's JSON answer tolerates trailing text;
# the format-valid column of the results shows what that costs a small model.
#
# First the variants and the data: seeded train and test cuts of each dataset, their
# documents joined into one corpus that training rewards and the test both search.

# %%
VARIANTS = sage.variants(copy_penalty, reasoning=reasoning)
RUNS = sage.pick(sage_runs, VARIANTS)  # a one-line error names an unknown key
SAGE_DATA = study.load_data(sage_datasets, n_train_queries=n_train_queries,
                            n_test_queries=n_test_queries, n_distractors=n_distractors,
                            seed=seed, data_dir=data_dir)

# %% [markdown]
# One GRPO run per variant and dataset, with a LoRA adapter and the same settings for all;
# only the prompt and the reward differ. Runs are named by variant
# (`sage-<dataset>-<retriever>-<key>`), so notebook 15 finds the SCS run here.

# %%
SAGE_SUMMARIES = study.train_runs(
    RUNS, SAGE_DATA, RETR, retriever=sage_retriever, run_dir=run_dir, model=model,
    train_steps=train_steps, n_train_queries=n_train_queries, n_distractors=n_distractors,
    prompts_per_step=prompts_per_step, num_generations=num_generations,
    max_completion_length=max_completion_length, temperature=temperature,
    learning_rate=learning_rate, beta=beta, seed=seed, dynamic_sampling=dynamic_sampling,
    stop=stop)
_ = save_json(study.summaries_json(SAGE_SUMMARIES), out_dir / "sage_summaries.json")

# %% [markdown]
# ### Training health
#
# Per step and run (`qrlib.rl.health`): the reward, the shares of rollouts that are
# well-formed and that hit the token budget, the share that copy the input query (*copy*)
# or repeat one of the prompt's own examples or placeholders (*echo*), and the share of
# groups whose rewards are all equal (no GRPO signal). A run has **collapsed** when its
# copy or echo share is above 0.9 over its last quarter of steps.

# %%
HEALTH, health_lines = health_report(SAGE_SUMMARIES, "08_health",
                                     tables_dir=tables_dir, figures_dir=figures_dir,
                                     profile=profile, setting=model)
print("\n".join(health_lines))

# %% [markdown]
# ### Training curves (SAGE App. A.4): reward and response length per step
#
# The paper sees the shaped reward rise and the responses settle in length; a short CPU
# run shows at most the first steps of that.

# %%
CURVES = study.training_curves(SAGE_SUMMARIES, {k: v.label for k, v in VARIANTS.items()},
                               with_dataset=len(sage_datasets) > 1)
fig = curves.reward_and_length(CURVES, reward="mean shaped reward")
setting_sage = study.training_setting(model, sage_datasets, sage_retriever, CURVES)
_ = plots.save_figure(fig, "08_sage_training_curves", figures_dir, profile=profile,
                      setting=setting_sage, caption=study.caption("08_sage_training_curves"))

# %% [markdown]
# ### Test evaluation: raw query, untrained prompts, trained rewriters
#
# Greedy rewrites of the test queries; the search text is the rewrite (the raw query when
# the completion yields none). Each trained row decodes with its adapter's decoding
# contract (prompt, prefill, stop strings, budget, parser), each untrained prompt with that
# of the first run trained on it. *Modified* is the share of rewrites that differ from the
# query (SAGE Table 3's modification rate); *Δ vs raw* is the mean per-query difference
# with its 95 % paired-bootstrap interval.

# %%
EV = study.evaluate_runs(model, {v.label: v for v in RUNS}, SAGE_SUMMARIES, SAGE_DATA, RETR,
                         retriever=sage_retriever, autocast=eval_autocast, resamples=bootstrap,
                         seed=seed)
SAGE_RESULTS, COMPARISONS = EV.results, EV.comparisons  # COMPARISONS: the workbook's one schema
save_table(SAGE_RESULTS.round(4), "08_sage_results", tables_dir,
           caption=study.caption("08_sage_results", retriever=sage_retriever))
SAGE_RESULTS.round(3)

# %% [markdown]
# Query by query: each trained rewriter (y) against the raw query (x), nDCG@10 of every
# test query. Points on the diagonal are queries the rewrite left as good as it was (often
# a copy); above it the rewrite helped.

# %%
pairs_08, intervals_08 = study.per_query_pairs(COMPARISONS, EV.scores)
fig = plots.per_query_scatter(pairs_08, metric="nDCG@10", baseline="raw query",
                              intervals=intervals_08)
_ = plots.save_figure(fig, "08_per_query", figures_dir, profile=profile, setting=setting_sage,
                      caption=study.caption("08_per_query"))
plt.show()

# %% [markdown]
# ### The rewards against each other (paper: SCS, CRS > Direct > unguided)
#
# Each pair on the same test queries, 95 % paired bootstrap; the rows join this notebook's
# comparison table (`08_comparisons`, the `qrlib.eval.compare` schema). A pair is shown
# only when both of its runs were trained (`sage_runs`).

# %%
COMPARISONS += study.pairwise(EV, VARIANTS, [v.key for v in RUNS], sage_datasets,
                              retriever=sage_retriever, resamples=bootstrap, seed=seed)
print(study.describe_pairs(COMPARISONS))

# %% [markdown]
# ### Why CRS trains exactly as Direct here
#
# CRS (Eq. 2) shapes $\tilde r_i = r_i - b$ with $b$ the median of the group's rewards. GRPO
# then centres on the group mean and divides by the group's standard deviation
# (DeepSeekMath Eq. 3, TRL's `GRPOTrainer`):
#
# $$ A_i = \frac{\tilde r_i - \overline{\tilde r}}{\operatorname{std}(\tilde r) + \epsilon}
#        = \frac{(r_i - b) - (\bar r - b)}{\operatorname{std}(r) + \epsilon}
#        = \frac{r_i - \bar r}{\operatorname{std}(r) + \epsilon}, $$
#
# the Direct advantage, for **any** $b$ that is the same for every rollout of a group. The
# copy penalty (Eq. 3) is applied after the shaping in both, so it does not break the
# identity. CRS can only differ under a reading where $b$ does not cancel
# (`qrlib.methods.sage.crs`): advantages taken as the shaped reward itself, without the
# group-mean centring (REINFORCE with $b$ as its baseline, how Eq. 2 reads on its own), or a
# baseline per strategy (the median of the group's rollouts that used the same strategy).
# Below, each reading on the real groups of section 1 (the sampled rewrites of each test
# query with the five SAGE strategy prompts, their nDCG@10; the strategy is the prompt): how far its update weights are from
# Direct's. We expect a gap of 0 (up to float error) for the `group` reading.

# %%
CRS_TABLE = pools.crs_readings(SCORED)
save_table(CRS_TABLE.round(6), "08_crs_readings", tables_dir,
           caption=pools.CAPTIONS["08_crs_readings"])
CRS_TABLE.round(4)

# %% [markdown]
# ### Chosen strategies before and after training
#
# Share of test rewrites per strategy id (`none` = no valid id in the answer). A policy that
# learned a strategy choice spreads its ids by query; one that collapsed uses a single id.

# %%
STRAT_CHOICE = study.strategy_choice(EV.rewrites, study.sage_labels(RUNS))
save_table(STRAT_CHOICE.round(3), "08_sage_strategy_choice", tables_dir,
           caption=study.caption("08_sage_strategy_choice"))
STRAT_CHOICE.round(2)

# %% [markdown]
# Every comparison of this notebook in the workbook's one schema (`08_comparisons`):

# %%
CMP = comparison_table(COMPARISONS)
save_comparisons(CMP, "08_comparisons", tables_dir, caption=study.caption("08_comparisons"))
CMP[["paper", "dataset", "retriever", "method", "baseline", "diff", "lo", "hi",
     "RL steps"]].round(3)

# %% [markdown]
# ## What we found
#
# Built from `08_comparisons`, `08_best_of_n`, `08_sage_strategy_choice`, `08_sage_results`
# and `08_health` of this run by `qrlib.eval.findings`:

# %%
extra = [pools.headroom_sentence(BON), *study.trained_sentences(STRAT_CHOICE, SAGE_RESULTS, CMP)]
display(Markdown(what_we_found(CMP, notebook="08_sage", tables_dir=tables_dir, health=HEALTH,
                               extra=extra)))

# %% [markdown]
# The numbers the tests read back (recorded quietly; nothing to read here).

# %%
for key, value in {**pools.bon_records(BON, BON_CMP, BEATS), **pools.crs_records(CRS_TABLE),
                   **study.result_records(SAGE_RESULTS, "sage.", delta=True)}.items():
    record(key, value)
