# ---
# jupyter:
#   qrlib:
#     reads: [06_acqo_stage1]  # earlier notebooks whose artifacts this one reads (qrlib.freshness)
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% tags=["parameters"]
profile = "dev"  # profile name (smoke | cpu | cpu-long | gpu)
run_dir = "../runs/dev"  # reads 06's Stage I adapters from here, writes Stage II and evaluation
figures_dir = "../figures/dev"  # figures of this run
tables_dir = "../tables/dev"  # tables of this run
cache_dir = None  # shared cache (dequantised models, embeddings); None means qrlib default
seed = 0  # seed for subsets, sampling and bootstrap
data_dir = None  # BEIR folders; None means ../shared/data or $QRLIB_DATA
model = "smollm2"  # policy (must be 06's)
retrievers = ["bm25"]  # Stage II runs, one per Stage I adapter of notebook 06
tau_rollouts = 4  # K rollouts per training question for tau(q), ACQO Eq. 7 (A.2: 8)
tau_temperature = 1.0  # sampling temperature of those rollouts
tau_thres = 1.6666666666666667  # keep questions whose tau(q) is at most this, ACQO Eq. 8 (A.2: 5/3)
tau_min = None  # also drop questions whose tau(q) is at most this (ours: Stage I rollouts that all fail give Stage II no reward spread); None: ACQO's Eq. 8 alone
train_steps = 2  # DAPO steps of Stage II per retriever
prompts_per_step = 1  # distinct questions per step
num_generations = 4  # rollouts per question (ACQO A.2: 8)
max_completion_length = 24  # token budget of one rollout
temperature = 1.0  # rollout sampling temperature
top_p = 1.0  # rollout nucleus sampling
learning_rate = 5e-5  # LoRA learning rate
lam = 1.0  # top-rank bonus weight lambda, ACQO Eq. 10
k_star = 0  # ranks 1..k* get the bonus, ACQO Eq. 10 (A.2: 0 for HotpotQA)
dynamic_sampling = 0  # DAPO dynamic sampling rounds (0: off)
test_datasets = ["2wikimultihopqa-mini", "hotpotqa-large"]  # evaluated on their test splits
n_test_queries = 10  # test questions per dataset; None means all
n_test_distractors = 200  # test corpus: judged paragraphs + this many others; None means the full corpus
eval_retrievers = ["bm25"]  # every decomposition is searched with each (cross-retriever, ACQO Fig. 5)
eval_k = 100  # retrieval depth of evaluation (R@100)
bootstrap = 2000  # paired-bootstrap resamples
untrained_prompts = ["acqo/decompose-fewshot", "acqo/no-decompose"]  # untrained rows
n_examples = 6  # example decompositions shown per model
gen_autocast = True  # bf16 autocast for the tau rollouts (sampling; about 4x faster on CPU)
eval_autocast = False  # bf16 autocast of the greedy test decoding (16-19 % of a trained adapter's outputs then differ from fp32: benchmarks/bench_eval_precision.py)
eval_batch_size = 8  # test questions decoded together (greedy)
rule_row = True  # add a model-free row: the question plus qrlib.methods.bandits.decompose.heuristic_split's sub-queries (headroom check)
torch_threads = 0  # CPU threads for torch; 0 keeps torch's default
stop = ['"}']  # a rollout ends when it closes the JSON answer (kept in the completion)
rollouts = "hf"  # generation engine of training rollouts and sampling/evaluation: hf (transformers generate) | vllm (in-process vLLM engine, qrlib.generation.engine)
dense_model = "minilm"  # encoder of the dense retriever: offline all-MiniLM-L6-v2; a hub id (BAAI/bge-base-en-v1.5) on GPU

# %% [markdown]
# # 07 · ACQO Stage II and the test: does the trained decomposer beat the raw question?
#
# *Paper:* [When Should I Search More: Adaptive Complex Query Optimization with Reinforcement Learning](https://arxiv.org/abs/2601.21208) (Wen, Deng, Wei, Chen, Qiao and Sun; arXiv:2601.21208, 2026).
#
# Stage II is ACQO's *convergence* stage (Sec. 3.4.3). It starts from the Stage I adapter of
# notebook 06 and changes two things:
#
# 1. **Data curriculum.** The Stage I model samples $K$ decompositions of every training
#    question; the mean Stage I reward is the question's *learning complexity*
#    $\tau(q) = \frac1K\sum_{k=1}^K G^{(I)}(\hat{\mathcal Q}^{(k)}_q)$ (Eq. 7), and only the
#    questions with $\tau(q) \le \tau_{thres}$ are kept (Eq. 8): the ones the model has not
#    mastered yet. With $\eta = 0.6$ two gold paragraphs at ranks 1 and 2 give
#    $0.6\cdot 2 + 0.36\cdot 1.89 = 1.88 > 5/3$, so a question is dropped once the model
#    reliably puts both gold paragraphs on top.
# 2. **Reward.** The fused list of *all* sub-queries is scored, with a bonus for the very
#    top ranks (Eq. 9-10): $G^{(II)}(\hat{\mathcal Q}) = S'(\mathcal R_k(\hat{\mathcal Q}))$,
#    where $\Phi'(r) = \Phi(r) + \lambda\,\mathbb 1[r \le k^*]$. A useless sub-query now
#    costs reward, because its list is fused in.
#
# Then every model is evaluated on the **test** questions, each searched against its own
# dataset's corpus with exact search, against the raw question, with 95% paired-bootstrap
# intervals over questions (ACQO Table 3's columns).
#
# ACQO's last baseline, RL on the same questions *without* decomposition at the same number
# of optimizer steps, is notebook 12: it needs neither 06's nor 07's adapters, only the
# per-question results this notebook publishes, so it can run in a session of its own.

