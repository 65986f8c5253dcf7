# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% tags=["parameters"]
profile = "dev"  # profile name (smoke | cpu | cpu-long | gpu)
run_dir = "../runs/dev"  # adapters, logs and rewrites go here
figures_dir = "../figures/dev"  # figures of this run
tables_dir = "../tables/dev"  # tables of this run
cache_dir = None  # shared cache (dequantised models, embeddings); None means qrlib default
seed = 0  # seed for the training subset, training and the bootstrap
data_dir = None  # BEIR folders; None means ../shared/data or $QRLIB_DATA
model = "smollm2"  # the rewriter policy (DeepRetrieval: Qwen2.5-3B-Instruct)
datasets = ["hotpotqa-large", "2wikimultihopqa-mini"]  # question sets with answers: train split for RL, test split for evaluation
drop_yes_no = True  # leave out questions whose only answers are yes / no (no passage states them)
n_train_queries = 16  # training questions per dataset (random, span-answerable); None means all
n_test_queries = 8  # test questions per dataset (first span-answerable ones); None means all
runs = ["nothink"]  # RL runs: nothink (deepretrieval/evidence-nothink) | think (the same run with <think>, Fig. 4) | room (nothink on training questions whose raw question ranks the first answer-bearing passage within room_ranks)
room_ranks = [2, 50]  # the room run's window of the raw question's first answer-bearing rank
room_pool_queries = None  # training questions drawn before the room filter keeps n_train_queries of them (None: 3 x n_train_queries)
think_datasets = None  # datasets the think run trains and tests on (None: all of datasets); Fig. 4 needs one task
room_datasets = None  # datasets the room run trains and tests on (None: all of datasets)
ns = [1, 5, 20]  # H@N cut-offs (DeepRetrieval Table 1)
train_steps = 2  # GRPO optimizer steps per run
prompts_per_step = 1  # questions per step
num_generations = 4  # rollouts per question
max_completion_length = 32  # token budget of one rollout without reasoning
think_max_completion_length = 64  # token budget of one rollout with reasoning
temperature = 0.6  # rollout temperature (DeepRetrieval App. B.2: 0.6)
beta = 0.001  # KL coefficient (App. B.2)
learning_rate = 5e-5  # LoRA learning rate
dynamic_sampling = 0  # DAPO dynamic sampling rounds for groups whose rewards are all equal (0: off)
stop = []  # stop strings of vLLM rollouts (kept in the completion), e.g. ["</answer>"]
eval_batch_size = 8  # questions rewritten together
bootstrap = 2000  # paired-bootstrap resamples
n_examples = 3  # example rewrites shown
torch_threads = 0  # CPU threads for torch; 0 keeps torch's default
rollouts = "hf"  # generation engine: hf | vllm (qrlib.generation.engine)

# %% [markdown]
# # 17 · DeepRetrieval's evidence seeking, trained: H@N, knowledge injection, reasoning
#
# *Paper:* [DeepRetrieval: Hacking Real Search Engines and Retrievers with Large Language Models via Reinforcement Learning](https://arxiv.org/abs/2503.00223) (Jiang, Lin, Cao, Tian, Kang, Wang, Sun and Han; arXiv:2503.00223, 2025).
#
# In evidence seeking (DeepRetrieval Sec. 3.2, Table 1 right) the policy rewrites a question
# for BM25 and succeeds when a retrieved passage **contains the answer**; there are no
# relevance judgements, only answer strings. The training reward (Table 8) tiers the rank
# $r$ of the first answer-bearing passage:
#
# $$ R(r) = \begin{cases} 5 & r \le 5\\ 4 & r \le 20\\ 2 & r \le 50\\ 1 & r\le 100\\
#    0.5 & r \le 1000\\ 0.1 & r \le 3000\\ -3.5 & \text{otherwise,} \end{cases} $$
#
# plus the format term, and the test metric is H@N (the share of questions with an
# answer-bearing passage in the top N). Notebook 11 audits the task and scores the raw
# question; here a rewriter is trained and tested, with two analyses the paper makes:
#
# * **knowledge injection** (Fig. 3, App. E): a model can write the answer into the query
#   from memory, and retrieval then "succeeds" without a better query. Each rewrite's
#   injected answer strings are found by string match (`evidence.injected_answers`, where
#   the paper uses an LLM judge), removed, and the *cleaned* rewrite searched again;
# * **reasoning or not** (Fig. 4): the same RL run with and without a `<think>` block,
#   comparing reward, reasoning length and query length over steps, and the test result.
#
# Our collections are the pooled multi-hop paragraph sets (HotpotQA-large, 2Wiki), not the
# paper's 21M Wikipedia passages (see notebook 11): compare rows within a collection.

