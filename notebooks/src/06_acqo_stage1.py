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

# %%
import json
import time

from qrlib import session

S = session.start("06_acqo_stage1", run_dir=run_dir, figures_dir=figures_dir, tables_dir=tables_dir,
                  cache_dir=cache_dir, seed=seed, torch_threads=torch_threads, rollouts=rollouts,
                  dense_model=dense_model)
run_dir, figures_dir, tables_dir, out_dir, record = (S.run_dir, S.figures_dir, S.tables_dir,
                                                     S.out_dir, S.record)

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch

from qrlib.data import datasets as qdata
from qrlib import plots
from qrlib.generation import policy, prompts
from qrlib.retrieval import retrievers as retrieval
from qrlib.methods.acqo.artifacts import Stage1Record
from qrlib.methods.acqo.curriculum import (SubqueryProbe, generate_decompositions,
                                           rejection_targets, weaker_share)
from qrlib.methods.bandits.decompose import heuristic_split
from qrlib.rl.env import RewardEnv
from qrlib.eval.scale import fmt_scale, log_scale
from qrlib.generation.parsing import parse_completion
from qrlib.rl.train import load_config, sft_target, train
from qrlib.core.io import save_json, save_table

print(f"profile={profile} model={model} torch threads={torch.get_num_threads()}")

# %% [markdown]
# ## 1. Training questions and corpus
#
# The train splits of 2WikiMultihopQA-mini and HotpotQA-large (see each folder's
# `PROVENANCE.md`: both splits are fixed by a hash of the question id, so the test
# questions used in notebook 07 are never trained on). Both sets are pooled into one
# training set over the union of their paragraph corpora; in small profiles each corpus is
# cut to the judged paragraphs of the chosen questions plus `n_distractors` others.

# %%
TRAIN_ROWS, CORPUS, QRELS, SIZES = qdata.pooled_subsets(
    train_datasets, "train", n_queries=n_train_queries, n_distractors=n_distractors, seed=seed,
    data_dir=data_dir)
for name, (nq, nd) in SIZES.items():
    print(f"{name}: {nq} training questions, {nd} paragraphs")
print(f"pooled: {len(TRAIN_ROWS)} questions, {len(CORPUS)} paragraphs")
template = prompts.get(prompt)
print(f"--- prompt {prompt} ({template.source})")
print(prompts.render(template, context="", question=TRAIN_ROWS[0]["question"])[-1]["content"])

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

# %%
RETRIEVERS = {}  # one index per retriever kind, shared by the demo and the training run


def make_retriever(kind):
    if kind not in RETRIEVERS:
        RETRIEVERS[kind] = (
            retrieval.build_retriever("bm25", CORPUS, k1=1.2, b=0.75) if kind == "bm25" else
            retrieval.build_retriever("dense", CORPUS, index="hnsw", hnsw_m=hnsw_m,
                                      ef_construction=hnsw_ef_construction,
                                      cache_dir=cache_dir, show_progress=False))
    return RETRIEVERS[kind]


def make_env(kind):
    env = RewardEnv(make_retriever(kind), QRELS, reward="acqo_stage1", fmt="acqo",
                    k=reward_k, max_subqueries=3, lenient=True, eta=eta, delta=delta)
    return SubqueryProbe(env, k=10)


demo_env = make_env(retrievers[0])
r0 = TRAIN_ROWS[0]
demo = [f'{{"query": "{r0["question"]}"}}',
        f'{{"query": "{r0["question"]}%%{r0["question"].split()[-1]}"}}',
        '{"query": "a%%b%%c%%d"}', "no JSON at all"]
