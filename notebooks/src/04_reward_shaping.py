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

# %% [markdown]
# **What you will see.** The reward shapes as plain functions (section 1); a group of
# pseudo-rollouts per SciFact query (section 2) scored by ten rewards (section 3), with the
# share of groups that give GRPO nothing to learn from; one SAGE group worked by hand
# (section 4); what SAGE's copy penalty does (section 5); and what the readings the papers
# leave open change (section 6). The steps live in `qrlib.methods.reward_study`.

# %%
import time
from pathlib import Path

from qrlib import session

S = session.start("04_reward_shaping", run_dir=run_dir, figures_dir=figures_dir,
                  tables_dir=tables_dir, cache_dir=cache_dir, seed=seed,
                  dense_model=dense_model)
run_dir, figures_dir, tables_dir, record = S.run_dir, S.figures_dir, S.tables_dir, S.record

import pandas as pd
from IPython.display import Markdown

from qrlib import plots
from qrlib.core.io import save_json, save_table
from qrlib.data.datasets import load_dataset, subset
from qrlib.retrieval.retrievers import build_retriever
from qrlib.methods import reward_study as RS
from qrlib.rl import rewards as R

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
# rank of the first answer-bearing document (evidence seeking). Expect the ACQO curves to
# be continuous in the rank, the DeepRetrieval ones flat between tier boundaries.

# %%
_ = plots.save_figure(RS.plot_reward_shapes(), "04_reward_shapes", figures_dir,
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
roll = RS.pseudo_rollouts(ds, ret, group_size, p_malformed, seed)
print(f"{len(roll)} pseudo-rollouts = {len(qids)} queries x {group_size}; "
      f"{roll.broken.mean():.1%} with a broken format")
roll.op.value_counts()

# %% [markdown]
# One query's group as each format writes it (the ACQO completion of the first rollouts):

# %%
RS.completions(roll.head(3), "acqo")

# %% [markdown]
# ## 3 · Scoring every rollout with every reward
#
# One `RewardEnv` per reward, called exactly as TRL calls a reward function:
# `env(prompts, completions, qid=[...], query=[...])`. Group-level rewards (SAGE, RL-QR)
# group the rollouts by `qid`. Parameters follow the papers where they give them
# (ACQO HotpotQA setting $\eta=0.6$; Stage II $k^*=3$ as for TopiOCQA so the bonus is
# visible; SAGE $p=0.05$; RL-QR nDCG@3). The rewards compared, with their completion
# format and parameters:

# %%
REWARDS = RS.compared_rewards(k)
pd.DataFrame(REWARDS, index=["reward", "format", "params"]).T

# %% [markdown]
# Scoring keeps every environment: its `records_frame()` lists what each reward saw (the
# parsed queries, gold ranks, format check) and its parts. ACQO Stage II's first records:

# %%
sc, timings, envs = RS.score_rollouts(roll, ds, ret, REWARDS)
envs["ACQO Stage II"].records_frame().head(8)

# %% [markdown]
# Per reward: its distribution, the mean spread within a group, and the share of groups
# without any spread (the GRPO no-signal share defined below the table).

# %%
stats = RS.reward_stats(sc, list(REWARDS), timings)
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
_ = plots.save_figure(RS.plot_reward_histograms(sc, list(REWARDS), stats),
                  "04_reward_distributions", figures_dir,
                  caption=f"Distribution of each reward over the same pseudo-rollouts "
                          f"({dataset} {split}, {retriever}, {group_size} per query, "
                          f"{p_malformed:.0%} broken formats); profile {profile}{note}.",
                  profile=profile)

# %% [markdown]
# The mean reward of each perturbation type under each reward:

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
# rollout whose query equals the original. We pick the query whose rollouts reach the most
# distinct nDCG@10 values, so every column has something to show.

# %%
pick, worked = RS.sage_worked_group(envs["SAGE SCS"], roll)
print("query:", ds.queries[pick])
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
# the direct nDCG reward. Expect copies to top most groups without a penalty (a rewrite
# rarely beats the original on SciFact) and their advantage to turn negative as $p$ grows.

# %%
copy_tab = RS.copy_penalty_table(ret, ds, roll, k, copy_penalties)
save_table(copy_tab.round(4), "04_copy_penalty", tables_dir,
           caption=f"Effect of SAGE's copy penalty p (Eq. 3) on pseudo-rollouts; advantage = "
                   f"(r - group mean) / (group std + 1e-4) as in GRPO; profile {profile}{note}.")
plots.save_figure(RS.plot_copy_penalty(copy_tab), "04_copy_penalty", figures_dir,
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
#
# The advantages are GRPO's, $A_i = (r_i - \bar r)/(\sigma + 10^{-4})$ within a group
# (`RS.grpo_advantage`), as in section 5.

# %%
open_tab = RS.open_readings(envs, REWARDS, seed)
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
RS.released_presets()

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
t_stats = pd.read_csv(Path(tables_dir) / "04_reward_stats.csv")
t_copy = pd.read_csv(Path(tables_dir) / "04_copy_penalty.csv")
display(Markdown(RS.findings(t_stats, t_copy, group_size)))

# %% [markdown]
# **Questions.** Which of the ten rewards would you train with if half of your groups had
# no gold document in any rollout's top 100? Why can a group-normalised reward not rescue
# a group whose rollouts all retrieve the same list?
#
# The last cell records the key numbers the smoke tests read; it prints nothing and can be
# skipped.

# %%
for key, value in RS.key_numbers(t_stats, t_copy).items():
    record(key, value)