# %%
import time

from qrlib import session

S = session.start("17_deepretrieval_evidence", run_dir=run_dir, figures_dir=figures_dir,
                  tables_dir=tables_dir, cache_dir=cache_dir, seed=seed,
                  torch_threads=torch_threads, rollouts=rollouts)
run_dir, figures_dir, tables_dir, out_dir, record = (S.run_dir, S.figures_dir, S.tables_dir,
                                                     S.out_dir, S.record)

import pandas as pd

from qrlib import plots
from qrlib.core.io import save_json, save_table
from qrlib.eval import curves, published
from qrlib.eval.compare import comparison_table, save_comparisons
from qrlib.eval.scale import SCALE_COLUMNS
from qrlib.generation.contract import DecodingContract
from qrlib.methods.deepretrieval import evidence as ev
from qrlib.methods.deepretrieval import evidence_report as R
from qrlib.methods.deepretrieval import evidence_rl as er

PROMPTS = R.PROMPTS  # run -> prompt (room: nothink's prompt on questions with room to improve)
RUN_DATASETS = R.run_datasets(runs, datasets, think_datasets, room_datasets)  # run -> the datasets it covers
NS = tuple(int(n) for n in ns)
HN = [f"H@{n}" for n in NS]
print(f"profile={profile} model={model} runs={RUN_DATASETS}")

# %% [markdown]
# ## 1. Questions, answers and answer-bearing passages
#
# Training: a random subset of each dataset's train split (span-answerable questions),
# pooled, over the train split's paragraphs. Test: the span-answerable questions of each
# test split over its paragraphs. For every question, the passages that contain one of
# its answer strings are its qrels, for the reward and for H@N alike. The table counts,
# per dataset and split, the questions kept, the yes/no questions left out, the paragraphs
# searched and the median number of answer-bearing passages per question (a large number
# means a vague query can still hit).

# %%
TRAIN, TEST, SEARCH = R.load_sets(datasets, RUN_DATASETS, data_dir=data_dir, drop_yes_no=drop_yes_no,
                                  n_train=n_train_queries, n_test=n_test_queries, seed=seed,
                                  ns=NS, room_ranks=room_ranks, room_pool=room_pool_queries)
R.sets_table(TRAIN, TEST, datasets)

# %% [markdown]
# ## 2. Training: the answer-rank reward, with and without reasoning
#
# One GRPO run per entry of `runs` on the pooled training questions of every dataset: the
# reward needs each question's own corpus, so each dataset gets its own run here
# (DeepRetrieval trains one model per dataset too). The objective is Eq. 2 of the paper,
# the reward minus $\beta$ times the log-ratio to the untrained policy, maximised with GRPO
# rather than PPO; the `think` run gets the longer budget `think_max_completion_length` for
# its chain, and the `room` run trains on the questions kept in section 1. Each run prints
# its steps and seconds; `train_rewriter` saves the decoding contract beside the adapter.

