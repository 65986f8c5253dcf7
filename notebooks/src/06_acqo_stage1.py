# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% tags=["parameters"]
profile = "dev"  # profile name (smoke | cpu | cpu-long | gpu)
run_dir = "../runs/dev"  # adapters, logs and rollouts go here (read by notebook 07)
figures_dir = "../figures/dev"  # figures of this run
tables_dir = "../tables/dev"  # tables of this run
cache_dir = None  # shared cache (dequantised models, embeddings); None means qrlib default
seed = 0  # seed for subsets and training
data_dir = None  # BEIR folders; None means ../shared/data or $QRLIB_DATA
model = "smollm2"  # policy: smollm2 | qwen2.5-coder-0.5b | hub id (gpu profile)
train_datasets = ["2wikimultihopqa-mini", "hotpotqa-large"]  # their train splits, pooled
retrievers = ["bm25"]  # one Stage I run per retriever: bm25 | dense
n_train_queries = 8  # training questions per dataset (random subset of the train split); None means all
n_distractors = 200  # training corpus: judged paragraphs + this many others per dataset; None means full
stage1_share = 1.0  # Stage I trains on this share of the pooled questions, those the raw question serves worst (ACQO App. B: 0.5 on HotpotQA; 1.0 keeps all)
prompt = "acqo/decompose-fewshot"  # acqo/decompose (rules only) | acqo/decompose-oneshot (+ a three-part split) | acqo/decompose-fewshot (+ splits of 1, 3 and 2 queries)
prefill = '{"query": "'  # start of the assistant's answer (the JSON key), '' for none
train_steps = 2  # DAPO steps of Stage I per retriever
prompts_per_step = 1  # distinct questions per step
num_generations = 4  # rollouts per question (the GRPO group; ACQO A.2: 8)
max_completion_length = 24  # token budget of one rollout (ACQO A.2: 256)
temperature = 1.0  # rollout sampling temperature (ACQO A.2: 0.8)
top_p = 1.0  # rollout nucleus sampling (ACQO A.2: 0.8)
stop = ['"}']  # a rollout ends when it closes the JSON answer (vLLM rollouts; kept in the completion)
learning_rate = 5e-5  # LoRA learning rate (ACQO A.2: 1e-6 for full fine-tuning)
lora_r = 16  # LoRA rank
eta = 0.6  # decay over gold documents, ACQO Eq. 4 (0.6 for HotpotQA, A.2)
delta = -1.0  # format penalty, ACQO Eq. 5 (not given in the paper)
reward_k = 100  # ranks scored by Phi (ACQO Eq. 3 reaches rank 100)
dynamic_sampling = 0  # DAPO dynamic sampling: extra generation rounds per step (0: off)
warm_start_samples = 0  # rejection-sampling cold start: sampled decompositions per training question (0: off)
warm_start_temperature = 1.0  # sampling temperature of those decompositions
warm_start_rule_candidate = False  # also offer the question plus its heuristic_split sub-queries as a candidate target
warm_start_copy_targets = True  # questions without a better candidate learn to copy; False leaves them out of SFT
sft_steps = 0  # SFT steps on the rejection-sampled targets before Stage I (batch 4)
sft_learning_rate = 1e-4  # LoRA learning rate of the SFT cold start
gen_autocast = True  # bf16 autocast when sampling outside training (about 4x faster on CPU)
hnsw_m = 32  # dense training reward searches an HNSW index (ACQO A.1); evaluation is exact
hnsw_ef_construction = 200  # HNSW build effort
n_examples = 6  # rollouts shown at the end
torch_threads = 0  # CPU threads for torch; 0 keeps torch's default
rollouts = "hf"  # generation engine of training rollouts and sampling/evaluation: hf (transformers generate) | vllm (in-process vLLM engine, qrlib.generation.engine)
dense_model = "minilm"  # encoder of the dense retriever: offline all-MiniLM-L6-v2; a hub id (BAAI/bge-base-en-v1.5) on GPU

