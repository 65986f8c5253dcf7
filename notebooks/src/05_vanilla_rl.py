# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% tags=["parameters"]
profile = "dev"  # profile name (smoke | cpu | cpu-long | gpu)
run_dir = "../runs/dev"  # where adapters, logs and rewrites go (read by notebook 10)
figures_dir = "../figures/dev"  # figures of this run
tables_dir = "../tables/dev"  # tables of this run
cache_dir = None  # shared cache (dequantised models, embeddings); None means qrlib default
seed = 0  # seed for subsets and training
data_dir = None  # BEIR folders; None means /work/shared/data or $QRLIB_DATA
model = "smollm2"  # policy: smollm2 | qwen2.5-coder-0.5b | hub id (gpu profile)
datasets = ["scifact"]  # train on the dataset's train split, evaluate on its test split
train_runs = ["bm25:expand"]  # one RL run per "retriever:mode" (mode: rewrite | expand) and dataset; "dataset/retriever:mode" trains on that dataset only; "bm25+room:rewrite" trains on the claims with room to improve only
room_ranks = [2, 50]  # a "+room" run keeps the training claims whose raw claim ranks its first relevant abstract in this range
n_train_queries = 16  # training queries (random subset of the train split)
n_test_queries = 20  # test queries (random subset of the test split); None means all
n_distractors = 500  # corpus: judged docs of the chosen queries + this many others; None means full
train_steps = 2  # GRPO steps per run
prompts_per_step = 1  # distinct queries per step
num_generations = 4  # rollouts per query (the GRPO group)
max_completion_length = 24  # token budget of one rollout
temperature = 0.8  # sampling temperature of rollouts (DeepRetrieval B.2 uses 0.6)
top_p = 1.0  # nucleus sampling of rollouts
algorithm = "grpo"  # grpo | dapo (TRL loss_type presets, see qrlib.rl.train)
beta = 0.001  # KL coefficient (DeepRetrieval B.2: 0.001)
learning_rate = 5e-5  # LoRA learning rate
lora_r = 16  # LoRA rank
reward_k = 100  # nDCG@k depth of the training reward (DeepRetrieval trains with a larger k)
format_penalty = -1.0  # reward of a completion whose format is broken
lenient = True  # recover a query from slightly malformed output for retrieval
prefill = True  # start the assistant turn with '<answer>{"query": "' (format by construction)
eval_autocast = False  # bf16 autocast of the greedy test rewriting (faster, but 16-19 % of a trained adapter's greedy outputs then differ from fp32: benchmarks/bench_eval_precision.py); None: where the CPU has native bf16 matmul
eval_k = 100  # retrieval depth for evaluation (R@100)
n_examples = 6  # before/after examples shown
torch_threads = 0  # CPU threads for torch; 0 keeps torch's default (use 1 on a crowded machine)
dtype = None  # policy weights: None picks bf16 on CUDA and on CPUs with native bf16 matmul, else fp32
stop = []  # stop strings of rollouts and of test decoding (kept in the completion), e.g. ["</answer>"]
dynamic_sampling = 0  # DAPO dynamic sampling: extra generation rounds per step for groups whose rewards are all equal (0: off)
rollouts = "hf"  # generation engine of training rollouts and sampling/evaluation: hf (transformers generate) | vllm (in-process vLLM engine, qrlib.generation.engine)
dense_model = "minilm"  # encoder of the dense retriever: offline all-MiniLM-L6-v2; a hub id (BAAI/bge-base-en-v1.5) on GPU