DEMO_REWARDS = demo_env(None, demo, qid=[r0["qid"]] * 4, query=[r0["question"]] * 4)
print(DEMO_REWARDS)
record("demo.four_subqueries_reward", DEMO_REWARDS[2])  # > 3 sub-queries: format failure
record("demo.no_json_reward", DEMO_REWARDS[3])
pd.DataFrame(demo_env.records)[["queries", "format_ok", "gold_ranks", "reward",
                                "part_fused_ndcg@10", "part_best_sub_ndcg@10"]]

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
for kind in retrievers:
    raw_env = make_env(kind).env  # Stage I's own reward, without the probe
    RAW_STAGE1[kind] = dict(zip([r["qid"] for r in TRAIN_ROWS], raw_env.score(
        [sft_target(r["question"], "acqo") for r in TRAIN_ROWS], [r["qid"] for r in TRAIN_ROWS])))
    keep = set(weaker_share(RAW_STAGE1[kind], stage1_share))
    STAGE1_ROWS[kind] = [r for r in TRAIN_ROWS if r["qid"] in keep]
    kept = [RAW_STAGE1[kind][q] for q in keep]
    print(f"{kind}: Stage I trains on {len(keep)} of {len(TRAIN_ROWS)} questions; the raw "
          f"question's reward {np.mean(kept):.3f} on them, "
          f"{np.mean(list(RAW_STAGE1[kind].values())):.3f} on all")
    record(f"{kind}.stage1_questions", len(keep))
POOL = [r for r in TRAIN_ROWS if any(r in rows for rows in STAGE1_ROWS.values())]

# %% [markdown]
# ## 3. A cold start by rejection sampling (optional)
#
# An untrained 0.5B model rarely writes a *good* split: with the one-shot prompt it splits
# often, but the fused list of its sub-queries is on average worse than the question
# itself (a probe of 0.5B samples), so RL starts far from anything worth reinforcing. ACQO trains a
# 3B model from scratch; at our scale we seed it the way rejection-sampling fine-tuning
# does (the third lever; ACQO Table 9 is the related SFT baseline):
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
    m, tok = policy.load_policy(model)
    t0 = time.perf_counter()
    ROLLS = generate_decompositions(m, tok, POOL, prompt, prefill=prefill,
                                    n=warm_start_samples, do_sample=True,
                                    temperature=warm_start_temperature, top_p=top_p,
                                    max_new_tokens=max_completion_length, stop=list(stop),
                                    seed=seed, autocast=gen_autocast)
    gen_s = time.perf_counter() - t0
    del m
    CANDS = [dict(r, rule=False) for r in ROLLS]
    if warm_start_rule_candidate:  # the model-free split, in the answer format of the prompt
        for r in POOL:
            subs = list(dict.fromkeys([r["question"]] + heuristic_split(r["question"], 2)))[:3]
            if len(subs) > 1:
                CANDS.append({"qid": r["qid"], "completion": json.dumps(
                    {"query": "%%".join(subs)}, ensure_ascii=False), "format_ok": True,
                    "subqueries": subs, "rule": True})
    rows_w = []
    for kind in retrievers:
        env = RewardEnv(make_retriever(kind), QRELS, reward="acqo_stage2", fmt="acqo",
                        k=reward_k, max_subqueries=3, lenient=False, eta=eta, delta=delta,
                        lam=0.0, k_star=0)
        rows_k = STAGE1_ROWS[kind]  # this retriever's Stage I questions
        mine = {r["qid"] for r in rows_k}
        CANDS_K = [c for c in CANDS if c["qid"] in mine]
        all_scores = env.score([c["completion"] for c in CANDS_K], [c["qid"] for c in CANDS_K])
        scores = [w for c, w in zip(CANDS_K, all_scores) if not c["rule"]]  # the model's own
        qids = [r["qid"] for r in rows_k]
        copies = env.score([sft_target(r["question"], "acqo") for r in rows_k], qids)
        TARGETS[kind] = targets = rejection_targets(
            [{**c, "reward": w} for c, w in zip(CANDS_K, all_scores)], dict(zip(qids, copies)))
        rule_of = {c["qid"]: c["completion"] for c in CANDS_K if c["rule"]}
        WARM_ROWS[kind] = [{**r, "sft_target": targets[r["qid"]]["completion"]
                            or (sft_target(r["question"], "acqo") if warm_start_copy_targets
                                else "")} for r in rows_k]
        chosen = [t for t in targets.values() if t["sampled"]]
        n_rule = sum(t["completion"] == rule_of.get(q) for q, t in targets.items() if t["sampled"])
        n_sub = [len(r["subqueries"]) for r in ROLLS if r["format_ok"]]
        rows_w.append({
            "retriever": kind, "questions": len(targets), "samples": len(ROLLS),
            "format-valid samples": np.mean([r["format_ok"] for r in ROLLS]),
            "sub-queries per valid sample": np.mean(n_sub) if n_sub else 0.0,
            "mean sample score": float(np.mean(scores)),
            "question-as-is score": float(np.mean(copies)),
            "questions with a target": len(chosen),
            "target is a sample": (len(chosen) - n_rule) / len(targets),
            "target is the rule split": n_rule / len(targets),
            "copy targets in SFT": (len(targets) - len(chosen)) if warm_start_copy_targets else 0,
            **{f"targets with {n} sub-quer{'y' if n == 1 else 'ies'}":
               sum(len(parse_completion(t["completion"], "acqo", lenient=True).queries) == n
                   for t in chosen) for n in (1, 2, 3)},
            "mean gain of chosen samples": float(np.mean([t["gain"] for t in chosen])) if chosen else 0.0,
            "generation s": round(gen_s, 1)})
        save_json(targets, out_dir / f"warm_start_targets_{kind}.json")
        SFT_QUESTIONS[kind] = sum(t["sampled"] for t in targets.values())
    WARM_TABLE = pd.DataFrame(rows_w)
    for _, r in WARM_TABLE.iterrows():
        record(f"{r.retriever}.warm.target_is_sample", r["target is a sample"])
        record(f"{r.retriever}.warm.format_valid", r["format-valid samples"])
    save_table(WARM_TABLE, "06_warm_start", tables_dir,
               caption=f"Rejection-sampling cold start: {warm_start_samples} sampled "
                       f"decompositions per training question (untrained {model}), scored "
                       f"by the fused list of all sub-queries; a question's SFT target is its "
                       f"best sample when that beats the question as it is; profile {profile}")
    # a few questions whose target is a sampled decomposition (first retriever)
    first = TARGETS[retrievers[0]]
    display(pd.DataFrame([{"question": r["question"], "target": first[r["qid"]]["completion"],
                           "gain over the question as is": first[r["qid"]]["gain"]}
                          for r in STAGE1_ROWS[retrievers[0]] if first[r["qid"]]["sampled"]][:n_examples]))
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
    print(kind, {k: s[k] for k in ("steps", "train_seconds", "dtype", "dynamic_sampling")})
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
from qrlib.rl.health import health_report

