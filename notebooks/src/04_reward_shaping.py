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
cache_dir = None  # shared cache (unused: BM25 only; declared for the runner)
seed = 0  # seed for query subsets and the pseudo-rollout perturbations
data_dir = None  # offline data root (None: qrlib.data.datasets's lookup order)
dataset = "scifact"  # BEIR collection the pseudo-rollouts are scored on
split = "test"  # qrels split
n_queries = None  # queries (None: all of the split)
n_distractors = None  # distractor docs beside the judged ones (None: whole corpus)
retriever = "bm25"  # retriever kind (qrlib.retrieval.retrievers.build_retriever)
group_size = 8  # rollouts per query (ACQO App. A uses K of 8; TRL num_generations)
p_malformed = 0.1  # share of pseudo-rollouts whose output format is broken on purpose
k = 10  # nDCG cut-off for the nDCG-based rewards
copy_penalties = [0.0, 0.01, 0.05, 0.1]  # SAGE Eq. 3 p values compared (paper: 0.05)
dense_model = "minilm"  # encoder of the dense retriever: offline all-MiniLM-L6-v2; a hub id (BAAI/bge-base-en-v1.5) on GPU

# %% [markdown]
# # 04 · Reward shaping: what each paper's reward says about a rollout
#
# *Papers:* [DeepRetrieval: Hacking Real Search Engines and Retrievers with Large Language Models via Reinforcement Learning](https://arxiv.org/abs/2503.00223) (Jiang, Lin, Cao, Tian, Kang, Wang, Sun and Han; arXiv:2503.00223, 2025); [When Should I Search More: Adaptive Complex Query Optimization with Reinforcement Learning](https://arxiv.org/abs/2601.21208) (Wen, Deng, Wei, Chen, Qiao and Sun; arXiv:2601.21208, 2026); [SAGE: Strategy-Adaptive Generation Engine for Query Rewriting](https://arxiv.org/abs/2506.19783) (Wang, Gong, Zhang and Wang; arXiv:2506.19783, 2025); [Annotation-Free Reinforcement Learning Query Rewriting via Verifiable Search Reward](https://arxiv.org/abs/2507.23242) (Cha, Kim, Hahn, Kim, Han and Jeon; arXiv:2507.23242, 2025).
#
# An RL query optimiser is only as good as its reward. The four papers reward the same
# thing — "the rewritten query retrieved the gold documents high" — in very different
# shapes: step functions of recall or rank (DeepRetrieval), a dense piecewise-linear rank
# score with decay and a format gate (ACQO), group-relative shaping by strategy or against a
# median (SAGE), and nDCG plus a group-normalised format penalty (RL-QR). This notebook
# plots those shapes, then scores realistic *pseudo-rollouts* — perturbations of real
# queries, searched with BM25 on SciFact — with every registered reward to see how they
# distribute and how often a GRPO group gets **no learning signal at all** (all rewards
# equal; TRL logs this as `frac_reward_zero_std`).
#
# Every reward goes through `qrlib.rl.env.RewardEnv`, the same object the trainer uses.

# %%
import random
import time
from pathlib import Path

from qrlib import session

S = session.start("04_reward_shaping", run_dir=run_dir, figures_dir=figures_dir,
                  tables_dir=tables_dir, cache_dir=cache_dir, seed=seed,
                  dense_model=dense_model)
run_dir, figures_dir, tables_dir, record = S.run_dir, S.figures_dir, S.tables_dir, S.record

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from qrlib import plots
from qrlib.rl import rewards as R
from qrlib.methods.deepretrieval import rewards as R_dr
from qrlib.methods.acqo import rewards as R_acqo
from qrlib.methods.sage import rewards as R_sage
from qrlib.methods.rlqr import rewards as R_rlqr
from qrlib.data.datasets import load_dataset, subset
from qrlib.rl.env import RewardEnv
from qrlib.retrieval.retrievers import build_retriever
from qrlib.core.io import save_json, save_table