# %% [markdown]
# # 05 · Vanilla RL query rewriting (DeepRetrieval-style)
#
# *Paper:* [DeepRetrieval: Hacking Real Search Engines and Retrievers with Large Language Models via Reinforcement Learning](https://arxiv.org/abs/2503.00223) (Jiang, Lin, Cao, Tian, Kang, Wang, Sun and Han; arXiv:2503.00223, 2025).
#
# DeepRetrieval trains a language model to rewrite a query so that a *fixed* retriever
# finds the relevant documents, with nothing but the retrieval metric as the teacher. No
# gold rewrites exist: the model samples several rewrites, each is searched, and the ones
# that rank the judged documents higher are reinforced.
#
# This notebook runs that loop on SciFact (claims → supporting/refuting abstracts) with two
# retrievers, BM25 and a MiniLM bi-encoder, using **TRL's `GRPOTrainer`** with a LoRA
# adapter (not PPO with a critic as in the paper: GRPO's group baseline needs no value
# model, which matters on a CPU). It then compares, on SciFact *test* claims:
#
# * the raw claim,
# * the rewrite of the untrained model (same prompt, greedy),
# * the rewrite of the trained adapter (greedy),
#
# by nDCG@10 and R@100, mean rewrite length, and the **modification rate** (share of
# rewrites that differ from the input: a model that copies the claim scores exactly like
# the raw claim, the "copy optimum" SAGE warns about).
#
# Settings are much smaller than the paper's (Qwen2.5-3B, batch 64, hundreds of steps):
# see the profile name in every caption.
#
# What you will see, step by step: the two prompts (1), the data and indexes (2), the
# reward on three hand-made completions (3), the untrained model's test rewrites (4), GRPO
# training with its health and learning curves (5), the test tables with paired intervals
# and a claim-by-claim view (6), and the files notebook 10 reads (7). The pipeline code lives
# in `qrlib.methods.deepretrieval.vanilla`; most cells below are a call or two into it.

# %%
import gc
import time

from qrlib import session

S = session.start("05_vanilla_rl", run_dir=run_dir, figures_dir=figures_dir, tables_dir=tables_dir,
                  cache_dir=cache_dir, seed=seed, torch_threads=torch_threads, rollouts=rollouts,
                  dense_model=dense_model)

import matplotlib.pyplot as plt
import pandas as pd
import torch

from qrlib import plots
from qrlib.core.io import read_table, save_json, save_table
from qrlib.eval.compare import comparison_table, save_comparisons
from qrlib.eval.scale import SCALE_COLUMNS
from qrlib.generation import engine, policy, rewrite
from qrlib.generation.contract import DecodingContract
from qrlib.methods.deepretrieval import vanilla as V
from qrlib.rl.train import train

run_dir, figures_dir, tables_dir, out_dir = S.run_dir, S.figures_dir, S.tables_dir, S.out_dir
print(f"profile={profile} model={model} torch threads={torch.get_num_threads()}")

# %% [markdown]
# ## 1. Prompts: rewrite and expansion
#
# Two ways to use the model's text:
#
# * **rewrite** — the model's query *replaces* the claim (DeepRetrieval's setting);
# * **expand** — the model's text is *appended* to the claim and the concatenation is
#   searched (classic query expansion). Copying the claim then earns nothing beyond the
#   raw-claim score, so any reward gain must come from the added terms.
#
# Both prompts carry one worked example (small models follow an example much better than
# a description) and are kept short: on a CPU the prompt tokens are processed again in the
# log-prob, reference and backward passes of every rollout, so prompt length is a large
# part of a GRPO step. The answer layout is DeepRetrieval's *w/o reasoning* variant:
# `<answer>{"query": "..."}</answer>`. With `prefill`, the assistant turn already starts
# with `<answer>{"query": "`, so the model only has to write the terms and close the JSON.

# %%
PROMPTS, FMT = V.PROMPTS, V.FMT
PREFILL = V.PREFILL if prefill else ""
for mode_, p_ in PROMPTS.items():
    print(f"--- {mode_}\n{p_['user'].format(query='<claim>')}\n")

# %% [markdown]
# ## 2. Data and retrievers
#
# Training queries come from SciFact's *train* split, evaluation queries from its *test*
# split; both search the same corpus. In small profiles the corpus is cut to the judged
# documents of the chosen queries plus `n_distractors` random others. Each entry of
# `train_runs` names a retriever and a mode; one index is built per dataset and retriever
# (the dense one encodes the whole cut corpus, so expect it to take longest).

# %%
DATA = {}
for name in datasets:
    DATA[name] = tr, te, corpus = V.load_pair(name, data_dir=data_dir, n_train=n_train_queries,
                                              n_test=n_test_queries, n_distractors=n_distractors,
                                              seed=seed)
    print(f"{name}: train queries {len(tr.queries)}, test queries {len(te.queries)}, docs {len(corpus)}")
RUNS = {name: V.runs_for(train_runs, name) for name in datasets}  # (retriever, mode) per dataset
kinds = sorted({V.retriever_of(k) for n in datasets for k, _ in RUNS[n]})
get_retriever = V.Retrievers(DATA, cache_dir=cache_dir)
for name in datasets:
    for kind in kinds:
        get_retriever(name, kind)