# %%
import time

from qrlib import session

S = session.start("07_acqo_stage2", run_dir=run_dir, figures_dir=figures_dir, tables_dir=tables_dir,
                  cache_dir=cache_dir, seed=seed, torch_threads=torch_threads, rollouts=rollouts,
                  dense_model=dense_model)
run_dir, figures_dir, tables_dir, out_dir, record = (S.run_dir, S.figures_dir, S.tables_dir,
                                                     S.out_dir, S.record)

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from qrlib.data import datasets as qdata
from qrlib.generation import engine
from qrlib.eval import metrics
from qrlib import plots
from qrlib.generation import policy
from qrlib.retrieval import retrievers as retrieval
from qrlib.data import rows as qrows
from qrlib.methods.acqo.artifacts import Stage1Record
from qrlib.methods.acqo.curriculum import (SubqueryProbe, generate_decompositions, keep_for_stage2,
                              search_fused, tau_by_question)
from qrlib.methods.bandits.decompose import heuristic_split
from qrlib.rl.env import RewardEnv
from qrlib.eval.scale import SCALE_COLUMNS, fmt_scale, log_scale, scale_columns
from qrlib.eval.compare import compare, comparison_table
from qrlib.eval.stats import fmt_interval, paired_bootstrap
from qrlib.rl.train import load_config, train
from qrlib.core.io import save_json, save_table

S1 = Stage1Record.load(run_dir / "06_acqo_stage1")  # Stage I's runs and settings (06's record)
TRAIN_ROWS, PROMPT, PREFILL = S1.train_rows, S1.prompt, S1.prefill
for kind in retrievers:
    S1.summary(kind)  # one-line error when 06 did not train this retriever
print(f"profile={profile} model={model}; Stage I runs: {sorted(S1.summaries)}; "
      f"{len(TRAIN_ROWS)} training questions")

# %% [markdown]
# ## 1. The training corpus again, and tau(q) from K rollouts of the Stage I model
#
# The same pooled training questions and corpus as notebook 06 (the paragraph ids 06
# saved). For each retriever's Stage I adapter: $K$ sampled decompositions per
# training question, scored by the Stage I reward, averaged into $\tau(q)$.

# %%
CORPUS, QRELS = {}, {}
ids, keep = set(S1.corpus_ids), {r["qid"] for r in TRAIN_ROWS}
for name in S1.train_datasets:
    ds = qdata.load_dataset(name, "train", data_dir=data_dir)
    CORPUS.update({d: doc for d, doc in ds.corpus.items() if d in ids})
    QRELS.update({q: rel for q, rel in ds.qrels.items() if q in keep})
assert len(CORPUS) == len(ids), "the training corpus of notebook 06 could not be rebuilt"
print(f"training corpus: {len(CORPUS)} paragraphs, {len(QRELS)} training questions")


def train_retriever(kind):
    if kind == "bm25":
        return retrieval.build_retriever("bm25", CORPUS, k1=1.2, b=0.75)
    return retrieval.build_retriever("dense", CORPUS, index="hnsw", hnsw_m=32,
                                     cache_dir=cache_dir, show_progress=False)


def acqo_env(kind, reward, retr=None, **extra):
    return RewardEnv(retr or train_retriever(kind), QRELS, reward=reward, fmt="acqo",
                     k=S1.reward_k, max_subqueries=3, lenient=True, eta=S1.eta,
                     delta=S1.delta, **extra)


TAU, KEPT, TRAIN_RETR = {}, {}, {}
tau_rule = (f"tau <= {tau_thres:.3f}" if tau_min is None
            else f"{tau_min:.3f} < tau <= {tau_thres:.3f}")
for kind in retrievers:
    TRAIN_RETR[kind] = train_retriever(kind)
    adapter = S1.summary(kind)["adapter"]
    m, tok = policy.load_policy(model, adapter=adapter)
    t0 = time.perf_counter()
    rolls = generate_decompositions(m, tok, TRAIN_ROWS, contract=adapter, n=tau_rollouts,
                                    do_sample=True, temperature=tau_temperature,
                                    seed=seed, autocast=gen_autocast)
    del m
    env = acqo_env(kind, "acqo_stage1", TRAIN_RETR[kind])
    rewards = env.score([r["completion"] for r in rolls], [r["qid"] for r in rolls])
    TAU[kind] = tau_by_question(rewards, [r["qid"] for r in rolls])
    KEPT[kind] = keep_for_stage2(TAU[kind], tau_thres, tau_min)
    print(f"{kind}: tau from {len(rolls)} rollouts in {time.perf_counter() - t0:.0f}s; kept "
          f"{len(KEPT[kind])}/{len(TAU[kind])} questions ({tau_rule})")