# %% [markdown]
# # 06 · ACQO Stage I: learning to decompose, rewarded by the best subset
#
# *Paper:* [When Should I Search More: Adaptive Complex Query Optimization with Reinforcement Learning](https://arxiv.org/abs/2601.21208) (Wen, Deng, Wei, Chen, Qiao and Sun; arXiv:2601.21208, 2026).
#
# ACQO (Adaptive Complex Query Optimisation) lets the policy decide whether a question is
# searched as one query or split into up to three sub-queries (joined by `%%`). Every
# sub-query is retrieved, the lists are merged by Rank-Score Fusion (RSF, ACQO Eq. 1-2; see
# notebook 03), and the merged list is scored.
#
# Training has two stages (ACQO Sec. 3.4). This notebook runs **Stage I**, the
# *exploration* stage: every training question, and a forgiving reward that scores the
# **best non-empty subset** of the sub-queries the model wrote (Eq. 6):
#
# $$ G^{(I)}(\hat{\mathcal Q}) = \max_{\hat{\mathcal Q}' \in \mathcal P(\hat{\mathcal Q})\setminus\emptyset}
#    S\big(\mathcal R_k(\hat{\mathcal Q}')\big),\qquad
#    S(\mathcal R) = \sum_{i=1}^{n} \eta^{i}\,\Phi(r_i)\cdot\mathbb 1_{\text{format}}
#    + \delta\,(1-\mathbb 1_{\text{format}}) $$
#
# where $r_1 \le r_2 \le \dots$ are the ranks of the gold paragraphs in the fused list and
# $\Phi$ maps rank 1..10 linearly to 2..1 and rank 10..100 to 1..0 (Eq. 3). A sub-query
# that adds nothing costs nothing under this reward (the subset without it scores the
# same), so the model is free to try splits. Notebook 07 filters the questions by how hard
# they remain (Eq. 7-8) and trains Stage II on the fused list of *all* sub-queries.
#
# Settings are far smaller than the paper's (Qwen2.5-3B, batch 256, 3 epochs of Stage I and
# 6 of Stage II over about half of HotpotQA's 90k training questions, App. A): the profile name is drawn on every figure.
#
# **What you will learn:** how Stage I's reward treats a split, why most training
# questions leave nothing to learn, how a cold start can seed useful splits, and how to read
# a run's curves for whether it learned anything at all.

# %%
import time

from qrlib import session

S = session.start("06_acqo_stage1", run_dir=run_dir, figures_dir=figures_dir, tables_dir=tables_dir,
                  cache_dir=cache_dir, seed=seed, torch_threads=torch_threads, rollouts=rollouts,
                  dense_model=dense_model)
run_dir, figures_dir, tables_dir, out_dir, record = (S.run_dir, S.figures_dir, S.tables_dir,
                                                     S.out_dir, S.record)

import pandas as pd
import torch
from IPython.display import Markdown

from qrlib import plots
from qrlib.core.io import save_json, save_table
from qrlib.data import datasets as qdata
from qrlib.generation import prompts
from qrlib.methods.acqo import stage1_study as st1
from qrlib.methods.acqo import study
from qrlib.methods.acqo.artifacts import Stage1Record
from qrlib.rl.health import health_report
from qrlib.rl.train import load_config, train
from qrlib.eval.findings import scoreboard_sentence

print(f"profile={profile} model={model} torch threads={torch.get_num_threads()}")

# %% [markdown]
# ## 1. Training questions and corpus
#
# The train splits of 2WikiMultihopQA-mini and HotpotQA-large (see each folder's
# `PROVENANCE.md`: both splits are fixed by a hash of the question id, so the test
# questions used in notebook 07 are never trained on). Both sets are pooled into one
# training set over the union of their paragraph corpora; in small profiles each corpus is
# cut to the judged paragraphs of the chosen questions plus `n_distractors` others. The
# prompt the policy sees is printed last.

# %%
TRAIN_ROWS, CORPUS, QRELS, SIZES = qdata.pooled_subsets(
    train_datasets, "train", n_queries=n_train_queries, n_distractors=n_distractors, seed=seed,
    data_dir=data_dir)
for name, (nq, nd) in SIZES.items():
    print(f"{name}: {nq} training questions, {nd} paragraphs")
print(f"pooled: {len(TRAIN_ROWS)} questions, {len(CORPUS)} paragraphs")
print(f"--- prompt {prompt} ({prompts.get(prompt).source})")
print(prompts.render(prompts.get(prompt), context="", question=TRAIN_ROWS[0]["question"])[-1]["content"])