# %% [markdown]
# ## 3. Reward
#
# DeepRetrieval's reward for classic retrieval (Table 8) is the retrieval metric plus a
# format term (Sec. 2.2.1):
#
# $$ r(q') = \begin{cases} \mathrm{nDCG@}k(q') & \text{if the answer format holds} \\
#   r_{\text{fail}} & \text{otherwise} \end{cases},\qquad
#   \mathrm{nDCG@}k = \frac{1}{\mathrm{IDCG@}k}\sum_{i=1}^{k}\frac{g_i}{\log_2(i+1)} $$
#
# with $g_i$ the graded relevance of the document at rank $i$ (linear gains, as trec_eval and
# ir-measures compute nDCG; with binary judgements the $2^{g}-1$ form gives the same numbers).
#
# The paper evaluates nDCG@10 but trains with a much larger $k$ so that a rewrite that
# moves a relevant document from rank 80 to rank 20 is still rewarded (App. B.2); here
# $k$ = `reward_k`. `qrlib.rl.env.RewardEnv` parses each completion, searches all rollouts of
# the batch in one call and scores them; GRPO then normalises rewards within each group of
# `num_generations` rollouts of the same query:
# $\hat A_i = (r_i - \mathrm{mean}(r_{1..G}))/\mathrm{std}(r_{1..G})$.
#
# Three hand-made completions for one training claim show the three cases: the claim
# copied into the answer layout (the raw claim's nDCG@k), unrelated words (near 0), and
# text without the layout (the format penalty `format_penalty`).

# %%
def make_env(name, kind, mode):
    return V.make_env(DATA[name], get_retriever(name, kind), mode=mode, k=reward_k,
                      lenient=lenient, format_penalty=format_penalty, fmt=FMT)


env_demo = make_env(datasets[0], kinds[0], "rewrite")
tr0 = DATA[datasets[0]][0]
q0 = next(iter(tr0.queries))
demo = [f'<answer>{{"query": "{tr0.queries[q0]}"}}</answer>', '<answer>{"query": "unrelated words"}</answer>',
        'no tags at all']
print(env_demo(None, demo, qid=[q0] * 3, query=[tr0.queries[q0]] * 3))
pd.DataFrame(env_demo.records)[["queries", "format_ok", "gold_ranks", "reward"]]

# %% [markdown]
# ## 4. Baseline: the untrained model
#
# Greedy rewrites of every test query with the base model (no adapter), once per mode. The
# test decodes with the **same contract as the training rollouts** (prompt, prefill, stop
# strings, token budget `max_completion_length`, parser): a trained row must not differ from
# its training, or from the untrained row, in how it is decoded
# (`qrlib.generation.contract.DecodingContract`; each trained adapter carries its own).
# Expect a high format rate (the prefill settles the layout) and a modification rate well
# below 1 where the model copies the claim.

# %%
t0 = time.perf_counter()
base_model, tok = policy.load_policy(model)
print(f"policy {model} loaded in {time.perf_counter() - t0:.1f}s")
modes = sorted({m for n in datasets for _, m in RUNS[n]})
CONTRACTS = {mode: DecodingContract(prompt=PROMPTS[mode], prefill=PREFILL, stop=tuple(stop),
                                    max_new_tokens=max_completion_length, fmt=FMT)
             for mode in modes}
REWRITES = {}  # (dataset, method) -> DataFrame of rewrites
for name in datasets:
    for mode in sorted({m for _, m in RUNS[name]}):
        REWRITES[name, f"untrained-{mode}"] = df = rewrite.rewrite_queries(
            base_model, tok, DATA[name][1].queries, contract=CONTRACTS[mode], mode=mode,
            autocast=eval_autocast)
        print(name, mode, f"format ok {df.format_ok.mean():.2f}, modified {df.modified.mean():.2f}, "
              f"{df.gen_seconds.sum():.1f}s")
del base_model

