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
train_runs = ["bm25:expand"]  # one RL run per "retriever:mode" (mode: rewrite | expand) and dataset; "dataset/retriever:mode" trains on that dataset only
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

# %%
import dataclasses
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
from qrlib.core.io import atomic_write, read_table, save_json, save_table
from qrlib.core.records import save_record
from qrlib.data import datasets as qdata
from qrlib.data.cut import CollectionCut
from qrlib.eval import metrics
from qrlib.eval.compare import compare, comparison_table
from qrlib.eval.stats import fmt_interval
from qrlib.eval.scale import SCALE_COLUMNS, log_scale, scale_columns
from qrlib.generation import engine, policy, rewrite
from qrlib.generation.contract import DecodingContract
from qrlib.retrieval import retrievers as retrieval
from qrlib.rl import rewards
from qrlib.rl.env import RewardEnv
from qrlib.rl.train import load_config, train

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
PROMPTS = {
    "rewrite": {
        "system": "",
        "user": ("Rewrite this scientific claim as a keyword query for searching research "
                 "abstracts.\nExample: Vitamin D lowers fracture risk in the elderly -> "
                 "<answer>{{\"query\": \"vitamin D supplementation fracture risk older adults\"}}"
                 "</answer>\nClaim: {query}"),
    },
    "expand": {
        "system": "",
        "user": ("Give extra keywords (synonyms, related terms) missing from this scientific "
                 "claim, to help find matching research abstracts.\nExample: Vitamin D lowers "
                 "fracture risk in the elderly -> <answer>{{\"query\": \"cholecalciferol hip "
                 "bone density osteoporosis trial\"}}</answer>\nClaim: {query}"),
    },
}
FMT = "deepretrieval-nothink"
PREFILL = '<answer>{"query": "' if prefill else ""
for mode_, p_ in PROMPTS.items():
    print(f"--- {mode_}\n{p_['user'].format(query='<claim>')}\n")

# %% [markdown]
# ## 2. Data and retrievers
#
# Training queries come from SciFact's *train* split, evaluation queries from its *test*
# split; both search the same corpus. In small profiles the corpus is cut to the judged
# documents of the chosen queries plus `n_distractors` random others.

# %%
def load_pair(name):
    tr = qdata.load_dataset(name, "train", data_dir=data_dir)
    te = qdata.load_dataset(name, "test", data_dir=data_dir)
    tr = qdata.subset(tr, n_queries=n_train_queries, n_distractors=0 if n_distractors is not None else None, seed=seed)
    te = qdata.subset(te, n_queries=n_test_queries, n_distractors=n_distractors, seed=seed)
    corpus = {**te.corpus, **tr.corpus}
    return tr, te, corpus


DATA, RETRIEVERS = {}, {}
for name in datasets:
    tr, te, corpus = load_pair(name)
    DATA[name] = (tr, te, corpus)
    print(f"{name}: train queries {len(tr.queries)}, test queries {len(te.queries)}, docs {len(corpus)}")


def runs_for(name):
    """The (retriever, mode) runs of one dataset: every "retriever:mode" of `train_runs`
    and the "name/retriever:mode" ones."""
    out = []
    for spec in train_runs:
        ds_, _, run = spec.rpartition("/")
        if ds_ in ("", name):
            kind_, mode_ = run.split(":")
            out.append((kind_, mode_))
    return out


kinds = sorted({k for n in datasets for k, _ in runs_for(n)})


def get_retriever(name, kind):
    if (name, kind) not in RETRIEVERS:
        t0 = time.perf_counter()
        kw = {"cache_dir": cache_dir, "show_progress": False} if kind == "dense" else {}
        RETRIEVERS[name, kind] = retrieval.build_retriever(kind, DATA[name][2], **kw)
        print(f"{name}/{kind} index: {time.perf_counter() - t0:.1f}s")
    return RETRIEVERS[name, kind]


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
#   \mathrm{nDCG@}k = \frac{1}{\mathrm{IDCG@}k}\sum_{i=1}^{k}\frac{2^{g_i}-1}{\log_2(i+1)} $$
#
# The paper evaluates nDCG@10 but trains with a much larger $k$ so that a rewrite that
# moves a relevant document from rank 80 to rank 20 is still rewarded (App. B.2); here
# $k$ = `reward_k`. `qrlib.rl.env.RewardEnv` parses each completion, searches all rollouts of
# the batch in one call and scores them; GRPO then normalises rewards within each group of
# `num_generations` rollouts of the same query:
# $\hat A_i = (r_i - \mathrm{mean}(r_{1..G}))/\mathrm{std}(r_{1..G})$.