# %% [markdown]
# ## 2. Reward environment
#
# `RewardEnv(reward="acqo_stage1")` parses each completion (`{"query": "a%%b%%c"}`, more
# than three sub-queries is a format failure), retrieves every sub-query in one batched
# call, fuses each rollout's lists with RSF and scores every non-empty subset (Eq. 6).
# BM25 uses $k_1 = 1.2$, $b = 0.75$; the dense reward searches an HNSW index, as ACQO
# trains against an approximate index (App. A.1); evaluation in notebook 07 is exact.
#
# `SubqueryProbe` adds to each rollout's record the nDCG@10 of its best *single*
# sub-query, so the log can draw ACQO Fig. 4: fused list vs best single sub-query.
#
# Four answers to the first training question show the reward: the question as it is, the
# question plus one extra sub-query (by Eq. 6 it can only score as high or higher, since
# the subset without the extra query is also scored), four sub-queries and no JSON. The
# last two break the format and should get $\delta = -1$ (Eq. 5).

# %%
RETRIEVERS = {kind: study.train_retriever(kind, CORPUS, cache_dir=cache_dir, hnsw_m=hnsw_m,
                                          ef_construction=hnsw_ef_construction)
              for kind in retrievers}  # one index per retriever kind, shared by every step below


def make_env(kind):
    return st1.stage1_env(RETRIEVERS[kind], QRELS, reward_k=reward_k, eta=eta, delta=delta)


DEMO_REWARDS, demo_table = st1.demo_rewards(make_env(retrievers[0]), TRAIN_ROWS[0])
print(DEMO_REWARDS)
demo_table

# %% [markdown]
# ### Stage I's questions: the weaker share (ACQO App. B)
#
# On HotpotQA, ACQO drops the higher-performing half of the training questions before
# Stage I ("given the large training set size and relatively high initial performance"):
# a question its retriever already answers well leaves nothing to learn, and copying it
# is optimal. Each question is scored with the Stage I reward of the question searched as
# it is; the lowest-scoring `stage1_share` of them are Stage I's training questions
# (1.0 keeps all, as ACQO does on TopiOCQA). Stage II (notebook 07) filters the whole pool
# again by the Stage I model's own $\tau(q)$.

# %%
STAGE1_ROWS, RAW_STAGE1 = {}, {}
for kind in retrievers:  # Stage I's own reward, without the probe
    STAGE1_ROWS[kind], RAW_STAGE1[kind] = st1.weaker_rows(make_env(kind).env, TRAIN_ROWS,
                                                          stage1_share, label=kind)
POOL = [r for r in TRAIN_ROWS if any(r in rows for rows in STAGE1_ROWS.values())]

# %% [markdown]
# ## 3. A cold start by rejection sampling (optional)
#
# An untrained 0.5B model rarely writes a *good* split: with the one-shot prompt it splits
# often, but the fused list of its sub-queries is on average worse than the question
# itself (a probe of 0.5B samples), so RL starts far from anything worth reinforcing. ACQO trains a
# 3B model from scratch; at our scale we seed it the way rejection-sampling fine-tuning
# does (ACQO Table 9 is the related SFT baseline):
#
# 1. the untrained model samples `warm_start_samples` decompositions of every training
#    question;
# 2. each is scored as the test will score it: RSF over *all* its sub-queries, the
#    Stage II score $S(\mathcal R_k(\hat{\mathcal Q}))$ of Eq. 9 with no top-rank bonus;
# 3. a question's target is its best sample **if that beats the question searched as it
#    is**, else the unchanged question (`{"query": "<question>"}`): the model is shown both
#    when a split helps and when to leave the question alone;
# 4. `sft_steps` of supervised fine-tuning on these targets (TRL `SFTTrainer`, LoRA), then
#    Stage I RL continues from that adapter.
#
# The targets use the training questions' qrels only, never the test set's. With
# `warm_start_samples = 0` this section is skipped and Stage I starts from the untrained
# model, as in the paper. Two levers, both off by default:
# `warm_start_rule_candidate` adds the model-free split of notebook 07's rule row (the
# question plus `qrlib.methods.bandits.decompose.heuristic_split`) to each question's
# candidates, so a question can get a good split as target even when none of the model's
# samples was one (it is off in every profile: a cold start that teaches the rule split
# ends at the rule row, and the table below reports the share of each kind of target);
# `warm_start_copy_targets = False` drops the "leave it unchanged" targets, so SFT only
# shows improving splits (with many copy targets the cold start teaches copying, and the
# Stage I groups then have identical rollouts).