# %%
SUMMARIES, LOGS = {}, {}
for name in datasets:
    for run in [r for r in runs if name in RUN_DATASETS[r]]:
        t0 = time.perf_counter()
        SUMMARIES[name, run] = s_ = er.train_rewriter(
            TRAIN[name, "room"] if run == "room" else TRAIN[name], SEARCH["train", name],
            name=f"17-evidence-{name}-{run}",
            prompt=PROMPTS[run], run_dir=run_dir, model=model, dataset=name, retriever="bm25",
            max_steps=train_steps, prompts_per_step=prompts_per_step,
            num_generations=num_generations,
            max_completion_length=(think_max_completion_length if run == "think"
                                   else max_completion_length),
            temperature=temperature, beta=beta, learning_rate=learning_rate, seed=seed,
            dynamic_sampling=dynamic_sampling, stop=list(stop),
            save_steps=max(1, train_steps // 4))
        LOGS[name, run] = pd.read_csv(s_["log"], dtype={"qids": str})
        print(f"{name} {run}: {s_['steps']} steps, {time.perf_counter() - t0:.0f}s")
_ = save_json({f"{n}:{r}": s for (n, r), s in SUMMARIES.items()}, out_dir / "train_summaries.json")

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

HEALTH, health_lines = health_report(SUMMARIES, "17_health",
                                     tables_dir=tables_dir, figures_dir=figures_dir,
                                     profile=profile, setting=model)
print("\n".join(health_lines))

# %% [markdown]
# ### Reward, reasoning length and query length over steps (Fig. 4)
#
# The per-step log has the mean reward and the completion length; with `<think>` the
# completion holds the reasoning and the query, without it the query alone.

# %%
CURVES = {f"{name} · {run}": lg for (name, run), lg in LOGS.items()}
fig = curves.reward_and_length(CURVES, reward="mean answer-rank reward")
_ = plots.save_figure(fig, "17_training_curves", figures_dir, profile=profile,
                  setting=f"{model}; from the logs: " + curves.scale_setting(CURVES),
                  caption="Evidence seeking: reward and completion length per GRPO step, with "
                          "and without reasoning (DeepRetrieval Fig. 4's comparison)")

# %% [markdown]
# ## 3. Test: raw question, untrained and trained rewriters, injection removed
#
# Greedy rewrites of every test question by the untrained model and each trained adapter
# with the decoding contract of its training (prompt, prefill, stop strings, token budget,
# parser); a completion without a query is searched as the raw
# question. For each: H@N of the rewrite, the injection rate, and H@N of the cleaned
# rewrite, each paired with the raw question (and the rewrite with its cleaned self) by a
# 95% bootstrap over questions.

# %%
RAW = {name: ev.score_run(SEARCH["test", name], TEST[name].questions, TEST[name].ds,
                          TEST[name].answers, NS) for name in datasets}
RESULTS = {}  # (rewriter, dataset) -> rewrites, injection frame, H@N of rewrite and cleaned
for run in runs:
    # the untrained model in one pass over every dataset, with the decoding contract its
    # training used (read from the first dataset's adapter); each dataset's own adapter after
    same = R.shared_untrained(run, runs, SUMMARIES, RUN_DATASETS)  # the room run's is nothink's
    first = SUMMARIES[RUN_DATASETS[run][0], run]["adapter"]
    untrained = ({(PROMPTS[run], n): RESULTS[f"untrained {same}", n] for n in RUN_DATASETS[run]}
                 if same else
                 er.rewrite_and_score(model, None, {PROMPTS[run]: DecodingContract.load(first)},
                                      {n: TEST[n] for n in RUN_DATASETS[run]},
                                      {n: SEARCH["test", n] for n in RUN_DATASETS[run]}, NS,
                                      batch_size=eval_batch_size))
    for name in RUN_DATASETS[run]:
        RESULTS[f"untrained {run}", name] = untrained[PROMPTS[run], name]
        a = SUMMARIES[name, run]["adapter"]
        RESULTS[f"trained {run}", name] = er.rewrite_and_score(
            model, a, {PROMPTS[run]: a}, {name: TEST[name]}, {name: SEARCH["test", name]}, NS,
            batch_size=eval_batch_size)[PROMPTS[run], name]

# %% [markdown]
# Each rewriter is then scored three ways per dataset (rewrite, cleaned rewrite, raw
# question) and paired question by question; where both the `think` and the `nothink` run
# exist, the rewriter with reasoning is also paired with the one without, in the same state.
# For one N, the paired difference is $\bar d = \frac1n\sum_q (h_q^{a} - h_q^{b})$ with
# $h_q \in \{0, 1\}$ the hit of question $q$, and a 95 % bootstrap interval over questions.

# %%
BOTH = R.both_runs(datasets, RUN_DATASETS)  # datasets with both runs (Fig. 4's pairs)
rows, cmp_rows = R.evidence_tables(RESULTS, RAW, TEST, LOGS, runs, RUN_DATASETS, datasets,
                                   model=model, ns=NS, resamples=bootstrap, seed=seed)
EVIDENCE = pd.DataFrame(rows)
CMP = comparison_table(cmp_rows)
for key, value in R.result_records(RESULTS, RAW, datasets, HN).items():
    record(key, value)
save_table(EVIDENCE.round(4), "17_evidence", tables_dir,
           caption=("H@N of the raw question, each rewriter's rewrite and the rewrite with its "
                    "injected answer strings removed, with format, modification and injection "
                    f"rates (DeepRetrieval Table 1 right, Fig. 3; string-match injection test) "
                    f"[profile: {profile}]"))
save_comparisons(CMP, "17_comparisons", tables_dir,
                 caption=("Rewrite vs raw question, rewrite vs cleaned rewrite, cleaned rewrite vs "
                          "raw question and, where both runs exist, the rewriter with reasoning vs "
                          "without; H@N, 95% paired bootstrap over the test questions, with the "
                          f"rewriter's training scale ({', '.join(SCALE_COLUMNS)}) [profile: {profile}]"))
EVIDENCE.round(3)

# %% [markdown]
# ### Question by question
#
# A hit is 0 or 1, so per question there are four outcomes: both the rewrite and the raw
# question find an answer-bearing passage in the top N, only the rewrite (a win), only the
# raw question (a loss), or neither. The paired difference above is (wins − losses) / n;
# the bars show whether it comes from a few questions or many.

# %%
pairs, intervals = R.outcome_pairs(RESULTS, RAW, CMP, HN[-1])
if pairs:
    fig = plots.per_query_outcomes(pairs, metric=HN[-1], baseline="raw question",
                                   intervals=intervals)
    _ = plots.save_figure(fig, "17_per_query", figures_dir, profile=profile,
                          setting=f"{model}; from the logs: " + curves.scale_setting(CURVES),
                          caption=f"Per test question, {HN[-1]} of each rewrite against the raw "
                                  "question: solved by both, only the rewrite, only the raw "
                                  "question, neither; with n and the paired difference")

# %% [markdown]
# The paper's Table 1 (NQ, TriviaQA, SQuAD over 21M passages; DeepRetrieval-3B with and
# without reasoning), for the direction of the effects only:

# %%
published.table("deepretrieval", "Table 1", wide=True, fraction=True)

# %% [markdown]
# Rewrites that injected an answer, with the cleaned query that was searched instead:

# %%
R.injection_examples(RESULTS, n_examples)

# %% [markdown]
# ## 4. Reasoning or not (Fig. 4): how long the chain and the query are
#
# DeepRetrieval's Fig. 4 (literature search on PubMed, which is not offline here; we use
# evidence seeking as the one task) follows the reasoning length and the query length over
# training: with `<think>` the chain shortens as the reward rises, and without it the query
# grows. Both lengths are read from the completions each step logs (`samples.jsonl`, a few
# rollouts per step) and from the greedy test rewrites
# (`qrlib.methods.deepretrieval.reasoning`: words before `</think>`, words of the query the
# lenient parser recovers). Early and late are the first and last quarter of the steps.
#
# A short chain is not necessarily concise reasoning: a prompt whose layout shows an
# example chain (the paper's App. H shows `<think> [thinking process] </think>`) invites a
# small policy to copy it, and an earlier version of this workbook's prompt
# (`<think> your reasoning </think>`) was copied in every trained test chain. The prompt
# now describes the layout in words and shows no chain; the **echo share** counts chains
# equal to one the prompt shows (case and spacing ignored; none, so NaN, when it shows none).

# %%
EXAMPLE, LENGTHS = R.rollout_lengths(SUMMARIES, runs)  # prompt example chains, words per step
REASONING = R.reasoning_table(RESULTS, TEST, LOGS, LENGTHS, EXAMPLE, HN)
save_table(REASONING.round(4), "17_reasoning", tables_dir,
           caption=("With and without reasoning (DeepRetrieval Fig. 4, Table 1 'w/o reasoning'): "
                    "test H@N, format rate, generated tokens, reasoning and query words and "
                    "the share of chains that copy the prompt's example chain (echo share) of "
                    "the greedy test rewrites; for trained rewriters the mean training reward "
                    "and the reasoning and query words and echo share of the logged rollouts in "
                    f"the first and last quarter of the steps [profile: {profile}]"))
fig, setting_17 = R.lengths_figure(LOGS, LENGTHS, BOTH, model)  # think runs and partners
if fig is not None:
    plots.save_figure(fig, "17_reasoning_lengths", figures_dir, profile=profile, setting=setting_17,
                      caption="Training reward, reasoning length and query length per GRPO step "
                              "(words, from the rollouts each step logs), with and without "
                              "<think> (DeepRetrieval Fig. 4's study, on evidence seeking)")
REASONING.round(3)

# %% [markdown]
# ## What we found
#
# Built from `17_comparisons` (H@N at the deepest N), `17_reasoning`, `17_evidence` and
# `17_health` of this run by `qrlib.eval.findings`:

# %%
from IPython.display import Markdown

from qrlib.eval.findings import what_we_found

deep = CMP[(CMP.metric == HN[-1]) & ~CMP.method.str.contains("cleaned")]
display(Markdown(what_we_found(deep, notebook="17_deepretrieval_evidence", tables_dir=tables_dir,
                               health=HEALTH, extra=R.extra_sentences(REASONING, RESULTS))))