rng = random.Random(seed)
smaller = n_queries is not None or n_distractors is not None
note = " (subset: smaller than the paper's setting)" if smaller else ""
pd.DataFrame(R.list_rewards())[["name", "level", "source", "summary", "params"]]

# %% [markdown]
# ## 1 · The shapes
#
# **ACQO Eq. 3** maps the rank $r$ of a gold document to a score that falls linearly from 2
# (rank 1) to 1 (rank 10) and from 1 to 0 (rank 100):
# $\Phi(r) = f_{[1,10]\to[1,2]}(r)\,\mathbb{I}_{[1,10]}(r) + f_{[10,100]\to[0,1]}(r)\,\mathbb{I}_{[10,100]}(r)$.
# Stage II (**Eq. 10**) adds a bonus for the top $k^*$ ranks:
# $\Phi'(r) = \Phi(r) + \lambda\,\mathbb{I}_{r\le k^*}/\log_2(r+1)$.
# Several gold documents are combined with a decay (**Eq. 4**) $s(r_i) = \eta^i\,\Phi(r_i)$,
# $i = 1..n$ over the gold documents in rank order, and the format gate (**Eq. 5**) replaces
# the whole sum by $\delta<0$ when the output format is broken.
#
# **DeepRetrieval Table 8** uses step functions: recall tiers (literature search) and the
# rank of the first answer-bearing document (evidence seeking).

# %%
fig, axes = plt.subplots(1, 4, figsize=(17, 3.6))
r = np.arange(1, 121)
axes[0].plot(r, [R_acqo.phi(x) for x in r], label=r"$\Phi(r)$ (Eq. 3)")
axes[0].plot(r, [R_acqo.phi_prime(x, lam=1.0, k_star=3) for x in r], "--",
             label=r"$\Phi'(r)$, $\lambda=1, k^*=3$ (Eq. 10)")
axes[0].set_xscale("log"); axes[0].set_xlabel("rank r"); axes[0].legend(fontsize=8)
axes[0].set_title("ACQO rank score")
i = np.arange(1, 7)
for eta in (0.6, 0.8, 1.0):
    axes[1].plot(i, [eta ** j * R_acqo.phi(1) for j in i], "o-", label=f"eta={eta}")
axes[1].set_xlabel("i (i-th gold document, all at rank 1)")
axes[1].set_ylabel(r"$\eta^i\Phi(1)$"); axes[1].legend(fontsize=8)
axes[1].set_title("ACQO decay (Eq. 4)")
rec = np.linspace(0, 1, 401)
axes[2].step(rec, [R_dr.recall_tier_reward(x) for x in rec], where="post")
axes[2].set_xlabel("recall@K"); axes[2].set_title("DeepRetrieval recall tiers")
ranks = np.unique(np.logspace(0, np.log10(5000), 300).astype(int))
axes[3].step(ranks, [R_dr.answer_rank_tier_reward(x) for x in ranks], where="post")
axes[3].set_xscale("log"); axes[3].set_xlabel("rank of first answer hit")
axes[3].set_title("DeepRetrieval answer-rank tiers")
fig.tight_layout()
_ = plots.save_figure(fig, "04_reward_shapes", figures_dir,
                  caption="ACQO Phi and Phi' (Eq. 3, 10), eta-decay (Eq. 4), DeepRetrieval "
                          "recall and answer-rank tiers (Table 8). Pure functions, no data.",
                  profile=profile)

# %% [markdown]
# ## 2 · Pseudo-rollouts on real ranked lists
#
# Without a trained policy we imitate a group of $G$ rollouts per query by perturbing the
# real query in ways a small model does: copy it unchanged, drop words, keep keywords,
# shuffle, truncate, add noise words from another query, expand it with words from a
# top-ranked document (pseudo-relevance feedback — often helpful), or split it into two
# sub-queries (ACQO). Each perturbation type is mapped to the SAGE strategy it resembles, and
# a share `p_malformed` of rollouts is wrapped in a broken output format so the format gates
# fire. The same queries are wrapped in each method's output format, so differences between
# rewards come from the reward's shape only.