# %%
def make_env(name, kind, mode):
    tr, te, corpus = DATA[name]
    qrels = {**te.qrels, **tr.qrels}
    return RewardEnv(get_retriever(name, kind), qrels, reward="deepretrieval_ndcg", fmt=FMT,
                     queries={**te.queries, **tr.queries}, mode=mode, k=reward_k,
                     lenient=lenient, format_penalty=format_penalty)


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

# %%
t0 = time.perf_counter()
base_model, tok = policy.load_policy(model)
print(f"policy {model} loaded in {time.perf_counter() - t0:.1f}s")
modes = sorted({m for n in datasets for _, m in runs_for(n)})
CONTRACTS = {mode: DecodingContract(prompt=PROMPTS[mode], prefill=PREFILL, stop=tuple(stop),
                                    max_new_tokens=max_completion_length, fmt=FMT)
             for mode in modes}
REWRITES = {}  # (dataset, method) -> DataFrame of rewrites
for name in datasets:
    te = DATA[name][1]
    for mode in sorted({m for _, m in runs_for(name)}):
        df = rewrite.rewrite_queries(base_model, tok, te.queries, contract=CONTRACTS[mode],
                                     mode=mode, autocast=eval_autocast)
        REWRITES[name, f"untrained-{mode}"] = df
        print(name, mode, f"format ok {df.format_ok.mean():.2f}, modified {df.modified.mean():.2f}, "
              f"{df.gen_seconds.sum():.1f}s")
del base_model

# %% [markdown]
# ## 5. GRPO training
#
# One LoRA adapter per `retriever:mode` run. `qrlib.rl.train.train` builds TRL's `GRPOConfig`
# (loss type, clipping $\epsilon$, KL $\beta$, group size $G$, temperature, token budget),
# logs one CSV row per step (reward mean/std, per-part rewards, share of groups with zero
# reward spread, format-valid rate, completion length, KL, step time) and resumes from the
# last checkpoint if the notebook is re-run after an interruption.