# %% [markdown]
# ## 5. GRPO training
#
# One LoRA adapter per `retriever:mode` run. The objective is the paper's KL-regularised
# reward (Eq. 2), $\max_\pi \mathbb E\,[\,r(q,q') - \beta \log \pi(q'|q)/\pi_{\text{ref}}(q'|q)\,]$,
# optimised here with GRPO's clipped, group-normalised update instead of PPO with a critic
# (App. B.1). `qrlib.rl.train.train` builds TRL's `GRPOConfig`
# (loss type, clipping $\epsilon$, KL $\beta$, group size $G$, temperature, token budget),
# logs one CSV row per step (reward mean/std, per-part rewards, share of groups with zero
# reward spread, format-valid rate, completion length, KL, step time) and resumes from the
# last checkpoint if the notebook is re-run after an interruption.
#
# A `+room` run (`bm25+room:rewrite`) is a lever row: it trains only on the claims whose raw
# claim ranks its first relevant abstract between `room_ranks` (2-50 by default). A claim
# already solved at rank 1 rewards copying it, and every rewrite of an easy claim earns the
# same reward, so its group carries no GRPO signal; the room pool keeps the claims where a
# rewrite can move the reward.

# %%
SUMMARIES = {}
for name in datasets:
    for kind, mode in RUNS[name]:
        run_name = f"{name}-{kind}-{mode}"
        cfg = V.train_config(
            run_name, dataset=name, retriever=V.retriever_of(kind), mode=mode, lora_r=lora_r,
            max_steps=train_steps, prompt=PROMPTS[mode], run_dir=str(run_dir), model=model,
            fmt=FMT, prefill=PREFILL, algorithm=algorithm, beta=beta,
            prompts_per_step=prompts_per_step, num_generations=num_generations,
            max_completion_length=max_completion_length, temperature=temperature, top_p=top_p,
            learning_rate=learning_rate, seed=seed, dtype=dtype, stop=list(stop),
            dynamic_sampling=dynamic_sampling, n_queries=n_train_queries,
            n_distractors=n_distractors,
            reward_params={"k": reward_k, "lenient": lenient, "format_penalty": format_penalty})
        pool = V.train_queries(DATA[name], get_retriever(name, kind), kind, room_ranks=room_ranks)
        t0 = time.perf_counter()
        SUMMARIES[run_name] = train(cfg, env=make_env(name, kind, mode), queries=pool)
        print(f"{run_name}: {len(pool)} of {len(DATA[name][0].queries)} training claims")
        print(run_name, SUMMARIES[run_name], f"{time.perf_counter() - t0:.0f}s")
_ = save_json(SUMMARIES, out_dir / "train_summaries.json")

# %% [markdown]
# ### Training health
#
# Per step and run (`qrlib.rl.health`): the reward, the shares of rollouts that are
# well-formed and that hit the token budget, the share that copy the input query (*copy*)
# or repeat one of the prompt's own examples or placeholders (*echo*), and the share of
# groups whose rewards are all equal (no GRPO signal). A run has **collapsed** when its
# copy or echo share is above 0.9 over its last quarter of steps.

# %%
from qrlib.rl.health import health_report

HEALTH, health_lines = health_report(SUMMARIES, "05_health",
                                     tables_dir=tables_dir, figures_dir=figures_dir,
                                     profile=profile, setting=model)
print("\n".join(health_lines))

# %% [markdown]
# ### Training curves
#
# Mean reward per step (with a rolling mean), format-valid rate and completion length. The
# setting line under the figure states the scale each run reached, read from its log.

# %%
logs = V.read_logs(SUMMARIES)
fig, run_colors = V.training_curves(logs, reward_k=reward_k)
setting_05, caption_05 = V.curves_setting(logs, model=model, lora_r=lora_r, reward_k=reward_k,
                                          prompts_per_step=prompts_per_step,
                                          num_generations=num_generations)
_ = plots.save_figure(fig, "05_training_curves", figures_dir, profile=profile, setting=setting_05,
                      caption=caption_05)

# %% [markdown]
# With one or two claims per step, the per-step reward mostly says how *easy* that step's
# claims were. A fairer learning curve subtracts, for each step, the reward of the raw
# claim itself (nDCG@k of the claim searched as is): the **gain over the raw claim**,
# $g_t = \bar r_t - \frac{1}{|Q_t|}\sum_{q \in Q_t} \mathrm{nDCG@}k(q)$ over the claims
# $Q_t$ of step $t$. A rewriter that learned something drifts above 0.

# %%
gains = V.gain_over_raw(logs, lambda name, kind, qid: V.raw_ndcg(
    DATA[name], get_retriever(name, kind), qid, reward_k))
