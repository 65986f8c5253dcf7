# ---
# jupyter:
#   qrlib:
#     reads: [07_acqo_stage2]  # earlier notebooks whose artifacts this one reads (qrlib.freshness)
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% tags=["parameters"]
profile = "dev"  # profile name (smoke | cpu | cpu-long | gpu)
run_dir = "../runs/dev"  # the vanilla-RL adapter, its log and test outputs go here
figures_dir = "../figures/dev"  # figures of this run
tables_dir = "../tables/dev"  # tables of this run; 07's published tables are read from here
cache_dir = None  # shared cache (dequantised models, embeddings); None means qrlib default
seed = 0  # seed for subsets, sampling and bootstrap
data_dir = None  # BEIR folders; None means ../shared/data or $QRLIB_DATA
model = "smollm2"  # policy (07's, so the rows compare like with like)
train_datasets = ["2wikimultihopqa-mini", "hotpotqa-large"]  # 06's training sets (the same questions are rebuilt)
n_train_queries = 8  # 06's n_train_queries
n_distractors = 200  # 06's n_distractors (None: the full training corpus)
retrievers = ["bm25"]  # one vanilla run per retriever, each tested against that retriever's ACQO row
prompt = "acqo/no-decompose"  # one query, the same JSON answer format as ACQO's
prefill = '{"query": "'  # start of the assistant's answer (06's prefill)
train_steps = None  # RL steps; None means ACQO's Stage I + Stage II steps, read from 07_stage_summary
prompts_per_step = 1  # distinct questions per step (07's)
num_generations = 4  # rollouts per question (07's)
max_completion_length = 24  # token budget of one rollout
temperature = 1.0  # rollout sampling temperature (ACQO A.2: 0.8)
top_p = 1.0  # rollout nucleus sampling (ACQO A.2: 0.8)
stop = ['"}']  # a rollout ends when it closes the JSON answer (kept in the completion)
learning_rate = 5e-5  # LoRA learning rate (06's and 07's)
lora_r = 16  # LoRA rank (06's)
dynamic_sampling = 0  # DAPO dynamic sampling rounds (0: off)
reward_k = 10  # the reward is nDCG@reward_k of the one query's list
test_datasets = ["2wikimultihopqa-mini"]  # must be among 07's test sets
n_test_queries = 10  # 07's n_test_queries (None: all)
n_test_distractors = 200  # 07's n_test_distractors (None: the full corpus)
eval_k = 100  # retrieval depth of evaluation
eval_autocast = False  # bf16 autocast of the greedy test decoding (07's: fp32)
eval_batch_size = 8  # test questions decoded together on the HF path
bootstrap = 2000  # paired-bootstrap resamples
n_examples = 6  # example rewrites shown
torch_threads = 0  # CPU threads for torch; 0 keeps torch's default
rollouts = "hf"  # generation engine of training rollouts and evaluation: hf | vllm (qrlib.generation.engine)
dense_model = "minilm"  # encoder of the dense retriever: offline all-MiniLM-L6-v2; a hub id (BAAI/bge-base-en-v1.5) on GPU

# %% [markdown]
# # 12 · ACQO's single-query baseline: vanilla RL at the same budget
#
# *Paper:* [When Should I Search More: Adaptive Complex Query Optimization with Reinforcement Learning](https://arxiv.org/abs/2601.21208) (Wen, Deng, Wei, Chen, Qiao and Sun; arXiv:2601.21208, 2026).
#
# ACQO asks whether *decomposition* helps, or whether any RL on the retriever's reward would
# do as well (ACQO Table 5, "w/o decomposition"). The control: the same policy, questions,
# sampling, learning rate, rollouts per step and number of optimizer steps as ACQO's
# Stage I + Stage II, but the model writes **one** query and is rewarded by the plain
# retrieval metric of its own list,
#
# $$ r(\hat q) = \mathrm{nDCG@10}\big(\mathcal R(\hat q)\big), \qquad r = 0 \text{ for an
# unusable answer or more than one query,} $$
#
# with DAPO (token-level loss, clip $[0.2, 0.28]$, no KL term), from the base model: one
# query needs no cold start to seed splits. This is DeepRetrieval's recipe (notebook 05)
# on ACQO's data.
#
# The run needs no adapter of notebooks 06-07: it rebuilds 06's training questions from
# the same seed and reads what it compares with from 07's **published** tables
# (`07_stage_summary` for the budget, `07_per_question_ndcg10` and `07_acqo_results` for the
# rows), so it can run in a session of its own.
#
# **What you will learn:** whether ACQO's gain comes from splitting questions or from RL
# on the retriever's reward as such, measured at the same number of optimizer steps on
# the same test questions.