# %%
ds = load_dataset(dataset, split, data_dir=data_dir)
if smaller:
    ds = subset(ds, n_queries=n_queries, n_distractors=n_distractors, seed=seed)
t0 = time.perf_counter()
ret = build_retriever(retriever, ds.corpus)
print(f"{dataset}: {len(ds.queries)} queries, {len(ds.corpus)} docs; "
      f"{retriever} index {time.perf_counter() - t0:.1f}s")
qids = sorted(ds.queries)
first_docs = dict(zip(qids, ret.search([ds.queries[q] for q in qids], 3)))
all_words = [w for q in qids for w in ds.queries[q].split()]

def prf_words(q, n=6):
    """n random words from one of the query's top-3 BM25 documents (pseudo-relevance feedback)."""
    if not first_docs[q]:
        return []
    words = ds.doc_text(rng.choice(first_docs[q])[0]).split()[:60]
    return rng.sample(words, min(n, len(words)))


OPS = {  # name -> (function(words, qid) -> list of sub-query word lists, SAGE strategy)
    "copy": (lambda w, q: [w], 4),
    "drop30": (lambda w, q: [[x for x in w if rng.random() > 0.3] or w[:1]], 4),
    "keywords": (lambda w, q: [sorted(w, key=len, reverse=True)[:3]], 4),
    "shuffle": (lambda w, q: [rng.sample(w, len(w))], 3),
    "truncate": (lambda w, q: [w[: max(1, len(w) // 2)]], 4),
    "noise": (lambda w, q: [w + rng.sample(all_words, 3)], 2),
    "prf": (lambda w, q: [w + prf_words(q)], 1),
    "split2": (lambda w, q: [w[: max(1, len(w) // 2)], w[max(1, len(w) // 2):] or w], 3),
}


def wrap(parts, fmt, strategy, broken):
    """One completion in a method's output format (broken on purpose when ``broken``)."""
    import json
    joined = " ".join(" ".join(p) for p in parts)
    if fmt == "acqo":
        body = json.dumps({"query": "%%".join(" ".join(p) for p in parts)})
        return body[:-3] if broken else body
    if fmt == "deepretrieval":
        ans = json.dumps({"query": joined})
        return (f"<think>rewrite</think><answer>{ans}" if broken
                else f"<think>rewrite</think><answer>{ans}</answer>")
    if fmt == "sage":
        body = json.dumps({"query": joined, "strategy": strategy})
        return f"<think>s{strategy}</think><answer>{body[:-2] if broken else body}</answer>"
    # plain / RL-QR: answer tags, sometimes chatty text around them
    return (f"Here you go: {joined}" if broken else f"<answer>{joined}</answer>")


rollouts = []
for q in qids:
    words = ds.queries[q].split()
    ops = ["copy"] + [rng.choice(list(OPS)) for _ in range(group_size - 1)]
    for op in ops:
        fn, strat = OPS[op]
        rollouts.append({"qid": q, "op": op, "strategy": strat, "parts": fn(words, q),
                         "broken": rng.random() < p_malformed})
roll = pd.DataFrame(rollouts)
print(f"{len(roll)} pseudo-rollouts = {len(qids)} queries x {group_size}; "
      f"{roll.broken.mean():.1%} with a broken format")
roll.op.value_counts()

# %% [markdown]
# ## 3 · Scoring every rollout with every reward
#
# One `RewardEnv` per reward, called exactly as TRL calls a reward function:
# `env(prompts, completions, qid=[...], query=[...])`. Group-level rewards (SAGE, RL-QR)
# group the rollouts by `qid`. Parameters follow the papers where they give them
# (ACQO HotpotQA setting $\eta=0.6$; Stage II $k^*=3$ as for TopiOCQA so the bonus is
# visible; SAGE $p=0.05$; RL-QR nDCG@3).

# %%
REWARDS = {  # name -> (reward, completion format, params)
    "ndcg@10": ("ndcg", "plain", {"k": k}),
    "DeepRetrieval nDCG+format": ("deepretrieval_ndcg", "deepretrieval", {"k": k}),
    "DeepRetrieval recall tiers": ("deepretrieval_recall", "deepretrieval", {"k": 100}),
    "DeepRetrieval answer-rank tiers": ("deepretrieval_answer_rank", "deepretrieval", {}),
    "ACQO Stage I": ("acqo_stage1", "acqo", {"eta": 0.6}),
    "ACQO Stage II": ("acqo_stage2", "acqo", {"eta": 0.6, "lam": 1.0, "k_star": 3}),
    "SAGE direct": ("sage_direct", "sage", {"k": k, "p": 0.05}),
    "SAGE SCS": ("sage_scs", "sage", {"k": k, "p": 0.05}),
    "SAGE CRS": ("sage_crs", "sage", {"k": k, "p": 0.05}),
    "RL-QR": ("rlqr", "plain", {"k": 3}),
}
qcol = [ds.queries[q] for q in roll.qid]
scores, timings, envs = {}, {}, {}
for label, (name, fmt, params) in REWARDS.items():
    comps = [wrap(p, fmt, s, b) for p, s, b in zip(roll.parts, roll.strategy, roll.broken)]
    env = RewardEnv(ret, ds.qrels, reward=name, fmt=fmt, queries=ds.queries, **params)
    t0 = time.perf_counter()
    scores[label] = env(prompts=None, completions=comps, qid=list(roll.qid), query=qcol)
    timings[label] = (time.perf_counter() - t0) / len(comps)
    envs[label] = env
sc = pd.DataFrame(scores)
sc["qid"], sc["op"] = roll.qid.values, roll.op.values
envs["ACQO Stage II"].records_frame().head(8)

# %%
def zero_std_share(col):
    return sc.groupby("qid")[col].agg(lambda v: R.reward_variance_zero(v)).mean()


stats = pd.DataFrame({
    "mean": sc[list(REWARDS)].mean(), "std": sc[list(REWARDS)].std(),
    "min": sc[list(REWARDS)].min(), "max": sc[list(REWARDS)].max(),
    "share < 0": (sc[list(REWARDS)] < 0).mean(),
    "mean within-group std": sc.groupby("qid")[list(REWARDS)].std(ddof=0).mean(),
    "frac_reward_zero_std": pd.Series({c: zero_std_share(c) for c in REWARDS}),
    "ms per rollout": pd.Series(timings) * 1e3,
})
save_table(stats.round(4).reset_index(names="reward"), "04_reward_stats", tables_dir,
           caption=f"Reward distribution over {len(roll)} pseudo-rollouts ({group_size} per "
                   f"query, {dataset} {split}, {retriever}); frac_reward_zero_std = share of "
                   f"groups with identical rewards; profile {profile}{note}.")
stats.round(3)

# %% [markdown]
# `frac_reward_zero_std` is the share of queries whose $G$ rollouts all earned the same
# reward: GRPO's advantage $(r - \bar r)/\sigma$ is zero for all of them, so these groups
# contribute no gradient. Step-function rewards (the tiers) produce many such groups — every
# rollout missing the gold document lands on the same floor — while dense rank scores and
# nDCG separate rollouts whenever the gold document moves. Normalising against the group
# (CRS, RL-QR) changes the scale but cannot create variance that is not there. One caveat
# of this set-up: every group here contains one verbatim copy of the query, so SAGE's copy
# penalty alone separates that rollout from the others — a real policy that never copies
# would not get this extra variance.

# %%
fig, axes = plt.subplots(2, 5, figsize=(18, 6.5))
for ax, label in zip(axes.ravel(), REWARDS):
    ax.hist(sc[label], bins=30, color="C0")
    ax.set_title(f"{label}\nzero-std groups: {stats.loc[label, 'frac_reward_zero_std']:.0%}",
                 fontsize=9)
fig.tight_layout()
_ = plots.save_figure(fig, "04_reward_distributions", figures_dir,
                  caption=f"Distribution of each reward over the same pseudo-rollouts "
                          f"({dataset} {split}, {retriever}, {group_size} per query, "
                          f"{p_malformed:.0%} broken formats); profile {profile}{note}.",
                  profile=profile)

# %%
by_op = sc.groupby("op")[list(REWARDS)].mean()
by_op.round(3)

# %% [markdown]
# The table above shows which perturbations each reward prefers. Pseudo-relevance-feedback
# expansion is the one perturbation that tends to help BM25 on SciFact; shuffling changes
# nothing for a bag-of-words retriever, so it scores exactly like the copy — except under
# SAGE's copy penalty, which only fires on an *identical* string.

# %% [markdown]
# ## 4 · A worked SAGE group
#
# SCS (SAGE **Eq. 1**) groups the rollouts of one query by the strategy they declared,
# ranks the strategies by their mean nDCG@10 and divides each rollout's reward by its
# strategy's rank: $r_{\mathrm{SCS},i} = r_{\mathrm{orig},i} / \mathrm{rank}(s_i)$.
# CRS (**Eq. 2**) subtracts the group median: $r_{\mathrm{CRS},i} = r_{\mathrm{orig},i} -
# \mathrm{median}_j\, r_{\mathrm{orig},j}$. The copy penalty (**Eq. 3**) subtracts $p$ from a
# rollout whose query equals the original.

# %%
sage_rec = envs["SAGE SCS"].records_frame()
sage_rec["op"] = roll.op.values
var = sage_rec.groupby("qid")["part_ndcg"].agg(lambda v: v.nunique())
pick = var.idxmax()
g = sage_rec[sage_rec.qid == pick].copy()
strats = [None if pd.isna(s) else int(s) for s in g.strategy]
ranks = R_sage.strategy_ranks(list(g.part_ndcg), strats)
means = {s: np.mean([v for v, t in zip(g.part_ndcg, strats) if t == s]) for s in set(strats)}
g["strategy"] = pd.array(strats, dtype="Int64")
g["strategy mean nDCG"] = [means[s] for s in strats]
g["strategy rank"] = [ranks[s] for s in strats]
g["SCS (Eq. 1)"] = g["part_shaped"]
g["CRS (Eq. 2)"] = R_sage.sage_crs(list(g.part_ndcg))
g["copy"] = g["part_copy"].astype(bool)
g["final SCS reward (Eq. 3, p=0.05)"] = g["reward"]
print("query:", ds.queries[pick])
cols = ["op", "queries", "format_ok", "strategy", "part_ndcg", "strategy mean nDCG",
        "strategy rank", "SCS (Eq. 1)", "CRS (Eq. 2)", "copy", "final SCS reward (Eq. 3, p=0.05)"]
worked = g[cols].rename(columns={"part_ndcg": "nDCG@10"}).reset_index(drop=True)
save_table(worked.round(4), "04_sage_worked_group", tables_dir,
           caption=f"One SAGE group worked through SCS, CRS and the copy penalty "
                   f"({dataset}, query {pick}); profile {profile}.")
worked.round(3)

# %% [markdown]
# ## 5 · The copy penalty
#
# SAGE observed that a policy can "win" by returning the input unchanged when the retriever
# already does well on it. For each $p$ we count the groups in which a *copy* is among the
# best-rewarded rollouts (with ties, GRPO gives every maximiser the same advantage), under
# the direct nDCG reward.

# %%
base = envs["SAGE direct"].records_frame()
rows = []
for p in copy_penalties:
    env_p = RewardEnv(ret, ds.qrels, reward="sage_direct", fmt="sage", queries=ds.queries,
                      k=k, p=p)
    comps = [wrap(pp, "sage", s, b) for pp, s, b in zip(roll.parts, roll.strategy, roll.broken)]
    rw = np.array(env_p(None, comps, qid=list(roll.qid), query=qcol))
    rec = env_p.records_frame()
    rec["r"] = rw
    best_is_copy, copy_adv = [], []
    for q, grp in rec.groupby("qid"):
        top = grp.r.max()
        best_is_copy.append(bool(((grp.r >= top - 1e-12) & (grp.part_copy > 0)).any()))
        adv = (grp.r - grp.r.mean()) / (grp.r.std(ddof=0) + 1e-4)
        copy_adv += list(adv[grp.part_copy > 0])
    rows.append({"p": p, "share of groups where a copy is a top rollout": np.mean(best_is_copy),
                 "mean GRPO advantage of copies": float(np.mean(copy_adv)),
                 "mean reward of copies": rec.r[rec.part_copy > 0].mean(),
                 "mean reward of rewrites": rec.r[rec.part_copy == 0].mean()})
copy_tab = pd.DataFrame(rows)
save_table(copy_tab.round(4), "04_copy_penalty", tables_dir,
           caption=f"Effect of SAGE's copy penalty p (Eq. 3) on pseudo-rollouts; advantage = "
                   f"(r - group mean) / (group std + 1e-4) as in GRPO; profile {profile}{note}.")
fig, ax = plt.subplots(figsize=(5, 3.4))
ax.plot(copy_tab.p, copy_tab["mean GRPO advantage of copies"], "o-")
ax.axhline(0, color="grey", lw=0.8)
ax.set_xlabel("copy penalty p"); ax.set_ylabel("mean advantage of copy rollouts")
plots.save_figure(fig, "04_copy_penalty", figures_dir,
                  caption=f"Mean GRPO advantage of rollouts that copy the input, as SAGE's copy "
                          f"penalty p grows (Eq. 3); profile {profile}{note}.", profile=profile)
copy_tab.round(3)

# %% [markdown]
# ## 6 · Readings the papers leave open
#
# Some values the papers use without pinning them down are parameters here; this section
# shows what each choice changes, on the pseudo-rollouts above where they can show it and
# on a toy case otherwise.
#
# * **ACQO Eq. 4, where $i$ starts.** Read literally ($i = 1..n$, `first_index=1`, our
#   default) even the best gold document is decayed by $\eta$; starting at $i = 0$ leaves it
#   whole, so one gold document at rank $r$ earns $\Phi(r)$, which is ConvSearch-R1's reward.
#   For a well-formed rollout the second reading is the first divided by $\eta$, a pure
#   rescaling that GRPO's normalised advantage ignores. The choice therefore matters only
#   next to **$\delta$** (Eq. 5 says only $\delta < 0$; ours is $-1$, ConvSearch-R1's code
#   uses $-0.1$), which stays fixed and decides how far a broken rollout falls behind.
# * **RL-QR's range $[\theta, 1]$.** The non-zero format penalties of a group are brought
#   into $[\theta, 1]$, but the paper does not say how: min-max (`norm="minmax"`, default:
#   the smallest becomes $\theta$, the largest 1) or division by the group's largest,
#   floored at $\theta$ (`norm="max"`, which keeps the ratio of two penalties).
# * **The bandit paper's ε.** Table 1's ε-greedy row reads "stay on the arm after a
#   relevant document, else draw an arm uniformly", with no ε. `epsilon=0` is that rule;
#   our default 0.1 draws a random arm after a hit with probability ε, so the arm is kept
#   with probability $1 - \varepsilon (K-1)/K$.

# %%
from qrlib.methods.bandits import bandits as B


def grpo_advantage(r, groups):
    """(r - group mean) / (group std + 1e-4), as in section 5."""
    r = pd.Series(np.asarray(r, dtype=float))
    g = r.groupby(np.asarray(groups))
    return ((r - g.transform("mean")) / (g.transform(lambda v: v.std(ddof=0)) + 1e-4)).to_numpy()


open_rows = []
acqo_rec = envs["ACQO Stage II"].records_frame()
acqo_params = R.make_reward("acqo_stage2", **REWARDS["ACQO Stage II"][2]).params
acqo_bad = ~acqo_rec.format_ok.to_numpy(dtype=bool)
acqo_with_bad = pd.Series(acqo_bad).groupby(acqo_rec.qid.to_numpy()).transform("any").to_numpy()
for first_index in (1, 0):
    for delta in (-0.1, -1.0):
        r = [R_acqo.acqo_score(g, ok, eta=acqo_params["eta"], lam=acqo_params["lam"],
                          k_star=acqo_params["k_star"], delta=delta, first_index=first_index)
             for g, ok in zip(acqo_rec.gold_ranks, acqo_rec.format_ok)]
        adv = grpo_advantage(r, acqo_rec.qid)
        choice = f"first index {first_index}, delta {delta:g}"
        open_rows += [
            {"reading": "ACQO Eq. 4-5", "choice": choice, "measure": "mean reward, well-formed",
             "value": float(np.mean(np.asarray(r)[~acqo_bad]))},
            {"reading": "ACQO Eq. 4-5", "choice": choice,
             "measure": "mean GRPO advantage, broken format",
             "value": float(adv[acqo_bad].mean()) if acqo_bad.any() else float("nan")},
            {"reading": "ACQO Eq. 4-5", "choice": choice,
             "measure": "mean GRPO advantage, reward 0 beside a broken rollout",
             "value": float(adv[zero].mean()) if (zero := acqo_with_bad & ~acqo_bad
                                                  & (np.asarray(r) == 0)).any()
             else float("nan")}]

rl_rec = envs["RL-QR"].records_frame()
rl_params = R.make_reward("rlqr", **REWARDS["RL-QR"][2]).params
raw = rl_rec.part_raw_penalty.to_numpy(dtype=float)
for norm in ("minmax", "max"):
    pen = np.zeros(len(rl_rec))
    for _, idx in rl_rec.groupby("qid").indices.items():
        pen[idx] = R_rlqr.rlqr_group_penalty(raw[idx], rl_params["theta"], norm)
    r = rl_params["lambda1"] * rl_rec.part_ndcg.to_numpy(dtype=float) + rl_params["lambda2"] * pen
    hit = raw > 0
    open_rows += [
        {"reading": "RL-QR [theta, 1]", "choice": norm, "measure": "toy group 0, 2, 5, 40",
         "value": ", ".join(f"{v:.3f}" for v in R_rlqr.rlqr_group_penalty([0, 2, 5, 40], 0.1, norm))},
        {"reading": "RL-QR [theta, 1]", "choice": norm, "measure": "mean penalty, penalised rollouts",
         "value": float(pen[hit].mean()) if hit.any() else float("nan")},
        {"reading": "RL-QR [theta, 1]", "choice": norm,
         "measure": "mean GRPO advantage, penalised rollouts",
         "value": float(grpo_advantage(r, rl_rec.qid)[hit].mean()) if hit.any() else float("nan")}]

# bandit toy: one arm with 3 relevant documents in 4, three arms with none
n_docs = 20
toy_arms = [[f"g{i}" if i % 4 else f"n{i}" for i in range(n_docs)]] + [
    [f"x{a}_{i}" for i in range(n_docs)] for a in range(3)]
toy_req = B.make_request(toy_arms, {f"g{i}": 1 for i in range(n_docs) if i % 4})
for eps in (0.0, 0.1, 0.3):
    order = B.simulate(toy_req, B.Policy(f"eg{eps}", "ε-greedy", "egreedy", epsilon=eps),
                       reps=400, seed=seed)
    prec, _ = B.precision_recall(order, toy_req.rel, [0.1, 0.25])
    for b, v in zip((10, 25), prec.mean(axis=0)):
        open_rows.append({"reading": "bandit Table 1 epsilon", "choice": f"epsilon {eps:g}",
                          "measure": f"precision at {b}% budget (toy, K=4)", "value": float(v)})
open_tab = pd.DataFrame(open_rows)
open_tab["value"] = [f"{v:.4f}" if isinstance(v, float) else v for v in open_tab.value]
save_table(open_tab, "04_open_readings", tables_dir,
           caption=f"What the readings the papers leave open change: ACQO Eq. 4 first index and "
                   f"delta, RL-QR's [theta, 1] normalisation (pseudo-rollouts of section 3) and "
                   f"the bandit paper's epsilon (toy request); profile {profile}{note}.")
open_tab

# %% [markdown]
# Two rows of the ACQO block differ only in `first index`: the well-formed rewards grow by
# $1/\eta$ while $\delta$ stays, so the advantages move exactly as if $\delta$ had been
# multiplied by $\eta$. In a group with a broken rollout, a small $|\delta|$ leaves the
# well-formed rollouts that found nothing just above it, so they share its negative
# advantage; a large $|\delta|$ isolates the broken one and spares them. Peers' released code differs from their papers in
# the same quiet way; `make_reward(name, preset="released")` gives those values, each cited
# in the reward's docstring:

# %%
pd.DataFrame({f"{n} ({p})": R.make_reward(n, preset=p).params
              for n in ("deepretrieval_ndcg", "deepretrieval_sql")
              for p in ("paper", "released")}).T

# %% [markdown]
# ## Summary
#
# Saved for later notebooks and the README: reward statistics, the worked SAGE group, the
# copy-penalty table, and the reward environment's cost per rollout (parsing, one batched
# BM25 search and scoring included).

# %%
summary = {"profile": profile, "dataset": dataset, "split": split, "retriever": retriever,
           "n_queries": len(qids), "n_docs": len(ds.corpus), "group_size": group_size,
           "stats": stats.reset_index(names="reward").to_dict(orient="records"),
           "copy_penalty": copy_tab.to_dict(orient="records"),
           "open_readings": open_tab.to_dict(orient="records")}
save_json(summary, run_dir / "04_rewards" / "summary.json")
print("saved", run_dir / "04_rewards" / "summary.json")

# %% [markdown]
# ## What we found
#
# Read back from this run's tables (`04_reward_stats`, `04_copy_penalty`); the key numbers
# are also recorded for the smoke tests (`qrlib.eval.record`).

# %%
from IPython.display import Markdown

t_stats = pd.read_csv(Path(tables_dir) / "04_reward_stats.csv")
t_copy = pd.read_csv(Path(tables_dir) / "04_copy_penalty.csv")
share_col = "share of groups where a copy is a top rollout"
for r in t_stats.to_dict("records"):
    record(f"frac_zero_std.{r['reward']}", r["frac_reward_zero_std"])
for r in t_copy.to_dict("records"):
    record(f"copy_top_share.p={r['p']:g}", r[share_col])
z = t_stats.set_index("reward")["frac_reward_zero_std"].sort_values()
lines = [f"- Share of {group_size}-rollout groups with no reward spread (no GRPO signal): "
         f"lowest for {z.index[0]} ({z.iloc[0]:.2f}), highest for {z.index[-1]} "
         f"({z.iloc[-1]:.2f}); all rewards: " + ", ".join(f"{n} {v:.2f}" for n, v in z.items()) + "."]
c = t_copy.sort_values("p")
if len(c) > 1:
    lines.append(f"- SAGE's copy penalty: without it (p = {c.p.iloc[0]:g}) a verbatim copy is a "
                 f"top rollout in {c[share_col].iloc[0]:.0%} of groups; with p = {c.p.iloc[1]:g} "
                 f"in {c[share_col].iloc[1]:.0%}, and the mean GRPO advantage of copies goes from "
                 f"{c['mean GRPO advantage of copies'].iloc[0]:+.3f} to "
                 f"{c['mean GRPO advantage of copies'].iloc[-1]:+.3f} at p = {c.p.iloc[-1]:g}.")
display(Markdown("\n".join(lines)))