# %% [markdown]
# The kept share, with a 95% bootstrap interval over training questions (the paper keeps
# about half, ACQO A.3), and the distribution of $\tau(q)$:

# %%
rows = []
for kind in retrievers:
    keep_k = set(KEPT[kind])
    kept = np.array([q in keep_k for q in sorted(TAU[kind])], dtype=float)
    rng = np.random.default_rng(seed)
    boots = kept[rng.integers(0, len(kept), size=(bootstrap, len(kept)))].mean(axis=1)
    rows.append({"retriever": kind, "questions": len(kept), "kept": int(kept.sum()),
                 "kept share": kept.mean(), "lo": np.quantile(boots, 0.025),
                 "hi": np.quantile(boots, 0.975),
                 "mean tau": float(np.mean(list(TAU[kind].values())))})
KEPT_TABLE = pd.DataFrame(rows)
for _, r in KEPT_TABLE.iterrows():
    record(f"{r.retriever}.tau.kept_share", r["kept share"])
    record(f"{r.retriever}.tau.questions", r.questions)
save_table(KEPT_TABLE, "07_tau_filter", tables_dir,
           caption=f"ACQO Eq. 7-8 curriculum filter: share of training questions with "
                   f"{tau_rule} from {tau_rollouts} Stage I rollouts each")
fig, ax = plt.subplots(figsize=(6, 3.2))
for i, kind in enumerate(retrievers):
    ax.hist(list(TAU[kind].values()), bins=20, alpha=0.5, color=f"C{i}", label=kind)
ax.axvline(tau_thres, color="k", ls="--", lw=1, label=r"$\tau_{thres}$")
ax.set(xlabel=r"learning complexity $\tau(q)$ (mean Stage I reward of K rollouts)",
       ylabel="training questions")
plots.legend_outside(ax)
plots.save_figure(fig, "07_tau_hist", figures_dir, caption="tau(q) of the training questions "
                  "under each Stage I model (ACQO Eq. 7) and the Eq. 8 threshold",
                  profile=profile, setting=f"{len(TRAIN_ROWS)} training questions, K={tau_rollouts}")
KEPT_TABLE

# %% [markdown]
# ## 2. Stage II training
#
# From the Stage I adapter, on the kept questions only, with the Stage II reward (DAPO
# again). If the filter keeps nothing (a Stage I model that masters every training
# question), Stage II trains on all questions and says so.