# %%
WARM_ROWS = {kind: list(STAGE1_ROWS[kind]) for kind in retrievers}
WARM_TABLE, TARGETS, SFT_QUESTIONS = pd.DataFrame(), {}, {}
if warm_start_samples:
    ROLLS, CANDS, gen_s = st1.sample_candidates(
        model, POOL, prompt, n=warm_start_samples, rule=warm_start_rule_candidate,
        prefill=prefill, temperature=warm_start_temperature, top_p=top_p,
        max_new_tokens=max_completion_length, stop=list(stop), seed=seed, autocast=gen_autocast)
    rows_w = []
    for kind in retrievers:
        env = st1.copy_env(RETRIEVERS[kind], QRELS, reward_k=reward_k, eta=eta, delta=delta)
        TARGETS[kind], WARM_ROWS[kind], row = st1.choose_targets(
            STAGE1_ROWS[kind], CANDS, ROLLS, env, copy_targets=warm_start_copy_targets)
        rows_w.append({"retriever": kind, **row, "generation s": round(gen_s, 1)})
        save_json(TARGETS[kind], out_dir / f"warm_start_targets_{kind}.json")
        SFT_QUESTIONS[kind] = sum(t["sampled"] for t in TARGETS[kind].values())
    WARM_TABLE = pd.DataFrame(rows_w)
    save_table(WARM_TABLE, "06_warm_start", tables_dir,
               caption=f"Rejection-sampling cold start: {warm_start_samples} sampled "
                       f"decompositions per training question (untrained {model}), scored "
                       f"by the fused list of all sub-queries; a question's SFT target is its "
                       f"best sample when that beats the question as it is; profile {profile}")
    display(st1.target_examples(STAGE1_ROWS[retrievers[0]], TARGETS[retrievers[0]], n_examples))
WARM_TABLE

# %% [markdown]
# ## 4. Stage I training (DAPO)
#
# One LoRA adapter per retriever, trained with TRL's `GRPOTrainer` under the DAPO preset
# (token-level loss, clip range [0.2, 0.28], no KL term), as ACQO A.2 does. The answer is
# prefilled with `{"query": "` so every rollout starts in the right format, and the prompt
# carries worked examples of one, three and two queries (`acqo/decompose-fewshot`):
# without any the untrained model copies the question and most groups of rollouts have
# identical rewards (62 % of groups in a probe), from which GRPO learns nothing; with a
# single three-part example it splits nearly every question in three, whatever helps.
# The run's record (`Stage1Record`) hands the adapters and settings to notebook 07.

