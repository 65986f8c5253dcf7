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

# %%
import time

from qrlib import session

S = session.start("12_acqo_vanilla_rl", run_dir=run_dir, figures_dir=figures_dir,
                  tables_dir=tables_dir, cache_dir=cache_dir, seed=seed,
                  torch_threads=torch_threads, rollouts=rollouts,
                  dense_model=dense_model)
run_dir, figures_dir, tables_dir, out_dir, record = (S.run_dir, S.figures_dir, S.tables_dir,
                                                     S.out_dir, S.record)

import matplotlib.pyplot as plt
import pandas as pd

from qrlib.data import datasets as qdata
from qrlib.generation import engine, policy, prompts
from qrlib.eval import metrics
from qrlib import plots
from qrlib.retrieval import retrievers as retrieval
from qrlib.data import rows as qrows
from qrlib.core.io import read_table, save_json, save_table
from qrlib.methods.acqo.curriculum import generate_decompositions, search_fused
from qrlib.rl.env import RewardEnv
from qrlib.core.errors import QrlibError
from qrlib.eval.scale import SCALE_COLUMNS, fmt_scale, log_scale, scale_columns
from qrlib.eval.compare import compare, comparison_table
from qrlib.rl.train import load_config, train


def vanilla_label(kind):
    """The vanilla model's row label, per retriever."""
    return f"vanilla RL ({kind}-trained, one query)"


def published(name):
    """One of notebook 07's published tables of this profile (a one-line error if absent)."""
    path = tables_dir / f"{name}.csv"
    if not path.exists():
        raise QrlibError(f"notebook 12 reads 07's table {path}, which does not exist; run "
                         f"notebook 07 of profile {profile} first")
    return read_table(path)


STAGES = published("07_stage_summary")
ACQO_RESULTS = published("07_acqo_results")
ACQO_PER_Q = published("07_per_question_ndcg10")
print(f"profile={profile} model={model}")
STAGES

# %% [markdown]
# ## 1. The training questions and the budget
#
# The same training questions as notebook 06 (the same subset call and seed) over the same
# corpus. The budget is the number of optimizer steps ACQO's Stage I and Stage II actually
# took per retriever, read from 07's stage table (`train_steps` overrides it).

# %%
TRAIN_ROWS, CORPUS, QRELS, SIZES = qdata.pooled_subsets(
    train_datasets, "train", n_queries=n_train_queries, n_distractors=n_distractors, seed=seed,
    data_dir=data_dir)
print(f"{len(TRAIN_ROWS)} training questions, {len(CORPUS)} paragraphs")
BUDGET = {}
for kind in retrievers:
    steps = STAGES[STAGES.retriever == kind]["steps"]
    if steps.empty and train_steps is None:
        raise QrlibError(f"07_stage_summary has no {kind} row; set train_steps or run 07 with "
                         f"retriever {kind}")
    BUDGET[kind] = int(train_steps) if train_steps is not None else int(steps.sum())
print("RL steps per retriever:", BUDGET)
print(f"--- prompt {prompt}")
print(prompts.render(prompts.get(prompt), context="", question=TRAIN_ROWS[0]["question"])[-1]["content"])

# %% [markdown]
# ## 2. Training
#
# `RewardEnv(reward="ndcg", max_subqueries=1)`: a completion with more than one query, or
# none that parses, scores 0. Settings shared with ACQO's stages are the profile's.