HEALTH, health_lines = health_report(SUMMARIES, "06_health",
                                     tables_dir=tables_dir, figures_dir=figures_dir,
                                     profile=profile, setting=model)
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
fig, axes = plt.subplots(1, 5, figsize=(21, 3.6))
for i, (kind, log) in enumerate(LOGS.items()):
    c = f"C{i}"
    axes[0].plot(log.step, log.reward, color=c, alpha=0.35)
    axes[0].plot(log.step, log.reward.rolling(4, min_periods=1).mean(), color=c, label=kind)
    if "part/n_sub" in log:
        axes[1].plot(log.step, log["part/n_sub"].rolling(4, min_periods=1).mean(), color=c,
                     label=kind)
    if "part/fused_ndcg@10" in log:
        axes[2].plot(log.step, log["part/fused_ndcg@10"].rolling(4, min_periods=1).mean(),
                     color=c, label=f"{kind}: fused list")
    if "part/best_sub_ndcg@10" in log:
        axes[2].plot(log.step, log["part/best_sub_ndcg@10"].rolling(4, min_periods=1).mean(),
                     color=c, ls="--", label=f"{kind}: best single sub-query")
    axes[3].plot(log.step, log.frac_reward_zero_std.rolling(4, min_periods=1).mean(), color=c,
                 label=kind)
    axes[4].plot(log.step, log.format_valid.rolling(4, min_periods=1).mean(), color=c,
                 label=kind)
axes[3].set(xlabel="training step", ylabel="groups with zero reward spread", ylim=(-0.05, 1.05))
axes[4].set(xlabel="training step", ylabel="format-valid rollouts", ylim=(-0.05, 1.05))
axes[0].set(xlabel="training step", ylabel="Stage I reward G(I) (rolling mean of 4)")
axes[1].set(xlabel="training step", ylabel="sub-queries per rollout")
axes[2].set(xlabel="training step", ylabel="nDCG@10 (rolling mean of 4)")
for ax in axes:
    if ax.get_legend_handles_labels()[0]:
        plots.legend_outside(ax, where="below")