# %%
SUMMARIES, CONFIGS = {}, {}
for kind in retrievers:
    cfg = load_config(dict(
        name=f"acqo-stage1-{kind}", run_dir=str(run_dir), model=model, prompt=prompt,
        prefill=prefill, reward="acqo_stage1", algorithm="dapo", max_steps=train_steps,
        prompts_per_step=prompts_per_step, num_generations=num_generations,
        max_completion_length=max_completion_length, temperature=temperature, top_p=top_p,
        learning_rate=learning_rate, lora_r=lora_r, lora_alpha=2 * lora_r,
        dynamic_sampling=dynamic_sampling, save_steps=max(1, train_steps // 4), seed=seed,
        retriever=kind, stop=list(stop), sft_steps=sft_steps if warm_start_samples else 0,
        sft_learning_rate=sft_learning_rate))
    t0 = time.perf_counter()
    SUMMARIES[kind] = s = train(cfg, env=make_env(kind), rows=WARM_ROWS[kind])
    s["wall_seconds"] = round(time.perf_counter() - t0, 1)
    CONFIGS[kind] = cfg.name
    ds = s.get("dynamic_sampling") or {}
    print(f"{kind}: {s['steps']} DAPO steps in {s['train_seconds'] / 60:.1f} min ({s['dtype']}); "
          f"dynamic sampling redrew groups at {ds.get('steps_fired', 0)} steps "
          f"({ds.get('groups_replaced', 0)} groups replaced)")
_ = Stage1Record(summaries=SUMMARIES, train_rows=TRAIN_ROWS, prompt=prompt, prefill=prefill,
                 train_datasets=train_datasets, corpus_ids=sorted(CORPUS), eta=eta, delta=delta,
                 reward_k=reward_k, n_distractors=n_distractors,
                 max_completion_length=max_completion_length,
                 warm_start_samples=warm_start_samples, sft_steps=sft_steps,
                 sft_questions=SFT_QUESTIONS).save(out_dir)

# %% [markdown]
# ### Training health
#
# Per step and run (`qrlib.rl.health`): the reward, the shares of rollouts that are
# well-formed and that hit the token budget, the share that copy the input query (*copy*)
# or repeat one of the prompt's own examples or placeholders (*echo*), and the share of
# groups whose rewards are all equal (no GRPO signal). A run has **collapsed** when its
# copy or echo share is above 0.9 over its last quarter of steps.

# %%
HEALTH, health_lines = health_report(SUMMARIES, "06_health", tables_dir=tables_dir,
                                     figures_dir=figures_dir, profile=profile, setting=model)
print("\n".join(health_lines))

# %% [markdown]
# ## 5. Training curves (ACQO Fig. 4)
#
# Per step: the mean reward, the mean number of sub-queries, and the nDCG@10 of the fused
# list next to that of the best single sub-query. ACQO reports that the number of
# sub-queries first rises (exploration) and then settles, and that the fused list ends up
# above the best single sub-query. Two more panels say whether the step could teach
# anything: the share of groups whose 8 rollouts all got the same reward (their GRPO
# advantages are all zero; DAPO's dynamic sampling replaces them when it is on) and the
# share of well-formed rollouts (a reward that mostly measures format is not a retrieval
# signal).

# %%
LOGS = {k: pd.read_csv(run_dir / "rl" / CONFIGS[k] / "log.csv") for k in retrievers}
_ = plots.save_figure(st1.curves_figure(LOGS), "06_stage1_curves", figures_dir,
                      caption="ACQO Stage I training curves: reward, sub-queries per rollout, fused "
                              "vs best single sub-query nDCG@10 (ACQO Fig. 4), share of groups "
                              "with zero reward spread, format validity",
                      profile=profile, setting=f"{'+'.join(train_datasets)} train, {model}; "
                                               f"from the logs: {study.logs_setting(LOGS)}")

# %% [markdown]
# The same curves in numbers, first against last quarter of the steps: a run that learned
# shows a higher reward and fused nDCG@10 in its last quarter.

# %%
CURVE_TABLE = st1.curve_summary(LOGS)
save_table(CURVE_TABLE, "06_stage1_curve_summary", tables_dir,
           caption=f"ACQO Stage I, first vs last quarter of training; profile {profile}")
CURVE_TABLE

# %% [markdown]
# ## 6. Rollouts
#
# A few rollouts of the last steps, with their Stage I reward.

# %%
pd.set_option("display.max_colwidth", 160)
st1.last_rollouts(run_dir, CONFIGS, n_examples)

# %% [markdown]
# ## What we found
#
# Built from `06_stage1_curve_summary` and `06_health` of this run:

# %%
board = scoreboard_sentence("06_acqo_stage1", tables_dir)
sentences = st1.findings_sentences(CURVE_TABLE, HEALTH, retrievers)
display(Markdown(" ".join(sentences[:5] + ([board] if board else []))))

# %% [markdown]
# The last cell stores the numbers the tests read (the format gate, the questions and
# steps of each run, the cold start's shares, the first and last quarter); it prints nothing.

# %%
record("demo.four_subqueries_reward", DEMO_REWARDS[2])  # > 3 sub-queries: format failure
record("demo.no_json_reward", DEMO_REWARDS[3])
for kind in retrievers:
    record(f"{kind}.stage1_questions", len({r["qid"] for r in STAGE1_ROWS[kind]}))
    record(f"{kind}.steps", SUMMARIES[kind]["steps"])
for _, r in WARM_TABLE.iterrows():
    record(f"{r.retriever}.warm.target_is_sample", r["target is a sample"])
    record(f"{r.retriever}.warm.format_valid", r["format-valid samples"])
for key, value in st1.curve_records(CURVE_TABLE).items():
    record(key, value)