if len(gains):
    fig = V.gain_figure(gains, run_colors, reward_k=reward_k)
    plots.save_figure(fig, "05_gain_over_raw", figures_dir, profile=profile, setting=setting_05,
                      caption=(f"Per-step mean reward minus nDCG@{reward_k} of the raw claims of "
                               "that step (faint: per step; line: rolling mean)"))
    logs = logs.merge(gains, on=["run", "step"], how="left")

# %% [markdown]
# The training summary puts the scale beside first-vs-last-quarter reward and format rate:
# a reward that rises while the format rate stays flat is a retrieval gain, not a formatting
# one.

# %%
first_last = V.training_summary(logs, model)
save_table(first_last, "05_training_summary", tables_dir,
           caption=f"Training scale read from each run's log (optimizer steps, distinct training "
                   f"claims, rollouts, minutes), and reward and format-valid rate, first vs last "
                   f"quarter of training [profile: {profile}]")
first_last

# %% [markdown]
# ## 6. Test evaluation: raw vs untrained vs trained
#
# Each trained adapter rewrites the test claims greedily with the decoding contract its
# training run saved beside it (the same as the untrained model's: checked below). The search text is the rewrite (mode *rewrite*) or claim + model text
# (mode *expand*); a completion that yields no query falls back to the raw claim.

# %%
for name in datasets:
    for kind, mode in RUNS[name]:
        adapter = SUMMARIES[f"{name}-{kind}-{mode}"]["adapter"]
        assert DecodingContract.load(adapter) == CONTRACTS[mode], f"{name}-{kind}-{mode}"
        m, tok = policy.load_policy(model, adapter=adapter)
        REWRITES[name, f"trained-{kind}-{mode}"] = rewrite.rewrite_queries(
            m, tok, DATA[name][1].queries, contract=adapter, mode=mode, autocast=eval_autocast)
        del m
        gc.collect()
engine.close_engines()  # the evaluation engine is done: free it before the dense encoder searches

# %% [markdown]
# Every rewrite frame (and the raw claims, as a row that generates nothing) is searched with
# each retriever to depth `eval_k` and scored by nDCG@10 and R@100; a trained adapter only
# with the retriever it was trained for. Each row carries the training scale behind it
# (`qrlib.eval.scale`) and its test format validity beside training's.

# %%
def row_scale(name, method, n_test):
    return V.row_scale(name, method, n_test, rewrites=REWRITES, logs=logs, model=model)


for name in datasets:
    REWRITES[name, "raw"] = V.raw_rewrites(DATA[name][1].queries)
results, per_query = V.evaluate_rewrites(REWRITES, {n: DATA[n][1] for n in datasets},
                                         get_retriever, kinds, k=eval_k, scale=row_scale)
save_table(results, "05_test_results", tables_dir,
           caption=(f"{', '.join(datasets)} test ({n_test_queries or 'all'} queries each): raw query vs untrained vs "
                    f"trained rewrite; modified = share of rewrites differing from the claim; "
                    f"training scale ({', '.join(SCALE_COLUMNS)}) from each run's log "
                    f"[profile: {profile}]"))
results

# %% [markdown]
# ### Did training help? Per-query differences
#
# Each trained adapter against the raw claim and against the untrained model with the same
# prompt, on the same claims: the mean per-claim difference in nDCG@10,
# $\bar d = \frac1n \sum_q (s_q^{\text{trained}} - s_q^{\text{base}})$, with a 95 % paired-
# bootstrap interval over claims, in the workbook's one comparison schema
# (`qrlib.eval.compare`, with the training scale of the run). A gain counts only when its
# interval excludes 0.

# %%
cmp = comparison_table(V.comparison_rows(per_query, row_scale, seed=seed))
save_comparisons(cmp, "05_comparisons", tables_dir,
                 caption=f"Per-query nDCG@10 differences of the trained adapters against the raw claim "
                         f"and the untrained model, with 95 % paired-bootstrap intervals over the test "
                         f"claims (qrlib.eval.compare schema) [profile: {profile}]")
cmp

# %% [markdown]
# ### Claim by claim
#
# Each point is one test claim: its nDCG@10 with the raw claim (x) and with the trained
# rewrite (y). Points above the diagonal are claims the rewrite helped; a mean gain made
# of a few large wins looks different here from a small shift of every claim.