# %%
import time

from qrlib import session

S = session.start("12_acqo_vanilla_rl", run_dir=run_dir, figures_dir=figures_dir,
                  tables_dir=tables_dir, cache_dir=cache_dir, seed=seed,
                  torch_threads=torch_threads, rollouts=rollouts, dense_model=dense_model)
run_dir, figures_dir, tables_dir, out_dir, record = (S.run_dir, S.figures_dir, S.tables_dir,
                                                     S.out_dir, S.record)

import pandas as pd
from IPython.display import Markdown

from qrlib import plots
from qrlib.core.io import save_json, save_table
from qrlib.eval.compare import save_comparisons
from qrlib.data import datasets as qdata
from qrlib.data import rows as qrows
from qrlib.eval.scale import SCALE_COLUMNS
from qrlib.generation import engine, policy, prompts
from qrlib.methods.acqo import study
from qrlib.methods.acqo import vanilla_study as van
from qrlib.methods.acqo.curriculum import generate_decompositions
from qrlib.rl.health import health_report
from qrlib.rl.train import load_config, train
from qrlib.eval.findings import what_we_found

STAGES, ACQO_RESULTS, ACQO_PER_Q = (  # 07's published tables of this profile
    study.published_table(tables_dir, name, reader="12", writer="07", profile=profile)
    for name in ("07_stage_summary", "07_acqo_results", "07_per_question_ndcg10"))
print(f"profile={profile} model={model}")
STAGES

# %% [markdown]
# ## 1. The training questions and the budget
#
# The same training questions as notebook 06 (the same subset call and seed) over the same
# corpus. The budget is the number of optimizer steps ACQO's Stage I and Stage II actually
# took per retriever, read from 07's stage table (`train_steps` overrides it). The prompt
# asks for one query in ACQO's JSON answer format. Below 60 steps a run checks the
# plumbing rather than the method, and "What we found" says so.

# %%
TRAIN_ROWS, CORPUS, QRELS, SIZES = qdata.pooled_subsets(
    train_datasets, "train", n_queries=n_train_queries, n_distractors=n_distractors, seed=seed,
    data_dir=data_dir)
print(f"{len(TRAIN_ROWS)} training questions, {len(CORPUS)} paragraphs")
BUDGET = van.step_budget(STAGES, retrievers, train_steps)
print("RL steps per retriever: " + ", ".join(f"{k} {v}" for k, v in BUDGET.items()))
print(f"--- prompt {prompt}")
print(prompts.render(prompts.get(prompt), context="", question=TRAIN_ROWS[0]["question"])[-1]["content"])

# %% [markdown]
# ## 2. Training
#
# `RewardEnv(reward="ndcg", max_subqueries=1)`: a completion with more than one query, or
# none that parses, scores 0. Settings shared with ACQO's stages are the profile's. Unlike
# ACQO's Stage I reward (Eq. 6), which can only gain from an extra sub-query, this reward
# gives no room to explore splits: the policy can only learn which single query its
# retriever ranks best.