# %%
SUMMARIES, NAMES = {}, {}
for kind in retrievers:
    keep = set(KEPT[kind])
    rows2 = [r for r in TRAIN_ROWS if r["qid"] in keep]
    if not rows2:
        print(f"{kind}: the tau filter kept no question; Stage II uses all of them")
        rows2 = list(TRAIN_ROWS)
    cfg = load_config(dict(
        name=f"acqo-stage2-{kind}", run_dir=str(run_dir), model=model, prompt=PROMPT,
        prefill=PREFILL, reward="acqo_stage2", algorithm="dapo", max_steps=train_steps,
        prompts_per_step=prompts_per_step, num_generations=num_generations,
        max_completion_length=max_completion_length, temperature=temperature, top_p=top_p,
        learning_rate=learning_rate, init_adapter=S1.summary(kind)["adapter"],
        dynamic_sampling=dynamic_sampling, save_steps=max(1, train_steps // 4), seed=seed,
        retriever=kind, stop=list(stop)))
    env = SubqueryProbe(acqo_env(kind, "acqo_stage2", TRAIN_RETR[kind], lam=lam,
                                 k_star=k_star), k=10)
    t0 = time.perf_counter()
    SUMMARIES[kind] = s = train(cfg, env=env, rows=rows2)
    s["wall_seconds"] = round(time.perf_counter() - t0, 1)
    s["n_train_questions"] = len(rows2)
    NAMES[kind] = cfg.name
    print(kind, {k: s[k] for k in ("steps", "train_seconds", "n_train_questions")})
_ = save_json({"summaries": SUMMARIES, "tau": TAU, "kept": KEPT}, out_dir / "stage2.json")

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

HEALTH, health_lines = health_report({**{f"Stage I {k}": S1.summary(k) for k in retrievers},
     **{f"Stage II {k}": s for k, s in SUMMARIES.items()}}, "07_health",
                                     tables_dir=tables_dir, figures_dir=figures_dir,
                                     profile=profile, setting=model)
print("\n".join(health_lines))

# %% [markdown]
# ### Both stages on one axis
#
# Stage II's steps continue Stage I's. Left: reward (each stage's own reward, so the level
# jumps where the reward changes); middle: sub-queries per rollout; right: fused-list
# nDCG@10 on the training questions.

# %%
fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
CURVES, SCALES = [], []
for i, kind in enumerate(retrievers):
    l1 = pd.read_csv(run_dir / "rl" / f"acqo-stage1-{kind}" / "log.csv").assign(stage="I")
    l2 = pd.read_csv(run_dir / "rl" / NAMES[kind] / "log.csv").assign(stage="II")
    SCALES.append(f"{kind}: Stage I {fmt_scale(log_scale(l1))}; Stage II {fmt_scale(log_scale(l2))}")
    l2["step"] = l2["step"] + l1["step"].max()
    both = pd.concat([l1, l2], ignore_index=True).assign(retriever=kind)
    CURVES.append(both)
    for stage, ls in (("I", "-"), ("II", "--")):
        part = both[both.stage == stage]
        for ax, col in zip(axes, ("reward", "part/n_sub", "part/fused_ndcg@10")):
            if col in part:
                ax.plot(part.step, part[col].rolling(4, min_periods=1).mean(), color=f"C{i}",
                        ls=ls, label=f"{kind}, stage {stage}")
    for ax in axes:
        ax.axvline(l1["step"].max() + 0.5, color="0.6", lw=0.8)
axes[0].set(xlabel="training step (Stage I, then II)", ylabel="stage reward (rolling mean of 4)")
axes[1].set(xlabel="training step (Stage I, then II)", ylabel="sub-queries per rollout")
axes[2].set(xlabel="training step (Stage I, then II)", ylabel="fused nDCG@10, training (rolling 4)")
for ax in axes:
    if ax.get_legend_handles_labels()[0]:
        plots.legend_outside(ax, where="below")
fig.tight_layout()
plots.save_figure(fig, "07_curriculum_curves", figures_dir,
                  caption="ACQO curriculum: Stage I and Stage II training curves on one axis",
                  profile=profile, setting=f"{model}; from the logs: " + " | ".join(SCALES))
CURVES = pd.concat(CURVES, ignore_index=True)
STAGE_TABLE = (CURVES.groupby(["retriever", "stage"])
               .agg(steps=("step", "count"), reward=("reward", "mean"),
                    sub_queries=("part/n_sub", "mean"), fused_ndcg10=("part/fused_ndcg@10", "mean"),
                    s_per_step=("step_seconds", "mean"),
                    cpu_minutes=("step_seconds", lambda x: x.sum() / 60))
               .reset_index())
save_table(STAGE_TABLE, "07_stage_summary", tables_dir,
           caption="Per stage: steps, mean reward, sub-queries per rollout, training fused "
                   "nDCG@10, seconds per step and training minutes (ACQO Table 6b's role)")
STAGE_TABLE

# %% [markdown]
# ## 3. The test questions
#
# Each test set is searched against its own corpus (2Wiki: 8,651 paragraphs; HotpotQA-large:
# 9,171; in small profiles cut to the judged paragraphs plus `n_test_distractors`),
# exactly (BM25, or MiniLM with a flat FAISS index).

# %%
TEST = {}
for name in test_datasets:
    ds = qdata.load_dataset(name, "test", data_dir=data_dir)
    ds = qdata.subset(ds, n_queries=n_test_queries, n_distractors=n_test_distractors, seed=seed)
    TEST[name] = ds
    print(f"{name}: {len(ds.queries)} test questions, {len(ds.corpus)} paragraphs")
EVAL_RETR = {(name, kind): retrieval.build_retriever(kind, TEST[name].corpus,
                                                      **({"cache_dir": cache_dir,
                                                          "show_progress": False}
                                                         if kind == "dense" else {}))
             for name in test_datasets for kind in eval_retrievers}

# %% [markdown]
# ## 4. Decompositions of every model
#
# Greedy decoding (ACQO validates with temperature 0.7; greedy keeps reruns identical on
# one machine; with `eval_autocast` the matmuls run in bf16), with the decoding contract
# of training: Stage I's prompt, prefill, stop strings, token budget and parser, read
# from each adapter (`decoding.json`) and, for the untrained rows, from Stage I's. Models: the untrained policy
# with each prompt in `untrained_prompts`, and per retriever the rejection-sampling cold
# start alone (when notebook 06 ran one), the Stage I adapter and the Stage I + II adapter
# (ACQO). Every model's decompositions are
# searched with every evaluation retriever, so the cross-retriever table (ACQO Fig. 5)
# costs no extra generation.

# %%
# every row decodes with Stage I's contract (prompt, prefill, stop strings, budget, parser);
# a trained adapter with its own (checked equal), an untrained row with its prompt swapped in
MODELS = {f"untrained [{p.split('/')[-1]}]": (None, S1.contract(retrievers[0], prompt=p))
          for p in untrained_prompts}
for kind in retrievers:
    if S1.summary(kind).get("sft_adapter"):
        a = S1.summary(kind)["sft_adapter"]
        MODELS[f"cold start only ({kind}-sampled)"] = (a, a)
    a = S1.summary(kind)["adapter"]
    MODELS[f"Stage I ({kind}-trained)"] = (a, a)
    a = SUMMARIES[kind]["adapter"]
    MODELS[f"ACQO: Stage I+II ({kind}-trained)"] = (a, a)
DECOMP = {}  # (model label, dataset) -> list of dicts
engine.close_engines()  # the bf16 sampling engine of the tau rollouts is done: free its memory
for label, (adapter, contract) in MODELS.items():
    m, tok = policy.load_policy(model, adapter=adapter)
    for name in test_datasets:
        rows_t = qrows.rows_from_dataset(TEST[name])
        DECOMP[label, name] = generate_decompositions(
            m, tok, rows_t, contract=contract, progress=False, autocast=eval_autocast,
            batch_size=eval_batch_size)
    del m
    print(label, "done")
save_json({f"{k[0]} | {k[1]}": v for k, v in DECOMP.items()}, out_dir / "decompositions.json")
VALID = {k: sum(d["format_ok"] for d in v) / len(v) for k, v in DECOMP.items()}  # test validity

# %% [markdown]
# ## 5. Results with paired-bootstrap intervals (ACQO Table 3's columns)
#
# For each dataset × evaluation retriever × model: R@4, R@10, R@100, MAP@10, MRR@10 and
# nDCG@10 (ir-measures), the mean number of sub-queries, and nDCG@10 minus the raw
# question's on the same questions with a 95% paired-bootstrap interval. With `rule_row`
# a model-free row is added: the question fused (RSF) with up to two sub-queries of
# `qrlib.methods.bandits.decompose.heuristic_split` (comparison alternatives, entity spans, clauses; see
# notebook 03). It shows how much a plain rule already gains here, i.e. the headroom a
# trained decomposer has to reach before it is worth its generation cost.

# %%
MEASURES = ["R@4", "R@10", "R@100", "AP@10", "RR@10", "nDCG@10"]
RULE = "rule: question + heuristic split (no model)"
PER_Q, LAT = {}, []
for name in test_datasets:
    ds = TEST[name]
    for kind in eval_retrievers:
        retr = EVAL_RETR[name, kind]
        raw_run, t = search_fused(retr, {q: [ds.queries[q]] for q in ds.queries}, k=eval_k)
        PER_Q[name, kind, "raw question"] = metrics.evaluate(raw_run, ds.qrels, MEASURES,
                                                             per_query=True)
        if rule_row:  # no model: the question plus up to two rule-based sub-queries
            subs = {q: list(dict.fromkeys([ds.queries[q]] + heuristic_split(ds.queries[q], 2)))[:3]
                    for q in ds.queries}
            run, _ = search_fused(retr, subs, k=eval_k)
            pq = metrics.evaluate(run, ds.qrels, MEASURES, per_query=True)
            pq["n_sub"] = pq.query_id.map({q: len(v) for q, v in subs.items()})
            PER_Q[name, kind, RULE] = pq
        for label in MODELS:
            dec = DECOMP[label, name]
            subs = {d["qid"]: d["subqueries"] for d in dec}
            run, t = search_fused(retr, subs, k=eval_k)
            pq = metrics.evaluate(run, ds.qrels, MEASURES, per_query=True)
            n_sub = {d["qid"]: len(d["subqueries"]) for d in dec}
            pq["n_sub"] = pq.query_id.map(n_sub)
            PER_Q[name, kind, label] = pq
            LAT.append({"dataset": name, "retriever": kind, "model": label,
                        "generation s/query": np.mean([d["gen_seconds"] for d in dec]),
                        "retrieval ms/query": 1000 * t["retrieval"] / len(dec),
                        "fusion ms/query": 1000 * t["fusion"] / len(dec),
                        "generated tokens": np.mean([d["gen_tokens"] for d in dec])})

def _log(run):
    return pd.read_csv(run_dir / "rl" / run / "log.csv")


# what trained each row: (policy, RL logs, SFT steps, SFT questions); scale from the logs
TRAINED_BY = {"raw question": (None, [], 0, 0), RULE: (None, [], 0, 0)}
KIND = {"raw question": "baseline", RULE: "model-free"}  # qrlib.eval.compare.KINDS
KIND.update({label: "untrained" for label in MODELS if label.startswith("untrained")})
TRAINED_BY.update({label: (model, [], 0, 0) for label in MODELS if label.startswith("untrained")})
for kind in retrievers:
    sft = (S1.sft_steps if S1.summary(kind).get("sft_adapter") else 0)
    n_warm = S1.sft_questions.get(kind, 0) if sft else 0  # questions with a sampled SFT target
    stage1 = _log(f"acqo-stage1-{kind}")
    TRAINED_BY[f"cold start only ({kind}-sampled)"] = (model, [], sft, n_warm)
    TRAINED_BY[f"Stage I ({kind}-trained)"] = (model, [stage1], sft, n_warm)
    TRAINED_BY[f"ACQO: Stage I+II ({kind}-trained)"] = (model, [stage1, _log(NAMES[kind])],
                                                        sft, n_warm)
    KIND.update({f"cold start only ({kind}-sampled)": "warm start",
                 f"Stage I ({kind}-trained)": "trained", f"ACQO: Stage I+II ({kind}-trained)": "trained"})

rows = []
for (name, kind, label), pq in PER_Q.items():
    raw = PER_Q[name, kind, "raw question"].set_index("query_id")["nDCG@10"]
    cur = pq.set_index("query_id")["nDCG@10"]
    bs = paired_bootstrap(cur.to_dict(), raw.to_dict(), n=bootstrap, seed=seed)
    row = {"dataset": name, "retriever": kind, "model": label,
           **{metrics.label(m): pq[m].mean() for m in MEASURES},
           "sub-queries": pq["n_sub"].mean() if "n_sub" in pq else 1.0,
           "ΔnDCG@10 vs raw": bs["diff"], "lo": bs["lo"], "hi": bs["hi"],
           "wins/losses": f"{bs['wins']}/{bs['losses']}"}
    pol, logs, sft, n_warm = TRAINED_BY[label]
    row.update(scale_columns(pol, logs, test_queries=bs["n_queries"], sft_steps=sft,
                             sft_queries=n_warm, test_valid=VALID.get((label, name))))
    rows.append(row)
RESULTS = pd.DataFrame(rows)
for _, r in RESULTS.iterrows():
    key = f"{r.dataset}.{r.retriever}.{r.model}"
    record(f"{key}.ndcg10", r["nDCG@10"])
    record(f"{key}.delta_vs_raw", [r["ΔnDCG@10 vs raw"], r.lo, r.hi])
save_table(RESULTS.round(4), "07_acqo_results", tables_dir,
           caption="ACQO on the test questions (ACQO Table 3 columns); ΔnDCG@10 vs the raw "
                   "question with a 95% paired-bootstrap interval [lo, hi] over questions; "
                   f"the training scale of each row ({', '.join(SCALE_COLUMNS)}) is read from "
                   "its runs' logs (qrlib.eval.scale)")
RESULTS.round(3)

# %% [markdown]
# Per-question nDCG@10 of every row, one column per model, as a published table: notebook
# 12 pairs its single-query RL baseline with these rows question by question (its training
# does not need 06's and 07's adapters, so it can run in another session).

# %%
PER_QUESTION = pd.concat(
    [pq[["query_id", "nDCG@10"]].assign(dataset=name, retriever=kind, model=label)
     for (name, kind, label), pq in PER_Q.items()], ignore_index=True)
PER_QUESTION = (PER_QUESTION.pivot_table(index=["dataset", "retriever", "query_id"],
                                         columns="model", values="nDCG@10")
                .reset_index().rename_axis(columns=None))
save_table(PER_QUESTION.round(6), "07_per_question_ndcg10", tables_dir,
           caption="nDCG@10 of every test question under every row of 07_acqo_results "
                   "(one column per row), read by notebook 12")
PER_QUESTION.shape

# %% [markdown]
# ### Every row against the raw question, and ACQO against every other row
#
# The workbook's one comparison schema (`qrlib.eval.compare`): each row below is a method
# minus a baseline in nDCG@10 on the same test questions, with the 95% paired bootstrap,
# the method's kind (model-free, untrained, warm start, trained) and its training scale.
# `RESULTS.md` reads this table by column.

# %%
def _ndcg(name, kind, label):
    return PER_Q[name, kind, label].set_index("query_id")["nDCG@10"].to_dict()


def _scale(label, n, name):
    pol, logs, sft, n_warm = TRAINED_BY[label]
    return scale_columns(pol, logs, test_queries=n, sft_steps=sft, sft_queries=n_warm,
                         test_valid=VALID.get((label, name)))


cmp_rows = []
for (name, kind, label), pq in PER_Q.items():
    if label != "raw question":
        cmp_rows.append(compare(_ndcg(name, kind, label), _ndcg(name, kind, "raw question"),
                                paper="acqo", dataset=name, retriever=kind, metric="nDCG@10",
                                method=label, kind=KIND[label], baseline="raw question",
                                scale=_scale(label, len(pq), name), resamples=bootstrap, seed=seed))
for trained_with in retrievers:
    acqo = f"ACQO: Stage I+II ({trained_with}-trained)"
    for (name, kind, label), pq in PER_Q.items():
        if kind != trained_with or label in (acqo, "raw question") or (name, kind, acqo) not in PER_Q:
            continue
        cmp_rows.append(compare(_ndcg(name, kind, acqo), _ndcg(name, kind, label), paper="acqo",
                                dataset=name, retriever=kind, metric="nDCG@10", method=acqo,
                                kind="trained", baseline=label, baseline_kind=KIND[label],
                                scale=_scale(acqo, len(pq), name), resamples=bootstrap, seed=seed))
COMPARISONS = comparison_table(cmp_rows)
save_table(COMPARISONS.round(4), "07_comparisons", tables_dir,
           caption="Every row minus the raw question, and ACQO (Stage I+II) minus every other "
                   "row, nDCG@10, 95% paired bootstrap over the test questions "
                   f"(qrlib.eval.compare schema) [profile: {profile}]")
COMPARISONS[["dataset", "retriever", "method", "baseline", "diff", "lo", "hi"]].round(3)

# %% [markdown]
# Question by question: ACQO (Stage I + II, searched with its training retriever) against
# the raw question, one point per test question. Points above the diagonal are questions
# the decomposition helped; on the diagonal at 1.0 sit the questions the raw question
# already answers perfectly, where a decomposition can only lose.

# %%
head_07 = COMPARISONS[COMPARISONS.method.str.startswith("ACQO") &
                      (COMPARISONS["baseline kind"] == "baseline")]
head_07 = head_07[[m.endswith(f"({k}-trained)") for m, k in zip(head_07.method, head_07.retriever)]]
key_07 = {f"{r.dataset}/{r.retriever}": r for r in head_07.itertuples()}
fig = plots.per_query_scatter(
    {k: (_ndcg(r.dataset, r.retriever, "raw question"), _ndcg(r.dataset, r.retriever, r.method))
     for k, r in key_07.items()}, metric="nDCG@10", baseline="raw question",
    intervals={k: fmt_interval(r._asdict()) for k, r in key_07.items()})
_ = plots.save_figure(fig, "07_per_query", figures_dir, profile=profile,
                      setting=f"{model}, {n_test_queries or 'all'} test questions per dataset",
                      caption="Per-question nDCG@10 of ACQO (Stage I+II, its training retriever; y) "
                              "against the raw question (x); title: n, wins / losses / ties and "
                              "the mean difference with its 95 % paired-bootstrap interval")
plt.show()

# %% [markdown]
# ## 6. Easy and hard questions (ACQO Table 1's split)
#
# A test question is *easy* when the raw question's own nDCG@10 is at least the median of
# its test set (under the same retriever), *hard* otherwise. Decomposition should help most
# where the single question fails.

# %%
rows = []
for (name, kind, label), pq in PER_Q.items():
    raw = PER_Q[name, kind, "raw question"]
    easy, hard = metrics.easy_hard_split(raw, "nDCG@10", "median")
    for part, ids in (("easy", easy), ("hard", hard)):
        sel = pq[pq.query_id.isin(ids)]
        rows.append({"dataset": name, "retriever": kind, "model": label, "subset": part,
                     "questions": len(sel), "nDCG@10": sel["nDCG@10"].mean()})
EASY_HARD = pd.DataFrame(rows).pivot_table(index=["dataset", "retriever", "model"],
                                           columns="subset", values="nDCG@10").reset_index()
save_table(EASY_HARD.round(4), "07_easy_hard", tables_dir,
           caption="nDCG@10 on easy vs hard test questions (split at the median raw-question "
                   "nDCG@10 per dataset and retriever)")
EASY_HARD.round(3)

# %% [markdown]
# ## 7. Quality against the number of sub-queries (ACQO Fig. 1-2)
#
# Mean nDCG@10 of the test questions grouped by how many sub-queries the model wrote.

# %%
rows = []
for (name, kind, label), pq in PER_Q.items():
    if "n_sub" not in pq or label == "raw question":
        continue
    for n_sub, g in pq.groupby("n_sub"):
        rows.append({"dataset": name, "retriever": kind, "model": label, "sub-queries": n_sub,
                     "questions": len(g), "nDCG@10": g["nDCG@10"].mean()})
BY_NSUB = pd.DataFrame(rows)
save_table(BY_NSUB.round(4), "07_by_n_subqueries", tables_dir,
           caption="nDCG@10 by number of sub-queries written (test questions)")
fig, axes = plt.subplots(1, len(test_datasets), figsize=(5.5 * len(test_datasets), 3.4),
                         squeeze=False)
for ax, name in zip(axes[0], test_datasets):
    sub = BY_NSUB[(BY_NSUB.dataset == name) & (BY_NSUB.retriever == eval_retrievers[0])]
    for j, (label, g) in enumerate(sub.groupby("model")):
        ax.plot(g["sub-queries"], g["nDCG@10"], marker="o", color=f"C{j}", label=label)
    ax.set(title=name, xlabel="sub-queries written", ylabel=f"nDCG@10 ({eval_retrievers[0]})")
    ax.set_xticks([1, 2, 3])
plots.legend_outside(axes[0][-1])
_ = plots.save_figure(fig, "07_ndcg_by_n_subqueries", figures_dir,
                  caption="Test nDCG@10 against the number of sub-queries (ACQO Fig. 1-2)",
                  profile=profile, setting=f"{model}, {n_test_queries or 'all'} test questions per dataset")

# %% [markdown]
# ## 8. Latency and generated tokens (ACQO Table 6a, Table 8)
#
# Per query: generation (the model), retrieval (all sub-queries, one batched call) and
# fusion; and the mean number of generated tokens.

# %%
LATENCY = pd.DataFrame(LAT).groupby(["model", "retriever"]).mean(numeric_only=True).reset_index()
save_table(LATENCY.round(4), "07_latency", tables_dir,
           caption="Per-query latency split (generation / retrieval / fusion) and generated "
                   "tokens, test questions, this machine")
LATENCY.round(3)

# %% [markdown]
# ## 9. Examples
#
# The same test questions decomposed by the untrained model and by ACQO.

# %%
name0 = test_datasets[0]
ex = []
for label in MODELS:
    for d in DECOMP[label, name0][:n_examples]:
        ex.append({"model": label, "question": TEST[name0].queries[d["qid"]],
                   "sub-queries": " %% ".join(d["subqueries"]), "format ok": d["format_ok"]})
pd.set_option("display.max_colwidth", 140)
pd.DataFrame(ex)

# %% [markdown]
# ## 10. Next to the paper (ACQO Table 3, HotpotQA)
#
# The published numbers come from `qrlib/methods/acqo/published.yaml`. The settings differ: the
# paper searches the 5.2M-paragraph BEIR HotpotQA corpus with Qwen2.5-3B trained for
# 3 + 6 epochs on about half of its 90k training questions (App. A); here a 9k-paragraph
# corpus, a 0.5B (or smaller) model, the training scale of each row in its columns, and
# BM25 / MiniLM instead of BM25 / ANCE. Our corpus is much smaller, so absolute values are
# higher; compare the *direction* of each row against the raw question, not the level.

# %%
from qrlib.eval import published

PAPER = published.table("acqo", "Table 3", wide=True, index="key", fraction=True)
rows = []
for kind, pcol in (("bm25", "BM25"), ("dense", "ANCE")):
    if ("hotpotqa-large", kind, "raw question") not in PER_Q:
        continue
    ours = RESULTS[(RESULTS.dataset == "hotpotqa-large") & (RESULTS.retriever == kind)]
    for key, label in (("raw", "raw question"), ("acqo", f"ACQO: Stage I+II ({kind}-trained)")):
        mine = ours[ours.model == label]
        if mine.empty or key not in PAPER.index:
            continue
        for m in ("R@4", "R@10", "R@100", "MAP@10", "MRR@10", "nDCG@10"):
            pname = f"{pcol} {m.replace('nDCG', 'NDCG')}"
            rows.append({"retriever (ours / paper)": f"{kind} / {pcol}", "row": key,
                         "measure": m, "ours": float(mine[m].iloc[0]),
                         "paper": float(PAPER.loc[key, pname])})
VS_PAPER = pd.DataFrame(rows)
if not VS_PAPER.empty:
    save_table(VS_PAPER.round(4), "07_vs_paper_table3", tables_dir,
               caption="HotpotQA test, ours vs ACQO Table 3 (paper: 5.2M-paragraph corpus, "
                       "Qwen2.5-3B, ANCE; ours: 9k-paragraph pooled corpus, smaller model, "
                       "MiniLM); fractions")
    display(VS_PAPER)
else:
    from IPython.display import Markdown

    display(Markdown(
        f"*No row to put next to ACQO Table 3 in this run*: the paper's table is HotpotQA, and "
        f"the `{profile}` profile evaluates {', '.join(test_datasets)} with "
        f"{', '.join(retrievers)}-trained models (`cpu-long` and `gpu` evaluate "
        "hotpotqa-large). The paper's values stay in `qrlib/methods/acqo/published.yaml`."))

# %% [markdown]
# ## What we found
#
# Built from `07_comparisons`, `07_acqo_results`, `07_tau_filter` and `07_health` of this
# run by `qrlib.workbook.findings`:

# %%
from IPython.display import Markdown

from qrlib.workbook.findings import what_we_found

acqo_rows = RESULTS[RESULTS.model.str.startswith("ACQO")]
untrained_rows = RESULTS[RESULTS.model.str.startswith("untrained")]
extra = [f"ACQO wrote {acqo_rows['sub-queries'].min():.2f}-{acqo_rows['sub-queries'].max():.2f} "
         f"sub-queries per test question on average (the untrained decomposer "
         f"{untrained_rows['sub-queries'].min():.2f}-{untrained_rows['sub-queries'].max():.2f}; "
         "`07_by_n_subqueries` splits the questions by count)."]
extra += [f"The τ filter kept {r['kept share']:.0%} of the {r.retriever} training questions "
          f"for Stage II ([{r.lo:.0%}, {r.hi:.0%}])." for _, r in KEPT_TABLE.iterrows()]
display(Markdown(what_we_found(COMPARISONS[COMPARISONS.method.str.startswith("ACQO")],
                               notebook="07_acqo_stage2", tables_dir=tables_dir,
                               health=HEALTH, extra=extra, subject="ACQO")))