# %%
pairs, intervals = V.scatter_pairs(cmp, per_query)
fig = plots.per_query_scatter(pairs, metric="nDCG@10", baseline="raw claim", intervals=intervals)
_ = plots.save_figure(fig, "05_per_query", figures_dir, profile=profile, setting=setting_05,
                      caption="Per-claim nDCG@10 of each trained rewriter (y) against the raw "
                              "claim (x) on the test claims; title: n, wins / losses / ties and "
                              "the mean difference with its 95 % paired-bootstrap interval")
plt.show()

# %% [markdown]
# ### Example rewrites before and after training
#
# The first `n_examples` test claims of each run, with the untrained and the trained
# rewrite side by side: look for copies of the claim, dropped key terms and added synonyms.

# %%
examples = V.example_rewrites(REWRITES, RUNS, n_examples)
save_table(examples, "05_examples", tables_dir,
           caption=f"Greedy rewrites of test claims before/after training [profile: {profile}]")
with pd.option_context("display.max_colwidth", 120):
    display(examples)

# %% [markdown]
# ## 7. Save for notebook 10
#
# Rewrites (with generation time and token counts) go to
# `run_dir/05_vanilla_rl/rewrites/<dataset>/<method>.jsonl`, the test collection each was
# scored on as a `CollectionCut` record in `collections/<dataset>.json`; adapters stay under
# `run_dir/rl/<run>/adapter` with their `config.json`. Notebook 10 reads both.

# %%
print(V.save_for_evaluation(out_dir, REWRITES, DATA, CONTRACTS, settings={
    "model": model, "prompts": PROMPTS, "fmt": FMT, "prefill": PREFILL, "datasets": datasets,
    "train_runs": train_runs, "n_test_queries": n_test_queries, "n_train_queries": n_train_queries,
    "n_distractors": n_distractors, "seed": seed}))

# %% [markdown]
# ## What moved the needle
#
# Levers tried while building this notebook (short probes on SciFact train claims, BM25;
# not re-run here, so described rather than quoted as numbers):
#
# * **Prefilling the answer layout** (`prefill`): SmolLM2-135M with a JSON-only prompt and
#   no prefill, sampling at temperature 1.0, produced no format-valid completion in its
#   first two steps (chatty or off-topic text). With the assistant turn starting at
#   `<answer>{"query": "` the format is mostly settled by construction, so the reward
#   measures retrieval rather than formatting.
# * **A worked example in the prompt**: Qwen2.5-Coder-0.5B follows the layout from the
#   first step (almost every rollout valid) and writes keyword lists; many rewrites are close
#   paraphrases of the claim, whose nDCG is then about that of the claim itself.
# * **Expansion instead of rewriting** (`train_runs` mode `expand`): copying the claim
#   gains nothing over the raw-claim score, so the reward spread within a group comes from
#   the added terms only; DeepRetrieval's own task is rewriting (mode `rewrite`, the new
#   query alone is searched), which the cpu profile trains beside it.
# * **A deeper reward** (`reward_k` = 100 rather than 10): with about one relevant abstract
#   per SciFact claim, nDCG@10 is zero for every rollout whose gold abstract ranks below 10;
#   nDCG@100 still separates rank 15 from rank 80 (DeepRetrieval trains with large k for
#   the same reason). `frac_reward_zero_std` in the log is the share of groups that gave
#   GRPO no signal at all.
#
# The tables of sections 5 and 6 are the evidence for this run; the summary below is
# computed from them, not written in advance.

# %% [markdown]
# ## What we found
#
# Built from this run's tables (`05_comparisons`, `05_test_results`, `05_health`) by
# `qrlib.eval.findings`, so a rerun that changes the numbers changes the sentences.

# %%
from IPython.display import Markdown

from qrlib.eval.findings import what_we_found

record = S.record
t_train = pd.read_csv(tables_dir / "05_training_summary.csv")
t_test = pd.read_csv(tables_dir / "05_test_results.csv")
t_cmp = read_table(tables_dir / "05_comparisons.csv")
for key, value in V.result_records(t_train, t_test).items():
    record(key, value)
display(Markdown(what_we_found(t_cmp, notebook="05_vanilla_rl", tables_dir=tables_dir,
                               health=HEALTH, extra=[V.modified_sentence(t_test)])))