# %%
SUMMARIES, NAMES = {}, {}
for kind in retrievers:
    cfg = load_config(dict(
        name=f"vanilla-rl-{kind}", run_dir=str(run_dir), model=model, prompt=prompt,
        prefill=prefill, reward="ndcg", algorithm="dapo", max_steps=BUDGET[kind],
        prompts_per_step=prompts_per_step, num_generations=num_generations,
        max_completion_length=max_completion_length, temperature=temperature, top_p=top_p,
        learning_rate=learning_rate, lora_r=lora_r, lora_alpha=2 * lora_r,
        dynamic_sampling=dynamic_sampling, save_steps=max(1, BUDGET[kind] // 4), seed=seed,
        retriever=kind, stop=list(stop)))
    env = van.vanilla_env(study.train_retriever(kind, CORPUS, cache_dir=cache_dir), QRELS, k=reward_k)
    t0 = time.perf_counter()
    SUMMARIES[kind] = s = train(cfg, env=env, rows=TRAIN_ROWS)
    s["wall_seconds"] = round(time.perf_counter() - t0, 1)
    NAMES[kind] = cfg.name
    print(f"{kind}: vanilla RL trained {s['steps']} steps in {s['train_seconds'] / 60:.1f} min")
_ = save_json({"summaries": SUMMARIES, "budget": BUDGET}, out_dir / "vanilla.json")

# %% [markdown]
# ### Training health
#
# Per step and run (`qrlib.rl.health`): the reward, the shares of rollouts that are
# well-formed and that hit the token budget, the share that copy the input query (*copy*)
# or repeat one of the prompt's own examples or placeholders (*echo*), and the share of
# groups whose rewards are all equal (no GRPO signal). A run has **collapsed** when its
# copy or echo share is above 0.9 over its last quarter of steps.

# %%
HEALTH, health_lines = health_report(SUMMARIES, "12_health", tables_dir=tables_dir,
                                     figures_dir=figures_dir, profile=profile, setting=model)
print("\n".join(health_lines))

# %% [markdown]
# ## 3. Training curves
#
# Reward (nDCG@10 of the rollout's query on its training question), the share of groups
# whose rollouts all scored the same (zero advantage: nothing to learn from that group),
# and the share of well-formed rollouts. The table compares the first and the last
# quarter of the steps: a reward that rises while most groups have zero spread was learned
# from the few groups that had any.

# %%
LOGS = {k: pd.read_csv(run_dir / "rl" / NAMES[k] / "log.csv") for k in retrievers}
plots.save_figure(van.curves_figure(LOGS), "12_vanilla_curves", figures_dir,
                  caption="Vanilla RL (one query, nDCG@10 reward, DAPO): reward, zero-spread "
                          "groups and format validity per step",
                  profile=profile, setting=f"{model}; from the logs: {study.logs_setting(LOGS)}")
CURVES = van.curve_summary(LOGS)
save_table(CURVES.round(4), "12_vanilla_curve_summary", tables_dir,
           caption="Vanilla RL, first vs last quarter of training (from the run's log)")
CURVES

# %% [markdown]
# ## 4. The test: the same questions, corpus and retriever as notebook 07
#
# Greedy decoding as in 07 (same prefill, parse and token budget: the adapter's decoding
# contract), searched exactly. The raw question is searched again here and must give 07's
# per-question scores, which checks that both notebooks test the same questions against
# the same corpus (`check_raw` stops the notebook otherwise). A rewrite that is not
# well-formed (one query in the JSON answer) is searched with what the lenient parser
# recovers from it, or as the question itself; the share of well-formed ones is the
# row's `test valid`.

# %%
TEST = study.load_test_cuts(test_datasets, data_dir=data_dir, n_queries=n_test_queries,
                            n_distractors=n_test_distractors, seed=seed)
PER_Q, DECOMP = {}, {}
for (name, kind), retr in study.eval_retrievers(TEST, retrievers, cache_dir=cache_dir).items():
    PER_Q[name, kind, "raw question"] = van.check_raw(retr, TEST[name], ACQO_PER_Q, name, kind,
                                                      k=eval_k)
    m, tok = policy.load_policy(model, adapter=SUMMARIES[kind]["adapter"])
    DECOMP[name, kind] = dec = generate_decompositions(
        m, tok, qrows.rows_from_dataset(TEST[name]), contract=SUMMARIES[kind]["adapter"],
        progress=False, autocast=eval_autocast, batch_size=eval_batch_size)  # training's contract
    del m
    PER_Q[name, kind, "vanilla RL"], _ = study.score_subqueries(
        retr, TEST[name].qrels, study.subqueries_of(dec), van.MEASURES, k=eval_k)
    print(f"{name}/{kind}: {len(dec)} test rewrites, {sum(d['format_ok'] for d in dec)} well-formed")
engine.close_engines()
save_json({f"{k[0]} | {k[1]}": v for k, v in DECOMP.items()}, out_dir / "rewrites.json")
VALID = {k: study.validity(v) for k, v in DECOMP.items()}  # test validity

# %% [markdown]
# ## 5. Vanilla RL in ACQO Table 3's columns, next to 07's rows
#
# Retrieval metrics of the vanilla model on the test questions, beside 07's rows (raw,
# rule split, untrained single query, ACQO Stage I + II) copied from its published table
# with their training scale. Read the `RL steps` column first: the vanilla row should show
# the same number as ACQO's, or the comparison is not at equal budget.

# %%
RESULTS, VANILLA, THEIRS = van.results_table(PER_Q, ACQO_RESULTS, LOGS, VALID, model=model,
                                             test_datasets=test_datasets, retrievers=retrievers)
save_table(RESULTS.round(4), "12_vanilla_results", tables_dir,
           caption="Vanilla RL (one query, nDCG@10 reward) at ACQO's step budget next to 07's "
                   f"rows, test questions; training scale ({', '.join(SCALE_COLUMNS)}) from "
                   "the runs' logs")
RESULTS.round(3)

# %% [markdown]
# ### Paired comparisons, question by question
#
# Every comparison is a row of the workbook's one comparison schema
# (`qrlib.eval.compare`): the per-question difference in nDCG@10, its mean and 95 %
# paired-bootstrap interval over the test questions, and the training scale behind the
# method. Vanilla RL against the raw question, the untrained single query and the rule
# split; and the question ACQO Table 5 answers, ACQO (Stage I + II) minus vanilla RL: a
# positive difference there credits decomposition, not RL alone.

# %%
COMPARISONS = van.comparisons(PER_Q, ACQO_PER_Q, THEIRS, LOGS, VALID, model=model,
                              bootstrap=bootstrap, seed=seed)
save_comparisons(COMPARISONS, "12_comparisons", tables_dir,
                 caption="Paired comparisons in nDCG@10 (mean difference, 95% paired bootstrap over "
                         "the test questions; the qrlib.eval.compare schema): vanilla RL against the "
                         "raw question, the untrained single query and the rule split; ACQO minus "
                         "vanilla RL")
COMPARISONS[["method", "baseline", "score", "baseline score", "diff", "lo", "hi", "wins",
             "losses", "RL steps", "train queries", "test queries"]].round(3)

# %% [markdown]
# ## 6. Examples
#
# The first test questions as the vanilla model rewrote them. Set them beside notebook
# 07's examples (its section 9) to see what one query can and cannot do with a question
# that needs two paragraphs.

# %%
pd.set_option("display.max_colwidth", 140)
van.examples(DECOMP, TEST[test_datasets[0]], test_datasets[0], retrievers, n_examples)

# %% [markdown]
# ## What we found
#
# Built from `12_comparisons`, `12_vanilla_results` and `12_health` of this run by
# `qrlib.eval.findings`:

# %%
display(Markdown(
    what_we_found(COMPARISONS[~COMPARISONS.method.str.startswith("ACQO")],
                  notebook="12_acqo_vanilla_rl", tables_dir=tables_dir, health=HEALTH,
                  extra=van.extra_sentences(VANILLA), subject="vanilla RL")
    + van.findings_tail(COMPARISONS)))

# %% [markdown]
# The last cell stores the numbers the tests read (every comparison, the vanilla row's
# nDCG@10 and RL steps); it prints nothing.

# %%
for key, value in van.records(COMPARISONS).items():
    record(key, value)