# %%
SUMMARIES, NAMES = {}, {}
for kind in retrievers:
    retr = (retrieval.build_retriever("bm25", CORPUS, k1=1.2, b=0.75) if kind == "bm25" else
            retrieval.build_retriever("dense", CORPUS, index="hnsw", hnsw_m=32,
                                      cache_dir=cache_dir, show_progress=False))
    cfg = load_config(dict(
        name=f"vanilla-rl-{kind}", run_dir=str(run_dir), model=model, prompt=prompt,
        prefill=prefill, reward="ndcg", algorithm="dapo", max_steps=BUDGET[kind],
        prompts_per_step=prompts_per_step, num_generations=num_generations,
        max_completion_length=max_completion_length, temperature=temperature, top_p=top_p,
        learning_rate=learning_rate, lora_r=lora_r, lora_alpha=2 * lora_r,
        dynamic_sampling=dynamic_sampling, save_steps=max(1, BUDGET[kind] // 4), seed=seed,
        retriever=kind, stop=list(stop)))
    env = RewardEnv(retr, QRELS, reward="ndcg", fmt="acqo", k=reward_k, max_subqueries=1)
    t0 = time.perf_counter()
    SUMMARIES[kind] = s = train(cfg, env=env, rows=TRAIN_ROWS)
    s["wall_seconds"] = round(time.perf_counter() - t0, 1)
    NAMES[kind] = cfg.name
    print(kind, {k: s[k] for k in ("steps", "train_seconds")})
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
from qrlib.rl.health import health_report

HEALTH, health_lines = health_report(SUMMARIES, "12_health",
                                     tables_dir=tables_dir, figures_dir=figures_dir,
                                     profile=profile, setting=model)
print("\n".join(health_lines))

# %% [markdown]
# ## 3. Training curves
#
# Reward (nDCG@10 of the rollout's query on its training question), the share of groups
# whose rollouts all scored the same (zero advantage: nothing to learn from that group),
# and the share of well-formed rollouts.

# %%
LOGS = {k: pd.read_csv(run_dir / "rl" / NAMES[k] / "log.csv") for k in retrievers}
fig, axes = plt.subplots(1, 3, figsize=(13, 3.4))
for i, (kind, log) in enumerate(LOGS.items()):
    c = f"C{i}"
    axes[0].plot(log.step, log.reward, color=c, alpha=0.35)
    axes[0].plot(log.step, log.reward.rolling(8, min_periods=1).mean(), color=c, label=kind)
    axes[1].plot(log.step, log.frac_reward_zero_std.rolling(8, min_periods=1).mean(), color=c,
                 label=kind)
    axes[2].plot(log.step, log.format_valid.rolling(8, min_periods=1).mean(), color=c,
                 label=kind)
axes[0].set(xlabel="training step", ylabel="reward nDCG@10 (rolling mean of 8)")
axes[1].set(xlabel="training step", ylabel="groups with zero reward spread", ylim=(-0.05, 1.05))
axes[2].set(xlabel="training step", ylabel="format-valid rollouts", ylim=(-0.05, 1.05))
for ax in axes:
    plots.legend_outside(ax, where="below")
fig.tight_layout()
plots.save_figure(fig, "12_vanilla_curves", figures_dir,
                  caption="Vanilla RL (one query, nDCG@10 reward, DAPO): reward, zero-spread "
                          "groups and format validity per step",
                  profile=profile,
                  setting=f"{model}; from the logs: "
                          + "; ".join(f"{k} {fmt_scale(log_scale(lg))}" for k, lg in LOGS.items()))
CURVES = pd.DataFrame([
    {"retriever": kind, "steps": part, "reward": g.reward.mean(),
     "zero-spread groups": g.frac_reward_zero_std.mean(), "format valid": g.format_valid.mean(),
     "s/step": g.step_seconds.mean()}
    for kind, log in LOGS.items()
    for part, g in (("first quarter", log.head(max(1, len(log) // 4))),
                    ("last quarter", log.tail(max(1, len(log) // 4))))])
save_table(CURVES.round(4), "12_vanilla_curve_summary", tables_dir,
           caption="Vanilla RL, first vs last quarter of training (from the run's log)")
CURVES

# %% [markdown]
# ## 4. The test: the same questions, corpus and retriever as notebook 07
#
# Greedy decoding as in 07 (same prefill, parse and token budget), searched exactly. The
# raw question is searched again here and must give 07's per-question scores, which
# checks that both notebooks test the same questions against the same corpus.

# %%
MEASURES = ["R@4", "R@10", "R@100", "AP@10", "RR@10", "nDCG@10"]
TEST, PER_Q, DECOMP = {}, {}, {}
for name in test_datasets:
    ds = qdata.subset(qdata.load_dataset(name, "test", data_dir=data_dir),
                      n_queries=n_test_queries, n_distractors=n_test_distractors, seed=seed)
    TEST[name] = ds
    rows_t = qrows.rows_from_dataset(ds)
    for kind in retrievers:
        retr = retrieval.build_retriever(kind, ds.corpus, **(
            {"cache_dir": cache_dir, "show_progress": False} if kind == "dense" else {}))
        raw_run, _ = search_fused(retr, {q: [ds.queries[q]] for q in ds.queries}, k=eval_k)
        raw = metrics.evaluate(raw_run, ds.qrels, MEASURES, per_query=True)
        theirs = ACQO_PER_Q[(ACQO_PER_Q.dataset == name) & (ACQO_PER_Q.retriever == kind)]
        theirs = theirs.set_index(theirs.query_id.astype(str))["raw question"]
        mine = raw.set_index(raw.query_id.astype(str))["nDCG@10"]
        if sorted(theirs.index) != sorted(mine.index) or \
                (theirs.reindex(mine.index) - mine).abs().max() > 1e-5:
            raise QrlibError(f"{name}/{kind}: the raw question's nDCG@10 differs from 07's "
                             f"published one: the test settings do not match notebook 07's")
        PER_Q[name, kind, "raw question"] = raw
        m, tok = policy.load_policy(model, adapter=SUMMARIES[kind]["adapter"])
        DECOMP[name, kind] = dec = generate_decompositions(
            m, tok, rows_t, contract=SUMMARIES[kind]["adapter"], progress=False,
            autocast=eval_autocast, batch_size=eval_batch_size)  # training's decoding contract
        del m
        run, _ = search_fused(retr, {d["qid"]: d["subqueries"] for d in dec}, k=eval_k)
        pq = metrics.evaluate(run, ds.qrels, MEASURES, per_query=True)
        pq["n_sub"] = pq.query_id.map({d["qid"]: len(d["subqueries"]) for d in dec})
        PER_Q[name, kind, "vanilla RL"] = pq
        print(f"{name}/{kind}: {len(dec)} test rewrites, "
              f"{sum(d['format_ok'] for d in dec)} well-formed")
engine.close_engines()
save_json({f"{k[0]} | {k[1]}": v for k, v in DECOMP.items()}, out_dir / "rewrites.json")
VALID = {k: sum(d["format_ok"] for d in v) / len(v) for k, v in DECOMP.items()}  # test validity

# %% [markdown]
# ## 5. Vanilla RL in ACQO Table 3's columns, next to 07's rows
#
# Retrieval metrics of the vanilla model on the test questions, beside 07's rows (raw,
# rule split, untrained single query, ACQO Stage I + II) copied from its published table
# with their training scale.

# %%
rows = []
for (name, kind, label), pq in PER_Q.items():
    if label == "vanilla RL":
        rows.append({"dataset": name, "retriever": kind, "model": vanilla_label(kind),
                     **{metrics.label(m): pq[m].mean() for m in MEASURES},
                     "sub-queries": pq["n_sub"].mean(),
                     **scale_columns(model, [LOGS[kind]], test_queries=len(pq),
                                     test_valid=VALID[name, kind])})
VANILLA = pd.DataFrame(rows)
keep = ACQO_RESULTS.model.str.startswith(("raw question", "untrained [no-decompose]", "rule:",
                                          "ACQO: Stage I+II"))
THEIRS = ACQO_RESULTS[keep & ACQO_RESULTS.dataset.isin(test_datasets)
                      & ACQO_RESULTS.retriever.isin(retrievers)]
RESULTS = pd.concat([THEIRS[[c for c in VANILLA.columns if c in THEIRS.columns]], VANILLA],
                    ignore_index=True)
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
# split; and the question ACQO Table 5 answers, ACQO (Stage I + II) minus vanilla RL.

# %%
rows = []
for (name, kind, label), pq in PER_Q.items():
    if label != "vanilla RL":
        continue
    cols = ACQO_PER_Q[(ACQO_PER_Q.dataset == name) & (ACQO_PER_Q.retriever == kind)]
    cols = cols.set_index(cols.query_id.astype(str)).drop(columns=["dataset", "retriever", "query_id"])
    van = vanilla_label(kind)
    cols[van] = pq.set_index(pq.query_id.astype(str))["nDCG@10"]
    scale = scale_columns(model, [LOGS[kind]], test_queries=len(pq), test_valid=VALID[name, kind])
    acqo = f"ACQO: Stage I+II ({kind}-trained)"
    rule = next((c for c in cols.columns if c.startswith("rule:")), None)
    pairs = [(van, "trained", scale, "raw question", "baseline"),
             (van, "trained", scale, "untrained [no-decompose]", "untrained"),
             (van, "trained", scale, rule, "model-free")]
    if acqo in cols:  # ACQO's scale as 07 published it
        acqo_scale = THEIRS[(THEIRS.model == acqo) & (THEIRS.dataset == name)].iloc[0]
        pairs.append((acqo, "trained", acqo_scale[list(SCALE_COLUMNS)].to_dict(), van, "trained"))
    for method, mkind, mscale, base, bkind in pairs:
        if base not in cols:  # a row 07 did not evaluate in this profile
            continue
        rows.append(compare(cols[method].to_dict(), cols[base].to_dict(), paper="acqo",
                            dataset=name, retriever=kind, metric="nDCG@10", method=method,
                            kind=mkind, baseline=base, baseline_kind=bkind, scale=mscale,
                            resamples=bootstrap, seed=seed))
COMPARISONS = comparison_table(rows)
for _, r in COMPARISONS.iterrows():
    record(f"{r.dataset}.{r.retriever}.{r.method} minus {r.baseline}", [r["diff"], r.lo, r.hi])
    if r.kind == "trained" and r["baseline kind"] == "baseline":
        record(f"{r.dataset}.{r.retriever}.vanilla.ndcg10", r.score)
        record(f"{r.dataset}.{r.retriever}.vanilla.rl_steps", r["RL steps"])
save_table(COMPARISONS.round(4), "12_comparisons", tables_dir,
           caption="Paired comparisons in nDCG@10 (mean difference, 95% paired bootstrap over "
                   "the test questions; the qrlib.eval.compare schema): vanilla RL against the "
                   "raw question, the untrained single query and the rule split; ACQO minus "
                   "vanilla RL")
COMPARISONS[["method", "baseline", "score", "baseline score", "diff", "lo", "hi", "wins",
             "losses", "RL steps", "train queries", "test queries"]].round(3)

# %% [markdown]
# ## 6. Examples

# %%
name0 = test_datasets[0]
ex = [{"retriever": kind, "question": TEST[name0].queries[d["qid"]],
       "rewrite": " %% ".join(d["subqueries"]), "format ok": d["format_ok"]}
      for kind in retrievers for d in DECOMP[name0, kind][:n_examples]]
pd.set_option("display.max_colwidth", 140)
pd.DataFrame(ex)

# %% [markdown]
# ## What we found
#
# Built from `12_comparisons`, `12_vanilla_results` and `12_health` of this run by
# `qrlib.workbook.findings`:

# %%
from IPython.display import Markdown

from qrlib.workbook.findings import what_we_found

extra = [f"Vanilla RL writes {VANILLA['sub-queries'].min():.2f}-{VANILLA['sub-queries'].max():.2f} "
         "queries per question (one by design)."]
acqo_vs = COMPARISONS[COMPARISONS.method.str.startswith("ACQO")]
display(Markdown(
    what_we_found(COMPARISONS[~COMPARISONS.method.str.startswith("ACQO")],
                  notebook="12_acqo_vanilla_rl", tables_dir=tables_dir, health=HEALTH,
                  extra=extra, subject="vanilla RL")
    + ("" if acqo_vs.empty else " ACQO against vanilla RL (the question of ACQO Table 5): "
       + "; ".join(f"{r['dataset']}/{r['retriever']} {r['diff']:+.3f} [{r['lo']:+.3f}, {r['hi']:+.3f}]"
                   for _, r in acqo_vs.iterrows()) + ".")))