fig.tight_layout()
_ = plots.save_figure(fig, "06_stage1_curves", figures_dir,
                  caption="ACQO Stage I training curves: reward, sub-queries per rollout, fused "
                          "vs best single sub-query nDCG@10 (ACQO Fig. 4), share of groups "
                          "with zero reward spread, format validity",
                  profile=profile,
                  setting=f"{'+'.join(train_datasets)} train, {model}; from the logs: "
                          + "; ".join(f"{k} {fmt_scale(log_scale(lg))}" for k, lg in LOGS.items()))

# %%
rows = []
for kind, log in LOGS.items():
    q = max(1, len(log) // 4)
    first, last = log.head(q), log.tail(q)
    for label, part in (("first quarter", first), ("last quarter", last)):
        rows.append({"retriever": kind, "steps": label,
                     "reward": part.reward.mean(),
                     "sub-queries": part.get("part/n_sub", pd.Series(dtype=float)).mean(),
                     "fused nDCG@10": part.get("part/fused_ndcg@10", pd.Series(dtype=float)).mean(),
                     "best single nDCG@10": part.get("part/best_sub_ndcg@10",
                                                     pd.Series(dtype=float)).mean(),
                     "format valid": part.format_valid.mean(),
                     "zero-spread groups": part.frac_reward_zero_std.mean(),
                     "s/step": part.step_seconds.mean()})
CURVE_TABLE = pd.DataFrame(rows)
for _, r in CURVE_TABLE.iterrows():
    tag = "first" if r.steps.startswith("first") else "last"
    record(f"{r.retriever}.{tag}.reward", r.reward)
    record(f"{r.retriever}.{tag}.sub_queries", r["sub-queries"])
for kind in retrievers:
    record(f"{kind}.steps", SUMMARIES[kind]["steps"])
save_table(CURVE_TABLE, "06_stage1_curve_summary", tables_dir,
           caption=f"ACQO Stage I, first vs last quarter of training; profile {profile}")
CURVE_TABLE

# %% [markdown]
# ## 6. Rollouts
#
# A few rollouts of the last steps, with their Stage I reward.

# %%
samples = []
for kind in retrievers:
    path = run_dir / "rl" / CONFIGS[kind] / "samples.jsonl"
    for line in path.read_text(encoding="utf-8").splitlines()[-n_examples:]:
        s = json.loads(line)
        samples.append({"retriever": kind, "step": s["step"], "question": s["query"],
                        "completion": s["completion"], "reward": s["reward"]})
pd.set_option("display.max_colwidth", 160)
pd.DataFrame(samples)

# %% [markdown]
# ## What we found
#
# Built from `06_stage1_curve_summary` and `06_health` of this run:

# %%
from IPython.display import Markdown

from qrlib.workbook.findings import scoreboard_sentence

sentences = []
for kind in retrievers:
    t = CURVE_TABLE[CURVE_TABLE.retriever == kind].set_index("steps")
    f, l = t.loc["first quarter"], t.loc["last quarter"]
    sentences.append(
        f"With {kind}, Stage I's mean reward went from {f.reward:.3f} to {l.reward:.3f} between "
        f"the first and the last quarter of training, the sub-queries per rollout from "
        f"{f['sub-queries']:.2f} to {l['sub-queries']:.2f}, and the fused nDCG@10 of the "
        f"training questions from {f['fused nDCG@10']:.3f} to {l['fused nDCG@10']:.3f} (best "
        f"single sub-query {f['best single nDCG@10']:.3f} to {l['best single nDCG@10']:.3f}).")
collapsed = HEALTH[HEALTH.collapsed.astype(bool)] if len(HEALTH) else HEALTH
sentences.append(f"{len(collapsed)} of {len(HEALTH)} Stage I runs collapsed into copying the "
                 "question or the prompt's example." if len(HEALTH) else "No run trained here.")
sentences.append("These are training-set numbers: whether the decomposer helps on held-out "
                 "questions is notebook 07's comparison.")
board = scoreboard_sentence("06_acqo_stage1", tables_dir)
display(Markdown(" ".join(sentences[:5] + ([board] if board else []))))