# %%
SUMMARIES = {}
for name in datasets:
    tr = DATA[name][0]
    for kind, mode in runs_for(name):
        run_name = f"{name}-{kind}-{mode}"
        cfg = load_config(dict(
            name=run_name, run_dir=str(run_dir), model=model, dataset=name, retriever=kind,
            fmt=FMT, prompt=PROMPTS[mode], prefill=PREFILL, expansion=mode == "expand",
            algorithm=algorithm, beta=beta, max_steps=train_steps,
            prompts_per_step=prompts_per_step, num_generations=num_generations,
            max_completion_length=max_completion_length, temperature=temperature, top_p=top_p,
            learning_rate=learning_rate, lora_r=lora_r, lora_alpha=2 * lora_r,
            save_steps=max(1, train_steps // 4), seed=seed, dtype=dtype, stop=list(stop),
            dynamic_sampling=dynamic_sampling,
            n_queries=n_train_queries, n_distractors=n_distractors,
            reward_params={"k": reward_k, "lenient": lenient, "format_penalty": format_penalty}))
        t0 = time.perf_counter()
        SUMMARIES[run_name] = train(cfg, env=make_env(name, kind, mode), queries=tr.queries)
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
# Mean reward per step (with a rolling mean), format-valid rate and completion length.

# %%
logs = []
for run_name, s in SUMMARIES.items():
    lg = pd.read_csv(s["log"], dtype={"qids": str})
    lg["run"] = run_name
    logs.append(lg)
logs = pd.concat(logs, ignore_index=True)
fig, axes = plt.subplots(1, 3, figsize=(14, 3.6))
run_colors = {r: f"C{i}" for i, r in enumerate(sorted(logs.run.unique()))}  # one colour per run
for run_name, lg in logs.groupby("run"):
    w, c = max(1, len(lg) // 5), run_colors[run_name]
    axes[0].plot(lg.step, lg.reward, alpha=0.3, lw=1, color=c)
    axes[0].plot(lg.step, lg.reward.rolling(w, min_periods=1).mean(), lw=2, color=c, label=run_name)
    axes[1].plot(lg.step, lg.format_valid.rolling(w, min_periods=1).mean(), lw=2, color=c)
    axes[2].plot(lg.step, lg.completion_length.rolling(w, min_periods=1).mean(), lw=2, color=c)
axes[0].set(title="mean reward (faint: per step, bold: running mean)", xlabel="GRPO step",
            ylabel=f"reward (nDCG@{reward_k}, format penalty)")
axes[1].set(title="format-valid rate (running mean)", xlabel="GRPO step",
            ylabel="share of rollouts", ylim=(-0.05, 1.05))
axes[2].set(title="completion length (running mean)", xlabel="GRPO step", ylabel="tokens")
fig.tight_layout()
plots.legend_outside(fig, *axes[0].get_legend_handles_labels(), title="run (dataset-retriever-mode)")
scale = {r: log_scale(lg) for r, lg in logs.groupby("run")}  # what was trained, from the logs
setting_05 = (f"{model}, per run: {min(v['steps'] for v in scale.values())}-"
              f"{max(v['steps'] for v in scale.values())} steps taken, "
              f"{min(v['queries'] for v in scale.values())}-{max(v['queries'] for v in scale.values())} "
              f"distinct train claims seen, {prompts_per_step}x{num_generations} rollouts/step")
_ = plots.save_figure(fig, "05_training_curves", figures_dir, profile=profile, setting=setting_05,
                  caption=(f"GRPO training of {model} + LoRA r={lora_r}: reward nDCG@{reward_k}, "
                           f"{prompts_per_step}x{num_generations} rollouts/step; scale from the "
                           "logs: " + "; ".join(f"{r} {v['steps']} steps, {v['queries']} claims, "
                                                 f"{v['rollouts']:.0f} rollouts"
                                                 for r, v in scale.items())
                           + " (paper: Qwen2.5-3B, batch 64, PPO)"))
# %% [markdown]
# With one or two claims per step, the per-step reward mostly says how *easy* that step's
# claims were. A fairer learning curve subtracts, for each step, the reward of the raw
# claim itself (nDCG@k of the claim searched as is): the **gain over the raw claim**.

# %%
def raw_score(name, kind, qid):
    tr, te, corpus = DATA[name]
    qrels = {**te.qrels, **tr.qrels}
    text = {**te.queries, **tr.queries}[qid]
    ranked = get_retriever(name, kind).search([text], reward_k)[0]
    return rewards.ndcg_at_k(ranked, qrels[qid], reward_k)


gains = []
for run_name, lg in logs.groupby("run"):
    name, kind, mode = run_name.rsplit("-", 2)
    for _, r in lg.iterrows():
        qs = [q for q in str(r.get("qids", "")).split(";") if q and q != "nan"]
        if qs:
            base = sum(raw_score(name, kind, q) for q in qs) / len(qs)
            gains.append({"run": run_name, "step": r.step, "gain": r.reward - base})
gains = pd.DataFrame(gains)
if len(gains):
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    for run_name, g in gains.groupby("run"):  # per-step line and its running mean share a colour
        w, c = max(1, len(g) // 4), run_colors.get(run_name, "C0")
        ax.plot(g.step, g.gain, alpha=0.35, lw=1, color=c, marker=".", ms=4)
        ax.plot(g.step, g.gain.rolling(w, min_periods=1).mean(), lw=2.2, color=c, label=run_name)
    ax.axhline(0, color="k", lw=0.8)
    ax.set(title="mean reward minus raw-claim reward (faint: per step)", xlabel="GRPO step",
           ylabel=f"gain over raw claim (nDCG@{reward_k})")
    plots.legend_outside(ax, title="run (running mean)")
    plots.save_figure(fig, "05_gain_over_raw", figures_dir, profile=profile, setting=setting_05,
                      caption=(f"Per-step mean reward minus nDCG@{reward_k} of the raw claims of "
                               "that step (faint: per step; line: rolling mean)"))
    logs = logs.merge(gains, on=["run", "step"], how="left")

# %%
first_last = logs.groupby("run").apply(lambda g: pd.Series({
    "policy": model, "steps": len(g), "distinct_queries": log_scale(g)["queries"],
    "rollouts": log_scale(g)["rollouts"], "train_minutes": log_scale(g)["minutes"],
    "reward_first_quarter": g.reward.head(max(1, len(g) // 4)).mean(),
    "reward_last_quarter": g.reward.tail(max(1, len(g) // 4)).mean(),
    "format_first_quarter": g.format_valid.head(max(1, len(g) // 4)).mean(),
    "format_last_quarter": g.format_valid.tail(max(1, len(g) // 4)).mean(),
    "gain_first_half": g["gain"].head(max(1, len(g) // 2)).mean() if "gain" in g else float("nan"),
    "gain_second_half": g["gain"].tail(max(1, len(g) // 2)).mean() if "gain" in g else float("nan"),
    "frac_zero_std": g.frac_reward_zero_std.mean(),
    "s_per_step": g.step_seconds.mean()}), include_groups=False).reset_index()
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
    te = DATA[name][1]
    for kind, mode in runs_for(name):
        run_name = f"{name}-{kind}-{mode}"
        adapter = SUMMARIES[run_name]["adapter"]
        assert DecodingContract.load(adapter) == CONTRACTS[mode], run_name
        m, tok = policy.load_policy(model, adapter=adapter)
        REWRITES[name, f"trained-{kind}-{mode}"] = rewrite.rewrite_queries(
            m, tok, te.queries, contract=adapter, mode=mode, autocast=eval_autocast)
        del m
        gc.collect()
engine.close_engines()  # the evaluation engine is done: free it before the dense encoder searches

def row_scale(name, method, n_test):
    """The training scale of a result row, from its run's log, and its test format validity
    beside training's (qrlib.eval.scale)."""
    valid = None if method == "raw" else REWRITES[name, method].format_ok.mean()
    if method.startswith("trained-"):
        run_name = f"{name}-{method[len('trained-'):]}"
        return scale_columns(model, [logs[logs.run == run_name]], test_queries=n_test,
                             test_valid=valid)
    return scale_columns(None if method == "raw" else model, test_queries=n_test, test_valid=valid)


rows, per_query = [], {}
for name in datasets:
    tr, te, corpus = DATA[name]
    raw = pd.DataFrame({"qid": list(te.queries), "query": list(te.queries.values()),
                        "search_text": list(te.queries.values()), "rewrite": "", "modified": False,
                        "format_ok": True, "gen_tokens": 0, "gen_seconds": 0.0})
    REWRITES[name, "raw"] = raw
    for kind in kinds:
        retr = get_retriever(name, kind)
        for method, df in [(m_, d_) for (n_, m_), d_ in REWRITES.items() if n_ == name]:
            if method.startswith("trained-") and not method.startswith(f"trained-{kind}-"):
                continue  # an adapter is evaluated with the retriever it was trained on
            t0 = time.perf_counter()
            res = retr.search(df.search_text.tolist(), eval_k)
            t_ret = (time.perf_counter() - t0) / len(df)
            run = dict(zip(df.qid, res))
            ev = metrics.evaluate(run, te.qrels, ("nDCG@10", "R@100"), per_query=True)
            per_query[name, kind, method] = ev
            rw = df[df.rewrite.str.len() > 0]
            rows.append({"dataset": name, "retriever": kind, "method": method,
                         "nDCG@10": ev["nDCG@10"].mean(), "R@100": ev["R@100"].mean(),
                         "format_ok": df.format_ok.mean(), "modified": df.modified.mean(),
                         "rewrite_words": rw.rewrite.str.split().str.len().mean() if len(rw) else 0.0,
                         "gen_tokens": df.gen_tokens.mean(), "gen_s_per_query": df.gen_seconds.mean(),
                         "retrieval_s_per_query": t_ret, **row_scale(name, method, len(te.queries))})
results = pd.DataFrame(rows)
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
# prompt, on the same claims: the mean per-claim difference in nDCG@10 with a 95 % paired-
# bootstrap interval over claims, in the workbook's one comparison schema
# (`qrlib.eval.compare`, with the training scale of the run). A gain counts only when its
# interval excludes 0.

# %%
cmp_rows = []
for (name, kind, method), ev in per_query.items():
    if not method.startswith("trained-"):
        continue
    mode = method.split("-")[-1]
    new = ev.set_index("query_id")["nDCG@10"].to_dict()
    for ref, ref_kind in (("raw", "baseline"), (f"untrained-{mode}", "untrained")):
        base = per_query[name, kind, ref].set_index("query_id")["nDCG@10"].to_dict()
        cmp_rows.append(compare(new, base, paper="deepretrieval", dataset=name, retriever=kind,
                                metric="nDCG@10", method=method, kind="trained", baseline=ref,
                                baseline_kind=ref_kind, scale=row_scale(name, method, len(new)),
                                seed=seed))
cmp = comparison_table(cmp_rows)
save_table(cmp, "05_comparisons", tables_dir,
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
vs_raw_05 = cmp[cmp["baseline kind"] == "baseline"]
pairs = {f"{r.dataset}/{r.retriever}: {r.method}": (
             per_query[r.dataset, r.retriever, "raw"].set_index("query_id")["nDCG@10"].to_dict(),
             per_query[r.dataset, r.retriever, r.method].set_index("query_id")["nDCG@10"].to_dict())
         for r in vs_raw_05.itertuples()}
fig = plots.per_query_scatter(pairs, metric="nDCG@10", baseline="raw claim",
                              intervals={f"{r['dataset']}/{r['retriever']}: {r['method']}":
                                         fmt_interval(r) for _, r in vs_raw_05.iterrows()})
_ = plots.save_figure(fig, "05_per_query", figures_dir, profile=profile, setting=setting_05,
                      caption="Per-claim nDCG@10 of each trained rewriter (y) against the raw "
                              "claim (x) on the test claims; title: n, wins / losses / ties and "
                              "the mean difference with its 95 % paired-bootstrap interval")
plt.show()

# %% [markdown]
# ### Example rewrites before and after training

# %%
ex_rows = []
for name in datasets:
    for kind, mode in runs_for(name):
        a = REWRITES[name, f"untrained-{mode}"].set_index("qid")
        b = REWRITES[name, f"trained-{kind}-{mode}"].set_index("qid")
        for q in list(a.index)[:n_examples]:
            ex_rows.append({"run": f"{name}-{kind}-{mode}", "claim": a.loc[q, "query"],
                            "untrained": a.loc[q, "rewrite"], "trained": b.loc[q, "rewrite"]})
examples = pd.DataFrame(ex_rows)
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
for (name, method), df in REWRITES.items():
    p = out_dir / "rewrites" / name / f"{method}.jsonl"
    p.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(p, df.to_json(orient="records", lines=True))
save_json({"model": model, "prompts": PROMPTS, "fmt": FMT, "prefill": PREFILL,
           "datasets": datasets, "train_runs": train_runs, "n_test_queries": n_test_queries,
           "n_train_queries": n_train_queries,
           "n_distractors": n_distractors, "seed": seed,
           "contracts": {m: dataclasses.asdict(c) for m, c in CONTRACTS.items()}},
          out_dir / "settings.json")
for name, (tr, te, corpus) in DATA.items():  # the exact test collection, for notebook 10
    save_record(CollectionCut.of(te, corpus), out_dir / "collections" / f"{name}.json")
print(sorted(p.name for p in (out_dir / "rewrites").rglob("*.jsonl")))

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
# `qrlib.workbook.findings`, so a rerun that changes the numbers changes the sentences.

# %%
from IPython.display import Markdown

from qrlib.workbook.findings import what_we_found

record = S.record
t_train = pd.read_csv(tables_dir / "05_training_summary.csv")
t_test = pd.read_csv(tables_dir / "05_test_results.csv")
t_cmp = read_table(tables_dir / "05_comparisons.csv")
for r in t_train.to_dict("records"):
    record(f"train.{r['run']}.steps", r["steps"])
    record(f"train.{r['run']}.format_last_quarter", r["format_last_quarter"])
for r in t_test.to_dict("records"):
    record(f"test.{r['dataset']}.{r['retriever']}.{r['method']}.ndcg10", r["nDCG@10"])
    record(f"test.{r['dataset']}.{r['retriever']}.{r['method']}.modified", r["modified"])
trained_05 = t_test[t_test.method.str.startswith("trained-")]
modes = sorted({m.rsplit("-", 1)[-1] for m in trained_05.method})
extra = [f"The trained rewriters changed {trained_05.modified.min():.0%}-"
         f"{trained_05.modified.max():.0%} of the test claims ({', '.join(modes)} mode); "
         "the untrained rows with the same prompts are their second baseline."]
display(Markdown(what_we_found(t_cmp, notebook="05_vanilla_rl", tables_dir=tables_dir,
                               health=HEALTH, extra=extra)))
